"""The HTTP server: the engine port's app (create_app: the routers of routes/, the error handlers,
the middleware, the docs switch), the app every port starts from (engine_app), and uvicorn on its own
thread (ServerThread). No torch here.

FastAPI + uvicorn run on their own thread; generation stays on the main thread (routes/generation.py
hands frames to the event loop).
"""
import socket
import threading
import uuid

from fastapi import Depends, FastAPI
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from extensions_built_in.inference_engine.engine import Engine
from extensions_built_in.inference_engine.http_guard import EngineRoute, OriginGuard
from extensions_built_in.inference_engine.routes import (catalog, downloads, files, generation, health, outputs, preprocess,
                                                         queue, results)
from extensions_built_in.inference_engine.routes.common import require_token
from toolkit.errors import ConfigError

NATIVE_ROUTERS = (health.router, catalog.router, generation.router, queue.router, files.router, results.router,
                  downloads.router, preprocess.router)


def create_app(engine: Engine, token: str, extra_routes=None, docs: bool = False) -> FastAPI:
    """The engine port's app: the routers of routes/ (each reads `app.state.engine`; the token check,
    routes/common.py require_token, reads `app.state.token`), then `extra_routes`, each a
    `route(app)` adding more (compat/__init__.py compat_routes).

    `docs`: serve the OpenAPI schema at /openapi.json (behind the token like every route but
    /health). The interactive /docs and /redoc pages are never served: they load their scripts
    from a CDN, and docs/engine_api.md is the reference."""
    app = engine_app(title="AI Toolkit inference engine")
    app.state.engine = engine
    app.state.token = token

    if docs:
        @app.get("/openapi.json", include_in_schema=False, dependencies=[Depends(require_token)])
        def openapi():
            return app.openapi()

    @app.middleware("http")
    async def request_id_header(request, call_next):
        response = await call_next(request)
        response.headers.setdefault("X-Request-Id", uuid.uuid4().hex[:16])
        return response

    app.add_middleware(OriginGuard)        # outermost: a refused request reaches no route

    for router in NATIVE_ROUTERS:
        app.include_router(router)
    app.include_router(outputs.router(require_token))
    for route in extra_routes or ():
        route(app)
    return app


def engine_app(title: str) -> FastAPI:
    """A FastAPI app as every engine port serves one: the token checked before a body is read, JSON
    bodies bounded (a route that takes more says so), errors as `{detail, field}`, and no docs pages
    (they load scripts from a CDN; docs/engine_api.md is the reference)."""
    app = FastAPI(title=title, version="1", openapi_url=None, docs_url=None, redoc_url=None)
    app.router.route_class = EngineRoute
    install_error_handlers(app)
    return app


def install_error_handlers(app: FastAPI):
    """Every 4xx as `{detail, field}`: a ConfigError names its key, a body-shape error its field."""
    @app.exception_handler(ConfigError)
    async def config_error(_request, exc: ConfigError):
        return JSONResponse({"detail": exc.one_line(), "field": exc.key}, status_code=422)

    @app.exception_handler(RequestValidationError)
    async def body_error(_request, exc: RequestValidationError):
        """Body-shape errors read like ConfigError's: one line naming the field, `body` when it is
        the body as a whole (malformed JSON, empty, not an object)."""
        errs = exc.errors()
        first = errs[0] if errs else {"loc": ("body",), "msg": "invalid request", "type": ""}
        loc = [p for p in first.get("loc", ()) if p not in ("body", "query", "path")]
        if first.get("type") == "json_invalid":
            at = f" at character {loc[0]}" if loc and isinstance(loc[0], int) else ""
            cause = (first.get("ctx") or {}).get("error") or "JSON decode error"
            field, message = "body", f"malformed JSON{at}: {cause}"
        elif not loc or not all(isinstance(p, str) for p in loc):
            field = "body"
            message = "send a JSON object" if first.get("type") == "missing" else first.get("msg", "invalid")
        else:
            field, message = ".".join(loc), first.get("msg", "invalid")
        # the inputs are not echoed back: they may be large, binary, or secret
        details = [{k: v for k, v in e.items() if k in ("type", "loc", "msg")} for e in errs]
        return JSONResponse({"detail": f"{field}: {message}", "field": field, "errors": jsonable_encoder(details)},
                            status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_request, exc: StarletteHTTPException):
        field = getattr(exc, "field", None)
        detail = str(exc.detail)
        if exc.status_code == 400 and detail == "There was an error parsing the body":
            return JSONResponse({"detail": "body: is not valid JSON text (UTF-8)", "field": "body"}, status_code=422)
        if field is None:
            field = {401: "token", 404: "path", 405: "method"}.get(exc.status_code, "body")
        return JSONResponse({"detail": detail, "field": field}, status_code=exc.status_code,
                            headers=getattr(exc, "headers", None))


def bind_socket(port: int) -> socket.socket:
    """127.0.0.1 only; port 0 picks a free one."""
    # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY on accepted sockets only for it, and without
    # it each response waits ~40 ms for the client's delayed ACK between headers and body
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


class ServerThread:
    """uvicorn serving `app` on a bound socket, on a daemon thread."""

    def __init__(self, app, sock: socket.socket):
        import uvicorn
        self.sock = sock
        self.port = sock.getsockname()[1]
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False,
                                                    timeout_graceful_shutdown=2))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [sock]}, daemon=True,
                                       name="engine-http")

    def start(self, timeout: float = 30):
        self.thread.start()
        deadline = threading.Event()
        for _ in range(int(timeout / 0.02)):
            if self.server.started:
                return self
            if not self.thread.is_alive():
                break
            deadline.wait(0.02)
        raise RuntimeError("the HTTP server did not start")

    def stop(self, timeout: float = 5):
        self.server.should_exit = True
        self.thread.join(timeout)
        try:
            self.sock.close()
        except OSError:
            pass

"""Compatibility routes for clients that already exist, one module per API family:
`a1111` (A1111 / stable-diffusion.cpp `/sdapi/v1/*`: SillyTavern, SD.Next-style clients, webuiapi),
`controlnet` (the sd-webui-controlnet extension's /controlnet/module_list and /controlnet/detect),
`openai` (`/v1/images/generations`, `/v1/images/edits`, `/v1/models`), `openai_video` (`/v1/videos`:
asynchronous video jobs), `sdcpp` (stable-diffusion.cpp's native asynchronous jobs, `/sdcpp/v1/*`) and
`comfy` (ComfyUI's /prompt, /ws, /history, /view, ...: under /comfy on the engine port, at the root of
engine.comfy_port); `common` holds their auth,
error answer and the shared `Session`, `inputs` the checks and preparation of the images img2img and
edits take, `preview` the latent PNG of /sdapi/v1/progress.

They are thin: every generation goes through `Engine.submit`, the same FIFO as `/generate`, and the
waits run on worker threads (asyncio.to_thread), so the event loop never blocks. A client names
models by name only; `Engine.model_for_name` turns a name into a model, and refuses (4xx naming
the client's model field) one that cannot load here before anything is submitted or unloaded.
`Engine.model_names` lists only what can load here.

Auth: the engine token as `Authorization: Bearer <token>`, as `X-Engine-Token`, or as the
password of HTTP Basic auth with any user name (A1111 clients' `--api-auth user:pass`).

    route = compat_routes(engine=engine)
    app = create_app(engine, token, extra_routes=[route])
    extra = serve_compat_on_port(engine, token, route, port)      # optional fixed port
    comfy = serve_comfy_on_port(engine, token, route, port)       # ComfyUI's API at a port's root
"""
from fastapi import FastAPI, HTTPException, Request as HttpRequest

from extensions_built_in.inference_engine.compat import a1111, comfy, controlnet, openai, openai_video, sdcpp
from extensions_built_in.inference_engine.compat.common import REALM, CompatError, Session, authorized, compat_error
from extensions_built_in.inference_engine.http_guard import auth_first
from toolkit.errors import ConfigError


def compat_routes(*, engine=None):
    """`route(app)` adding the compat routes (create_app's `extra_routes`), behind the token of
    `app.state.token`.

    The engine is `engine`, else `app.state.engine`. One route serves any number of apps (the
    engine port and the compat port) with one shared Session (the model set through
    /sdapi/v1/options, running batches)."""
    def route(app: FastAPI):
        eng = engine or getattr(app.state, "engine", None)
        if eng is None:
            raise RuntimeError("compat routes need the engine: compat_routes(engine=engine) "
                               "or app.state.engine = engine")
        shared(route, eng)
        app.add_exception_handler(CompatError, compat_error)
        a1111.add_routes(app, route.session, authorized)
        controlnet.add_routes(app, route.session, authorized)
        openai.add_routes(app, route.session, authorized)
        openai_video.add_routes(app, route.session, authorized)
        sdcpp.add_routes(app, route.session, authorized)
        comfy.add_routes(app, route.comfy, prefix="/comfy")

    route.session = route.comfy = None
    return route


def shared(route, engine):
    """The state every app the route serves shares: the Session and ComfyUI's prompts and sockets."""
    if route.session is None:
        route.session = Session(engine)
    if route.comfy is None:
        route.comfy = comfy.ComfyAPI(route.session)


# -- a fixed extra port ------------------------------------------------------------------------------

@auth_first
def compat_token(request: HttpRequest):
    """The compat port's own check for the native route it serves (/outputs): the token as
    X-Engine-Token, Bearer or the Basic password; a 401 asks for Basic auth (WWW-Authenticate)."""
    if not authorized(request):
        raise HTTPException(401, "missing or bad engine token", headers={"WWW-Authenticate": REALM})


def compat_app(engine, token: str, route) -> FastAPI:
    """An app with only the compat routes (and /outputs, for OpenAI `response_format: url`: the
    engine port's route, routes/outputs.py), checked and answering as the engine port's
    (server.engine_app, http_guard.OriginGuard)."""
    from extensions_built_in.inference_engine.http_guard import OriginGuard
    from extensions_built_in.inference_engine.routes import outputs
    from extensions_built_in.inference_engine.server import engine_app

    app = engine_app(title="AI Toolkit inference engine (compatibility API)")
    app.state.engine = engine
    app.state.token = token
    route(app)
    app.include_router(outputs.router(compat_token))
    app.add_middleware(OriginGuard)
    return app


def serve_compat_on_port(engine, token: str, route, port: int):
    """Serve the compat routes alone on 127.0.0.1:`port` (engine.compat_port), for clients that
    cannot read engine.json; returns the started ServerThread (call .stop() on shutdown)."""
    return _serve(compat_app(engine, token, route), port, "engine.compat_port", "engine-compat-http")


def serve_comfy_on_port(engine, token: str, route, port: int):
    """Serve ComfyUI's API alone at the root of 127.0.0.1:`port` (engine.comfy_port), sharing its prompts
    and sockets with the engine port's /comfy; returns the started ServerThread."""
    shared(route, engine)
    return _serve(comfy.comfy_app(engine, token, route.comfy), port, "engine.comfy_port", "engine-comfy-http")


def _serve(app, port: int, key: str, thread_name: str):
    """`app` on 127.0.0.1:`port`, started; a port that is no port or cannot be bound is a ConfigError on `key`."""
    from extensions_built_in.inference_engine.server import ServerThread, bind_socket

    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port < 65536:
        raise ConfigError(key, f"must be a port number, got {port!r}")
    try:
        sock = bind_socket(port)
    except OSError as e:
        raise ConfigError(key, f"cannot listen on 127.0.0.1:{port}: {e.strerror or e}") from None
    server = ServerThread(app, sock)
    server.thread.name = thread_name
    return server.start()

"""HTTP only: routes, auth, request/response models and streaming. No torch here.

FastAPI + uvicorn run on their own thread; generation stays on the main thread. Frames reach a
streaming response through an asyncio queue fed with call_soon_threadsafe, so the event loop
never waits on the generation thread.
"""
import asyncio
import hmac
import os
import re
import socket
import threading
import uuid
from typing import Any

from fastapi import Depends, FastAPI, HTTPException, Request as HttpRequest
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from extensions_built_in.inference_engine.engine import Engine, EngineBusy, NotQueued, Subscriber
from extensions_built_in.inference_engine.http_guard import (INLINE_IMAGES_BODY_BYTES, EngineRoute,
                                                             OriginGuard, auth_first)
from toolkit.config_modules import GenerateImageConfig
from toolkit.errors import ConfigError
from toolkit.media import AUDIO_EXTS, IMAGE_EXTS, VIDEO_EXTS
from toolkit.models.registry import ARCHS

MAX_ASSET_BYTES = 64 << 20
ASSET_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")
PENDING_LATENTS = 4        # a slow reader skips latents beyond this many undelivered ones
OUTPUT_EXTS = {"image": IMAGE_EXTS, "video": VIDEO_EXTS, "audio": AUDIO_EXTS}


class GenerateBody(BaseModel):
    """`model`, `sample` and `stream` are validated by the engine (ModelConfig, GenerateImageConfig,
    StreamOptions), which names the bad field: this layer only checks the body's shape."""
    model_config = ConfigDict(extra="forbid")
    model: dict | str = Field(description="ModelConfig {arch, name_or_path, quantize, ...}, or a profile: "
                                      "{profile: NAME, ...overrides} or \"NAME\"")
    sample: dict = Field(default_factory=dict, description="GenerateImageConfig: {prompt, width, height, ...}")
    stream: dict | None = Field(default=None, description="{latents: raw|none, every_n_steps, max_frames, "
                                "preview: x0|noisy, preview_image: jpeg|none, detach}: checked by the engine (toolkit/request.py StreamOptions)")
    request_id: str | None = None
    wait: bool = False


class ResolveBody(BaseModel):
    """POST /resolve: a /generate body's model and sample, checked by the engine as /generate's are."""
    model_config = ConfigDict(extra="forbid")
    model: dict | str
    sample: dict = Field(default_factory=dict)


class MoveBody(BaseModel):
    """`position` is checked by the engine (Engine.move), which names it."""
    model_config = ConfigDict(extra="forbid")
    position: Any = Field(description="the place in the queue: 0 = the next to run; past the end = last")


class ErrorBody(BaseModel):
    """Every 4xx answer: one line, and the field it is about (`body` for the body as a whole)."""
    detail: str
    field: str


class ApiError(HTTPException):
    def __init__(self, status: int, field: str, detail: str):
        super().__init__(status, detail)
        self.field = field


ERRORS = {401: {"model": ErrorBody, "description": "missing or bad engine token (field: token)"},
          404: {"model": ErrorBody, "description": "no such request, profile or file"},
          409: {"model": ErrorBody, "description": "not now (the engine is busy)"},
          413: {"model": ErrorBody, "description": "too large"},
          422: {"model": ErrorBody, "description": "a bad value, naming its field"},
          503: {"model": ErrorBody, "description": "the engine is stopping"}}


def errors(*codes) -> dict:
    return {c: ERRORS[c] for c in (401, 422, *codes)}


def token_dependency(token: str):
    """The engine token, as `X-Engine-Token` or `Authorization: Bearer`, compared in constant time
    (before the body is read: http_guard.EngineRoute)."""
    @auth_first
    def require_token(request: HttpRequest):
        given = request.headers.get("x-engine-token")
        auth = request.headers.get("authorization", "")
        if given is None and auth.lower().startswith("bearer "):
            given = auth[7:].strip()
        if not given or not hmac.compare_digest(given.encode(), token.encode()):
            raise ApiError(401, "token", "missing or bad engine token (X-Engine-Token or Authorization: Bearer)")
    return require_token


def create_app(engine: Engine, token: str, extra_routes=None, docs: bool = False) -> FastAPI:
    """`docs`: serve the OpenAPI schema at /openapi.json (behind the token like every route but
    /health). The interactive /docs and /redoc pages are never served: they load their scripts
    from a CDN, and docs/engine_api.md is the reference."""
    app = engine_app(title="AI Toolkit inference engine")
    app.state.engine = engine

    require_token = token_dependency(token)
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

    @app.get("/health")
    def health():
        return engine.health()

    @app.get("/metrics", dependencies=[] if engine.metrics_open else [Depends(require_token)],
             responses=errors(), response_class=Response)
    def metrics():
        """Prometheus text format (metrics.py): behind the token unless engine.metrics_open."""
        from extensions_built_in.inference_engine.metrics import CONTENT_TYPE
        return Response(engine.metrics.render(), media_type=CONTENT_TYPE)

    @app.get("/models", dependencies=[Depends(require_token)], responses=errors())
    def models():
        """The registry and the profiles, each with the sample a request gets when it sets none
        (`sample`, `variant_samples`): resolved by the engine, so a client never re-merges precedence."""
        archs = []
        for spec in ARCHS.values():
            row = spec.public()
            row["output_exts"] = list(OUTPUT_EXTS[spec.modality])
            # the most images one request may ask for: engine.limits.max_batch where the arch batches
            row["max_batch"] = engine.limits.max_batch if row.get("batch") else 1
            # each sample field's type, bounds and choices here, engine.limits included: a form copies no rule
            row["fields"] = GenerateImageConfig.fields_for(spec, engine.limits)
            row["sample"] = engine.default_sample(arch=spec.name)
            row["variant_samples"] = {v: engine.default_sample(arch=spec.name, variant=v) for v in spec.variants}
            archs.append(row)
        profiles = []
        for p in engine.profiles.profiles.values():
            row = {**p.public(), "sample": None, "sample_error": None}
            try:
                row["sample"] = engine.default_sample(profile=p.name)
            except ConfigError as e:      # e.g. a [generation] width this arch refuses: say so, list the rest
                row["sample_error"] = e.one_line()
            profiles.append(row)
        return {"archs": archs, "profiles": profiles, "default_model": engine.profiles.default_model,
                "limits": engine.limits.to_dict()}

    @app.post("/resolve", dependencies=[Depends(require_token)], responses=errors())
    def resolve(body: ResolveBody):
        """What POST /generate would run for this {model, sample}, without running it: the resolved
        model and sample (defaults filled, sizes rounded, task and strength resolved; the seed as
        given), or the 422 naming the first bad field. Image inputs are only present here (any
        non-empty string): neither read nor stored. The same resolver as /generate (toolkit/request.py)."""
        work = engine.resolve(body.model, body.sample, dry_run=True)
        return {"model": work.model.to_dict(), "sample": work.sample.to_dict(), "task": work.sample.task,
                "warnings": list(work.sample.warnings)}

    @app.get("/inspect/{profile}", dependencies=[Depends(require_token)], responses=errors(404))
    def inspect_profile(profile: str):
        """A profile's component files, from their safetensors headers only."""
        from toolkit.file_report import inspect_profile as inspect
        if profile not in engine.profiles.profiles:
            raise ApiError(404, "profile", f"unknown profile {profile!r}")
        return inspect(engine.profiles.get(profile))

    @app.get("/loras", dependencies=[Depends(require_token)], responses=errors())
    def loras(arch: str | None = None):
        """The LoRA files of engine.lora_folder, from their safetensors headers: format, guessed arch,
        rank, alpha, trigger words. `arch`: that arch's files and those no arch claims."""
        if arch is not None and arch not in ARCHS:
            raise ApiError(422, "arch", f"unknown arch {arch!r}")
        return engine.list_loras(arch)

    @app.get("/library", dependencies=[Depends(require_token)], responses=errors())
    def library():
        """The models on this machine (hub cache, engine.model_folders, profiles), from model_index.json
        and safetensors headers: arch, kind, format, bytes, completeness and the `model` a request takes;
        and per arch whether its default repo is here (else the `hf download` command)."""
        return engine.library()

    @app.post("/generate", dependencies=[Depends(require_token)], responses=errors(413, 503),
              max_body_size=INLINE_IMAGES_BODY_BYTES)       # its image inputs may be data: URLs
    async def generate(body: GenerateBody, request: HttpRequest):
        try:      # off the event loop: validation may read files (LoRA headers, a data URL's image)
            req = await asyncio.to_thread(engine.submit, body.model, body.sample, body.stream, body.request_id)
        except EngineBusy as e:
            raise ApiError(503, "body", str(e))
        headers = {"X-Request-Id": req.request_id}
        if body.wait:
            await asyncio.to_thread(req.done_event.wait)
            return JSONResponse({"request_id": req.request_id, "status": req.status, "results": req.results,
                                 "error": req.error}, headers=headers)
        return StreamingResponse(_follow(engine, req, cancel_on_disconnect=not req.stream.detach),
                                 media_type="application/octet-stream", headers=headers)

    @app.get("/stream/{request_id}", dependencies=[Depends(require_token)], responses=errors(404))
    async def stream(request_id: str):
        req = engine.get(request_id)
        if req is None:
            raise ApiError(404, "request_id", f"unknown request {request_id!r}")
        return StreamingResponse(_follow(engine, req, cancel_on_disconnect=False),
                                 media_type="application/octet-stream", headers={"X-Request-Id": request_id})

    @app.post("/cancel/{request_id}", dependencies=[Depends(require_token)], responses=errors(404))
    def cancel(request_id: str):
        req = engine.cancel(request_id, by="POST /cancel")
        if req is None:
            raise ApiError(404, "request_id", f"unknown request {request_id!r}")
        return JSONResponse({"request_id": request_id, "status": req.status}, headers={"X-Request-Id": request_id})

    @app.get("/queue", dependencies=[Depends(require_token)], responses=errors())
    def queue():
        return engine.queue_snapshot()

    @app.post("/queue/{request_id}/move", dependencies=[Depends(require_token)], responses=errors(404, 409))
    def move(request_id: str, body: MoveBody):
        """Put a queued request at `position` (0: next); it keeps that place under either policy."""
        try:
            moved = engine.move(request_id, body.position)
        except NotQueued as e:
            raise ApiError(409, "request_id", str(e))
        if moved is None:
            raise ApiError(404, "request_id", f"unknown request {request_id!r}")
        req, position = moved
        return JSONResponse({"request_id": request_id, "status": req.status, "position": position},
                            headers={"X-Request-Id": request_id})

    @app.post("/unload", dependencies=[Depends(require_token)], responses=errors(409))
    def unload():
        try:
            engine.request_unload()
        except EngineBusy as e:
            raise ApiError(409, "body", str(e))
        return {"unloaded": True}

    @app.post("/assets", dependencies=[Depends(require_token)], responses=errors(404, 413),
              max_body_size=MAX_ASSET_BYTES)
    async def assets(request: HttpRequest, name: str):
        if not engine.assets_folder:
            raise ApiError(404, "path", "this engine has no assets folder")
        if not ASSET_NAME.match(name) or ".." in name:
            raise ApiError(422, "name", "name: use letters, digits, '_', '-', '.' (no folders)")
        data = bytearray()
        with engine.asset_upload() as upload:      # the folder's total, engine.limits.max_asset_bytes
            async for chunk in request.stream():
                data += chunk
                if len(data) > MAX_ASSET_BYTES:
                    raise ApiError(413, "body", f"asset is over {MAX_ASSET_BYTES} bytes")
                if not upload.take(len(chunk)):
                    raise ApiError(413, "body", upload.refusal)
            if not data:
                raise ApiError(422, "body", "empty body: send the file's bytes")
            stored = f"{uuid.uuid4().hex[:8]}_{name}"
            from toolkit.media import atomic_path
            os.makedirs(engine.assets_folder, exist_ok=True)
            with atomic_path(os.path.join(engine.assets_folder, stored)) as tmp:
                with open(tmp, "wb") as f:
                    f.write(data)
            upload.stored()
        return {"name": name, "path": stored}

    @app.post("/settings", dependencies=[Depends(require_token)], responses=errors(413, 503),
              max_body_size=MAX_ASSET_BYTES,
              openapi_extra={"requestBody": {"required": True, "content": {
                  "application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}}})
    async def settings(request: HttpRequest):
        """The request that made a file: its raw bytes (png, jpg, webp, mp4, wav, flac, mp3) in,
        `{source, format, model, sample, parameters, warnings}` out; `{model, sample}` is ready to
        POST to /generate. A foreign A1111 file gives the best mapping of its text onto a request.
        (Named /settings, not /resolve: /resolve reads as turning a JSON request into the resolved
        one, a route a form would want; one route taking a file or a request would be ambiguous.)"""
        data = bytearray()
        async for chunk in request.stream():
            data += chunk
            if len(data) > MAX_ASSET_BYTES:
                raise ApiError(413, "body", f"body: a file over {MAX_ASSET_BYTES} bytes")
        if not data:
            raise ApiError(422, "body", "body: empty: send the file's bytes")
        from toolkit.file_settings import READ_SECONDS
        try:      # off the event loop and within a bound; a thread past it finishes on its own
            return await asyncio.wait_for(asyncio.to_thread(file_settings, engine, bytes(data)), READ_SECONDS)
        except TimeoutError:
            raise ApiError(503, "body", f"body: the file was not read within {READ_SECONDS:g} s (the engine "
                                        "is loaded): try again")

    @app.get("/outputs/{relpath:path}", dependencies=[Depends(require_token)], responses=errors(404))
    def outputs(relpath: str):
        return output_file(engine, relpath)

    for route in extra_routes or ():
        route(app, require_token)
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


def output_file(engine: Engine, relpath: str) -> FileResponse:
    """GET /outputs/{relpath} on every port: a file under the output folder, links resolved; anything
    else, a name with a NUL byte included, is one 404."""
    root = os.path.realpath(engine.output_folder)
    try:
        full = os.path.realpath(os.path.join(root, relpath))
    except ValueError:                  # an embedded NUL: no file has that name
        full = ""
    if not full.startswith(root + os.sep) or not os.path.isfile(full):
        raise ApiError(404, "relpath", "no such output")
    return FileResponse(full)


def file_settings(engine: Engine, data: bytes) -> dict:
    """POST /settings: read a file's settings (toolkit/file_settings.py) and check them as a request
    here; what would not be accepted (a profile not defined here, a path the file kept only the name
    of) is a warning, so the answer still shows what made the file. A number no request may hold
    (NaN, Infinity) is a ConfigError naming it (a 422), as it would be in a request."""
    from toolkit.file_settings import NoSettings, settings_from_metadata
    from toolkit.media import MetadataError, read_metadata

    try:
        out = settings_from_metadata(read_metadata(data), profiles=engine.profiles.profiles, archs=ARCHS)
    except (MetadataError, NoSettings) as e:
        raise ApiError(422, "body", f"body: {e}")
    if out["model"] is not None:
        try:
            engine.resolve(out["model"], out["sample"], dry_run=True)
        except ConfigError as e:
            out["warnings"].append(f"not accepted here as it is: {e.one_line()}")
        except (TypeError, ValueError, ArithmeticError) as e:         # a file's JSON can hold any shape
            out["warnings"].append(f"not accepted here as it is: {type(e).__name__}: {e}")
    return out


async def _follow(engine: Engine, req, cancel_on_disconnect: bool):
    """A request's frames: the replay, then live frames until `end`. A client that goes away
    cancels the request unless it asked to detach (or is a re-attached reader)."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue = asyncio.Queue()
    pending = {"latents": 0}
    lock = threading.Lock()

    def deliver(frame, latent):          # called on the generation thread
        if latent:
            with lock:
                if pending["latents"] >= PENDING_LATENTS:
                    return
                pending["latents"] += 1
        loop.call_soon_threadsafe(queue.put_nowait, (frame, latent))

    sub = Subscriber(deliver)
    replay = req.attach(sub)
    ended = False
    try:
        for frame in replay:
            yield frame
            ended = ended or _is_end(frame)
        if ended:
            return
        while True:
            frame, latent = await queue.get()
            if latent:
                with lock:
                    pending["latents"] -= 1
            yield frame
            if not latent and _is_end(frame):
                ended = True
                return
    finally:
        req.detach(sub)
        if not ended and cancel_on_disconnect and not req.finished:
            engine.cancel(req.request_id, by="client disconnect")


def _is_end(frame: bytes) -> bool:
    return frame[4:17] == b'{"type":"end"'   # encode_frame writes `type` first


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

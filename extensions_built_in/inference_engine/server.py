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

from fastapi import Depends, FastAPI, HTTPException, Request as HttpRequest
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from extensions_built_in.inference_engine.engine import Engine, EngineBusy, Subscriber
from toolkit.errors import ConfigError
from toolkit.media import AUDIO_EXTS, IMAGE_EXTS, VIDEO_EXTS
from toolkit.models.registry import ARCHS

MAX_ASSET_BYTES = 64 << 20
ASSET_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")
PENDING_LATENTS = 4        # a slow reader skips latents beyond this many undelivered ones
OUTPUT_EXTS = {"image": IMAGE_EXTS, "video": VIDEO_EXTS, "audio": AUDIO_EXTS}


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    latents: str = "raw"
    every_n_steps: int = 1
    max_frames: int = 4
    preview: str = "x0"
    detach: bool = False


class GenerateBody(BaseModel):
    """`model` and `sample` are validated by ModelConfig / GenerateImageConfig, which name the bad field."""
    model_config = ConfigDict(extra="forbid")
    model: dict | str = Field(description="ModelConfig {arch, name_or_path, quantize, ...}, or a profile: "
                                      "{profile: NAME, ...overrides} or \"NAME\"")
    sample: dict = Field(default_factory=dict, description="GenerateImageConfig: {prompt, width, height, ...}")
    stream: StreamOptions | None = None
    request_id: str | None = None
    wait: bool = False


def token_dependency(token: str):
    """The engine token, as `X-Engine-Token` or `Authorization: Bearer`, compared in constant time."""
    def require_token(request: HttpRequest):
        given = request.headers.get("x-engine-token")
        auth = request.headers.get("authorization", "")
        if given is None and auth.lower().startswith("bearer "):
            given = auth[7:].strip()
        if not given or not hmac.compare_digest(given.encode(), token.encode()):
            raise HTTPException(401, "missing or bad engine token")
    return require_token


def create_app(engine: Engine, token: str, extra_routes=None) -> FastAPI:
    app = FastAPI(title="AI Toolkit inference engine", version="1")
    app.state.engine = engine

    require_token = token_dependency(token)

    @app.middleware("http")
    async def request_id_header(request, call_next):
        response = await call_next(request)
        response.headers.setdefault("X-Request-Id", uuid.uuid4().hex[:16])
        return response

    @app.exception_handler(ConfigError)
    async def config_error(_request, exc: ConfigError):
        return JSONResponse({"detail": exc.one_line(), "field": exc.key}, status_code=422)

    @app.exception_handler(RequestValidationError)
    async def body_error(_request, exc: RequestValidationError):
        """Body-shape errors read like ConfigError's: one line naming the field (details kept)."""
        errors = exc.errors()
        first = errors[0] if errors else {"loc": (), "msg": "invalid request"}
        field = ".".join(str(p) for p in first.get("loc", ()) if p not in ("body", "query", "path"))
        return JSONResponse({"detail": f"{field}: {first.get('msg', 'invalid')}" if field else first.get("msg"),
                             "field": field, "errors": jsonable_encoder(errors)}, status_code=422)

    @app.get("/health")
    def health():
        return engine.health()

    @app.get("/models", dependencies=[Depends(require_token)])
    def models():
        archs = []
        for spec in ARCHS.values():
            row = spec.public()
            row["output_exts"] = list(OUTPUT_EXTS[spec.modality])
            archs.append(row)
        return {"archs": archs, "profiles": [p.public() for p in engine.profiles.profiles.values()],
                "default_model": engine.profiles.default_model}

    @app.get("/inspect/{profile}", dependencies=[Depends(require_token)])
    def inspect_profile(profile: str):
        """A profile's component files, from their safetensors headers only."""
        from toolkit.inspect import inspect_profile as inspect
        if profile not in engine.profiles.profiles:
            raise HTTPException(404, f"unknown profile {profile!r}")
        return inspect(engine.profiles.get(profile))

    @app.post("/generate", dependencies=[Depends(require_token)])
    async def generate(body: GenerateBody, request: HttpRequest):
        stream = body.stream.model_dump() if body.stream else None
        try:
            req = engine.submit(body.model, body.sample, stream, body.request_id)
        except EngineBusy as e:
            raise HTTPException(503, str(e))
        headers = {"X-Request-Id": req.request_id}
        if body.wait:
            await asyncio.to_thread(req.done_event.wait)
            return JSONResponse({"request_id": req.request_id, "status": req.status, "results": req.results,
                                 "error": req.error}, headers=headers)
        return StreamingResponse(_follow(engine, req, cancel_on_disconnect=not req.stream["detach"]),
                                 media_type="application/octet-stream", headers=headers)

    @app.get("/stream/{request_id}", dependencies=[Depends(require_token)])
    async def stream(request_id: str):
        req = engine.get(request_id)
        if req is None:
            raise HTTPException(404, f"unknown request {request_id!r}")
        return StreamingResponse(_follow(engine, req, cancel_on_disconnect=False),
                                 media_type="application/octet-stream", headers={"X-Request-Id": request_id})

    @app.post("/cancel/{request_id}", dependencies=[Depends(require_token)])
    def cancel(request_id: str):
        req = engine.cancel(request_id)
        if req is None:
            raise HTTPException(404, f"unknown request {request_id!r}")
        return JSONResponse({"request_id": request_id, "status": req.status}, headers={"X-Request-Id": request_id})

    @app.get("/queue", dependencies=[Depends(require_token)])
    def queue():
        return engine.queue_snapshot()

    @app.post("/unload", dependencies=[Depends(require_token)])
    def unload():
        try:
            engine.request_unload()
        except EngineBusy as e:
            raise HTTPException(409, str(e))
        return {"unloaded": True}

    @app.post("/assets", dependencies=[Depends(require_token)])
    async def assets(request: HttpRequest, name: str):
        if not engine.assets_folder:
            raise HTTPException(404, "this engine has no assets folder")
        if not ASSET_NAME.match(name) or ".." in name:
            raise HTTPException(400, "name: use letters, digits, '_', '-', '.' (no folders)")
        data = bytearray()
        with engine.asset_upload() as upload:      # the folder's total, engine.limits.max_asset_bytes
            async for chunk in request.stream():
                data += chunk
                if len(data) > MAX_ASSET_BYTES:
                    raise HTTPException(413, f"asset is over {MAX_ASSET_BYTES} bytes")
                if not upload.take(len(chunk)):
                    raise HTTPException(413, upload.refusal)
            if not data:
                raise HTTPException(400, "empty body: send the file's bytes")
            stored = f"{uuid.uuid4().hex[:8]}_{name}"
            from toolkit.media import atomic_path
            os.makedirs(engine.assets_folder, exist_ok=True)
            with atomic_path(os.path.join(engine.assets_folder, stored)) as tmp:
                with open(tmp, "wb") as f:
                    f.write(data)
            upload.stored()
        return {"name": name, "path": stored}

    @app.get("/outputs/{relpath:path}", dependencies=[Depends(require_token)])
    def outputs(relpath: str):
        root = os.path.realpath(engine.output_folder)
        full = os.path.realpath(os.path.join(root, relpath))
        if not full.startswith(root + os.sep) or not os.path.isfile(full):
            raise HTTPException(404, "no such output")
        return FileResponse(full)

    for route in extra_routes or ():
        route(app, require_token)
    return app


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
            engine.cancel(req.request_id)


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

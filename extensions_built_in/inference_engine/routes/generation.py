"""A request's life over HTTP: POST /generate submits and streams it (or waits for it), GET /stream
re-attaches a reader, POST /cancel ends it.

Frames reach a streaming response through an asyncio queue fed with call_soon_threadsafe, so the
event loop never waits on the generation thread."""
import asyncio
import re
import threading

from fastapi import Depends, Request as HttpRequest
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from extensions_built_in.inference_engine.engine import Engine, EngineBusy, Subscriber
from extensions_built_in.inference_engine.http_guard import INLINE_IMAGES_BODY_BYTES
from extensions_built_in.inference_engine.routes.common import ApiError, engine_router, errors, require_token

PENDING_LATENTS = 4        # a slow reader skips latents beyond this many undelivered ones

router = engine_router(dependencies=[Depends(require_token)])


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


@router.post("/generate", responses=errors(413, 503),
             max_body_size=INLINE_IMAGES_BODY_BYTES)       # its image inputs may be data: URLs
async def generate(body: GenerateBody, request: HttpRequest):
    engine = request.app.state.engine
    try:      # off the event loop: validation may read files (LoRA headers, a data URL's image)
        req = await asyncio.to_thread(engine.submit, body.model, body.sample, body.stream, body.request_id,
                                      client=_client_name(request))
    except EngineBusy as e:
        raise ApiError(503, "body", str(e))
    headers = {"X-Request-Id": req.request_id}
    if body.wait:
        await asyncio.to_thread(req.done_event.wait)
        return JSONResponse({"request_id": req.request_id, "status": req.status, "results": req.results,
                             "error": req.error}, headers=headers)
    return StreamingResponse(_follow(engine, req, cancel_on_disconnect=not req.stream.detach),
                             media_type="application/octet-stream", headers=headers)


@router.get("/stream/{request_id}", responses=errors(404))
async def stream(request_id: str, request: HttpRequest):
    engine = request.app.state.engine
    req = engine.get(request_id)
    if req is None:
        raise ApiError(404, "request_id", f"unknown request {request_id!r}")
    return StreamingResponse(_follow(engine, req, cancel_on_disconnect=False),
                             media_type="application/octet-stream", headers={"X-Request-Id": request_id})


@router.post("/cancel/{request_id}", responses=errors(404))
def cancel(request_id: str, request: HttpRequest):
    req = request.app.state.engine.cancel(request_id, by="POST /cancel")
    if req is None:
        raise ApiError(404, "request_id", f"unknown request {request_id!r}")
    return JSONResponse({"request_id": request_id, "status": req.status}, headers={"X-Request-Id": request_id})


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


CLIENT_NAME = re.compile(r"[A-Za-z0-9_.-]{1,32}")


def _client_name(request: HttpRequest) -> str | None:
    """`X-Client`: who sends it (grid, cli, ...), as the results feed records it."""
    name = request.headers.get("x-client")
    if name is not None and not CLIENT_NAME.fullmatch(name):
        raise ApiError(422, "X-Client", "must be 1 to 32 letters, digits, '_', '.' or '-'")
    return name


def _is_end(frame: bytes) -> bool:
    return frame[4:17] == b'{"type":"end"'   # encode_frame writes `type` first

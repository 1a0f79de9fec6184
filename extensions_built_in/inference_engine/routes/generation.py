"""A request's life over HTTP: POST /generate submits and streams it (or waits for it), GET /stream
re-attaches a reader, POST /cancel ends it.

Frames reach a streaming response through a FrameQueue (an asyncio queue fed with
call_soon_threadsafe), so the event loop never waits on the generation thread, and a reader that falls
behind (a slow client, or one that stopped reading: the transport's flow control then holds the
response's generator) costs a bounded amount of memory: see FrameQueue."""
import asyncio
import re
import threading

from fastapi import Depends, Request as HttpRequest
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from extensions_built_in.inference_engine.engine import Engine, EngineBusy, Subscriber
from extensions_built_in.inference_engine.http_guard import INLINE_IMAGES_BODY_BYTES
from extensions_built_in.inference_engine.routes.common import ApiError, engine_router, errors, require_token

PENDING_LATENTS = 4        # a slow reader skips latents and previews beyond this many undelivered ones

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


class FrameQueue:
    """One reader's undelivered frames, from the generation thread (`deliver`, a Subscriber's callback)
    to its event loop (`get`). What a reader that falls behind holds here is bounded:

    - droppable frames (`latent`, `preview`: each supersedes the one before) beyond `limit` undelivered
      ones are skipped, not queued: a slow reader sees fewer of them, the newest when it catches up
      (Request.publish keeps the newest for a re-attach too). At most `limit` frames of the largest kind
      (a latent of the request's size) wait here.
    - every other frame (start, progress, status, result, error, end) is kept, as a reader needs them
      all: they are the request's history (Request.history holds each of them already), a few hundred
      bytes per step, so a reader stalled for a whole request holds at most a second copy of it.
    A reader is never disconnected for being slow: what it costs is bounded by one request."""

    def __init__(self, loop: asyncio.AbstractEventLoop, limit: int = PENDING_LATENTS):
        self.loop, self.limit = loop, limit
        self.queue: asyncio.Queue = asyncio.Queue()
        self.droppable = 0          # droppable frames handed to the loop and not taken yet
        self.lock = threading.Lock()

    def deliver(self, frame: bytes, droppable: bool):
        """From the generation thread."""
        if droppable:
            with self.lock:
                if self.droppable >= self.limit:
                    return
                self.droppable += 1
        try:
            self.loop.call_soon_threadsafe(self.queue.put_nowait, (frame, droppable))
        except RuntimeError:        # its loop is closed: the server stopped
            pass

    async def get(self) -> tuple[bytes, bool]:
        frame, droppable = await self.queue.get()
        if droppable:
            with self.lock:
                self.droppable -= 1
        return frame, droppable


async def _follow(engine: Engine, req, cancel_on_disconnect: bool):
    """A request's frames: the replay, then live frames until `end`. A client that goes away
    cancels the request unless it asked to detach (or is a re-attached reader)."""
    frames = FrameQueue(asyncio.get_running_loop())
    sub = Subscriber(frames.deliver)
    replay = req.attach(sub)
    ended = False
    try:
        for frame in replay:
            yield frame
            ended = ended or _is_end(frame)
        if ended:
            return
        while True:
            frame, droppable = await frames.get()
            yield frame
            if not droppable and _is_end(frame):
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

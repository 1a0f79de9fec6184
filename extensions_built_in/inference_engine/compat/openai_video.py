"""OpenAI's videos API (`client.videos.create` / `retrieve` / `poll` / `download_content` / `list` /
`delete`): `POST /v1/videos`, `GET /v1/videos`, `GET /v1/videos/{id}`, `GET /v1/videos/{id}/content`,
`DELETE /v1/videos/{id}`, on the engine's queue.

A video is one engine request (api "openai") whose id is `video_<request_id>`. A job is read from what
the engine keeps: the request itself while the engine holds it (Engine.get), then its entry in the
results feed (a bounded ring, written beside the files), so a finished video outlives an engine restart
as long as the feed keeps it. Kept here, per Session: the ids this process queued (to find them while
they wait or run) and those a client deleted, both bounded.

`seconds` becomes frames by the model's fps and its VAE's temporal stride: whole strides plus the first
frame, as the causal video VAEs take them (4 s at 16 fps, stride 4: 65 frames); the resolver checks the
rest (engine.limits.max_frames, an arch's own frame rule) and a refusal names `seconds`. With no `seconds`
or `size` the model's own defaults apply. `input_reference` (an uploaded image, or `{image_url: data URL}`)
is the first frame: the arch's i2v task."""
import asyncio
import collections
import io
import math
import os
import re
import threading
import weakref
from dataclasses import dataclass

from fastapi import Depends, FastAPI, Request as HttpRequest
from fastapi.responses import FileResponse, JSONResponse, Response

from extensions_built_in.inference_engine.compat import inputs
from extensions_built_in.inference_engine.compat.common import Session, is_int, json_object
from extensions_built_in.inference_engine.compat.forms import parse_form
from extensions_built_in.inference_engine.compat.openai import error, invalid
from extensions_built_in.inference_engine.http_guard import INLINE_IMAGES_BODY_BYTES, auth_first
from extensions_built_in.inference_engine.results_feed import MAX_LIMIT, RESULTS_KEPT
from toolkit.errors import ConfigError
from toolkit.media import mime_type
from toolkit.models.registry import ARCHS

PREFIX = "video_"
MAX_SECONDS = 600               # past every video arch's clip; the engine's max_frames bounds it further
KEPT = RESULTS_KEPT             # ids queued and ids deleted, per Session
LIST_LIMIT, MAX_LIST_LIMIT = 20, 100
POLL_AFTER_MS = "500"           # `openai-poll-after-ms`: how often the SDK's poll() asks again
NO_LATENTS = {"latents": "none"}     # nobody streams these requests' frames
VARIANTS = ("video", "thumbnail", "spritesheet")
SPRITES, SPRITE_HEIGHT = 8, 128      # spritesheet: frames evenly spaced along the clip, in one row
STATUS = {"queued": "queued", "running": "in_progress", "ok": "completed", "error": "failed", "cancelled": "failed"}
# engine field -> the client's field, so a 400 names what the client sent
FIELDS = {"sample.prompt": "prompt", "sample.negative_prompt": "negative_prompt", "sample.width": "size",
          "sample.height": "size", "sample.num_frames": "seconds", "sample.fps": "seconds",
          "sample.num_inference_steps": "num_inference_steps", "sample.guidance_scale": "guidance_scale",
          "sample.seed": "seed", "sample.init_img": "input_reference", "sample.task": "model",
          "sample.output_ext": "model", "batch": "model"}
# the fields beyond OpenAI's a client may add (extra_body), as the images routes take them
EXTRA = (("negative_prompt", str), ("num_inference_steps", int), ("guidance_scale", float), ("seed", int))
_STR, _INT, _NUM = {"type": "string"}, {"type": "integer"}, {"type": "number"}
_CREATE_FIELDS = {
    "prompt": {"type": "string", "minLength": 1}, "model": _STR,
    "seconds": {"type": "string", "pattern": r"^[0-9]+(\.[0-9]+)?$"},
    "size": {"type": "string", "pattern": r"^[0-9]+x[0-9]+$"},
    "negative_prompt": _STR, "num_inference_steps": _INT, "guidance_scale": _NUM, "seed": _INT}
CREATE_BODY = {"requestBody": {"required": True, "content": {
    "multipart/form-data": {"schema": {
        "type": "object", "required": ["prompt"],
        "description": "OpenAI's video create form (what the SDK sends); `model` names a video model (a profile "
                       "or arch), else the loaded or default one; `input_reference`: the first frame (i2v)",
        "properties": {**_CREATE_FIELDS, "input_reference": {"type": "string", "format": "binary"}}}},
    "application/json": {"schema": {
        "type": "object", "required": ["prompt"],
        "properties": {**_CREATE_FIELDS, "input_reference": {
            "type": "object", "properties": {"image_url": _STR, "file_id": _STR}}}}}}}}
LIST_QUERY = {"parameters": [
    {"name": "after", "in": "query", "required": False, "schema": _STR},
    {"name": "limit", "in": "query", "required": False,
     "schema": {"type": "integer", "minimum": 1, "maximum": MAX_LIST_LIMIT}},
    {"name": "order", "in": "query", "required": False, "schema": {"type": "string", "enum": ["asc", "desc"]}}]}
CONTENT_QUERY = {"parameters": [{"name": "variant", "in": "query", "required": False,
                                 "schema": {"type": "string", "enum": list(VARIANTS)}}]}


@dataclass(frozen=True)
class Job:
    """A video job as the engine keeps it: a live engine.Request or a results-feed entry, in one shape."""
    request_id: str
    status: str                 # the engine's: queued | running | ok | error | cancelled
    error: str | None
    created_at: float
    finished_at: float | None
    progress: int               # 0-100
    model: dict                 # ModelConfig.to_dict()
    sample: dict                # GenerateImageConfig.to_dict()
    files: list                 # the video files' absolute paths

    @classmethod
    def of_request(cls, req) -> "Job":
        progress = 100 if req.status == "ok" else min(99, 100 * req.step // req.total) if req.total else 0
        return cls(req.request_id, req.status, req.error, req.created_at, req.finished_at, progress,
                   req.model.to_dict(), req.sample.to_dict(),
                   [r["path"] for r in req.results if r.get("kind") == "video"])

    @classmethod
    def of_entry(cls, entry: dict, folder: str) -> "Job":
        return cls(entry["request_id"], entry["status"], entry.get("error"), entry.get("created_at") or 0,
                   entry.get("finished_at"), 100 if entry["status"] == "ok" else 0, entry.get("model") or {},
                   entry.get("sample") or {},
                   [os.path.join(folder, f["relpath"]) for f in entry.get("files") or () if f.get("kind") == "video"])

    @property
    def gone(self) -> bool:
        """A completed video whose files are no longer there (deleted, here or before a restart)."""
        return self.status == "ok" and not any(os.path.isfile(p) for p in self.files)


def is_video_job(api: str | None, model: dict) -> bool:
    spec = ARCHS.get((model or {}).get("arch"))
    return api == "openai" and spec is not None and spec.modality == "video"


def seconds_of(num_frames: int, fps) -> str:
    """The clip's length as OpenAI writes it ("4"): whole strides of frames after the first, at fps."""
    if not fps:
        return "0"
    return f"{round((num_frames - 1) / fps, 2):g}"


def frames_for(seconds: float, fps: int, temporal: int) -> int:
    """Frames for `seconds` at `fps`: whole temporal strides (at least one), plus the first frame."""
    return max(1, round(seconds * fps / temporal)) * temporal + 1


class OpenAIVideos:
    def __init__(self, session: Session):
        self.session = session
        self.engine = session.engine
        self.queued: collections.OrderedDict = collections.OrderedDict()     # request ids this process queued
        self.deleted: collections.OrderedDict = collections.OrderedDict()    # request ids a client deleted
        self.lock = threading.Lock()

    # -- create ------------------------------------------------------------------------------------
    async def create(self, request: HttpRequest):
        fields, reference = await read_create(request)
        prompt = fields.get("prompt")
        if not isinstance(prompt, str) or not prompt.strip():
            raise invalid("prompt", "is required (a non-empty string)")
        sample = {"prompt": prompt, "output_ext": "mp4"}
        size = fields.get("size")
        if size not in (None, ""):
            m = re.fullmatch(r"\s*(\d{1,5})\s*[xX]\s*(\d{1,5})\s*", size) if isinstance(size, str) else None
            if not m:
                raise invalid("size", f"must be 'WIDTHxHEIGHT' in pixels (e.g. '1280x720'), each side at most 5 "
                              f"digits, got {size!r}")
            sample["width"], sample["height"] = int(m.group(1)), int(m.group(2))
        seconds = _number(fields.get("seconds"), "seconds", float)
        if seconds is not None and not 0 < seconds <= MAX_SECONDS:
            raise invalid("seconds", f"must be a number of seconds above 0 and at most {MAX_SECONDS}, "
                          f"got {fields['seconds']!r}")
        for name, kind in EXTRA:
            value = fields.get(name)
            if value not in (None, ""):
                if kind is str and not isinstance(value, str):
                    raise invalid(name, f"must be a string, got {type(value).__name__}")
                sample[name] = value if kind is str else _number(value, name, kind)
        if sample.get("seed") is not None and sample["seed"] < -1:
            raise invalid("seed", f"must be -1 (random) or an integer >= 0, got {sample['seed']}")
        model, name = await asyncio.to_thread(self._video_model, fields.get("model"))
        if seconds is not None:
            fps = await asyncio.to_thread(self._fps, model)
            sample["num_frames"] = frames_for(seconds, fps, ARCHS[model["arch"]].latents.temporal)
        # every setting checked (the frames against the limits and the arch) before the image is decoded
        probe = {**sample, **({"init_img": "input_reference"} if reference is not None else {})}
        await asyncio.to_thread(self.session.resolve_sample, model, probe, invalid, FIELDS, "model")
        if reference is not None:
            try:
                sample["init_img"] = await asyncio.to_thread(_reference_url, reference)
            except ConfigError as e:
                raise invalid(e.key, e.message)
        session = self.session
        reqs = await asyncio.to_thread(session.submit_all, model, [sample], invalid, FIELDS, "model", NO_LATENTS,
                                       api="openai")
        session.forget(reqs)               # no /progress batch: the job is followed by its id
        session.last_used = (name, reqs[0].model)
        with self.lock:
            self.queued[reqs[0].request_id] = None
            while len(self.queued) > KEPT:
                self.queued.popitem(last=False)
        return self.video(Job.of_request(reqs[0]))

    def _video_model(self, name) -> tuple[dict, str | None]:
        """(ModelConfig dict, the name given) of a video model; anything else is a 400 naming `model`."""
        model, spec, name = self.session.model_of(name, "video", "model", invalid)
        if spec is None:
            raise invalid("model", f"unknown arch {model.get('arch')!r}")
        return model, name

    def _fps(self, model: dict) -> int:
        """The fps a request for `model` gets (its profile's, else its variant's or arch's default)."""
        try:
            sample = self.engine.default_sample(profile=model.get("profile"), arch=model["arch"],
                                                variant=model.get("variant"))
        except ConfigError as e:
            raise invalid("model", e.one_line())
        return sample["fps"]

    # -- reading jobs --------------------------------------------------------------------------------
    def video(self, job: Job) -> dict:
        """OpenAI's video object for `job`."""
        status = STATUS.get(job.status, "failed")
        s = job.sample
        out = {"id": PREFIX + job.request_id, "object": "video", "created_at": int(job.created_at),
               "status": status, "model": self.session.title_of(job.model), "progress": job.progress,
               "prompt": s.get("prompt"), "seconds": seconds_of(s.get("num_frames") or 1, s.get("fps")),
               "size": f"{s.get('width')}x{s.get('height')}",
               "completed_at": int(job.finished_at) if job.finished_at and status in ("completed", "failed") else None,
               "expires_at": None, "remixed_from_video_id": None, "error": None}
        if status == "failed":
            out["error"] = {"code": "cancelled" if job.status == "cancelled" else "generation_failed",
                            "message": job.error or job.status}
        return out

    def job(self, video_id: str) -> Job:
        """The job of `video_id`, else a 404 (deleted, gone from the feed, or never one of these)."""
        rid = video_id[len(PREFIX):] if video_id.startswith(PREFIX) else None
        found = None
        if rid and rid not in self.deleted:
            req = self.engine.get(rid)
            if req is not None and is_video_job(req.api, req.model.to_dict()):
                found = Job.of_request(req)
            elif req is None:
                found = next((j for j in self._feed_jobs() if j.request_id == rid), None)
        if found is None or found.gone:
            raise error(404, f"no video {video_id!r} here", param="video_id", code="video_not_found")
        return found

    def _feed_jobs(self) -> list:
        """The results feed's OpenAI video jobs, oldest first."""
        out, after, feed, folder = [], 0, self.engine.results, self.engine.output_folder
        while True:
            page = feed.read(after, MAX_LIMIT)
            out += [Job.of_entry(e, folder) for e in page["entries"] if is_video_job(e.get("api"), e.get("model"))]
            if not page["more"] or not page["entries"]:
                return out
            after = page["entries"][-1]["seq"]

    def jobs(self) -> list:
        """Every video job the engine still knows, oldest first."""
        by_id = {j.request_id: j for j in self._feed_jobs()}
        with self.lock:
            queued, deleted = list(self.queued), set(self.deleted)
        for rid in queued:          # newer than the feed's entry where both know it
            req = self.engine.get(rid)
            if req is not None:
                by_id[rid] = Job.of_request(req)
        jobs = [j for rid, j in by_id.items() if rid not in deleted and not j.gone]
        return sorted(jobs, key=lambda j: (j.created_at, j.request_id))

    # -- routes --------------------------------------------------------------------------------------
    async def retrieve(self, video_id: str):
        job = await asyncio.to_thread(self.job, video_id)
        video = self.video(job)
        headers = {"openai-poll-after-ms": POLL_AFTER_MS} if video["status"] in ("queued", "in_progress") else None
        return JSONResponse(video, headers=headers)

    async def list_videos(self, request: HttpRequest):
        q = request.query_params
        limit = _number(q.get("limit"), "limit", int)
        limit = LIST_LIMIT if limit is None else limit
        if not 1 <= limit <= MAX_LIST_LIMIT:
            raise invalid("limit", f"must be an integer from 1 to {MAX_LIST_LIMIT}, got {q.get('limit')!r}")
        order = q.get("order") or "desc"
        if order not in ("asc", "desc"):
            raise invalid("order", f"must be 'asc' or 'desc', got {order!r}")
        videos = [self.video(j) for j in await asyncio.to_thread(self.jobs)]
        if order == "desc":
            videos.reverse()
        after = q.get("after")
        if after:
            at = next((i for i, v in enumerate(videos) if v["id"] == after), None)
            if at is None:
                raise invalid("after", f"no video {after!r} here to list after")
            videos = videos[at + 1:]
        page = videos[:limit]
        return {"object": "list", "data": page, "first_id": page[0]["id"] if page else None,
                "last_id": page[-1]["id"] if page else None, "has_more": len(videos) > limit}

    async def content(self, video_id: str, request: HttpRequest):
        variant = request.query_params.get("variant") or "video"
        if variant not in VARIANTS:
            raise invalid("variant", f"must be one of {', '.join(VARIANTS)}, got {variant!r}")
        job = await asyncio.to_thread(self.job, video_id)
        if job.status != "ok":
            raise error(409, f"video {video_id!r} is {STATUS.get(job.status, 'failed')}: its content is there once "
                        "it is completed", param="video_id", code="video_not_ready")
        path = next(p for p in job.files if os.path.isfile(p))       # job() refused a completed job without one
        if variant == "video":
            return FileResponse(path, media_type=mime_type(path) or "application/octet-stream")
        try:
            data, media_type = await asyncio.to_thread(still, path, variant, job.sample.get("num_frames") or 1)
        except Exception as e:      # noqa: BLE001 - a file that no longer decodes
            raise error(404, f"video {video_id!r}: its {variant} cannot be made from the file ({type(e).__name__})",
                        param="variant", code="video_not_found")
        return Response(data, media_type=media_type)

    async def delete(self, video_id: str):
        """The video leaves every listing; its files are removed; one still queued or running is cancelled."""
        job = await asyncio.to_thread(self.job, video_id)
        if job.status in ("queued", "running"):
            self.engine.cancel(job.request_id, by="an OpenAI client (DELETE /v1/videos)")
        with self.lock:
            self.deleted[job.request_id] = None
            while len(self.deleted) > KEPT:
                self.deleted.popitem(last=False)
        await asyncio.to_thread(self._remove_files, job)
        return {"id": video_id, "object": "video.deleted", "deleted": True}

    def _remove_files(self, job: Job):
        root = os.path.realpath(self.engine.output_folder)
        for path in job.files:
            real = os.path.realpath(path)
            if real.startswith(root + os.sep) and os.path.isfile(real):
                try:
                    os.remove(real)
                except OSError:         # already gone, or not ours to remove: the id is deleted all the same
                    pass


# -- the body ---------------------------------------------------------------------------------------

async def read_create(request: HttpRequest) -> tuple[dict, object]:
    """(the fields, the input reference: image bytes, {image_url | file_id}, a data URL string, or None) of
    a create call, as a multipart form (what the SDK sends) or a JSON object."""
    ctype = request.headers.get("content-type", "")
    if ctype.lower().startswith("multipart/form-data"):
        body = await request.body()         # bounded by the route's max_body_size
        fields, files = await asyncio.to_thread(_parse_form, ctype, body)
        if "input_reference" in files:
            return fields, files["input_reference"]
        nested = {k[len("input_reference["):-1]: fields.pop(k) for k in list(fields)
                  if k.startswith("input_reference[") and k.endswith("]")}
        reference = fields.pop("input_reference", None) or nested or None
        return fields, reference
    body = await json_object(request, invalid)
    return body, body.get("input_reference")


def _parse_form(ctype: str, body: bytes) -> tuple[dict, dict]:
    """({text field: value}, {file field: its first file's bytes})."""
    fields, files = parse_form(ctype, body, invalid)
    first = {}
    for name, _filename, payload in files:
        first.setdefault(name, payload)
    return fields, first


def _number(value, field: str, kind):
    """A field as an int or float: a JSON number, or its text (a form sends text); None when absent or empty."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        try:
            x = float(value.strip())
        except ValueError:
            x = math.nan
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        x = value
    else:
        x = math.nan
    if not math.isfinite(x) or (kind is int and not is_int(x)):
        raise invalid(field, f"must be {'an integer' if kind is int else 'a number'}, got {str(value)[:40]!r}")
    return int(x) if kind is int else float(x)


def _reference_url(reference) -> str:
    """The input reference as the data URL the engine stores, checked as every input image is."""
    if isinstance(reference, dict):
        unknown = set(reference) - {"image_url", "file_id"}
        if unknown:
            raise ConfigError("input_reference", f"takes image_url (or file_id), not {', '.join(sorted(unknown))}")
        if reference.get("file_id") and not reference.get("image_url"):
            raise ConfigError("input_reference", "file ids are not served here: upload the image, or send "
                              "image_url as a data: URL")
        reference = reference.get("image_url")
    if isinstance(reference, str):
        reference = inputs.decode_b64_image(reference, "input_reference")     # a data: URL (URLs are not fetched)
    if not isinstance(reference, bytes) or not reference:
        raise ConfigError("input_reference", "must be an image file, or {image_url: a data: URL}")
    inputs.check(reference, "input_reference")
    return inputs.data_url(reference)


# -- the derived images -------------------------------------------------------------------------------

def still(path: str, variant: str, num_frames: int) -> tuple[bytes, str]:
    """(bytes, media type) of a video's `thumbnail` (its first frame, WebP) or `spritesheet` (up to SPRITES
    frames evenly spaced, at most SPRITE_HEIGHT high, side by side: JPEG)."""
    import av
    from PIL import Image

    last = max(0, num_frames - 1)
    picks = [0] if variant == "thumbnail" else sorted({round(i * last / max(1, SPRITES - 1)) for i in range(SPRITES)})
    frames = []
    with av.open(path) as container:
        for i, frame in enumerate(container.decode(container.streams.video[0])):
            if i in picks:
                frames.append(frame.to_image().convert("RGB"))
            if i >= picks[-1]:
                break
    if not frames:
        raise ValueError("no frame decodes")
    buf = io.BytesIO()
    if variant == "thumbnail":
        frames[0].save(buf, "WEBP", quality=90)
        return buf.getvalue(), "image/webp"
    w, h = frames[0].size
    scale = min(1.0, SPRITE_HEIGHT / h)
    tw, th = max(1, round(w * scale)), max(1, round(h * scale))
    sheet = Image.new("RGB", (tw * len(frames), th))
    for i, im in enumerate(frames):
        sheet.paste(im.resize((tw, th)), (i * tw, 0))
    sheet.save(buf, "JPEG", quality=90)
    return buf.getvalue(), "image/jpeg"


# -- the routes ---------------------------------------------------------------------------------------

_APIS: "weakref.WeakKeyDictionary[Session, OpenAIVideos]" = weakref.WeakKeyDictionary()


def add_routes(app: FastAPI, session: Session, authorized):
    """The /v1/videos routes on `app`; `authorized(request) -> bool` (the token is the API key). Every app
    serving one Session shares its jobs."""
    api = _APIS.get(session)
    if api is None:
        api = _APIS[session] = OpenAIVideos(session)

    @auth_first
    def auth(request: HttpRequest):
        if not authorized(request):
            raise error(401, "missing or bad engine token: send it as the API key", code="invalid_api_key")

    deps = [Depends(auth)]
    app.add_api_route("/v1/videos", api.create, methods=["POST"], dependencies=deps, openapi_extra=CREATE_BODY,
                      max_body_size=INLINE_IMAGES_BODY_BYTES)           # its input reference, uploaded
    app.add_api_route("/v1/videos", api.list_videos, methods=["GET"], dependencies=deps, openapi_extra=LIST_QUERY)
    app.add_api_route("/v1/videos/{video_id}", api.retrieve, methods=["GET"], dependencies=deps)
    app.add_api_route("/v1/videos/{video_id}", api.delete, methods=["DELETE"], dependencies=deps)
    app.add_api_route("/v1/videos/{video_id}/content", api.content, methods=["GET"], dependencies=deps,
                      openapi_extra=CONTENT_QUERY)
    return api

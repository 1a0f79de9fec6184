"""stable-diffusion.cpp's native asynchronous API, `/sdcpp/v1/*`, as its examples/server/api.md describes it:
`POST /sdcpp/v1/img_gen` and `/sdcpp/v1/vid_gen` answer 202 with a job at once (`id`, `poll_url`);
`GET /sdcpp/v1/jobs/{id}` gives its `status` (queued, generating, completed, failed, cancelled),
`queue_position` and, once completed, its `result` (base64 images, or the whole video file);
`POST /sdcpp/v1/jobs/{id}/cancel`; `GET /sdcpp/v1/capabilities`.

The body is sd.cpp's native schema. Each field is served as sd.cpp serves it, or answered 400 naming it
(`{"error": "<field>: <why>", "field": "<field>"}`: sd.cpp's `error` string, with the field added): a value
that asks for what is not served here (an slg scale, custom sigmas, a control image, an avi container) is
never ignored. Values that ask for nothing (sd.cpp's documented defaults: `slg.scale` 0, empty
`custom_sigmas`, `cache_mode: disabled`) pass. LoRAs come only from `lora[]` (paths of engine.lora_folder,
as capabilities lists them); `<lora:...>` in a prompt is prompt text, as in sd.cpp's server.

Beyond sd.cpp (keys its clients ignore): a body's `model` names the model (capabilities' `models`;
none: the loaded or default one, as sd.cpp has one), a job's `progress` ({step, steps}), capabilities'
`models`, and `field` in errors. A running job can be cancelled too (`cancel_generating`).

Jobs are engine requests (one, or `batch_count` of them for an arch that makes one image per pass),
submitted through the Session (`api="sdcpp"`, as the results feed records it); the job table keeps
the newest JOBS_KEPT ended jobs, the ids of older ones answer 410 as sd.cpp's expired jobs do. The
body's checks are sdcpp_body.py's.
"""
import asyncio
import base64
import collections
import os
import random
import threading
import time
import uuid
import weakref
from dataclasses import dataclass

from fastapi import Depends, FastAPI, Request as HttpRequest
from fastapi.responses import JSONResponse

from extensions_built_in.inference_engine.compat.common import REALM, CompatError, Session, json_object, strip_hash
from extensions_built_in.inference_engine.compat.sdcpp_body import (
    FIELDS, IMAGE_FORMATS, IMG_GEN_BODY, MODES, SAMPLE_METHODS, VID_GEN_BODY, VIDEO_FORMATS, common_fields, error,
    hires_settings, image_field, invalid, json_type, loras_of, only, output_of, prepare_images, sample_params_of, typed)
from extensions_built_in.inference_engine.http_guard import INLINE_IMAGES_BODY_BYTES, auth_first
from toolkit import hires, upscalers
from toolkit.errors import ConfigError
from toolkit.models.arch import MAX_SIZE
from toolkit.models.registry import ARCHS

JOBS_KEPT = 256              # ended jobs the table answers for; older ones are 410
EXPIRED_KEPT = 4096          # ids of jobs that left the table (410, not 404)
NO_LATENTS = {"latents": "none"}      # nobody streams a job's frames
CANCEL_WAIT = 1.0                     # seconds past engine.grace_seconds a cancel waits for a running job


# -- the job table -----------------------------------------------------------------------------------

@dataclass(eq=False)
class Job:
    id: str
    kind: str                      # img_gen | vid_gen
    reqs: list                     # the engine Requests it runs, in order
    created: int
    output_format: str
    cancelled: bool = False        # cancelled through POST .../cancel (sd.cpp's "job cancelled by client")
    forgotten: bool = False        # ended, and out of the Session's batch table

    @property
    def finished(self) -> bool:
        """Every request ended and recorded (done_event: its results feed entry is written)."""
        return all(r.done_event.is_set() for r in self.reqs)


class Jobs:
    """The jobs of one Session (every app serving it shares them), bounded: past `kept` ended jobs the
    oldest go, and their ids answer 410 (sd.cpp's expired job) rather than 404."""

    def __init__(self, kept: int = JOBS_KEPT):
        self.kept = kept
        self.jobs: collections.OrderedDict[str, Job] = collections.OrderedDict()
        self.expired: collections.OrderedDict[str, None] = collections.OrderedDict()
        self.lock = threading.Lock()

    def add(self, job: Job):
        with self.lock:
            self.jobs[job.id] = job

    def get(self, job_id: str) -> Job:
        with self.lock:
            job = self.jobs.get(job_id)
            if job is None:
                if job_id in self.expired:
                    raise error(410, "job expired", "id")
                raise error(404, "job not found", "id")
            return job

    def prune(self, forget) -> None:
        """Ended jobs leave the Session's batch table (`forget`); the oldest past `kept` leave this one."""
        with self.lock:
            ended = [j for j in self.jobs.values() if j.finished]
            for job in ended:
                if not job.forgotten:
                    forget(job.reqs)
                    job.forgotten = True
            for job in ended[:max(0, len(ended) - self.kept)]:
                del self.jobs[job.id]
                self.expired[job.id] = None
            while len(self.expired) > EXPIRED_KEPT:
                self.expired.popitem(last=False)


_TABLES: "weakref.WeakKeyDictionary[Session, Jobs]" = weakref.WeakKeyDictionary()


def jobs_of(session: Session) -> Jobs:
    """The one job table of `session` (the engine port and the compat port share it)."""
    table = _TABLES.get(session)
    if table is None:
        table = _TABLES.setdefault(session, Jobs())
    return table


# -- the routes --------------------------------------------------------------------------------------

class SdCpp:
    def __init__(self, session: Session):
        self.session = session
        self.engine = session.engine
        self.jobs = jobs_of(session)

    # -- models ---------------------------------------------------------------------------------------
    def _model(self, name, kind: str) -> tuple[dict, object, str | None]:
        """(ModelConfig dict, arch row, the name given) of the model a job names (`model`), else the loaded or
        default one; one of the other modality is a 400 naming `model`."""
        if name is not None and not isinstance(name, str):
            raise invalid("model", f"must be a model name (a string), got {json_type(name)}")
        model, spec, name = self.session.model_of(name, MODES[kind], "model", invalid)
        if spec is None:
            raise invalid("model", f"unknown arch {model.get('arch')!r}")
        return model, spec, name

    def model_modes(self) -> list[dict]:
        names = self.session.image_model_names()
        return ([{"name": n, "mode": "img_gen"} for n in names] +
                [{"name": n, "mode": "vid_gen"} for n in self.engine.model_names(modality="video") if n not in names])

    # -- submitting -----------------------------------------------------------------------------------
    async def img_gen(self, request: HttpRequest):
        return await self._submit(request, "img_gen")

    async def vid_gen(self, request: HttpRequest):
        return await self._submit(request, "vid_gen")

    async def _submit(self, request: HttpRequest, kind: str):
        body = await json_object(request, invalid)
        model, spec, name = await asyncio.to_thread(self._model, body.get("model"), kind)
        sample = common_fields(body, kind, spec)
        fmt, sample["output_ext"] = output_of(body, kind)
        loras, lora_fields = await asyncio.to_thread(loras_of, body, self.engine.lora_folder)
        if loras:
            model = {**model, "loras": [*(model.get("loras") or []), *loras]}
        table = {**FIELDS, **lora_fields}
        images, count = (self._image_fields(body, spec, sample) if kind == "img_gen"
                         else self._video_fields(body, spec, sample))
        if self.engine.queue_length() >= self.engine.limits.max_queued:
            raise error(429, "job queue is full", "engine")
        # the model's defaults and every setting resolved before an image is decoded
        probe = {**sample, **{slot: where for slot, where in images}}
        _mc, gen = await asyncio.to_thread(self.session.resolve_sample, model, probe, invalid, table, "model")
        if kind == "img_gen":
            hr = hires_settings(body, gen.width, gen.height)
            if hr is not None:
                sample["hires"] = hr
        try:
            sample.update(await asyncio.to_thread(prepare_images, images))
        except ConfigError as e:
            raise invalid(e.key, e.message)
        samples = [sample]
        if count > 1 and spec.batch_arg:
            sample["batch_size"] = count             # one pass, seed + i each
        elif count > 1:                              # one image per pass: a request each, seed + i
            base = random.randrange(0, 2**31) if sample["seed"] == -1 else sample["seed"]
            samples = [{**sample, "seed": base + i} for i in range(count)]
        reqs = await asyncio.to_thread(self.session.submit_all, model, samples, invalid, table, "model",
                                       NO_LATENTS, api="sdcpp")
        self.session.last_used = (name, reqs[0].model)       # how the compat routes name the model it loads
        job = Job(id=f"job_{uuid.uuid4().hex[:16]}", kind=kind, reqs=reqs, created=int(reqs[0].created_at),
                  output_format=fmt)
        self.jobs.add(job)
        self.jobs.prune(self.session.forget)
        return JSONResponse({"id": job.id, "kind": kind, "status": "queued", "created": job.created,
                             "poll_url": f"/sdcpp/v1/jobs/{job.id}"}, status_code=202)

    def _image_fields(self, body: dict, spec, sample: dict) -> tuple[dict, int]:
        """img_gen's own fields: ({(sample input, field): base64}, batch_count); the task set from the images."""
        count = typed(body, "batch_count", "batch_count", "integer", 1)
        if not 1 <= count <= self.engine.limits.max_batch:
            raise invalid("batch_count", f"must be from 1 to {self.engine.limits.max_batch}, got {count}")
        for key in ("auto_resize_ref_image", "increase_ref_index"):
            typed(body, key, key, "boolean")
        only(body, "embed_image_metadata", "embed_image_metadata", "boolean", (True,),
              "the engine writes its settings into every file it makes")
        for key in ("control_strength", "ip_adapter_strength"):
            typed(body, key, key, "number")
        for key, why in (("control_image", "name a ControlNet per request on /sdapi/v1 (alwayson_scripts) or "
                                           "/generate (sample.controls)"),
                         ("ip_adapter_image", "name an IP-Adapter per request on /generate (sample.ip_adapter)")):
            if image_field(body, key):
                raise invalid(key, f"is not served here: {why}")
        strength = typed(body, "strength", "strength", "number")
        init, mask = image_field(body, "init_image"), image_field(body, "mask_image")
        refs = typed(body, "ref_images", "ref_images", "array", [])
        if not all(isinstance(r, str) and r for r in refs):
            raise invalid("ref_images", "must be an array of base64 images")
        images = {}
        label = f"this model ({spec.name}; its tasks: {', '.join(spec.task_names)})"
        if mask and not init:
            raise invalid("mask_image", "needs init_image (the image to inpaint)")
        if refs and init:
            raise invalid("ref_images", "cannot be combined with init_image here: send one or the other")
        if init:
            task = "inpaint" if mask else "img2img"
            if spec.task(task) is None:
                raise invalid("mask_image" if mask else "init_image", f"{label} has no {task} task")
            sample["task"] = task
            if strength is not None:
                sample["strength"] = strength
            images[("init_img", "init_image")] = init
            if mask:
                images[("mask_img", "mask_image")] = mask
        elif refs:
            edit = spec.task("edit")
            if edit is None:
                raise invalid("ref_images", f"{label} has no edit task: it takes no reference images")
            if len(refs) > len(edit.inputs):
                raise invalid("ref_images", f"{label} takes at most {len(edit.inputs)} reference image(s), "
                              f"got {len(refs)}")
            sample["task"] = "edit"
            for slot, (i, ref) in zip(edit.inputs, enumerate(refs)):
                images[(slot, f"ref_images[{i}]")] = ref
        return images, count

    def _video_fields(self, body: dict, spec, sample: dict) -> tuple[dict, int]:
        """vid_gen's own fields: ({(sample input, field): base64}, 1)."""
        frames = typed(body, "video_frames", "video_frames", "integer")
        if frames is not None:
            if frames < 1:
                raise invalid("video_frames", f"must be >= 1, got {frames}")
            sample["num_frames"] = frames
        fps = typed(body, "fps", "fps", "integer")
        if fps is not None:
            if fps < 1:
                raise invalid("fps", f"must be >= 1, got {fps}")
            sample["fps"] = fps
        for key in ("moe_boundary", "vace_strength", "strength"):
            typed(body, key, key, "number")
        sample_params_of(body, "high_noise_sample_params", spec)      # checked: one setting runs both stages here
        if image_field(body, "end_image"):
            raise invalid("end_image", "is not served here: a video starts from init_image only")
        if typed(body, "control_frames", "control_frames", "array", []):
            raise invalid("control_frames", "is not served here (send [])")
        images = {}
        init = image_field(body, "init_image")
        if init:
            if spec.task("i2v") is None:
                raise invalid("init_image", f"this model ({spec.name}; its tasks: {', '.join(spec.task_names)}) "
                              "has no i2v task")
            sample["task"] = "i2v"
            images[("init_img", "init_image")] = init
        return images, 1

    # -- jobs -----------------------------------------------------------------------------------------
    async def job(self, job_id: str):
        job = self.jobs.get(job_id)
        self.jobs.prune(self.session.forget)
        return await asyncio.to_thread(self.describe, job)

    async def cancel(self, job_id: str):
        """Cancel a queued or a running job (the engine stops a running request at its next step; this
        waits up to engine.grace_seconds for it). An ended job is answered as it is, as sd.cpp does."""
        job = self.jobs.get(job_id)
        if not job.finished:
            job.cancelled = True
            for r in job.reqs:
                self.engine.cancel(r.request_id, by="an sd.cpp client")
            deadline = time.monotonic() + self.engine.grace_seconds + CANCEL_WAIT
            for r in job.reqs:
                await asyncio.to_thread(r.done_event.wait, max(0.0, deadline - time.monotonic()))
        self.jobs.prune(self.session.forget)
        return await asyncio.to_thread(self.describe, job)

    def describe(self, job: Job) -> dict:
        """sd.cpp's job object, and `progress` ({step, steps} over the job's requests)."""
        reqs = job.reqs
        status, position, result, err = "generating", 0, None, None
        if job.finished:
            failed = next((r for r in reqs if r.status == "error"), None)
            if failed is not None:
                status, err = "failed", {"code": "generation_failed", "message": failed.error or "generation failed"}
            elif any(r.status == "cancelled" for r in reqs):
                stopped = next(r for r in reqs if r.status == "cancelled")
                status, err = "cancelled", {"code": "cancelled", "message": "job cancelled by client" if job.cancelled
                                            else stopped.error or "cancelled"}
            else:
                try:
                    status, result = "completed", self._result(job)
                except OSError as e:          # its file went from the output folder since
                    status, err = "failed", {"code": "generation_failed",
                                             "message": f"the result file cannot be read: {e.strerror or e}"}
        elif all(r.status == "queued" for r in reqs):
            queued = [q["request_id"] for q in self.engine.queue_snapshot()["queued"]]
            places = [queued.index(r.request_id) + 1 for r in reqs if r.request_id in queued]
            if len(places) == len(reqs):      # else the engine has taken it: it is starting
                status, position = "queued", min(places)
        started = [r.started_at for r in reqs if r.started_at]
        steps = sum(r.total or r.sample.num_inference_steps for r in reqs)
        done = sum((r.total or r.sample.num_inference_steps) if r.status == "ok" else r.step for r in reqs)
        return {"id": job.id, "kind": job.kind, "status": status, "created": job.created,
                "started": int(min(started)) if started else None,
                "completed": int(max(r.finished_at for r in reqs)) if job.finished else None,
                "queue_position": position, "result": result, "error": err,
                "progress": {"step": done, "steps": steps}}

    def _result(self, job: Job) -> dict:
        files = [res for r in job.reqs for res in r.results]
        if job.kind == "img_gen":
            shots = [res for res in files if res.get("kind") == "image"]
            return {"output_format": job.output_format,
                    "images": [{"index": i, "b64_json": _b64(res["path"])} for i, res in enumerate(shots)]}
        video = next(res for res in files if res.get("kind") == "video")
        return {"output_format": job.output_format, "mime_type": VIDEO_FORMATS[job.output_format][1],
                "fps": video.get("fps") or job.reqs[0].sample.fps, "frame_count": video.get("num_frames"),
                "b64_json": _b64(video["path"])}

    # -- capabilities ---------------------------------------------------------------------------------
    async def capabilities(self):
        return await asyncio.to_thread(self._capabilities)

    def _capabilities(self) -> dict:
        """sd.cpp's capabilities, of the model a job that names none gets (`model`, `current_mode`) and
        of the first model of each other mode (`defaults_by_mode`, `features_by_mode`); `models`: every
        model a job may name, with its mode."""
        models = self.model_modes()
        current = self.session.current_name()
        try:
            cur_model = self.session.model_for(current or None)
            cur_spec = ARCHS.get(cur_model.get("arch"))
        except ConfigError:
            cur_model, cur_spec = None, None
        current_mode = next((k for k, m in MODES.items() if cur_spec is not None and cur_spec.modality == m), "")
        by_mode = {}
        for kind in MODES:
            if kind == current_mode:
                by_mode[kind] = (cur_model, cur_spec)
            else:
                first = next((m["name"] for m in models if m["mode"] == kind), None)
                if first is not None:
                    try:
                        model = self.session.model_for(first)
                        by_mode[kind] = (model, ARCHS.get(model.get("arch")))
                    except ConfigError:
                        pass
        defaults = {k: self._defaults(k, *mv) for k, mv in by_mode.items()}
        formats = {"img_gen": list(IMAGE_FORMATS), "vid_gen": list(VIDEO_FORMATS)}
        formats = {k: formats[k] for k in by_mode}
        features = {k: _features(k, spec, self.engine.lora_folder) for k, (_m, spec) in by_mode.items()}
        spec = cur_spec
        rows = spec.samplers() if spec is not None else ()
        loras = self.engine.list_loras()["loras"] if self.engine.lora_folder else []
        limits = self.engine.limits
        return {
            "model": {"name": current, "stem": current, "path": current},
            "current_mode": current_mode, "supported_modes": list(by_mode),
            "defaults": defaults.get(current_mode, {}), "output_formats": formats.get(current_mode, []),
            "features": features.get(current_mode, {"cancel_queued": True, "cancel_generating": True}),
            "defaults_by_mode": defaults, "output_formats_by_mode": formats, "features_by_mode": features,
            "samplers": [m for m, ours in SAMPLE_METHODS.items() if any(s.name == ours for s in rows)],
            "schedulers": ["discrete", "normal", *(k for k in ("karras", "exponential") if any(s.schedule == k for s in rows))],
            "loras": [{"name": os.path.basename(d["name"]), "path": d["path"]} for d in loras if "error" not in d],
            "upscalers": [{"name": "None"}, *({"name": n} for n in hires.PIXEL_UPSCALERS),
                          *({"name": n} for n in hires.LATENT_UPSCALERS),
                          *({"name": n} for n in sorted(upscalers.model_files(self.engine.upscaler_folders())))],
            "limits": {"min_width": 1, "max_width": MAX_SIZE, "min_height": 1, "max_height": MAX_SIZE,
                       "max_batch_count": limits.max_batch, "max_queue_size": limits.max_queued,
                       "max_pixels": limits.max_pixels, "max_frames": limits.max_frames},
            "models": models,
        }

    def _defaults(self, kind: str, model, spec) -> dict:
        """sd.cpp's defaults object for a mode, from what the engine resolves for a job that sets nothing."""
        try:
            _mc, gen = self.session.resolve_sample(model, {}, invalid, FIELDS, "model")
        except CompatError:        # a model whose default task needs an input image: its row's defaults
            gen = None
        own = spec.sample_defaults(None) if spec is not None else {}
        pick = (lambda k, d: getattr(gen, k)) if gen is not None else (lambda k, d: own.get(k, d))
        params = {"scheduler": "discrete", "sample_method": "default", "sample_steps": pick("num_inference_steps", 20),
                  "eta": None, "shifted_timestep": 0, "flow_shift": None,
                  "guidance": {"txt_cfg": pick("guidance_scale", 7.0), "img_cfg": None, "distilled_guidance": 3.5,
                               "slg": {"layers": [], "layer_start": 0.01, "layer_end": 0.2, "scale": 0.0}}}
        out = {"prompt": "", "negative_prompt": "", "clip_skip": -1, "width": pick("width", 512),
               "height": pick("height", 512), "strength": 0.75, "seed": -1, "sample_params": params,
               "vae_tiling_params": {"enabled": False, "temporal_tiling": False, "tile_size_x": 0, "tile_size_y": 0,
                                     "target_overlap": 0.5, "rel_size_x": 0.0, "rel_size_y": 0.0,
                                     "extra_tiling_args": ""},
               "cache_mode": "disabled", "cache_option": "", "scm_mask": "", "scm_policy_dynamic": True,
               "output_compression": 100}
        if kind == "img_gen":
            out.update(batch_count=1, auto_resize_ref_image=True, increase_ref_index=False, control_strength=0.9,
                       ip_adapter_strength=1.0, output_format=next(iter(IMAGE_FORMATS)),
                       hires={"enabled": False, "upscaler": "Latent", "scale": 2.0, "target_width": 0,
                              "target_height": 0, "steps": 0, "denoising_strength": 0.7, "custom_sigmas": [],
                              "upscale_tile_size": 128})
        else:
            out.update(video_frames=pick("num_frames", 33), fps=pick("fps", 16), moe_boundary=0.875, vace_strength=1.0,
                       high_noise_sample_params={**params, "sample_steps": -1},
                       output_format=next(iter(VIDEO_FORMATS)))
        return out


def _features(kind: str, spec, lora_folder) -> dict:
    """sd.cpp's feature flags of a mode, from the model's tasks and its row."""
    has = (lambda task: spec is not None and spec.task(task) is not None)
    common = {"lora": bool(lora_folder), "vae_tiling": True,
              "cache": spec is not None and "taylorseer" in spec.step_caches,
              "cancel_queued": True, "cancel_generating": True}
    if kind == "img_gen":
        return {"init_image": has("img2img"), "mask_image": has("inpaint"), "control_image": False,
                "ip_adapter_image": False, "ref_images": has("edit"), **common, "hires": has("img2img")}
    return {"init_image": has("i2v"), "end_image": False, "control_frames": False,
            "high_noise_sample_params": False, **common}


def _b64(path: str) -> str:
    """A result file whole, as base64: sd.cpp's job `result` carries it inside the JSON answer (a video too)."""
    with open(path, "rb") as f:
        return base64.b64encode(f.read()).decode("ascii")


def add_routes(app: FastAPI, session: Session, authorized):
    """The /sdcpp/v1 routes on `app`; `authorized(request) -> bool` (Bearer, X-Engine-Token or Basic)."""
    api = SdCpp(session)

    @auth_first
    def auth(request: HttpRequest):
        if not authorized(request):
            raise CompatError(401, {"error": "unauthorized: send the engine token as a Bearer token, as "
                                             "X-Engine-Token or as the Basic auth password", "field": "authorization"},
                              {"WWW-Authenticate": REALM})

    deps = [Depends(auth)]
    # the bodies carry base64 images: they take more than the JSON default
    app.add_api_route("/sdcpp/v1/img_gen", api.img_gen, methods=["POST"], dependencies=deps, status_code=202,
                      openapi_extra=IMG_GEN_BODY, max_body_size=INLINE_IMAGES_BODY_BYTES)
    app.add_api_route("/sdcpp/v1/vid_gen", api.vid_gen, methods=["POST"], dependencies=deps, status_code=202,
                      openapi_extra=VID_GEN_BODY, max_body_size=INLINE_IMAGES_BODY_BYTES)
    app.add_api_route("/sdcpp/v1/jobs/{job_id}", api.job, methods=["GET"], dependencies=deps)
    app.add_api_route("/sdcpp/v1/jobs/{job_id}/cancel", api.cancel, methods=["POST"], dependencies=deps)
    app.add_api_route("/sdcpp/v1/capabilities", api.capabilities, methods=["GET"], dependencies=deps)
    return api

"""stable-diffusion.cpp's native asynchronous API, `/sdcpp/v1/*`, as its examples/server/api.md describes it:
`POST /sdcpp/v1/img_gen` and `/sdcpp/v1/vid_gen` answer 202 with a job at once (`id`, `poll_url`);
`GET /sdcpp/v1/jobs/{id}` gives its `status` (queued, generating, completed, failed, cancelled),
`queue_position` and, once completed, its `result` (base64 images, or the whole video file);
`POST /sdcpp/v1/jobs/{id}/cancel`; `GET /sdcpp/v1/capabilities`.

The body is sd.cpp's native schema. Each field is served as sd.cpp serves it, or answered 400 naming it
(`{"error": "<field>: <why>", "field": "<field>"}`: sd.cpp's `error` string, with the field added): a value
that asks for what is not served here (an slg scale, custom sigmas, a control image, a webm container) is
never ignored. Values that ask for nothing (sd.cpp's documented defaults: `slg.scale` 0, empty
`custom_sigmas`, `cache_mode: disabled`) pass. LoRAs come only from `lora[]` (paths of engine.lora_folder,
as capabilities lists them); `<lora:...>` in a prompt is prompt text, as in sd.cpp's server.

Beyond sd.cpp (keys its clients ignore): a body's `model` names the model (capabilities' `models`;
none: the loaded or default one, as sd.cpp has one), a job's `progress` ({step, steps}), capabilities'
`models`, and `field` in errors. A running job can be cancelled too (`cancel_generating`).

Jobs are engine requests (one, or `batch_count` of them for an arch that makes one image per pass),
submitted through the Session (`api="sdcpp"`, as the results feed records it); the job table keeps
the newest JOBS_KEPT ended jobs, the ids of older ones answer 410 as sd.cpp's expired jobs do.
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

from extensions_built_in.inference_engine.compat import inputs
from extensions_built_in.inference_engine.compat.common import (REALM, CompatError, Session, is_int, json_object,
                                                                strip_hash)
from extensions_built_in.inference_engine.http_guard import INLINE_IMAGES_BODY_BYTES, auth_first
from toolkit import hires, lora_headers, upscalers
from toolkit.errors import ConfigError
from toolkit.models.arch import MAX_SIZE
from toolkit.models.registry import ARCHS

JOBS_KEPT = 256              # ended jobs the table answers for; older ones are 410
EXPIRED_KEPT = 4096          # ids of jobs that left the table (410, not 404)
MODES = {"img_gen": "image", "vid_gen": "video"}
IMAGE_FORMATS = {"png": "png", "jpeg": "jpg", "webp": "webp"}                  # output_format -> output_ext
VIDEO_FORMATS = {"webp": ("webp", "image/webp"), "mp4": ("mp4", "video/mp4")}  # -> (output_ext, mime_type)
NOT_WRITTEN = ("webm", "avi")                                                  # sd.cpp's, no writer here
# sd.cpp's sample_method -> the engine's sampler (toolkit/samplers.py); a method without an equal here is a 400
SAMPLE_METHODS = {"euler": "euler", "euler_a": "euler_a", "heun": "heun", "dpm++2m": "dpm++_2m",
                  "dpm++2m_sde": "dpm++_2m_sde", "lcm": "lcm", "lms": "lms"}
OWN = (None, "", "default")                          # the model's own sampler / schedule
# sd.cpp's scheduler -> the sampler row's schedule ("discrete", alias "normal": the model's own spacing)
SCHEDULES = {None: "automatic", "": "automatic", "default": "automatic", "discrete": "automatic",
             "normal": "automatic", "karras": "karras"}
CACHE_MODES = {"disabled": None, "": None, "taylorseer": "taylorseer"}   # sd.cpp's cache_mode -> sample.cache
NO_LATENTS = {"latents": "none"}      # nobody streams a job's frames
CANCEL_WAIT = 1.0                     # seconds past engine.grace_seconds a cancel waits for a running job
# engine field -> sd.cpp's, so a 400 names what the client sent
FIELDS = {"sample.prompt": "prompt", "sample.negative_prompt": "negative_prompt", "sample.width": "width",
          "sample.height": "height", "sample.num_inference_steps": "sample_params.sample_steps",
          "sample.guidance_scale": "sample_params.guidance.txt_cfg", "sample.seed": "seed",
          "batch": "batch_count", "sample.batch_size": "batch_count", "sample.sampler": "sample_params.sample_method",
          "sample.init_img": "init_image", "sample.mask_img": "mask_image", "sample.strength": "strength",
          "sample.output_ext": "output_format", "sample.num_frames": "video_frames", "sample.fps": "fps",
          "sample.task": "model", "sample.hires": "hires", "sample.hires.scale": "hires.scale",
          "sample.hires.upscaler": "hires.upscaler", "sample.hires.steps": "hires.steps",
          "sample.hires.denoise": "hires.denoising_strength", "sample.cache": "cache_mode",
          "sample.vae_tiling": "vae_tiling_params.enabled", "model.loras": "lora",
          **{f"sample.{slot}": "ref_images" for slot in ("ctrl_img", "ctrl_img_1", "ctrl_img_2", "ctrl_img_3")}}

# the bodies for the OpenAPI schema (what the fuzz and a client read); sd.cpp's every field, typed
_I, _N, _S, _B = {"type": "integer"}, {"type": "number"}, {"type": "string"}, {"type": "boolean"}
_IMAGE = {"type": ["string", "null"], "description": "base64, or a data:image/...;base64, URL"}
_SLG = {"type": "object", "properties": {"layers": {"type": "array", "items": _I}, "layer_start": _N,
                                        "layer_end": _N, "scale": _N}}
_SAMPLE_PARAMS = {"type": "object", "properties": {
    "scheduler": _S, "sample_method": _S, "sample_steps": _I, "eta": {"type": ["number", "null"]},
    "shifted_timestep": _I, "custom_sigmas": {"type": "array", "items": _N}, "flow_shift": {"type": ["number", "null"]},
    "guidance": {"type": "object", "properties": {"txt_cfg": _N, "img_cfg": {"type": ["number", "null"]},
                                                  "distilled_guidance": _N, "slg": _SLG}}}}
_COMMON = {
    "model": {**_S, "description": "the model (GET /sdcpp/v1/capabilities `models`); none: the loaded or default one"},
    "prompt": _S, "negative_prompt": _S, "clip_skip": _I, "width": _I, "height": _I, "strength": _N, "seed": _I,
    "init_image": _IMAGE, "sample_params": _SAMPLE_PARAMS,
    "lora": {"type": "array", "items": {"type": "object", "required": ["path"], "properties": {
        "path": _S, "multiplier": _N, "is_high_noise": _B}}},
    "vae_tiling_params": {"type": "object", "properties": {
        "enabled": _B, "temporal_tiling": _B, "tile_size_x": _I, "tile_size_y": _I, "target_overlap": _N,
        "rel_size_x": _N, "rel_size_y": _N, "extra_tiling_args": _S}},
    "cache_mode": _S, "cache_option": _S, "scm_mask": _S, "scm_policy_dynamic": _B, "output_compression": _I}
IMG_GEN_BODY = {"requestBody": {"required": True, "content": {"application/json": {"schema": {
    "type": "object", "description": "stable-diffusion.cpp's img_gen body (examples/server/api.md there)",
    "properties": {**_COMMON, "batch_count": _I, "auto_resize_ref_image": _B, "increase_ref_index": _B,
                   "control_strength": _N, "ip_adapter_strength": _N, "embed_image_metadata": _B,
                   "ref_images": {"type": "array", "items": _S}, "mask_image": _IMAGE, "control_image": _IMAGE,
                   "ip_adapter_image": _IMAGE, "output_format": {"type": "string", "enum": list(IMAGE_FORMATS)},
                   "hires": {"type": "object", "properties": {
                       "enabled": _B, "upscaler": _S, "scale": _N, "target_width": _I, "target_height": _I,
                       "steps": _I, "denoising_strength": _N, "custom_sigmas": {"type": "array", "items": _N},
                       "upscale_tile_size": _I}}}}}}}}
VID_GEN_BODY = {"requestBody": {"required": True, "content": {"application/json": {"schema": {
    "type": "object", "description": "stable-diffusion.cpp's vid_gen body (examples/server/api.md there)",
    "properties": {**_COMMON, "video_frames": _I, "fps": _I, "moe_boundary": _N, "vace_strength": _N,
                   "end_image": _IMAGE, "control_frames": {"type": "array", "items": _S},
                   "high_noise_sample_params": _SAMPLE_PARAMS,
                   "output_format": {"type": "string", "enum": list(VIDEO_FORMATS)}}}}}}}


def error(status: int, message: str, field_name: str) -> CompatError:
    """sd.cpp's error shape, `{"error": message}`, with the field it is about."""
    return CompatError(status, {"error": message, "field": field_name})


def invalid(field_name: str, message: str) -> CompatError:
    return error(400, f"{field_name}: {message}", field_name)


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
        return all(r.finished for r in self.reqs)


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


# -- checking the body ----------------------------------------------------------------------------------

def _json_type(v) -> str:
    return ("null" if v is None else "a boolean" if isinstance(v, bool) else "a number" if isinstance(v, (int, float))
            else "a string" if isinstance(v, str) else "an array" if isinstance(v, list) else "an object")


def _typed(obj: dict, key: str, where: str, kind: str, default=None):
    """obj[key] checked to be a JSON `kind` (integer, number, string, boolean, object, array); absent or
    null: `default`."""
    v = obj.get(key)
    if v is None:
        return default
    ok = {"integer": is_int(v), "number": not isinstance(v, bool) and isinstance(v, (int, float)),
          "string": isinstance(v, str), "boolean": isinstance(v, bool), "object": isinstance(v, dict),
          "array": isinstance(v, list)}[kind]
    if not ok:
        raise invalid(where, f"must be {'an' if kind[0] in 'aeiou' else 'a'} {kind}, got {_json_type(v)}")
    return int(v) if kind == "integer" else float(v) if kind == "number" else v


def _only(obj: dict, key: str, where: str, kind: str, allowed, why: str):
    """A field checked for its type whose only served values are `allowed` (what asks for nothing)."""
    v = _typed(obj, key, where, kind)
    if v is not None and v not in allowed:
        raise invalid(where, f"{v!r} is not served here: {why}")
    return v


def _sampler(params: dict, where: str, spec) -> str | None:
    """sd.cpp's sample_method and scheduler as one of the model's samplers (None: its own)."""
    method = _typed(params, "sample_method", f"{where}.sample_method", "string")
    scheduler = _typed(params, "scheduler", f"{where}.scheduler", "string")
    if scheduler not in SCHEDULES:
        raise invalid(f"{where}.scheduler", f"{scheduler!r} is not served here (served: discrete, normal, karras)")
    schedule = SCHEDULES[scheduler]
    rows = spec.samplers()
    if method in OWN:
        if schedule != "automatic":
            raise invalid(f"{where}.scheduler", f"{scheduler!r} needs a sample_method")
        return None
    served = [m for m, ours in SAMPLE_METHODS.items() if any(s.name == ours for s in rows)]
    base = next((s for s in rows if s.name == SAMPLE_METHODS.get(method)), None)
    if base is None:
        raise invalid(f"{where}.sample_method", f"{method!r} is not served for this model (its sample methods: "
                      f"{', '.join(served) or 'only its own'})")
    if schedule == "automatic":
        return base.name
    hit = next((s for s in rows if s.label == base.label and s.schedule == schedule), None)
    if hit is None:
        raise invalid(f"{where}.scheduler", f"{method!r} has no {scheduler} schedule for this model")
    return hit.name


def _sample_params(body: dict, key: str, spec) -> dict:
    """The engine's sample keys from sd.cpp's sample_params (or high_noise_sample_params)."""
    params = _typed(body, key, key, "object", {})
    out = {"sampler": _sampler(params, key, spec)}
    steps = _typed(params, "sample_steps", f"{key}.sample_steps", "integer")
    if steps is not None and steps > 0:             # sd.cpp's -1 / 0: the default
        out["num_inference_steps"] = steps
    _typed(params, "eta", f"{key}.eta", "number")   # the ancestral samplers' eta is 1 here
    _only(params, "shifted_timestep", f"{key}.shifted_timestep", "integer", (0,), "the model's own timesteps run")
    if _typed(params, "custom_sigmas", f"{key}.custom_sigmas", "array", []):
        raise invalid(f"{key}.custom_sigmas", "is not served here: the sampler's schedule runs (send [])")
    _only(params, "flow_shift", f"{key}.flow_shift", "number", (0.0,), "the model's own shift applies (send 0 or null)")
    guidance = _typed(params, "guidance", f"{key}.guidance", "object", {})
    cfg = _typed(guidance, "txt_cfg", f"{key}.guidance.txt_cfg", "number")
    if cfg is not None:
        out["guidance_scale"] = cfg
    _typed(guidance, "img_cfg", f"{key}.guidance.img_cfg", "number")
    _typed(guidance, "distilled_guidance", f"{key}.guidance.distilled_guidance", "number")
    slg = _typed(guidance, "slg", f"{key}.guidance.slg", "object", {})
    layers = _typed(slg, "layers", f"{key}.guidance.slg.layers", "array", [])
    if not all(is_int(v) for v in layers):
        raise invalid(f"{key}.guidance.slg.layers", "must be an array of integers")
    for name in ("layer_start", "layer_end"):
        _typed(slg, name, f"{key}.guidance.slg.{name}", "number")
    _only(slg, "scale", f"{key}.guidance.slg.scale", "number", (0.0,), "skip-layer guidance is not served (send 0)")
    return {k: v for k, v in out.items() if v is not None}


def _loras(body: dict, folder: str | None) -> tuple[list, dict]:
    """(model.loras, their fields) from sd.cpp's `lora` array: paths as capabilities lists them."""
    entries = _typed(body, "lora", "lora", "array", [])
    out, fields = [], {}
    for i, entry in enumerate(entries):
        where = f"lora[{i}]"
        if not isinstance(entry, dict):
            raise invalid(where, f"must be an object {{path, multiplier, is_high_noise}}, got {_json_type(entry)}")
        path = _typed(entry, "path", f"{where}.path", "string")
        if not path:
            raise invalid(f"{where}.path", "is required (a path from GET /sdcpp/v1/capabilities loras)")
        scale = _typed(entry, "multiplier", f"{where}.multiplier", "number", 1.0)
        if _typed(entry, "is_high_noise", f"{where}.is_high_noise", "boolean", False):
            raise invalid(f"{where}.is_high_noise", "is not served here: a LoRA applies to the whole model")
        if not folder:
            raise invalid(f"{where}.path", "this engine has no LoRA folder (engine.lora_folder)")
        try:
            rel = lora_headers.find_lora(folder, path)
        except LookupError as e:
            raise invalid(f"{where}.path", str(e))
        out.append({"path": rel, "scale": scale})
        fields.update({f"model.loras[{i}]": where, f"model.loras[{i}].path": f"{where}.path",
                       f"model.loras[{i}].scale": f"{where}.multiplier"})
    return out, fields


def _output(body: dict, kind: str) -> tuple[str, str]:
    """(sd.cpp's output_format, the engine's output_ext)."""
    _typed(body, "output_compression", "output_compression", "integer")
    fmt = _typed(body, "output_format", "output_format", "string")
    table = IMAGE_FORMATS if kind == "img_gen" else {k: ext for k, (ext, _mime) in VIDEO_FORMATS.items()}
    if fmt is None:
        fmt = next(iter(table))
    if fmt not in table:
        why = " (no writer for it here)" if fmt in NOT_WRITTEN and kind == "vid_gen" else ""
        raise invalid("output_format", f"{fmt!r} is not served{why}: one of {', '.join(table)}")
    return fmt, table[fmt]


def _common(body: dict, kind: str, spec) -> dict:
    """The sample keys both modes share, every other shared field checked."""
    sample = {}
    for key in ("prompt", "negative_prompt"):
        v = _typed(body, key, key, "string")
        if v:
            sample[key] = v
    sample.setdefault("prompt", "")
    clip = _typed(body, "clip_skip", "clip_skip", "integer")
    if clip is not None and clip > 1:
        raise invalid("clip_skip", f"{clip} is not served here: the text encoder's last layer is used (-1, 0 or 1)")
    for key in ("width", "height"):
        v = _typed(body, key, key, "integer")
        if v is not None:
            if not 1 <= v <= MAX_SIZE:
                raise invalid(key, f"must be from 1 to {MAX_SIZE}, got {v}")
            sample[key] = v
    seed = _typed(body, "seed", "seed", "integer", -1)
    if seed < -1:
        raise invalid("seed", f"must be -1 (random) or an integer >= 0, got {seed}")
    sample["seed"] = seed
    sample.update(_sample_params(body, "sample_params", spec))
    tiling = _typed(body, "vae_tiling_params", "vae_tiling_params", "object", {})
    for key, t in (("enabled", "boolean"), ("temporal_tiling", "boolean"), ("tile_size_x", "integer"),
                   ("tile_size_y", "integer"), ("target_overlap", "number"), ("rel_size_x", "number"),
                   ("rel_size_y", "number"), ("extra_tiling_args", "string")):
        _typed(tiling, key, f"vae_tiling_params.{key}", t)
    if tiling.get("enabled") is True:
        sample["vae_tiling"] = "on"           # false: tiled only where the whole decode would not fit (auto)
    mode = _typed(body, "cache_mode", "cache_mode", "string")
    if mode not in (None, *CACHE_MODES):
        raise invalid("cache_mode", f"{mode!r} is not served here (served: {', '.join(k for k in CACHE_MODES if k)})")
    if CACHE_MODES.get(mode):
        sample["cache"] = {"type": CACHE_MODES[mode]}
    if _typed(body, "cache_option", "cache_option", "string"):
        raise invalid("cache_option", "is not served here: the cache runs with the arch's parameters (send \"\")")
    if _typed(body, "scm_mask", "scm_mask", "string"):
        raise invalid("scm_mask", "is not served here (send \"\")")
    _typed(body, "scm_policy_dynamic", "scm_policy_dynamic", "boolean")
    return sample


def _image(body: dict, key: str) -> str | None:
    v = _typed(body, key, key, "string")
    return v or None


def _hires(body: dict, width: int, height: int) -> dict | None:
    """sample.hires from sd.cpp's `hires` (None unless enabled), its scale from target_width/height
    where given (0: `scale`)."""
    h = _typed(body, "hires", "hires", "object", {})
    enabled = _typed(h, "enabled", "hires.enabled", "boolean", False)
    upscaler = _typed(h, "upscaler", "hires.upscaler", "string")
    scale = _typed(h, "scale", "hires.scale", "number")
    targets = [_typed(h, k, f"hires.{k}", "integer", 0) for k in ("target_width", "target_height")]
    steps = _typed(h, "steps", "hires.steps", "integer", 0)
    denoise = _typed(h, "denoising_strength", "hires.denoising_strength", "number")
    _typed(h, "upscale_tile_size", "hires.upscale_tile_size", "integer")
    if _typed(h, "custom_sigmas", "hires.custom_sigmas", "array", []):
        raise invalid("hires.custom_sigmas", "is not served here: the schedule is trimmed by denoising_strength "
                      "(send [])")
    if not enabled:
        return None
    out = {"upscaler": "Lanczos" if upscaler == "None" else upscaler or "Latent"}
    for key, v in zip(("target_width", "target_height"), targets):
        if v < 0:
            raise invalid(f"hires.{key}", f"must be >= 0 (0: use scale), got {v}")
    if any(targets):
        out["scale"] = max(targets[0] / width if targets[0] else 0, targets[1] / height if targets[1] else 0)
    elif scale is not None:
        out["scale"] = scale
    if steps < 0:
        raise invalid("hires.steps", f"must be >= 0 (0: the base steps), got {steps}")
    if steps:
        out["steps"] = steps
    if denoise is not None:
        out["denoise"] = denoise
    return out


def _prepare(images: dict) -> dict:
    """{sample input: data URL} from {(sample input, client field): base64}, each checked first."""
    out = {}
    for (slot, where), value in images.items():
        data = inputs.decode_b64_image(value, where)
        inputs.check(data, where)
        out[slot] = inputs.data_url(data)
    return out


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
            raise invalid("model", f"must be a model name (a string), got {_json_type(name)}")
        name = strip_hash(name) if name else None
        try:
            model = self.session.model_for(name)
        except ConfigError as e:
            raise invalid("model", e.message if e.key in ("model", "model.profile", "") else e.one_line())
        spec = ARCHS.get(model.get("arch"))
        if spec is None:
            raise invalid("model", f"unknown arch {model.get('arch')!r}")
        if spec.modality != MODES[kind]:
            which = repr(name) if name else f"the loaded model ({self.session.current_name() or spec.name})"
            raise invalid("model", f"{which} is a {spec.modality} model: it does not support {kind} (name a "
                          f"{MODES[kind]} model: GET /sdcpp/v1/capabilities lists them with their mode)")
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
        sample = _common(body, kind, spec)
        fmt, sample["output_ext"] = _output(body, kind)
        loras, lora_fields = await asyncio.to_thread(_loras, body, self.engine.lora_folder)
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
            hr = _hires(body, gen.width, gen.height)
            if hr is not None:
                sample["hires"] = hr
        try:
            sample.update(await asyncio.to_thread(_prepare, images))
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
        job = Job(id=f"job_{uuid.uuid4().hex[:16]}", kind=kind, reqs=reqs, created=int(time.time()),
                  output_format=fmt)
        self.jobs.add(job)
        self.jobs.prune(self.session.forget)
        return JSONResponse({"id": job.id, "kind": kind, "status": "queued", "created": job.created,
                             "poll_url": f"/sdcpp/v1/jobs/{job.id}"}, status_code=202)

    def _image_fields(self, body: dict, spec, sample: dict) -> tuple[dict, int]:
        """img_gen's own fields: ({(sample input, field): base64}, batch_count); the task set from the images."""
        count = _typed(body, "batch_count", "batch_count", "integer", 1)
        if not 1 <= count <= self.engine.limits.max_batch:
            raise invalid("batch_count", f"must be from 1 to {self.engine.limits.max_batch}, got {count}")
        for key in ("auto_resize_ref_image", "increase_ref_index"):
            _typed(body, key, key, "boolean")
        _only(body, "embed_image_metadata", "embed_image_metadata", "boolean", (True,),
              "the engine writes its settings into every file it makes")
        for key in ("control_strength", "ip_adapter_strength"):
            _typed(body, key, key, "number")
        for key, why in (("control_image", "name a ControlNet per request on /sdapi/v1 (alwayson_scripts) or "
                                           "/generate (sample.controls)"),
                         ("ip_adapter_image", "name an IP-Adapter per request on /generate (sample.ip_adapter)")):
            if _image(body, key):
                raise invalid(key, f"is not served here: {why}")
        strength = _typed(body, "strength", "strength", "number")
        init, mask = _image(body, "init_image"), _image(body, "mask_image")
        refs = _typed(body, "ref_images", "ref_images", "array", [])
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
        frames = _typed(body, "video_frames", "video_frames", "integer")
        if frames is not None:
            if frames < 1:
                raise invalid("video_frames", f"must be >= 1, got {frames}")
            sample["num_frames"] = frames
        fps = _typed(body, "fps", "fps", "integer")
        if fps is not None:
            if fps < 1:
                raise invalid("fps", f"must be >= 1, got {fps}")
            sample["fps"] = fps
        for key in ("moe_boundary", "vace_strength", "strength"):
            _typed(body, key, key, "number")
        _sample_params(body, "high_noise_sample_params", spec)      # checked: one setting runs both stages here
        if _image(body, "end_image"):
            raise invalid("end_image", "is not served here: a video starts from init_image only")
        if _typed(body, "control_frames", "control_frames", "array", []):
            raise invalid("control_frames", "is not served here (send [])")
        images = {}
        init = _image(body, "init_image")
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
            "schedulers": ["discrete", "normal", *(["karras"] if any(s.schedule == "karras" for s in rows) else [])],
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

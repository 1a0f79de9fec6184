"""Compatibility routes for clients that already exist: the A1111 / stable-diffusion.cpp
`/sdapi/v1/*` API (SillyTavern, SD.Next-style clients, webuiapi) and OpenAI's
`/v1/images/generations` + `/v1/models`.

They are thin: every generation goes through `Engine.submit`, the same FIFO as `/generate`, and
the waits run on worker threads (asyncio.to_thread), so the event loop never blocks. A client
names models by name only; `resolve_model(name)` (the owner's: a profile, an arch, or None for
the current/default model) turns a name into a model dict for `Engine.submit`.

Auth: the engine token as `Authorization: Bearer <token>`, as `X-Engine-Token`, or as the
password of HTTP Basic auth with any user name (A1111 clients' `--api-auth user:pass`).

    route = compat_routes(engine.model_for_name, engine.model_names, engine=engine)
    app = create_app(engine, token, extra_routes=[route])
    extra = serve_compat_on_port(engine, token, route, port)      # optional fixed port
"""
import asyncio
import base64
import binascii
import io
import json
import math
import os
import random
import re
import threading
import time
from types import SimpleNamespace

import numpy as np
from fastapi import Depends, FastAPI, HTTPException, Request as HttpRequest
from fastapi.responses import FileResponse, JSONResponse

from extensions_built_in.inference_engine.engine import EngineBusy
from extensions_built_in.inference_engine.protocol import FrameReader
from toolkit.errors import ConfigError
from toolkit.models.registry import ARCHS

MAX_IMAGES = 16                  # per A1111 call (batch_size * n_iter)
OPENAI_MAX_N = 10                # OpenAI's own limit for n
PREVIEW_MAX_SIDE = 512           # /progress current_image
WAIT_POLL = 0.5                  # seconds per wait on a worker thread (a cancelled wait frees it this soon)
REALM = 'Basic realm="aitk-engine", charset="UTF-8"'

# engine field -> the client's field, so a 422/400 names what the client sent
A1111_FIELDS = {"sample.prompt": "prompt", "sample.negative_prompt": "negative_prompt", "sample.width": "width",
                "sample.height": "height", "sample.num_inference_steps": "steps", "sample.guidance_scale": "cfg_scale",
                "sample.seed": "seed", "batch": "batch_size"}
OPENAI_FIELDS = {"sample.prompt": "prompt", "sample.negative_prompt": "negative_prompt", "sample.width": "size",
                 "sample.height": "size", "sample.num_inference_steps": "num_inference_steps",
                 "sample.guidance_scale": "guidance_scale", "sample.seed": "seed", "batch": "n"}
# diffusers scheduler class -> the A1111-style sampler name shown to clients
SCHEDULER_LABELS = {
    "FlowMatchEulerDiscreteScheduler": "Euler (flow matching)", "FlowMatchHeunDiscreteScheduler": "Heun (flow matching)",
    "EulerDiscreteScheduler": "Euler", "EulerAncestralDiscreteScheduler": "Euler a", "DDIMScheduler": "DDIM",
    "PNDMScheduler": "PLMS (PNDM)", "UniPCMultistepScheduler": "UniPC", "DPMSolverMultistepScheduler": "DPM++ 2M",
    "DPMSolverSinglestepScheduler": "DPM++ SDE", "LMSDiscreteScheduler": "LMS", "HeunDiscreteScheduler": "Heun",
    "DDPMScheduler": "DDPM", "KDPM2DiscreteScheduler": "DPM2", "KDPM2AncestralDiscreteScheduler": "DPM2 a",
}
SAMPLER_NOTE = "the model's own scheduler; sampler_name and scheduler in requests are accepted and ignored"


class CompatError(Exception):
    """An answer in the client family's own error shape."""

    def __init__(self, status: int, body, headers: dict | None = None):
        super().__init__(str(body))
        self.status, self.body, self.headers = status, body, headers


async def _compat_error(_request, exc: CompatError):
    return JSONResponse(exc.body, status_code=exc.status, headers=exc.headers)


def a1111_invalid(field: str, message: str) -> CompatError:
    """FastAPI's 422 validation shape (what A1111 answers), naming the field in loc and msg."""
    return CompatError(422, {"detail": [{"loc": ["body", *field.split(".")], "msg": f"{field}: {message}",
                                         "type": "value_error"}]})


def a1111_failed(kind: str, message: str, status: int = 500) -> CompatError:
    """A1111's error shape for a failed job."""
    return CompatError(status, {"error": kind, "detail": message, "body": "", "errors": message})


def openai_error(status: int, message: str, param: str | None = None, code: str | None = None,
                 kind: str = "invalid_request_error") -> CompatError:
    return CompatError(status, {"error": {"message": message, "type": kind, "param": param, "code": code}})


def _client_field(key: str, table: dict, model_field: str) -> str:
    if key == "model" or key.startswith("model."):
        return model_field
    return table.get(key, key)


# -- auth --------------------------------------------------------------------------------------------

def basic_password(authorization: str) -> str | None:
    """The password of an `Authorization: Basic base64(user:pass)` header (any user), else None."""
    if not authorization[:6].lower() == "basic ":
        return None
    try:
        decoded = base64.b64decode(authorization[6:].strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None
    _user, sep, password = decoded.partition(":")
    return password if sep and password else None




def auth_checker(require_token):
    """request -> bool: the token as X-Engine-Token or Bearer (checked by `require_token`, which
    compares in constant time), or as the Basic auth password (checked the same way)."""
    def ok(request) -> bool:
        try:
            require_token(request)
            return True
        except HTTPException:
            pass
        password = basic_password(request.headers.get("authorization", ""))
        if password is None:
            return False
        try:
            require_token(SimpleNamespace(headers={"x-engine-token": password}))
            return True
        except HTTPException:
            return False
    return ok


# -- previews ----------------------------------------------------------------------------------------

def latent_png_b64(frame: bytes, spec, max_side: int = PREVIEW_MAX_SIDE) -> str | None:
    """A `latent` frame as a small base64 PNG, by the projection in docs/engine_api.md; None for
    audio or an unreadable frame."""
    from PIL import Image

    try:
        header, payload = FrameReader().feed(frame)[0]
        arr = np.frombuffer(payload, dtype="<f2").reshape(header["shape"]).astype(np.float32)
    except Exception:
        return None
    layout = header.get("layout")
    if layout == "BCFHW":
        arr = arr[:, :, 0]                       # the first frame
    elif layout != "BCHW":
        return None
    x = arr[0]                                   # C, H, W
    c, h, w = x.shape
    fam = spec.latents.format
    if fam is not None and len(fam.rgb_factors) == c:
        rgb = np.einsum("chw,ck->hwk", x, np.asarray(fam.rgb_factors, dtype=np.float32))
        if fam.rgb_bias:
            rgb += np.asarray(fam.rgb_bias, dtype=np.float32)
        img = np.round(np.clip((rgb + 1) / 2, 0, 1) * 255)
    else:
        chans = [x[i] if i < c else x[0] for i in range(3)]
        img = np.stack([(ch - ch.min()) / max(float(ch.max() - ch.min()), 1e-8) * 255 for ch in chans], axis=-1)
    img = np.nan_to_num(img).astype(np.uint8)
    scale = max(1, min(spec.latents.spatial, max_side // max(h, w, 1)))
    pil = Image.fromarray(img, "RGB")
    if scale > 1:
        pil = pil.resize((w * scale, h * scale), Image.Resampling.BILINEAR)
    buf = io.BytesIO()
    pil.save(buf, format="PNG")
    return base64.b64encode(buf.getvalue()).decode("ascii")


# -- the routes --------------------------------------------------------------------------------------

def _is_int(v) -> bool:
    return not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v) and v == int(v)


def _strip_hash(name: str) -> str:
    """A1111 titles read "name [hash]"; clients send the title back."""
    return re.sub(r"\s*\[[0-9a-fA-F]{6,64}\]\s*$", "", name.strip())


class Compat:
    """State shared by every app serving these routes (the engine port and the compat port):
    the model chosen through /sdapi/v1/options, running batches, the last preview."""

    def __init__(self, resolve_model, list_models, engine=None):
        self.engine = engine
        self.resolve_model = resolve_model or (lambda name: engine.model_for_name(name))
        self.list_models = list_models or (lambda: engine.model_names())
        self.selected: str | None = None        # /sdapi/v1/options sd_model_checkpoint
        self.options: dict = {}                 # other options a client set (echoed back)
        self.last_used: tuple | None = None     # (name, ModelConfig) of the last compat request
        self.batches: dict = {}                 # request_id -> (list of Requests of one call, index)
        self.lock = threading.Lock()
        self._preview = (None, -1, None)        # (request_id, step, b64)

    # -- models --------------------------------------------------------------------------------
    def resolve(self, name, field: str, err) -> tuple[dict, str | None]:
        """(model dict, the name to report) for a client's model name; `err(field, message)`."""
        if name is not None and not isinstance(name, str):
            raise err(field, f"must be a model name (a string), got {name!r}")
        name = _strip_hash(name) if name else None
        try:
            model = self.resolve_model(name or None)
        except ConfigError as e:
            raise err(field, e.message if e.key in ("model", "model.profile", "") else e.one_line())
        arch = self._arch_of(model)
        if arch in ARCHS and ARCHS[arch].modality != "image":
            raise err(field, f"{name or arch!r} is a {ARCHS[arch].modality} model; this route makes images")
        return model, name

    def _arch_of(self, model) -> str | None:
        if isinstance(model, dict) and isinstance(model.get("arch"), str):
            return model["arch"]
        resolve = getattr(self.engine, "resolve", None)    # profiles: the engine knows their arch
        if resolve is not None:
            try:
                return resolve(model, {})[0].arch
            except Exception:
                return None                             # submit will say what is wrong
        return None

    def image_model_names(self) -> list[str]:
        names = []
        for name in self.list_models():
            try:
                arch = self._arch_of(self.resolve_model(name))
            except Exception:
                arch = None                             # listed; a generation will name the problem
            if arch not in ARCHS or ARCHS[arch].modality == "image":
                names.append(name)
        return names

    def current_name(self) -> str:
        """The model later calls use when they name none, as a client-facing name."""
        if self.selected:
            return self.selected
        active = self.engine.active_config
        if active is not None:
            if self.last_used and self.last_used[1] == active and self.last_used[0]:
                return self.last_used[0]
            return getattr(active, "profile", None) or active.arch
        try:
            model = self.resolve_model(None)
        except Exception:
            model = None
        if isinstance(model, str):
            return model
        if isinstance(model, dict):
            return model.get("profile") or model.get("arch") or ""
        return ""                                       # no model loaded and no default: none to name

    def sampler_label(self, mc=None) -> tuple[str, str | None]:
        """(label, scheduler class) of the model that runs (or ran) `mc`, else the active one."""
        engine = self.engine
        cls = engine.scheduler_name()
        if cls is None or (mc is not None and engine.active_config != mc):
            return "Default", None
        return SCHEDULER_LABELS.get(cls, cls), cls

    # -- running ---------------------------------------------------------------------------------
    def submit_all(self, model: dict, samples: list, err, table: dict, model_field: str) -> list:
        reqs = []
        try:
            self.engine.check_batch(len(samples))      # engine.limits.max_batch, before any is queued
            for sample in samples:
                reqs.append(self.engine.submit(model, sample, None))
        except ConfigError as e:
            self.cancel_all(reqs)
            raise err(_client_field(e.key, table, model_field), e.message)
        except EngineBusy as e:
            self.cancel_all(reqs)
            busy = err("engine", str(e))
            busy.status = 503
            raise busy
        except BaseException:
            self.cancel_all(reqs)
            raise
        with self.lock:
            for i, r in enumerate(reqs):
                self.batches[r.request_id] = (reqs, i)
        return reqs

    def cancel_all(self, reqs):
        for r in reqs:
            self.engine.cancel(r.request_id)

    async def wait_all(self, reqs, http_request: HttpRequest | None):
        """Wait (on a worker thread) until every request ends; a client that goes away cancels them."""
        async def all_done():
            for r in reqs:
                while not await asyncio.to_thread(r.done_event.wait, WAIT_POLL):
                    pass
        waiter = asyncio.ensure_future(all_done())
        gone = asyncio.ensure_future(_disconnected(http_request)) if http_request is not None else None
        try:
            done, _pending = await asyncio.wait([waiter] + ([gone] if gone else []),
                                                return_when=asyncio.FIRST_COMPLETED)
            if waiter not in done:
                self.cancel_all(reqs)
        finally:
            for task in (waiter, gone):
                if task is not None and not task.done():
                    task.cancel()
            with self.lock:
                for r in reqs:
                    self.batches.pop(r.request_id, None)

    @staticmethod
    def read_images(reqs) -> list:
        """[(request, result, base64 bytes)] of every image produced."""
        out = []
        for r in reqs:
            if r.status != "ok":
                continue
            for res in r.results:
                if res.get("kind") == "image":
                    with open(res["path"], "rb") as f:
                        out.append((r, res, base64.b64encode(f.read()).decode("ascii")))
        return out

    # -- A1111 -----------------------------------------------------------------------------------
    async def txt2img(self, request: HttpRequest):
        body = await _json_object(request, a1111_invalid)
        prompt = body.get("prompt") or ""
        negative = body.get("negative_prompt") or ""
        for field, v in (("prompt", prompt), ("negative_prompt", negative)):
            if not isinstance(v, str):
                raise a1111_invalid(field, f"must be a string, got {type(v).__name__}")
        counts = {}
        for field in ("batch_size", "n_iter"):
            v = body.get(field)
            v = 1 if v is None else v
            if not _is_int(v) or not 1 <= v <= MAX_IMAGES:
                raise a1111_invalid(field, f"must be an integer from 1 to {MAX_IMAGES}, got {v!r}")
            counts[field] = int(v)
        count = counts["batch_size"] * counts["n_iter"]
        if count > MAX_IMAGES:
            raise a1111_invalid("batch_size", f"batch_size * n_iter must be <= {MAX_IMAGES}, got {count}")
        seed = body.get("seed")
        seed = -1 if seed is None or seed == "" else seed
        if not _is_int(seed) or int(seed) < -1:
            raise a1111_invalid("seed", f"must be -1 (random) or an integer >= 0, got {seed!r}")
        seed = int(seed)
        base_seed = random.randrange(0, 2**31) if seed == -1 else seed
        overrides = body.get("override_settings") or {}
        if not isinstance(overrides, dict):
            raise a1111_invalid("override_settings", "must be an object")
        name = overrides.get("sd_model_checkpoint") or self.selected
        model, name = await asyncio.to_thread(self.resolve, name, "override_settings.sd_model_checkpoint",
                                              a1111_invalid)
        sample = {"prompt": prompt, "output_ext": "png"}
        if negative:
            sample["negative_prompt"] = negative
        for ours, theirs in (("width", "width"), ("height", "height"), ("num_inference_steps", "steps"),
                             ("guidance_scale", "cfg_scale")):
            if body.get(theirs) is not None:
                sample[ours] = body[theirs]
        samples = [{**sample, "seed": base_seed + i} for i in range(count)]
        reqs = await asyncio.to_thread(self.submit_all, model, samples, a1111_invalid, A1111_FIELDS,
                                       "override_settings.sd_model_checkpoint")
        self.last_used = (name, reqs[0].model)
        started = time.time()
        await self.wait_all(reqs, request)
        errors = [r.error for r in reqs if r.status == "error"]
        if errors:
            raise a1111_failed("GenerationError", errors[0])
        images = await asyncio.to_thread(self.read_images, reqs)
        interrupted = any(r.status == "cancelled" for r in reqs)
        info = self._a1111_info(reqs, name, prompt, negative, counts, started, interrupted)
        parameters = {k: v for k, v in body.items() if k != "auth"}     # SillyTavern puts its auth here
        send = body.get("send_images", True) is not False
        return {"images": [b64 for _r, _res, b64 in images] if send else [], "parameters": parameters,
                "info": json.dumps(info)}

    def _a1111_info(self, reqs, name, prompt, negative, counts, started, interrupted) -> dict:
        first = reqs[0].sample
        seeds = [r.sample.seed for r in reqs]
        sampler, _cls = self.sampler_label(reqs[0].model)
        model_name = name or self.current_name()
        warnings = sorted({w for r in reqs for w in getattr(r.sample, "warnings", None) or ()})
        stamp = time.strftime("%Y%m%d%H%M%S", time.localtime(started))

        def infotext(s):
            lines = [prompt]
            if negative:
                lines.append(f"Negative prompt: {negative}")
            lines.append(f"Steps: {first.num_inference_steps}, Sampler: {sampler}, CFG scale: {first.guidance_scale}, "
                         f"Seed: {s}, Size: {first.width}x{first.height}, Model: {model_name}, Version: aitk-engine")
            return "\n".join(lines)
        return {"prompt": prompt, "all_prompts": [prompt] * len(reqs), "negative_prompt": negative,
                "all_negative_prompts": [negative] * len(reqs), "seed": seeds[0], "all_seeds": seeds,
                "subseed": -1, "all_subseeds": [-1] * len(reqs), "subseed_strength": 0,
                "width": first.width, "height": first.height, "sampler_name": sampler,
                "cfg_scale": first.guidance_scale, "steps": first.num_inference_steps,
                "batch_size": counts["batch_size"], "n_iter": counts["n_iter"], "restore_faces": False,
                "face_restoration_model": None, "sd_model_name": model_name, "sd_model_hash": None,
                "sd_vae_name": None, "sd_vae_hash": None, "seed_resize_from_w": -1, "seed_resize_from_h": -1,
                "denoising_strength": None, "extra_generation_params": {}, "index_of_first_image": 0,
                "infotexts": [infotext(s) for r, s in zip(reqs, seeds) if r.status == "ok"], "styles": [],
                "job_timestamp": stamp, "clip_skip": 1, "is_using_inpainting_conditioning": False,
                "version": "aitk-engine", "interrupted": interrupted, "warnings": warnings,
                "request_ids": [r.request_id for r in reqs]}

    def sd_models(self):
        return [{"title": n, "model_name": n, "hash": None, "sha256": None, "filename": n, "config": None}
                for n in self.image_model_names()]

    def get_options(self):
        return {**self.options, "sd_model_checkpoint": self.current_name(), "sd_checkpoint_hash": None,
                "samples_format": "png", "sd_vae": "Automatic"}

    async def set_options(self, request: HttpRequest):
        body = await _json_object(request, a1111_invalid)
        name = body.get("sd_model_checkpoint")
        if name is not None:
            _model, name = await asyncio.to_thread(self.resolve, name, "sd_model_checkpoint", a1111_invalid)
        for k, v in body.items():
            if k != "sd_model_checkpoint" and len(self.options) < 256 and isinstance(v, (str, int, float, bool)):
                self.options[k] = v
        if name is not None:
            self.selected = name
        return None

    def progress(self, skip_current_image: bool = False):
        req = self.engine.running_request()
        queued = self.engine.queue_length()
        if req is None or req.status != "running":
            return {"progress": 0.0, "eta_relative": 0.0,
                    "state": {"skipped": False, "interrupted": False, "job": "", "job_count": queued,
                              "job_timestamp": "0", "job_no": 0, "sampling_step": 0, "sampling_steps": 0},
                    "current_image": None, "textinfo": "Waiting" if queued else None}
        with self.lock:
            batch, index = self.batches.get(req.request_id, ([req], 0))
        step, total = req.step, req.total
        frac = step / total if total else 0.0
        progress = (index + frac) / len(batch)
        t0 = batch[0].started_at or req.started_at or time.time()
        elapsed = max(time.time() - t0, 0.0)
        eta = elapsed / progress - elapsed if progress > 0 else 0.0
        image = None if skip_current_image else self._current_image(req)
        return {"progress": round(progress, 4), "eta_relative": round(eta, 3),
                "state": {"skipped": False, "interrupted": req.cancel_event.is_set(), "job": req.request_id,
                          "job_count": len(batch) + max(0, queued - sum(r.status == "queued" for r in batch)),
                          "job_timestamp": time.strftime("%Y%m%d%H%M%S", time.localtime(t0)),
                          "job_no": index, "sampling_step": step, "sampling_steps": total},
                "current_image": image,
                "textinfo": f"Sampling step {step}/{total}" if total else "Loading the model"}

    def _current_image(self, req) -> str | None:
        frame = req.latest_latent
        if frame is None:
            return None
        rid, step, cached = self._preview
        if rid == req.request_id and step == req.step:
            return cached
        image = latent_png_b64(frame, req.model.spec)
        self._preview = (req.request_id, req.step, image)
        return image

    def interrupt(self):
        """A1111's interrupt: the running request and the rest of its call's batch."""
        req = self.engine.running_request()
        if req is not None:
            with self.lock:
                batch, _i = self.batches.get(req.request_id, ([req], 0))
            self.cancel_all([req] + [r for r in batch if r is not req])
        return {}

    def skip(self):
        """A1111's skip: only the image being made now; the rest of the batch goes on."""
        req = self.engine.running_request()
        if req is not None:
            self.engine.cancel(req.request_id)
        return {}

    def samplers(self):
        label, cls = self.sampler_label()
        if cls is None:
            return [{"name": "Default", "aliases": ["model default"],
                     "options": {"note": SAMPLER_NOTE + " (load a model to see which it is)"}}]
        return [{"name": label, "aliases": [cls, "default"], "options": {"scheduler": cls, "note": SAMPLER_NOTE}}]

    def schedulers(self):
        return [{"name": "automatic", "label": "Automatic", "aliases": None, "default_rho": -1,
                 "need_inner_model": False}]

    # -- OpenAI ----------------------------------------------------------------------------------
    async def images_generations(self, request: HttpRequest):
        def err(field, message):
            return openai_error(400, f"{field}: {message}", param=field)

        body = await _json_object(request, err)
        prompt = body.get("prompt")
        if not isinstance(prompt, str) or not prompt.strip():
            raise err("prompt", "is required (a non-empty string)")
        n = body.get("n")
        n = 1 if n is None else n
        if not _is_int(n) or not 1 <= n <= OPENAI_MAX_N:
            raise err("n", f"must be an integer from 1 to {OPENAI_MAX_N}, got {n!r}")
        fmt = body.get("response_format") or "b64_json"
        if fmt not in ("b64_json", "url"):
            raise err("response_format", f"must be 'b64_json' or 'url', got {fmt!r}")
        sample = {"prompt": prompt, "output_ext": "png"}
        size = body.get("size")
        if size not in (None, "", "auto"):
            m = re.fullmatch(r"\s*(\d{1,5})\s*[xX]\s*(\d{1,5})\s*", size) if isinstance(size, str) else None
            if not m:
                raise err("size", f"must be 'WIDTHxHEIGHT' (e.g. '1024x1024') or 'auto', got {size!r}")
            sample["width"], sample["height"] = int(m.group(1)), int(m.group(2))
        for ours, aliases in (("negative_prompt", ("negative_prompt",)),
                              ("num_inference_steps", ("num_inference_steps", "steps")),
                              ("guidance_scale", ("guidance_scale", "cfg_scale"))):
            for a in aliases:
                if body.get(a) is not None:
                    sample[ours] = body[a]
                    break
        seed = body.get("seed")
        if seed is not None and (not _is_int(seed) or seed < -1):
            raise err("seed", f"must be -1 (random) or an integer >= 0, got {seed!r}")
        seeds = [int(seed) + i if seed is not None and seed >= 0 else -1 for i in range(int(n))]
        model, name = await asyncio.to_thread(self.resolve, body.get("model"), "model", err)
        reqs = await asyncio.to_thread(self.submit_all, model, [{**sample, "seed": s} for s in seeds], err,
                                       OPENAI_FIELDS, "model")
        self.last_used = (name, reqs[0].model)
        await self.wait_all(reqs, request)
        failed = [r for r in reqs if r.status != "ok"]
        if failed:
            r = failed[0]
            raise openai_error(500, r.error or r.status, code="cancelled" if r.status == "cancelled" else None,
                               kind="server_error")
        base = str(request.base_url).rstrip("/")
        if fmt == "b64_json":
            images = await asyncio.to_thread(self.read_images, reqs)
            data = [{"b64_json": b64} for _r, _res, b64 in images]
        else:
            data = [{"url": f"{base}/outputs/{res['relpath']}"} for r in reqs for res in r.results
                    if res.get("kind") == "image"]
        first = reqs[0].sample
        return {"created": int(time.time()), "data": data, "output_format": "png",
                "size": f"{first.width}x{first.height}"}

    def openai_models(self):
        created = int(getattr(self.engine, "started_at", time.time()))
        return {"object": "list", "data": [{"id": n, "object": "model", "created": created, "owned_by": "aitk-engine"}
                                           for n in self.image_model_names()]}

    def openai_model(self, model_id: str):
        if model_id not in self.image_model_names():
            raise openai_error(404, f"model {model_id!r} does not exist", param="model", code="model_not_found")
        return {"id": model_id, "object": "model", "created": int(getattr(self.engine, "started_at", 0)),
                "owned_by": "aitk-engine"}


async def _disconnected(request: HttpRequest):
    """Returns when the client goes away. The body has been read, so the next ASGI message is the
    disconnect (Request.is_disconnected cannot see it through an @app.middleware("http") layer)."""
    while True:
        message = await request.receive()
        if message.get("type") == "http.disconnect":
            return


async def _json_object(request: HttpRequest, err) -> dict:
    try:
        body = await request.json()
    except Exception:
        raise err("body", "is not valid JSON")
    if not isinstance(body, dict):
        raise err("body", "must be a JSON object")
    return body


def _constant(value):
    def answer():
        return value
    return answer


def compat_routes(resolve_model=None, list_models=None, *, engine=None):
    """`route(app, require_token)` adding the compat routes (create_app's `extra_routes`).

    resolve_model(name | None) -> model dict for Engine.submit (ConfigError for an unknown name);
    list_models() -> [name]. Both default to the engine's `model_for_name` / `model_names`.
    The engine is `engine`, else `app.state.engine`. One route serves any number of apps (the
    engine port and the compat port) with shared state (the model set through /sdapi/v1/options)."""
    shared = {}

    def route(app: FastAPI, require_token):
        eng = engine or getattr(app.state, "engine", None)
        if eng is None:
            raise RuntimeError("compat routes need the engine: compat_routes(..., engine=engine) "
                               "or app.state.engine = engine")
        compat = shared.get("compat")
        if compat is None:
            compat = shared["compat"] = Compat(resolve_model, list_models, eng)
        route.compat = compat
        ok = auth_checker(require_token)

        def sd_auth(request: HttpRequest):
            if not ok(request):
                raise CompatError(401, {"detail": "Not authenticated: send the engine token as the Basic auth "
                                                  "password (any user name) or as a Bearer token"},
                                  {"WWW-Authenticate": REALM})

        def openai_auth(request: HttpRequest):
            if not ok(request):
                raise openai_error(401, "missing or bad engine token: send it as the API key", code="invalid_api_key")

        app.add_exception_handler(CompatError, _compat_error)
        sd, oa = [Depends(sd_auth)], [Depends(openai_auth)]
        add = app.add_api_route
        add("/sdapi/v1/txt2img", compat.txt2img, methods=["POST"], dependencies=sd)
        add("/sdapi/v1/sd-models", compat.sd_models, methods=["GET"], dependencies=sd)
        add("/sdapi/v1/options", compat.get_options, methods=["GET"], dependencies=sd)
        add("/sdapi/v1/options", compat.set_options, methods=["POST"], dependencies=sd)
        add("/sdapi/v1/progress", compat.progress, methods=["GET"], dependencies=sd)
        add("/sdapi/v1/interrupt", compat.interrupt, methods=["POST"], dependencies=sd)
        add("/sdapi/v1/skip", compat.skip, methods=["POST"], dependencies=sd)
        add("/sdapi/v1/samplers", compat.samplers, methods=["GET"], dependencies=sd)
        add("/sdapi/v1/schedulers", compat.schedulers, methods=["GET"], dependencies=sd)
        # SillyTavern asks for these when it loads its settings; nothing here upscales or swaps VAEs
        for path, answer in (("/sdapi/v1/upscalers", [{"name": "None", "model_name": None, "model_path": None,
                                                       "model_url": None, "scale": 1}]),
                             ("/sdapi/v1/latent-upscale-modes", []), ("/sdapi/v1/sd-vae", [])):
            add(path, _constant(answer), methods=["GET"], dependencies=sd)
        add("/v1/images/generations", compat.images_generations, methods=["POST"], dependencies=oa)
        add("/v1/models", compat.openai_models, methods=["GET"], dependencies=oa)
        add("/v1/models/{model_id}", compat.openai_model, methods=["GET"], dependencies=oa)

    route.compat = None
    return route


# -- a fixed extra port ------------------------------------------------------------------------------

def compat_app(engine, token: str, route) -> FastAPI:
    """An app with only the compat routes (and /outputs, for OpenAI `response_format: url`)."""
    app = FastAPI(title="AI Toolkit inference engine (compatibility API)", version="1",
                  docs_url=None, redoc_url=None, openapi_url=None)
    app.state.engine = engine
    from extensions_built_in.inference_engine.server import token_dependency
    require_token = token_dependency(token)
    route(app, require_token)
    ok = auth_checker(require_token)

    @app.get("/outputs/{relpath:path}")
    def outputs(relpath: str, request: HttpRequest):
        if not ok(request):
            raise HTTPException(401, "missing or bad engine token", headers={"WWW-Authenticate": REALM})
        root = os.path.realpath(engine.output_folder)
        full = os.path.realpath(os.path.join(root, relpath))
        if not full.startswith(root + os.sep) or not os.path.isfile(full):
            raise HTTPException(404, "no such output")
        return FileResponse(full)

    return app


def serve_compat_on_port(engine, token: str, route, port: int):
    """Serve the compat routes alone on 127.0.0.1:`port` (engine.compat_port), for clients that
    cannot read engine.json; returns the started ServerThread (call .stop() on shutdown)."""
    from extensions_built_in.inference_engine.server import ServerThread, bind_socket

    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port < 65536:
        raise ConfigError("engine.compat_port", f"must be a port number, got {port!r}")
    try:
        sock = bind_socket(port)
    except OSError as e:
        raise ConfigError("engine.compat_port", f"cannot listen on 127.0.0.1:{port}: {e.strerror or e}") from None
    server = ServerThread(compat_app(engine, token, route), sock)
    server.thread.name = "engine-compat-http"
    return server.start()

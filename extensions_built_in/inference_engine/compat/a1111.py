"""The A1111 / stable-diffusion.cpp `/sdapi/v1/*` routes (SillyTavern, SD.Next-style clients,
webuiapi): txt2img, img2img (and inpaint), models and options, LoRAs (`<lora:name:weight>` in a
prompt picks a file of engine.lora_folder), progress with a latent preview, interrupt and skip,
png-info."""
import asyncio
import base64
import binascii
import json
import random
import time
from types import SimpleNamespace

from fastapi import FastAPI, Request as HttpRequest

from extensions_built_in.inference_engine import lora_folder
from extensions_built_in.inference_engine.compat import controlnet_ext, inputs, upscale
from extensions_built_in.inference_engine.compat.common import (CompatError, Session, basic_auth, is_int,
                                                                json_object)
from extensions_built_in.inference_engine.compat.preview import latent_png_b64, preview_b64
from extensions_built_in.inference_engine.http_guard import INLINE_IMAGES_BODY_BYTES
from toolkit import samplers as sampler_table
from toolkit.errors import ConfigError
from toolkit.models.registry import ARCHS

MAX_IMAGES = 16                  # per call (batch_size * n_iter)
MODEL_FIELD = "override_settings.sd_model_checkpoint"
VAE_FIELD = "override_settings.sd_vae"
# sd_vae values that keep the checkpoint's own VAE (A1111's "Automatic" picks a same-named file, which
# nothing here names; "None" is the baked-in one)
OWN_VAE = ("", "Automatic", "None")
# /progress shows `current_image` from the worker's small JPEG previews; no latent frames are needed
PREVIEW_STREAM = {"latents": "none", "preview_image": "jpeg"}
# engine field -> the client's field, so a 422 names what the client sent
FIELDS = {"sample.prompt": "prompt", "sample.negative_prompt": "negative_prompt", "sample.width": "width",
          "sample.height": "height", "sample.num_inference_steps": "steps", "sample.guidance_scale": "cfg_scale",
          "sample.seed": "seed", "batch": "batch_size", "sample.batch_size": "batch_size",
          "sample.sampler": "sampler_name", "sample.init_img": "init_images", "sample.mask_img": "mask",
          "sample.strength": "denoising_strength", "sample.resize_mode": "resize_mode", "sample.task": MODEL_FIELD,
          "model.loras": "prompt",          # a call's LoRAs are its prompt's <lora:name:weight> tags
          **upscale.FIELDS}                 # enable_hr's fields (compat/upscale.py)
# img2img: A1111's resize_mode and inpainting_fill by number
RESIZE_MODES = {0: "resize", 1: "crop", 2: "fill", 3: "resize"}    # 3: "just resize (latent upscale)"
MASKED_CONTENT = {0: "fill", 1: "original", 2: "latent noise", 3: "latent nothing"}
MAX_MASK_BLUR = 256
# img2img's body for the OpenAPI schema (what the fuzz and a client read); other A1111 fields are accepted too
_INT, _NUM, _STR = {"type": "integer"}, {"type": "number"}, {"type": "string"}
IMG2IMG_BODY = {"requestBody": {"required": True, "content": {"application/json": {"schema": {
    "type": "object", "required": ["init_images"],
    "description": "A1111's img2img body; override_settings.sd_model_checkpoint names the model (a title from "
                   "/sdapi/v1/sd-models), else the one /sdapi/v1/options set, else the loaded or default one",
    "properties": {
        "init_images": {"type": "array", "items": _STR}, "mask": {"type": ["string", "null"]},
        "prompt": _STR, "negative_prompt": _STR, "denoising_strength": _NUM,
        "resize_mode": {"type": "integer", "enum": list(RESIZE_MODES)},
        "inpainting_fill": {"type": "integer", "enum": list(MASKED_CONTENT)}, "inpainting_mask_invert": _INT,
        "mask_blur": _NUM, "mask_blur_x": _NUM, "mask_blur_y": _NUM, "inpaint_full_res": {"type": "boolean"},
        "width": _INT, "height": _INT, "steps": _INT, "cfg_scale": _NUM, "seed": _INT, "sampler_name": _STR,
        "scheduler": _STR, "batch_size": _INT, "n_iter": _INT, "include_init_images": {"type": "boolean"},
        "override_settings": {"type": "object"}}}}}}}
DEFAULT_STRENGTH = 0.75          # A1111's denoising_strength default
DEFAULT_MASK_BLUR = 4            # A1111's mask_blur_x / mask_blur_y default
SAMPLER_NOTE = "the model's own scheduler: what a request without sampler_name (or with 'Default') runs"
FIXED_LISTS = {}       # the upscaler lists are compat/upscale.py's
# the LoRA, model and VAE lists are read from the folders on every call: nothing to refresh
REFRESH_ROUTES = ("/sdapi/v1/refresh-loras", "/sdapi/v1/refresh-checkpoints", "/sdapi/v1/refresh-vae")


def invalid(field: str, message: str) -> CompatError:
    """FastAPI's 422 validation shape (what A1111 answers), naming the field in loc and msg."""
    return CompatError(422, {"detail": [{"loc": ["body", *field.split(".")], "msg": f"{field}: {message}",
                                         "type": "value_error"}]})


def failed(kind: str, message: str, status: int = 500) -> CompatError:
    """A1111's error shape for a failed job."""
    return CompatError(status, {"error": kind, "detail": message, "body": "", "errors": message})


class A1111:
    def __init__(self, session: Session):
        self.session = session
        self.engine = session.engine
        self._preview = (None, None, None)      # ((request_id, jpeg), frame, b64) of the last /progress image

    def sampler_label(self, mc=None) -> tuple[str, str | None]:
        """(label, scheduler class) of the model that runs (or ran) `mc`, else the active one."""
        cls = self.engine.scheduler_name()
        if cls is None or (mc is not None and self.engine.active_config != mc):
            return "Default", None
        return sampler_table.SCHEDULER_LABELS.get(cls, cls), cls

    def current_samplers(self) -> tuple:
        """(arch spec or None, its Sampler rows) of the model later calls use (`current_name`)."""
        try:
            model = self.session.model_for(self.session.selected or None)
        except ConfigError:
            return None, ()
        spec = ARCHS[model["arch"]] if model.get("arch") in ARCHS else None
        return spec, (spec.samplers() if spec is not None else ())

    async def txt2img(self, request: HttpRequest):
        body = await json_object(request, invalid)
        call = await self._call(body)
        sample = {**call.sample, **upscale.hires_sample(body, invalid)}      # enable_hr: sample.hires
        return await self._run(request, body, call, sample, extra=upscale.hires_extra(sample))

    async def img2img(self, request: HttpRequest):
        """A1111's img2img: the first of `init_images` re-noised by `denoising_strength` (img2img), or
        with `mask` inpainted where the mask is white (inpaint). The mask and init image are prepared
        as A1111 prepares them (compat/inputs.py); the model must serve the task (its `tasks`)."""
        body = await json_object(request, invalid)
        call = await self._call(body)
        init = body.get("init_images")
        if not isinstance(init, list) or not init:
            raise invalid("init_images", "must be a non-empty list of base64 images (the first is the init image)")
        mask = body.get("mask")
        if mask is not None and not isinstance(mask, str):
            raise invalid("mask", f"must be a base64 image (a string), got {type(mask).__name__}")
        mask = mask or None                         # "" (as some clients send): no mask
        task = "inpaint" if mask else "img2img"
        spec = ARCHS[call.model["arch"]] if call.model.get("arch") in ARCHS else None
        if spec is not None and spec.task(task) is None:
            field = "mask" if task == "inpaint" and spec.task("img2img") else MODEL_FIELD
            raise invalid(field, f"{call.name or spec.name!r} ({spec.name}) has no {task} task "
                          f"(its tasks: {', '.join(spec.task_names)})")
        opts = _img2img_options(body, bool(mask))
        sample = {**call.sample, "task": task, "strength": opts["strength"], "resize_mode": opts["resize_mode"],
                  **upscale.hires_sample(body, invalid, strength_default=opts["strength"])}
        # the model's size and every setting resolved and checked before an image is decoded
        probe = {**sample, "init_img": "init_images", "seed": call.base_seed, **({"mask_img": "mask"} if mask else {})}
        _mc, gen = await asyncio.to_thread(self.session.resolve_sample, call.model, probe, invalid, call.fields,
                                             MODEL_FIELD)
        try:
            prepared = await asyncio.to_thread(_prepare_img2img, init[0], mask, gen.width, gen.height, opts)
        except ConfigError as e:
            raise invalid(e.key, e.message)
        sample.update(prepared)
        warnings = list(opts["warnings"])
        if len(init) > 1:
            warnings.append(f"init_images: only the first of {len(init)} images is used (one init image per call)")
        parameters = {k: v for k, v in body.items() if k != "auth"}
        if body.get("include_init_images") is not True:
            parameters.update(init_images=None, mask=None)          # as A1111 answers
        return await self._run(request, body, call, sample, extra={**opts["extra"], **upscale.hires_extra(sample)},
                               warnings=warnings,
                               parameters=parameters)

    async def _call(self, body: dict) -> SimpleNamespace:
        """What txt2img and img2img share: prompts, counts, seed and model checked, and the sample
        every request of the call starts from."""
        prompt = body.get("prompt") or ""
        negative = body.get("negative_prompt") or ""
        for field, v in (("prompt", prompt), ("negative_prompt", negative)):
            if not isinstance(v, str):
                raise invalid(field, f"must be a string, got {type(v).__name__}")
        try:        # <lora:name:weight> tags: LoRAs of engine.lora_folder, out of the prompt the model reads
            stripped, picked = await asyncio.to_thread(lora_folder.parse_prompt, prompt, self.engine.lora_folder)
        except ConfigError as e:
            raise invalid("prompt", e.message)
        counts = {}
        for field in ("batch_size", "n_iter"):
            v = body.get(field)
            v = 1 if v is None else v
            if not is_int(v) or not 1 <= v <= MAX_IMAGES:
                raise invalid(field, f"must be an integer from 1 to {MAX_IMAGES}, got {v!r}")
            counts[field] = int(v)
        count = counts["batch_size"] * counts["n_iter"]
        if count > MAX_IMAGES:
            raise invalid("batch_size", f"batch_size * n_iter must be <= {MAX_IMAGES}, got {count}")
        seed = body.get("seed")
        seed = -1 if seed is None or seed == "" else seed
        if not is_int(seed) or int(seed) < -1:
            raise invalid("seed", f"must be -1 (random) or an integer >= 0, got {seed!r}")
        seed = int(seed)
        base_seed = random.randrange(0, 2**31) if seed == -1 else seed
        overrides = body.get("override_settings") or {}
        if not isinstance(overrides, dict):
            raise invalid("override_settings", "must be an object")
        name = overrides.get("sd_model_checkpoint") or self.session.selected
        model, name = await asyncio.to_thread(self.session.resolve, name, MODEL_FIELD, invalid)
        vae = overrides.get("sd_vae", self.session.options.get("sd_vae"))
        vae_path = await asyncio.to_thread(self._vae_path, vae, VAE_FIELD if "sd_vae" in overrides else "sd_vae")
        if vae_path is not None:        # the checkpoint's VAE replaced, as A1111's sd_vae does
            model = {**model, "vae": None, "components": {**(model.get("components") or {}), "vae": vae_path}}
        if picked:
            model = {**model, "loras": [*(model.get("loras") or []), *picked]}
        sampler = self._sampler(body, model)
        sample = {"prompt": stripped, "output_ext": "png", "batch_size": counts["batch_size"]}
        try:        # alwayson_scripts.controlnet.args: the ControlNet extension's units (compat/controlnet_ext.py)
            controls, control_fields, control_warnings = await asyncio.to_thread(
                controlnet_ext.units, body, self.engine.model_folders)
        except ConfigError as e:
            raise invalid(e.key, e.message)
        if controls:
            sample["controls"] = controls
        if sampler is not None:
            sample["sampler"] = sampler
        if negative:
            sample["negative_prompt"] = negative
        for ours, theirs in (("width", "width"), ("height", "height"), ("num_inference_steps", "steps"),
                             ("guidance_scale", "cfg_scale")):
            if body.get(theirs) is not None:
                sample[ours] = body[theirs]
        return SimpleNamespace(prompt=prompt, negative=negative, counts=counts, base_seed=base_seed,
                               model=model, name=name, sample=sample, fields={**FIELDS, **control_fields},
                               warnings=control_warnings)

    async def _run(self, request: HttpRequest, body: dict, call, sample: dict, *, extra: dict | None = None,
                   warnings=(), parameters: dict | None = None):
        """Run the call (n_iter requests one after another, each a batch of batch_size in one pass;
        seed + i per image) and answer A1111's `{images, parameters, info}`."""
        session = self.session
        counts = call.counts
        samples = [{**sample, "seed": call.base_seed + j * counts["batch_size"]} for j in range(counts["n_iter"])]
        reqs = await asyncio.to_thread(session.submit_all, call.model, samples, invalid, call.fields, MODEL_FIELD,
                                       PREVIEW_STREAM, api="a1111")
        session.last_used = (call.name, reqs[0].model)
        started = time.time()
        await session.wait_all(reqs, request)
        errors = [r.error for r in reqs if r.status == "error"]
        if errors:
            raise failed("GenerationError", errors[0])
        images = await asyncio.to_thread(session.read_images, reqs)
        interrupted = any(r.status == "cancelled" for r in reqs)
        info = self._info(reqs, call.name, call.prompt, call.negative, counts, started, interrupted, extra or {})
        info["warnings"] = sorted(set(info["warnings"]) | set(warnings) | set(call.warnings))
        if parameters is None:
            parameters = {k: v for k, v in body.items() if k != "auth"}     # SillyTavern puts its auth here
        send = body.get("send_images", True) is not False
        return {"images": [b64 for _r, _res, b64 in images] if send else [], "parameters": parameters,
                "info": json.dumps(info)}

    def _sampler(self, body: dict, model: dict) -> str | None:
        """The request's sampler_name and scheduler as one of the model's samplers (None: its own)."""
        sampler_name, scheduler = body.get("sampler_name"), body.get("scheduler")
        for field, v in (("sampler_name", sampler_name), ("scheduler", scheduler)):
            if v is not None and not isinstance(v, str):
                raise invalid(field, f"must be a string, got {type(v).__name__}")
        spec = ARCHS[model["arch"]] if model.get("arch") in ARCHS else None
        try:
            return sampler_table.from_a1111(sampler_name, scheduler, spec.samplers() if spec else ())
        except ValueError as e:
            field, message = e.args
            raise invalid(field, message)

    def _info(self, reqs, name, prompt, negative, counts, started, interrupted, extra: dict) -> dict:
        first = reqs[0].sample
        # one seed per image: a request's batch is seed, seed + 1, ...
        seeds = [r.sample.seed + i for r in reqs for i in range(r.sample.batch_size)]
        made = [res["seed"] for r in reqs if r.status == "ok" for res in r.results if res.get("kind") == "image"]
        chosen = sampler_table.find(reqs[0].model.spec.scheduler_config, first.sampler,
                                    reqs[0].model.spec.samplers_excluded) if first.sampler else None
        if chosen is not None:
            sampler = chosen.label
            schedule = sampler_table.A1111_SCHEDULES[chosen.schedule]
        else:
            sampler, _cls = self.sampler_label(reqs[0].model)
            schedule = "Automatic"
        model_name = name or self.session.current_name()
        warnings = sorted({w for r in reqs for w in r.sample.warnings})
        stamp = time.strftime("%Y%m%d%H%M%S", time.localtime(started))

        def infotext(s):
            lines = [prompt]
            if negative:
                lines.append(f"Negative prompt: {negative}")
            more = "".join(f"{k}: {v}, " for k, v in extra.items())
            lines.append(f"Steps: {first.num_inference_steps}, Sampler: {sampler}, Schedule type: {schedule}, "
                         f"CFG scale: {first.guidance_scale}, Seed: {s}, Size: {first.width}x{first.height}, "
                         f"Model: {model_name}, {more}Version: aitk-engine")
            return "\n".join(lines)
        return {"prompt": prompt, "all_prompts": [prompt] * len(seeds), "negative_prompt": negative,
                "all_negative_prompts": [negative] * len(seeds), "seed": seeds[0], "all_seeds": seeds,
                "subseed": -1, "all_subseeds": [-1] * len(seeds), "subseed_strength": 0,
                "width": first.width, "height": first.height, "sampler_name": sampler,
                "cfg_scale": first.guidance_scale, "steps": first.num_inference_steps,
                "batch_size": counts["batch_size"], "n_iter": counts["n_iter"], "restore_faces": False,
                "face_restoration_model": None, "sd_model_name": model_name, "sd_model_hash": None,
                "sd_vae_name": None, "sd_vae_hash": None, "seed_resize_from_w": -1, "seed_resize_from_h": -1,
                "denoising_strength": first.strength, "extra_generation_params": {"Schedule type": schedule, **extra},
                "index_of_first_image": 0,
                "infotexts": [infotext(s) for s in made], "styles": [],
                "job_timestamp": stamp, "clip_skip": 1, "is_using_inpainting_conditioning": False,
                "version": "aitk-engine", "interrupted": interrupted, "warnings": warnings,
                "request_ids": [r.request_id for r in reqs]}

    async def png_info(self, request: HttpRequest):
        """A1111's /sdapi/v1/png-info: `{image: base64 (a data: URL or bare)}` -> `{info: the parameters
        text, items: the file's other text, parameters: the text parsed as A1111 parses it}`. PNG, JPEG
        and WebP (EXIF UserComment), read without decoding pixels."""
        body = await json_object(request, invalid)
        image = body.get("image")
        if image is not None and not isinstance(image, str):
            raise invalid("image", f"must be a base64 string, got {type(image).__name__}")
        image = (image or "").strip()
        if not image:
            return {"info": "", "items": {}, "parameters": {}}
        from toolkit.file_settings import READ_SECONDS
        try:      # off the event loop and within a bound; a thread past it finishes on its own
            return await asyncio.wait_for(asyncio.to_thread(_png_info, image), READ_SECONDS)
        except TimeoutError:
            raise CompatError(503, {"detail": [{"loc": ["body", "image"], "type": "timeout", "msg":
                                                f"image: not read within {READ_SECONDS:g} s (the engine is "
                                                "loaded): try again"}]})

    def loras(self):
        """A1111's LoRA list: name (what `<lora:name>` takes), alias (the trainer's output name), path,
        and the file's metadata (kohya's ss_* keys), from the headers of engine.lora_folder."""
        listing = self.engine.list_loras(metadata=True)
        return [{"name": d["name"], "alias": d.get("output_name") or d["name"].rsplit("/", 1)[-1],
                 "path": f"{listing['folder']}/{d['path']}", "metadata": d.get("metadata", {})}
                for d in listing["loras"]]

    def sd_models(self):
        """Only what can load here (Session.image_model_names): the models held (loaded, warm-load default)
        by title, profiles, archs whose weights are local, and the model folders' diffusers folders and
        files by name. The title is what override_settings.sd_model_checkpoint and options take."""
        return [{"title": n, "model_name": n, "hash": None, "sha256": None, "filename": n, "config": None}
                for n in self.session.image_model_names()]

    def sd_vae(self):
        """A1111's VAE list: the model folders' VAE files (A1111's models/VAE, ComfyUI's vae/), by name."""
        return [{"model_name": name, "filename": path} for name, path in sorted(self.engine.vae_files().items())]

    def _vae_path(self, value, field: str) -> str | None:
        """The VAE file an sd_vae value names (a name from /sdapi/v1/sd-vae, or its filename), None for
        the checkpoint's own; anything else is a 422 naming `field`."""
        if value is None or value in OWN_VAE:
            return None
        if not isinstance(value, str):
            raise invalid(field, f"must be a VAE name (a string), got {value!r}")
        files = self.engine.vae_files()
        path = files.get(value) or next((p for p in files.values() if p == value), None)
        if path is None:
            raise invalid(field, f"unknown VAE {value!r} (VAEs here: {', '.join(sorted(files)) or 'none'}; "
                                 f"or {' / '.join(repr(v) for v in OWN_VAE[1:])} for the checkpoint's own)")
        return path

    def controlnet_models(self):
        return controlnet_ext.model_list(self.engine.model_folders)

    def get_options(self):
        return {**self.session.options, "sd_model_checkpoint": self.session.current_name(),
                "sd_checkpoint_hash": None, "samples_format": "png",
                "sd_vae": self.session.options.get("sd_vae") or "Automatic"}

    async def set_options(self, request: HttpRequest):
        session = self.session
        body = await json_object(request, invalid)
        name = body.get("sd_model_checkpoint")
        if name is not None:
            _model, name = await asyncio.to_thread(session.resolve, name, "sd_model_checkpoint", invalid)
        if "sd_vae" in body:
            await asyncio.to_thread(self._vae_path, body["sd_vae"], "sd_vae")
        for k, v in body.items():
            if k != "sd_model_checkpoint" and len(session.options) < 256 and isinstance(v, (str, int, float, bool)):
                session.options[k] = v
        if name is not None:
            session.selected = name
        return None

    def progress(self, skip_current_image: bool = False):
        req = self.engine.running_request()
        queued = self.engine.queue_length()
        if req is None or req.status != "running":
            return {"progress": 0.0, "eta_relative": 0.0,
                    "state": {"skipped": False, "interrupted": False, "job": "", "job_count": queued,
                              "job_timestamp": "0", "job_no": 0, "sampling_step": 0, "sampling_steps": 0},
                    "current_image": None, "textinfo": "Waiting" if queued else None}
        batch, index = self.session.batch_of(req)
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
        """The request's newest preview image as A1111 sends `current_image`: base64 without a data: prefix,
        PNG unless the options say `samples_format: jpg` (A1111's encode_pil_to_base64). A request made
        elsewhere without preview images (a native /generate) shows its newest latent frame instead."""
        preview, latent = req.latest_preview, req.latest_latent
        frame = preview if preview is not None else latent
        if frame is None:
            return None
        jpeg = preview is not None and str(self.session.options.get("samples_format", "png")).lower() in ("jpg", "jpeg")
        key, cached_frame, cached = self._preview
        if key == (req.request_id, jpeg) and cached_frame is frame:
            return cached
        image = preview_b64(preview, jpeg=jpeg) if preview is not None else latent_png_b64(frame, req.model.spec)
        self._preview = ((req.request_id, jpeg), frame, image)
        return image

    def interrupt(self):
        """A1111's interrupt: the running request and the rest of its call's batch."""
        req = self.engine.running_request()
        if req is not None:
            batch, _i = self.session.batch_of(req)
            self.session.cancel_all([req] + [r for r in batch if r is not req])
        return {}

    def skip(self):
        """A1111's skip: only the image being made now; the rest of the batch goes on."""
        req = self.engine.running_request()
        if req is not None:
            self.engine.cancel(req.request_id)
        return {}

    def samplers(self):
        """The current model's samplers (its family's table, `toolkit/samplers.py`), after "Default": its
        own scheduler. A name a request sends that is not here is a 422 naming sampler_name."""
        label, cls = self.sampler_label()
        own = ({"name": "Default", "aliases": ["model default"],
                "options": {"note": SAMPLER_NOTE + " (load a model to see which it is)"}} if cls is None else
               {"name": "Default", "aliases": [cls, "default", label],
                "options": {"scheduler": cls, "note": SAMPLER_NOTE}})
        _spec, available = self.current_samplers()
        rows = [own]
        for label in sampler_table.a1111_labels(available):
            same = [s for s in available if s.label == label]
            rows.append({"name": label, "aliases": [s.name for s in same],
                         "options": {"scheduler": same[0].cls,
                                     "schedules": [sampler_table.A1111_SCHEDULES[s.schedule] for s in same]}})
        return rows

    def schedulers(self):
        """A1111's schedule types the current model's samplers have (Automatic: each sampler's own)."""
        _spec, available = self.current_samplers()
        return [{"name": label.lower(), "label": label, "aliases": None, "default_rho": -1,
                 "need_inner_model": False} for label in sampler_table.a1111_schedules(available)]


def _flag(body: dict, field: str, default) -> bool:
    """An A1111 switch: a bool, or 0 / 1 (inpainting_mask_invert is an int there)."""
    v = body.get(field)
    if v is None:
        return default
    if isinstance(v, bool) or (is_int(v) and v in (0, 1)):
        return bool(v)
    raise invalid(field, f"must be true/false (or 0/1), got {v!r}")


def _choice(body: dict, field: str, table: dict, default: int) -> int:
    v = body.get(field)
    if v is None:
        return default
    if not is_int(v) or int(v) not in table:
        raise invalid(field, f"must be one of {', '.join(f'{k} ({n})' for k, n in table.items())}, got {v!r}")
    return int(v)


def _img2img_options(body: dict, masked: bool) -> dict:
    """img2img's own fields, checked, with A1111's defaults; `extra`: their infotext entries, `warnings`:
    what is accepted but not served as A1111 serves it."""
    strength = body.get("denoising_strength")
    strength = DEFAULT_STRENGTH if strength is None else strength
    if isinstance(strength, bool) or not isinstance(strength, (int, float)) or not 0 < strength <= 1:
        raise invalid("denoising_strength", f"must be a number in (0, 1], got {strength!r}")
    resize = _choice(body, "resize_mode", RESIZE_MODES, 0)
    opts = {"strength": float(strength), "resize_mode": RESIZE_MODES[resize], "extra": {"Denoising strength": strength},
            "warnings": []}
    fill = _choice(body, "inpainting_fill", MASKED_CONTENT, 0)
    invert = _flag(body, "inpainting_mask_invert", False)
    full_res = _flag(body, "inpaint_full_res", True)
    blur = {}
    for field in ("mask_blur", "mask_blur_x", "mask_blur_y"):
        v = body.get(field)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= MAX_MASK_BLUR):
            raise invalid(field, f"must be a number from 0 to {MAX_MASK_BLUR}, got {v!r}")
        blur[field] = v
    # mask_blur, when given, sets both (A1111's setter); else mask_blur_x / mask_blur_y, 4 each
    bx = blur["mask_blur"] if blur["mask_blur"] is not None else (
        DEFAULT_MASK_BLUR if blur["mask_blur_x"] is None else blur["mask_blur_x"])
    by = blur["mask_blur"] if blur["mask_blur"] is not None else (
        DEFAULT_MASK_BLUR if blur["mask_blur_y"] is None else blur["mask_blur_y"])
    opts.update(fill=fill, invert=invert, blur_x=float(bx), blur_y=float(by))
    if not masked:
        return opts
    if bx or by:
        opts["extra"]["Mask blur"] = bx if bx == by else f"{bx}x{by}"
    if invert:
        opts["extra"]["Mask mode"] = "Inpaint not masked"
    if fill != 1:
        opts["extra"]["Masked content"] = MASKED_CONTENT[fill]
    if fill in (2, 3):
        opts["warnings"].append(f"inpainting_fill {fill} ({MASKED_CONTENT[fill]}): the masked area is filled from its "
                                "surroundings (A1111's pixel step of it); the diffusers inpaint pipelines start from "
                                "the init image's latents noised by denoising_strength and take no latent edit")
    if full_res:
        opts["warnings"].append("inpaint_full_res (only masked): not served; the whole picture is inpainted at "
                                "width x height")
    return opts


def _prepare_img2img(init_b64: str, mask_b64: str | None, width: int, height: int, opts: dict) -> dict:
    """The sample's init_img (and mask_img) as data URLs, prepared as A1111's img2img prepares them:
    an image with alpha flattened onto white; with a mask, the mask binarized, inverted and blurred
    at its own size, both brought to width x height by resize_mode, and the init image filled under
    the mask unless inpainting_fill is 1 (original). A refusal is a ConfigError naming the field."""
    data = inputs.decode_b64_image(init_b64, "init_images")
    inputs.check(data, "init_images")
    if mask_b64 is None:
        image = inputs.open_checked(data)
        # the engine takes the bytes as they are (EXIF, RGB and the size are its own), unless alpha needs flattening
        return {"init_img": inputs.png_data_url(inputs.flatten(image)) if inputs.has_alpha(image)
                else inputs.data_url(data)}
    mask_data = inputs.decode_b64_image(mask_b64, "mask")
    inputs.check(mask_data, "mask")
    mask = inputs.a1111_mask(inputs.open_checked(mask_data), invert=opts["invert"], blur_x=opts["blur_x"],
                             blur_y=opts["blur_y"])
    mode = opts["resize_mode"]
    mask = inputs.fit(mask, width, height, mode, mask=True)
    image = inputs.fit(inputs.flatten(inputs.open_checked(data)), width, height, mode)
    if opts["fill"] != 1:
        image = inputs.fill(image, mask)
    return {"init_img": inputs.png_data_url(image), "mask_img": inputs.png_data_url(mask)}


def _png_info(image: str) -> dict:
    """The answer holds the file's text (media.MAX_TEXT_BYTES at most) and the parse of `info`
    (file_settings.MAX_INFOTEXT_CHARS at most): bounded whatever the file."""
    from toolkit.file_settings import SETTINGS_KEY, NoSettings, parse_a1111
    from toolkit.media import MetadataError, read_metadata

    if image.startswith("data:"):
        image = image.partition(",")[2]
    try:
        data = base64.b64decode(image, validate=True)
    except (binascii.Error, ValueError):
        raise invalid("image", "is not base64 data")
    try:
        meta = read_metadata(data)
    except MetadataError as e:
        raise invalid("image", str(e))
    if meta["format"] not in ("png", "jpg", "webp"):
        raise invalid("image", f"is a {meta['format']} file, not an image (POST /settings reads it)")
    info = meta["parameters"] or ""
    items = dict(meta["items"])
    if meta[SETTINGS_KEY]:
        items[SETTINGS_KEY] = meta[SETTINGS_KEY]
    try:
        parameters = parse_a1111(info) if info else {}
    except NoSettings as e:                       # past the text it parses
        raise invalid("image", str(e))
    return {"info": info, "items": items, "parameters": parameters}


def _constant(value):
    def answer():
        return value
    return answer


def add_routes(app: FastAPI, session: Session, authorized):
    """The /sdapi/v1 routes on `app`; `authorized(request) -> bool` (Basic, Bearer or X-Engine-Token)."""
    api = A1111(session)

    deps = [basic_auth(authorized)]
    for method, path, handler in (("POST", "/sdapi/v1/txt2img", api.txt2img),
                                  ("GET", "/sdapi/v1/sd-models", api.sd_models),
                                  ("GET", "/sdapi/v1/options", api.get_options),
                                  ("POST", "/sdapi/v1/options", api.set_options),
                                  ("GET", "/sdapi/v1/progress", api.progress),
                                  ("POST", "/sdapi/v1/interrupt", api.interrupt),
                                  ("POST", "/sdapi/v1/skip", api.skip),
                                  ("GET", "/sdapi/v1/samplers", api.samplers),
                                  ("GET", "/sdapi/v1/schedulers", api.schedulers),
                                  ("GET", "/sdapi/v1/loras", api.loras),
                                  ("GET", "/sdapi/v1/sd-vae", api.sd_vae),
                                  ("GET", "/controlnet/model_list", api.controlnet_models)):
        app.add_api_route(path, handler, methods=[method], dependencies=deps)
    # the routes whose JSON carries base64 images take more than the JSON default
    app.add_api_route("/sdapi/v1/img2img", api.img2img, methods=["POST"], dependencies=deps, openapi_extra=IMG2IMG_BODY,
                      max_body_size=INLINE_IMAGES_BODY_BYTES)
    app.add_api_route("/sdapi/v1/png-info", api.png_info, methods=["POST"], dependencies=deps,
                      max_body_size=INLINE_IMAGES_BODY_BYTES)
    for path, answer in FIXED_LISTS.items():
        app.add_api_route(path, _constant(answer), methods=["GET"], dependencies=deps)
    for path in REFRESH_ROUTES:
        app.add_api_route(path, _constant(None), methods=["POST"], dependencies=deps)
    upscale.add_routes(app, session, deps, invalid, failed)
    return api

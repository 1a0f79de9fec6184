"""A1111's hires fix and upscalers over the engine (toolkit/hires.py): the `enable_hr` fields of txt2img and
img2img (`hires_sample`), and the routes `/sdapi/v1/upscalers`, `/sdapi/v1/latent-upscale-modes`,
`/sdapi/v1/extra-single-image` and `/sdapi/v1/extra-batch-images` (`add_routes`).

- `enable_hr: true` makes `sample.hires`: `hr_scale` (default 2; `hr_resize_x`/`hr_resize_y` when given
  win, as A1111's), `hr_upscaler` (default "Latent"; "None" is a Lanczos resize, as A1111's),
  `hr_second_pass_steps` (0: the base steps), `denoising_strength` (the second pass's strength; default 0.7,
  A1111's), `hr_prompt` and `hr_negative_prompt` (empty: the call's). On img2img the one
  denoising_strength the body carries is both passes' strength.
- The extras routes run task upscale (no diffusion, no model loaded): `upscaling_resize` (default 2) or
  `upscaling_resize_w`/`_h` with `resize_mode` 1, `upscaler_1` ("None": Lanczos). `upscaler_2` with a
  visibility above 0 is refused (one upscaler per image here); face restoration fields are ignored.
- An upscaler this engine does not have is a 422 naming the client's field (`hr_upscaler`, `upscaler_1`).
"""
import asyncio
import re

from fastapi import FastAPI, Request as HttpRequest

from extensions_built_in.inference_engine.compat.common import is_int, json_object
from extensions_built_in.inference_engine.compat.inputs import check, data_url, decode_b64_image
from extensions_built_in.inference_engine.http_guard import INLINE_IMAGES_BODY_BYTES
from toolkit import hires, upscalers
from toolkit.errors import ConfigError

# engine field -> A1111's, so a refusal names what the client sent
FIELDS = {"sample.hires": "enable_hr", "sample.hires.scale": "hr_scale", "sample.hires.upscaler": "hr_upscaler",
          "sample.hires.steps": "hr_second_pass_steps", "sample.hires.denoise": "denoising_strength",
          "sample.hires.prompt": "hr_prompt", "sample.hires.negative_prompt": "hr_negative_prompt"}
EXTRAS_FIELDS = {"sample.upscale.scale": "upscaling_resize", "sample.upscale.upscaler": "upscaler_1",
                 "sample.init_img": "image", "sample.upscale": "upscaler_1"}
HIRES_DENOISE = 0.7            # A1111's txt2img denoising_strength default under hires
NONE = "None"                  # A1111's upscaler that upscales with nothing: a Lanczos resize here
_FACTOR = re.compile(r"(?:^|[^0-9])(\d)x|x(\d)(?:[^0-9]|$)", re.I)


def _upscaler(name, field: str, invalid):
    if name is None or name == "":
        return None
    if not isinstance(name, str):
        raise invalid(field, f"must be an upscaler name (a string), got {name!r}")
    return "Lanczos" if name == NONE else name


def _number(body: dict, field: str, invalid, default, lo: float, hi: float):
    v = body.get(field)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not lo <= v <= hi:
        raise invalid(field, f"must be a number from {lo:g} to {hi:g}, got {v!r}")
    return v


def hires_sample(body: dict, invalid, *, strength_default: float = HIRES_DENOISE) -> dict:
    """`{"hires": {...}}` for a txt2img/img2img body with `enable_hr` true, else {}."""
    if body.get("enable_hr") in (None, False):
        return {}
    if body.get("enable_hr") is not True:
        raise invalid("enable_hr", f"must be true or false, got {body.get('enable_hr')!r}")
    hr = {"scale": _number(body, "hr_scale", invalid, 2.0, 1, hires.MAX_SCALE),
          "upscaler": _upscaler(body.get("hr_upscaler"), "hr_upscaler", invalid) or "Latent",
          "denoise": _number(body, "denoising_strength", invalid, strength_default, 0, 1)}
    steps = body.get("hr_second_pass_steps")
    if steps is not None:
        if not is_int(steps) or steps < 0:
            raise invalid("hr_second_pass_steps", f"must be an integer >= 0, got {steps!r}")
        hr["steps"] = int(steps)
    width, height = body.get("width") or 0, body.get("height") or 0
    rx, ry = body.get("hr_resize_x") or 0, body.get("hr_resize_y") or 0
    for field, v in (("hr_resize_x", rx), ("hr_resize_y", ry)):
        if not is_int(v) or v < 0:
            raise invalid(field, f"must be an integer >= 0, got {v!r}")
    if (rx or ry) and is_int(width) and is_int(height) and width > 0 and height > 0:
        hr["scale"] = max(rx / width if rx else 0, ry / height if ry else 0)     # A1111: the size asked wins
    for ours, theirs in (("prompt", "hr_prompt"), ("negative_prompt", "hr_negative_prompt")):
        v = body.get(theirs)
        if v is not None and not isinstance(v, str):
            raise invalid(theirs, f"must be a string, got {type(v).__name__}")
        if v:
            hr[ours] = v
    return {"hires": hr}


def hires_extra(sample: dict) -> dict:
    """A1111's infotext keys for a call's hires settings (extra_generation_params)."""
    hr = sample.get("hires")
    if not hr:
        return {}
    out = {"Hires upscale": hr["scale"], "Hires upscaler": hr["upscaler"], "Denoising strength": hr["denoise"]}
    if hr.get("steps"):
        out["Hires steps"] = hr["steps"]
    return out


# -- the lists ----------------------------------------------------------------------------------------------
def _scale_of(name: str) -> float:
    """An upscale model's factor as its file name says it (4x-UltraSharp, RealESRGAN_x2plus), else 4."""
    m = _FACTOR.search(name)
    return float(m.group(1) or m.group(2)) if m else 4.0


def upscaler_list(engine) -> list:
    """A1111's /sdapi/v1/upscalers: {name, model_name, model_path, model_url, scale} (a model's path as its
    file's name: local paths stay on this machine)."""
    out = [{"name": NONE, "model_name": None, "model_path": None, "model_url": None, "scale": 4},
           *({"name": n, "model_name": None, "model_path": None, "model_url": None, "scale": 4}
             for n in hires.PIXEL_UPSCALERS)]
    for name, path in sorted(upscalers.model_files(engine.upscaler_folders()).items()):
        out.append({"name": name, "model_name": "ESRGAN" if "esrgan" in name.lower() else name,
                    "model_path": path.rsplit("/", 1)[-1], "model_url": None, "scale": _scale_of(name)})
    return out


def latent_modes() -> list:
    return [{"name": name} for name in hires.LATENT_UPSCALERS]


# -- extras: task upscale ---------------------------------------------------------------------------------
class Extras:
    def __init__(self, session, invalid, failed):
        self.session, self.engine = session, session.engine
        self.invalid, self.failed = invalid, failed

    def _model(self) -> dict:
        """Any model names the request (nothing of it loads): the loaded or default one, else the first here."""
        try:
            return self.engine.model_for_name(None)
        except ConfigError:
            names = self.engine.model_names(modality="image")
            if not names:
                raise self.invalid("upscaler_1", "no model is here to name the request by") from None
            return self.engine.model_for_name(names[0])

    def _settings(self, body: dict, size) -> dict:
        invalid = self.invalid
        up = _upscaler(body.get("upscaler_1"), "upscaler_1", invalid) or "Lanczos"
        second = body.get("upscaler_2")
        visibility = body.get("extras_upscaler_2_visibility") or 0
        if second not in (None, "", NONE) and visibility:
            raise invalid("upscaler_2", "one upscaler per image here: leave upscaler_2 None or its visibility 0")
        mode = body.get("resize_mode") or 0
        if mode not in (0, 1):
            raise invalid("resize_mode", f"must be 0 (by upscaling_resize) or 1 (to upscaling_resize_w/h), got {mode!r}")
        scale = _number(body, "upscaling_resize", invalid, 2.0, 0.01, hires.MAX_SCALE)
        if mode == 1 and size is not None:
            w, h = body.get("upscaling_resize_w") or 0, body.get("upscaling_resize_h") or 0
            for field, v in (("upscaling_resize_w", w), ("upscaling_resize_h", h)):
                if not is_int(v) or v < 0:
                    raise invalid(field, f"must be an integer >= 0, got {v!r}")
            if w or h:
                scale = max(w / size[0] if w else 0, h / size[1] if h else 0)
        return {"upscaler": up, "scale": scale}

    async def _upscale(self, images: list, body: dict, request) -> list:
        """Each (field, base64 image) upscaled as one task-upscale request; their PNGs, base64, in order."""
        samples = []
        for field, value in images:
            try:
                data = decode_b64_image(value, field)
                size = check(data, field)
            except ConfigError as e:
                raise self.invalid(e.key, e.message)
            samples.append({"task": hires.UPSCALE, "init_img": data_url(data), "output_ext": "png",
                            "upscale": self._settings(body, size)})
        model = await asyncio.to_thread(self._model)
        fields = {**EXTRAS_FIELDS, "sample.init_img": images[0][0] if len(images) == 1 else "imageList"}
        reqs = await asyncio.to_thread(self.session.submit_all, model, samples, self.invalid, fields, "upscaler_1",
                                       api="a1111")
        await self.session.wait_all(reqs, request)
        errors = [r.error for r in reqs if r.status == "error"]
        if errors:
            raise self.failed("UpscaleError", errors[0])
        return [b64 for _r, _res, b64 in await asyncio.to_thread(self.session.read_images, reqs)]

    async def single(self, request: HttpRequest):
        body = await json_object(request, self.invalid)
        image = body.get("image")
        if not image:
            raise self.invalid("image", "must be a base64 image")
        out = await self._upscale([("image", image)], body, request)
        return {"html_info": "", "image": out[0] if out else ""}

    async def batch(self, request: HttpRequest):
        body = await json_object(request, self.invalid)
        items = body.get("imageList")
        if not isinstance(items, list) or not items:
            raise self.invalid("imageList", "must be a non-empty list of {data, name}")
        images = []
        for i, item in enumerate(items):
            data = item.get("data") if isinstance(item, dict) else None
            if not data:
                raise self.invalid(f"imageList.{i}.data", "must be a base64 image")
            images.append((f"imageList.{i}.data", data))
        return {"html_info": "", "images": await self._upscale(images, body, request)}


def add_routes(app: FastAPI, session, deps, invalid, failed):
    """The upscaler routes on `app`, behind `deps` (a1111.add_routes' dependencies)."""
    extras = Extras(session, invalid, failed)
    app.add_api_route("/sdapi/v1/upscalers", lambda: upscaler_list(session.engine), methods=["GET"], dependencies=deps)
    app.add_api_route("/sdapi/v1/latent-upscale-modes", latent_modes, methods=["GET"], dependencies=deps)
    app.add_api_route("/sdapi/v1/extra-single-image", extras.single, methods=["POST"], dependencies=deps,
                      max_body_size=INLINE_IMAGES_BODY_BYTES)
    app.add_api_route("/sdapi/v1/extra-batch-images", extras.batch, methods=["POST"], dependencies=deps,
                      max_body_size=INLINE_IMAGES_BODY_BYTES)

"""The sd-webui-controlnet extension's preprocessor routes, in its shapes (its scripts/api.py):

- GET /controlnet/module_list[?alias_names=true]: {module_list: [module names], module_detail: {module:
  {model_free, sliders: [{name, value, min, max, step}]}}}; with alias_names the extension's labels
  ("depth_midas", "invert (from white bg & black line)").
- POST /controlnet/detect: {controlnet_module, controlnet_input_images: [base64], controlnet_processor_res,
  controlnet_threshold_a, controlnet_threshold_b} -> {images: [base64 PNG], info: "Success"}. -1 (the
  extension's default) or a missing value takes the preprocessor's default; `controlnet_images` (what the
  webuiapi client sends) is read when `controlnet_input_images` is absent; `controlnet_masks` and
  `low_vram` are accepted and not used. As the extension takes any slider value, each is held to its
  slider's range here (webuiapi sends 64 for both thresholds whatever the module); POST /preprocess refuses.

The modules are toolkit/control_maps.MODULES (each answers as one of our preprocessors); a map is made by
extensions_built_in/inference_engine/preprocess.py, as POST /preprocess makes it. A bad value is a 422
naming the client's field, in A1111's validation shape.
"""
import asyncio
import base64

from fastapi import FastAPI, Request as HttpRequest

from extensions_built_in.inference_engine.compat.a1111 import failed, invalid
from extensions_built_in.inference_engine.compat.common import basic_auth, json_object
from extensions_built_in.inference_engine.compat.inputs import decode_b64_image
from extensions_built_in.inference_engine.engine import EngineBusy
from extensions_built_in.inference_engine.http_guard import INLINE_IMAGES_BODY_BYTES
from extensions_built_in.inference_engine.preprocess import PreprocessFailed, make_png
from toolkit.control_maps import MODULE_LABELS, PREPROCESSORS, clamped, for_module
from toolkit.errors import ConfigError

MAX_IMAGES = 16
# our field -> the client's
FIELDS = {"preprocessor": "controlnet_module", "processor_res": "controlnet_processor_res",
          "threshold_a": "controlnet_threshold_a", "threshold_b": "controlnet_threshold_b"}


def modules(alias_names: bool = False) -> list:
    """Every module the extension's names reach here, "none" first, each row's in table order."""
    return [MODULE_LABELS.get(module, module) if alias_names else module
            for p in PREPROCESSORS.values() for module in p.modules]


def module_detail(module: str) -> dict:
    row = PREPROCESSORS[for_module(module)]
    sliders = [p.api_json() for p in (row.resolution, row.threshold_a, row.threshold_b) if p is not None]
    return {"model_free": row.model_free, "sliders": sliders}


def _value(body: dict, key: str):
    """A slider's value: None (the default) when missing or negative (the extension's -1)."""
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise invalid(key, f"must be a number, got {value!r}")
    return None if value < 0 else value


class ControlNetApi:
    def __init__(self, session):
        self.engine = session.engine

    async def module_list(self, alias_names: bool = False):
        names = modules(alias_names)
        return {"module_list": names, "module_detail": {name: module_detail(name) for name in names}}

    async def detect(self, request: HttpRequest):
        body = await json_object(request, invalid)
        module = body.get("controlnet_module", "none")
        try:
            name = for_module(module, "controlnet_module")
        except ConfigError as e:
            raise invalid(e.key, e.message)
        key = "controlnet_input_images" if "controlnet_input_images" in body else "controlnet_images"
        images = body.get(key)
        if not isinstance(images, list) or not images:
            raise invalid("controlnet_input_images", "send a non-empty list of base64 images")
        if len(images) > MAX_IMAGES:
            raise invalid(key, f"at most {MAX_IMAGES} images per call")
        res, a, b = (_value(body, k) for k in ("controlnet_processor_res", "controlnet_threshold_a",
                                               "controlnet_threshold_b"))
        res, a, b = clamped(name, res, a, b)      # the extension takes any value: each held to its slider's range
        out = []
        for i, value in enumerate(images):
            field = f"{key}.{i}"
            try:
                data = decode_b64_image(value, field)
                png = await asyncio.to_thread(make_png, self.engine, name, data, resolution=res, threshold_a=a,
                                              threshold_b=b, image_field=field)
            except ConfigError as e:
                raise invalid(FIELDS.get(e.key, e.key), e.message)
            except EngineBusy as e:
                raise failed("EngineBusy", str(e), 503)
            except PreprocessFailed as e:
                raise failed("PreprocessFailed", str(e))
            out.append(base64.b64encode(png).decode("ascii"))
        return {"images": out, "info": "Success"}


def add_routes(app: FastAPI, session, authorized):
    """The /controlnet preprocessor routes on `app`; `authorized(request) -> bool` as the /sdapi/v1 routes'."""
    api = ControlNetApi(session)

    deps = [basic_auth(authorized)]
    app.add_api_route("/controlnet/module_list", api.module_list, methods=["GET"], dependencies=deps)
    app.add_api_route("/controlnet/detect", api.detect, methods=["POST"], dependencies=deps,
                      max_body_size=INLINE_IMAGES_BODY_BYTES)
    return api

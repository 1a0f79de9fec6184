"""The sd-webui-controlnet extension's API, as A1111 clients send it: `alwayson_scripts.controlnet.args`
(its units) mapped to `sample.controls`, and `GET /controlnet/model_list`. No torch.

A unit: `image` (or the older `input_image`; base64, or `{image, mask}`), `module` (the preprocessor;
"none"), `model` (a name from /controlnet/model_list, "name [hash]" as the extension titles it), `weight`,
`guidance_start`, `guidance_end`, `control_mode` (0 Balanced is what diffusers runs), `resize_mode` (0 Just
Resize, 1 Crop and Resize, 2 Resize and Fill, or those names), `processor_res`, `threshold_a/b` (-1: unset),
`enabled`. A disabled unit, or one whose model is "None", is left out, as the extension does.
"""
from extensions_built_in.inference_engine.compat import inputs
from extensions_built_in.inference_engine.compat.common import strip_hash
from toolkit import control_models
from toolkit.control_maps import clamped, for_module
from toolkit.errors import ConfigError

ARGS = "alwayson_scripts.controlnet.args"
RESIZE = {0: "resize", 1: "crop", 2: "fill", "just resize": "resize", "crop and resize": "crop",
          "resize and fill": "fill", "resize": "resize", "crop": "crop", "fill": "fill"}
BALANCED = (0, "balanced")
NO_MODEL = ("", "none")
# ControlRef field -> the unit's key (a 422 names what the client sent)
KEYS = {"model": "model", "image": "image", "preprocessor": "module", "scale": "weight",
        "start": "guidance_start", "end": "guidance_end", "resize_mode": "resize_mode",
        "processor_res": "processor_res", "threshold_a": "threshold_a", "threshold_b": "threshold_b", "mode": "model"}


def units(body: dict, folders=()) -> tuple:
    """(controls, fields, warnings): the request's `sample.controls`, the engine key -> client field table
    for them, and what was accepted but not honoured. ConfigError names the unit's field."""
    scripts = body.get("alwayson_scripts")
    if scripts is None:
        return [], {}, []
    if not isinstance(scripts, dict):
        raise ConfigError("alwayson_scripts", "must be an object")
    script = scripts.get("controlnet", scripts.get("ControlNet"))
    if script is None:
        return [], {}, []
    args = script.get("args") if isinstance(script, dict) else None
    if not isinstance(args, list):
        raise ConfigError(ARGS, "must be a list of ControlNet units")
    controls, fields, warnings = [], {"sample.controls": ARGS}, []
    for i, unit in enumerate(args):
        at = f"{ARGS}[{i}]"
        if not isinstance(unit, dict):
            raise ConfigError(at, "must be an object (a ControlNet unit)")
        if unit.get("enabled", True) is False:
            continue
        model = unit.get("model")
        if model is None or (isinstance(model, str) and model.strip().lower() in NO_MODEL):
            continue
        if not isinstance(model, str):
            raise ConfigError(f"{at}.model", f"must be a model name, got {type(model).__name__}")
        path = control_models.find(strip_hash(model), folders, f"{at}.model")
        control = {"model": path, "image": _image(unit, at), "preprocessor": _module(unit, at)}
        for ours, theirs in (("scale", "weight"), ("start", "guidance_start"), ("end", "guidance_end")):
            if unit.get(theirs) is not None:
                control[ours] = unit[theirs]
        sliders = []
        for name in ("processor_res", "threshold_a", "threshold_b"):
            v = unit.get(name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
                raise ConfigError(f"{at}.{name}", f"must be a number, got {v!r}")
            sliders.append(None if v is None or v < 0 else v)       # -1: the module's default
        for name, v in zip(("processor_res", "threshold_a", "threshold_b"),
                           clamped(control["preprocessor"], *sliders)):   # held to its sliders, as the extension's
            if v is not None:
                control[name] = v
        mode = unit.get("resize_mode")
        if mode is not None:
            key = mode.lower() if isinstance(mode, str) else mode
            if isinstance(key, bool) or key not in RESIZE:
                raise ConfigError(f"{at}.resize_mode", f"must be 0, 1, 2 or Just Resize, Crop and Resize, Resize "
                                  f"and Fill, got {mode!r}")
            control["resize_mode"] = RESIZE[key]
        cm = unit.get("control_mode")
        if cm is not None and (cm.lower() if isinstance(cm, str) else cm) not in BALANCED:
            warnings.append(f"{at}.control_mode: {cm!r} is run as Balanced (diffusers' ControlNet pipelines)")
        j = len(controls)
        fields.update({f"sample.controls[{j}].{ours}": f"{at}.{theirs}" for ours, theirs in KEYS.items()})
        fields[f"sample.controls[{j}]"] = at
        controls.append(control)
    return controls, fields, warnings


def _image(unit: dict, at: str) -> str:
    for key in ("image", "input_image"):
        value = unit.get(key)
        if isinstance(value, dict):          # {image, mask}: the extension's image editor
            value = value.get("image")
        if value:
            data = inputs.decode_b64_image(value, f"{at}.{key}")
            inputs.check(data, f"{at}.{key}")
            return inputs.data_url(data)
    raise ConfigError(f"{at}.image", "is required (a base64 image)")


def _module(unit: dict, at: str) -> str:
    module = unit.get("module", "none")
    if module in ("", None):
        return "none"
    return for_module(module.lower() if isinstance(module, str) else module, f"{at}.module")


def model_list(folders) -> dict:
    """GET /controlnet/model_list: the controlnet directories' models, by the name a unit's `model` takes."""
    names = []
    for entry in control_models.listing(folders):
        name = entry["name"]
        names.append(name[: -len(".safetensors")] if name.endswith(".safetensors") else name)
    return {"model_list": names}

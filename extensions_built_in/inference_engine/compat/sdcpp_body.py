"""Checking stable-diffusion.cpp's native request body (compat/sdcpp.py's jobs): each field of its
examples/server/api.md typed, and turned into the engine's sample keys, or refused naming the field
(`invalid`: sd.cpp's `{"error": ...}` shape with `field`). Also the bodies' OpenAPI schemas."""
from extensions_built_in.inference_engine.compat import inputs
from extensions_built_in.inference_engine.compat.common import CompatError, is_int
from toolkit import lora_headers
from toolkit.media import MIME_TYPES
from toolkit.models.arch import MAX_SIZE

MODES = {"img_gen": "image", "vid_gen": "video"}
IMAGE_FORMATS = {"png": "png", "jpeg": "jpg", "webp": "webp"}                  # output_format -> output_ext
# -> (output_ext, mime_type): sd.cpp's, in its order (webm, its default, first), and mp4; not avi
VIDEO_FORMATS = {fmt: (fmt, MIME_TYPES[fmt]) for fmt in ("webm", "webp", "mp4")}
NOT_WRITTEN = ("avi",)                                                         # sd.cpp's, no writer here
# sd.cpp's sample_method -> the engine's sampler (toolkit/samplers.py); a method without an equal here is a 400
SAMPLE_METHODS = {"euler": "euler", "euler_a": "euler_a", "heun": "heun", "dpm++2m": "dpm++_2m",
                  "dpm++2m_sde": "dpm++_2m_sde", "lcm": "lcm", "lms": "lms"}
OWN = (None, "", "default")                          # the model's own sampler / schedule
# sd.cpp's scheduler -> the sampler row's schedule ("discrete", alias "normal": the model's own spacing)
SCHEDULES = {None: "automatic", "": "automatic", "default": "automatic", "discrete": "automatic",
             "normal": "automatic", "karras": "karras", "exponential": "exponential"}
CACHE_MODES = {"disabled": None, "": None, "taylorseer": "taylorseer"}   # sd.cpp's cache_mode -> sample.cache
# engine field -> sd.cpp's, so a 400 names what the client sent
FIELDS = {"sample.prompt": "prompt", "sample.negative_prompt": "negative_prompt", "sample.width": "width",
          "sample.height": "height", "sample.num_inference_steps": "sample_params.sample_steps",
          "sample.shift": "sample_params.flow_shift",
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



# -- checking the body ----------------------------------------------------------------------------------

def json_type(v) -> str:
    return ("null" if v is None else "a boolean" if isinstance(v, bool) else "a number" if isinstance(v, (int, float))
            else "a string" if isinstance(v, str) else "an array" if isinstance(v, list) else "an object")


def typed(obj: dict, key: str, where: str, kind: str, default=None):
    """obj[key] checked to be a JSON `kind` (integer, number, string, boolean, object, array); absent or
    null: `default`."""
    v = obj.get(key)
    if v is None:
        return default
    ok = {"integer": is_int(v), "number": not isinstance(v, bool) and isinstance(v, (int, float)),
          "string": isinstance(v, str), "boolean": isinstance(v, bool), "object": isinstance(v, dict),
          "array": isinstance(v, list)}[kind]
    if not ok:
        raise invalid(where, f"must be {'an' if kind[0] in 'aeiou' else 'a'} {kind}, got {json_type(v)}")
    return int(v) if kind == "integer" else float(v) if kind == "number" else v


def only(obj: dict, key: str, where: str, kind: str, allowed, why: str):
    """A field checked for its type whose only served values are `allowed` (what asks for nothing)."""
    v = typed(obj, key, where, kind)
    if v is not None and v not in allowed:
        raise invalid(where, f"{v!r} is not served here: {why}")
    return v


def sampler_of(params: dict, where: str, spec) -> str | None:
    """sd.cpp's sample_method and scheduler as one of the model's samplers (None: its own)."""
    method = typed(params, "sample_method", f"{where}.sample_method", "string")
    scheduler = typed(params, "scheduler", f"{where}.scheduler", "string")
    if scheduler not in SCHEDULES:
        raise invalid(f"{where}.scheduler", f"{scheduler!r} is not served here (served: discrete, normal, karras, exponential)")
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


def sample_params_of(body: dict, key: str, spec) -> dict:
    """The engine's sample keys from sd.cpp's sample_params (or high_noise_sample_params)."""
    params = typed(body, key, key, "object", {})
    out = {"sampler": sampler_of(params, key, spec)}
    steps = typed(params, "sample_steps", f"{key}.sample_steps", "integer")
    if steps is not None and steps > 0:             # sd.cpp's -1 / 0: the default
        out["num_inference_steps"] = steps
    typed(params, "eta", f"{key}.eta", "number")   # the ancestral samplers' eta is 1 here
    only(params, "shifted_timestep", f"{key}.shifted_timestep", "integer", (0,), "the model's own timesteps run")
    if typed(params, "custom_sigmas", f"{key}.custom_sigmas", "array", []):
        raise invalid(f"{key}.custom_sigmas", "is not served here: the sampler's schedule runs (send [])")
    shift = typed(params, "flow_shift", f"{key}.flow_shift", "number")
    if shift is not None and shift < 0:
        raise invalid(f"{key}.flow_shift", f"must be 0 (the model's own shift) or more, got {shift!r}")
    if shift:                                       # sd.cpp's 0 / null: the model's own
        out["shift"] = shift
    guidance = typed(params, "guidance", f"{key}.guidance", "object", {})
    cfg = typed(guidance, "txt_cfg", f"{key}.guidance.txt_cfg", "number")
    if cfg is not None:
        out["guidance_scale"] = cfg
    typed(guidance, "img_cfg", f"{key}.guidance.img_cfg", "number")
    typed(guidance, "distilled_guidance", f"{key}.guidance.distilled_guidance", "number")
    slg = typed(guidance, "slg", f"{key}.guidance.slg", "object", {})
    layers = typed(slg, "layers", f"{key}.guidance.slg.layers", "array", [])
    if not all(is_int(v) for v in layers):
        raise invalid(f"{key}.guidance.slg.layers", "must be an array of integers")
    for name in ("layer_start", "layer_end"):
        typed(slg, name, f"{key}.guidance.slg.{name}", "number")
    only(slg, "scale", f"{key}.guidance.slg.scale", "number", (0.0,), "skip-layer guidance is not served (send 0)")
    return {k: v for k, v in out.items() if v is not None}


def loras_of(body: dict, folder: str | None) -> tuple[list, dict]:
    """(model.loras, their fields) from sd.cpp's `lora` array: paths as capabilities lists them."""
    entries = typed(body, "lora", "lora", "array", [])
    out, fields = [], {}
    for i, entry in enumerate(entries):
        where = f"lora[{i}]"
        if not isinstance(entry, dict):
            raise invalid(where, f"must be an object {{path, multiplier, is_high_noise}}, got {json_type(entry)}")
        path = typed(entry, "path", f"{where}.path", "string")
        if not path:
            raise invalid(f"{where}.path", "is required (a path from GET /sdcpp/v1/capabilities loras)")
        scale = typed(entry, "multiplier", f"{where}.multiplier", "number", 1.0)
        if typed(entry, "is_high_noise", f"{where}.is_high_noise", "boolean", False):
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


def output_of(body: dict, kind: str) -> tuple[str, str]:
    """(sd.cpp's output_format, the engine's output_ext)."""
    typed(body, "output_compression", "output_compression", "integer")
    fmt = typed(body, "output_format", "output_format", "string")
    table = IMAGE_FORMATS if kind == "img_gen" else {k: ext for k, (ext, _mime) in VIDEO_FORMATS.items()}
    if fmt is None:
        fmt = next(iter(table))
    if fmt not in table:
        why = " (no writer for it here)" if fmt in NOT_WRITTEN and kind == "vid_gen" else ""
        raise invalid("output_format", f"{fmt!r} is not served{why}: one of {', '.join(table)}")
    return fmt, table[fmt]


def common_fields(body: dict, kind: str, spec) -> dict:
    """The sample keys both modes share, every other shared field checked."""
    sample = {}
    for key in ("prompt", "negative_prompt"):
        v = typed(body, key, key, "string")
        if v:
            sample[key] = v
    sample.setdefault("prompt", "")
    clip = typed(body, "clip_skip", "clip_skip", "integer")
    if clip is not None and clip > 1:
        raise invalid("clip_skip", f"{clip} is not served here: the text encoder's last layer is used (-1, 0 or 1)")
    for key in ("width", "height"):
        v = typed(body, key, key, "integer")
        if v is not None:
            if not 1 <= v <= MAX_SIZE:
                raise invalid(key, f"must be from 1 to {MAX_SIZE}, got {v}")
            sample[key] = v
    seed = typed(body, "seed", "seed", "integer", -1)
    if seed < -1:
        raise invalid("seed", f"must be -1 (random) or an integer >= 0, got {seed}")
    sample["seed"] = seed
    sample.update(sample_params_of(body, "sample_params", spec))
    tiling = typed(body, "vae_tiling_params", "vae_tiling_params", "object", {})
    for key, t in (("enabled", "boolean"), ("temporal_tiling", "boolean"), ("tile_size_x", "integer"),
                   ("tile_size_y", "integer"), ("target_overlap", "number"), ("rel_size_x", "number"),
                   ("rel_size_y", "number"), ("extra_tiling_args", "string")):
        typed(tiling, key, f"vae_tiling_params.{key}", t)
    if tiling.get("enabled") is True:
        sample["vae_tiling"] = "on"           # false: tiled only where the whole decode would not fit (auto)
    mode = typed(body, "cache_mode", "cache_mode", "string")
    if mode not in (None, *CACHE_MODES):
        raise invalid("cache_mode", f"{mode!r} is not served here (served: {', '.join(k for k in CACHE_MODES if k)})")
    if CACHE_MODES.get(mode):
        sample["cache"] = {"type": CACHE_MODES[mode]}
    if typed(body, "cache_option", "cache_option", "string"):
        raise invalid("cache_option", "is not served here: the cache runs with the arch's parameters (send \"\")")
    if typed(body, "scm_mask", "scm_mask", "string"):
        raise invalid("scm_mask", "is not served here (send \"\")")
    typed(body, "scm_policy_dynamic", "scm_policy_dynamic", "boolean")
    return sample


def image_field(body: dict, key: str) -> str | None:
    v = typed(body, key, key, "string")
    return v or None


def hires_settings(body: dict, width: int, height: int) -> dict | None:
    """sample.hires from sd.cpp's `hires` (None unless enabled), its scale from target_width/height
    where given (0: `scale`)."""
    h = typed(body, "hires", "hires", "object", {})
    enabled = typed(h, "enabled", "hires.enabled", "boolean", False)
    upscaler = typed(h, "upscaler", "hires.upscaler", "string")
    scale = typed(h, "scale", "hires.scale", "number")
    targets = [typed(h, k, f"hires.{k}", "integer", 0) for k in ("target_width", "target_height")]
    steps = typed(h, "steps", "hires.steps", "integer", 0)
    denoise = typed(h, "denoising_strength", "hires.denoising_strength", "number")
    typed(h, "upscale_tile_size", "hires.upscale_tile_size", "integer")
    if typed(h, "custom_sigmas", "hires.custom_sigmas", "array", []):
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


def prepare_images(images: dict) -> dict:
    """{sample input: data URL} from {(sample input, client field): base64}, each checked first."""
    out = {}
    for (slot, where), value in images.items():
        data = inputs.decode_b64_image(value, where)
        inputs.check(data, where)
        out[slot] = inputs.data_url(data)
    return out

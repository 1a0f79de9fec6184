"""Control maps: an input image -> the picture a ControlNet is conditioned on (edges, depth, ...).

    PREPROCESSORS                       # name -> Preprocessor (data: parameters, the A1111 modules it answers to)
    check(name, resolution=, threshold_a=, threshold_b=, where=) -> (row, resolution, a, b)   # torch-free
    for_module(module, where) -> name   # an sd-webui-controlnet module name (or label) -> ours
    make_map(name, image, *, resolution=, threshold_a=, threshold_b=, load_model=, where=) -> RGB image

The model-free ones are opencv (cv2) calls, as sd-webui-controlnet makes them: this module imports no
torch, so the engine's HTTP process may run them. The model-based ones (depth, normals) take their model
from `load_model(row.model)`, which the caller gives (the worker: toolkit/annotators.load through the
funnel, a pool component); it returns (model, image_processor).

Resolution, as sd-webui-controlnet's `resize_image_with_pad`: the image is scaled so its short side is
`resolution` (cubic up, area down), padded (edge pixels) to a multiple of 64, processed, and the padding
cut off. The map comes back at that size, not the input's: the extension's /controlnet/detect answers the
same, and the map is brought to the generation's size by the control's resize_mode when it is used (one
resampling, not two). A row without a resolution (none, invert, tile, grayscale) keeps the input's size.
"""
from dataclasses import dataclass

from toolkit.errors import ConfigError


@dataclass(frozen=True)
class Param:
    """One slider of a preprocessor, as sd-webui-controlnet describes it (its api_json)."""
    label: str
    default: float
    min: float
    max: float
    step: float = 1.0

    def api_json(self) -> dict:
        return {"name": self.label, "value": self.default, "min": self.min, "max": self.max, "step": self.step}


RESOLUTION = Param("Resolution", 512, 64, 2048, 8)


@dataclass(frozen=True)
class Preprocessor:
    name: str
    modules: tuple                       # sd-webui-controlnet module names it answers to (and their MODULE_LABELS)
    resolution: Param | None = RESOLUTION   # None: works at the input's own size
    threshold_a: Param | None = None
    threshold_b: Param | None = None
    model: str | None = None             # the annotator it needs (toolkit/annotators.ANNOTATORS), None: model-free
    description: str = ""

    @property
    def model_free(self) -> bool:
        return self.model is None

    def describe(self) -> dict:
        """What GET /models and the UI read."""
        params = {k: vars(p) for k, p in (("processor_res", self.resolution), ("threshold_a", self.threshold_a),
                                          ("threshold_b", self.threshold_b)) if p is not None}
        return {"name": self.name, "modules": list(self.modules), "model": self.model,
                "model_free": self.model_free, "params": params, "description": self.description}


PREPROCESSORS = {p.name: p for p in (
    Preprocessor("none", ("none",), resolution=None, description="the image itself is the map"),
    Preprocessor("canny", ("canny",), threshold_a=Param("Low Threshold", 100, 1, 255),
                 threshold_b=Param("High Threshold", 200, 1, 255), description="cv2.Canny edges"),
    Preprocessor("threshold", ("threshold",), threshold_a=Param("Binarization Threshold", 127, 0, 255),
                 description="white where every channel is above the threshold"),
    Preprocessor("scribble", ("scribble_xdog",), threshold_a=Param("XDoG Threshold", 32, 1, 64),
                 description="difference of Gaussians, thresholded: a scribble"),
    Preprocessor("lineart", ("lineart_standard",),
                 description="lines by edges (the image minus its Gaussian blur), no model"),
    Preprocessor("tile", ("tile_resample",), resolution=None,
                 threshold_a=Param("Down Sampling Rate", 1.0, 1.0, 8.0, 0.01),
                 description="the image downscaled by the rate (area), for tile models"),
    Preprocessor("blur", ("blur_gaussian",), threshold_a=Param("Sigma", 9.0, 0.01, 64.0, 0.01),
                 description="Gaussian blur, for tile/blur models"),
    Preprocessor("invert", ("invert",), resolution=None,
                 description="255 - the image: black lines on white become white on black"),
    Preprocessor("grayscale", ("recolor_luminance",), resolution=None,
                 threshold_a=Param("Gamma Correction", 1.0, 0.1, 2.0, 0.001),
                 description="luminance (CIELAB L), gamma-corrected, for recolor models"),
    Preprocessor("depth_anything", ("depth_anything", "depth_anything_v2"), model="depth_anything",
                 description="relative depth by Depth Anything (transformers), near is white"),
    Preprocessor("depth_midas", ("depth",), model="dpt",
                 description="relative depth by MiDaS/DPT (transformers' DPTForDepthEstimation)"),
    Preprocessor("normal_midas", ("normal_map",), model="dpt",
                 threshold_a=Param("Normal Background Threshold", 0.4, 0.0, 1.0, 0.01),
                 description="a normal map from MiDaS/DPT depth (Sobel gradients), as the extension's normal_midas"),
)}
# sd-webui-controlnet's labels (its `alias_names`) where they differ from its module names
MODULE_LABELS = {"depth": "depth_midas", "normal_map": "normal_midas",
                 "lineart_standard": "lineart_standard (from white bg & black line)",
                 "invert": "invert (from white bg & black line)"}
# an sd-webui-controlnet module name or label -> ours
MODULES = {name: p.name for p in PREPROCESSORS.values() for module in p.modules
           for name in (module, MODULE_LABELS.get(module, module))}


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def for_module(module, where: str = "module") -> str:
    """Our preprocessor for an sd-webui-controlnet module name or label; ConfigError(where) if none."""
    if not isinstance(module, str) or module not in MODULES:
        raise ConfigError(where, f"unknown module {module!r} (known: {', '.join(MODULES)})")
    return MODULES[module]


def clamped(name: str, resolution=None, threshold_a=None, threshold_b=None) -> tuple:
    """(resolution, threshold_a, threshold_b) held to preprocessor `name`'s sliders, None where it has none or the
    value is unset: the ControlNet extension takes any value (webuiapi sends 64 for both thresholds), so its
    routes clamp where the native API refuses."""
    row = PREPROCESSORS[name]
    out = [None if v is None or p is None else min(max(v, p.min), p.max)
           for v, p in ((resolution, row.resolution), (threshold_a, row.threshold_a), (threshold_b, row.threshold_b))]
    out[0] = None if out[0] is None else int(round(out[0]))
    return tuple(out)


def _number(value, param: Param, field: str, integer: bool = False):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        raise ConfigError(field, f"must be a number, got {value!r}")
    if not param.min <= value <= param.max:
        raise ConfigError(field, f"must be within {param.min:g}..{param.max:g} ({param.label}), got {value!r}")
    if integer:
        if int(value) != value:
            raise ConfigError(field, f"must be a whole number, got {value!r}")
        return int(value)
    return float(value)


def check(name, *, resolution=None, threshold_a=None, threshold_b=None, where: str = ""):
    """(row, resolution, threshold_a, threshold_b) with defaults filled in, or a ConfigError naming
    `where.preprocessor` / `where.processor_res` / `where.threshold_a|b`. A value for a parameter the
    preprocessor does not have is ignored (clients send all three)."""
    row = PREPROCESSORS.get(name) if isinstance(name, str) else None
    if row is None:
        raise ConfigError(_join(where, "preprocessor"),
                          f"unknown preprocessor {name!r} (known: {', '.join(PREPROCESSORS)})")
    values = []
    for key, param, value in (("processor_res", row.resolution, resolution), ("threshold_a", row.threshold_a, threshold_a),
                              ("threshold_b", row.threshold_b, threshold_b)):
        if param is None:
            values.append(None)
        elif value is None:
            values.append(int(param.default) if key == "processor_res" else param.default)
        else:
            values.append(_number(value, param, _join(where, key), integer=key == "processor_res"))
    return (row, *values)


def make_map(name: str, image, *, resolution: int | None = None, threshold_a: float | None = None,
             threshold_b: float | None = None, load_model=None, where: str = ""):
    """The control map of `image` (a PIL image) by preprocessor `name`, as an RGB PIL image. `load_model(key)`
    gives (model, image_processor) for a model-based one (never called for the others). Bad names and
    values are a ConfigError naming `where.<field>`."""
    import numpy as np
    from PIL import Image

    row, res, a, b = check(name, resolution=resolution, threshold_a=threshold_a, threshold_b=threshold_b, where=where)
    if row.name == "none":
        return image.convert("RGB")
    if not row.model_free and load_model is None:
        raise ConfigError(_join(where, "preprocessor"), f"{row.name} needs its model, which is loaded by the worker")
    rgb = hwc3(np.asarray(image.convert("RGBA") if "A" in image.getbands() else image.convert("RGB")))
    if row.model_free:
        out = _MODEL_FREE[row.name](rgb, res, a, b)
    else:
        out = _MODEL_BASED[row.name](rgb, res, a, b, load_model(row.model))
    return Image.fromarray(hwc3(out))


# -- the image plumbing sd-webui-controlnet shares between preprocessors ---------------------------------
def hwc3(x):
    """uint8 HxW, HxWx1, HxWx3 or HxWx4 -> HxWx3 (alpha composited onto white), as annotator/util.HWC3."""
    import numpy as np
    if x.ndim == 2:
        x = x[:, :, None]
    if x.shape[2] == 3:
        return x
    if x.shape[2] == 1:
        return np.concatenate([x, x, x], axis=2)
    color = x[:, :, :3].astype(np.float32)
    alpha = x[:, :, 3:4].astype(np.float32) / 255.0
    return (color * alpha + 255.0 * (1.0 - alpha)).clip(0, 255).astype(np.uint8)


def resize_with_pad(img, resolution: int):
    """(padded image, remove_pad): short side scaled to `resolution` (cubic up, area down), padded with its
    edge pixels to a multiple of 64 on the bottom and right; remove_pad cuts a result back to the scaled size."""
    import cv2
    import numpy as np
    h, w = img.shape[:2]
    k = float(resolution) / float(min(h, w))
    th, tw = int(np.round(float(h) * k)), int(np.round(float(w) * k))
    img = cv2.resize(img, (tw, th), interpolation=cv2.INTER_CUBIC if k > 1 else cv2.INTER_AREA)
    pad_h, pad_w = -th % 64, -tw % 64
    padded = np.pad(img, [[0, pad_h], [0, pad_w], [0, 0]], mode="edge")
    return np.ascontiguousarray(padded), lambda x: np.ascontiguousarray(x[:th, :tw])


# -- model-free ------------------------------------------------------------------------------------------
def _canny(img, res, low, high):
    import cv2
    img, unpad = resize_with_pad(img, res)
    return unpad(cv2.Canny(img, int(low), int(high)))


def _threshold(img, res, a, _b):
    import numpy as np
    img, unpad = resize_with_pad(img, res)
    out = np.zeros_like(img)
    out[np.min(img, axis=2) > a] = 255
    return unpad(out)


def _scribble(img, res, a, _b):
    """sd-webui-controlnet's scribble_xdog: the difference of two Gaussians (sigma 0.5 and 5), thresholded."""
    import cv2
    import numpy as np
    img, unpad = resize_with_pad(img, res)
    g1 = cv2.GaussianBlur(img.astype(np.float32), (0, 0), 0.5)
    g2 = cv2.GaussianBlur(img.astype(np.float32), (0, 0), 5.0)
    dog = (255 - np.min(g2 - g1, axis=2)).clip(0, 255).astype(np.uint8)
    out = np.zeros_like(img)
    out[2 * (255 - dog) > a] = 255
    return unpad(out)


def _lineart(img, res, _a, _b):
    """sd-webui-controlnet's lineart_standard: how much darker each pixel is than its Gaussian surround
    (sigma 6), scaled by the median of the lines."""
    import cv2
    import numpy as np
    img, unpad = resize_with_pad(img, res)
    x = img.astype(np.float32)
    g = cv2.GaussianBlur(x, (0, 0), 6.0)
    intensity = np.min(g - x, axis=2).clip(0, 255)
    lines = intensity[intensity > 8]
    intensity /= max(16, float(np.median(lines)) if lines.size else 0.0)
    intensity *= 127
    return unpad(intensity.clip(0, 255).astype(np.uint8))


def _tile(img, _res, rate, _b):
    import cv2
    if rate < 1.1:             # as the extension: below 1.1 the image is the map
        return img
    h, w = img.shape[:2]
    return cv2.resize(img, (max(1, int(w / rate)), max(1, int(h / rate))), interpolation=cv2.INTER_AREA)


def _blur(img, res, sigma, _b):
    import cv2
    img, unpad = resize_with_pad(img, res)
    return cv2.GaussianBlur(unpad(img), (0, 0), float(sigma))


def _invert(img, _res, _a, _b):
    return 255 - img


def _grayscale(img, _res, gamma, _b):
    import cv2
    import numpy as np
    luminance = cv2.cvtColor(img, cv2.COLOR_RGB2LAB)[:, :, 0].astype(np.float32) / 255.0
    return ((luminance ** gamma) * 255.0).clip(0, 255).astype(np.uint8)


_MODEL_FREE = {"canny": _canny, "threshold": _threshold, "scribble": _scribble, "lineart": _lineart,
               "tile": _tile, "blur": _blur, "invert": _invert, "grayscale": _grayscale}


# -- model-based (torch, in the worker) -------------------------------------------------------------------
def predict_depth(model, processor, img):
    """A depth model's relative depth (float32 HxW numpy, larger = nearer) at the image's size: transformers'
    image processor, the model, and the processor's post_process_depth_estimation, as its depth-estimation
    pipeline runs them."""
    import torch
    from PIL import Image
    param = next(model.parameters())
    inputs = processor(images=Image.fromarray(img), return_tensors="pt")
    inputs = {k: v.to(device=param.device, dtype=param.dtype) if v.is_floating_point() else v.to(param.device)
              for k, v in inputs.items()}
    with torch.no_grad():
        outputs = model(**inputs)
    depth = processor.post_process_depth_estimation(outputs, target_sizes=[img.shape[:2]])[0]["predicted_depth"]
    return depth.float().cpu().numpy()


def _gray_depth(depth):
    """Relative depth -> uint8, min to max over 0..255 (truncated), as transformers' pipeline writes `depth`."""
    import numpy as np
    span = float(depth.max() - depth.min())
    norm = (depth - depth.min()) / span if span > 0 else np.zeros_like(depth)
    return (norm * 255).astype("uint8")


def _depth(img, res, _a, _b, loaded):
    img, unpad = resize_with_pad(img, res)
    return unpad(_gray_depth(predict_depth(*loaded, img)))


def _normal(img, res, bg_threshold, _b, loaded, a=2.0 * 3.141592653589793):
    """sd-webui-controlnet's normal_midas: x and y from the Sobel gradients of the depth (zero where the
    normalized depth is under the background threshold), z a constant, normalized, BGR order as it writes."""
    import cv2
    import numpy as np
    img, unpad = resize_with_pad(img, res)
    depth = predict_depth(*loaded, img)
    span = float(depth.max() - depth.min())
    norm = (depth - depth.min()) / span if span > 0 else np.zeros_like(depth)
    x = cv2.Sobel(depth, cv2.CV_32F, 1, 0, ksize=3)
    y = cv2.Sobel(depth, cv2.CV_32F, 0, 1, ksize=3)
    z = np.ones_like(x) * a
    x[norm < bg_threshold] = 0
    y[norm < bg_threshold] = 0
    normal = np.stack([x, y, z], axis=2)
    normal /= np.sum(normal ** 2.0, axis=2, keepdims=True) ** 0.5
    return unpad(np.ascontiguousarray((normal * 127.5 + 127.5).clip(0, 255).astype(np.uint8)[:, :, ::-1]))


_MODEL_BASED = {"depth_anything": _depth, "depth_midas": _depth, "normal_midas": _normal}

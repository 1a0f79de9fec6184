"""`sample.controls`: the ControlNets a request runs with, each over its own control image.

    ControlRef.from_dict({"model": "canny.safetensors", "image": "<asset>", "scale": 0.8}, "sample.controls[0]")
    parse_controls(raw, "sample.controls") -> (ControlRef, ...)
    control_map(control, image) -> the PIL control map the pipeline takes

`model` is a diffusers folder, a single file, or a file name found in the model folders' controlnet
directories (toolkit/control_models.py resolves and checks it against the request's arch before
queueing). `image` is an input image, resolved and checked as the others are (an asset, a data URL).
`preprocessor` turns the image into the map (`none`: the image is the map). `resize_mode` brings an
image of another size to the request's (A1111's resize | crop | fill). `scale`, `start`, `end` are
diffusers' controlnet_conditioning_scale, control_guidance_start and control_guidance_end; `mode`
is a union model's control type (a name its arch row lists, or its index). No torch here.
"""
from dataclasses import dataclass

from toolkit.errors import ConfigError
from toolkit.settings import Settings, setting

RESIZE_MODES = ("resize", "crop", "fill")      # A1111's 0, 1, 2 (config_modules.RESIZE_MODES says the same)
# the preprocessors a request may name; the preprocessor helper's toolkit.control_maps widens this
PREPROCESSORS = ("none",)


@dataclass(frozen=True)
class ControlRef(Settings):
    """One ControlNet of a request."""
    model: str = ""
    image: str = ""
    preprocessor: str = setting("none", doc="none: the image is the control map")
    scale: float = setting(1.0, min=0, max=10, doc="controlnet_conditioning_scale")
    start: float = setting(0.0, min=0, max=1, doc="control_guidance_start: the fraction of steps it starts at")
    end: float = setting(1.0, min=0, max=1, doc="control_guidance_end: the fraction of steps it stops at")
    mode: str | int | None = setting(None, doc="a union model's control type (its name or index)")
    resize_mode: str = setting("crop", choices=RESIZE_MODES, doc="the image to the request's size (A1111's 0, 1, 2)")
    processor_res: int = setting(512, min=64, max=4096, doc="the preprocessor's working resolution")
    threshold_a: float | None = None
    threshold_b: float | None = None

    @classmethod
    def from_dict(cls, d, where: str) -> "ControlRef":
        if isinstance(d, ControlRef):
            return d
        if not isinstance(d, dict):
            raise ConfigError(where, f"must be a mapping {{model, image, ...}}, got {type(d).__name__}")
        d = dict(d)
        mode = d.pop("mode", None)
        if mode is not None and (isinstance(mode, bool) or not isinstance(mode, (str, int))):
            raise ConfigError(f"{where}.mode", f"must be a control type's name or index, got {mode!r}")
        ref = super().from_dict(d, where)
        object.__setattr__(ref, "mode", mode)
        return ref

    def check(self, where: str):
        for name in ("model", "image"):
            if not getattr(self, name):
                raise ConfigError(f"{where}.{name}", "is required")
        if self.preprocessor not in PREPROCESSORS:
            raise ConfigError(f"{where}.preprocessor", f"unknown preprocessor {self.preprocessor!r} "
                              f"(known: {', '.join(PREPROCESSORS)})")
        if self.end <= self.start:
            raise ConfigError(f"{where}.end", f"{self.end:g} is not after start ({self.start:g})")

    def to_dict(self) -> dict:
        return {k: v for k, v in super().to_dict().items() if v is not None}


def parse_controls(raw, where: str) -> tuple:
    """`sample.controls` as ControlRefs (None or [] -> ())."""
    if raw is None:
        return ()
    if not isinstance(raw, (list, tuple)):
        raise ConfigError(where, f"must be a list of {{model, image, scale, ...}}, got {type(raw).__name__}")
    return tuple(ControlRef.from_dict(d, f"{where}[{i}]") for i, d in enumerate(raw))


def control_map(control: ControlRef, image):
    """The control map of `image` (a PIL image at the request's size) for `control`: the one call site of
    the preprocessors. `none` is the image itself; the integrator wires the others to
    toolkit.control_maps.make_map(name, image, resolution=, threshold_a=, threshold_b=, load_model=)."""
    if control.preprocessor == "none":
        return image
    raise ConfigError("sample.controls.preprocessor", f"unknown preprocessor {control.preprocessor!r}")

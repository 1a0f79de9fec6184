"""`sample.controls`: the ControlNets a request runs with, each over its own control image.

    ControlRef.from_dict({"model": "canny.safetensors", "image": "<asset>", "scale": 0.8}, "sample.controls[0]")
    parse_controls(raw, "sample.controls") -> (ControlRef, ...)
    control_map(control, width, height, load_model=None) -> the PIL control map the pipeline takes

`model` is a diffusers folder, a single file, or a file name found in the model folders' controlnet
directories (toolkit/control_models.py resolves and checks it against the request's arch before
queueing). `image` is an input image, resolved and checked as the others are (an asset, a data URL).
`preprocessor` turns the image into the map (toolkit/control_maps.py; `none`: the image is the map),
at `processor_res` with its thresholds. `resize_mode` brings the map, of another size, to the request's
(A1111's resize | crop | fill). `scale`, `start`, `end` are
diffusers' controlnet_conditioning_scale, control_guidance_start and control_guidance_end; `mode`
is a union model's control type (a name its arch row lists, or its index). No torch here.
"""
from dataclasses import dataclass

from toolkit import control_maps
from toolkit.errors import ConfigError
from toolkit.settings import Settings, setting

RESIZE_MODES = ("resize", "crop", "fill")      # A1111's 0, 1, 2 (config_modules.RESIZE_MODES says the same)


@dataclass(frozen=True)
class ControlRef(Settings):
    """One ControlNet of a request."""
    model: str = ""
    image: str = ""
    preprocessor: str = setting("none", doc="a control_maps preprocessor (GET /preprocessors); none: the image is the map")
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
        control_maps.check(self.preprocessor, resolution=self.processor_res, threshold_a=self.threshold_a,
                           threshold_b=self.threshold_b, where=where)
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


def control_map(control: ControlRef, width: int, height: int, load_model=None):
    """The control map for `control` at width x height: its image through its preprocessor (made from the image
    as given, at processor_res, as the ControlNet extension makes it), then brought to the size by its
    resize_mode. `load_model(key)`: a model-based preprocessor's (model, processor), which the worker loads
    through the pool (toolkit/annotators.py)."""
    from toolkit.images import fit, load_image

    if control.preprocessor == "none":
        return load_image(control.image, width, height, control.resize_mode)
    made = control_maps.make_map(control.preprocessor, load_image(control.image), resolution=control.processor_res,
                                 threshold_a=control.threshold_a, threshold_b=control.threshold_b,
                                 load_model=load_model, where="sample.controls")
    return fit(made, width, height, control.resize_mode)

"""One table: arch -> holder, modality, defaults, size rules, latent layout, preview family.

Plain data, importable without torch. GET /models serves it and the UI reads it from
there; tests and the tiny-model factory read it too. Adding an arch is one holder file
under toolkit/models/archs/ plus one row here.
"""
from dataclasses import asdict, dataclass, field


@dataclass(frozen=True)
class SampleDefaults:
    width: int = 1024
    height: int = 1024
    num_inference_steps: int = 28
    guidance_scale: float = 3.5
    num_frames: int = 1
    fps: int = 0
    duration: float = 0.0          # seconds, audio only
    output_ext: str = "png"


@dataclass(frozen=True)
class Extra:
    """A per-arch sample key: its type ("str" | "float" | "int") and default (None = unset)."""
    type: str
    default: object = None


@dataclass(frozen=True)
class Variant:
    """A named flavour of an arch (e.g. krea2 turbo/raw): sample defaults and extras that differ."""
    defaults: dict = field(default_factory=dict)      # SampleDefaults fields
    extras: dict = field(default_factory=dict)        # sample_extras defaults


@dataclass(frozen=True)
class ArchSpec:
    name: str
    holder: str                    # "module:Class", imported on first use
    modality: str                  # image | video | audio
    default_name_or_path: str      # the real hub repo ("" when there is none: local files only)
    defaults: SampleDefaults
    size_divisor: int = 16         # width/height (image/video) must be multiples of this
    needs_ctrl_img: bool = False
    latent_layout: str = "BCHW"    # what scheduler.step returns: BCHW | BCFHW | BLC | packed
    latent_patch: int = 1          # packed layouts: tokens are patch x patch latent pixels
    vae_scale: int = 8             # pixels per latent pixel (spatial)
    preview_family: str | None = None
    uses_negative_prompt: bool = True
    # per-arch sample keys beyond GenerateImageConfig's common ones: name -> Extra
    sample_extras: dict = field(default_factory=dict)
    variants: dict = field(default_factory=dict)      # name -> Variant; the first is the default
    round_size: bool = False       # round width/height up to size_divisor (with a warning) instead of refusing
    description: str = ""

    @property
    def default_variant(self) -> str | None:
        return next(iter(self.variants), None)

    def sample_defaults(self, variant: str | None = None) -> dict:
        """SampleDefaults fields and extras' defaults, with the variant's on top."""
        d = asdict(self.defaults)
        d.update({k: e.default for k, e in self.sample_extras.items()})
        v = self.variants.get(variant or self.default_variant) if self.variants else None
        if v is not None:
            d.update(v.defaults)
            d.update(v.extras)
        return d

    def public(self) -> dict:
        """The row as served to clients (no import paths)."""
        d = asdict(self)
        d.pop("holder")
        d["sample_extras"] = {k: e.default for k, e in self.sample_extras.items()}
        d["sample_extra_types"] = {k: e.type for k, e in self.sample_extras.items()}
        d["variants"] = {name: self.sample_defaults(name) for name in self.variants}
        d["default_variant"] = self.default_variant
        return d


_ROWS = (
    ArchSpec("zimage", "toolkit.models.archs.zimage:ZImageModel", "image", "Tongyi-MAI/Z-Image-Turbo",
             SampleDefaults(1024, 1024, 8, 0.0), size_divisor=16, latent_layout="BCHW",
             preview_family="flux", description="Z-Image Turbo (Qwen3 text encoder, 16-ch VAE)"),
    ArchSpec("flux", "toolkit.models.archs.flux:FluxModel", "image", "black-forest-labs/FLUX.1-dev",
             SampleDefaults(1024, 1024, 28, 3.5), size_divisor=16, latent_layout="packed", latent_patch=2,
             preview_family="flux", uses_negative_prompt=False, description="FLUX.1 (CLIP + T5, packed tokens)"),
    ArchSpec("sd1", "toolkit.models.archs.sd1:SD1Model", "image", "stable-diffusion-v1-5/stable-diffusion-v1-5",
             SampleDefaults(512, 512, 25, 7.5), size_divisor=8, latent_layout="BCHW",
             preview_family="sd1", description="Stable Diffusion 1.x (UNet)"),
    ArchSpec("wan21", "toolkit.models.archs.wan21:Wan21Model", "video", "Wan-AI/Wan2.1-T2V-1.3B-Diffusers",
             SampleDefaults(832, 480, 30, 5.0, num_frames=33, fps=16, output_ext="mp4"), size_divisor=16,
             latent_layout="BCFHW", preview_family="wan21", description="Wan 2.1 text-to-video"),
    ArchSpec("ace_step", "toolkit.models.archs.ace_step:AceStepModel", "audio",
             "ACE-Step/acestep-v15-xl-turbo-diffusers",
             SampleDefaults(0, 0, 8, 1.0, duration=30.0, output_ext="wav"), size_divisor=1,
             latent_layout="BLC", preview_family=None, uses_negative_prompt=False,
             sample_extras={"lyrics": Extra("str", "")},
             description="ACE-Step 1.5 text-to-music"),
    ArchSpec("krea2", "toolkit.models.archs.krea2:Krea2Model", "image", "",   # no public repo: local files only
             SampleDefaults(1024, 1024, 8, 0.0), size_divisor=16, round_size=True, latent_layout="packed",
             latent_patch=2, preview_family="wan21",
             sample_extras={"mu": Extra("float"), "shift_y1": Extra("float", 0.5), "shift_y2": Extra("float", 1.15)},
             variants={"turbo": Variant({"num_inference_steps": 8, "guidance_scale": 0.0}, {"mu": 1.15}),
                       "raw": Variant({"num_inference_steps": 52, "guidance_scale": 3.5}, {"mu": None})},
             description="Krea 2 (Qwen3-VL text encoder, Qwen Image VAE); turbo or raw"),
)

ARCHS: dict[str, ArchSpec] = {row.name: row for row in _ROWS}


def get_arch(name: str) -> ArchSpec:
    try:
        return ARCHS[name]
    except KeyError:
        raise KeyError(f"unknown arch {name!r} (known: {', '.join(sorted(ARCHS))})") from None


def get_model_class(name: str):
    """The holder class for `name`, imported on demand."""
    module, cls = get_arch(name).holder.split(":")
    return getattr(__import__(module, fromlist=[cls]), cls)

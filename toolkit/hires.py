"""Hires fix (`sample.hires`) and upscaling alone (`sample.task: upscale`, `sample.upscale`): the settings
and their rules across the request. No torch (toolkit/models/hires_run.py runs them).

A hires request is three steps in one (A1111's "Hires. fix"): the base pass at the request's size, an
upscale by `scale` (a latent upscaler: the base pass's latents interpolated; or a pixel upscaler: its image
by Lanczos, Nearest or an upscale model), then img2img at the new size with `denoise` as its strength and
`steps` (0: the base pass's). Only an arch with an img2img task takes it; a latent upscaler only where the
row's latents are spatial (layout BCHW: the pipeline's latent output is what its img2img takes back).
"""
from dataclasses import dataclass, replace

from toolkit.errors import ConfigError
from toolkit.settings import Settings, setting

UPSCALE = "upscale"          # the task that upscales init_img alone: no diffusion, no model loaded
# A1111's latent upscale modes (shared.latent_upscale_modes): name -> (torch interpolate mode, antialias)
LATENT_UPSCALERS = {"Latent": ("bilinear", False), "Latent (antialiased)": ("bilinear", True),
                    "Latent (bicubic)": ("bicubic", False), "Latent (bicubic antialiased)": ("bicubic", True),
                    "Latent (nearest)": ("nearest", False), "Latent (nearest-exact)": ("nearest-exact", False)}
PIXEL_UPSCALERS = ("Lanczos", "Nearest")      # PIL's resampling, no model
BUILT_IN = (*LATENT_UPSCALERS, *PIXEL_UPSCALERS)
MAX_SCALE = 8


@dataclass(frozen=True)
class HiresSettings(Settings):
    """`sample.hires`: a second, larger img2img pass over the base pass's result (A1111's hr_* fields)."""
    scale: float = setting(2.0, min=1, max=MAX_SCALE, doc="the base size times this")
    upscaler: str = setting("Latent", doc="a latent mode (Latent, Latent (bicubic), ...), Lanczos, Nearest, "
                            "or an upscale model's name (GET /upscalers)")
    steps: int = setting(0, min=0, doc="the second pass's steps; 0: the base pass's (A1111's hr_second_pass_steps)")
    denoise: float = setting(0.7, min=0, max=1, exclusive_min=True, doc="the second pass's img2img strength")
    prompt: str | None = setting(None, doc="the second pass's prompt (unset: the request's)")
    negative_prompt: str | None = setting(None, doc="the second pass's negative prompt (unset: the request's)")


@dataclass(frozen=True)
class UpscaleSettings(Settings):
    """`sample.upscale`: task upscale's upscaler and factor; an upscale model runs on tiles of `tile`
    pixels overlapping by `overlap` (0: the whole image at once), blended where they overlap."""
    upscaler: str = setting("Lanczos", doc="Lanczos, Nearest, or an upscale model's name (GET /upscalers)")
    scale: float = setting(2.0, min=0, max=MAX_SCALE, exclusive_min=True)
    tile: int = setting(512, min=0, max=8192, doc="an upscale model's input tile side, pixels (0: untiled)")
    overlap: int = setting(32, min=0, max=1024, doc="pixels two neighbouring tiles share")

    def check(self, where: str):
        if self.tile and self.overlap * 2 >= self.tile:
            raise ConfigError(f"{where}.overlap", f"{self.overlap} is not under half the tile ({self.tile})")


def hires_size(width: int, height: int, scale: float, divisor: int) -> tuple[int, int]:
    """The second pass's size: the base size times `scale`, down to the arch's size divisor (A1111's
    int(size * scale), then its latent's // 8)."""
    return (max(divisor, int(width * scale) // divisor * divisor), max(divisor, int(height * scale) // divisor * divisor))


def upscale_size(width: int, height: int, scale: float) -> tuple[int, int]:
    return max(1, round(width * scale)), max(1, round(height * scale))


def steps_of(gen) -> int:
    """The second pass's num_inference_steps."""
    return gen.hires.steps or gen.num_inference_steps


def resolved(gen, spec, variant, policy, where: str = "sample"):
    """`gen` with its hires and upscale settings checked against the arch (`spec`) and their upscaler
    named by `policy.upscaler` (a model's name becomes its file); ConfigError naming `where.hires.<key>`
    or `where.upscale.<key>`."""
    if gen.task == UPSCALE:
        if gen.hires is not None:
            raise ConfigError(f"{where}.hires", "task upscale runs no diffusion: give sample.upscale")
        up = gen.upscale or UpscaleSettings()
        if up.upscaler in LATENT_UPSCALERS:
            raise ConfigError(f"{where}.upscale.upscaler", f"{up.upscaler} upscales latents: an image upscales "
                              f"with {', '.join(PIXEL_UPSCALERS)} or an upscale model")
        path = policy.upscaler(up.upscaler, f"{where}.upscale.upscaler")
        return replace(gen, upscale=replace(up, upscaler=path or up.upscaler))
    if gen.upscale is not None:
        raise ConfigError(f"{where}.upscale", f"only task upscale takes it (this is task {gen.task}; "
                          "a second, larger pass is sample.hires)")
    hr = gen.hires
    if hr is None:
        return gen
    if spec.modality != "image" or "img2img" not in {t.name for t in spec.tasks_for(variant)}:
        raise ConfigError(f"{where}.hires", f"arch {spec.name} has no img2img task for the second pass")
    latent = hr.upscaler in LATENT_UPSCALERS
    if latent and spec.latents.layout != "BCHW":
        raise ConfigError(f"{where}.hires.upscaler", f"arch {spec.name}'s latents are {spec.latents.layout}, "
                          f"not spatial: use Lanczos, Nearest or an upscale model")
    if gen.batch_size > 1:
        raise ConfigError(f"{where}.batch_size", "a hires request makes one image: batch_size must be 1")
    steps = steps_of(gen)
    if steps * hr.denoise < 1:
        raise ConfigError(f"{where}.hires.denoise", f"denoise {hr.denoise:g} of {steps} steps is less than one "
                          "step: raise denoise or hires.steps")
    from toolkit.models.arch import MAX_SIZE
    w, h = hires_size(gen.width, gen.height, hr.scale, spec.size_divisor)
    reach = min(MAX_SIZE, spec.max_side_for(variant) or MAX_SIZE)
    if max(w, h) > reach:
        raise ConfigError(f"{where}.hires.scale", f"{gen.width}x{gen.height} times {hr.scale:g} is {w}x{h}, "
                          f"over {reach}, the largest side arch {spec.name} takes")
    path = None if latent else policy.upscaler(hr.upscaler, f"{where}.hires.upscaler")
    return replace(gen, hires=replace(hr, upscaler=path or hr.upscaler))


def second_pass(gen, spec):
    """The img2img config of a hires request's second pass (its image is given by the caller)."""
    hr = gen.hires
    w, h = hires_size(gen.width, gen.height, hr.scale, spec.size_divisor)
    return replace(gen, hires=None, task="img2img", init_img=None, mask_img=None, ctrl_img=None, ctrl_img_1=None,
                   ctrl_img_2=None, ctrl_img_3=None, width=w, height=h, strength=hr.denoise,
                   num_inference_steps=steps_of(gen), prompt=gen.prompt if hr.prompt is None else hr.prompt,
                   negative_prompt=gen.negative_prompt if hr.negative_prompt is None else hr.negative_prompt)


def first_pass(gen):
    return replace(gen, hires=None)


def check_task(v: dict, where: str):
    """Task upscale's inputs (config_modules._resolve_task): init_img alone, no strength."""
    if not v.get("init_img"):
        raise ConfigError(f"{where}.init_img", "task upscale needs init_img (the image to upscale)")
    from toolkit.models.arch import INPUTS
    for name in INPUTS:
        if name != "init_img" and v.get(name):
            raise ConfigError(f"{where}.{name}", "task upscale takes init_img alone")
    if v.get("strength") is not None:
        raise ConfigError(f"{where}.strength", "task upscale runs no diffusion: it takes no strength")


def upscaler_label(value: str | None) -> str | None:
    """An upscaler as a file records it: a built-in by name, a model by its file's stem (no path)."""
    import os
    if value is None or value in BUILT_IN:
        return value
    return os.path.splitext(os.path.basename(value))[0]

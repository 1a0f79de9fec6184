"""A hires request run by a holder (toolkit/hires.py has the settings and rules): the base pass, the upscale,
the img2img pass at the new size. Each pass is one holder.generate_single call, so it is what the bare
pipelines give called by hand: the base pipeline (its latents for a latent upscaler, its image else), the
upscale (torch's interpolate as A1111 does; PIL or an upscale model), and the arch's img2img pipeline with
that image, the second pass's steps, `denoise` as strength and the request's seed.
"""
from toolkit import hires, upscalers

PASSES = ("base", "hires")      # the passes frames name (`pass` key); the upscale between them has status frames


def upscale_latents(latents, width: int, height: int, upscaler: str, spatial: int):
    """A1111's latent upscale (processing.py): interpolate to the second pass's latent size."""
    import torch.nn.functional as F

    mode, antialias = hires.LATENT_UPSCALERS[upscaler]
    if latents.dim() == 3:
        latents = latents[None]
    return F.interpolate(latents, size=(height // spatial, width // spatial), mode=mode, antialias=antialias)


def generate_hires(holder, gen, *, on_step=None, on_status=None, on_pass=None, tile: int = 512, overlap: int = 32):
    """`gen` (with `hires`) on `holder`: its final image. `on_pass(name, pass_gen)` hears each pass begin
    ("base", then "hires", with the config that pass runs), before its first step."""
    spec = holder.spec
    hr = gen.hires
    base, second = hires.first_pass(gen), hires.second_pass(gen, spec)
    latent = hr.upscaler in hires.LATENT_UPSCALERS
    if on_pass is not None:
        on_pass("base", base)
    first = holder.generate_single(base, on_step=on_step, on_status=on_status,
                                   output_type="latent" if latent else None)
    if on_status is not None:
        on_status(f"upscaling to {second.width}x{second.height} ({hires.upscaler_label(hr.upscaler)})", "upscaling")
    if latent:
        image = upscale_latents(first, second.width, second.height, hr.upscaler, spec.latents.spatial)
    else:
        image = upscalers.upscale(first, hr.upscaler, second.width, second.height, device=holder.device,
                                  dtype=holder.dtype, tile=tile, overlap=overlap, status=on_status)
    if on_pass is not None:
        on_pass("hires", second)
    task = holder.task_of(second)
    return holder.generate_single(second, on_step=on_step, on_status=on_status, inputs={task.image_arg: image})

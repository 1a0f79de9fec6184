"""Task upscale (`sample.task: upscale`, toolkit/hires.py): a request's init_img through its upscaler alone,
written as the request's file. No diffusion and no holder: the request's model is only its name (any
model; nothing of it is loaded, and the resident one stays as it was)."""
import json

from toolkit import hires, upscalers

FORMAT_VERSION = 1


def run(work, *, device: str = "cpu", dtype=None, status=None, cancel=None) -> dict:
    """Upscale `work` (a GenerationRequest of task upscale) into `work.output_path`; its record."""
    from toolkit.images import load_image
    from toolkit.media import commit_guard, save_media

    gen = work.sample
    up = gen.upscale or hires.UpscaleSettings()
    image = load_image(gen.init_img)
    width, height = hires.upscale_size(image.width, image.height, up.scale)
    if status is not None:
        status(f"upscaling {image.width}x{image.height} to {width}x{height} ({hires.upscaler_label(up.upscaler)})",
               "upscaling")
    out = upscalers.upscale(image, up.upscaler, width, height, device=device, dtype=dtype, tile=up.tile,
                            overlap=up.overlap, status=status)
    if cancel is not None:
        cancel()
    if status is not None:
        status("saving", "saving")
    with commit_guard(cancel):
        record = save_media("image", out, work.output_path, ext=gen.output_ext, metadata=metadata(work.model, gen))
    record.update(seed=None, prompt="")
    return record


def metadata(mc, gen) -> dict:
    """A1111's extras text (`Postprocess upscale by`, `Postprocess upscaler`) and the request as JSON."""
    from toolkit.file_settings import PARAMETERS_KEY, SETTINGS_KEY, VERSION_TEXT, public_model, public_sample, quote

    up = gen.upscale or hires.UpscaleSettings()
    label = hires.upscaler_label(up.upscaler)
    sample = public_sample(gen)
    sample["upscale"] = {**sample["upscale"], "upscaler": label} if sample.get("upscale") else None
    text = f"Postprocess upscale by: {up.scale:g}, Postprocess upscaler: {quote(label)}, Version: {VERSION_TEXT}"
    settings = {"version": FORMAT_VERSION, "modality": "image", "task": hires.UPSCALE, "model": public_model(mc),
                "sample": sample}
    return {PARAMETERS_KEY: text, SETTINGS_KEY: json.dumps(settings, ensure_ascii=True, sort_keys=True,
                                                           separators=(",", ":"), allow_nan=False)}

"""FLUX.1 Kontext [dev]: Flux.1 editing an input image, whose VAE latents join the transformer's
sequence; embedded guidance as Flux. CLIP, T5 and VAE are Flux's (the tiny builds them with
flux.py's recipe, so a flux/kontext pair shares those files).

The pipeline rescales the requested size to `max_area` (1024^2 by default); the engine passes
max_area = width * height, so the output is the requested size. By default the input image is
resized to the Kontext training resolution nearest its aspect ratio (`_auto_resize`); the
`auto_resize` sample key turns that off (the input keeps its own size, floored to 16 px).
"""
from toolkit import latent_formats
from toolkit.models.arch import ArchSpec, Extra, Latents, SampleDefaults, Task, Tiny
from toolkit.models.archs.flux import COMPONENTS, SCHEDULER_CONFIG, tiny_flux_encoders, tiny_flux_transformer
from toolkit.models.base_model import BaseModel
from toolkit.models.tiny import kit


class FluxKontextModel(BaseModel):
    def pipeline_kwargs(self, gen):
        auto_resize = gen.extras.get("auto_resize")
        return {**self.input_kwargs(gen), "prompt": gen.prompt, "width": gen.width, "height": gen.height,
                "max_area": gen.width * gen.height, "num_inference_steps": gen.num_inference_steps,
                "guidance_scale": gen.guidance_scale, "_auto_resize": True if auto_resize is None else auto_resize}


def _tiny(b):
    return dict(tiny_flux_encoders(b), transformer=tiny_flux_transformer(b),
                scheduler=kit.flow_match_scheduler(**SCHEDULER_CONFIG))


SPEC = ArchSpec(
    name="flux_kontext", modality="image", default_name_or_path="black-forest-labs/FLUX.1-Kontext-dev",
    pipeline="FluxKontextPipeline", holder=FluxKontextModel, components=COMPONENTS,
    pipeline_init_kwargs={"image_encoder": None, "feature_extractor": None},
    defaults=SampleDefaults(1024, 1024, 28, 2.5),      # the model card: guidance 2.5, 28 steps, 1024^2
    tasks=(Task("edit", "FluxKontextPipeline"),), uses_negative_prompt=False,      # edit only: one input image
    sample_extras={"auto_resize": Extra("bool", True)},
    latents=Latents("packed", 16, patch=2, format=latent_formats.FLUX),
    tiny=Tiny(_tiny, {"width": 64, "height": 64, "num_inference_steps": 2, "guidance_scale": 2.5}),
    description="FLUX.1 Kontext [dev]: edit an input image (CLIP + T5, packed tokens)",
    scheduler_config={"_class_name": "FlowMatchEulerDiscreteScheduler"},
    samplers_excluded=("heun", "dpm++_2m"),   # the pipeline passes sigmas, which their set_timesteps do not take
)

"""FLUX.1 Kontext [dev]: Flux.1 editing an input image, whose VAE latents join the transformer's
sequence; embedded guidance as Flux. CLIP, T5 and VAE are Flux's (the tiny builds them with
flux.py's recipe, so a flux/kontext pair shares those files).

The pipeline rescales the requested size to `max_area` (1024^2 by default); the engine passes
max_area = width * height, so the output is the requested size. By default the input image is
resized to the Kontext training resolution nearest its aspect ratio (`_auto_resize`); the
`auto_resize` sample key turns that off (the input keeps its own size, floored to 16 px).

Its files are FLUX.1 [dev]'s layout and shapes: no file tells Kontext from dev, so a file named
without `model.arch` is taken for flux (the detector says flux_kontext fits it too) and
`model.arch: flux_kontext` reads it as Kontext, by the config below.
"""
from dataclasses import replace

from toolkit import latent_formats
from toolkit.models.arch import ArchSpec, Extra, Latents, SampleDefaults, Task, Tiny
from toolkit.models.archs import flux
from toolkit.models.archs.flux import (COMPONENTS, FLUX1, SCHEDULER_CONFIG, SCHEDULER_FILE, TRANSFORMER_FILE,
                                       flux1_facts, flux1_signature, tiny_flux_encoders, tiny_flux_transformer)
from toolkit.models.base_model import BaseModel
from toolkit.models.formats.dit_configs import from_known
from toolkit.models.tiny import kit

# black-forest-labs/FLUX.1-Kontext-dev transformer/config.json (FLUX.1-dev's); and the tiny factory's (flux's)
TRANSFORMER_KNOWN = {"flux1-kontext-dev": dict(FLUX1, guidance_embeds=True), "tiny": flux.TRANSFORMER_KNOWN["tiny"]}


def transformer_config(view):
    return from_known(flux1_signature(view), TRANSFORMER_KNOWN, flux1_facts,
                      "the FLUX.1 Kontext transformer")


TRANSFORMER_FILE_KONTEXT = replace(TRANSFORMER_FILE, config="toolkit.models.archs.flux_kontext:transformer_config",
                                   label="FLUX.1 Kontext transformer")


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
    pipeline="FluxKontextPipeline", holder=FluxKontextModel,
    components=COMPONENTS[:-1] + (replace(COMPONENTS[-1], single_file=TRANSFORMER_FILE_KONTEXT),),
    pipeline_init_kwargs={"image_encoder": None, "feature_extractor": None},
    defaults=SampleDefaults(1024, 1024, 28, 2.5),      # the model card: guidance 2.5, 28 steps, 1024^2
    tasks=(Task("edit", "FluxKontextPipeline"),), uses_negative_prompt=False,      # edit only: one input image
    sample_extras={"auto_resize": Extra("bool", True)},
    latents=Latents("packed", 16, patch=2, format=latent_formats.FLUX),
    scheduler_file=SCHEDULER_FILE,             # FLUX.1-Kontext-dev's scheduler is FLUX.1-dev's
    tiny=Tiny(_tiny, {"width": 64, "height": 64, "num_inference_steps": 2, "guidance_scale": 2.5}),
    gguf=flux.GGUF,                            # FLUX.1's layout: its files are FLUX.1 [dev]'s
    description="FLUX.1 Kontext [dev]: edit an input image (CLIP + T5, packed tokens)",
    scheduler_config={"_class_name": "FlowMatchEulerDiscreteScheduler"},
    samplers_excluded=("heun", "dpm++_2m"),   # the pipeline passes sigmas, which their set_timesteps do not take
)

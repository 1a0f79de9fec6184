"""Qwen-Image-Layered: Qwen-Image's MMDiT (with a layer-aware 3D RoPE and an RGB/RGBA timestep
condition) decomposing an input image into RGBA layers. The input's VAE latents join the sequence
after `layers` + 1 noised images (a composite, then the layers), all packed as 2x2-patch tokens; the
pipeline decodes the layers through an RGBA VAE. True CFG as Qwen-Image. An empty prompt has the
Qwen2.5-VL encoder caption the input first (`use_en_prompt`: in English).

One request is one decomposition, written as one RGBA file per layer (the row's `output_images`:
the `layers` extra), as a batch's items are; the pipeline makes one per pass (its per-prompt split
is only right for one). It takes no size: it makes the input's aspect at 640^2 or 1024^2 area (its
`resolution`). The engine makes the requested size instead: the input is fitted to the request by
its resize_mode (as RGBA, what the RGBA VAE reads) and the pipeline's size derivation answers that
size for the call (a patch of its module's `calculate_dimensions`).

The Qwen2.5-VL encoder and tokenizer are Qwen-Image's (the tiny is qwen_image.py's recipe), the
processor Qwen-Image-Edit's; the VAE is its own (RGBA in and out)."""
import functools
import sys
from dataclasses import replace

from toolkit import latent_formats
from toolkit.models.arch import (DENOISER, PROCESSOR, SCHEDULER, TEXT_ENCODER, TOKENIZER, VAE, ArchSpec, Component,
                                 Extra, Latents, SampleDefaults, Task, Tiny)
from toolkit.models.archs.qwen_image import (COMPONENTS, GGUF, QWEN_IMAGE, SCHEDULER_FILE, TINY_TRANSFORMER,
                                             QwenImageModel, _scheduler, tiny_qwen25vl, tiny_qwen_image_transformer,
                                             transformer_facts, transformer_signature)
from toolkit.models.archs.qwen_image_edit import qwen2vl_processor
from toolkit.models.formats import llm_encoders
from toolkit.models.formats.dit_configs import from_known

# Qwen/Qwen-Image-Layered transformer/config.json: Qwen-Image's shapes with the layer flags; the tiny factory's
LAYERED = dict(use_additional_t_cond=True, use_layer3d_rope=True)
TRANSFORMER_KNOWN = {"qwen-image-layered": dict(QWEN_IMAGE, **LAYERED), "tiny": dict(TINY_TRANSFORMER, **LAYERED)}


def transformer_config(view):
    return from_known(transformer_signature(view), TRANSFORMER_KNOWN, transformer_facts,
                      "the Qwen-Image-Layered transformer")


# ComfyUI's files (diffusion_models/qwen_image_layered_*): Qwen-Image's layout (diffusers' names) and its
# RGB/RGBA timestep embedding, by which the Qwen-Image rows refuse them
QWEN_IMAGE_FILE = COMPONENTS[-1].single_file
TRANSFORMER_FILE = replace(QWEN_IMAGE_FILE,
                           anchors=QWEN_IMAGE_FILE.anchors + ("time_text_embed.addition_t_embedding.weight",),
                           config="toolkit.models.archs.qwen_image_layered:transformer_config",
                           kind="qwen_image_layered_dit", label="Qwen-Image-Layered transformer")

SAMPLE_EXTRAS = {"layers": Extra("int", 4), "cfg_normalize": Extra("bool", False),   # the pipeline's defaults
                 "use_en_prompt": Extra("bool", False)}


class QwenImageLayeredModel(QwenImageModel):
    def pipeline_kwargs(self, gen):
        from toolkit.images import load_image

        kw = {"prompt": gen.prompt, "num_inference_steps": gen.num_inference_steps,
              "true_cfg_scale": gen.guidance_scale, "layers": gen.extras["layers"],
              "image": load_image(gen.ctrl_img, gen.width, gen.height, gen.resize_mode).convert("RGBA")}
        if gen.guidance_scale > 1:
            kw["negative_prompt"] = self.negative_prompt(gen)
        for name in ("cfg_normalize", "use_en_prompt"):
            if gen.extras.get(name) is not None:
                kw[name] = gen.extras[name]
        return kw

    def call_patches(self, gen, pipe) -> list:
        size = (gen.width, gen.height)

        def requested_size(original):
            @functools.wraps(original)
            def calculate_dimensions(target_area, ratio):
                return size
            return calculate_dimensions
        return [(sys.modules[type(pipe).__module__], "calculate_dimensions", requested_size)]


def _tiny(b):
    from diffusers import AutoencoderKLQwenImage

    tokenizer, text_encoder = tiny_qwen25vl(b)
    with b.seeded("vae", "qwen_image_rgba_vae"):
        # Qwen-Image's VAE geometry (8x, 16 channels, its mean/std defaults) reading and writing RGBA
        vae = AutoencoderKLQwenImage(base_dim=4, z_dim=16, dim_mult=[1, 2, 4, 4], num_res_blocks=1,
                                     temperal_downsample=[False, True, True], input_channels=4).eval()
    return dict(tokenizer=tokenizer, text_encoder=text_encoder, processor=qwen2vl_processor(tokenizer), vae=vae,
                scheduler=_scheduler(),
                transformer=tiny_qwen_image_transformer(b, **LAYERED))


SPEC = ArchSpec(
    name="qwen_image_layered", modality="image", default_name_or_path="Qwen/Qwen-Image-Layered",
    pipeline="QwenImageLayeredPipeline", holder=QwenImageLayeredModel,
    components=(
        Component("scheduler", "SchedulerMixin", SCHEDULER),
        Component("tokenizer", "PreTrainedTokenizerBase", TOKENIZER, vocab="qwen2_5"),
        Component("processor", "transformers:Qwen2VLProcessor", PROCESSOR,
                  built="toolkit.models.archs.qwen_image_edit:write_processor"),
        Component("text_encoder", "transformers:Qwen2_5_VLForConditionalGeneration", TEXT_ENCODER,
                  single_file=llm_encoders.QWEN25_VL_7B),
        Component("vae", "AutoencoderKLQwenImage", VAE),
        Component("transformer", "QwenImageTransformer2DModel", DENOISER, single_file=TRANSFORMER_FILE),
    ),
    negative_prompt_default=" ",      # true CFG needs a negative prompt: the model card's " " when none is given
    # the model card: 50 steps, true CFG 4.0, 4 layers at the 640 bucket
    defaults=SampleDefaults(640, 640, 50, 4.0),
    tasks=(Task("edit", "QwenImageLayeredPipeline"),),      # decompose: one input image, required
    sample_extras=SAMPLE_EXTRAS, output_images="layers", batch_arg=None,
    gguf=GGUF,      # Qwen-Image's denoiser class: ComfyUI-GGUF's qwen_image files
    # the composite's and the layers' tokens stacked; the RGBA VAE keeps Qwen-Image's 16-channel space
    latents=Latents("packed_layers", 16, patch=2, format=latent_formats.WAN21),
    decode_features=96,                       # Qwen-Image's VAE's last decoder stage
    scheduler_file=SCHEDULER_FILE,            # files carry none: Qwen-Image's (the family's, and the tiny's)
    tiny=Tiny(_tiny, {"width": 64, "height": 64, "num_inference_steps": 2, "guidance_scale": 4.0, "layers": 2}),
    description="Qwen-Image-Layered: decompose an input image into RGBA layers (a file each), true CFG",
    scheduler_config={"_class_name": "FlowMatchEulerDiscreteScheduler"},
    samplers_excluded=("heun", "dpm++_2m"),   # the pipeline passes sigmas, which their set_timesteps do not take
)

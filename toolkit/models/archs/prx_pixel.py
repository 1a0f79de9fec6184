"""PRX Pixel (Photoroom): a ~7B PRX DiT that denoises RGB pixels directly (no VAE: 16x16-pixel patches
through a bottleneck projection, the resolution added to its timestep embedding), trained to predict the
clean image (the pipeline turns it into a flow velocity), over the text backbone of Qwen3-VL-Embedding-2B
(the last hidden state, prompts padded to 256 tokens); sampling starts from noise x 2.0; CFG.

What the scheduler steps is the image itself, RGB in [-1, 1] at full size: the preview table is the
identity (ComfyUI's pixel-space `ChromaRadiance` row), exact, and a `latent` frame is as large as the
image. The pipeline snaps width/height to its 1024 aspect-ratio bins and resizes back by default; the
`resolution_binning` sample key turns that off (the tiny model's 64x64 has no bin).

Shares nothing with `prx` but the denoiser class: another text encoder (Qwen3-VL, not T5Gemma) and no
VAE. ComfyUI has no PRX model: no single files."""
from toolkit import latent_formats
from toolkit.models.arch import (DENOISER, SCHEDULER, TEXT_ENCODER, TOKENIZER, ArchSpec, Component, Extra, Latents,
                                 SampleDefaults, Tiny)
from toolkit.models.archs.prx import tiny_prx_transformer
from toolkit.models.archs.sana import SanaModel
from toolkit.models.tiny import kit

PATCH = 16                   # pixels per token side (the real and the tiny transformer's patch_size)


def _tiny(b):
    from transformers import Qwen3VLTextModel

    from toolkit.models.formats import comfy

    tokenizer = kit.qwen2_tokenizer()            # Qwen3-VL's byte-level BPE
    with b.seeded("text_encoder", "qwen3vl_embedding_2b"):
        text_encoder = Qwen3VLTextModel(comfy.qwen3vl_text_config(
            vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
            num_attention_heads=2, num_key_value_heads=1, head_dim=16)).eval()
        kit.jitter_constants(text_encoder)
    transformer = tiny_prx_transformer(b, 3, PATCH, text_encoder.config.hidden_size, bottleneck_size=32,
                                       resolution_embeds=True)
    scheduler = kit.flow_match_scheduler(num_train_timesteps=1000, shift=3.0)
    return dict(scheduler=scheduler, tokenizer=tokenizer, text_encoder=text_encoder, transformer=transformer)


SPEC = ArchSpec(
    name="prx_pixel", modality="image", default_name_or_path="Photoroom/prxpixel-t2i", pipeline="PRXPixelPipeline",
    holder=SanaModel,
    components=(
        Component("scheduler", "SchedulerMixin", SCHEDULER),
        Component("tokenizer", "PreTrainedTokenizerBase", TOKENIZER),
        Component("text_encoder", "transformers:PreTrainedModel", TEXT_ENCODER),   # Qwen3VLTextModel
        Component("transformer", "PRXTransformer2DModel", DENOISER),
    ),
    defaults=SampleDefaults(1024, 1024, 28, 5.0),      # the model card: 1024px, 28 steps, CFG 5.0
    size_divisor=PATCH,
    sample_extras={"resolution_binning": Extra("bool", True)},
    # pixel space: the RGB image in [-1, 1], previewed as itself
    denoiser_patch=PATCH,                 # the memory floor counts its tokens, not its pixels
    latents=Latents("BCHW", 3, spatial=1, format=latent_formats.PIXELS),
    tiny=Tiny(_tiny, {"width": 64, "height": 64, "num_inference_steps": 2, "guidance_scale": 5.0,
                      "resolution_binning": False}),
    description="PRX Pixel (Photoroom; pixel-space PRX, Qwen3-VL text encoder, no VAE)",
    scheduler_config={"_class_name": "FlowMatchEulerDiscreteScheduler"},
    # one image per pass: with CFG the pipeline's timestep has 2 rows (uncond, cond) whatever the batch (prx's)
    batch_arg=None,
)

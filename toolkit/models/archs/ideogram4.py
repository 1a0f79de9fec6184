"""Ideogram 4: a flow-matching single-stream DiT over 13 hidden states of Qwen3-VL-8B-Instruct (its text
backbone run layer by layer, the prompt left-padded to `max_sequence_length` tokens and packed with the
image tokens), the Flux.2 VAE (32 channels, 2x2 patches: 128 per token, a token's channels last) with its
batch-norm latent statistics, and asymmetric CFG: a second, `unconditional_transformer` denoises the
image tokens alone with zeroed text features, and the two velocities are blended by a per-step weight.

The engine's guidance_scale is that weight for every step but the last `polish_steps`, which take
`polish_guidance`: at the defaults (48 steps, 7.0, 3 at 3.0) the pipeline's own default schedule. The
pipeline's logit-normal sigma schedule is its own (resolution-aware); it has no negative prompt. Its
prompts are best the structured JSON captions the model card describes (plain text works); the optional
prompt-enhancer head (upsampling) is not loaded.

Variants: the official checkpoints, bitsandbytes NF4 (diffusers' reference, needs bitsandbytes and CUDA)
and FP8; both gated. ComfyUI reads Ideogram 4 with its Flux2 latent format, so the preview uses FLUX2's
table on the unpacked 32 channels. Its ComfyUI files (`diffusion_models/ideogram4*_fp8_scaled`) have no
diffusers converter: not read here."""
from toolkit import latent_formats
from toolkit.models.arch import (DENOISER, SCHEDULER, TEXT_ENCODER, TOKENIZER, VAE, ArchSpec, Component, Extra,
                                 Latents, SampleDefaults, Tiny, Variant)
from toolkit.models.archs.nucleus_image import CHAT_TEMPLATE
from toolkit.models.base_model import BaseModel
from toolkit.models.tiny import kit

TAPS = 13                     # QWEN3_VL_ACTIVATION_LAYERS: hidden states 0, 3, ..., 33, 35 of 36 layers
TEXT_LAYERS = 36
TEXT_HIDDEN = 16


class Ideogram4Model(BaseModel):
    """guidance_scale and the polish extras -> the pipeline's per-step `guidance_schedule`; its
    `max_sequence_length` (the padded text length)."""

    def pipeline_kwargs(self, gen):
        kw = super().pipeline_kwargs(gen)
        steps = gen.num_inference_steps
        polish = min(steps, max(0, int(gen.extras.get("polish_steps") or 0)))
        polish_guidance = gen.extras.get("polish_guidance")
        polish_guidance = gen.guidance_scale if polish_guidance is None else polish_guidance
        kw.pop("guidance_scale")
        kw["guidance_schedule"] = [float(gen.guidance_scale)] * (steps - polish) + [float(polish_guidance)] * polish
        if gen.extras.get("max_sequence_length") is not None:
            kw["max_sequence_length"] = int(gen.extras["max_sequence_length"])
        return kw


def _tiny_vae(b):
    """AutoencoderKLFlux2 (8x, 32 channels, 2x2 patches) with seeded batch-norm statistics, so a
    mis-ordered denormalisation changes the image."""
    import torch
    from diffusers import AutoencoderKLFlux2

    with b.seeded("vae"):
        vae = AutoencoderKLFlux2(block_out_channels=(8, 8, 16, 16), layers_per_block=1, norm_num_groups=4,
                                 latent_channels=32, sample_size=64, patch_size=(2, 2)).eval()
        with torch.no_grad():
            vae.bn.running_mean.copy_(torch.randn_like(vae.bn.running_mean) * 0.5)
            vae.bn.running_var.copy_(torch.rand_like(vae.bn.running_var) * 1.5 + 0.5)
    return vae


def _tiny(b):
    from diffusers import Ideogram4Transformer2DModel
    from transformers import Qwen3VLConfig, Qwen3VLModel

    from toolkit.models.formats import comfy

    tokenizer = kit.qwen2_tokenizer()
    tokenizer.chat_template = CHAT_TEMPLATE        # Qwen3-VL's roles, content as a list of parts
    with b.seeded("text_encoder", "qwen3vl_8b_model"):
        # the pipeline taps hidden states up to layer 35: 36 layers of width 16
        text_config = comfy.qwen3vl_text_config(
            vocab_size=len(tokenizer), hidden_size=TEXT_HIDDEN, intermediate_size=2 * TEXT_HIDDEN,
            num_hidden_layers=TEXT_LAYERS, num_attention_heads=2, num_key_value_heads=1, head_dim=8).to_dict()
        vision = dict(depth=1, hidden_size=16, intermediate_size=32, num_heads=2, patch_size=16,
                      out_hidden_size=TEXT_HIDDEN, num_position_embeddings=64, deepstack_visual_indexes=[0])
        text_encoder = Qwen3VLModel(Qwen3VLConfig(text_config=text_config, vision_config=vision,
                                                  tie_word_embeddings=False)).eval()
        kit.jitter_constants(text_encoder)
    dims = dict(in_channels=128, num_layers=2, attention_head_dim=16, num_attention_heads=2, intermediate_size=64,
                adaln_dim=16, llm_features_dim=TAPS * TEXT_HIDDEN, rope_theta=5_000_000,
                mrope_section=tuple(comfy.qwen3vl_mrope_section(16)))
    denoisers = {}
    for role in ("transformer", "unconditional_transformer"):
        with b.seeded(role):
            denoisers[role] = kit.jitter_constants(Ideogram4Transformer2DModel(**dims).eval())
    return dict(scheduler=kit.flow_match_scheduler(num_train_timesteps=1000), vae=_tiny_vae(b),
                text_encoder=text_encoder, tokenizer=tokenizer, **denoisers)


# the official checkpoints (both gated); the pipeline's defaults are the recommended settings
VARIANTS = {
    "nf4": Variant(name_or_path="ideogram-ai/ideogram-4-nf4"),
    "fp8": Variant(name_or_path="ideogram-ai/ideogram-4-fp8"),
}

SPEC = ArchSpec(
    name="ideogram4", modality="image", default_name_or_path=VARIANTS["nf4"].name_or_path,
    pipeline="Ideogram4Pipeline", holder=Ideogram4Model,
    components=(
        Component("scheduler", "SchedulerMixin", SCHEDULER),
        Component("tokenizer", "PreTrainedTokenizerBase", TOKENIZER),
        Component("text_encoder", "transformers:PreTrainedModel", TEXT_ENCODER),     # Qwen3VLModel
        Component("vae", "AutoencoderKLFlux2", VAE),
        Component("transformer", "Ideogram4Transformer2DModel", DENOISER),
        Component("unconditional_transformer", "Ideogram4Transformer2DModel", DENOISER),
    ),
    # the pipeline's defaults: 2048^2, 48 steps, guidance 7.0 with the last 3 at 3.0, text padded to 2048 tokens
    defaults=SampleDefaults(2048, 2048, 48, 7.0),
    sample_extras={"polish_steps": Extra("int", 3), "polish_guidance": Extra("float", 3.0),
                   "max_sequence_length": Extra("int", 2048)},
    size_divisor=16,                                     # VAE 8x, 2x2 patches
    uses_negative_prompt=False,                          # the unconditional transformer sees no text
    latents=Latents("packed_last", 32, patch=2, format=latent_formats.FLUX2),
    variants=VARIANTS,
    tiny=Tiny(_tiny, {"width": 64, "height": 64, "num_inference_steps": 2, "guidance_scale": 7.0,
                      "polish_steps": 1, "polish_guidance": 3.0, "max_sequence_length": 64}),
    description="Ideogram 4 (Qwen3-VL text encoder, Flux.2 VAE, asymmetric CFG with an unconditional DiT)",
    scheduler_config={"_class_name": "FlowMatchEulerDiscreteScheduler"},
    # the pipeline passes its sigmas as a list: Heun's and DPM++'s set_timesteps take none, UniPC multiplies it
    samplers_excluded=("heun", "dpm++_2m", "unipc"),
)

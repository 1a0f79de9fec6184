"""LongCat-Image (Meituan): a Flux-style MMDiT (double then single blocks) over a Qwen2.5-VL text
encoder (its last hidden state of the prompt, padded to 512 tokens, between a fixed system prefix and
suffix) and the 16-channel Flux VAE, latents packed as 2x2-patch tokens; real CFG with a norm
rescale. By default the pipeline first rewrites the prompt with the same Qwen2.5-VL (a generation of
up to 512 tokens): the `prompt_rewrite` sample key turns that off.

Its Qwen2.5-VL-7B-Instruct encoder and tokenizer are Qwen-Image's, its VAE is FLUX.1's: the tiny
builds them with those archs' recipes, so the pool shares the files. LongCat-Image-Edit, another
checkpoint over the same encoder and VAE, is longcat_image_edit."""
from toolkit import latent_formats
from toolkit.models.arch import (DENOISER, PROCESSOR, SCHEDULER, TEXT_ENCODER, TOKENIZER, VAE, ArchSpec, Component,
                                 Extra, Latents, SampleDefaults, Tiny)
from toolkit.models.archs.qwen_image import TEXT_HIDDEN, tiny_qwen25vl
from toolkit.models.archs.qwen_image_edit import qwen2vl_processor
from toolkit.models.base_model import BaseModel
from toolkit.models.tiny import kit
from toolkit.models.tiny.tokenizers import QWEN_VL_CHAT_TEMPLATE

# the tiny's scheduler (the pipeline shifts by the image-token count, as Flux's)
SCHEDULER_CONFIG = dict(num_train_timesteps=1000, shift=3.0, use_dynamic_shifting=True, base_shift=0.5,
                        max_shift=1.15, base_image_seq_len=256, max_image_seq_len=4096)


class LongCatImageModel(BaseModel):
    """The common call, and `prompt_rewrite` as the pipeline's `enable_prompt_rewrite` (unset: its own, on)."""

    def pipeline_kwargs(self, gen):
        kw = super().pipeline_kwargs(gen)
        rewrite = gen.extras.get("prompt_rewrite")
        if rewrite is not None:
            kw["enable_prompt_rewrite"] = rewrite
        return kw


def tiny_longcat_shared(b) -> dict:
    """What LongCat-Image and -Edit share: Qwen-Image's tiny Qwen2.5-VL and tokenizer, a Qwen2-VL
    processor over it that renders list contents (the rewrite's and the edit's chat messages), the
    Flux VAE, the scheduler."""
    tokenizer, text_encoder = tiny_qwen25vl(b)
    processor = qwen2vl_processor(tokenizer)
    processor.chat_template = QWEN_VL_CHAT_TEMPLATE
    with b.seeded("vae", "flux_vae"):
        vae = kit.flux_vae()
    return dict(tokenizer=tokenizer, text_encoder=text_encoder, text_processor=processor, vae=vae,
                scheduler=kit.flow_match_scheduler(**SCHEDULER_CONFIG))


def tiny_longcat_transformer(b):
    from diffusers import LongCatImageTransformer2DModel

    with b.seeded("transformer"):
        return LongCatImageTransformer2DModel(patch_size=1, in_channels=64, num_layers=1, num_single_layers=1,
                                              attention_head_dim=16, num_attention_heads=2,
                                              joint_attention_dim=TEXT_HIDDEN, pooled_projection_dim=TEXT_HIDDEN,
                                              axes_dims_rope=[4, 6, 6]).eval()


def _tiny(b):
    return dict(tiny_longcat_shared(b), transformer=tiny_longcat_transformer(b))


COMPONENTS = (
    Component("scheduler", "SchedulerMixin", SCHEDULER),
    Component("tokenizer", "PreTrainedTokenizerBase", TOKENIZER, vocab="qwen2_5"),
    Component("text_processor", "transformers:Qwen2VLProcessor", PROCESSOR),
    Component("text_encoder", "transformers:Qwen2_5_VLForConditionalGeneration", TEXT_ENCODER),
    Component("vae", "AutoencoderKL", VAE),
    Component("transformer", "LongCatImageTransformer2DModel", DENOISER),
)
SAMPLE_EXTRAS = {"prompt_rewrite": Extra("bool", True)}      # the pipeline's enable_prompt_rewrite default

SPEC = ArchSpec(
    name="longcat_image", modality="image", default_name_or_path="meituan-longcat/LongCat-Image",
    pipeline="LongCatImagePipeline", holder=LongCatImageModel, components=COMPONENTS,
    defaults=SampleDefaults(1024, 1024, 50, 4.5),     # the model card: 50 steps, guidance 4.5; the pipeline's 1024^2
    sample_extras=SAMPLE_EXTRAS,
    latents=Latents("packed", 16, patch=2, format=latent_formats.FLUX),     # the Flux VAE's space
    # the tiny request leaves the rewrite off (a random tiny LLM would write 512 tokens of noise);
    # testing/tests/test_longcat_image.py runs it on
    tiny=Tiny(_tiny, {"width": 64, "height": 64, "num_inference_steps": 2, "guidance_scale": 4.5,
                      "prompt_rewrite": False}),
    description="LongCat-Image (Qwen2.5-VL text encoder and prompt rewrite, Flux VAE, packed tokens)",
    scheduler_config={"_class_name": "FlowMatchEulerDiscreteScheduler"},
    samplers_excluded=("heun", "dpm++_2m"),   # the pipeline passes sigmas, which their set_timesteps do not take
)

"""HunyuanImage 2.1 text-to-image: a 17B dual/single-stream DiT over Qwen2.5-VL-7B (the third-last hidden
state, the 34-token system prefix dropped: Qwen-Image's encoder and template) and Glyph-ByT5 (run only on
the prompt's quoted text: HunyuanVideo 1.5's), the 64-channel 32x VAE, natively 2K. Guidance runs through
the pipeline's guiders (adaptive projected guidance mixed with CFG; `ocr_guider` for prompts with quoted
text): the pipeline takes no guidance_scale, so the holder hands each call copies of them with the request's
scale.

The distilled checkpoint has no guiders: its guidance is embedded (`distilled_guidance_scale`, 3.25), with a
MeanFlow end-time embedding, and runs 8 steps.

The refiner (HunyuanImageRefinerPipeline) is no task here: another VAE class and transformer, and a call that
refines an image without a strength, which none of the engine's tasks is."""
from toolkit import latent_formats
from toolkit.models.arch import (DENOISER, GUIDER, SCHEDULER, TEXT_ENCODER, TOKENIZER, VAE, ArchSpec, Component,
                                 Latents, SampleDefaults, Tiny, Variant)
from toolkit.models.archs.hunyuan_video15 import HunyuanVideo15Model, tiny_glyph_byt5
from toolkit.models.archs.qwen_image import TEXT_HIDDEN, tiny_qwen25vl

# hunyuanvideo-community/HunyuanImage-2.1-Diffusers: flow matching, shift 5 (the model card's; 4 distilled)
SCHEDULER_FILE = dict(_class_name="FlowMatchEulerDiscreteScheduler", num_train_timesteps=1000, shift=5.0)
REPO = "hunyuanvideo-community/HunyuanImage-2.1-Diffusers"

VARIANTS = {
    "base": Variant(),
    # guidance embedded in the weights, 8 steps (the model card); its repo has no guiders
    "distilled": Variant({"num_inference_steps": 8, "guidance_scale": 3.25},
                         name_or_path="hunyuanvideo-community/HunyuanImage-2.1-Distilled-Diffusers",
                         scheduler={"shift": 4.0}, without=("guider", "ocr_guider")),
}


class HunyuanImageModel(HunyuanVideo15Model):
    """The request's guidance_scale is the base checkpoint's guiders' (HunyuanVideo15Model's per-call copies)
    and the distilled one's `distilled_guidance_scale` (the pipeline reads it only where the transformer
    embeds guidance)."""

    def pipeline_kwargs(self, gen):
        kw = super().pipeline_kwargs(gen)
        kw["distilled_guidance_scale"] = gen.guidance_scale
        return kw


def tiny_vae(b):
    """Six blocks (five 2x downsamples: 32x), 64 latent channels; 32 wide (its GroupNorms have 32 groups) and
    the last block 2 x 64, as the encoder's channel grouping needs. Stored in bf16, as the real repos store it
    (the 128-wide head is 2.4M weights)."""
    import torch
    from diffusers import AutoencoderKLHunyuanImage

    with b.seeded("vae"):
        return AutoencoderKLHunyuanImage(
            in_channels=3, out_channels=3, latent_channels=64, block_out_channels=(32, 32, 32, 32, 32, 128),
            layers_per_block=1, spatial_compression_ratio=32, sample_size=64,
            scaling_factor=0.75289).eval().to(torch.bfloat16)


def tiny_transformer(b, **over):
    """64 channels in 1x1 patches, 1 dual + 1 single block of 2 heads of 16 (RoPE axes 8+8). Stored in bf16, as
    the real repos store it: its glyph projection is 2048 wide whatever the model's width (4M weights)."""
    import torch
    from diffusers import HunyuanImageTransformer2DModel

    dims = dict(in_channels=64, out_channels=64, num_attention_heads=2, attention_head_dim=16, num_layers=1,
                num_single_layers=1, num_refiner_layers=1, patch_size=(1, 1), text_embed_dim=TEXT_HIDDEN,
                text_embed_2_dim=32, rope_axes_dim=(8, 8))
    dims.update(over)
    with b.seeded("transformer"):
        return HunyuanImageTransformer2DModel(**dims).eval().to(torch.bfloat16)


def tiny_guiders() -> dict:
    """The base repo's two APG+CFG guiders (CFG 3.5; APG from step 5), the OCR one's APG from a later step."""
    from diffusers import AdaptiveProjectedMixGuidance

    return dict(guider=AdaptiveProjectedMixGuidance(guidance_scale=3.5, adaptive_projected_guidance_start_step=1),
                ocr_guider=AdaptiveProjectedMixGuidance(guidance_scale=3.5, adaptive_projected_guidance_start_step=2))


def _tiny(b):
    from diffusers import FlowMatchEulerDiscreteScheduler

    tokenizer, text_encoder = tiny_qwen25vl(b)          # Qwen-Image's (one pair in the pool)
    tokenizer_2, text_encoder_2 = tiny_glyph_byt5(b)     # HunyuanVideo 1.5's
    return dict(tokenizer=tokenizer, text_encoder=text_encoder, tokenizer_2=tokenizer_2,
                text_encoder_2=text_encoder_2, vae=tiny_vae(b), transformer=tiny_transformer(b),
                scheduler=FlowMatchEulerDiscreteScheduler(shift=5.0), **tiny_guiders())


SPEC = ArchSpec(
    name="hunyuan_image", modality="image", default_name_or_path=REPO, pipeline="HunyuanImagePipeline",
    holder=HunyuanImageModel,
    components=(
        Component("scheduler", "SchedulerMixin", SCHEDULER),
        Component("guider", "BaseGuidance", GUIDER, optional=True),
        Component("ocr_guider", "BaseGuidance", GUIDER, optional=True),
        Component("tokenizer", "PreTrainedTokenizerBase", TOKENIZER, vocab="qwen2_5"),
        Component("tokenizer_2", "PreTrainedTokenizerBase", TOKENIZER),
        Component("text_encoder", "transformers:Qwen2_5_VLForConditionalGeneration", TEXT_ENCODER),
        Component("text_encoder_2", "transformers:T5EncoderModel", TEXT_ENCODER),
        Component("vae", "AutoencoderKLHunyuanImage", VAE),
        Component("transformer", "HunyuanImageTransformer2DModel", DENOISER),
    ),
    # the model card: 2048x2048, 50 steps, guidance 3.5
    defaults=SampleDefaults(2048, 2048, 50, 3.5),
    variants=VARIANTS,
    size_divisor=64,                  # the pipeline's own rule (32x VAE, twice)
    latents=Latents("BCHW", 64, spatial=32, format=latent_formats.HUNYUAN_IMAGE21), scheduler_file=SCHEDULER_FILE,
    tiny=Tiny(_tiny, {"width": 64, "height": 64, "num_inference_steps": 3, "guidance_scale": 3.5}),
    description="HunyuanImage 2.1 text-to-image (17B DiT, 2K; Qwen2.5-VL + Glyph-ByT5, 64-channel 32x VAE)",
    scheduler_config={"_class_name": "FlowMatchEulerDiscreteScheduler"},
    samplers_excluded=("heun", "dpm++_2m"),   # the pipeline passes sigmas, which their set_timesteps do not take
)

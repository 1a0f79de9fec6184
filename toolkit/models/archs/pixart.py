"""PixArt-α and PixArt-Σ (1024-MS): a cross-attention DiT (adaLN-single, learned sigma: 8 output
channels, the pipeline keeps the first 4) over T5-XXL, SD's 4-channel KL VAE, DPM-Solver++ on an
epsilon-predicting linear beta schedule.

Two variants, two pipelines: PixArtAlphaPipeline (120 T5 tokens; its 1024 transformer also takes the
resolution and aspect ratio as conditions) and PixArtSigmaPipeline (300 tokens, none of those). The
holder picks the variant's class; the components are the same classes in both repos.

Both pipelines snap width/height to their aspect-ratio bins and resize the image back by default, as
Sana's does; the `resolution_binning` sample key turns that off (the tiny model's 64x64 has no bin)."""
from toolkit import latent_formats
from toolkit.models.arch import (DENOISER, SCHEDULER, TEXT_ENCODER, TOKENIZER, VAE, ArchSpec, Component, Extra,
                                 Latents, SampleDefaults, Tiny, Variant, load_class)
from toolkit.models.archs.sana import SanaModel
from toolkit.models.tiny import kit

# the variant -> the pipeline its repo's model_index.json names
PIPELINES = {"alpha": "PixArtAlphaPipeline", "sigma": "PixArtSigmaPipeline"}


class PixArtModel(SanaModel):
    """Sana's `resolution_binning` key; the variant's pipeline class over the same components."""

    def __init__(self, model_config, *args, **kwargs):
        super().__init__(model_config, *args, **kwargs)
        self.pipeline_class = load_class(PIPELINES[self.model_config.variant or self.spec.default_variant])


# PixArt-alpha/PixArt-XL-2-1024-MS and PixArt-Sigma-XL-2-1024-MS scheduler/scheduler_config.json
SCHEDULER_FILE = dict(_class_name="DPMSolverMultistepScheduler", num_train_timesteps=1000, beta_start=0.0001,
                      beta_end=0.02, beta_schedule="linear", prediction_type="epsilon", algorithm_type="dpmsolver++",
                      solver_order=2, solver_type="midpoint", lower_order_final=True, timestep_spacing="linspace",
                      steps_offset=0, use_karras_sigmas=False, thresholding=False, trained_betas=None)


def _tiny(b):
    from diffusers import DPMSolverMultistepScheduler, PixArtTransformer2DModel

    tokenizer = kit.t5_tokenizer(512)
    with b.seeded("text_encoder", "t5"):                 # T5-XXL as Flux and SD3 build it
        text_encoder = kit.t5_encoder(tokenizer)
    # sd-vae-ft-ema: SD 1.x's layout and scale, its own weights (not shared with sd1's VAE)
    with b.seeded("vae", "sd_vae_ft_ema"):
        vae = kit.kl_vae(4, scaling_factor=0.18215, quant_conv=True)
    with b.seeded("transformer"):
        # sample_size 8 (not 128): no resolution/aspect-ratio conditions, which the Alpha pipeline
        # passes only to a 1024 transformer
        transformer = PixArtTransformer2DModel(
            num_attention_heads=2, attention_head_dim=16, in_channels=4, out_channels=8, num_layers=2,
            cross_attention_dim=32, sample_size=8, patch_size=2, caption_channels=text_encoder.config.d_model,
            norm_type="ada_norm_single", norm_elementwise_affine=False, norm_eps=1e-6).eval()
        kit.jitter_constants(transformer)
    scheduler = DPMSolverMultistepScheduler.from_config(SCHEDULER_FILE)
    return dict(tokenizer=tokenizer, text_encoder=text_encoder, vae=vae, transformer=transformer, scheduler=scheduler)


# each model card's example: the pipeline's defaults (20 steps, CFG 4.5) at 1024^2
VARIANTS = {
    "alpha": Variant(name_or_path="PixArt-alpha/PixArt-XL-2-1024-MS"),
    "sigma": Variant(name_or_path="PixArt-alpha/PixArt-Sigma-XL-2-1024-MS"),
}

SPEC = ArchSpec(
    name="pixart", modality="image", default_name_or_path=VARIANTS["alpha"].name_or_path,
    pipeline=PIPELINES["alpha"], holder=PixArtModel,
    components=(
        Component("scheduler", "SchedulerMixin", SCHEDULER),
        Component("tokenizer", "PreTrainedTokenizerBase", TOKENIZER, vocab="t5_xxl"),
        Component("text_encoder", "T5EncoderModel", TEXT_ENCODER),
        Component("vae", "AutoencoderKL", VAE),
        Component("transformer", "PixArtTransformer2DModel", DENOISER),
    ),
    defaults=SampleDefaults(1024, 1024, 20, 4.5),
    size_divisor=16,                                     # VAE 8x, 2x2 patches
    sample_extras={"resolution_binning": Extra("bool", True)},
    latents=Latents("BCHW", 4, format=latent_formats.SD15),     # ComfyUI previews PixArt with SD 1.5's table
    variants=VARIANTS, scheduler_file=SCHEDULER_FILE,
    tiny=Tiny(_tiny, {"width": 64, "height": 64, "num_inference_steps": 2, "guidance_scale": 4.5,
                      "resolution_binning": False}),
    description="PixArt-α / PixArt-Σ (DiT, T5-XXL, SD VAE)",
    scheduler_config={"_class_name": "DPMSolverMultistepScheduler", "prediction_type": "epsilon"},
)

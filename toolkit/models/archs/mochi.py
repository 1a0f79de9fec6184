"""Mochi 1 (preview) text-to-video: Genmo's 10B asymmetric dual-stream 3D DiT over T5-XXL (256 tokens; the
T5-v1.1-XXL encoder Flux, PixArt and SD3 use), the causal Mochi VAE (12 channels, 8x spatial, 6x temporal,
latents normalised by its mean/std), and a linear-quadratic flow schedule the pipeline computes itself
(threshold noise 0.025); classic CFG."""
from toolkit import latent_formats
from toolkit.models.arch import (DENOISER, SCHEDULER, TEXT_ENCODER, TOKENIZER, VAE, ArchSpec, Component, Latents,
                                 SampleDefaults, Tiny)
from toolkit.models.formats import t5
from toolkit.models.tiny import kit

# genmo/mochi-1-preview scheduler/scheduler_config.json: flow matching on inverted sigmas, no shift
SCHEDULER_FILE = dict(_class_name="FlowMatchEulerDiscreteScheduler", num_train_timesteps=1000, shift=1.0,
                      invert_sigmas=True)


def _tiny(b):
    from diffusers import AutoencoderKLMochi, FlowMatchEulerDiscreteScheduler, MochiTransformer3DModel

    tokenizer = kit.t5_tokenizer(512)
    with b.seeded("text_encoder", "t5"):                 # T5-XXL as Flux, PixArt and SD3 build it
        text_encoder = kit.t5_encoder(tokenizer)
    with b.seeded("vae"):
        # three 2x spatial expansions (8x) and 1x2x3 in time (6x), the real 12 channels and mean/std
        vae = AutoencoderKLMochi(latent_channels=12, out_channels=3, encoder_block_out_channels=(32, 32, 32, 32),
                                 decoder_block_out_channels=(32, 32, 32, 32), layers_per_block=(1, 1, 1, 1, 1)).eval()
    with b.seeded("transformer"):
        # 2x2 patches, 2 heads of 16; its RoPE frequencies start at zero (learned): jittered, so positions matter
        transformer = kit.jitter_constants(MochiTransformer3DModel(
            patch_size=2, num_attention_heads=2, attention_head_dim=16, num_layers=2, pooled_projection_dim=16,
            in_channels=12, text_embed_dim=text_encoder.config.d_model, time_embed_dim=16).eval())
    scheduler = FlowMatchEulerDiscreteScheduler(shift=1.0, invert_sigmas=True)
    return dict(tokenizer=tokenizer, text_encoder=text_encoder, vae=vae, transformer=transformer, scheduler=scheduler)


SPEC = ArchSpec(
    name="mochi", modality="video", default_name_or_path="genmo/mochi-1-preview", pipeline="MochiPipeline",
    components=(
        Component("scheduler", "SchedulerMixin", SCHEDULER),
        Component("tokenizer", "PreTrainedTokenizerBase", TOKENIZER, vocab="t5_xxl"),
        Component("text_encoder", "T5EncoderModel", TEXT_ENCODER, single_file=t5.T5_XXL),
        Component("vae", "AutoencoderKLMochi", VAE),
        Component("transformer", "MochiTransformer3DModel", DENOISER),
    ),
    output_type="np",
    # Genmo's settings (diffusers' docs reproduce them): 848x480, 163 frames (5.4 s at 30 fps), 64 steps, CFG 4.5
    defaults=SampleDefaults(848, 480, 64, 4.5, num_frames=163, fps=30, output_ext="mp4"),
    size_divisor=16,                  # 8x VAE x 2x2 DiT patches
    latents=Latents("BCFHW", 12, spatial=8, temporal=6, format=latent_formats.MOCHI), scheduler_file=SCHEDULER_FILE,
    tiny=Tiny(_tiny, {"width": 64, "height": 64, "num_frames": 7, "num_inference_steps": 2, "guidance_scale": 4.5,
                      "fps": 8}),
    description="Mochi 1 preview text-to-video (10B AsymmDiT, T5-XXL, 12-channel causal VAE)",
    # on inverted sigmas: Euler alone samples it (toolkit/samplers.py); Heun and the multistep solvers either
    # refuse the pipeline's sigmas or would feed the DiT un-inverted times
    scheduler_config={"_class_name": "FlowMatchEulerDiscreteScheduler", "invert_sigmas": True},
    batch_arg="num_videos_per_prompt",
)

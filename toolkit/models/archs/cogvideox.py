"""CogVideoX 5B text-to-video: an expert-adaptive-LayerNorm 3D DiT over T5-XXL (226 tokens), the CogVideoX
3D causal VAE (16 channels, 8x spatial, 4x temporal, scale 0.7), and the v-prediction CogVideoX DPM
solver (zero-SNR betas, trailing spacing). The scheduler steps latents as (batch, frame, channel, row,
column): `BFCHW`. The pipeline makes one video per prompt whatever it is asked (it sets
num_videos_per_prompt to 1), so a batch runs one pass per item.

Image-to-video is another checkpoint (THUDM/CogVideoX-5b-I2V: a 32-channel transformer with learned
positions, 720x480 only), not a task over these components."""
from toolkit.models.arch import (DENOISER, SCHEDULER, TEXT_ENCODER, TOKENIZER, VAE, ArchSpec, Component, Extra,
                                 Latents, SampleDefaults, Tiny)
from toolkit.models.base_model import BaseModel
from toolkit.models.formats import t5
from toolkit.models.tiny import kit

# THUDM/CogVideoX-5b scheduler/scheduler_config.json
SCHEDULER_CONFIG = dict(num_train_timesteps=1000, beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear",
                        clip_sample=False, clip_sample_range=1.0, prediction_type="v_prediction",
                        rescale_betas_zero_snr=True, sample_max_value=1.0, set_alpha_to_one=True, snr_shift_scale=1.0,
                        steps_offset=0, timestep_spacing="trailing", trained_betas=None)
SCHEDULER_FILE = dict(_class_name="CogVideoXDPMScheduler", **SCHEDULER_CONFIG)
MAX_TEXT_TOKENS = 226            # the pipeline's max_sequence_length and the transformer's max_text_seq_length
# the cosine-ramped guidance its DPM solver was tuned with (THUDM's cli_demo sets it); off by default, as the
# pipeline and the model card run it
SAMPLE_EXTRAS = {"use_dynamic_cfg": Extra("bool")}


class CogVideoXModel(BaseModel):
    def pipeline_kwargs(self, gen):
        kw = super().pipeline_kwargs(gen)
        if gen.extras.get("use_dynamic_cfg") is not None:
            kw["use_dynamic_cfg"] = gen.extras["use_dynamic_cfg"]
        return kw


def tiny_t5(b):
    """The tiny T5 tokenizer (226 tokens) and encoder every CogVideoX checkpoint shares."""
    tokenizer = kit.t5_tokenizer(MAX_TEXT_TOKENS)
    with b.seeded("text_encoder", "cogvideox_t5"):
        return tokenizer, kit.t5_encoder(tokenizer)


def tiny_vae(b):
    """Four blocks (8x spatial), the first two also halving time (4x temporal), 16 latent channels."""
    from diffusers import AutoencoderKLCogVideoX

    with b.seeded("vae", "cogvideox_vae"):
        return AutoencoderKLCogVideoX(block_out_channels=(8, 16, 16, 16), latent_channels=16, layers_per_block=1,
                                      norm_num_groups=4, temporal_compression_ratio=4, sample_height=64,
                                      sample_width=64, scaling_factor=0.7).eval()


def tiny_transformer(b, **over):
    from diffusers import CogVideoXTransformer3DModel

    dims = dict(num_attention_heads=2, attention_head_dim=16, in_channels=16, out_channels=16, time_embed_dim=16,
                text_embed_dim=32, num_layers=2, sample_width=8, sample_height=8, sample_frames=9, patch_size=2,
                temporal_compression_ratio=4, max_text_seq_length=MAX_TEXT_TOKENS,
                use_rotary_positional_embeddings=True)
    dims.update(over)
    with b.seeded("transformer"):
        return CogVideoXTransformer3DModel(**dims).eval()


def tiny_scheduler():
    from diffusers import CogVideoXDPMScheduler
    return CogVideoXDPMScheduler(**SCHEDULER_CONFIG)


def _tiny(b):
    tokenizer, text_encoder = tiny_t5(b)
    return dict(tokenizer=tokenizer, text_encoder=text_encoder, vae=tiny_vae(b), transformer=tiny_transformer(b),
                scheduler=tiny_scheduler())


COMPONENTS = (
    Component("scheduler", "SchedulerMixin", SCHEDULER),
    Component("tokenizer", "PreTrainedTokenizerBase", TOKENIZER, vocab="t5_xxl"),
    Component("text_encoder", "T5EncoderModel", TEXT_ENCODER, single_file=t5.T5_XXL),
    Component("vae", "AutoencoderKLCogVideoX", VAE),
    Component("transformer", "CogVideoXTransformer3DModel", DENOISER),
)

SPEC = ArchSpec(
    name="cogvideox", modality="video", default_name_or_path="THUDM/CogVideoX-5b", pipeline="CogVideoXPipeline",
    attention_backends=False,      # its attention processors call F.scaled_dot_product_attention themselves
    holder=CogVideoXModel, components=COMPONENTS, output_type="np",
    # the model card: 720x480, 49 frames (6 s at 8 fps), 50 steps, guidance 6
    defaults=SampleDefaults(720, 480, 50, 6.0, num_frames=49, fps=8, output_ext="mp4"),
    size_divisor=16,                  # 8x VAE x 2x2 DiT patches
    latents=Latents("BFCHW", 16, spatial=8, temporal=4, format=None),   # ComfyUI has no CogVideoX table
    sample_extras=SAMPLE_EXTRAS,
    scheduler_file=SCHEDULER_FILE,
    tiny=Tiny(_tiny, {"width": 64, "height": 64, "num_frames": 9, "num_inference_steps": 2, "guidance_scale": 6.0,
                      "fps": 8}),
    description="CogVideoX 5B text-to-video (T5-XXL, 3D causal VAE)",
    # its own DPM solver (v-prediction, zero SNR, SNR shift): no family in toolkit/samplers.py takes its config
    scheduler_config={"_class_name": "CogVideoXDPMScheduler", "prediction_type": "v_prediction"},
    batch_arg=None,                   # the pipeline forces one video per prompt
)

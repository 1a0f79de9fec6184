"""LTX-Video: a 3D DiT over T5-XXL and a 128-channel video VAE (32x spatial, 8x temporal); the scheduler
steps latents as (frame, row, column) tokens of 128 channels (`LTXPipeline._pack_latents`, patch 1);
num_frames must be 8k+1. The frame rate conditions the DiT's RoPE (`frame_rate`)."""
from toolkit import latent_formats
from toolkit.models.arch import (DENOISER, SCHEDULER, TEXT_ENCODER, TOKENIZER, VAE, ArchSpec, Component, Latents,
                                 SampleDefaults, SingleFile, Task, Tiny)
from toolkit.models.base_model import BaseModel
from toolkit.models.tiny import kit

# diffusers name -> original LTX-Video name (the inverse of diffusers' rename table)
TO_ORIGINAL = (("proj_in", "patchify_proj"), ("time_embed", "adaln_single"), ("norm_q", "q_norm"), ("norm_k", "k_norm"))


def to_original(state: dict) -> dict:
    out = {}
    for key, t in state.items():
        for a, b in TO_ORIGINAL:
            key = key.replace(a, b)
        out[key] = t
    return out


# Lightricks/LTX-Video scheduler/scheduler_config.json: resolution-dependent shift, stretched to 0.1
SCHEDULER_CONFIG = dict(num_train_timesteps=1000, shift=1.0, use_dynamic_shifting=True, base_shift=0.95,
                        max_shift=2.05, base_image_seq_len=1024, max_image_seq_len=4096, shift_terminal=0.1)


class LTXModel(BaseModel):
    def pipeline_kwargs(self, gen):
        return {**super().pipeline_kwargs(gen), "frame_rate": gen.fps}


def _tiny(b):
    from diffusers import AutoencoderKLLTXVideo, LTXVideoTransformer3DModel

    tokenizer = kit.t5_tokenizer(128)                # LTX's T5 tokenizer stops at 128 tokens
    with b.seeded("text_encoder"):
        text_encoder = kit.t5_encoder(tokenizer)
    with b.seeded("vae"):
        # 4x4 pixel patches, then 3 space-time downsamplings: 32x spatial, 8x temporal, 128 channels
        vae = AutoencoderKLLTXVideo(
            latent_channels=128, block_out_channels=(8, 16, 32, 32), decoder_block_out_channels=(8, 16, 32, 32),
            layers_per_block=(1, 1, 1, 1, 1), decoder_layers_per_block=(1, 1, 1, 1, 1),
            spatio_temporal_scaling=(True, True, True, False), decoder_spatio_temporal_scaling=(True, True, True, False),
            patch_size=4, patch_size_t=1, encoder_causal=True, decoder_causal=False).eval()
    with b.seeded("transformer"):
        transformer = LTXVideoTransformer3DModel(
            in_channels=128, out_channels=128, patch_size=1, patch_size_t=1, num_attention_heads=2,
            attention_head_dim=16, cross_attention_dim=32, num_layers=2,
            caption_channels=text_encoder.config.d_model).eval()
    return dict(scheduler=kit.flow_match_scheduler(**SCHEDULER_CONFIG), vae=vae, text_encoder=text_encoder,
                tokenizer=tokenizer, transformer=transformer)


SPEC = ArchSpec(
    name="ltx", modality="video", default_name_or_path="Lightricks/LTX-Video", pipeline="LTXPipeline",
    holder=LTXModel, output_type="np",
    tasks=(Task("txt2img", "LTXPipeline"), Task("i2v", "LTXImageToVideoPipeline")),
    components=(
        Component("scheduler", "SchedulerMixin", SCHEDULER),
        Component("tokenizer", "PreTrainedTokenizerBase", TOKENIZER),
        Component("text_encoder", "T5EncoderModel", TEXT_ENCODER),
        Component("vae", "AutoencoderKLLTXVideo", VAE),
        Component("transformer", "LTXVideoTransformer3DModel", DENOISER, single_file=SingleFile(
            "convert_ltx_transformer_checkpoint_to_diffusers", "toolkit.models.archs.ltx:to_original",
            anchors=("patchify_proj.weight", "adaln_single.linear.weight"))),
    ),
    # model card / the diffusers example: 704x480, 161 frames at 25 fps, 50 steps, guidance 3.0
    defaults=SampleDefaults(704, 480, 50, 3.0, num_frames=161, fps=25, output_ext="mp4"),
    size_divisor=32,
    latents=Latents("packed_video", 128, spatial=32, temporal=8, format=latent_formats.LTXV),
    tiny=Tiny(_tiny, {"width": 64, "height": 64, "num_frames": 9, "num_inference_steps": 2, "guidance_scale": 3.0,
                      "fps": 8}),
    description="LTX-Video text-to-video",
    scheduler_config={"_class_name": "FlowMatchEulerDiscreteScheduler"},
    samplers_excluded=("heun", "dpm++_2m"),   # the pipeline passes sigmas, which their set_timesteps do not take
    batch_arg="num_videos_per_prompt",
)

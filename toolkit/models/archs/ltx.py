"""LTX-Video: a 3D DiT over T5-XXL and a 128-channel video VAE (32x spatial, 8x temporal); the scheduler
steps latents as (frame, row, column) tokens of 128 channels (`LTXPipeline._pack_latents`, patch 1);
num_frames must be 8k+1. The frame rate conditions the DiT's RoPE (`frame_rate`).

Its files: the original LTX-Video layout (ComfyUI's `checkpoints/ltx-video-2b-v0.9.5.safetensors`, the
denoiser beside its VAE), read with the configs below: the 2B denoiser of 0.9.0 to 0.9.6 (their shapes
are one; their VAEs differ) and the 13B one of 0.9.7 and 0.9.8."""
from toolkit import latent_formats
from toolkit.models.arch import (DENOISER, SCHEDULER, TEXT_ENCODER, TOKENIZER, VAE, ArchSpec, Component, Latents,
                                 SampleDefaults, SingleFile, Task, Tiny)
from toolkit.models.base_model import BaseModel
from toolkit.models.formats import t5, vaes
from toolkit.models.formats.dit_configs import from_known
from toolkit.models.formats.file_view import FileKindError
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
SCHEDULER_FILE = dict(_class_name="FlowMatchEulerDiscreteScheduler", **SCHEDULER_CONFIG)

_LTX = dict(in_channels=128, out_channels=128, patch_size=1, patch_size_t=1, num_attention_heads=32,
            activation_fn="gelu-approximate", qk_norm="rms_norm_across_heads", norm_elementwise_affine=False,
            norm_eps=1e-06, caption_channels=4096, attention_bias=True, attention_out_bias=True)
# Lightricks/LTX-Video (0.9.0 .. 0.9.6: one 2B denoiser) and LTX-Video-0.9.7-dev (13B) transformer/config.json;
# and the tiny factory's
TRANSFORMER_KNOWN = {
    "ltxv-2b": dict(_LTX, attention_head_dim=64, cross_attention_dim=2048, num_layers=28),
    "ltxv-13b": dict(_LTX, attention_head_dim=128, cross_attention_dim=4096, num_layers=48),
    "tiny": dict(_LTX, num_attention_heads=2, attention_head_dim=16, cross_attention_dim=32, num_layers=2,
                 caption_channels=32),
}


def transformer_signature(view) -> dict:
    if not view.has("patchify_proj.weight") or not view.has("adaln_single.linear.weight"):
        raise FileKindError("no patchify_proj / adaln_single: not an LTX-Video transformer")
    if view.has("audio_patchify_proj.weight"):          # the same names, with an audio stream beside them
        raise FileKindError("audio_patchify_proj: an LTX-2 transformer (arch ltx2), not LTX-Video's")
    return {"width": view.dim("patchify_proj.weight"), "in_channels": view.dim("patchify_proj.weight", 1),
            "out_channels": view.dim("proj_out.weight"),
            "caption_channels": view.dim("caption_projection.linear_1.weight", 1),
            "cross_attention_dim": view.dim("transformer_blocks.0.attn2.to_k.weight", 1),
            "num_layers": view.count(r"transformer_blocks\.(\d+)\.")}


def transformer_facts(c: dict) -> dict:
    return {"width": c["num_attention_heads"] * c["attention_head_dim"], "in_channels": c["in_channels"],
            "out_channels": c["out_channels"] * c["patch_size"] ** 2 * c["patch_size_t"],
            "caption_channels": c["caption_channels"], "cross_attention_dim": c["cross_attention_dim"],
            "num_layers": c["num_layers"]}


def transformer_config(view):
    return from_known(transformer_signature(view), TRANSFORMER_KNOWN, transformer_facts, "the LTX-Video transformer",
                      notes={"ltxv-13b": ("its repos run LTXConditionPipeline; this arch runs it with LTXPipeline",)})


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
        Component("tokenizer", "PreTrainedTokenizerBase", TOKENIZER, vocab="t5_xxl"),
        Component("text_encoder", "T5EncoderModel", TEXT_ENCODER, single_file=t5.T5_XXL),
        Component("vae", "AutoencoderKLLTXVideo", VAE, single_file=vaes.LTX_VAE),
        Component("transformer", "LTXVideoTransformer3DModel", DENOISER, single_file=SingleFile(
            "convert_ltx_transformer_checkpoint_to_diffusers", "toolkit.models.archs.ltx:to_original",
            anchors=("patchify_proj.weight", "adaln_single.linear.weight"),
            config="toolkit.models.archs.ltx:transformer_config", kind="ltxv_dit", label="LTX-Video transformer")),
    ),
    # model card / the diffusers example: 704x480, 161 frames at 25 fps, 50 steps, guidance 3.0
    defaults=SampleDefaults(704, 480, 50, 3.0, num_frames=161, fps=25, output_ext="mp4"),
    size_divisor=32,
    latents=Latents("packed_video", 128, spatial=32, temporal=8, format=latent_formats.LTXV),
    decode_features=8,                        # its VAE's patch 4: 128 features at a quarter of the size
    scheduler_file=SCHEDULER_FILE,
    tiny=Tiny(_tiny, {"width": 64, "height": 64, "num_frames": 9, "num_inference_steps": 2, "guidance_scale": 3.0,
                      "fps": 8}),
    description="LTX-Video text-to-video",
    scheduler_config={"_class_name": "FlowMatchEulerDiscreteScheduler"},
    samplers_excluded=("heun", "dpm++_2m"),   # the pipeline passes sigmas, which their set_timesteps do not take
    batch_arg="num_videos_per_prompt",
)

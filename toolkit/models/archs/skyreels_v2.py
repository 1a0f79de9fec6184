"""SkyReels V2 T2V 14B text-to-video (Skywork): Wan 2.1 14B's 3D DiT, fine-tuned for film (SkyCaptioner
captions, motion RL), over UMT5-XXL and the Wan 2.1 VAE (16 channels, 8x spatial, 4x temporal), both as
wan21 has them; UniPC with flow sigmas at the shift 8 its T2V runs use.

540P and 720P are two checkpoints of the same shapes (variants, each its own repo); the model card runs
544x960 with 97 frames (720P: 720x1280, 121 frames) at 24 fps, 50 steps, guidance 6. Its
diffusion-forcing checkpoints (long video) are `skyreels_v2_df`, its image-to-video ones
`skyreels_v2_i2v`: other pipelines, not tasks over these components."""
from dataclasses import replace

from toolkit import latent_formats
from toolkit.models.arch import DENOISER, ArchSpec, Component, Latents, SampleDefaults, Tiny, Variant
from toolkit.models.archs.wan21 import (COMPONENTS, LORA, WAN_DECODE_FEATURES, tiny_umt5, unipc_flow_config,
                                        unipc_flow_scheduler)
from toolkit.models.tiny import kit

# the shift Skywork's examples set for text-to-video (5 for image-to-video)
FLOW_SHIFT = 8.0
SCHEDULER_CONFIG = {"_class_name": "UniPCMultistepScheduler", "prediction_type": "flow_prediction",
                    "use_flow_sigmas": True}
# wan21's UMT5 and VAE rows; the denoiser is SkyReels' own class (Wan's layout, plus diffusion forcing's
# per-frame timesteps and the DF 1.3B's fps embedding)
COMPONENTS_T2V = COMPONENTS[:-1] + (Component("transformer", "SkyReelsV2Transformer3DModel", DENOISER),)


# Wan's LoRA keys (SkyReelsV2LoraLoaderMixin converts Wan's formats); a Wan LoRA file is listed as wan21's
SKYREELS_LORA = replace(LORA, markers=())


def tiny_transformer(b, **over):
    """A tiny SkyReelsV2Transformer3DModel: Wan's tiny widths (two heads of 16)."""
    from diffusers import SkyReelsV2Transformer3DModel

    dims = dict(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=16, in_channels=16, out_channels=16,
                text_dim=32, freq_dim=256, ffn_dim=64, num_layers=2, cross_attn_norm=True,
                qk_norm="rms_norm_across_heads", eps=1e-6, rope_max_seq_len=1024)
    dims.update(over)
    with b.seeded("transformer"):
        return SkyReelsV2Transformer3DModel(**dims).eval()


def tiny_umt5_vae(b) -> dict:
    """The very UMT5 and Wan 2.1 VAE wan21's tiny has (a shared pair)."""
    tokenizer, text_encoder = tiny_umt5(b)
    with b.seeded("vae", "wan_vae"):
        vae = kit.wan_vae(16)
    return dict(tokenizer=tokenizer, text_encoder=text_encoder, vae=vae)


def _tiny(b):
    return dict(tiny_umt5_vae(b), scheduler=unipc_flow_scheduler(FLOW_SHIFT), transformer=tiny_transformer(b))


TINY_SAMPLE = {"width": 64, "height": 64, "num_frames": 9, "num_inference_steps": 2, "guidance_scale": 6.0, "fps": 8}

SPEC = ArchSpec(
    name="skyreels_v2", modality="video", default_name_or_path="Skywork/SkyReels-V2-T2V-14B-540P-Diffusers",
    pipeline="SkyReelsV2Pipeline", components=COMPONENTS_T2V, output_type="np",
    # model card (540P): 960x544, 97 frames at 24 fps; the pipeline's 50 steps, guidance 6.0
    defaults=SampleDefaults(960, 544, 50, 6.0, num_frames=97, fps=24, output_ext="mp4"),
    variants={"540p": Variant(),
              "720p": Variant(defaults={"width": 1280, "height": 720, "num_frames": 121},
                              name_or_path="Skywork/SkyReels-V2-T2V-14B-720P-Diffusers")},
    latents=Latents("BCFHW", 16, temporal=4, format=latent_formats.WAN21), decode_features=WAN_DECODE_FEATURES,
    scheduler_file=unipc_flow_config(FLOW_SHIFT),
    tiny=Tiny(_tiny, TINY_SAMPLE),
    description="SkyReels V2 T2V 14B text-to-video (Wan 2.1 14B fine-tuned for film)",
    scheduler_config=SCHEDULER_CONFIG,
    batch_arg="num_videos_per_prompt",
    lora=SKYREELS_LORA,
    # diffusers registers no SkyReels block for the first-block cache (TransformerBlockRegistry)
    step_caches={"faster": {}},
)

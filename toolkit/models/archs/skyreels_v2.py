"""SkyReels V2 T2V 14B text-to-video (Skywork): Wan 2.1 14B's 3D DiT, fine-tuned for film (SkyCaptioner
captions, motion RL), over UMT5-XXL and the Wan 2.1 VAE (16 channels, 8x spatial, 4x temporal), both as
wan21 has them; UniPC with flow sigmas at the shift 8 its T2V runs use.

540P and 720P are two checkpoints of the same shapes (variants, each its own repo); the model card runs
544x960 with 97 frames (720P: 720x1280, 121 frames) at 24 fps, 50 steps, guidance 6. Its
diffusion-forcing checkpoints (long video) are `skyreels_v2_df`, its image-to-video ones
`skyreels_v2_i2v`: other pipelines, not tasks over these components.

Its files: the original Wan layout (Skywork's own checkpoints, and the ComfyUI `diffusion_models/` files
made of them), read with the configs below. They have Wan 2.1 14B's shapes: a file named without
`model.arch` is taken for wan21 (the detector says skyreels_v2 fits it too); `model.arch: skyreels_v2`
reads it here. The DF 1.3B's frame-rate embedding (`fps_embedding`, `fps_projection.0/2`) is its own."""
from dataclasses import replace

from toolkit import latent_formats
from toolkit.models.arch import DENOISER, ArchSpec, Component, Latents, SampleDefaults, Tiny, Variant
from toolkit.models.archs.wan21 import (COMPONENTS, LORA, TINY_WAN, WAN_14B, WAN_DECODE_FEATURES, WAN_FILE, tiny_umt5,
                                        transformer_facts, transformer_signature, unipc_flow_config,
                                        unipc_flow_scheduler)
from toolkit.models.archs.wan21 import to_original as wan_to_original
from toolkit.models.formats.dit_configs import from_known
from toolkit.models.tiny import kit

# the shift Skywork's examples set for text-to-video (5 for image-to-video)
FLOW_SHIFT = 8.0
SCHEDULER_CONFIG = {"_class_name": "UniPCMultistepScheduler", "prediction_type": "flow_prediction",
                    "use_flow_sigmas": True}
# Skywork/SkyReels-V2-T2V-14B-540P-Diffusers (and -720P) transformer/config.json: Wan 2.1 14B's; the tiny's
TRANSFORMER_KNOWN = {"skyreels-v2-t2v-14b": WAN_14B, "tiny": TINY_WAN}
# the DF 1.3B's frame-rate projection: the original's nn.Sequential, diffusers' FeedForward
FPS_NAMES = (("fps_projection.0.", "fps_projection.net.0.proj."), ("fps_projection.2.", "fps_projection.net.2."))


def transformer_config(view):
    return from_known(transformer_signature(view), TRANSFORMER_KNOWN, transformer_facts,
                      "the SkyReels V2 T2V transformer")


def from_original(state: dict) -> dict:
    """An original-layout SkyReels V2 transformer in diffusers' names: Wan's converter, and the DF 1.3B's
    frame-rate projection, which it does not know."""
    from diffusers.loaders.single_file_utils import convert_wan_transformer_to_diffusers
    return {_renamed(k, FPS_NAMES): v for k, v in convert_wan_transformer_to_diffusers(dict(state)).items()}


def to_original(state: dict) -> dict:
    """A diffusers SkyReelsV2Transformer3DModel state dict in the original (Wan) layout."""
    fps = {k: v for k, v in state.items() if k.startswith("fps_")}
    out = wan_to_original({k: v for k, v in state.items() if k not in fps})
    out.update({_renamed(k, tuple((b, a) for a, b in FPS_NAMES)): v for k, v in fps.items()})
    return out


def _renamed(key: str, pairs: tuple) -> str:
    for a, b in pairs:
        if key.startswith(a):
            return b + key[len(a):]
    return key


def transformer_row(config: str, label: str) -> Component:
    """A SkyReels transformer read from Wan's layout by `config`'s known configs; never the detector's first
    guess (a Wan row with the same shapes is)."""
    return Component("transformer", "SkyReelsV2Transformer3DModel", DENOISER, single_file=replace(
        WAN_FILE, converter="toolkit.models.archs.skyreels_v2:from_original",
        original="toolkit.models.archs.skyreels_v2:to_original", config=config, label=label, guess=False))


# wan21's UMT5 and VAE rows; the denoiser is SkyReels' own class (Wan's layout, plus diffusion forcing's
# per-frame timesteps and the DF 1.3B's fps embedding)
COMPONENTS_T2V = COMPONENTS[:-1] + (transformer_row("toolkit.models.archs.skyreels_v2:transformer_config",
                                                    "SkyReels V2 T2V transformer"),)


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

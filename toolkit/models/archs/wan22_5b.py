"""Wan 2.2 TI2V 5B text-to-video: a dense 3D DiT over UMT5-XXL (Wan 2.1's) and the Wan 2.2 VAE
(48 channels, 2x2 pixel patches + 8x = 16x spatial, 4x temporal); per-token timesteps
(`expand_timesteps`, a model_index.json setting), UniPC with flow sigmas (shift 5).

Its files: the original Wan layout (ComfyUI's `diffusion_models/wan2.2_ti2v_5B_fp16.safetensors`), read
with the configs below (48 latent channels tell it from the other Wan rows)."""
from dataclasses import replace

from toolkit import latent_formats
from toolkit.models.arch import ArchSpec, Latents, SampleDefaults, Task, Tiny
from toolkit.models.archs.wan21 import (COMPONENTS, GGUF, LORA, TINY_WAN, WAN22_5B, WAN_DECODE_FEATURES, tiny_umt5,
                                        tiny_wan_transformer, transformer_facts, transformer_signature,
                                        unipc_flow_config, unipc_flow_scheduler, with_transformer_config)
from toolkit.models.formats import vaes
from toolkit.models.formats.dit_configs import from_known
from toolkit.models.tiny import kit

# Wan-AI/Wan2.2-TI2V-5B-Diffusers transformer/config.json; and the tiny factory's
TRANSFORMER_KNOWN = {"wan2.2-ti2v-5b": WAN22_5B, "tiny": dict(TINY_WAN, in_channels=48, out_channels=48)}


def transformer_config(view):
    return from_known(transformer_signature(view), TRANSFORMER_KNOWN, transformer_facts,
                      "the Wan 2.2 TI2V 5B transformer")

# Wan-AI/Wan2.2-TI2V-5B-Diffusers vae/config.json: the per-channel statistics the pipeline
# un-normalises the latents with before decoding
LATENTS_MEAN = (
    -0.2289, -0.0052, -0.1323, -0.2339, -0.2799, 0.0174, 0.1838, 0.1557, -0.1382, 0.0542, 0.2813, 0.0891,
    0.157, -0.0098, 0.0375, -0.1825, -0.2246, -0.1207, -0.0698, 0.5109, 0.2665, -0.2108, -0.2158, 0.2502,
    -0.2055, -0.0322, 0.1109, 0.1567, -0.0729, 0.0899, -0.2799, -0.123, -0.0313, -0.1649, 0.0117, 0.0723,
    -0.2839, -0.2083, -0.052, 0.3748, 0.0152, 0.1957, 0.1433, -0.2944, 0.3573, -0.0548, -0.1681, -0.0667)
LATENTS_STD = (
    0.4765, 1.0364, 0.4514, 1.1677, 0.5313, 0.499, 0.4818, 0.5013, 0.8158, 1.0344, 0.5894, 1.0901,
    0.6885, 0.6165, 0.8454, 0.4978, 0.5759, 0.3523, 0.7135, 0.6804, 0.5833, 1.4146, 0.8986, 0.5659,
    0.7069, 0.5338, 0.4889, 0.4917, 0.4069, 0.4999, 0.6866, 0.4093, 0.5709, 0.6065, 0.6415, 0.4944,
    0.5726, 1.2042, 0.5458, 1.6887, 0.3971, 1.06, 0.3943, 0.5537, 0.5444, 0.4089, 0.7468, 0.7744)


def _tiny(b):
    tokenizer, text_encoder = tiny_umt5(b)          # the very UMT5 wan21 has (a shared pair)
    with b.seeded("vae"):
        # residual blocks, 12 = 3 x 2x2 patched pixel channels in and out, 8x inside: 16x spatial
        vae = kit.wan_vae(48, is_residual=True, in_channels=12, out_channels=12, patch_size=2,
                          scale_factor_spatial=16, scale_factor_temporal=4, latents_mean=list(LATENTS_MEAN),
                          latents_std=list(LATENTS_STD))
    transformer = tiny_wan_transformer(b, in_channels=48, out_channels=48)
    return dict(tokenizer=tokenizer, text_encoder=text_encoder, vae=vae, scheduler=unipc_flow_scheduler(5.0),
                transformer=transformer)


SPEC = ArchSpec(
    name="wan22_5b", modality="video", default_name_or_path="Wan-AI/Wan2.2-TI2V-5B-Diffusers",
    pipeline="WanPipeline",
    # Wan 2.1's components with Wan 2.2's 48-channel VAE (ComfyUI's wan2.2_vae.safetensors)
    components=tuple(replace(c, single_file=vaes.WAN22_VAE) if c.role == "vae" else c for c in
                     with_transformer_config(COMPONENTS, "toolkit.models.archs.wan22_5b:transformer_config",
                                             "Wan 2.2 TI2V 5B transformer")),
    # TI2V: the same components run image-to-video (the first frame's latents, per-token timesteps)
    tasks=(Task("txt2img", "WanPipeline"), Task("i2v", "WanImageToVideoPipeline")),
    # expand_timesteps is its model_index.json setting: here too for its files, which carry none
    pipeline_init_kwargs={"transformer_2": None, "expand_timesteps": True}, output_type="np",
    # model card: 720P (1280x704), 121 frames at 24 fps; the diffusers example: 50 steps, guidance 5.0
    defaults=SampleDefaults(1280, 704, 50, 5.0, num_frames=121, fps=24, output_ext="mp4"),
    size_divisor=32,                # 16x VAE x 2x2 DiT patches
    latents=Latents("BCFHW", 48, spatial=16, temporal=4, format=latent_formats.WAN22),
    decode_features=WAN_DECODE_FEATURES,
    scheduler_file=unipc_flow_config(5.0),
    tiny=Tiny(_tiny, {"width": 64, "height": 64, "num_frames": 9, "num_inference_steps": 2, "guidance_scale": 5.0,
                      "fps": 8}, pipeline_kwargs={"expand_timesteps": True}),
    description="Wan 2.2 TI2V 5B text-to-video", gguf=GGUF,
    scheduler_config={"_class_name": "UniPCMultistepScheduler", "prediction_type": "flow_prediction",
                      "use_flow_sigmas": True},
    batch_arg="num_videos_per_prompt",
    lora=replace(LORA, markers=()),     # a Wan LoRA file is listed as wan21's
)

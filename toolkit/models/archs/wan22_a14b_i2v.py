"""Wan 2.2 I2V A14B image-to-video: two 3D DiT experts as wan22_a14b has them (`transformer` for the
high-noise steps, `transformer_2` for the low-noise ones, switching at `boundary_ratio` x 1000: 0.9
here, its model_index.json setting), each taking 36 channels (the noisy latents, the first-frame mask
and the first frame's latents); no CLIP image encoder (its repo ships none). UMT5-XXL and the Wan 2.1
VAE as wan21 has them. Image-to-video only: every request needs `init_img`, the first frame.

Its files: ComfyUI's two experts (`wan2.2_i2v_high_noise_14B_fp16.safetensors` as the model,
`..._low_noise_...` as `model.components.transformer_2`), read with the configs below (36 input
channels and no `img_emb` tell them from Wan 2.1 I2V's)."""
from dataclasses import replace

from toolkit import latent_formats
from toolkit.models.arch import DENOISER, ArchSpec, Component, Extra, Latents, SampleDefaults, Task, Tiny
from toolkit.models.archs.wan21 import (COMPONENTS, GGUF, TINY_WAN, WAN_14B, WAN_DECODE_FEATURES, tiny_umt5,
                                        tiny_wan_transformer, transformer_facts, transformer_signature,
                                        unipc_flow_config, unipc_flow_scheduler, with_transformer_config)
from toolkit.models.archs.wan22_a14b import Wan22A14BModel
from toolkit.models.formats.dit_configs import from_known
from toolkit.models.tiny import kit

# Wan-AI/Wan2.2-I2V-A14B-Diffusers transformer/ and transformer_2/config.json; and the tiny factory's
TRANSFORMER_KNOWN = {"wan2.2-i2v-a14b": dict(WAN_14B, in_channels=36), "tiny": dict(TINY_WAN, in_channels=36)}
BOUNDARY_RATIO = 0.9


def transformer_config(view):
    return from_known(transformer_signature(view), TRANSFORMER_KNOWN, transformer_facts,
                      "a Wan 2.2 I2V A14B expert")


_COMPONENTS = with_transformer_config(COMPONENTS, "toolkit.models.archs.wan22_a14b_i2v:transformer_config",
                                      "Wan 2.2 I2V A14B expert")
# the low-noise expert: the same layout and rule, found in no file by itself (no anchors): only a file given for it
_EXPERT_2 = replace(_COMPONENTS[-1].single_file, anchors=(), label="Wan 2.2 I2V A14B low-noise expert")


def _tiny(b):
    tokenizer, text_encoder = tiny_umt5(b)          # the very UMT5 and VAE wan22_a14b has (a shared pair)
    with b.seeded("vae", "wan_vae"):
        vae = kit.wan_vae(16)
    # UniPC with flow sigmas at shift 3: 2 steps run at t = 999, 750, so with the boundary at 900 the
    # high-noise expert takes the first step and the low-noise expert the second
    return dict(tokenizer=tokenizer, text_encoder=text_encoder, vae=vae, scheduler=unipc_flow_scheduler(3.0),
                transformer=tiny_wan_transformer(b, "transformer", in_channels=36),
                transformer_2=tiny_wan_transformer(b, "transformer_2", in_channels=36))


SPEC = ArchSpec(
    name="wan22_a14b_i2v", modality="video", default_name_or_path="Wan-AI/Wan2.2-I2V-A14B-Diffusers",
    pipeline="WanImageToVideoPipeline", holder=Wan22A14BModel, output_type="np",
    components=_COMPONENTS + (Component("transformer_2", "WanTransformer3DModel", DENOISER, single_file=_EXPERT_2),),
    tasks=(Task("i2v", "WanImageToVideoPipeline"),),
    # its model_index.json: boundary 0.9 and no image encoder / processor (here too for its files, which carry none)
    pipeline_init_kwargs={"boundary_ratio": BOUNDARY_RATIO, "image_encoder": None, "image_processor": None},
    # model card: 720P (1280x720), 81 frames at 16 fps, 40 steps, CFG 3.5 for both experts
    defaults=SampleDefaults(1280, 720, 40, 3.5, num_frames=81, fps=16, output_ext="mp4"),
    sample_extras={"guidance_scale_2": Extra("float", 3.5)},
    latents=Latents("BCFHW", 16, temporal=4, format=latent_formats.WAN21), decode_features=WAN_DECODE_FEATURES,
    scheduler_file=unipc_flow_config(3.0),
    tiny=Tiny(_tiny, {"width": 64, "height": 64, "num_frames": 9, "num_inference_steps": 2, "guidance_scale": 3.5,
                      "guidance_scale_2": 3.0, "fps": 8},
              pipeline_kwargs={"boundary_ratio": BOUNDARY_RATIO, "image_encoder": None, "image_processor": None}),
    description="Wan 2.2 I2V A14B image-to-video (high/low-noise experts)", gguf=GGUF,
    scheduler_config={"_class_name": "UniPCMultistepScheduler", "prediction_type": "flow_prediction",
                      "use_flow_sigmas": True},
    batch_arg="num_videos_per_prompt",
)

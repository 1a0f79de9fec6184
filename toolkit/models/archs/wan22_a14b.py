"""Wan 2.2 T2V A14B text-to-video: two 3D DiT experts (mixture of experts over time), `transformer` for the
high-noise steps and `transformer_2` for the low-noise ones, switching at `boundary_ratio` x 1000 (0.875, a
model_index.json setting), each with its own CFG scale; UMT5-XXL and the Wan 2.1 VAE (16 channels, 8x
spatial, 4x temporal) as Wan 2.1 has them.

Its files: ComfyUI's two experts (`wan2.2_t2v_high_noise_14B_fp16.safetensors` as the model,
`..._low_noise_...` as `model.components.transformer_2`), each read with the configs below. They have
Wan 2.1 14B's shapes, so `model.arch: wan22_a14b` says what they are; the low-noise expert is never
taken from the high-noise file (a model without it names transformer_2 as missing)."""
from dataclasses import replace

from toolkit import latent_formats
from toolkit.models.arch import DENOISER, ArchSpec, Component, Extra, Latents, SampleDefaults, Tiny
from toolkit.models.archs.wan21 import (COMPONENTS, GGUF, TINY_WAN, WAN_14B, WAN_DECODE_FEATURES, tiny_umt5,
                                        tiny_wan_transformer, transformer_facts, transformer_signature,
                                        unipc_flow_config, unipc_flow_scheduler, with_transformer_config)
from toolkit.models.base_model import BaseModel
from toolkit.models.formats.dit_configs import from_known
from toolkit.models.tiny import kit

# Wan-AI/Wan2.2-T2V-A14B-Diffusers transformer/ and transformer_2/config.json (Wan 2.1 14B's); the tiny factory's
TRANSFORMER_KNOWN = {"wan2.2-t2v-a14b": WAN_14B, "tiny": TINY_WAN}


def transformer_config(view):
    return from_known(transformer_signature(view), TRANSFORMER_KNOWN, transformer_facts,
                      "a Wan 2.2 T2V A14B expert")


_COMPONENTS = with_transformer_config(COMPONENTS, "toolkit.models.archs.wan22_a14b:transformer_config",
                                      "Wan 2.2 A14B expert")
# the low-noise expert: the same layout and rule, found in no file by itself (no anchors): only a file given for it
_EXPERT_2 = replace(_COMPONENTS[-1].single_file, anchors=(), label="Wan 2.2 A14B low-noise expert")


class Wan22A14BModel(BaseModel):
    def pipeline_kwargs(self, gen):
        kw = super().pipeline_kwargs(gen)
        scale_2 = gen.extras.get("guidance_scale_2")
        if scale_2 is not None:                 # unset: the pipeline uses guidance_scale for both experts
            kw["guidance_scale_2"] = scale_2
        return kw


def _tiny(b):
    tokenizer, text_encoder = tiny_umt5(b)          # the very UMT5 and VAE wan21 has (a shared pair)
    with b.seeded("vae", "wan_vae"):
        vae = kit.wan_vae(16)
    # UniPC with flow sigmas at shift 3: 2 steps run at t = 999, 750 (3 steps: 999, 857, 600), so with the
    # boundary at 875 the high-noise expert takes the first step and the low-noise expert the rest
    return dict(tokenizer=tokenizer, text_encoder=text_encoder, vae=vae, scheduler=unipc_flow_scheduler(3.0),
                transformer=tiny_wan_transformer(b, "transformer"),
                transformer_2=tiny_wan_transformer(b, "transformer_2"))


SPEC = ArchSpec(
    name="wan22_a14b", modality="video", default_name_or_path="Wan-AI/Wan2.2-T2V-A14B-Diffusers",
    pipeline="WanPipeline", holder=Wan22A14BModel, output_type="np",
    components=_COMPONENTS + (Component("transformer_2", "WanTransformer3DModel", DENOISER, single_file=_EXPERT_2),),
    # boundary_ratio is its model_index.json setting: here too for its files, which carry none
    pipeline_init_kwargs={"boundary_ratio": 0.875},
    # model card: 720P (1280x720), 81 frames at 16 fps, 40 steps, CFG 4.0 (high noise) / 3.0 (low noise)
    defaults=SampleDefaults(1280, 720, 40, 4.0, num_frames=81, fps=16, output_ext="mp4"),
    sample_extras={"guidance_scale_2": Extra("float", 3.0)},
    latents=Latents("BCFHW", 16, temporal=4, format=latent_formats.WAN21), decode_features=WAN_DECODE_FEATURES,
    scheduler_file=unipc_flow_config(3.0),
    tiny=Tiny(_tiny, {"width": 64, "height": 64, "num_frames": 9, "num_inference_steps": 2, "guidance_scale": 4.0,
                      "guidance_scale_2": 3.0, "fps": 8}, pipeline_kwargs={"boundary_ratio": 0.875}),
    description="Wan 2.2 T2V A14B text-to-video (high/low-noise experts)", gguf=GGUF,
    scheduler_config={"_class_name": "UniPCMultistepScheduler", "prediction_type": "flow_prediction",
                      "use_flow_sigmas": True},
    batch_arg="num_videos_per_prompt",
)

"""Wan 2.2 T2V A14B text-to-video: two 3D DiT experts (mixture of experts over time), `transformer` for the
high-noise steps and `transformer_2` for the low-noise ones, switching at `boundary_ratio` x 1000 (0.875, a
model_index.json setting), each with its own CFG scale; UMT5-XXL and the Wan 2.1 VAE (16 channels, 8x
spatial, 4x temporal) as Wan 2.1 has them."""
from toolkit import latent_formats
from toolkit.models.arch import DENOISER, ArchSpec, Component, Extra, Latents, SampleDefaults, Tiny
from toolkit.models.archs.wan21 import COMPONENTS, tiny_umt5, tiny_wan_transformer, unipc_flow_scheduler
from toolkit.models.base_model import BaseModel
from toolkit.models.tiny import kit


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
    components=COMPONENTS + (Component("transformer_2", "WanTransformer3DModel", DENOISER,
                                       single_file=COMPONENTS[-1].single_file),),
    # model card: 720P (1280x720), 81 frames at 16 fps, 40 steps, CFG 4.0 (high noise) / 3.0 (low noise)
    defaults=SampleDefaults(1280, 720, 40, 4.0, num_frames=81, fps=16, output_ext="mp4"),
    sample_extras={"guidance_scale_2": Extra("float", 3.0)},
    latents=Latents("BCFHW", 16, temporal=4, format=latent_formats.WAN21),
    tiny=Tiny(_tiny, {"width": 64, "height": 64, "num_frames": 9, "num_inference_steps": 2, "guidance_scale": 4.0,
                      "guidance_scale_2": 3.0, "fps": 8}, pipeline_kwargs={"boundary_ratio": 0.875}),
    description="Wan 2.2 T2V A14B text-to-video (high/low-noise experts)",
    scheduler_config={"_class_name": "UniPCMultistepScheduler", "prediction_type": "flow_prediction",
                      "use_flow_sigmas": True},
    batch_arg="num_videos_per_prompt",
)

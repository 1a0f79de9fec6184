"""NVIDIA ChronoEdit 14B image editing: the edit as a short video from the input image to the edited one, made by
a Wan 2.1 I2V 14B 720P DiT fine-tuned for it (36 input channels: noise, the first-frame mask and the
input's latents; the CLIP ViT-H/14 image encoder's hidden states through extra cross-attention keys; its
RoPE skips time between the two frames). UMT5-XXL, the Wan 2.1 VAE and the CLIP encoder as wan21_i2v has
them. What a person gets is the video's last frame: an image (the pipeline decodes 5 frames, 2 latent
ones).

Task: edit, `ctrl_img` the image to edit, loaded at the request size (`resize_mode`) as an image-to-video
first frame is (the pipeline would stretch it). NVIDIA's script runs 50 steps, guidance 5, UniPC at flow
shift 5, at the input's aspect over 1280x720's area (here: the request's size). `enable_temporal_reasoning`
first denoises a 29-frame trajectory for `num_temporal_reasoning_steps` steps (50: every step, the
script's default), then only the two ends; it trims the UniPC solver's history, so it runs with UniPC
only. The repo's 8-step distillation LoRA (`lora/chronoedit_distill_lora.safetensors`) loads as any
LoRA; NVIDIA runs it at guidance 1 and flow shift 2.

Progress and previews follow the edited (last) latent frame.

Its files: a denoiser in the original Wan layout (the ComfyUI `diffusion_models/` files made of it), read with
the configs below. They have Wan 2.1 I2V 14B's shapes: a file named without `model.arch` is
taken for wan21_i2v (the detector says chronoedit fits it too); `model.arch: chronoedit` reads it here."""
from dataclasses import replace

from toolkit import latent_formats
from toolkit.errors import ConfigError
from toolkit.models.arch import DENOISER, ArchSpec, Component, Extra, Latents, SampleDefaults, Task, Tiny
from toolkit.models.archs.wan21 import (LORA, WAN_DECODE_FEATURES, WAN_FILE, tiny_umt5, transformer_facts,
                                        transformer_signature, unipc_flow_config, unipc_flow_scheduler)
from toolkit.models.archs.wan21_i2v import COMPONENTS_I2V, TINY_I2V, WAN21_I2V_14B, Wan21I2VModel, tiny_clip_vision
from toolkit.models.formats.dit_configs import from_known
from toolkit.models.tiny import kit

FLOW_SHIFT = 5.0                # NVIDIA's inference scripts' default
REASONING_FRAMES = 29           # the trajectory the scripts denoise with temporal reasoning on (5 without)
# nvidia/ChronoEdit-14B-Diffusers transformer/config.json: Wan 2.1 I2V 14B's (its RoPE's temporal skip, 8, the
# class default, is no shape); the tiny's
TRANSFORMER_KNOWN = {"chronoedit-14b": WAN21_I2V_14B, "tiny": TINY_I2V}


def transformer_config(view):
    return from_known(transformer_signature(view), TRANSFORMER_KNOWN, transformer_facts, "the ChronoEdit transformer")


# wan21_i2v's UMT5, VAE and CLIP rows; the denoiser is ChronoEdit's class, in Wan's layout, never the detector's
# first guess (wan21_i2v has the same shapes)
TRANSFORMER_FILE = replace(WAN_FILE, config="toolkit.models.archs.chronoedit:transformer_config",
                           label="ChronoEdit transformer", guess=False)
COMPONENTS = COMPONENTS_I2V[:-1] + (
    Component("transformer", "ChronoEditTransformer3DModel", DENOISER, single_file=TRANSFORMER_FILE),)
SAMPLE_EXTRAS = {"enable_temporal_reasoning": Extra("bool", False),
                 "num_temporal_reasoning_steps": Extra("int", 50)}


def check_request(values: dict, extras: dict, where: str):
    """Temporal reasoning trims the UniPC solver's history: another sampler is refused before queueing."""
    if extras.get("enable_temporal_reasoning") and values.get("sampler") not in (None, "unipc"):
        raise ConfigError(f"{where}.sampler", "temporal reasoning trims the UniPC solver's history: it runs with "
                          "the model's UniPC only")


class ChronoEditModel(Wan21I2VModel):
    """Wan 2.1 I2V's holder (the image embedding repeated per video) returning the last frame."""

    def input_kwargs(self, gen) -> dict:
        from toolkit.images import load_image
        return {"image": load_image(gen.ctrl_img, gen.width, gen.height, gen.resize_mode)}

    def pipeline_kwargs(self, gen) -> dict:
        kw = super().pipeline_kwargs(gen)
        if gen.extras["enable_temporal_reasoning"]:
            kw.update(enable_temporal_reasoning=True, num_frames=REASONING_FRAMES,
                      num_temporal_reasoning_steps=gen.extras["num_temporal_reasoning_steps"])
        return kw

    def step_reports(self, pipe, on_step, kwargs: dict):
        """The scheduler's latents as the edited (last) frame's."""
        def last_frame(i, n, timestep, latents, x0):
            on_step(i, n, timestep, latents[:, :, -1], None if x0 is None else x0[:, :, -1])
        return super().step_reports(pipe, None if on_step is None else last_frame, kwargs)

    def extract_output(self, out):
        return out.frames[0][-1]

    def extract_outputs(self, out, n: int) -> list:
        return [frames[-1] for frames in out.frames[:n]]


def _tiny(b):
    from diffusers import ChronoEditTransformer3DModel

    tokenizer, text_encoder = tiny_umt5(b)          # wan21_i2v's very UMT5, VAE and CLIP (a shared pair)
    with b.seeded("vae", "wan_vae"):
        vae = kit.wan_vae(16)
    image_processor, image_encoder = tiny_clip_vision(b)
    with b.seeded("transformer"):
        transformer = ChronoEditTransformer3DModel(
            patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=16, in_channels=36, out_channels=16,
            text_dim=32, freq_dim=256, ffn_dim=64, num_layers=2, cross_attn_norm=True, qk_norm="rms_norm_across_heads",
            eps=1e-6, image_dim=32, added_kv_proj_dim=32, rope_max_seq_len=1024, rope_temporal_skip_len=8).eval()
    return dict(tokenizer=tokenizer, text_encoder=text_encoder, vae=vae, scheduler=unipc_flow_scheduler(FLOW_SHIFT),
                image_processor=image_processor, image_encoder=image_encoder, transformer=transformer)


SPEC = ArchSpec(
    name="chronoedit", modality="image", default_name_or_path="nvidia/ChronoEdit-14B-Diffusers",
    pipeline="ChronoEditPipeline", holder=ChronoEditModel, components=COMPONENTS,
    check="toolkit.models.archs.chronoedit:check_request",
    tasks=(Task("edit", "ChronoEditPipeline"),), output_type="pil",
    # NVIDIA's script: 50 steps, guidance 5.0, 1280x720's area (at the input's aspect)
    defaults=SampleDefaults(1280, 720, 50, 5.0),
    sample_extras=SAMPLE_EXTRAS,
    latents=Latents("BCHW", 16, format=latent_formats.WAN21), decode_features=WAN_DECODE_FEATURES,
    scheduler_file=unipc_flow_config(FLOW_SHIFT),
    tiny=Tiny(_tiny, {"width": 64, "height": 64, "num_inference_steps": 2, "guidance_scale": 5.0}),
    description="NVIDIA ChronoEdit 14B image editing (a Wan 2.1 I2V video from the input to the edit)",
    scheduler_config={"_class_name": "UniPCMultistepScheduler", "prediction_type": "flow_prediction",
                      "use_flow_sigmas": True},
    batch_arg="num_videos_per_prompt",
    lora=replace(LORA, markers=()),     # WanLoraLoaderMixin: Wan's LoRA keys; a Wan LoRA file is listed as wan21's
)

"""Krea 2 (turbo / raw): a diffusers Krea2 folder, or local ComfyUI files (scaled-FP8 diffusion model
and Qwen3-VL text encoder, original-key Qwen Image VAE, a Qwen2 tokenizer folder) given as
`model.components` or through a profile.

Sampling follows the official recipe: the exponential timestep shift
shifted(t) = e^mu / (e^mu + (1/t - 1)) on a uniform grid from 1 to 0, with mu pinned at 1.15 for
turbo and interpolated from the image-token count for raw (y1 = shift_y1 at 256 tokens,
y2 = shift_y2 at 6400); guidance v = v_c + g * (v_c - v_u), on only when g > 0, so turbo at
CFG 0 encodes the positive prompt alone. The template, the 12 hidden-state taps and the prefix
strip are diffusers' Krea2Pipeline's.
"""
import functools
import json
import math
import os
import re

from toolkit import latent_formats
from toolkit.models.arch import (DENOISER, SCHEDULER, TEXT_ENCODER, TOKENIZER, VAE, ArchSpec, Component, Extra,
                                 FileLayouts, Latents, Lora, Reader, SampleDefaults, Tiny, Variant, pick_linears)
from toolkit.models.archs.krea2 import layouts, tiny
from toolkit.models.base_model import BaseModel

DEFAULT_TAPS = (2, 5, 8, 11, 14, 17, 20, 23, 26, 29, 32, 35)
BASE_SEQ_LEN, MAX_SEQ_LEN = 256, 6400      # image tokens at 256^2 and 1280^2 (16 px per token)
TURBO_MU = 1.15
SCHEDULER_CONFIG = {"_class_name": "FlowMatchEulerDiscreteScheduler", "num_train_timesteps": 1000, "shift": 1.0,
                    "use_dynamic_shifting": True, "base_shift": 0.5, "max_shift": 1.15,
                    "base_image_seq_len": BASE_SEQ_LEN, "max_image_seq_len": MAX_SEQ_LEN,
                    "time_shift_type": "exponential"}


def _comfy(name: str) -> Reader:
    """A ComfyUI-format reader (toolkit/models/formats/comfy.py), imported when a file is read."""
    return Reader(f"toolkit.models.formats.comfy:{name}", "comfy_scaled_fp8")


def image_tokens(width: int, height: int, vae_scale: int = 8, patch: int = 2) -> int:
    return (height // (vae_scale * patch)) * (width // (vae_scale * patch))


def krea2_mu(width: int, height: int, variant: str, mu=None, y1: float = 0.5, y2: float = 1.15) -> float:
    """The timestep-shift mu: an explicit value wins; turbo pins 1.15; raw interpolates linearly in
    the image-token count between (256, y1) and (6400, y2)."""
    if mu is not None:
        return float(mu)
    if variant == "turbo":
        return TURBO_MU
    seq = image_tokens(width, height)
    slope = (y2 - y1) / (MAX_SEQ_LEN - BASE_SEQ_LEN)
    return y1 + slope * (seq - BASE_SEQ_LEN)


def shifted_timesteps(steps: int, mu: float) -> list[float]:
    """The sigma schedule: a uniform grid 1 -> 0 with steps+1 points, shifted by mu."""
    grid = [1 - i / steps for i in range(steps + 1)]
    return [0.0 if t <= 0 else math.exp(mu) / (math.exp(mu) + (1 / t - 1)) for t in grid]


class Krea2Model(BaseModel):
    def _folder(self) -> str | None:
        path = os.path.expanduser(self.model_config.name_or_path or "")
        return path if os.path.isdir(path) else None

    def build_pipeline(self, components):
        pipe = self.pipeline_class(**components, text_encoder_select_layers=self._taps(components),
                                   is_distilled=self.model_config.variant == "turbo")
        pipe.set_progress_bar_config(disable=True)
        return pipe

    def _taps(self, components) -> tuple:
        """The folder's own taps when it has them; else every third hidden state from 2, as many
        as the transformer fuses (the real 36-layer encoder gives DEFAULT_TAPS)."""
        folder = self._folder()
        if folder and os.path.isfile(os.path.join(folder, "model_index.json")):
            with open(os.path.join(folder, "model_index.json")) as f:
                taps = json.load(f).get("text_encoder_select_layers")
            if taps:
                return tuple(taps)
        n = components["transformer"].config.num_text_layers
        depth = components["text_encoder"].config.num_hidden_layers
        taps = tuple(2 + 3 * i for i in range(n))
        if taps[-1] > depth:
            raise ValueError(f"text_encoder: {depth} layers cannot give the transformer's {n} hidden-state taps")
        return taps

    def pipeline_kwargs(self, gen):
        kw = {"prompt": gen.prompt, "width": gen.width, "height": gen.height,
              "num_inference_steps": gen.num_inference_steps, "guidance_scale": gen.guidance_scale}
        if gen.guidance_scale > 0:          # at CFG 0 the negative prompt is never encoded
            kw["negative_prompt"] = gen.negative_prompt
        return kw

    def call_patches(self, gen, pipe) -> list:
        """The pipeline derives mu from the variant/scheduler config; the request's overrides win."""
        mu = krea2_mu(gen.width, gen.height, self.model_config.variant, gen.extras.get("mu"),
                      gen.extras.get("shift_y1", 0.5), gen.extras.get("shift_y2", 1.15))

        def force_mu(original):
            @functools.wraps(original)
            def set_timesteps(*args, **kwargs):
                kwargs["mu"] = mu
                return original(*args, **kwargs)
            return set_timesteps
        return [(pipe.scheduler, "set_timesteps", force_mu)]


ORIGINAL_LAYER = {"attn.to_q": "attn.wq", "attn.to_k": "attn.wk", "attn.to_v": "attn.wv", "attn.to_out.0": "attn.wo",
                  "attn.to_gate": "attn.gate", "ff.gate": "mlp.gate", "ff.up": "mlp.up", "ff.down": "mlp.down"}


def lora_modules(fmt, linears):
    """Every block's attention (with its gate) and MLP; ComfyUI files use the original krea-ai names."""
    def original(name):
        block, _, layer = name.removeprefix("transformer_blocks.").partition(".")
        return f"blocks.{block}.{ORIGINAL_LAYER[layer]}"
    return pick_linears(linears, r"^transformer_blocks\.\d+\.(attn\.(to_q|to_k|to_v|to_out\.0|to_gate)|ff\.(gate|up|down))$",
                        rename=original if fmt == "comfyui" else None)


def _tiny(b) -> dict:
    config = {k: v for k, v in SCHEDULER_CONFIG.items() if k != "_class_name"}
    from diffusers import FlowMatchEulerDiscreteScheduler
    return dict(tiny.build(b), scheduler=FlowMatchEulerDiscreteScheduler(**config))


SPEC = ArchSpec(
    name="krea2", modality="image", default_name_or_path="",      # no public repo: local files only
    pipeline="Krea2Pipeline", holder=Krea2Model,
    components=(
        Component("scheduler", "SchedulerMixin", SCHEDULER),
        Component("tokenizer", "PreTrainedTokenizerBase", TOKENIZER),
        Component("text_encoder", "transformers:PreTrainedModel", TEXT_ENCODER,
                  reader=_comfy("read_qwen3vl_text_encoder")),
        Component("vae", "AutoencoderKLQwenImage", VAE, reader=_comfy("read_qwen_image_vae")),
        Component("transformer", "Krea2Transformer2DModel", DENOISER, reader=_comfy("read_krea2_transformer")),
    ),
    defaults=SampleDefaults(1024, 1024, 8, 0.0), round_size=True,
    latents=Latents("packed", 16, patch=2, format=latent_formats.WAN21),     # the Qwen Image VAE
    decode_features=96,                       # the Qwen Image VAE's last decoder stage
    sample_extras={"mu": Extra("float"), "shift_y1": Extra("float", 0.5), "shift_y2": Extra("float", 1.15)},
    variants={"turbo": Variant({"num_inference_steps": 8, "guidance_scale": 0.0}, {"mu": TURBO_MU}),
              "raw": Variant({"num_inference_steps": 52, "guidance_scale": 3.5}, {"mu": None})},
    # which detected checkpoint formats each profile key accepts (toolkit/file_report.py), and how they are told
    checkpoint_formats={"diffusion_model": (layouts.KREA2_TRANSFORMER,), "transformer": (layouts.KREA2_TRANSFORMER,),
                        "text_encoder": (layouts.QWEN3VL_TEXT_ENCODER, layouts.QWEN3_TEXT_ENCODER),
                        "vae": (layouts.QWEN_IMAGE_VAE,)},
    file_layouts=FileLayouts("toolkit.models.archs.krea2.layouts:detect", "toolkit.models.archs.krea2.layouts:sizes",
                             layouts.LABELS),
    aliases=("krea-2",),
    tiny=Tiny(_tiny, tiny.SAMPLE, pipeline_kwargs={"text_encoder_select_layers": tiny.TAPS, "is_distilled": True}),
    description="Krea 2 (Qwen3-VL text encoder, Qwen Image VAE); turbo or raw",
    scheduler_config={"_class_name": "FlowMatchEulerDiscreteScheduler"},
    scheduler_file=SCHEDULER_CONFIG,          # ComfyUI files carry no scheduler: the recipe's
    samplers_excluded=("heun", "dpm++_2m"),   # the pipeline passes sigmas, which their set_timesteps do not take
    # diffusers' Krea2Pipeline has its own loader (Krea2LoraLoaderMixin): diffusers keys, or the original
    # names under `diffusion_model.` (ComfyUI) / `base_model.model.` with lora_A/B and no alpha; no kohya
    lora=Lora(formats=("peft", "comfyui"), modules="toolkit.models.archs.krea2:lora_modules", alpha=(),
              markers=(r"(^|\.)blocks\.\d+\.attn\.(wq|wk|wv|wo)\.", r"attn\.to_gate\.|(^|\.)(text_fusion|txtfusion)\.")),
)

"""PRX (Photoroom): a 1.3B MMDiT-like DiT whose text tokens are not updated by its blocks, over the
encoder of T5Gemma-2B-2B-UL2 (prompts cleaned DeepFloyd-style and padded to 256 tokens) and the
16-channel Flux VAE (2x2 patches); flow-matching Euler, CFG.

Variants: the Flux-VAE checkpoints of Photoroom's PRX collection, by training resolution and stage (base,
SFT on Alchemist, the 8-step distilled SFT). The DC-AE checkpoints are another latent space (32
channels, 32x) and so another arch; PRX Pixel (no VAE, Qwen3-VL) is `prx_pixel`.

The pipeline snaps width/height to the aspect-ratio bins of the model's resolution and resizes the image
back by default; the `resolution_binning` sample key turns that off (the tiny model's 64x64 has no bin).

Its text encoder folder holds the composite T5GemmaConfig (encoder and decoder) and model_index.json
names diffusers' PRX wrapper class; `T5GemmaTextEncoder` below reads that folder (the wrapper reads the
config from the repo root, which a `subfolder` load misses). ComfyUI has no PRX model: no single files."""
import json
import os

from toolkit import latent_formats
from toolkit.models.arch import (DENOISER, SCHEDULER, TEXT_ENCODER, TOKENIZER, VAE, ArchSpec, Component, Extra,
                                 Latents, SampleDefaults, Tiny, Variant)
from toolkit.models.archs.lumina2 import gemma_tokenizer
from toolkit.models.archs.sana import SanaModel
from toolkit.models.tiny import kit

PROMPT_TOKENS = 256          # the repos' tokenizer model_max_length: every prompt is padded to it
# model_index.json's text_encoder entry in the Photoroom repos: diffusers.pipelines.prx's T5GemmaEncoder
TEXT_ENCODER_ENTRY = ["prx", "T5GemmaEncoder"]


def _t5gemma_text_encoder():
    from transformers import T5GemmaConfig
    from transformers.models.t5gemma.modeling_t5gemma import T5GemmaEncoder

    class T5GemmaTextEncoder(T5GemmaEncoder):
        """T5Gemma's encoder from a folder whose config.json is the composite T5GemmaConfig: built
        from its `encoder` part (T5GemmaEncoder takes the module config)."""

        @classmethod
        def from_pretrained(cls, pretrained_model_name_or_path, *args, **kwargs):
            if "config" not in kwargs:
                keys = ("subfolder", "local_files_only", "cache_dir", "revision", "token")
                config = T5GemmaConfig.from_pretrained(pretrained_model_name_or_path,
                                                       **{k: kwargs[k] for k in keys if k in kwargs})
                kwargs["config"] = getattr(config, "encoder", config)
            return super().from_pretrained(pretrained_model_name_or_path, *args, **kwargs)

    T5GemmaTextEncoder.__module__ = __name__
    return T5GemmaTextEncoder


def __getattr__(name):
    """The text encoder class, made on first use (this file imports no library at import time)."""
    if name == "T5GemmaTextEncoder":
        globals()[name] = cls = _t5gemma_text_encoder()
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# -- the tiny model ----------------------------------------------------------------------------------
def tiny_t5gemma(b):
    """(tokenizer, text_encoder): T5Gemma's Gemma vocabulary (lumina2's tiny Gemma BPE) padded to 256
    tokens, and a 2-layer encoder."""
    from transformers.models.t5gemma.modeling_t5gemma import T5GemmaEncoder

    tokenizer = gemma_tokenizer()
    tokenizer.model_max_length = PROMPT_TOKENS
    module = dict(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=1, head_dim=16, query_pre_attn_scalar=16, max_position_embeddings=PROMPT_TOKENS,
        layer_types=["sliding_attention", "full_attention"], sliding_window=4096,
        pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id, bos_token_id=tokenizer.bos_token_id)
    with b.seeded("text_encoder", "t5gemma"):
        text_encoder = kit.jitter_constants(T5GemmaEncoder(_composite(module).encoder).eval())
    return tokenizer, text_encoder


def _composite(module: dict):
    """T5GemmaConfig over one module config (encoder and decoder alike, as the encoder-only repos save it):
    it also sets the encoder's dropout and is_decoder."""
    from transformers import T5GemmaConfig
    return T5GemmaConfig(encoder=dict(module), decoder=dict(module), is_encoder_decoder=False,
                         vocab_size=module["vocab_size"])


def write_t5gemma_folder(folder: str):
    """What the Photoroom repos ship and save_pretrained does not write: the text encoder's config as the
    composite T5GemmaConfig (its encoder the saved module config) and model_index.json naming diffusers'
    PRX wrapper class."""
    from transformers import T5GemmaModuleConfig

    path = os.path.join(folder, "text_encoder")
    composite = _composite(T5GemmaModuleConfig.from_pretrained(path).to_dict())
    composite.architectures = ["T5GemmaEncoder"]
    composite.save_pretrained(path)
    index = os.path.join(folder, "model_index.json")
    with open(index, encoding="utf-8") as f:
        data = json.load(f)
    data["text_encoder"] = TEXT_ENCODER_ENTRY
    with open(index, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2, sort_keys=True)
        f.write("\n")


def tiny_prx_transformer(b, in_channels: int, patch_size: int, context_in_dim: int, **over):
    from diffusers import PRXTransformer2DModel

    with b.seeded("transformer"):
        transformer = PRXTransformer2DModel(
            in_channels=in_channels, patch_size=patch_size, context_in_dim=context_in_dim, hidden_size=32,
            mlp_ratio=2.0, num_heads=2, depth=2, axes_dim=[8, 8], **over).eval()     # rope axes sum to the head dim
        return kit.jitter_constants(transformer)


def _tiny(b):
    tokenizer, text_encoder = tiny_t5gemma(b)
    with b.seeded("vae", "flux_vae"):               # FLUX.1-dev's VAE, as Flux and Z-Image build it
        vae = kit.flux_vae()
    transformer = tiny_prx_transformer(b, 16, 2, text_encoder.config.hidden_size)
    scheduler = kit.flow_match_scheduler(num_train_timesteps=1000, shift=3.0)
    return dict(scheduler=scheduler, tokenizer=tokenizer, text_encoder=text_encoder, vae=vae, transformer=transformer)


# the collection's Flux-VAE checkpoints; each card: 28 steps, CFG 5.0 (distilled: 8 steps, no CFG), at the
# resolution it was trained at (its model_index default_sample_size)
VARIANTS = {
    "512-sft": Variant(dict(width=512, height=512), name_or_path="Photoroom/prx-512-t2i-sft"),
    "512": Variant(dict(width=512, height=512), name_or_path="Photoroom/prx-512-t2i"),
    "512-sft-distilled": Variant(dict(width=512, height=512, num_inference_steps=8, guidance_scale=1.0),
                                 name_or_path="Photoroom/prx-512-t2i-sft-distilled"),
    "256": Variant(dict(width=256, height=256), name_or_path="Photoroom/prx-256-t2i"),
    "256-sft": Variant(dict(width=256, height=256), name_or_path="Photoroom/prx-256-t2i-sft"),
    "1024-beta": Variant(dict(width=1024, height=1024), name_or_path="Photoroom/prx-1024-t2i-beta"),
}

SPEC = ArchSpec(
    name="prx", modality="image", default_name_or_path=VARIANTS["512-sft"].name_or_path, pipeline="PRXPipeline",
    holder=SanaModel,
    components=(
        Component("scheduler", "SchedulerMixin", SCHEDULER),
        Component("tokenizer", "PreTrainedTokenizerBase", TOKENIZER),
        Component("text_encoder", "toolkit.models.archs.prx:T5GemmaTextEncoder", TEXT_ENCODER),
        Component("vae", "AutoencoderKL", VAE),
        Component("transformer", "PRXTransformer2DModel", DENOISER),
    ),
    defaults=SampleDefaults(512, 512, 28, 5.0),
    size_divisor=16,                                     # VAE 8x, 2x2 patches
    sample_extras={"resolution_binning": Extra("bool", True)},
    latents=Latents("BCHW", 16, format=latent_formats.FLUX),     # the Flux VAE's space, scaled and shifted
    variants=VARIANTS,
    tiny=Tiny(_tiny, {"width": 64, "height": 64, "num_inference_steps": 2, "guidance_scale": 5.0,
                      "resolution_binning": False}, finish="toolkit.models.archs.prx:write_t5gemma_folder"),
    description="PRX (Photoroom; T5Gemma text encoder, 16-ch Flux VAE)",
    scheduler_config={"_class_name": "FlowMatchEulerDiscreteScheduler"},
    # one image per pass: with CFG the pipeline's timestep has 2 rows (uncond, cond) whatever the batch, so a
    # batch of more than one fails in the transformer's modulation (diffusers 0.42.1)
    batch_arg=None,
)

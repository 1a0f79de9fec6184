"""Lumina Image 2.0: a unified Next-DiT over a Gemma2 2B text encoder (second-to-last hidden state,
behind the pipeline's system prompt) and the 16-channel Flux VAE; CFG with a norm rescale that is
truncated after the first part of the schedule (the card: `cfg_trunc_ratio=0.25`).

Exports the tiny Gemma tokenizer and Gemma2 encoder recipe that Sana shares (`tiny_gemma`).

Its files: the original Lumina-Image-2.0 layout (ComfyUI's `diffusion_models/lumina_2_model_bf16.safetensors`),
read with the configs below. Z-Image's files share its block names; Lumina 2's modulation
(`adaLN_modulation.1`) and the absence of pad tokens tell them apart."""
import re

from toolkit import latent_formats
from toolkit.models.arch import (DENOISER, SCHEDULER, TEXT_ENCODER, TOKENIZER, VAE, ArchSpec, Component, Extra,
                                 Latents, SampleDefaults, SingleFile, Tiny)
from toolkit.models.base_model import BaseModel
from toolkit.models.formats import llm_encoders, vaes
from toolkit.models.formats.dit_configs import from_known
from toolkit.models.formats.file_view import FileKindError
from toolkit.models.tiny import kit
from toolkit.models.tiny.tokenizers import PROMPTS

# Lumina2Pipeline's own system prompt and separator (pipeline __init__ / encode_prompt)
LUMINA_SYSTEM_PROMPT = ("You are an assistant designed to generate superior images with the superior degree of "
                        "image-text alignment based on textual prompts or user prompts.")
GEMMA_SPECIAL = ["<pad>", "<eos>", "<bos>", "<unk>", "<mask>"]     # ids 0..4 as in the real Gemma vocab
GEMMA_VOCAB = 1024


# Alpha-VLLM/Lumina-Image-2.0 scheduler/scheduler_config.json
SCHEDULER_FILE = dict(_class_name="FlowMatchEulerDiscreteScheduler", num_train_timesteps=1000, shift=6.0,
                      use_dynamic_shifting=False)
# Alpha-VLLM/Lumina-Image-2.0 transformer/config.json; and the tiny factory's
TRANSFORMER_KNOWN = {
    "lumina-image-2.0": dict(sample_size=128, patch_size=2, in_channels=16, out_channels=None, hidden_size=2304,
                             num_layers=26, num_refiner_layers=2, num_attention_heads=24, num_kv_heads=8,
                             multiple_of=256, ffn_dim_multiplier=None, norm_eps=1e-05, scaling_factor=1.0,
                             axes_dim_rope=[32, 32, 32], axes_lens=[300, 512, 512], cap_feat_dim=2304),
    "tiny": dict(sample_size=128, patch_size=2, in_channels=16, out_channels=None, hidden_size=32, num_layers=2,
                 num_refiner_layers=1, num_attention_heads=2, num_kv_heads=1, multiple_of=16, ffn_dim_multiplier=None,
                 norm_eps=1e-05, scaling_factor=1.0, axes_dim_rope=[4, 6, 6], axes_lens=[300, 512, 512], cap_feat_dim=32),
}


def transformer_signature(view) -> dict:
    if view.has("x_pad_token") or not view.has("layers.0.adaLN_modulation.1.weight"):
        raise FileKindError("pad tokens, or no layers.0.adaLN_modulation.1: not a Lumina 2 transformer")
    head = view.dim("layers.0.attention.q_norm.weight")
    return {"width": view.dim("x_embedder.weight"), "patch_in": view.dim("x_embedder.weight", 1),
            "patch_out": view.dim("final_layer.linear.weight"), "cap_feat_dim": view.dim("cap_embedder.1.weight", 1),
            "num_layers": view.count(r"layers\.(\d+)\."), "num_refiner_layers": view.count(r"noise_refiner\.(\d+)\."),
            "context_refiner_layers": view.count(r"context_refiner\.(\d+)\."), "head_dim": head,
            "kv": (view.dim("layers.0.attention.qkv.weight") - view.dim("x_embedder.weight")) // 2}


def transformer_facts(c: dict) -> dict:
    head = c["hidden_size"] // c["num_attention_heads"]
    patch = c["patch_size"] ** 2
    return {"width": c["hidden_size"], "patch_in": patch * c["in_channels"],
            "patch_out": patch * (c.get("out_channels") or c["in_channels"]), "cap_feat_dim": c["cap_feat_dim"],
            "num_layers": c["num_layers"], "num_refiner_layers": c["num_refiner_layers"],
            "context_refiner_layers": c["num_refiner_layers"], "head_dim": head, "kv": c["num_kv_heads"] * head}


def transformer_config(view):
    return from_known(transformer_signature(view), TRANSFORMER_KNOWN, transformer_facts, "the Lumina 2 transformer")


LUMINA2_QKV = (2304, 768, 768)          # the q, k, v rows diffusers' converter splits at


def convert_original(checkpoint: dict, **kwargs) -> dict:
    """diffusers' converter at any width: each fused qkv split by the file's width (formats/at_width.py)."""
    from diffusers.loaders.single_file_utils import convert_lumina2_to_diffusers as convert

    from toolkit.models.formats.at_width import split_fused, strip
    ckpt = strip(checkpoint)
    fused = {}
    for key in [k for k in ckpt if k.endswith(".attention.qkv.weight")]:
        q = ckpt[key].shape[1]                      # heads x head_dim = the width
        fused[key] = ((q, (ckpt[key].shape[0] - q) // 2, (ckpt[key].shape[0] - q) // 2), LUMINA2_QKV)
    return split_fused(lambda c: convert(c, **kwargs), ckpt, fused)


_B = r"^(layers|noise_refiner|context_refiner)\.(\d+)\."
RENAMES = (
    (r"^time_caption_embed\.caption_embedder", "cap_embedder"),
    (r"^time_caption_embed\.timestep_embedder\.linear_1", "t_embedder.mlp.0"),
    (r"^time_caption_embed\.timestep_embedder\.linear_2", "t_embedder.mlp.2"),
    (r"^norm_out\.linear_1", "final_layer.adaLN_modulation.1"), (r"^norm_out\.linear_2", "final_layer.linear"),
    (_B + r"attn\.to_out\.0", r"\1.\2.attention.out"), (_B + r"attn\.norm_q", r"\1.\2.attention.q_norm"),
    (_B + r"attn\.norm_k", r"\1.\2.attention.k_norm"), (_B + r"feed_forward\.linear_([123])", r"\1.\2.feed_forward.w\3"),
    (_B + r"norm1\.linear", r"\1.\2.adaLN_modulation.1"), (_B + r"norm1\.norm", r"\1.\2.attention_norm1"),
    (_B + r"norm1\.", r"\1.\2.attention_norm1."), (_B + r"norm2\.", r"\1.\2.attention_norm2."),
)
FUSED = ((_B, ("attn.to_q", "attn.to_k", "attn.to_v"), r"\1.\2.attention.qkv"),)


def to_original(state: dict) -> dict:
    """A diffusers Lumina2Transformer2DModel state dict in the original Lumina-Image-2.0 layout (fused qkv)."""
    from toolkit.models.formats.original_layout import to_original as remap
    return remap(state, RENAMES, FUSED)


TRANSFORMER_FILE = SingleFile(
    "toolkit.models.archs.lumina2:convert_original", "toolkit.models.archs.lumina2:to_original",
    anchors=("cap_embedder.1.weight", "layers.0.adaLN_modulation.1.weight"),
    config="toolkit.models.archs.lumina2:transformer_config", kind="lumina2_dit", label="Lumina 2 transformer")


class Lumina2Model(BaseModel):
    def pipeline_kwargs(self, gen):
        kw = super().pipeline_kwargs(gen)
        for name in ("cfg_trunc_ratio", "cfg_normalization"):
            if gen.extras.get(name) is not None:
                kw[name] = gen.extras[name]
        return kw


# -- the tiny Gemma recipe (Lumina 2 and Sana) -------------------------------------------------------
def _gemma_corpus() -> list:
    """Prompts, Lumina's system-prompt template and Sana's complex human instruction."""
    import inspect

    from diffusers import SanaPipeline

    chi = inspect.signature(SanaPipeline.__call__).parameters["complex_human_instruction"].default
    texts = list(PROMPTS)
    texts += [f"{LUMINA_SYSTEM_PROMPT} <Prompt Start> {p}" for p in PROMPTS[:8]]
    texts += ["\n".join(chi) + p for p in PROMPTS[8:12]]
    return texts


def gemma_tokenizer():
    """GemmaTokenizer: BPE with byte fallback (the 256 <0xNN> tokens in the vocab), spaces as '▁',
    no pre-tokenization, <bos> prepended; merges learned (deterministically) on a small corpus."""
    from transformers import GemmaTokenizer

    from toolkit.models.tiny.tokenizers import learn_bpe

    texts = [t.replace(" ", "\u2581") for t in _gemma_corpus()]
    counts: dict = {}
    for text in texts:
        for word in re.findall("\u2581*[^\u2581]+|\u2581+", text):   # learn within '▁word' units
            counts[tuple(word)] = counts.get(tuple(word), 0) + 1
    vocab = {tok: i for i, tok in enumerate(GEMMA_SPECIAL)}
    for i in range(256):
        vocab[f"<0x{i:02X}>"] = len(vocab)
    for ch in sorted({"\u2581", *"".join(texts)}):
        vocab.setdefault(ch, len(vocab))
    merges = learn_bpe(counts, GEMMA_VOCAB - len(vocab))
    for left, right in merges:
        vocab.setdefault(left + right, len(vocab))
    pad, eos, bos, unk, mask = GEMMA_SPECIAL
    return GemmaTokenizer(vocab=vocab, merges=merges, pad_token=pad, eos_token=eos, bos_token=bos, unk_token=unk,
                          mask_token=mask, add_bos_token=True, add_eos_token=False)


def gemma2_encoder(tokenizer):
    """A tiny Gemma2Model (2 layers: Lumina 2 reads hidden_states[-2], Sana the last)."""
    from transformers import Gemma2Config, Gemma2Model

    config = Gemma2Config(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=1, head_dim=16, query_pre_attn_scalar=16, max_position_embeddings=8192,
        sliding_window=4096, pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
        bos_token_id=tokenizer.bos_token_id)
    return Gemma2Model(config).eval()


def tiny_gemma(b):
    """(tokenizer, text_encoder): the Gemma pair Lumina 2 and Sana build alike (same bytes)."""
    tokenizer = gemma_tokenizer()
    with b.seeded("text_encoder", "gemma2"):
        return tokenizer, kit.jitter_constants(gemma2_encoder(tokenizer))


def _tiny(b):
    from diffusers import Lumina2Transformer2DModel

    tokenizer, text_encoder = tiny_gemma(b)
    with b.seeded("vae", "flux_vae"):
        vae = kit.flux_vae()
    with b.seeded("transformer"):
        transformer = Lumina2Transformer2DModel(
            sample_size=128, patch_size=2, in_channels=16, hidden_size=32, num_layers=2, num_refiner_layers=1,
            num_attention_heads=2, num_kv_heads=1, multiple_of=16, norm_eps=1e-5, scaling_factor=1.0,
            axes_dim_rope=(4, 6, 6), axes_lens=(300, 512, 512),         # rope axes sum to the head dim (16)
            cap_feat_dim=text_encoder.config.hidden_size).eval()
    scheduler = kit.flow_match_scheduler(num_train_timesteps=1000, shift=6.0, use_dynamic_shifting=False)
    return dict(scheduler=scheduler, vae=vae, text_encoder=text_encoder, tokenizer=tokenizer, transformer=transformer)


SPEC = ArchSpec(
    # RoPE tables of 512 positions per image axis, each a 2x2 patch of the 8x VAE latent: 8192 px
    max_side=min(TRANSFORMER_KNOWN["lumina-image-2.0"]["axes_lens"][1:]) * 2 * 8,
    name="lumina2", modality="image", default_name_or_path="Alpha-VLLM/Lumina-Image-2.0", pipeline="Lumina2Pipeline",
    attention_backends=False,      # its attention processors call F.scaled_dot_product_attention themselves
    holder=Lumina2Model,
    components=(
        Component("scheduler", "SchedulerMixin", SCHEDULER),
        Component("tokenizer", "PreTrainedTokenizerBase", TOKENIZER, vocab="gemma2"),
        Component("text_encoder", "Gemma2Model", TEXT_ENCODER, single_file=llm_encoders.GEMMA2_2B),
        Component("vae", "AutoencoderKL", VAE, single_file=vaes.FLUX_AE),
        Component("transformer", "Lumina2Transformer2DModel", DENOISER, single_file=TRANSFORMER_FILE),
    ),
    # the model card: 1024x1024, 50 steps, CFG 4.0 with cfg_trunc_ratio 0.25 and cfg_normalization on
    defaults=SampleDefaults(1024, 1024, 50, 4.0),
    sample_extras={"cfg_trunc_ratio": Extra("float", 0.25), "cfg_normalization": Extra("bool", True)},
    latents=Latents("BCHW", 16, format=latent_formats.FLUX), scheduler_file=SCHEDULER_FILE,
    # cfg_trunc_ratio 1.0: both of the tiny run's 2 steps take the CFG branch
    tiny=Tiny(_tiny, {"width": 64, "height": 64, "num_inference_steps": 2, "guidance_scale": 4.0,
                      "cfg_trunc_ratio": 1.0}),
    description="Lumina Image 2.0 (Gemma2 text encoder, 16-ch Flux VAE)",
    scheduler_config={"_class_name": "FlowMatchEulerDiscreteScheduler"},
    samplers_excluded=("heun", "dpm++_2m"),   # the pipeline passes sigmas, which their set_timesteps do not take
)

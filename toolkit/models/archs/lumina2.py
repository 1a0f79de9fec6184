"""Lumina Image 2.0: a unified Next-DiT over a Gemma2 2B text encoder (second-to-last hidden state,
behind the pipeline's system prompt) and the 16-channel Flux VAE; CFG with a norm rescale that is
truncated after the first part of the schedule (the card: `cfg_trunc_ratio=0.25`).

Exports the tiny Gemma tokenizer and Gemma2 encoder recipe that Sana shares (`tiny_gemma`)."""
import re

from toolkit import latent_formats
from toolkit.models.arch import (DENOISER, SCHEDULER, TEXT_ENCODER, TOKENIZER, VAE, ArchSpec, Component, Extra,
                                 Latents, SampleDefaults, Tiny)
from toolkit.models.base_model import BaseModel
from toolkit.models.tiny import kit
from toolkit.models.tiny.tokenizers import PROMPTS

# Lumina2Pipeline's own system prompt and separator (pipeline __init__ / encode_prompt)
LUMINA_SYSTEM_PROMPT = ("You are an assistant designed to generate superior images with the superior degree of "
                        "image-text alignment based on textual prompts or user prompts.")
GEMMA_SPECIAL = ["<pad>", "<eos>", "<bos>", "<unk>", "<mask>"]     # ids 0..4 as in the real Gemma vocab
GEMMA_VOCAB = 1024


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
    name="lumina2", modality="image", default_name_or_path="Alpha-VLLM/Lumina-Image-2.0", pipeline="Lumina2Pipeline",
    holder=Lumina2Model,
    components=(
        Component("scheduler", "SchedulerMixin", SCHEDULER),
        Component("tokenizer", "PreTrainedTokenizerBase", TOKENIZER),
        Component("text_encoder", "Gemma2Model", TEXT_ENCODER),
        Component("vae", "AutoencoderKL", VAE),
        Component("transformer", "Lumina2Transformer2DModel", DENOISER),
    ),
    # the model card: 1024x1024, 50 steps, CFG 4.0 with cfg_trunc_ratio 0.25 and cfg_normalization on
    defaults=SampleDefaults(1024, 1024, 50, 4.0),
    sample_extras={"cfg_trunc_ratio": Extra("float", 0.25), "cfg_normalization": Extra("bool", True)},
    latents=Latents("BCHW", 16, format=latent_formats.FLUX),
    # cfg_trunc_ratio 1.0: both of the tiny run's 2 steps take the CFG branch
    tiny=Tiny(_tiny, {"width": 64, "height": 64, "num_inference_steps": 2, "guidance_scale": 4.0,
                      "cfg_trunc_ratio": 1.0}),
    description="Lumina Image 2.0 (Gemma2 text encoder, 16-ch Flux VAE)",
    scheduler_config={"_class_name": "FlowMatchEulerDiscreteScheduler"},
    samplers_excluded=("heun", "dpm++_2m"),   # the pipeline passes sigmas, which their set_timesteps do not take
)

"""Tiny random-weight diffusers pipelines, built offline, for tests.

Every model written here uses the *real* diffusers / transformers classes of its
architecture, with tiny widths and depths, and is stored in the real on-disk
layout: a pipeline folder written by ``pipeline.save_pretrained`` (safetensors,
``model_index.json``, tokenizers saved with ``save_pretrained``).  Nothing is
downloaded: tokenizers are trained in code on a small built-in corpus.

Latent channel counts and compression ratios are kept real (8x spatial KL VAEs
with 4 or 16 channels, Wan 2.1's 16-channel 8x/4x causal VAE, ACE-Step's
Oobleck VAE at 48 kHz with 1920x downsampling = 25 latents/s), so layout logic
in the code under test sees realistic shapes: a 64x64 image gives 8x8 latents.

Public API::

    ARCHS                                   # registry names
    make_tiny(arch, folder, seed=0, *, overwrite=False) -> Path
    make_shared_pair(arch, folder_a, folder_b, seed_a=0, seed_b=1) -> (Path, Path)
    cached_tiny(arch, seed=0, root=None) -> Path
    sample_settings(arch) -> dict

CLI::

    python -m testing.tiny_models --arch zimage --out DIR [--seed N]
    python -m testing.tiny_models --all --out DIR          # DIR/<arch> for every arch
    python -m testing.tiny_models --pair zimage --out DIR  # DIR/a and DIR/b

Determinism: torch is re-seeded right before each component is built, from
``(seed, component name)``, inside ``torch.random.fork_rng`` so the caller's RNG
state is untouched.  Text encoders and VAEs draw from the *shared* seed,
denoisers (and, for ACE-Step, the DiT-side condition encoder and audio
tokenizer/detokenizer) from the model's own seed.  Tokenizer training is
deterministic.  The same ``(arch, seed)`` therefore always gives byte-identical
safetensors files, and ``make_shared_pair`` gives two models whose text
encoders, tokenizers and VAE are identical bytes while the denoisers differ.

Heavy imports (torch, diffusers, transformers, tokenizers) happen lazily, so
importing this module (``ARCHS``, ``sample_settings``) is cheap.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pathlib
import shutil
import sys
import tempfile
import threading
import uuid
import zlib
from typing import Any, Callable, Iterator, Sequence

__all__ = [
    "ARCHS",
    "DENOISER_COMPONENTS",
    "SHARED_COMPONENTS",
    "MARKER_NAME",
    "make_tiny",
    "make_shared_pair",
    "make_tiny_lora",
    "cached_tiny",
    "default_cache_root",
    "sample_settings",
    "main",
]

ARCHS: tuple[str, ...] = ("zimage", "flux", "sd1", "wan21", "ace_step", "krea2")

# Written last, inside the temp folder, before the folder is renamed into place.
MARKER_NAME = ".tiny_complete"

# Bump when the recipe (dims, tokenizers, corpus, seeding) changes: folders
# written by an older recipe are then rebuilt instead of reused.
RECIPE_VERSION = 1

# Builds seed torch's global RNG (module constructors draw from it), so builds
# in one process are serialised; separate processes are independent.
_BUILD_LOCK = threading.RLock()

# Components built from the model's own seed (they differ between the two
# models of make_shared_pair).  Everything else with weights is built from the
# shared seed.  For ACE-Step the condition encoder and the audio
# tokenizer/detokenizer ship inside the DiT checkpoint, so they follow the DiT.
DENOISER_COMPONENTS: dict[str, tuple[str, ...]] = {
    "zimage": ("transformer",),
    "flux": ("transformer",),
    "sd1": ("unet",),
    "wan21": ("transformer",),
    "ace_step": ("transformer", "condition_encoder", "audio_tokenizer", "audio_token_detokenizer"),
    "krea2": ("transformer",),
}

# Components that are byte-identical between the two models of make_shared_pair.
SHARED_COMPONENTS: dict[str, tuple[str, ...]] = {
    "zimage": ("text_encoder", "tokenizer", "vae"),
    "flux": ("text_encoder", "tokenizer", "text_encoder_2", "tokenizer_2", "vae"),
    "sd1": ("text_encoder", "tokenizer", "vae"),
    "wan21": ("text_encoder", "tokenizer", "vae"),
    "ace_step": ("text_encoder", "tokenizer", "vae"),
    "krea2": (),     # krea2's builder takes one seed: its pair shares nothing (swap tests use ComfyUI files)
}

_SAMPLE_SETTINGS: dict[str, dict[str, Any]] = {
    # CFG on (guidance_scale > 0): exercises the batched positive/negative path
    # with prompts of different token lengths.
    "zimage": {"width": 64, "height": 64, "num_inference_steps": 2, "guidance_scale": 4.0},
    # Flux.1-dev style distilled guidance (guidance embedding), no true CFG.
    "flux": {"width": 64, "height": 64, "num_inference_steps": 2, "guidance_scale": 3.5},
    "sd1": {"width": 64, "height": 64, "num_inference_steps": 2, "guidance_scale": 7.5},
    # 9 frames -> (9 - 1) / 4 + 1 = 3 latent frames.
    "wan21": {"width": 64, "height": 64, "num_frames": 9, "num_inference_steps": 2, "guidance_scale": 5.0},
    # Audio: no width/height (AceStepPipeline.__call__ does not accept them).
    # 1 s at 25 latents/s = 25 latent frames; guidance > 1 runs APG with the
    # condition encoder's learned null embedding (the tiny DiT is not turbo).
    "ace_step": {"audio_duration": 1.0, "num_inference_steps": 2, "guidance_scale": 7.0},
    # CFG on: exercises the Krea guidance equation and the negative-prompt encoding.
    "krea2": {"width": 64, "height": 64, "num_inference_steps": 2, "guidance_scale": 2.0},
}


def sample_settings(arch: str) -> dict:
    """Small call settings that run fast with the tiny model of ``arch``.

    The dict can be splatted into the pipeline call together with a prompt and
    a generator: ``pipe(prompt, generator=g, **sample_settings(arch))``.
    """
    _check_arch(arch)
    return dict(_SAMPLE_SETTINGS[arch])


# --------------------------------------------------------------------------- #
#                               seeding helpers                               #
# --------------------------------------------------------------------------- #


def _check_arch(arch: str) -> None:
    if arch not in ARCHS:
        raise ValueError(f"unknown tiny arch {arch!r}; expected one of {', '.join(ARCHS)}")


def _component_seed(seed: int, component: str) -> int:
    """A stable per-component seed (independent of Python's hash randomisation)."""
    return (int(seed) * 1_000_003 + zlib.crc32(component.encode("utf-8"))) % (2**63 - 1)


@contextlib.contextmanager
def _seeded(seed: int, component: str) -> Iterator[None]:
    import torch

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(_component_seed(seed, component))
        yield


# --------------------------------------------------------------------------- #
#                         tokenizers, trained in code                         #
# --------------------------------------------------------------------------- #

_PROMPTS = [
    "a photo of a cat sitting on a red mat",
    "a watercolor painting of a lighthouse at sunset",
    "portrait of an old man with a grey beard, studio lighting",
    "a cozy cabin in a snowy forest, warm light in the windows",
    "a bowl of ramen with an egg and green onions, top view",
    "cinematic shot of a city street at night in the rain",
    "a small robot watering plants in a greenhouse",
    "an astronaut riding a horse on the moon, highly detailed",
    "a mountain lake with clear blue water and pine trees",
    "close up of a hummingbird drinking from a flower",
    "a vintage car parked in front of a diner",
    "a dog running on the beach, golden hour",
    "the quick brown fox jumps over the lazy dog",
    "an oil painting of a ship in a storm",
    "a futuristic city with flying cars and neon signs",
    "a child reading a book under a tree",
    "a slow camera pan over green hills with sheep",
    "a woman walking through a market, handheld camera",
    "waves crashing against the rocks, slow motion video",
    "A beautiful piano piece with soft melodies",
    "Upbeat electronic dance music with heavy bass and synth leads",
    "calm acoustic guitar and soft female vocals",
    "epic orchestral soundtrack with drums and strings",
    "lofi hip hop beat, relaxing, vinyl crackle",
    "jazz trio with upright bass, brush drums and piano",
    "best quality, high resolution, sharp focus, 4k, 8k",
    "blurry, low quality, worst quality, jpeg artifacts, watermark, text",
    "Hello world! This is a tiny tokenizer, trained in code.",
    "one two three four five six seven eight nine ten 0 1 2 3 4 5 6 7 8 9",
    "[verse]\nSoft notes in the morning light\n[chorus]\nMusic fills the air tonight",
    "[intro] [verse] [chorus] [bridge] [outro] la la la oh oh yeah",
]

_LYRICS = [
    "",
    "[verse]\nSoft notes in the morning light\n[chorus]\nMusic fills the air tonight",
    "[verse]\nHello world\n[chorus]\nSing it loud",
]

_QWEN_SPECIAL = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
]
# Added, but not "special" (they survive decode(skip_special_tokens=True)), as in Qwen3.
_QWEN_ADDED = ["<think>", "</think>"]

# A small Qwen3-style chat template (user/assistant turns, optional empty
# thinking block when enable_thinking is false).
_QWEN_CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}"
    "{{- '<|im_start|>assistant\\n' -}}"
    "{%- if enable_thinking is defined and enable_thinking is false -%}"
    "{{- '<think>\\n\\n</think>\\n\\n' -}}"
    "{%- endif -%}"
    "{%- endif -%}"
)


def _ace_step_texts() -> list[str]:
    """ACE-Step's real prompt / lyric templates, filled with a few examples."""
    try:
        from diffusers.pipelines.ace_step.pipeline_ace_step import (
            DEFAULT_DIT_INSTRUCTION,
            SFT_GEN_PROMPT,
            TASK_INSTRUCTIONS,
        )
    except Exception:  # pragma: no cover - only if the module moves
        return []
    texts = []
    instructions = [DEFAULT_DIT_INSTRUCTION, *TASK_INSTRUCTIONS.values()]
    for i, prompt in enumerate(_PROMPTS[19:25]):
        metas = (
            f"- bpm: {'N/A' if i % 2 else 90 + 10 * i}\n- timesignature: {'N/A' if i % 3 else '4'}\n"
            f"- keyscale: {'N/A' if i % 2 else 'C major'}\n- duration: {[1, 2, 10, 30, 60][i % 5]} seconds\n"
        )
        texts.append(SFT_GEN_PROMPT.format(instructions[i % len(instructions)], prompt, metas))
    for lang, lyrics in zip(["en", "zh", "ja"], _LYRICS):
        texts.append(f"# Languages\n{lang}\n\n# Lyric\n{lyrics}<|endoftext|>")
    return texts


def _qwen_corpus() -> list[str]:
    chats = []
    for prompt in _PROMPTS:
        chats.append(f"<|im_start|>user\n{prompt}<|im_end|>\n<|im_start|>assistant\n")
        chats.append(f"<|im_start|>user\n{prompt}<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n")
    return list(_PROMPTS) + chats + _ace_step_texts()


def _byte_alphabet() -> list[str]:
    """The 256 printable stand-ins byte-level BPE uses for raw bytes, in byte order."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return [table[b] for b in range(256)]


def _learn_bpe(word_counts: dict[tuple[str, ...], int], num_merges: int) -> list[tuple[str, str]]:
    """Plain BPE learning, deterministic by construction.

    Each round merges the most frequent adjacent pair; ties go to the
    lexicographically smallest pair.  (The ``tokenizers`` trainer numbers
    suffixed symbols such as 'e</w>' in hash order, so its tie-breaks, and
    hence its output, vary between processes.)
    """
    words = dict(word_counts)
    merges: list[tuple[str, str]] = []
    for _ in range(num_merges):
        pairs: dict[tuple[str, str], int] = {}
        for word, count in words.items():
            for pair in zip(word, word[1:]):
                pairs[pair] = pairs.get(pair, 0) + count
        if not pairs:
            break
        (left, right), _count = min(pairs.items(), key=lambda kv: (-kv[1], kv[0]))
        merges.append((left, right))
        merged: dict[tuple[str, ...], int] = {}
        for word, count in words.items():
            out: list[str] = []
            i = 0
            while i < len(word):
                if i + 1 < len(word) and word[i] == left and word[i + 1] == right:
                    out.append(left + right)
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            key = tuple(out)
            merged[key] = merged.get(key, 0) + count
        words = merged
    return merges


def _byte_level_bpe(
    backend: Any,
    corpus: Sequence[str],
    *,
    vocab_size: int,
    special_tokens: Sequence[str],
    end_of_word_suffix: str = "",
) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """Train a byte-level BPE with ``backend``'s own normalizer and pre-tokenizer.

    Vocab layout as in the real Qwen / CLIP files: the 256 byte symbols (and,
    with a word-end suffix, the 256 suffixed ones), then one token per merge,
    then the special tokens.
    """
    import re

    splitter = re.compile("|".join(re.escape(t) for t in sorted(special_tokens, key=len, reverse=True)))
    counts: dict[tuple[str, ...], int] = {}
    for text in corpus:
        for chunk in splitter.split(text):
            if not chunk:
                continue
            if backend.normalizer is not None:
                chunk = backend.normalizer.normalize_str(chunk)
            for piece, _offsets in backend.pre_tokenizer.pre_tokenize_str(chunk):
                symbols = list(piece)
                if not symbols:
                    continue
                symbols[-1] += end_of_word_suffix
                counts[tuple(symbols)] = counts.get(tuple(symbols), 0) + 1

    alphabet = _byte_alphabet()
    base = alphabet + ([c + end_of_word_suffix for c in alphabet] if end_of_word_suffix else [])
    vocab: dict[str, int] = {tok: i for i, tok in enumerate(base)}
    room = vocab_size - len(vocab) - len(special_tokens)
    merges = _learn_bpe(counts, max(room, 0))
    for left, right in merges:
        vocab.setdefault(left + right, len(vocab))
    for tok in special_tokens:
        vocab.setdefault(tok, len(vocab))
    return vocab, merges


def _qwen2_tokenizer():
    """Qwen2Tokenizer (used by Qwen3 text encoders): byte-level BPE, 800 tokens."""
    from transformers import AddedToken, Qwen2Tokenizer

    vocab, merges = _byte_level_bpe(
        Qwen2Tokenizer().backend_tokenizer,
        _qwen_corpus(),
        vocab_size=800,
        special_tokens=_QWEN_SPECIAL + _QWEN_ADDED,
    )
    tok = Qwen2Tokenizer(
        vocab=vocab,
        merges=merges,
        unk_token=None,
        bos_token=None,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        model_max_length=131072,
    )
    tok.add_tokens([AddedToken(t, special=True, normalized=False) for t in _QWEN_SPECIAL], special_tokens=True)
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in _QWEN_ADDED])
    tok.chat_template = _QWEN_CHAT_TEMPLATE
    return tok


def _clip_tokenizer():
    """CLIPTokenizer: byte-level BPE with '</w>' word ends; every byte and byte+'</w>' in the vocab."""
    from transformers import CLIPTokenizer

    bos, eos = "<|startoftext|>", "<|endoftext|>"
    vocab, merges = _byte_level_bpe(
        CLIPTokenizer().backend_tokenizer,
        _PROMPTS,
        vocab_size=800,
        special_tokens=[bos, eos],
        end_of_word_suffix="</w>",
    )
    return CLIPTokenizer(
        vocab=vocab,
        merges=merges,
        bos_token=bos,
        eos_token=eos,
        pad_token=eos,
        unk_token=eos,
        model_max_length=77,
    )


_T5_WORDS = sorted(
    {w.strip(".,!?[]").lower() for p in _PROMPTS for w in p.split() if w.strip(".,!?[]")}
    | {"the", "a", "an", "of", "and", "in", "on", "with", "at", "to", "is", "video", "image"}
)


def _t5_tokenizer(model_max_length: int = 512):
    """T5Tokenizer with a hand-written Unigram vocab: pad=0, eos=1, unk=2, then pieces."""
    from transformers import T5Tokenizer

    pieces: list[tuple[str, float]] = [("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0), ("\u2581", -2.0)]
    seen = {p for p, _ in pieces}

    def add(piece: str, score: float) -> None:
        if piece not in seen:
            seen.add(piece)
            pieces.append((piece, score))

    for i, word in enumerate(_T5_WORDS):
        add("\u2581" + word, -4.0 - 0.001 * i)
    for ch in "abcdefghijklmnopqrstuvwxyz":
        add("\u2581" + ch, -7.0)
    chars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,!?;:'\"-()[]/&%+*=#@_"
    for ch in chars:
        add(ch, -8.0)
    return T5Tokenizer(vocab=pieces, extra_ids=0, model_max_length=model_max_length)


# --------------------------------------------------------------------------- #
#                              component builders                             #
# --------------------------------------------------------------------------- #


def _qwen3_encoder(tokenizer, *, layers: int = 2):
    from transformers import Qwen3Config, Qwen3Model

    config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=layers,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        max_position_embeddings=32768,
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
        tie_word_embeddings=False,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    return Qwen3Model(config).eval()


def _clip_text_encoder(tokenizer):
    from transformers import CLIPTextConfig, CLIPTextModel

    config = CLIPTextConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        projection_dim=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        max_position_embeddings=77,
        hidden_act="quick_gelu",
        # The pooled output is read at the eos position: ids must match the tokenizer.
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    return CLIPTextModel(config).eval()


def _t5_encoder(tokenizer):
    from transformers import T5Config, T5EncoderModel
    return _t5_family_encoder(tokenizer, T5Config, T5EncoderModel)


def _umt5_encoder(tokenizer):
    from transformers import UMT5Config, UMT5EncoderModel
    return _t5_family_encoder(tokenizer, UMT5Config, UMT5EncoderModel)


def _t5_family_encoder(tokenizer, config_cls, model_cls):
    """A tiny T5-style encoder (T5 for Flux, UMT5 for Wan): same dims, the tokenizer's ids."""
    config = config_cls(
        vocab_size=len(tokenizer),
        d_model=32,
        d_kv=8,
        d_ff=64,
        num_layers=2,
        num_heads=4,
        relative_attention_num_buckets=8,
        relative_attention_max_distance=32,
        feed_forward_proj="gated-gelu",
        dropout_rate=0.0,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        decoder_start_token_id=tokenizer.pad_token_id,
    )
    return model_cls(config).eval()


def _kl_vae(latent_channels: int, *, scaling_factor: float, shift_factor: float | None, quant_conv: bool):
    """AutoencoderKL with 4 blocks (8x spatial compression)."""
    from diffusers import AutoencoderKL

    return AutoencoderKL(
        in_channels=3,
        out_channels=3,
        down_block_types=("DownEncoderBlock2D",) * 4,
        up_block_types=("UpDecoderBlock2D",) * 4,
        block_out_channels=(8, 8, 16, 16),
        layers_per_block=1,
        act_fn="silu",
        latent_channels=latent_channels,
        norm_num_groups=4,
        sample_size=64,
        scaling_factor=scaling_factor,
        shift_factor=shift_factor,
        use_quant_conv=quant_conv,
        use_post_quant_conv=quant_conv,
    ).eval()


def _flow_match_scheduler(**kwargs):
    from diffusers import FlowMatchEulerDiscreteScheduler

    return FlowMatchEulerDiscreteScheduler(**kwargs)


def _build_zimage(seed: int, shared_seed: int) -> tuple[type, dict]:
    from diffusers import ZImagePipeline, ZImageTransformer2DModel

    tokenizer = _qwen2_tokenizer()
    with _seeded(shared_seed, "text_encoder"):
        # Z-Image reads hidden_states[-2]: give it at least 2 layers.
        text_encoder = _qwen3_encoder(tokenizer, layers=2)
    with _seeded(shared_seed, "vae"):
        vae = _kl_vae(16, scaling_factor=0.3611, shift_factor=0.1159, quant_conv=False)
    with _seeded(seed, "transformer"):
        transformer = ZImageTransformer2DModel(
            all_patch_size=(2,),
            all_f_patch_size=(1,),
            in_channels=16,
            dim=32,
            n_layers=2,
            n_refiner_layers=1,
            n_heads=2,
            n_kv_heads=2,
            norm_eps=1e-5,
            qk_norm=True,
            cap_feat_dim=text_encoder.config.hidden_size,
            rope_theta=256.0,
            t_scale=1000.0,
            axes_dims=[4, 6, 6],  # sums to the head dim (32 / 2)
            axes_lens=[1024, 512, 512],
        ).eval()
    scheduler = _flow_match_scheduler(num_train_timesteps=1000, shift=3.0, use_dynamic_shifting=False)
    return ZImagePipeline, dict(
        scheduler=scheduler, vae=vae, text_encoder=text_encoder, tokenizer=tokenizer, transformer=transformer
    )


def _build_flux(seed: int, shared_seed: int) -> tuple[type, dict]:
    from diffusers import FluxPipeline, FluxTransformer2DModel

    tokenizer = _clip_tokenizer()
    tokenizer_2 = _t5_tokenizer(512)
    with _seeded(shared_seed, "text_encoder"):
        text_encoder = _clip_text_encoder(tokenizer)
    with _seeded(shared_seed, "text_encoder_2"):
        text_encoder_2 = _t5_encoder(tokenizer_2)
    with _seeded(shared_seed, "vae"):
        vae = _kl_vae(16, scaling_factor=0.3611, shift_factor=0.1159, quant_conv=False)
    with _seeded(seed, "transformer"):
        transformer = FluxTransformer2DModel(
            patch_size=1,
            in_channels=64,  # 16 latent channels packed 2x2
            num_layers=2,
            num_single_layers=2,
            attention_head_dim=16,
            num_attention_heads=2,
            joint_attention_dim=text_encoder_2.config.d_model,
            pooled_projection_dim=text_encoder.config.hidden_size,
            guidance_embeds=True,
            axes_dims_rope=(4, 6, 6),
        ).eval()
    scheduler = _flow_match_scheduler(
        num_train_timesteps=1000,
        shift=3.0,
        use_dynamic_shifting=True,
        base_shift=0.5,
        max_shift=1.15,
        base_image_seq_len=256,
        max_image_seq_len=4096,
    )
    return FluxPipeline, dict(
        scheduler=scheduler,
        vae=vae,
        text_encoder=text_encoder,
        tokenizer=tokenizer,
        text_encoder_2=text_encoder_2,
        tokenizer_2=tokenizer_2,
        transformer=transformer,
    )


def _build_sd1(seed: int, shared_seed: int) -> tuple[type, dict]:
    from diffusers import PNDMScheduler, StableDiffusionPipeline, UNet2DConditionModel

    tokenizer = _clip_tokenizer()
    with _seeded(shared_seed, "text_encoder"):
        text_encoder = _clip_text_encoder(tokenizer)
    with _seeded(shared_seed, "vae"):
        vae = _kl_vae(4, scaling_factor=0.18215, shift_factor=None, quant_conv=True)
    with _seeded(seed, "unet"):
        unet = UNet2DConditionModel(
            sample_size=8,  # default call size: 8 * 8 = 64 px
            in_channels=4,
            out_channels=4,
            down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
            up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
            block_out_channels=(16, 32),
            layers_per_block=1,
            norm_num_groups=8,
            cross_attention_dim=text_encoder.config.hidden_size,
            attention_head_dim=2,
        ).eval()
    # The scheduler SD 1.5 ships (PNDM, PLMS-only).
    scheduler = PNDMScheduler(
        num_train_timesteps=1000,
        beta_start=0.00085,
        beta_end=0.012,
        beta_schedule="scaled_linear",
        skip_prk_steps=True,
        set_alpha_to_one=False,
        steps_offset=1,
    )
    return StableDiffusionPipeline, dict(
        vae=vae,
        text_encoder=text_encoder,
        tokenizer=tokenizer,
        unet=unet,
        scheduler=scheduler,
        safety_checker=None,
        feature_extractor=None,
        image_encoder=None,
        requires_safety_checker=False,
    )


def _build_wan21(seed: int, shared_seed: int) -> tuple[type, dict]:
    from diffusers import AutoencoderKLWan, UniPCMultistepScheduler, WanPipeline, WanTransformer3DModel

    tokenizer = _t5_tokenizer(512)
    with _seeded(shared_seed, "text_encoder"):
        text_encoder = _umt5_encoder(tokenizer)
    with _seeded(shared_seed, "vae"):
        # z_dim 16, 8x spatial (3 downsamples), 4x temporal; the real latents_mean/std defaults.
        vae = AutoencoderKLWan(
            base_dim=4,
            z_dim=16,
            dim_mult=[1, 2, 4, 4],
            num_res_blocks=1,
            attn_scales=[],
            temperal_downsample=[False, True, True],
        ).eval()
    with _seeded(seed, "transformer"):
        transformer = WanTransformer3DModel(
            patch_size=(1, 2, 2),
            num_attention_heads=2,
            attention_head_dim=16,
            in_channels=16,
            out_channels=16,
            text_dim=text_encoder.config.d_model,
            freq_dim=256,
            ffn_dim=64,
            num_layers=2,
            cross_attn_norm=True,
            qk_norm="rms_norm_across_heads",
            eps=1e-6,
            rope_max_seq_len=1024,
        ).eval()
    # What the Wan 2.1 diffusers repos ship: UniPC with flow sigmas (480p shift 3.0).
    scheduler = UniPCMultistepScheduler(
        num_train_timesteps=1000,
        prediction_type="flow_prediction",
        use_flow_sigmas=True,
        flow_shift=3.0,
        solver_order=2,
        solver_type="bh2",
        predict_x0=True,
        lower_order_final=True,
        final_sigmas_type="zero",
        timestep_spacing="linspace",
    )
    return WanPipeline, dict(
        tokenizer=tokenizer, text_encoder=text_encoder, vae=vae, scheduler=scheduler, transformer=transformer
    )


def _build_ace_step(seed: int, shared_seed: int) -> tuple[type, dict]:
    from diffusers import AceStepPipeline, AceStepTransformer1DModel, AutoencoderOobleck
    from diffusers.pipelines.ace_step.modeling_ace_step import (
        AceStepAudioTokenDetokenizer,
        AceStepAudioTokenizer,
        AceStepConditionEncoder,
    )

    acoustic_dim = 64  # Oobleck latent channels
    width, heads, kv_heads, head_dim, ffn = 32, 2, 1, 16, 64

    tokenizer = _qwen2_tokenizer()
    with _seeded(shared_seed, "text_encoder"):
        text_encoder = _qwen3_encoder(tokenizer, layers=2)
    with _seeded(shared_seed, "vae"):
        # 48 kHz stereo, 2*4*4*6*10 = 1920x -> 25 latents/s of 64 channels.
        # The encoder is deliberately narrow (its posterior has encoder_hidden_size/2
        # channels, not 64): text2music only decodes; a 64-channel-correct encoder
        # would need width 128 at 48 kHz (~11 MB, seconds per encode).
        vae = AutoencoderOobleck(
            encoder_hidden_size=8,
            downsampling_ratios=[2, 4, 4, 6, 10],
            channel_multiples=[1, 2, 2, 4, 4],
            decoder_channels=8,
            decoder_input_channels=acoustic_dim,
            audio_channels=2,
            sampling_rate=48000,
        ).eval()
    common = dict(
        hidden_size=width,
        intermediate_size=ffn,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        head_dim=head_dim,
    )
    with _seeded(seed, "transformer"):
        transformer = AceStepTransformer1DModel(
            num_hidden_layers=2,
            in_channels=3 * acoustic_dim,  # noisy latent + src latents + chunk mask
            audio_acoustic_hidden_dim=acoustic_dim,
            patch_size=2,
            encoder_hidden_size=width,
            is_turbo=False,
            **common,
        ).eval()
    with _seeded(seed, "condition_encoder"):
        condition_encoder = AceStepConditionEncoder(
            text_hidden_dim=text_encoder.config.hidden_size,
            timbre_hidden_dim=acoustic_dim,
            num_lyric_encoder_hidden_layers=1,
            num_timbre_encoder_hidden_layers=1,
            **common,
        ).eval()
    with _seeded(seed, "audio_tokenizer"):
        audio_tokenizer = AceStepAudioTokenizer(
            audio_acoustic_hidden_dim=acoustic_dim,
            pool_window_size=5,  # 25 Hz latents -> 5 Hz codes
            fsq_dim=width,
            num_attention_pooler_hidden_layers=1,
            **common,
        ).eval()
    with _seeded(seed, "audio_token_detokenizer"):
        audio_token_detokenizer = AceStepAudioTokenDetokenizer(
            audio_acoustic_hidden_dim=acoustic_dim,
            pool_window_size=5,
            num_attention_pooler_hidden_layers=1,
            **common,
        ).eval()
    # ACE-Step computes its own shifted sigmas in [0, 1] and passes them in.
    scheduler = _flow_match_scheduler(num_train_timesteps=1, shift=1.0)
    return AceStepPipeline, dict(
        vae=vae,
        text_encoder=text_encoder,
        tokenizer=tokenizer,
        transformer=transformer,
        condition_encoder=condition_encoder,
        scheduler=scheduler,
        audio_tokenizer=audio_tokenizer,
        audio_token_detokenizer=audio_token_detokenizer,
    )


def _build_krea2(seed: int, shared_seed: int) -> tuple[type, dict]:
    """Krea 2's builder lives in testing/tiny_krea2.py (it also writes the ComfyUI-format files)."""
    from testing.tiny_krea2 import _build
    pipe, _tokenizer = _build(seed)
    return (lambda: pipe), {}


_BUILDERS: dict[str, Callable[[int, int], tuple[type, dict]]] = {
    "krea2": _build_krea2,
    "zimage": _build_zimage,
    "flux": _build_flux,
    "sd1": _build_sd1,
    "wan21": _build_wan21,
    "ace_step": _build_ace_step,
}


# --------------------------------------------------------------------------- #
#                          writing folders atomically                         #
# --------------------------------------------------------------------------- #


def _library_versions() -> dict[str, str]:
    import diffusers
    import transformers

    return {"diffusers": diffusers.__version__, "transformers": transformers.__version__}


def _read_marker(folder: pathlib.Path) -> dict | None:
    """The marker's content if ``folder`` holds a complete tiny model, else None."""
    if not (folder / "model_index.json").is_file():
        return None
    try:
        info = json.loads((folder / MARKER_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return info if isinstance(info, dict) else {}


def _wanted_marker(arch: str, seed: int, shared_seed: int) -> dict:
    return {
        "arch": arch,
        "seed": int(seed),
        "shared_seed": int(shared_seed),
        "recipe": RECIPE_VERSION,
        **_library_versions(),
    }


def _is_current(folder: pathlib.Path, wanted: dict) -> bool:
    info = _read_marker(folder)
    return info is not None and all(info.get(k) == v for k, v in wanted.items())


def _remove(path: pathlib.Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def _is_empty_dir(path: pathlib.Path) -> bool:
    return path.is_dir() and not path.is_symlink() and not any(path.iterdir())


def _install(tmp: pathlib.Path, folder: pathlib.Path, keep_existing: Callable[[pathlib.Path], bool]) -> bool:
    """Rename ``tmp`` to ``folder``.  Returns False when an existing folder is kept instead.

    rename(2) replaces an empty directory but fails on a non-empty one, so a
    folder that appeared meanwhile (another process) is never half-overwritten:
    ``keep_existing(folder)`` decides whether to keep it (ours is discarded) or
    to move it aside and retry.
    """
    for _ in range(20):
        try:
            os.rename(tmp, folder)
            return True
        except OSError:
            if not os.path.lexists(folder):
                continue  # it vanished meanwhile: retry
            if keep_existing(folder):
                return False
            aside = folder.with_name(f".{folder.name}.old-{uuid.uuid4().hex[:12]}")
            try:
                os.rename(folder, aside)
            except FileNotFoundError:
                continue
            _remove(aside)
    raise RuntimeError(f"could not move {tmp} into place at {folder}")


def _write_model(
    arch: str,
    folder: str | os.PathLike,
    *,
    seed: int,
    shared_seed: int,
    overwrite: bool,
) -> pathlib.Path:
    _check_arch(arch)
    folder = pathlib.Path(folder).expanduser().absolute()
    wanted = _wanted_marker(arch, seed, shared_seed)

    if not overwrite and os.path.lexists(folder):
        if _is_current(folder, wanted):
            return folder
        # Anything that is neither empty nor one of our own tiny models (marker
        # present) is somebody else's data: refuse rather than delete it.
        if _read_marker(folder) is None and not _is_empty_dir(folder):
            raise FileExistsError(
                f"{folder} exists and is not a tiny model written by testing.tiny_models; "
                "pass overwrite=True to replace it"
            )

    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = pathlib.Path(tempfile.mkdtemp(prefix=f".{folder.name}.tmp-", dir=folder.parent))
    try:
        os.chmod(tmp, 0o755)
        with _BUILD_LOCK:
            pipeline_cls, components = _BUILDERS[arch](seed, shared_seed)
            pipe = pipeline_cls(**components)
            pipe.save_pretrained(tmp, safe_serialization=True)
            del pipe, components
        # Some writers create files 0600 (temp-file-then-rename); make the folder
        # readable like any model folder (e.g. a cache shared between users).
        for path in tmp.rglob("*"):
            os.chmod(path, 0o755 if path.is_dir() else 0o644)
        # Last file written: its presence means the folder is complete.
        (tmp / MARKER_NAME).write_text(json.dumps(wanted, indent=2, sort_keys=True) + "\n", encoding="utf-8")

        def keep_existing(existing: pathlib.Path) -> bool:
            if overwrite:
                return False  # replace whatever is there
            if _is_current(existing, wanted):
                return True  # someone else finished the same model meanwhile: keep theirs
            if _read_marker(existing) is None and not _is_empty_dir(existing):
                raise FileExistsError(f"{existing} appeared meanwhile and is not a tiny model; not replacing it")
            return False

        _install(tmp, folder, keep_existing)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return folder


def make_tiny(arch: str, folder: str | os.PathLike, seed: int = 0, *, overwrite: bool = False) -> pathlib.Path:
    """Write a tiny random-weight pipeline of ``arch`` into ``folder``; return the folder.

    Deterministic: the same ``(arch, seed)`` gives byte-identical safetensors.
    If ``folder`` already holds the complete model (``model_index.json`` plus the
    ``.tiny_complete`` marker, written by this recipe for this arch and seed) and
    ``overwrite`` is false, it is returned at once.  A folder holding a
    *different* tiny model (other arch/seed/recipe/library version) is replaced.
    The model is built in a temporary sibling folder and renamed into place, so a
    crash never leaves a half-written folder that looks complete.
    """
    return _write_model(arch, folder, seed=seed, shared_seed=seed, overwrite=overwrite)


def make_shared_pair(
    arch: str,
    folder_a: str | os.PathLike,
    folder_b: str | os.PathLike,
    seed_a: int = 0,
    seed_b: int = 1,
) -> tuple[pathlib.Path, pathlib.Path]:
    """Two tiny models sharing text encoder(s), tokenizer(s) and VAE bytes; denoisers differ.

    Model ``a`` is exactly ``make_tiny(arch, folder_a, seed_a)``.  Model ``b``
    builds its text encoder(s) and VAE from ``seed_a`` and its denoiser (see
    ``DENOISER_COMPONENTS``) from ``seed_b``.
    """
    if int(seed_a) == int(seed_b):
        raise ValueError("make_shared_pair needs two different seeds")
    a = _write_model(arch, folder_a, seed=seed_a, shared_seed=seed_a, overwrite=False)
    b = _write_model(arch, folder_b, seed=seed_b, shared_seed=seed_a, overwrite=False)
    _link_shared(arch, a, b)
    return a, b


def _link_shared(arch: str, a: pathlib.Path, b: pathlib.Path) -> None:
    """Make b's shared component files hard links of a's (same files, as when two model folders
    point at one text encoder), falling back to symlinks across filesystems."""
    for comp in SHARED_COMPONENTS[arch]:
        src_dir, dst_dir = a / comp, b / comp
        if not src_dir.is_dir() or not dst_dir.is_dir():
            continue
        for src in sorted(src_dir.iterdir()):
            dst = dst_dir / src.name
            if not src.is_file() or not dst.is_file() or os.path.samefile(src, dst):
                continue
            if src.read_bytes() != dst.read_bytes():
                raise RuntimeError(f"shared component file differs between the pair: {comp}/{src.name}")
            tmp = dst.with_name(dst.name + ".link")
            try:
                os.link(src, tmp)
            except OSError:
                os.symlink(os.path.abspath(src), tmp)
            os.replace(tmp, dst)


def default_cache_root() -> pathlib.Path:
    root = os.environ.get("AITK_TINY_CACHE") or os.path.join("~", ".cache", "aitk", "tiny_models")
    return pathlib.Path(root).expanduser()


def cached_tiny(arch: str, seed: int = 0, root: str | os.PathLike | None = None) -> pathlib.Path:
    """``make_tiny`` into ``<root>/<arch>-seed<seed>`` (built once, then reused).

    ``root`` defaults to ``$AITK_TINY_CACHE`` or ``~/.cache/aitk/tiny_models``.
    Safe under concurrent callers: each builds in its own temp folder and the
    first rename wins; later ones discard their copy.  A cached folder written
    by another recipe or library version is rebuilt.
    """
    _check_arch(arch)
    base = pathlib.Path(root).expanduser() if root is not None else default_cache_root()
    return make_tiny(arch, base / f"{arch}-seed{int(seed)}", seed=seed)


# --------------------------------------------------------------------------- #
#                                     CLI                                     #
# --------------------------------------------------------------------------- #


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m testing.tiny_models",
        description="Write tiny random-weight diffusers pipelines (offline) for tests.",
    )
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--arch", choices=ARCHS, help="write one model into --out")
    which.add_argument("--all", action="store_true", help="write every arch into --out/<arch>")
    which.add_argument("--pair", choices=ARCHS, metavar="ARCH", help="write a shared pair into --out/a and --out/b")
    parser.add_argument("--out", required=True, help="output folder")
    parser.add_argument("--seed", type=int, default=0, help="seed (for --pair: seed of a; b uses seed+1)")
    parser.add_argument("--overwrite", action="store_true", help="rebuild even if a complete model is there")
    args = parser.parse_args(argv)

    out = pathlib.Path(args.out)
    if args.arch:
        written = [make_tiny(args.arch, out, args.seed, overwrite=args.overwrite)]
    elif args.all:
        written = [make_tiny(arch, out / arch, args.seed, overwrite=args.overwrite) for arch in ARCHS]
    else:
        if args.overwrite:
            for sub in ("a", "b"):
                if _read_marker(out / sub) is not None:
                    _remove(out / sub)
        written = list(make_shared_pair(args.pair, out / "a", out / "b", args.seed, args.seed + 1))
    for path in written:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())


def make_tiny_lora(arch: str, model_folder: str | os.PathLike, out_file: str | os.PathLike, seed: int = 0,
                   rank: int = 4) -> pathlib.Path:
    """A random LoRA for the denoiser of a tiny model, saved with the pipeline's own
    `save_lora_weights` (diffusers' LoRA file format). Its weights are large enough to change
    the output visibly."""
    import torch
    from diffusers import DiffusionPipeline
    from peft import LoraConfig
    from peft.utils import get_peft_model_state_dict

    pipe = DiffusionPipeline.from_pretrained(str(model_folder), local_files_only=True)
    role = "unet" if hasattr(pipe, "unet") and pipe.unet is not None else "transformer"
    denoiser = getattr(pipe, role)
    targets = sorted({n.rsplit(".", 1)[-1] for n, m in denoiser.named_modules()
                      if isinstance(m, torch.nn.Linear) and n.rsplit(".", 1)[-1] in ("to_q", "to_k", "to_v")})
    with _seeded(seed, "lora"):
        denoiser.add_adapter(LoraConfig(r=rank, lora_alpha=rank, target_modules=targets, init_lora_weights=False))
    layers = get_peft_model_state_dict(denoiser)
    out = pathlib.Path(out_file)
    out.parent.mkdir(parents=True, exist_ok=True)
    type(pipe).save_lora_weights(str(out.parent), weight_name=out.name, **{f"{role}_lora_layers": layers})
    return out

"""Tokenizers for tiny models, trained in code: no files, no hub.

transformers' tokenizer classes accept a vocab and merges directly; each builder here learns them
from a small built-in corpus with the class's own normalizer and pre-tokenizer, so a tokenizer
saved with save_pretrained reloads identically through AutoTokenizer. Learning is deterministic
(ties broken by the pair itself), so the same call always gives the same files.

Pipelines that drop a fixed number of template tokens (Qwen-Image and Krea 2 drop a 34-token
prefix, HunyuanVideo crops 95) need the template to tokenize to exactly that many tokens: an arch
passes its templates as `extra_corpus` and checks the count itself.
"""
from __future__ import annotations

import re
from typing import Any, Sequence

PROMPTS = [
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

LYRICS = [
    "",
    "[verse]\nSoft notes in the morning light\n[chorus]\nMusic fills the air tonight",
    "[verse]\nHello world\n[chorus]\nSing it loud",
]

QWEN_SPECIAL = [
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
QWEN_ADDED = ["<think>", "</think>"]

# A small Qwen3-style chat template (user/assistant turns, optional empty
# thinking block when enable_thinking is false).
QWEN_CHAT_TEMPLATE = (
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


# A Qwen-VL-style chat template for processors (Qwen2.5-VL, Qwen3-VL): a message's content is a string or
# a list of parts, text or image (an image part is its vision placeholder), as the real processors take them.
QWEN_VL_CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' -}}"
    "{%- if message['content'] is string -%}{{- message['content'] -}}"
    "{%- else -%}{%- for part in message['content'] -%}"
    "{%- if part['type'] == 'text' -%}{{- part['text'] -}}"
    "{%- else -%}{{- '<|vision_start|><|image_pad|><|vision_end|>' -}}{%- endif -%}"
    "{%- endfor -%}{%- endif -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)


def qwen_corpus(extra: Sequence[str] = ()) -> list[str]:
    chats = []
    for prompt in PROMPTS:
        chats.append(f"<|im_start|>user\n{prompt}<|im_end|>\n<|im_start|>assistant\n")
        chats.append(f"<|im_start|>user\n{prompt}<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n")
    return list(PROMPTS) + chats + list(extra)


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


def learn_bpe(word_counts: dict[tuple[str, ...], int], num_merges: int) -> list[tuple[str, str]]:
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


def byte_level_bpe(
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
    merges = learn_bpe(counts, max(room, 0))
    for left, right in merges:
        vocab.setdefault(left + right, len(vocab))
    for tok in special_tokens:
        vocab.setdefault(tok, len(vocab))
    return vocab, merges


def qwen2_tokenizer(extra_corpus: Sequence[str] = (), *, prefixes: dict | None = None, with_vocab: bool = False,
                    unmerged: Sequence[str] = ()):
    """Qwen2Tokenizer (Qwen2.5/Qwen3 text encoders): byte-level BPE, 800 tokens. `prefixes` maps a
    template's fixed part to the token count the pipeline drops (checked: a mismatch raises);
    `unmerged`: tokens ("Ġword") whose last merge is left out, so those words split as the real
    vocabulary splits them where the tiny one would learn them whole; `with_vocab` returns
    (tokenizer, vocab, merges) for writers of the raw files."""
    from transformers import AddedToken, Qwen2Tokenizer

    vocab, merges = byte_level_bpe(Qwen2Tokenizer().backend_tokenizer, qwen_corpus(extra_corpus), vocab_size=800,
                                   special_tokens=QWEN_SPECIAL + QWEN_ADDED)
    if unmerged:
        merges = [m for m in merges if "".join(m) not in set(unmerged)]
    tok = Qwen2Tokenizer(vocab=vocab, merges=merges, unk_token=None, bos_token=None, eos_token="<|im_end|>",
                         pad_token="<|endoftext|>", model_max_length=131072)
    tok.add_tokens([AddedToken(t, special=True, normalized=False) for t in QWEN_SPECIAL], special_tokens=True)
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in QWEN_ADDED])
    tok.chat_template = QWEN_CHAT_TEMPLATE
    for text, want in (prefixes or {}).items():
        got = len(tok(text).input_ids)
        if got != want:
            raise RuntimeError(f"the tiny tokenizer gives {got} tokens for a template part the pipeline counts as "
                               f"{want}: {text[:40]!r}...")
    return (tok, vocab, merges) if with_vocab else tok


def clip_tokenizer(pad: str = "<|endoftext|>"):
    """CLIPTokenizer: byte-level BPE with '</w>' word ends; every byte and byte+'</w>' in the vocab.
    `pad`: OpenCLIP's encoders (SDXL's second, SD 2.x's) pad with "!", OpenAI's CLIP-L with the end."""
    from transformers import CLIPTokenizer

    bos, eos = "<|startoftext|>", "<|endoftext|>"
    vocab, merges = byte_level_bpe(
        CLIPTokenizer().backend_tokenizer,
        PROMPTS,
        vocab_size=800,
        special_tokens=[bos, eos],
        end_of_word_suffix="</w>",
    )
    return CLIPTokenizer(
        vocab=vocab,
        merges=merges,
        bos_token=bos,
        eos_token=eos,
        pad_token=pad,
        unk_token=eos,
        model_max_length=77,
    )


T5_WORDS = sorted(
    {w.strip(".,!?[]").lower() for p in PROMPTS for w in p.split() if w.strip(".,!?[]")}
    | {"the", "a", "an", "of", "and", "in", "on", "with", "at", "to", "is", "video", "image"}
)


def t5_tokenizer(model_max_length: int = 512):
    """T5Tokenizer with a hand-written Unigram vocab: pad=0, eos=1, unk=2, then pieces."""
    from transformers import T5Tokenizer

    pieces: list[tuple[str, float]] = [("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0), ("\u2581", -2.0)]
    seen = {p for p, _ in pieces}

    def add(piece: str, score: float) -> None:
        if piece not in seen:
            seen.add(piece)
            pieces.append((piece, score))

    for i, word in enumerate(T5_WORDS):
        add("\u2581" + word, -4.0 - 0.001 * i)
    for ch in "abcdefghijklmnopqrstuvwxyz":
        add("\u2581" + ch, -7.0)
    chars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,!?;:'\"-()[]/&%+*=#@_"
    for ch in chars:
        add(ch, -8.0)
    return T5Tokenizer(vocab=pieces, extra_ids=0, model_max_length=model_max_length)




# Llama 3's pre-tokenizer split (tokenizer.json of the real checkpoints) and the special tokens the tiny one keeps
LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                r"|\s*[\r\n]+|\s+(?!\S)|\s+")
LLAMA3_SPECIAL = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>",
                  "<pad>"]


def _llama3_backend():
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)])
    return tok


def llama3_tokenizer(extra_corpus: Sequence[str] = (), *, eos_token: str = "<|end_of_text|>", pad_token: str = "<pad>"):
    """A Llama 3 style byte-level BPE (800 tokens, <|begin_of_text|> prepended) in PreTrainedTokenizerFast,
    padding on the right (HunyuanVideo's LLaVA-Llama-3, HiDream's Llama 3.1 Instruct: their eos and pad)."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, processors
    from transformers import PreTrainedTokenizerFast

    vocab, merges = byte_level_bpe(_llama3_backend(), list(PROMPTS) + list(extra_corpus), vocab_size=800,
                                   special_tokens=LLAMA3_SPECIAL)
    backend = Tokenizer(models.BPE(vocab=vocab, merges=merges, ignore_merges=True))
    backend.pre_tokenizer = _llama3_backend().pre_tokenizer
    backend.decoder = decoders.ByteLevel()
    backend.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in LLAMA3_SPECIAL])
    bos = "<|begin_of_text|>"
    backend.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A", pair=f"{bos} $A {bos} $B", special_tokens=[(bos, vocab[bos])])
    return PreTrainedTokenizerFast(tokenizer_object=backend, bos_token=bos, eos_token=eos_token, pad_token=pad_token,
                                   padding_side="right", model_max_length=131072)

"""Tokenizers offline, for models read from the files people have (which carry no tokenizer).

    find_tokenizer(vocab, role=, near=, files=(), vocab_size=None) -> a tokenizer folder

`vocab` is the vocabulary a row's tokenizer component names (`Component.vocab`: "clip_l", ...). Where
one is looked for, in order (nothing is ever downloaded):
  (a) a tokenizer folder the request or profile names (`model.components.<role>`: the caller's);
  (b) a ComfyUI install's tokenizer folders (`comfy/sd1_tokenizer`, `comfy/text_encoders/*_tokenizer`):
      `$AITK_COMFYUI_PATH` (the engine sets it from `engine.comfyui_path`), else the ComfyUI checkout a
      model file lies in (`<ComfyUI>/models/checkpoints/x.safetensors` -> `<ComfyUI>/comfy/...`);
  (c) the local hub cache: the repos that ship this vocabulary;
  (d) a pinned package that ships it: open_clip_torch's `bpe_simple_vocab_16e6.txt.gz` is OpenAI's CLIP
      BPE, from which every CLIP tokenizer these archs use is built exactly (written once to the cache);
  (e) the vocabulary a model file embeds: ComfyUI's umt5_xxl files carry their SentencePiece model as a
      `spiece_model` uint8 tensor (`files`: the text encoder files of the request, and `near` itself).
A ComfyUI folder that holds the vocabulary but not the tokenizer a pipeline expects (ComfyUI reads
Qwen3 with its `qwen25_tokenizer`) is adapted in a cached copy (`Vocabulary.adapt`). With
`vocab_size` (the text encoder's embedding rows), a tokenizer whose ids would not fit is passed over,
and said so. A missing one is a ConfigError naming the role and every place looked in.
"""
import gzip
import hashlib
import json
import os
from dataclasses import dataclass

from toolkit.errors import ConfigError

CACHE_ENV, COMFY_ENV = "AITK_TOKENIZER_CACHE", "AITK_COMFYUI_PATH"
CLIP_MERGES = 48894            # the BPE merges CLIP's 49,408-entry vocabulary uses (after the 512 byte tokens)


@dataclass(frozen=True)
class Vocabulary:
    name: str
    comfy: tuple               # ComfyUI's folders holding it, relative to the ComfyUI checkout
    hub: tuple                 # (repo, subfolder) in the hub cache
    build: str = ""            # "module:function(folder)" writing it from a pinned package
    embedded: str = ""         # the tensor a model file carries it in ("spiece_model")
    from_embedded: str = ""    # "module:function(data: bytes, folder)" writing the tokenizer from it
    adapt: str = ""            # "module:function(source, folder)": a ComfyUI folder made the tokenizer
    # the pad token, where ComfyUI's folder pads otherwise: it keeps one CLIP folder (sd1_tokenizer,
    # padding with the end token) and pads OpenCLIP's encoders with "!" in code; a copy with this pad
    # is written to the cache
    comfy_pad: str = ""


VOCABULARIES = {
    "clip_l": Vocabulary("clip_l", ("comfy/sd1_tokenizer",),
                         (("openai/clip-vit-large-patch14", ""), ("stable-diffusion-v1-5/stable-diffusion-v1-5",
                                                                   "tokenizer")),
                         "toolkit.tokenizers:write_clip_l"),
    # SDXL's and SD3's second CLIP pads with "!" (OpenCLIP's 0 id), not the end token
    "clip_g": Vocabulary("clip_g", ("comfy/sd1_tokenizer",),
                         (("stabilityai/stable-diffusion-xl-base-1.0", "tokenizer_2"),),
                         "toolkit.tokenizers:write_clip_g", comfy_pad="!"),
    # SD 2.x's (OpenCLIP-H): the same vocabulary, padded with "!" too
    "clip_h": Vocabulary("clip_h", ("comfy/sd1_tokenizer",),
                         (("stabilityai/stable-diffusion-2-1", "tokenizer"),
                          ("stabilityai/stable-diffusion-2-1-base", "tokenizer")),
                         "toolkit.tokenizers:write_clip_h", comfy_pad="!"),
    # T5's 32k SentencePiece (T5 v1.1 and t5-base share it): Flux, Chroma, SD3, LTX-Video, Stable Audio
    "t5_xxl": Vocabulary("t5_xxl", ("comfy/text_encoders/t5_tokenizer",),
                         (("google/t5-v1_1-xxl", ""), ("black-forest-labs/FLUX.1-dev", "tokenizer_2"),
                          ("black-forest-labs/FLUX.1-schnell", "tokenizer_2"),
                          ("stabilityai/stable-diffusion-3.5-large", "tokenizer_3"),
                          ("stabilityai/stable-diffusion-3-medium-diffusers", "tokenizer_3"),
                          ("Lightricks/LTX-Video", "tokenizer"), ("lodestones/Chroma", "tokenizer"),
                          ("stabilityai/stable-audio-open-1.0", "tokenizer"))),
    # UMT5's 256k SentencePiece: ComfyUI has no folder for it, its umt5_xxl files embed it
    "umt5_xxl": Vocabulary("umt5_xxl", (),
                           (("google/umt5-xxl", ""), ("Wan-AI/Wan2.1-T2V-14B-Diffusers", "tokenizer"),
                            ("Wan-AI/Wan2.1-T2V-1.3B-Diffusers", "tokenizer"),
                            ("Wan-AI/Wan2.2-TI2V-5B-Diffusers", "tokenizer"),
                            ("Wan-AI/Wan2.2-T2V-A14B-Diffusers", "tokenizer")),
                           embedded="spiece_model", from_embedded="toolkit.tokenizers:write_t5_from_spiece"),
    "qwen2_5": Vocabulary("qwen2_5", ("comfy/text_encoders/qwen25_tokenizer",),
                          (("Qwen/Qwen-Image", "tokenizer"), ("Qwen/Qwen-Image-Edit", "tokenizer"),
                           ("Qwen/Qwen-Image-Edit-2509", "tokenizer"), ("Qwen/Qwen2.5-VL-7B-Instruct", ""))),
    # Qwen3's BPE is Qwen2.5's plus four added tokens (<tool_response>, </tool_response>, <think>, </think>)
    # and its chat template; ComfyUI reads Qwen3 with its qwen25_tokenizer folder
    "qwen3": Vocabulary("qwen3", ("comfy/text_encoders/qwen25_tokenizer",),
                        (("Tongyi-MAI/Z-Image-Turbo", "tokenizer"), ("black-forest-labs/FLUX.2-klein-4B", "tokenizer"),
                         ("black-forest-labs/FLUX.2-klein-9B", "tokenizer"), ("Qwen/Qwen3-4B", ""),
                         ("Qwen/Qwen3-8B", ""), ("Qwen/Qwen3-Embedding-0.6B", "")),
                        adapt="toolkit.tokenizers:adapt_qwen3"),
    "gemma2": Vocabulary("gemma2", (), (("Alpha-VLLM/Lumina-Image-2.0", "tokenizer"), ("google/gemma-2-2b", ""),
                                        ("Efficient-Large-Model/Sana_1600M_1024px_diffusers", "tokenizer"))),
    "gemma3": Vocabulary("gemma3", (), (("google/gemma-3-12b-it", ""), ("Lightricks/LTX-2", "tokenizer"))),
    "mistral3": Vocabulary("mistral3", (), (("black-forest-labs/FLUX.2-dev", "tokenizer"),
                                            ("mistralai/Mistral-Small-3.1-24B-Instruct-2503", ""))),
    # ERNIE-Image's Mistral3 text encoder and its prompt enhancer: their repos' own (Comfy-Org's files carry none)
    "ernie_mistral3": Vocabulary("ernie_mistral3", (), (("baidu/ERNIE-Image", "tokenizer"),
                                                  ("baidu/ERNIE-Image-Turbo", "tokenizer"))),
    "ernie_ministral3_pe": Vocabulary("ernie_ministral3_pe", (), (("baidu/ERNIE-Image", "pe_tokenizer"),
                                                        ("baidu/ERNIE-Image-Turbo", "pe_tokenizer"))),
    # ByT5's bytes (HunyuanImage 2.1's and HunyuanVideo 1.5's Glyph-ByT5): no data to find, written from code
    "byt5": Vocabulary("byt5", ("comfy/text_encoders/byt5_tokenizer",),
                       (("hunyuanvideo-community/HunyuanImage-2.1-Diffusers", "tokenizer_2"), ("google/byt5-small", "")),
                       "toolkit.tokenizers:write_byt5"),
    # HunyuanVideo's LLaVA-Llama-3 (Llama 3's 128k BPE and LLaVA's added tokens)
    "llama3": Vocabulary("llama3", ("comfy/text_encoders/llama_tokenizer",),
                         (("hunyuanvideo-community/HunyuanVideo", "tokenizer"),
                          ("xtuner/llava-llama-3-8b-v1_1-transformers", ""))),
    # Pile-T5's (Llama's SentencePiece BPE): AuraFlow's text encoder
    "pile_t5": Vocabulary("pile_t5", (), (("fal/AuraFlow-v0.3", "tokenizer"), ("fal/AuraFlow", "tokenizer"),
                                          ("EleutherAI/pile-t5-xl", ""))),
    # Llama 3.1 Instruct's own (HiDream-I1's fourth text encoder; its repos leave it to meta-llama's)
    "llama3_1": Vocabulary("llama3_1", (), (("meta-llama/Llama-3.1-8B-Instruct", ""),
                                            ("meta-llama/Meta-Llama-3.1-8B-Instruct", ""))),
}


def cache_root() -> str:
    return os.environ.get(CACHE_ENV) or os.path.join(os.path.expanduser("~"), ".cache", "aitk", "tokenizers")


def comfyui_roots(near) -> list:
    """ComfyUI checkouts: $AITK_COMFYUI_PATH, and the ones `near` (a model file, or several paths)
    lies in."""
    roots = []
    if os.environ.get(COMFY_ENV):
        roots.append(os.path.expanduser(os.environ[COMFY_ENV]))
    for path in ([near] if isinstance(near, str) or near is None else list(near)):
        if not path:
            continue
        parts = os.path.abspath(os.path.expanduser(path)).split(os.sep)
        if "models" in parts:
            root = os.sep.join(parts[:len(parts) - 1 - parts[::-1].index("models")]) or os.sep
            if root not in roots:
                roots.append(root)
    return roots


def _is_tokenizer(folder: str) -> bool:
    return os.path.isdir(folder) and any(os.path.isfile(os.path.join(folder, f)) for f in
                                         ("tokenizer.json", "vocab.json", "tokenizer_config.json", "spiece.model"))


def find_tokenizer(vocab: str, *, role: str, near: str | None = None, files=(), vocab_size: int | None = None) -> str:
    v = VOCABULARIES.get(vocab)
    if v is None:
        raise ConfigError(f"model.components.{role}", f"no offline source is known for the {vocab or 'arch'} "
                          f"tokenizer: give its folder as model.components.{role}")
    looked = []

    def fits(folder: str, where: str) -> bool:
        n = tokenizer_size(folder) if vocab_size else None
        if n is not None and n > vocab_size:
            looked.append(f"{where} ({n} tokens, more than the text encoder's {vocab_size})")
            return False
        return True

    for root in comfyui_roots(near):
        for rel in v.comfy:
            folder = os.path.join(root, rel)
            if _is_tokenizer(folder):
                if v.comfy_pad:        # ComfyUI pads this vocabulary in code: a copy with its pad
                    folder = _repadded(folder, v)
                if v.adapt:        # keyed by the folder and its files' times: an updated ComfyUI is adapted again
                    stamp = [os.path.realpath(folder)] + [f"{n}:{os.stat(os.path.join(folder, n)).st_mtime_ns}"
                                                          for n in sorted(os.listdir(folder))]
                    folder = _derived(v, "adapted", "\n".join(stamp).encode(), folder, v.adapt)
                if fits(folder, folder):
                    return folder
            else:
                looked.append(folder)
    for repo, sub in v.hub:
        folder = _hub_folder(repo, sub)
        where = f"hub cache {repo}" + (f"/{sub}" if sub else "")
        if folder and fits(folder, where):
            return folder
        if not folder:
            looked.append(where)
    if v.build:
        folder = os.path.join(cache_root(), v.name)
        try:
            if not _is_tokenizer(folder):
                folder = _build(v, folder)
            if fits(folder, "the package that ships it"):
                return folder
        except ImportError as e:
            looked.append(f"the package that ships it ({e.name or e})")
    if v.embedded:
        for path in [p for p in (near, *files) if p]:
            data = embedded_data(path, v.embedded)
            base = os.path.basename(str(path))
            if data is None:
                looked.append(f"{base} (no {v.embedded})")
                continue
            folder = _derived(v, "embedded", data, data, v.from_embedded)
            if fits(folder, f"the {v.embedded} in {base}"):
                return folder
    raise ConfigError(f"model.components.{role}", f"no {vocab} tokenizer here: give its folder as "
                      f"model.components.{role} (looked in {'; '.join(looked) or 'no place'})")


def tokenizer_size(folder: str) -> int | None:
    """How many ids a tokenizer folder's tokenizer.json gives (its vocabulary and added tokens),
    without building the tokenizer; None when the folder has no tokenizer.json."""
    path = os.path.join(folder, "tokenizer.json")
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError):
        return None
    vocab = (doc.get("model") or {}).get("vocab") or {}
    ids = list(vocab.values()) if isinstance(vocab, dict) else list(range(len(vocab)))
    ids += [t.get("id", 0) for t in doc.get("added_tokens") or []]
    return max(ids) + 1 if ids else 0


def check_fits(tokenizer, vocab_size: int, role: str):
    """A loaded tokenizer whose ids the text encoder it serves cannot take is refused, naming the role."""
    n = len(tokenizer)
    if n > vocab_size:
        raise ConfigError(f"model.components.{role}", f"the {role} has {n} tokens but its text encoder takes "
                          f"{vocab_size}: they are not one vocabulary")


def embedded_data(path: str, key: str, max_bytes: int = 64 << 20) -> bytes | None:
    """The bytes of a vocabulary a safetensors file embeds (`key`: a uint8 tensor), else None."""
    from toolkit.models.formats.safetensors_header import HeaderError, check_file, read_raw_bytes
    try:
        header = check_file(os.path.expanduser(str(path)))
    except (HeaderError, OSError):
        return None
    name = next((k for k in header.tensors if k == key or k.endswith("." + key)), None)
    if name is None or header.tensors[name].dtype != "U8":
        return None
    return read_raw_bytes(header, name, max_bytes=max_bytes)


def _derived(v: Vocabulary, how: str, identity: bytes, source, func: str) -> str:
    """A tokenizer written once into the cache from `source` by `func(source, folder)`, keyed by what
    it comes from (a file's embedded bytes, a folder's path)."""
    folder = os.path.join(cache_root(), f"{v.name}-{how}-{hashlib.sha256(identity).hexdigest()[:16]}")
    if _is_tokenizer(folder):
        return folder
    return _build(v, folder, lambda tmp: _call(func, source, tmp))


def built_over(vocab: str, what: str, tokenizer_folder: str, func: str) -> str:
    """A folder written once into the cache by `func(tokenizer_folder, folder)` (a processor over the
    tokenizer), keyed by the tokenizer folder and its files' times."""
    v = VOCABULARIES[vocab]
    stamp = [os.path.realpath(tokenizer_folder), what] + [
        f"{n}:{os.stat(os.path.join(tokenizer_folder, n)).st_mtime_ns}" for n in sorted(os.listdir(tokenizer_folder))]
    return _derived(v, what, "\n".join(stamp).encode(), tokenizer_folder, func)


def _call(func: str, source, folder: str):
    from toolkit.models.arch import load_object
    load_object(func)(source, folder)


def _hub_folder(repo: str, sub: str) -> str | None:
    from huggingface_hub import constants
    snaps = os.path.join(constants.HF_HUB_CACHE, f"models--{repo.replace('/', '--')}", "snapshots")
    try:
        revs = sorted(os.listdir(snaps))
    except OSError:
        return None
    for rev in revs:
        folder = os.path.join(snaps, rev, sub)
        if _is_tokenizer(folder):
            return folder
    return None


def _repadded(source: str, v: Vocabulary) -> str:
    """`source` (a ComfyUI tokenizer folder) padding with `v.comfy_pad`, as a cached copy named for
    the folder and its files' mtimes (a changed ComfyUI folder gives a new copy)."""
    import hashlib
    stamp = [os.path.realpath(source)] + [f"{n}:{os.stat(os.path.join(source, n)).st_mtime_ns}"
                                          for n in sorted(os.listdir(source))]
    digest = hashlib.sha256("\n".join(stamp).encode()).hexdigest()[:16]
    folder = os.path.join(cache_root(), f"{v.name}-comfy-{digest}")
    if _is_tokenizer(folder):
        return folder

    def write(tmp):
        from transformers import AutoTokenizer
        AutoTokenizer.from_pretrained(source, pad_token=v.comfy_pad).save_pretrained(tmp)
    return _build(v, folder, write)


def _build(v: Vocabulary, folder: str, write=None) -> str:
    """Write the tokenizer once into the cache (`write(folder)`, else the vocabulary's `build`): to a
    temporary sibling, then renamed into place."""
    import shutil
    import tempfile

    from toolkit.models.arch import load_object
    os.makedirs(os.path.dirname(folder), exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f".{v.name}.", dir=os.path.dirname(folder))
    try:
        (write or load_object(v.build))(tmp)
        try:
            os.rename(tmp, folder)
        except OSError:         # another process wrote it first: theirs is the same
            pass
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return folder


# -- CLIP from OpenAI's BPE (open_clip_torch ships it) ----------------------------------------------
def _bytes_to_unicode() -> list:
    """GPT-2's byte -> printable character table, in its order (CLIP's base alphabet)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return [chr(c) for c in cs]


def clip_vocab() -> tuple[dict, list]:
    """CLIP's vocabulary and merges: the 256 byte characters, the same with </w>, the first 48,894
    merges joined, then <|startoftext|> and <|endoftext|> (49,408 entries)."""
    import importlib.resources
    path = importlib.resources.files("open_clip") / "bpe_simple_vocab_16e6.txt.gz"
    with gzip.open(str(path), "rt", encoding="utf-8") as f:
        merges = f.read().split("\n")[1:CLIP_MERGES + 1]
    base = _bytes_to_unicode()
    tokens = base + [c + "</w>" for c in base] + ["".join(m.split()) for m in merges] + \
        ["<|startoftext|>", "<|endoftext|>"]
    return {t: i for i, t in enumerate(tokens)}, merges


def _write_clip(folder: str, pad: str):
    import json

    from transformers import CLIPTokenizer
    vocab, merges = clip_vocab()
    with open(os.path.join(folder, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
    with open(os.path.join(folder, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n" + "\n".join(merges) + "\n")
    tok = CLIPTokenizer(os.path.join(folder, "vocab.json"), os.path.join(folder, "merges.txt"),
                        pad_token=pad, model_max_length=77)
    tok.save_pretrained(folder)


def write_clip_l(folder: str):
    """openai/clip-vit-large-patch14's tokenizer: pads with <|endoftext|>."""
    _write_clip(folder, "<|endoftext|>")


def write_clip_g(folder: str):
    """SDXL's tokenizer_2 (OpenCLIP bigG's): pads with "!"."""
    _write_clip(folder, "!")


def write_byt5(folder: str):
    """google/byt5-small's tokenizer: the 256 bytes after pad, eos, unk, and 125 extra ids; nothing to
    download. (Glyph-ByT5's own adds colour and font tokens the diffusers pipelines never write.)"""
    from transformers import ByT5Tokenizer
    ByT5Tokenizer().save_pretrained(folder)


# -- SentencePiece models embedded in ComfyUI's files (no sentencepiece package needed) --------------
def spiece_proto(data: bytes):
    """A SentencePiece ModelProto parsed with transformers' copy of its protobuf schema."""
    from transformers.convert_slow_tokenizer import import_protobuf
    proto = import_protobuf().ModelProto()
    proto.ParseFromString(data)
    return proto


UNIGRAM = 1


def write_t5_from_spiece(data: bytes, folder: str):
    """A T5Tokenizer (UMT5's) from an embedded Unigram SentencePiece model, as transformers converts
    one: its pieces and scores in order (ids as the SentencePiece processor gives them), its
    precompiled normalizer, no extra ids beyond the model's own pieces."""
    from transformers import T5Tokenizer
    proto = spiece_proto(data)
    if proto.trainer_spec.model_type != UNIGRAM:
        raise ValueError("the embedded SentencePiece model is not a Unigram model: not a T5 vocabulary")
    spec = proto.trainer_spec
    pieces = [(p.piece, p.score) for p in proto.pieces]
    names = {i: p.piece for i, p in enumerate(proto.pieces)}
    charsmap = proto.normalizer_spec.precompiled_charsmap or None
    tok = T5Tokenizer(vocab=pieces, extra_ids=0, _spm_precompiled_charsmap=charsmap,
                      pad_token=names.get(spec.pad_id, "<pad>"), eos_token=names.get(spec.eos_id, "</s>"),
                      unk_token=names.get(spec.unk_id, "<unk>"))
    tok.save_pretrained(folder)


# -- Qwen3 from Qwen2.5's files (ComfyUI's qwen25_tokenizer) -------------------------------------------
QWEN3_ADDED = ("<tool_response>", "</tool_response>", "<think>", "</think>")
# What Qwen3's chat template gives for the messages these pipelines pass (system/user turns, the
# generation prompt, and an empty thinking block when enable_thinking is false); written here, as a
# ComfyUI folder has Qwen2.5's template (which adds a default system prompt).
QWEN3_CHAT_TEMPLATE = (
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


def adapt_qwen3(source: str, folder: str):
    """A ComfyUI qwen25_tokenizer folder as Qwen3's tokenizer: Qwen3's four added tokens (after
    Qwen2.5's vocabulary, at their Qwen3 ids) where missing, and Qwen3's chat template."""
    from transformers import AddedToken, AutoTokenizer
    tok = AutoTokenizer.from_pretrained(source)
    missing = [t for t in QWEN3_ADDED if t not in tok.get_vocab()]
    if missing:
        tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in missing])
    tok.chat_template = QWEN3_CHAT_TEMPLATE
    tok.save_pretrained(folder)


def write_clip_h(folder: str):
    """SD 2.x's tokenizer (OpenCLIP-H's): pads with "!"."""
    _write_clip(folder, "!")

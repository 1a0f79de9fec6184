"""Tokenizers offline, for models read from the files people have (which carry no tokenizer).

    find_tokenizer(vocab, role=, near=) -> a tokenizer folder

`vocab` is the vocabulary a row's tokenizer component names (`Component.vocab`: "clip_l", ...). Where
one is looked for, in order (nothing is ever downloaded):
  (a) a tokenizer folder the request or profile names (`model.components.<role>`: the caller's);
  (b) a ComfyUI install's tokenizer folders (`comfy/sd1_tokenizer`, `comfy/text_encoders/*_tokenizer`):
      `$AITK_COMFYUI_PATH` (the engine sets it from `engine.comfyui_path`), else the ComfyUI checkout a
      model file lies in (`<ComfyUI>/models/checkpoints/x.safetensors` -> `<ComfyUI>/comfy/...`);
  (c) the local hub cache: the repos that ship this vocabulary;
  (d) a pinned package that ships it: open_clip_torch's `bpe_simple_vocab_16e6.txt.gz` is OpenAI's CLIP
      BPE, from which every CLIP tokenizer these archs use is built exactly (written once to the cache).
A missing one is a ConfigError naming the role and every place looked in.
"""
import gzip
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
}


def cache_root() -> str:
    return os.environ.get(CACHE_ENV) or os.path.join(os.path.expanduser("~"), ".cache", "aitk", "tokenizers")


def comfyui_roots(near: str | None) -> list:
    """ComfyUI checkouts: $AITK_COMFYUI_PATH, and the one `near` (a model file) lies in."""
    roots = []
    if os.environ.get(COMFY_ENV):
        roots.append(os.path.expanduser(os.environ[COMFY_ENV]))
    if near:
        parts = os.path.abspath(os.path.expanduser(near)).split(os.sep)
        if "models" in parts:
            roots.append(os.sep.join(parts[:len(parts) - 1 - parts[::-1].index("models")]) or os.sep)
    return roots


def _is_tokenizer(folder: str) -> bool:
    return os.path.isdir(folder) and any(os.path.isfile(os.path.join(folder, f)) for f in
                                         ("tokenizer.json", "vocab.json", "tokenizer_config.json", "spiece.model"))


def find_tokenizer(vocab: str, *, role: str, near: str | None = None) -> str:
    v = VOCABULARIES.get(vocab)
    if v is None:
        raise ConfigError(f"model.components.{role}", f"no offline source is known for the {vocab or 'arch'} "
                          f"tokenizer: give its folder as model.components.{role}")
    looked = []
    for root in comfyui_roots(near):
        for rel in v.comfy:
            folder = os.path.join(root, rel)
            if _is_tokenizer(folder):
                return _repadded(folder, v) if v.comfy_pad else folder
            looked.append(folder)
    for repo, sub in v.hub:
        folder = _hub_folder(repo, sub)
        if folder:
            return folder
        looked.append(f"hub cache {repo}" + (f"/{sub}" if sub else ""))
    if v.build:
        folder = os.path.join(cache_root(), v.name)
        if _is_tokenizer(folder):
            return folder
        try:
            return _build(v, folder)
        except ImportError as e:
            looked.append(f"the package that ships it ({e.name or e})")
    raise ConfigError(f"model.components.{role}", f"no {vocab} tokenizer here: give its folder as "
                      f"model.components.{role} (looked in {'; '.join(looked)})")


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
    """Write the tokenizer once into the cache: to a temporary sibling, then renamed into place."""
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


def write_clip_h(folder: str):
    """SD 2.x's tokenizer (OpenCLIP-H's): pads with "!"."""
    _write_clip(folder, "!")

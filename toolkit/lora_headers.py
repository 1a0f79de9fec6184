"""LoRA files described from their safetensors headers: no torch, no tensor data (but a few
`.alpha` scalars of a few bytes each), so the engine's HTTP process can list a folder of them.

    describe(path, folder=None, metadata=False) -> dict    # one file
    list_loras(folder) -> [dict]                            # every .safetensors under folder, recursively
    find_lora(folder, name) -> relative path                # `<lora:name:w>` prompt syntax
    guess_arch(keys) -> arch | None
    check_lora(path, arch)                                  # refuse an unreadable or another arch's file

A description: name (path relative to the folder, no extension), path (relative, with extension),
bytes, mtime, format ("peft" | "kohya" | "comfyui" | "unknown"), arch (guessed from the keys with
each arch row's `lora.markers`, or None), rank (the most common lora_down / lora_A height), alpha
(the most common `.alpha` scalar, else kohya's ss_network_alpha), trigger_words, output_name
(ss_output_name) and base_model (ss_base_model_version or modelspec.architecture). A file that
cannot be read is listed with an "error" instead of the header fields.

Trigger words: kohya's ss_tag_frequency counts each caption tag per dataset folder. A trigger word
is in every caption, so the tags tied for the highest total count are the trigger words (at most
5, in the file's order); a file without tag counts offers its ss_output_name instead (people name
a LoRA by its trigger), and a file with neither has none.
"""
import json
import os
import re
import struct
from collections import Counter

from toolkit.models.formats.safetensors_header import HeaderError, check_file, read_header

MAX_TRIGGER_WORDS = 5
KOHYA_PREFIXES = ("lora_unet_", "lora_te_", "lora_te1_", "lora_te2_", "lora_te3_")
COMFY_PREFIXES = ("diffusion_model.", "text_encoders.")
DOWN_SUFFIXES = (".lora_down.weight", ".lora_A.weight", ".lora.down.weight")
# little-endian scalar decoders by safetensors dtype (BF16 is the high half of an F32)
_SCALARS = {"F32": lambda b: struct.unpack("<f", b)[0], "F16": lambda b: struct.unpack("<e", b)[0],
            "BF16": lambda b: struct.unpack("<f", b"\0\0" + b)[0], "F64": lambda b: struct.unpack("<d", b)[0]}


def detect_format(keys) -> str:
    keys = list(keys)
    if not any(k.endswith(DOWN_SUFFIXES) for k in keys):
        return "unknown"            # no LoRA layers: a checkpoint, an embedding, a LyCORIS variant
    if any(k.startswith(KOHYA_PREFIXES) for k in keys):
        return "kohya"
    if any(k.startswith(COMFY_PREFIXES) for k in keys):
        return "comfyui"
    return "peft"


def guess_arch(keys) -> str | None:
    """The arch whose markers match the most distinct marker patterns; on a tie, the arch with fewer
    markers (its claim is fully met: an SD 1.x file shows only the marker SDXL shares with it). A tie
    on both, or no match, is None."""
    from toolkit.models.registry import ARCHS

    keys = list(keys)
    scores = []
    for name in ARCHS:
        lora = ARCHS[name].lora
        if lora is None or not lora.markers:
            continue
        hits = sum(1 for m in lora.markers if any(re.search(m, k) for k in keys))
        if hits:
            scores.append(((hits, -len(lora.markers)), name))
    scores.sort(reverse=True)
    if not scores or (len(scores) > 1 and scores[0][0] == scores[1][0]):
        return None
    return scores[0][1]


def check_lora(path: str, arch: str):
    """Refuse from the header alone what cannot be `arch`'s LoRA: a file that is no safetensors file or
    is cut short (HeaderError), or one whose keys show another arch's layers and none of this arch's
    (ValueError). What a header cannot tell (a layer the model lacks, a shape) the worker's own check
    finds (toolkit/models/lora.check_file)."""
    from toolkit.models.registry import get_arch

    keys = list(check_file(path).tensors)         # cached: asked again for every request naming the file
    if not keys:
        raise ValueError(f"{os.path.basename(path)} holds no LoRA weights (no tensors)")
    lora = get_arch(arch).lora
    if lora is None or not lora.markers or any(re.search(m, k) for m in lora.markers for k in keys):
        return
    other = guess_arch(keys)
    if other is not None and other != arch:
        raise ValueError(f"{os.path.basename(path)} is a LoRA for {other} (by its keys), not {arch}")


def _alphas(header) -> list:
    """The `.alpha` scalars, read straight from the file (a few bytes each)."""
    names = [n for n, t in header.tensors.items() if n.endswith(".alpha") and t.numel == 1 and t.dtype in _SCALARS]
    out = []
    if not names:
        return out
    with open(header.path, "rb") as f:
        for n in names:
            t = header.tensors[n]
            f.seek(header.data_start + t.begin)
            raw = f.read(t.nbytes)
            if len(raw) != t.nbytes:
                raise HeaderError(f"{header.path}: {n} is truncated")
            out.append(float(_SCALARS[t.dtype](raw)))
    return out


def _most_common(values):
    return Counter(values).most_common(1)[0][0] if values else None


def _float(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def trigger_words(meta: dict) -> list:
    counts: dict = {}
    try:
        freq = json.loads(meta.get("ss_tag_frequency") or "{}")
    except ValueError:
        freq = {}
    for tags in (freq.values() if isinstance(freq, dict) else ()):
        for tag, n in (tags.items() if isinstance(tags, dict) else ()):
            if isinstance(n, (int, float)) and str(tag).strip():
                counts[str(tag).strip()] = counts.get(str(tag).strip(), 0) + n
    if counts:
        top = max(counts.values())
        return [t for t, n in counts.items() if n == top][:MAX_TRIGGER_WORDS]
    name = (meta.get("ss_output_name") or "").strip()
    return [name] if name else []


def _names(path: str, folder: str | None) -> dict:
    rel = os.path.relpath(path, folder) if folder else os.path.basename(path)
    rel = rel.replace(os.sep, "/")
    return {"name": os.path.splitext(rel)[0], "path": rel}


def describe(path: str, folder: str | None = None, metadata: bool = False) -> dict:
    """The description of one LoRA file (raises HeaderError when its header cannot be read)."""
    st = os.stat(path)
    out = {**_names(path, folder), "bytes": st.st_size, "mtime": st.st_mtime}
    header = read_header(path)
    keys = list(header.tensors)
    meta = header.metadata
    ranks = [header.tensors[k].shape[0] for k in keys if k.endswith(DOWN_SUFFIXES) and header.tensors[k].ndim >= 2]
    alpha = _most_common(_alphas(header))
    out.update(format=detect_format(keys), arch=guess_arch(keys), rank=_most_common(ranks),
               alpha=alpha if alpha is not None else _float(meta.get("ss_network_alpha")),
               trigger_words=trigger_words(meta), output_name=meta.get("ss_output_name") or None,
               base_model=meta.get("ss_base_model_version") or meta.get("modelspec.architecture") or None)
    if metadata:
        out["metadata"] = dict(meta)
    return out


def _files(folder: str):
    """Every .safetensors file under folder (recursively, sorted; hidden files and folders skipped).
    A link is followed only where it stays inside the folder (a loop is not: os.walk does not follow
    folder links): what a listing shows is what a request may load."""
    top = os.path.realpath(folder)
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for f in sorted(files):
            path = os.path.join(root, f)
            if f.lower().endswith(".safetensors") and not f.startswith(".") and inside(path, top):
                yield path


def inside(path: str, top: str) -> bool:
    """`path`, links resolved, lies under the real folder `top`."""
    return os.path.realpath(path).startswith(top + os.sep)


def list_loras(folder: str, metadata: bool = False) -> list:
    """Descriptions of every LoRA file under `folder`; an unreadable one carries an "error" instead."""
    folder = os.path.expanduser(folder)
    out = []
    for path in _files(folder):
        try:
            out.append(describe(path, folder, metadata))
        except (HeaderError, OSError) as e:
            entry = _names(path, folder)
            try:
                st = os.stat(path)
                entry.update(bytes=st.st_size, mtime=st.st_mtime)
            except OSError:
                pass
            out.append({**entry, "error": str(e).replace(folder + os.sep, "")})
    return out


def find_lora(folder: str, name: str) -> str:
    """The file `name` selects under `folder` (relative, with extension): its relative name without
    extension, else a unique basename. LookupError says why not."""
    folder = os.path.expanduser(folder)
    rels = [os.path.relpath(p, folder).replace(os.sep, "/") for p in _files(folder)]
    wanted = name.strip().replace("\\", "/")
    wanted = wanted[:-len(".safetensors")] if wanted.lower().endswith(".safetensors") else wanted
    exact = [r for r in rels if os.path.splitext(r)[0] == wanted]
    if exact:
        return exact[0]
    by_base = [r for r in rels if os.path.splitext(os.path.basename(r))[0] == wanted]
    if len(by_base) == 1:
        return by_base[0]
    if by_base:
        raise LookupError(f"LoRA {name!r} is ambiguous: {', '.join(by_base)}")
    raise LookupError(f"no LoRA named {name!r} in the LoRA folder")

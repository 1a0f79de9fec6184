"""A model's weighted components as the placement planner sees them (toolkit/placement.Part), from their
files' headers before any tensor is read. Torch-free: the engine's HTTP process sizes a request with it
before queueing it (a plan that fits nowhere is a 422), and the worker plans its build with it.

    parts(model_config, folders=(), roots=None, device="cpu") -> [Part]       (unknown sizes left out)

Where each component's files are is the funnel's own answer (component_sources.py: the folder
and subfolder, the single file, the part of an all-in-one checkpoint). Its bytes once loaded:
- a safetensors file or folder: every tensor's elements at the size it is loaded with: an ordinary float
  tensor (F16, BF16, F32) at the model's dtype (`auto`: bf16 on CUDA, float32 on the CPU), FP8 and integer
  tensors as stored (FP8 stays FP8: a file with FP8 tensors keeps every tensor's dtype, as its reader does);
  a quantized component (model.quantize / quantize_te, optimum-quanto) at the qtype's bits for its matrices;
- a GGUF file: its tensors as stored (they stay packed);
- a .bin/.pt file: its size on disk.
A denoiser's repeated blocks (the items of its own ModuleLists: `transformer_blocks.7.`,
`single_transformer_blocks.3.`, `blocks.12.`, `layers.5.`, `down_blocks.1.`) are counted from the same names:
what `layers` streams.

Answers are cached per file (path, size, mtime): a request is sized without reading a header twice.
"""
import os
import re
import threading

from toolkit.models.arch import DENOISER, TEXT_ENCODER
from toolkit.placement import WEIGHTED, Part

FLOAT = {"F16": 2, "BF16": 2, "F32": 4, "F64": 8}
FP8 = ("F8_E4M3", "F8_E5M2", "F8_E4M3FNUZ", "F8_E5M2FNUZ")
QBITS = {"qfloat8": 8, "qfloat8_e4m3fn": 8, "qfloat8_e5m2": 8, "qint8": 8, "qint4": 4, "qint2": 2}
# `<list>.<index>.`: a block of one of the module's own ModuleLists (a direct child: `transformer_blocks.3.`,
# `layers.7.`, `noise_refiner.0.`, `down_blocks.1.`; ComfyUI's `double_blocks.2.` behind its prefix), the unit
# diffusers' block-level group offloading moves
BLOCK = re.compile(r"^(?:model\.diffusion_model\.|diffusion_model\.)?([A-Za-z_]\w*)\.(\d+)\.")
_cache: dict = {}
_lock = threading.Lock()


def dtype_bytes(dtype: str, device: str) -> int:
    """Bytes per element of a float tensor loaded at `dtype` (ModelConfig.dtype) on `device`."""
    if dtype in (None, "auto"):
        return 2 if str(device).startswith("cuda") else 4
    return 4 if dtype in ("float32", "fp32") else 2


def file_tensors(path: str, prefix: str = "") -> list:
    """[(name, stored dtype, elements, stored bytes)] of a weights file's tensors under `prefix`
    (prefix cut from the names); [] for a file whose tensors cannot be listed from its header."""
    path = os.path.realpath(os.path.expanduser(path))
    st = os.stat(path)
    key = (path, st.st_size, st.st_mtime_ns)
    with _lock:
        cached = _cache.get(key)
    if cached is None:
        cached = _read(path)
        with _lock:
            _cache[key] = cached
    return [(n[len(prefix):], d, e, b) for n, d, e, b in cached if n.startswith(prefix)]


def _read(path: str) -> list:
    from toolkit.models.formats.safetensors_header import HeaderError, check_file, is_safetensors_name
    if is_safetensors_name(path):
        try:
            header = check_file(path)
        except HeaderError:
            return []
        return [(name, t.dtype, t.numel, t.end - t.begin) for name, t in header.tensors.items()]
    if path.endswith(".gguf"):
        try:
            from toolkit.models.formats.gguf_header import open_reader
            return [(t.name, "GGUF", int(t.n_elements), int(t.n_bytes)) for t in open_reader(path).tensors]
        except Exception:       # noqa: BLE001 - unreadable here: its reader says why when it loads
            return []
    return [("", "FILE", 0, os.path.getsize(path))]


def size_tensors(tensors, *, float_bytes: int, qbits: int | None = None, denoiser: bool = False) -> Part:
    """A Part's numbers (role and kind left empty) from [(name, dtype, elements, stored bytes)]."""
    keep = any(d in FP8 or d == "GGUF" for _n, d, _e, _b in tensors)     # its reader keeps every dtype
    total, blocks = 0, {}
    for name, dtype, elements, stored in tensors:
        if keep or dtype not in FLOAT:
            nbytes = stored
        elif qbits and name.endswith(".weight") and elements >= 1 << 12:
            nbytes = elements * qbits // 8
        else:
            nbytes = elements * float_bytes
        total += nbytes
        m = BLOCK.search(name) if denoiser else None
        if m:
            blocks[m.group(1), int(m.group(2))] = blocks.get((m.group(1), int(m.group(2))), 0) + nbytes
    if len(blocks) < 2:
        return Part("", "", total)
    return Part("", "", total, len(blocks), max(blocks.values()), total - sum(blocks.values()))


def component_files(where, allow_hub: bool = True) -> tuple:
    """(files, prefix) holding one component (a ComponentSource), or (None, "") when they are not
    here (a hub repo not in the local cache, or any repo id when `allow_hub` is off: a local-only model
    never asks the hub library even for its cache; a `tiny:` name not built; an in-code config)."""
    from toolkit.models.v2.identity import weight_files_in
    source = where.source
    if not isinstance(source, str) or source.startswith("tiny:"):
        return None, ""
    path = os.path.expanduser(source)
    if os.path.isfile(path):
        return [path], where.part or ""
    if os.path.isdir(path):
        folder = os.path.join(path, where.subfolder) if where.subfolder else path
        return _weights(weight_files_in(folder)), ""
    if not allow_hub:
        return None, ""
    folder = _cached_snapshot(source, where.subfolder)
    return (_weights(weight_files_in(folder)), "") if folder else (None, "")


def _weights(files: list) -> list:
    """The files a loader reads: safetensors where there are any (a repo may carry .bin copies too)."""
    safetensors = [f for f in files if f.endswith((".safetensors", ".sft"))]
    return sorted(safetensors or files)


def _cached_snapshot(repo_id: str, subfolder: str | None) -> str | None:
    """The local hub cache's snapshot folder of `repo_id` holding `subfolder`, without the network."""
    from toolkit.models.v2.sources import looks_like_repo_id
    if not looks_like_repo_id(repo_id):
        return None
    try:
        from huggingface_hub import snapshot_download
        folder = snapshot_download(repo_id, allow_patterns=[f"{subfolder}/*"] if subfolder else ["*.safetensors"],
                                   local_files_only=True)
    except Exception:       # noqa: BLE001 - not cached: unknown here
        return None
    folder = os.path.join(folder, subfolder) if subfolder else folder
    return folder if os.path.isdir(folder) else None


def parts(mc, folders=(), roots=None, device: str = "cpu") -> list:
    """The planner's Parts for `mc`'s weighted components whose files are here (the others are left
    out: the plan then covers what is known, and the load itself finds the rest)."""
    from toolkit.models.component_sources import component_sources
    spec = mc.spec
    float_bytes = dtype_bytes(mc.dtype, device)
    out = []
    for comp, where in component_sources(mc, spec, folders, roots):
        if where is None or comp.kind not in WEIGHTED:
            continue
        files, prefix = component_files(where, allow_hub=not mc.local_only)
        if not files:
            continue
        qbits = (QBITS.get(mc.qtype) if comp.kind == DENOISER and mc.quantize else
                 QBITS.get(mc.qtype_te) if comp.kind == TEXT_ENCODER and mc.quantize_te else None)
        tensors = [t for f in files for t in file_tensors(f, prefix)]
        sized = size_tensors(tensors, float_bytes=float_bytes, qbits=qbits, denoiser=comp.kind == DENOISER)
        out.append(Part(comp.role, comp.kind, sized.bytes, sized.blocks, sized.block_bytes, sized.rest))
    return out


__all__ = ["component_files", "dtype_bytes", "file_tensors", "parts", "size_tensors"]

"""What a GGUF file is, from its header alone (the `gguf` package's reader maps the file; no tensor
is copied, torch is not imported): its `general.architecture`, the diffusers class and engine archs
that read it, tensor types and the quantization type that names it ("Q4_K"), for the load funnel's
identity, `python -m toolkit.file_report` and GET /library."""
import os

from toolkit.models.formats.gguf_layouts import PREFIXES, readable

# the types the reader accepts: plain floats, and what diffusers' GGUF dequantizers implement
FLOAT_TYPES = ("F32", "F16", "BF16")


class GGUFHeaderError(ValueError):
    """A GGUF file that cannot be read; the message names the file."""


def quantized_types() -> tuple:
    """The quantized GGML types diffusers' GGUF layers dequantize (names)."""
    from diffusers.quantizers.gguf.utils import SUPPORTED_GGUF_QUANT_TYPES
    return tuple(t.name for t in SUPPORTED_GGUF_QUANT_TYPES)


def open_reader(path: str):
    import gguf
    try:
        return gguf.GGUFReader(path)
    except Exception as e:   # a truncated or foreign file surfaces as whatever numpy/struct raised
        raise GGUFHeaderError(f"{path}: not a readable GGUF file ({type(e).__name__}: {e})") from None


def field_str(reader, name: str):
    field = reader.get_field(name)
    if field is None or not field.data:
        return None
    return bytes(field.parts[field.data[-1]]).decode("utf-8", "replace")


def describe(path: str) -> dict:
    """{path, size_bytes, gguf_architecture, cls, archs, prefix, tensor_count, tensor_types {type: n},
    qtype (the quantized type holding the most values, else the main float type), params}."""
    path = os.path.expanduser(str(path))
    reader = open_reader(path)
    arch = field_str(reader, "general.architecture")
    counts, values = {}, {}
    for t in reader.tensors:
        name = t.tensor_type.name
        counts[name] = counts.get(name, 0) + 1
        values[name] = values.get(name, 0) + int(t.n_elements)
    quantized = {k: v for k, v in values.items() if k not in FLOAT_TYPES}
    pool = quantized or values
    qtype = max(pool, key=pool.get) if pool else None
    names = [t.name for t in reader.tensors]
    prefix = next((p for p in PREFIXES if names and all(n.startswith(p) for n in names)), "")
    # a row whose anchor the file carries before a row without one (Wan VACE's files are wan files too)
    fits = [(not row.anchor, c) for c, (row, _) in readable().items()
            if row.architecture == arch and (not row.anchor or prefix + row.anchor in names)]
    cls = min(fits, key=lambda f: f[0])[1] if fits else None
    return {"path": os.path.abspath(path), "size_bytes": os.path.getsize(path), "gguf_architecture": arch,
            "cls": cls, "archs": archs_for_class(cls) if cls else [], "prefix": prefix, "tensor_count": len(names),
            "tensor_types": dict(sorted(counts.items())), "qtype": qtype,
            "params": sum(values.values())}


def archs_for_class(cls_name: str) -> list:
    """The engine archs whose denoiser is `cls_name` (registry order)."""
    from toolkit.models.arch import DENOISER
    from toolkit.models.registry import ARCHS
    return [a for a in ARCHS if any(c.kind == DENOISER and c.cls == cls_name for c in ARCHS[a].components)]


def is_gguf_file(path: str) -> bool:
    """A GGUF file, by its name (formats/dispatch.py; its header is read by format_name)."""
    return path.lower().endswith(".gguf")


def format_name(path: str) -> str:
    """The funnel's format of a GGUF file (joins the component's pool identity): "gguf-Q4_K"."""
    return f"gguf-{describe(path)['qtype']}"


def human_size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000.0


def inspect_gguf(path: str) -> dict:
    """`python -m toolkit.file_report`'s report of a GGUF file: kind "gguf", format "GGUF Q4_K" and a
    one-line summary ("flux transformer, GGUF Q4_K, 6.8 GB"); an unreadable file gives "error"."""
    path = os.path.expanduser(str(path))
    out = {"path": os.path.abspath(path), "kind": "gguf"}
    if not os.path.isfile(path):
        out["error"] = "no such file"
        return out
    try:
        info = describe(path)
    except GGUFHeaderError as e:
        out["error"] = str(e)
        return out
    out.update(info)
    out["format"] = f"GGUF {info['qtype']}" if info["qtype"] else "GGUF"
    arch = _arch_by_shapes(path, info["archs"])
    out["arch"] = arch
    what = f"{arch} transformer" if arch else f"{info['gguf_architecture'] or 'unknown'} model (no arch reads it)"
    out["summary"] = f"{what}, {out['format']}, {human_size(info['size_bytes'])}"
    return out


def _arch_by_shapes(path: str, archs: list) -> str | None:
    """The first of `archs` (registry order) whose denoiser config rule the file's shapes match: rows of one
    denoiser class (FLUX.1 and Flex.1) read one layout, their configs tell them apart; else the first."""
    from toolkit.models.arch import load_object
    from toolkit.models.formats.file_view import FileKindError
    from toolkit.models.registry import ARCHS
    for arch in archs:
        sf = ARCHS[arch].component(ARCHS[arch].denoiser_roles[0]).single_file
        if sf is None or not sf.config:
            continue
        try:
            load_object(sf.config)(header_view(path))
        except (FileKindError, GGUFHeaderError):
            continue
        return arch
    return archs[0] if archs else None


def header_view(path: str):
    """The file's tensors as a file_view.View (names with the checkpoint prefix cut, shapes in torch's
    order, ComfyUI-GGUF's recorded shape for a flattened one): what a row's config rule reads, as it
    reads a safetensors header."""
    from toolkit.models.formats.file_view import View
    reader = open_reader(os.path.expanduser(str(path)))
    names = [t.name for t in reader.tensors]
    prefix = next((p for p in PREFIXES if names and all(n.startswith(p) for n in names)), "")
    shapes = {}
    for t in reader.tensors:
        field = reader.get_field(f"comfy.gguf.orig_shape.{t.name}")
        shape = tuple(int(field.parts[i][0]) for i in field.data) if field is not None else \
            tuple(int(x) for x in reversed(list(t.shape)))
        shapes[t.name[len(prefix):]] = shape
    return View(prefix, shapes, {}, {}, frozenset(names))

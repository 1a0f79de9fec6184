"""A safetensors file's header, read with plain file I/O: no torch, no tensor data.

The format is an 8-byte little-endian header length, a JSON header mapping each tensor name to
{"dtype", "shape", "data_offsets": [begin, end]} (offsets relative to the byte after the header)
plus an optional "__metadata__" string map, then the raw tensor bytes.

`read_header` holds a file to the format's rules (the safetensors spec, and the library's own
checks in safetensors/src/tensor.rs `read_metadata`/`validate`) before anything reads it, so a
malformed file is a HeaderError that says what is wrong instead of whatever a loader hits first:

- the 8-byte length is there, > 0, at most the library's limit, and the header fits in the file;
- the header is UTF-8 JSON starting with `{`, an object of tensor entries (names unique), each with
  exactly dtype (one the library knows), shape (a list of non-negative integers) and data_offsets
  ([begin, end], non-negative integers); `__metadata__` maps strings to strings;
- `end - begin` is the shape's bytes (numel * bits / 8; a sub-byte dtype must fill whole bytes);
- the tensors tile the data section: inside it, no overlaps, no holes, nothing after the last one
  (the spec: the buffer is entirely indexed), so a truncated file is refused too.

`check_file` is the same check, cached by the file's (path, device, inode, size, mtime): the engine
asks it for every weights file a request names, and the funnel before every load.

`read_raw_bytes` reads the bytes of one *small* tensor (a ComfyUI `comfy_quant` marker is a few
dozen uint8 values holding JSON); it refuses anything larger than `max_bytes`, so it can never be
used to pull a weight into memory by accident.
"""
import json
import os
import struct
import threading
from collections import OrderedDict
from dataclasses import dataclass, field

MAX_HEADER_BYTES = 100_000_000     # the safetensors library's MAX_HEADER_SIZE
USIZE_MAX = 2 ** 64 - 1            # the library reads shapes and offsets as 64-bit unsigned integers
SAFETENSORS_SUFFIXES = (".safetensors", ".sft")

# bits per element of every dtype the safetensors library knows (its Dtype::bitsize)
DTYPE_BITS = {
    "BOOL": 8, "U8": 8, "I8": 8, "F8_E4M3": 8, "F8_E5M2": 8, "F8_E4M3FNUZ": 8, "F8_E5M2FNUZ": 8, "F8_E8M0": 8,
    "I16": 16, "U16": 16, "F16": 16, "BF16": 16,
    "I32": 32, "U32": 32, "F32": 32, "C64": 64,
    "I64": 64, "U64": 64, "F64": 64,
    "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6,
}
FLOAT_DTYPES = ("F16", "BF16", "F32", "F64")                 # ordinary (unquantized) floating storage
FP8_DTYPES = ("F8_E4M3", "F8_E5M2", "F8_E4M3FNUZ", "F8_E5M2FNUZ", "F8_E8M0")
INTEGER_DTYPES = ("BOOL", "U8", "I8", "I16", "U16", "I32", "U32", "I64", "U64")
SUBBYTE_DTYPES = ("F4", "F6_E2M3", "F6_E3M2")
ENTRY_FIELDS = ("dtype", "shape", "data_offsets")


class HeaderError(ValueError):
    """The file is not a readable safetensors file. Raised by read_header, it carries `path` and
    `reason` (the message without the path), so a caller can name the file by its basename."""

    def __init__(self, message: str, *, path: str | None = None, reason: str | None = None):
        super().__init__(message)
        self.path = path
        self.reason = reason if reason is not None else message

    def named(self) -> str:
        """`basename: reason`: the file named without revealing where it lies."""
        return f"{os.path.basename(self.path)}: {self.reason}" if self.path else self.reason


def _bad(path: str, reason: str) -> HeaderError:
    return HeaderError(f"{path}: {reason}", path=path, reason=reason)


@dataclass(frozen=True)
class TensorInfo:
    name: str
    dtype: str                 # the safetensors dtype string, e.g. "F8_E4M3", "BF16"
    shape: tuple
    begin: int                 # byte offsets of the data, relative to the start of the data section
    end: int

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= int(s)
        return n

    @property
    def nbytes(self) -> int:
        return self.end - self.begin


@dataclass
class SafetensorsHeader:
    path: str
    tensors: dict = field(default_factory=dict)      # name -> TensorInfo, in file order
    metadata: dict = field(default_factory=dict)     # the "__metadata__" string map
    data_start: int = 0                              # absolute file offset of the data section
    file_size: int = 0

    def keys(self):
        return self.tensors.keys()


def read_header(path: str) -> SafetensorsHeader:
    """Parse and check the header of the safetensors file at `path` (reads only the header bytes);
    HeaderError says what breaks the format."""
    path = os.path.expanduser(str(path))
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            raw_len = f.read(8)
            if len(raw_len) != 8:
                raise _bad(path, f"too short to be a safetensors file ({size} bytes; the header length "
                                 "alone takes 8)")
            (n,) = struct.unpack("<Q", raw_len)
            if n == 0:
                raise _bad(path, "not a safetensors file (header length 0)")
            if n > MAX_HEADER_BYTES:
                raise _bad(path, f"not a safetensors file (header length {n} is over the format's limit "
                                 f"of {MAX_HEADER_BYTES} bytes)")
            if 8 + n > size:
                raise _bad(path, f"not a safetensors file (header length {n}, but only {size - 8} bytes "
                                 "follow it)")
            blob = f.read(n)
    except OSError as e:
        raise _bad(path, f"cannot read: {e.strerror or type(e).__name__}") from None
    if len(blob) != n:
        raise _bad(path, "the file shrank while its header was read")
    doc = _parse_json(path, blob)
    metadata = _metadata(path, doc.pop("__metadata__", None))
    tensors = {name: _entry(path, name, entry) for name, entry in doc.items()}
    data_start = 8 + n
    _check_layout(path, tensors, size - data_start)
    return SafetensorsHeader(path, tensors, metadata, data_start, size)


class _Duplicate(ValueError):
    pass


def _unique(pairs):
    out = {}
    for k, v in pairs:
        if k in out:
            raise _Duplicate(k)
        out[k] = v
    return out


def _no_constant(name):
    raise ValueError(f"{name} is not a JSON number")


def _int(text: str):
    # every number a header may hold is a non-negative integer; "-0" (which the library reads as a
    # float) stays negative here so it is refused like any other negative number
    return -1 if text.startswith("-") else int(text)


def _parse_json(path: str, blob: bytes) -> dict:
    if not blob.startswith(b"{"):
        raise _bad(path, "header is not JSON (it must be an object, starting with '{')")
    try:
        text = blob.decode("utf-8")
    except UnicodeDecodeError as e:
        raise _bad(path, f"header is not JSON (not UTF-8 text at byte {e.start})") from None
    try:
        doc = json.loads(text, object_pairs_hook=_unique, parse_constant=_no_constant, parse_int=_int)
    except _Duplicate as e:
        raise _bad(path, f"header names {str(e)!r} twice") from None
    except RecursionError:
        raise _bad(path, "header is not JSON the format allows (nested too deeply)") from None
    except ValueError as e:             # JSONDecodeError, NaN/Infinity, an integer of too many digits
        raise _bad(path, f"header is not JSON: {e}") from None
    if not isinstance(doc, dict):
        raise _bad(path, "header is not a JSON object")
    return doc


def _text(path: str, s, what: str) -> str:
    if not isinstance(s, str):
        raise _bad(path, f"{what} is not a string")
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:          # a lone surrogate escape ("\ud800"): not Unicode text
        raise _bad(path, f"{what} is not valid Unicode text") from None
    return s


def _metadata(path: str, meta) -> dict:
    if meta is None:
        return {}
    if not isinstance(meta, dict):
        raise _bad(path, "__metadata__ is not a string map")
    for k, v in meta.items():
        _text(path, k, "a __metadata__ key")
        if not isinstance(v, str):
            raise _bad(path, f"__metadata__[{k!r}] is not a string")
        _text(path, v, f"__metadata__[{k!r}]")
    return dict(meta)


def _count(value) -> bool:
    return type(value) is int and 0 <= value <= USIZE_MAX


def _entry(path: str, name: str, entry) -> TensorInfo:
    _text(path, name, "a tensor name")
    where = f"header entry {name!r}"
    if not isinstance(entry, dict):
        raise _bad(path, f"{where} is not an object of dtype, shape and data_offsets")
    unknown = [k for k in entry if k not in ENTRY_FIELDS]
    if unknown:
        raise _bad(path, f"{where} has an unknown field {unknown[0]!r}")
    missing = [k for k in ENTRY_FIELDS if k not in entry]
    if missing:
        raise _bad(path, f"{where} has no {missing[0]}")
    dtype, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
    if not isinstance(dtype, str) or dtype not in DTYPE_BITS:
        raise _bad(path, f"{where}: unknown dtype {dtype!r}")
    if not isinstance(shape, list) or not all(_count(s) for s in shape):
        raise _bad(path, f"{where}: shape {shape!r} is not a list of non-negative integers")
    if not isinstance(offsets, list) or len(offsets) != 2 or not all(_count(o) for o in offsets):
        raise _bad(path, f"{where}: data_offsets {offsets!r} is not [begin, end] in non-negative integers")
    return TensorInfo(name, dtype, tuple(shape), offsets[0], offsets[1])


def _nbytes(path: str, t: TensorInfo) -> int:
    """The bytes `t`'s shape and dtype take, overflowing where the library's 64-bit sums would."""
    n = 1
    for s in t.shape:
        n *= s
        if n > USIZE_MAX:
            raise _bad(path, f"tensor {t.name!r}: shape {list(t.shape)} has more elements than the format counts")
    bits = n * DTYPE_BITS[t.dtype]
    if bits > USIZE_MAX:
        raise _bad(path, f"tensor {t.name!r}: shape {list(t.shape)} of {t.dtype} is larger than the format counts")
    if bits % 8:
        raise _bad(path, f"tensor {t.name!r}: {n} values of {t.dtype} do not fill whole bytes")
    return bits // 8


def _check_layout(path: str, tensors: dict, data_len: int):
    for t in tensors.values():
        if t.end < t.begin:
            raise _bad(path, f"tensor {t.name!r} ends (byte {t.end}) before it begins (byte {t.begin})")
        if t.end > data_len:
            raise _bad(path, f"tensor {t.name!r} lies outside the file (its data ends at byte {t.end} of a "
                             f"{data_len}-byte data section): the file is truncated or the header is wrong")
        want = _nbytes(path, t)
        if want != t.nbytes:
            raise _bad(path, f"tensor {t.name!r} is {list(t.shape)} {t.dtype}, {want} bytes, but its "
                             f"data_offsets hold {t.nbytes}")
    at, previous = 0, None
    for t in sorted(tensors.values(), key=lambda t: (t.begin, t.end)):
        if t.begin < at:
            raise _bad(path, f"tensors {previous.name!r} and {t.name!r} overlap (bytes {t.begin}..{at})")
        if t.begin > at:
            raise _bad(path, f"bytes {at}..{t.begin} of the data belong to no tensor (the data must be "
                             "entirely indexed)")
        at, previous = t.end, t
    if at != data_len:
        raise _bad(path, f"{data_len - at} bytes after the last tensor belong to no tensor (the data must "
                         "be entirely indexed)")


_CACHE: "OrderedDict[tuple, SafetensorsHeader]" = OrderedDict()
_CACHE_SIZE = 64                   # headers of big models hold thousands of entries: keep a few
_cache_lock = threading.Lock()


def check_file(path: str) -> SafetensorsHeader:
    """read_header, cached by (path, device, inode, size, mtime): a file checked once is not parsed
    again until it changes. The header returned is shared: read it, do not change it."""
    path = os.path.expanduser(str(path))
    try:
        st = os.stat(path)
    except OSError as e:
        raise _bad(path, f"cannot read: {e.strerror or type(e).__name__}") from None
    key = (path, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    with _cache_lock:
        hit = _CACHE.get(key)
        if hit is not None:
            _CACHE.move_to_end(key)
            return hit
    header = read_header(path)
    with _cache_lock:
        _CACHE[key] = header
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    return header


def is_safetensors_name(path: str) -> bool:
    """A file whose name says it is a safetensors file (what check_file is asked about)."""
    return str(path).lower().endswith(SAFETENSORS_SUFFIXES)


def read_raw_bytes(header: SafetensorsHeader, name: str, max_bytes: int = 4096) -> bytes:
    """The raw bytes of one small tensor (e.g. a `comfy_quant` uint8 marker). Refuses large tensors."""
    info = header.tensors[name]
    if info.nbytes > max_bytes:
        raise HeaderError(f"{header.path}: {name} is {info.nbytes} bytes; only small marker tensors are read here")
    with open(header.path, "rb") as f:
        f.seek(header.data_start + info.begin)
        data = f.read(info.nbytes)
    if len(data) != info.nbytes:
        raise HeaderError(f"{header.path}: {name} is truncated")
    return data


def dtype_counts(header: SafetensorsHeader) -> dict:
    counts = {}
    for info in header.tensors.values():
        counts[info.dtype] = counts.get(info.dtype, 0) + 1
    return dict(sorted(counts.items()))

"""A safetensors file's header, read with plain file I/O: no torch, no tensor data.

The format is an 8-byte little-endian header length, a JSON header mapping each tensor name to
{"dtype", "shape", "data_offsets": [begin, end]} (offsets relative to the byte after the header)
plus an optional "__metadata__" string map, then the raw tensor bytes.

`read_raw_bytes` reads the bytes of one *small* tensor (a ComfyUI `comfy_quant` marker is a few
dozen uint8 values holding JSON); it refuses anything larger than `max_bytes`, so it can never be
used to pull a weight into memory by accident.
"""
import json
import os
import struct
from dataclasses import dataclass, field

MAX_HEADER_BYTES = 100 * 1024 * 1024    # the safetensors library's own limit

# bytes per element for the dtypes safetensors writes (sub-byte types round up per tensor)
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


class HeaderError(ValueError):
    """The file is not a readable safetensors file."""


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
    """Parse the header of the safetensors file at `path` (reads only the header bytes)."""
    path = os.path.expanduser(str(path))
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            raw_len = f.read(8)
            if len(raw_len) != 8:
                raise HeaderError(f"{path}: too short to be a safetensors file")
            (n,) = struct.unpack("<Q", raw_len)
            if n == 0 or n > MAX_HEADER_BYTES or 8 + n > size:
                raise HeaderError(f"{path}: not a safetensors file (header length {n})")
            blob = f.read(n)
    except OSError as e:
        raise HeaderError(f"{path}: cannot read: {e}") from None
    try:
        doc = json.loads(blob.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise HeaderError(f"{path}: header is not JSON: {e}") from None
    if not isinstance(doc, dict):
        raise HeaderError(f"{path}: header is not a JSON object")
    metadata = doc.pop("__metadata__", None) or {}
    if not isinstance(metadata, dict):
        raise HeaderError(f"{path}: __metadata__ is not a string map")
    data_start = 8 + n
    data_len = size - data_start
    tensors = {}
    for name, entry in doc.items():
        try:
            dtype = str(entry["dtype"])
            shape = tuple(int(s) for s in entry["shape"])
            begin, end = (int(o) for o in entry["data_offsets"])
        except (KeyError, TypeError, ValueError):
            raise HeaderError(f"{path}: malformed header entry for {name!r}") from None
        if not (0 <= begin <= end <= data_len):
            raise HeaderError(f"{path}: tensor {name!r} lies outside the file")
        tensors[name] = TensorInfo(name, dtype, shape, begin, end)
    return SafetensorsHeader(path, tensors, {str(k): str(v) for k, v in metadata.items()}, data_start, size)


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

"""Safetensors files of real shapes over zero data: sparse files, so real dimensions need no real
weights (header-only detection checks, the switch benchmark).

    write_sparse(path, shapes, dtype="BF16", markers=()) -> (data_start, {name: offset in the data})
"""
import json
import math
import struct


def write_sparse(path, shapes: dict, dtype: str = "BF16", markers=()) -> tuple:
    """`shapes`: {name: shape} in file order, stored as `dtype` (a 2-byte float type); `markers`: names
    written as empty F32 tensors (SDXL's v_pred). Returns where the data starts in the file and each
    tensor's offset from there."""
    entries, offsets, offset = {}, {}, 0
    for name, shape in shapes.items():
        n = 2 * math.prod(shape)
        entries[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + n]}
        offsets[name], offset = offset, offset + n
    for name in markers:
        entries[name] = {"dtype": "F32", "shape": [0], "data_offsets": [offset, offset]}
    blob = json.dumps(entries).encode()
    blob += b" " * (-len(blob) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(blob)) + blob)
        f.truncate(8 + len(blob) + offset)
    return 8 + len(blob), offsets

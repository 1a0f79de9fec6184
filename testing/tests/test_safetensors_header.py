"""The strict safetensors header check (toolkit/models/formats/safetensors_header.py): every malformed
case is a HeaderError saying what is wrong, every file the library writes passes, and a hypothesis
strategy of malformed headers finds nothing that raises anything else, or that passes the check but
does not load with the safetensors library."""
import json
import os
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolkit.models.formats.safetensors_header import (DTYPE_BITS, MAX_HEADER_BYTES, HeaderError, check_file,
                                                       read_header)


def pack(header, data: bytes = b"", text: bytes | None = None, length: int | None = None) -> bytes:
    """A file: the 8-byte length (`length`, else the text's), the header text (`text`, else JSON), data."""
    text = json.dumps(header).encode() if text is None else text
    return struct.pack("<Q", len(text) if length is None else length) + text + data


def entry(dtype, shape, begin, end):
    return {"dtype": dtype, "shape": list(shape), "data_offsets": [begin, end]}


# two F32 [2, 2] tensors and a U8 [3]: 16 + 16 + 3 bytes
GOOD = {"a": entry("F32", (2, 2), 0, 16), "b": entry("F32", (2, 2), 16, 32), "c": entry("U8", (3,), 32, 35)}
DATA = bytes(range(35))


def with_entry(name, **change):
    header = json.loads(json.dumps(GOOD))
    header[name].update(change)
    return header


def write(tmp_path, name, raw):
    path = tmp_path / f"{name}.safetensors"
    path.write_bytes(raw)
    return str(path)


CASES = {
    # name: (file bytes, words the reason holds)
    "zero_bytes": (b"", "too short"),
    "seven_bytes": (b"\x10\0\0\0\0\0\0", "too short"),
    "length_zero": (pack(GOOD, DATA, length=0), "header length 0"),
    "length_huge": (pack(GOOD, DATA, length=2 ** 63), "over the format's limit"),
    "length_over_limit": (struct.pack("<Q", MAX_HEADER_BYTES + 1) + b"{}", "over the format's limit"),
    "length_past_end": (pack(GOOD, b"", length=10_000), "only"),
    "length_short": (pack(GOOD, DATA, length=20), "not JSON"),
    "not_json": (pack(None, DATA, text=b"{this is not json}"), "not JSON"),
    "not_utf8": (pack(None, DATA, text=b'{"\xff": 1}'), "not UTF-8"),
    "not_object": (pack(None, DATA, text=b'[{"dtype": "F32"}]'), "not JSON"),
    "leading_space": (pack(None, DATA, text=b" " + json.dumps(GOOD).encode()), "starting with '{'"),
    "nan": (pack(None, DATA, text=json.dumps(GOOD).replace("[2, 2]", "[NaN, 2]", 1).encode()), "not JSON"),
    "duplicate_name": (pack(None, DATA, text=b'{"a": %s, "a": %s}' % (json.dumps(GOOD["a"]).encode(),
                                                                        json.dumps(GOOD["a"]).encode())), "twice"),
    "lone_surrogate": (pack(None, b"\0", text=b'{"\\ud800": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}}'),
                       "not valid Unicode"),
    "entry_not_object": (pack({**GOOD, "c": [1, 2]}, DATA), "not an object"),
    "entry_missing_field": (pack({**GOOD, "c": {"dtype": "U8", "shape": [3]}}, DATA), "no data_offsets"),
    "entry_unknown_field": (pack(with_entry("c", extra=1), DATA), "unknown field 'extra'"),
    "unknown_dtype": (pack(with_entry("a", dtype="F33"), DATA), "unknown dtype 'F33'"),
    "lowercase_dtype": (pack(with_entry("a", dtype="f32"), DATA), "unknown dtype"),
    "negative_shape": (pack(with_entry("a", shape=[-2, -2]), DATA), "non-negative integers"),
    "negative_zero": (pack(None, DATA, text=json.dumps(GOOD).replace("[2, 2]", "[-0, 2]", 1).encode()),
                      "non-negative integers"),
    "float_shape": (pack(with_entry("a", shape=[2.0, 2]), DATA), "non-negative integers"),
    "bool_shape": (pack(with_entry("a", shape=[True, 4]), DATA), "non-negative integers"),
    "shape_not_list": (pack(with_entry("a", shape=4), DATA), "non-negative integers"),
    "offsets_three": (pack(with_entry("c", data_offsets=[32, 35, 35]), DATA), "[begin, end]"),
    "offsets_negative": (pack(with_entry("a", data_offsets=[-16, 0]), DATA), "[begin, end]"),
    "offsets_too_big": (pack(with_entry("a", data_offsets=[0, 2 ** 64]), DATA), "[begin, end]"),
    "end_before_begin": (pack(with_entry("a", data_offsets=[16, 0]), DATA), "before it begins"),
    "claims_1tb": (pack(with_entry("c", shape=[2 ** 20, 2 ** 20], data_offsets=[32, 32 + 2 ** 40]), DATA),
                   "lies outside the file"),
    "shape_1tb_offsets_small": (pack(with_entry("a", shape=[2 ** 18, 2 ** 20]), DATA), "1099511627776 bytes"),
    "shape_overflows": (pack(with_entry("c", shape=[2 ** 40, 2 ** 40, 0], data_offsets=[32, 32]), DATA[:32]),
                        "more elements than the format counts"),
    "size_mismatch": (pack(with_entry("c", shape=[4]), DATA), "4 bytes, but its data_offsets hold 3"),
    "subbyte_half": (pack({"x": entry("F4", (3,), 0, 1)}, b"\0"), "do not fill whole bytes"),
    "overlap": (pack(with_entry("b", data_offsets=[0, 16]), DATA), "overlap"),
    "hole": (pack({"a": GOOD["a"], "c": entry("U8", (3,), 32, 35)}, DATA), "belong to no tensor"),
    "trailing_bytes": (pack(GOOD, DATA + b"\0" * 5), "5 bytes after the last tensor"),
    "truncated": (pack(GOOD, DATA[:30]), "lies outside the file"),
    "metadata_not_map": (pack({**GOOD, "__metadata__": ["x"]}, DATA), "not a string map"),
    "metadata_not_string": (pack({**GOOD, "__metadata__": {"steps": 10}}, DATA), "is not a string"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_malformed_case_is_refused_by_name(tmp_path, name):
    raw, why = CASES[name]
    path = write(tmp_path, name, raw)
    with pytest.raises(HeaderError) as e:
        read_header(path)
    assert why in e.value.reason, e.value.reason
    assert e.value.path == path and str(e.value) == f"{path}: {e.value.reason}"
    assert e.value.named() == f"{name}.safetensors: {e.value.reason}"      # the basename, never where it lies
    assert str(tmp_path) not in e.value.reason


def test_the_library_refuses_every_case_too():
    """Each case is malformed by the library's reading as well (or breaks the spec the library does not
    check: leading whitespace, a duplicate name, a hole-free file whose entry has an unknown field)."""
    from safetensors import deserialize
    lenient = {"leading_space", "duplicate_name", "entry_unknown_field"}
    for name, (raw, _why) in CASES.items():
        if name in lenient:
            continue
        with pytest.raises(Exception):
            deserialize(raw)


def test_what_the_library_writes_passes(tmp_path):
    import numpy as np
    import torch
    from safetensors.numpy import save_file as save_numpy
    from safetensors.torch import save_file

    tensors = {"w": torch.randn(3, 4), "h": torch.zeros(5, dtype=torch.float16), "b": torch.ones(2, dtype=torch.bfloat16),
               "s": torch.tensor(2.0), "e": torch.zeros(0, 3), "i": torch.arange(7), "f8": torch.zeros(4).to(torch.float8_e4m3fn),
               "z": torch.zeros(2, 0, dtype=torch.int8)}
    path = str(tmp_path / "lib.safetensors")
    save_file(tensors, path, metadata={"format": "pt", "ss_note": "é ✓"})
    h = read_header(path)
    assert set(h.tensors) == set(tensors) and h.metadata == {"format": "pt", "ss_note": "é ✓"}
    assert h.tensors["w"].shape == (3, 4) and h.tensors["f8"].dtype == "F8_E4M3" and h.tensors["s"].shape == ()
    save_numpy({"u": np.zeros((2, 3), np.uint16), "c": np.zeros(2, np.complex64)}, str(tmp_path / "np.safetensors"))
    assert read_header(str(tmp_path / "np.safetensors")).tensors["c"].dtype == "C64"
    empty = str(tmp_path / "empty.safetensors")
    save_file({}, empty)
    assert read_header(empty).tensors == {}


def test_sub_byte_dtypes_follow_the_spec(tmp_path):
    """F4 packs two values a byte, F6 four values in three bytes: a tensor must fill whole bytes."""
    assert read_header(write(tmp_path, "f4", pack({"x": entry("F4", (2, 3), 0, 3)}, b"\0" * 3))).tensors["x"].nbytes == 3
    assert read_header(write(tmp_path, "f6", pack({"x": entry("F6_E2M3", (4,), 0, 3)}, b"\0" * 3)))
    with pytest.raises(HeaderError, match="do not fill whole bytes"):
        read_header(write(tmp_path, "f6_bad", pack({"x": entry("F6_E3M2", (2,), 0, 2)}, b"\0" * 2)))


def test_check_file_is_cached_until_the_file_changes(tmp_path, monkeypatch):
    from toolkit.models.formats import safetensors_header as sh
    path = write(tmp_path, "cached", pack(GOOD, DATA))
    calls = []
    real = sh.read_header
    monkeypatch.setattr(sh, "read_header", lambda p: calls.append(p) or real(p))
    first = check_file(path)
    assert check_file(path) is first and len(calls) == 1         # parsed once
    st = os.stat(path)
    with open(path, "r+b") as f:                                 # same size, same inode: a new mtime
        f.seek(8 + len(json.dumps(GOOD)))
        f.write(b"\x01")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    assert check_file(path) is not first and len(calls) == 2
    with open(path, "wb") as f:                                  # rewritten malformed: refused, not the cached answer
        f.write(pack(GOOD, DATA[:10]))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 2_000_000_000))
    with pytest.raises(HeaderError, match="lies outside the file"):
        check_file(path)
    with pytest.raises(HeaderError, match="cannot read"):
        check_file(str(tmp_path / "missing.safetensors"))


# -- hypothesis: valid files, then one or two malformations ---------------------------------------------
NAMES = st.text(st.characters(blacklist_categories=("Cs",)), max_size=6)


@st.composite
def valid_files(draw):
    """(header dict, data bytes) of a well-formed file: tensors of any dtype in any header order, contiguous."""
    names = draw(st.lists(NAMES.filter(lambda n: n != "__metadata__"), unique=True, max_size=4))
    rows = []
    for name in names:
        dtype = draw(st.sampled_from(sorted(DTYPE_BITS)))
        shape = draw(st.lists(st.integers(0, 4), max_size=3))
        numel = 1
        for s in shape:
            numel *= s
        if numel * DTYPE_BITS[dtype] % 8:        # a sub-byte tensor fills whole bytes: 8 more values of it
            shape = shape + [8]
            numel *= 8
        rows.append((name, dtype, shape, numel * DTYPE_BITS[dtype] // 8))
    order = draw(st.permutations(list(range(len(rows)))))
    header, at = {}, 0
    for i in order:                              # the data in one order, the header in another
        name, dtype, shape, nbytes = rows[i]
        header[name] = entry(dtype, shape, at, at + nbytes)
        at += nbytes
    header = {name: header[name] for name, *_ in rows}
    meta = draw(st.none() | st.dictionaries(NAMES, NAMES, max_size=3))
    if meta is not None:
        header["__metadata__"] = meta
    return header, draw(st.binary(min_size=at, max_size=at))


JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers(-2 ** 70, 2 ** 70) | st.floats(allow_nan=False)
                           | st.text(max_size=4), lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.text(max_size=3), inner, max_size=3), max_leaves=6)


@st.composite
def malformed_files(draw):
    header, data = draw(valid_files())
    names = [n for n in header if n != "__metadata__"]
    text, length = json.dumps(header).encode() + b" " * draw(st.integers(0, 7)), None
    for _ in range(draw(st.integers(1, 2))):
        kind = draw(st.sampled_from(["length", "cut", "append", "byte", "entry", "field", "metadata", "top",
                                     "text"]))
        if kind == "length":
            length = draw(st.sampled_from([0, 1, len(text) - 1, len(text) + 1, len(text) + len(data) + 1,
                                           MAX_HEADER_BYTES + 1, 2 ** 64 - 1]) | st.integers(0, 2 ** 64 - 1))
        elif kind == "cut":
            data = data[:draw(st.integers(0, max(len(data) - 1, 0)))]
        elif kind == "append":
            data += draw(st.binary(min_size=1, max_size=9))
        elif kind == "byte" and text:
            i = draw(st.integers(0, len(text) - 1))
            text = text[:i] + draw(st.binary(max_size=2)) + text[i + 1:]
        elif kind == "entry" and names:
            name = draw(st.sampled_from(names))
            field = draw(st.sampled_from(["dtype", "shape", "data_offsets"]))
            doc = json.loads(text) if _is_json_object(text) else dict(header)
            if isinstance(doc.get(name), dict):
                doc[name] = {**doc[name], field: draw(JSON_VALUES | st.lists(st.integers(-3, 2 ** 65), max_size=3)
                                                      | st.sampled_from(["f32", "F8", "BF16", "I64"]))}
            text = json.dumps(doc).encode()
        elif kind == "field" and names:
            name = draw(st.sampled_from(names))
            doc = json.loads(text) if _is_json_object(text) else dict(header)
            if isinstance(doc.get(name), dict):
                e = dict(doc[name])
                if draw(st.booleans()):
                    e.pop(draw(st.sampled_from(sorted(e))), None)
                else:
                    e[draw(st.text(max_size=4))] = draw(JSON_VALUES)
                doc[name] = e
            text = json.dumps(doc).encode()
        elif kind == "metadata":
            doc = json.loads(text) if _is_json_object(text) else dict(header)
            doc["__metadata__"] = draw(JSON_VALUES)
            text = json.dumps(doc).encode()
        elif kind == "top":
            text = json.dumps(draw(JSON_VALUES)).encode()
        elif kind == "text":
            text = draw(st.sampled_from([b" ", b"\n", b"\0", b"\xef\xbb\xbf", b'{"\\ud800": 1, ', b"NaN", b"-0",
                                         b'"a": 1, "a": 2, '])) + text
    return pack(None, data, text=text, length=length)


def _is_json_object(text: bytes) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except ValueError:
        return False


HYPO = settings(max_examples=400, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _loads_with_the_library(path: str, raw: bytes, header):
    from safetensors import deserialize, safe_open
    with safe_open(path, "pt") as f:
        assert set(f.keys()) == set(header.tensors)
        assert (f.metadata() or {}) == header.metadata
    got = {name: t for name, t in deserialize(raw)}
    assert set(got) == set(header.tensors)
    for name, t in header.tensors.items():
        assert got[name]["dtype"] == t.dtype and tuple(got[name]["shape"]) == t.shape
        assert len(got[name]["data"]) == t.nbytes
        assert bytes(got[name]["data"]) == raw[header.data_start + t.begin: header.data_start + t.end]


@HYPO
@given(valid_files())
def test_well_formed_files_pass_and_load(tmp_path_factory, case):
    header, data = case
    raw = pack(header, data)
    path = str(tmp_path_factory.getbasetemp() / "valid.safetensors")
    with open(path, "wb") as f:
        f.write(raw)
    h = read_header(path)
    assert list(h.tensors) == [n for n in header if n != "__metadata__"]
    _loads_with_the_library(path, raw, h)


@HYPO
@given(malformed_files())
def test_malformed_headers_are_header_errors_or_load(tmp_path_factory, raw):
    path = str(tmp_path_factory.getbasetemp() / "fuzzed.safetensors")
    with open(path, "wb") as f:
        f.write(raw)
    try:
        h = read_header(path)
    except HeaderError as e:
        assert e.path == path and e.reason and path not in e.reason
        return
    _loads_with_the_library(path, raw, h)

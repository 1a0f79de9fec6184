"""The frame protocol: round trips at every chunk boundary, fuzzed and truncated input."""
import itertools
import json
import random
import struct

import pytest

from extensions_built_in.inference_engine.protocol import MAX_HEADER, FrameError, FrameReader, encode_frame, read_frames


def _frames():
    return [({"type": "start", "request_id": "r1", "model": {"arch": "zimage"}, "note": "ü✓"}, b""),
            ({"type": "latent", "request_id": "r1", "shape": [1, 2, 2, 2]}, bytes(range(16))),
            ({"type": "progress", "request_id": "r1", "step": 1, "total": 2}, b""),
            ({"type": "end", "request_id": "r1", "status": "ok"}, b"")]


def test_round_trip_split_at_every_byte_boundary():
    data = b"".join(encode_frame(dict(h), p) for h, p in _frames())
    for cut in range(len(data) + 1):
        reader = FrameReader()
        got = reader.feed(data[:cut]) + reader.feed(data[cut:])
        reader.close()
        assert got == _frames(), cut


def test_byte_at_a_time_and_random_chunks():
    data = b"".join(encode_frame(dict(h), p) for h, p in _frames()) * 3
    assert list(read_frames(data[i:i + 1] for i in range(len(data)))) == _frames() * 3
    rng = random.Random(0)
    for _ in range(50):
        chunks, i = [], 0
        while i < len(data):
            n = rng.randint(1, 40)
            chunks.append(data[i:i + n])
            i += n
        assert list(read_frames(chunks)) == _frames() * 3


def test_exact_wire_format():
    frame = encode_frame({"type": "end", "request_id": "x", "status": "ok"}, b"\x01\x02")
    hlen = struct.unpack("<I", frame[:4])[0]
    assert json.loads(frame[4:4 + hlen]) == {"type": "end", "request_id": "x", "status": "ok"}
    assert struct.unpack("<Q", frame[4 + hlen:12 + hlen])[0] == 2 and frame[12 + hlen:] == b"\x01\x02"


def test_truncated_stream_is_an_error():
    data = encode_frame({"type": "latent", "request_id": "r"}, b"abcdef")
    for cut in range(1, len(data)):
        reader = FrameReader()
        reader.feed(data[:cut])
        with pytest.raises(FrameError, match="middle of a frame"):
            reader.close()


def test_oversized_header_rejected_before_allocation():
    reader = FrameReader()
    with pytest.raises(FrameError, match="header length"):
        reader.feed(struct.pack("<I", MAX_HEADER + 1) + b"{")


def test_oversized_payload_rejected_before_allocation():
    reader = FrameReader(max_payload=100)
    header = json.dumps({"type": "latent", "request_id": "r"}).encode()
    with pytest.raises(FrameError, match="payload length"):
        reader.feed(struct.pack("<I", len(header)) + header + struct.pack("<Q", 2**62))


@pytest.mark.parametrize("header", [b"not json", b"[1,2]", b'{"type":"x"}', b"\xff\xfe", b'{"request_id":"r"}'])
def test_bad_headers_are_clear_errors(header):
    with pytest.raises(FrameError):
        FrameReader().feed(struct.pack("<I", len(header)) + header + struct.pack("<Q", 0))


def test_fuzzed_input_never_crashes_otherwise():
    """Random bytes and mutated valid streams: only FrameError, never another exception or a hang."""
    rng = random.Random(1)
    valid = b"".join(encode_frame(dict(h), p) for h, p in _frames())
    for i in range(2000):
        if i % 2:
            data = bytes(rng.randrange(256) for _ in range(rng.randint(0, 64)))
        else:
            data = bytearray(valid)
            for _ in range(rng.randint(1, 4)):
                data[rng.randrange(len(data))] = rng.randrange(256)
        reader = FrameReader(max_payload=1 << 16)
        try:
            reader.feed(bytes(data))
            reader.close()
        except FrameError:
            pass


def test_encode_requires_type_and_request_id():
    with pytest.raises(FrameError):
        encode_frame({"type": "end"})


# -- limits: the same three numbers on both sides, every breach a FrameError ----------------------

def _raw(header: bytes, plen: int = 0) -> bytes:
    return struct.pack("<I", len(header)) + header + struct.pack("<Q", plen)


def test_deep_nesting_is_a_frame_error_not_a_recursion_error():
    """A 200 KB header of nested arrays blew the JSON decoder's stack (RecursionError)."""
    deep = b'{"type":"x","request_id":"r","a":' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    with pytest.raises(FrameError, match="nest"):
        FrameReader().feed(_raw(deep))


def test_nesting_up_to_the_limit_parses_and_strings_do_not_count():
    from extensions_built_in.inference_engine.protocol import MAX_DEPTH

    def nested(levels):   # the header object is level 1
        return b'{"type":"x","request_id":"r","a":' + b"[" * (levels - 1) + b"]" * (levels - 1) + b"}"
    assert FrameReader().feed(_raw(nested(MAX_DEPTH)))[0][0]["type"] == "x"
    with pytest.raises(FrameError, match="nest"):
        FrameReader().feed(_raw(nested(MAX_DEPTH + 1)))
    brackets = json.dumps({"type": "x", "request_id": "r", "s": "[{" * 1000 + '\\"[' * 10}).encode()
    assert FrameReader().feed(_raw(brackets))[0][0]["s"].startswith("[{[{")
    with pytest.raises(FrameError, match="nest"):     # the encoder holds headers to the same limit
        encode_frame({"type": "x", "request_id": "r", "a": json.loads("[" * MAX_DEPTH + "]" * MAX_DEPTH)})


@pytest.mark.parametrize("header", [
    b'{"type":"x","request_id":"r","n":' + b"1" * 5000 + b"}",   # past Python's int-digits limit (ValueError)
    b'{"type":"x","request_id":"r","n":NaN}',                   # JSON.parse refuses these: so do we
    b'{"type":"x","request_id":"r","n":-Infinity}',
    b'{"type":1,"request_id":"r"}',                             # the UI needs strings: so do we
    b'{"type":"x","request_id":null}',
    b"\xef\xbb\xbf" + b'{"type":"x","request_id":"r"}',         # a BOM: TextDecoder would drop it silently
    b"",
])
def test_other_bad_headers_are_frame_errors(header):
    with pytest.raises(FrameError):
        FrameReader().feed(_raw(header))


def test_payload_limit_and_error_is_sticky():
    from extensions_built_in.inference_engine.protocol import MAX_PAYLOAD
    header = b'{"type":"latent","request_id":"r"}'
    reader = FrameReader()
    # exactly the limit is accepted (the reader then waits for the payload)
    assert reader.feed(_raw(header, 0) + _raw(header, MAX_PAYLOAD)) == [({"type": "latent", "request_id": "r"}, b"")]
    reader = FrameReader()
    with pytest.raises(FrameError, match="payload length"):
        reader.feed(_raw(header, MAX_PAYLOAD + 1))
    with pytest.raises(FrameError, match="payload length"):   # a broken stream stays broken
        reader.feed(encode_frame({"type": "end", "request_id": "r"}))
    with pytest.raises(FrameError):
        reader.close()
    with pytest.raises(FrameError, match="payload"):   # the encoder holds payloads to the same limit
        _encode_oversize(MAX_PAYLOAD)


def _encode_oversize(limit):
    class Huge(bytes):                    # reports a length past the limit without allocating it
        def __len__(self):
            return limit + 1
    return encode_frame({"type": "latent", "request_id": "r"}, Huge())


def test_limits_are_the_uis():
    """ui/src/utils/engineStream.ts holds the same limits (FRAME_LIMITS)."""
    import os
    import re

    from extensions_built_in.inference_engine import protocol
    ts = open(os.path.join(os.path.dirname(__file__), "..", "..", "ui", "src", "utils", "engineStream.ts")).read()
    block = re.search(r"export const FRAME_LIMITS[^{]*\{(.*?)\}", ts, re.S).group(1)
    got = {k: eval(v, {}) for k, v in re.findall(r"(\w+):\s*(\d[0-9 <*]*)", block)}   # noqa: S307 (digits, <<, *)
    assert got == {"maxHeaderBytes": protocol.MAX_HEADER, "maxPayloadBytes": protocol.MAX_PAYLOAD,
                   "maxDepth": protocol.MAX_DEPTH}


# -- fuzz (hypothesis): fixed seed, a modest budget, no deadlines (CI machines are loaded) ----------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from extensions_built_in.inference_engine.protocol import FRAME_TYPES, MAX_DEPTH, MAX_PAYLOAD  # noqa: E402

FUZZ = settings(derandomize=True, max_examples=150, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

_json = st.recursive(
    st.none() | st.booleans() | st.integers(-2**63, 2**63) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12)
_header = st.builds(lambda t, rid, extra: {**extra, "type": t, "request_id": rid},
                    st.sampled_from(FRAME_TYPES) | st.text(max_size=8), st.text(max_size=16),
                    st.dictionaries(st.text(max_size=8), _json, max_size=4))
_frame = st.tuples(_header, st.binary(max_size=64))
_frames_st = st.lists(_frame, min_size=1, max_size=4)


def _parse(chunks, max_payload=MAX_PAYLOAD):
    """(frames, error): the frames the reader handed out before any FrameError, and that error's
    text (None for a clean end). Any other exception fails the test."""
    reader, frames = FrameReader(max_payload), []
    try:
        for chunk in chunks:
            frames += reader.feed(chunk)
        reader.close()
    except FrameError as e:
        return frames, str(e)
    return frames, None


def _split(data: bytes, cuts) -> list[bytes]:
    cuts = sorted({c % (len(data) + 1) for c in cuts})
    return [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)])]


def _agrees_with_bytewise(data: bytes, cuts, max_payload=1 << 12):
    """However the input is split, the reader ends as it does byte by byte: the same error or none,
    and (cut short by an error only) the same frames in the same order."""
    ref_frames, ref_error = _parse([data[i:i + 1] for i in range(len(data))], max_payload)
    frames, error = _parse(_split(data, cuts), max_payload)
    assert (error is None) == (ref_error is None), (error, ref_error)
    assert frames == ref_frames[:len(frames)]
    if error is None:
        assert frames == ref_frames
    for header, payload in frames:
        assert isinstance(header["type"], str) and isinstance(header["request_id"], str)
        assert isinstance(payload, bytes) and len(payload) <= max_payload
    return frames, error


@FUZZ
@given(_frames_st, st.lists(st.integers(0, 10**6), max_size=6))
def test_fuzz_valid_streams_round_trip(frames, cuts):
    data = b"".join(encode_frame(dict(h), p) for h, p in frames)
    assert _parse([data]) == (frames, None)
    assert _parse(_split(data, cuts)) == (frames, None)


@settings(FUZZ, max_examples=40)          # each example parses its stream ~3 x its length times
@given(_frames_st)
def test_fuzz_valid_streams_split_at_every_boundary(frames):
    data = b"".join(encode_frame(dict(h), p) for h, p in frames)
    for cut in range(len(data) + 1):
        assert _parse([data[:cut], data[cut:]]) == (frames, None), cut
    assert _parse([data[i:i + 1] for i in range(len(data))]) == (frames, None)
    ends = {0, *itertools.accumulate(len(encode_frame(dict(h), p)) for h, p in frames)}
    for cut in range(len(data)):          # a stream cut short is an error at its end, never a hang
        got, error = _parse([data[:cut]])
        assert got == frames[:len(got)] and (error is None) == (cut in ends), cut


@FUZZ
@given(st.binary(max_size=200), st.lists(st.integers(0, 10**6), max_size=6))
def test_fuzz_random_bytes(data, cuts):
    _agrees_with_bytewise(data, cuts)


_edit = st.tuples(st.sampled_from(["flip", "insert", "delete"]), st.integers(0, 10**6), st.integers(0, 255))


@FUZZ
@given(_frames_st, st.lists(_edit, min_size=1, max_size=4), st.integers(0, 10**6),
       st.lists(st.integers(0, 10**6), max_size=6))
def test_fuzz_mutated_valid_streams(frames, edits, truncate, cuts):
    data = bytearray(b"".join(encode_frame(dict(h), p) for h, p in frames))
    for op, at, byte in edits:
        at %= len(data) + 1
        if op == "insert":
            data[at:at] = bytes([byte])
        elif at < len(data):
            if op == "flip":
                data[at] ^= byte or 1
            else:
                del data[at]
    if truncate % 3 == 0:
        del data[truncate % (len(data) + 1):]
    _agrees_with_bytewise(bytes(data), cuts)


@FUZZ
@given(st.integers(1, 3 * MAX_DEPTH) | st.sampled_from([2_000, 100_000]),
       st.lists(st.sampled_from("[{"), min_size=1, max_size=8), st.booleans())
def test_fuzz_nesting_depth(depth, kinds, in_string):
    """A header nested `depth` levels (the header object is 1) parses iff depth <= MAX_DEPTH; brackets
    inside a string never count."""
    opens = [kinds[i % len(kinds)] for i in range(depth - 1)]
    value = ("".join("[" if o == "[" else '{"k":' for o in opens) + "0"
             + "".join("]" if o == "[" else "}" for o in reversed(opens)))
    if in_string:
        value = json.dumps(value)
    raw = ('{"type":"x","request_id":"r","v":' + value + "}").encode()
    frames, error = _parse([_raw(raw)])
    if depth <= MAX_DEPTH or in_string:
        assert error is None and frames[0][0]["type"] == "x"
    else:
        assert frames == [] and "nests deeper" in error


@FUZZ
@given(st.integers(0, 2**32 - 1), st.integers(0, 2**64 - 1), st.integers(1, 1 << 20))
def test_fuzz_lengths(hlen, plen, max_payload):
    """A length prefix over its limit is refused as soon as it is read (nothing allocated for it);
    one within it waits for its bytes."""
    _, error = _parse([struct.pack("<I", hlen)])
    if hlen > MAX_HEADER:
        assert "header length" in error
    else:
        assert error == "stream ended in the middle of a frame" or hlen == 0
    header = b'{"type":"latent","request_id":"r"}'
    reader = FrameReader(max_payload)
    if plen > max_payload:
        with pytest.raises(FrameError, match="payload length"):
            reader.feed(_raw(header, plen))
    else:
        assert reader.feed(_raw(header, plen) + b"\0" * min(plen, 16)) == ([(json.loads(header), b"\0" * plen)]
                                                                           if plen <= 16 else [])

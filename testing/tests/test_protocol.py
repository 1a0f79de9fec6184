"""The frame protocol: round trips at every chunk boundary, fuzzed and truncated input."""
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

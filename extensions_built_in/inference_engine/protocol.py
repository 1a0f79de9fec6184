"""The frame stream: `u32 LE header_len | UTF-8 JSON header | u64 LE payload_len | payload`.

Mirrored by ui/src/utils/engineStream.ts. Every header has `type` and `request_id`; a stream
ends with exactly one `end` frame.
"""
import json
import struct

FRAME_TYPES = ("start", "status", "progress", "latent", "result", "error", "end")
MAX_HEADER = 1 << 20                 # 1 MiB
DEFAULT_MAX_PAYLOAD = 512 << 20      # 512 MiB: a large video latent fits, a corrupt length does not
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")


class FrameError(ValueError):
    """Malformed stream input."""


def encode_frame(header: dict, payload: bytes = b"") -> bytes:
    if "type" not in header or "request_id" not in header:
        raise FrameError("a frame header needs `type` and `request_id`")
    raw = json.dumps(header, separators=(",", ":"), allow_nan=False).encode("utf-8")
    if len(raw) > MAX_HEADER:
        raise FrameError(f"frame header is {len(raw)} bytes, over the {MAX_HEADER} limit")
    payload = bytes(payload) if not isinstance(payload, (bytes, bytearray, memoryview)) else payload
    return b"".join((_U32.pack(len(raw)), raw, _U64.pack(len(payload)), payload))


class FrameReader:
    """Incremental parser: feed arbitrary chunks, get complete (header, payload) frames back.
    Memory stays bounded: a header over 1 MiB or a payload over `max_payload` is rejected
    as soon as its length prefix is read, before anything is allocated for it."""

    def __init__(self, max_payload: int = DEFAULT_MAX_PAYLOAD):
        self.max_payload = max_payload
        self._buf = bytearray()
        self._header = None
        self._need_payload = None

    def feed(self, data: bytes) -> list[tuple[dict, bytes]]:
        self._buf += data
        frames = []
        while True:
            frame = self._next()
            if frame is None:
                return frames
            frames.append(frame)

    def _next(self):
        buf = self._buf
        if self._header is None:
            if len(buf) < 4:
                return None
            (hlen,) = _U32.unpack_from(buf, 0)
            if hlen > MAX_HEADER:
                raise FrameError(f"frame header length {hlen} is over the {MAX_HEADER} limit")
            if len(buf) < 4 + hlen + 8:
                return None
            try:
                header = json.loads(bytes(buf[4:4 + hlen]).decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as e:
                raise FrameError(f"frame header is not valid JSON: {e}") from None
            if not isinstance(header, dict) or "type" not in header or "request_id" not in header:
                raise FrameError("frame header must be an object with `type` and `request_id`")
            (plen,) = _U64.unpack_from(buf, 4 + hlen)
            if plen > self.max_payload:
                raise FrameError(f"frame payload length {plen} is over the {self.max_payload} limit")
            del buf[:4 + hlen + 8]
            self._header, self._need_payload = header, plen
        if len(buf) < self._need_payload:
            return None
        payload = bytes(buf[:self._need_payload])
        del buf[:self._need_payload]
        header, self._header, self._need_payload = self._header, None, None
        return header, payload

    def close(self):
        """Call at end of input: a partial frame left over is an error."""
        if self._buf or self._header is not None:
            raise FrameError("stream ended in the middle of a frame")


def read_frames(chunks, max_payload: int = DEFAULT_MAX_PAYLOAD):
    """Frames from an iterable of byte chunks (e.g. httpx `iter_bytes()`)."""
    reader = FrameReader(max_payload)
    for chunk in chunks:
        yield from reader.feed(chunk)
    reader.close()

"""The frame stream: `u32 LE header_len | UTF-8 JSON header | u64 LE payload_len | payload`.

Mirrored by ui/src/utils/engineStream.ts. Every header is a JSON object whose `type` and
`request_id` are strings; a stream ends with exactly one `end` frame. Malformed input of any kind
is a FrameError, never another exception, and memory stays bounded by the limits below.
"""
import json
import re
import struct

FRAME_TYPES = ("start", "status", "progress", "latent", "preview", "result", "error", "end")

# The limits a frame stream is held to, by the reader and the encoder alike. ui/src/utils/engineStream.ts
# (FRAME_LIMITS) holds the same three numbers: change both together (each side's tests compare them).
MAX_HEADER = 1 << 20       # bytes of header JSON; the largest real one, a start frame, is a few KB
MAX_PAYLOAD = 512 << 20    # bytes; a latent preview (a few float16 frames) is a few MB, a corrupt length is not
MAX_DEPTH = 64             # objects/arrays open at once (the header itself is 1); real headers nest 4 deep
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
# a JSON string (to the closing quote, or to the end of an unterminated one: one linear pass) or a bracket
_TOKENS = re.compile(rb'"(?:[^"\\]++|\\.)*+"?|[\[\]{}]', re.S)
_OPEN = frozenset(b"[{")


class FrameError(ValueError):
    """Malformed stream input."""


def check_depth(raw: bytes):
    """Refuse JSON nested deeper than MAX_DEPTH before a recursive decoder sees it (as engineStream.ts
    jsonDepthOver: brackets inside strings do not count)."""
    if raw.count(b"[") + raw.count(b"{") <= MAX_DEPTH:
        return
    depth = 0
    for tok in _TOKENS.findall(raw):
        if tok[0] in _OPEN:
            depth += 1
            if depth > MAX_DEPTH:
                raise FrameError(f"frame header nests deeper than {MAX_DEPTH} levels")
        elif tok[0] != 0x22:      # a closing bracket (a string token starts with '"')
            depth -= 1


def _no_constant(name):
    raise ValueError(f"{name} is not JSON")   # JSON.parse refuses NaN and Infinity: so do we


def decode_header(raw: bytes) -> dict:
    try:
        check_depth(raw)
        header = json.loads(raw.decode("utf-8"), parse_constant=_no_constant)
    except FrameError:
        raise
    except (UnicodeDecodeError, ValueError, RecursionError) as e:   # ValueError: JSON, or an int too long
        raise FrameError(f"frame header is not valid JSON: {e}") from None
    if not isinstance(header, dict) or not isinstance(header.get("type"), str) \
            or not isinstance(header.get("request_id"), str):
        raise FrameError("frame header must be an object with string `type` and `request_id`")
    return header


def encode_frame(header: dict, payload: bytes = b"") -> bytes:
    if "type" not in header or "request_id" not in header:
        raise FrameError("a frame header needs `type` and `request_id`")
    try:
        raw = json.dumps(header, separators=(",", ":"), allow_nan=False).encode("utf-8")
    except RecursionError:
        raise FrameError(f"frame header nests deeper than {MAX_DEPTH} levels") from None
    if len(raw) > MAX_HEADER:
        raise FrameError(f"frame header is {len(raw)} bytes, over the {MAX_HEADER} limit")
    check_depth(raw)
    payload = payload if isinstance(payload, (bytes, bytearray)) else bytes(payload)
    if len(payload) > MAX_PAYLOAD:
        raise FrameError(f"frame payload is {len(payload)} bytes, over the {MAX_PAYLOAD} limit")
    return b"".join((_U32.pack(len(raw)), raw, _U64.pack(len(payload)), payload))


class FrameReader:
    """Incremental parser: feed arbitrary chunks, get complete (header, payload) frames back.
    Memory stays bounded: a header over MAX_HEADER or a payload over `max_payload` is rejected
    as soon as its length prefix is read, before anything is allocated for it. After a FrameError
    the stream is broken: every later call raises it again."""

    def __init__(self, max_payload: int = MAX_PAYLOAD):
        self.max_payload = min(max_payload, MAX_PAYLOAD)
        self._buf = bytearray()
        self._header = None
        self._need_payload = None
        self._error: FrameError | None = None

    def feed(self, data: bytes) -> list[tuple[dict, bytes]]:
        if self._error:
            raise FrameError(str(self._error))
        self._buf += data
        frames = []
        try:
            while True:
                frame = self._next()
                if frame is None:
                    return frames
                frames.append(frame)
        except FrameError as e:
            self._error = e
            raise

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
            header = decode_header(bytes(buf[4:4 + hlen]))
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
        if self._error:
            raise FrameError(str(self._error))
        if self._buf or self._header is not None:
            self._error = FrameError("stream ended in the middle of a frame")
            raise self._error


def read_frames(chunks, max_payload: int = MAX_PAYLOAD):
    """Frames from an iterable of byte chunks (e.g. httpx `iter_bytes()`)."""
    reader = FrameReader(max_payload)
    for chunk in chunks:
        yield from reader.feed(chunk)
    reader.close()

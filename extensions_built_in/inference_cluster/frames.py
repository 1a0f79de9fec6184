"""Whole frames out of a relayed byte stream (protocol.py's layout), so that a replica which dies
mid-stream leaves the client at a frame boundary, where the ingress appends an error and an end."""
import struct

from extensions_built_in.inference_engine.protocol import encode_frame

_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")


class FrameCutter:
    def __init__(self):
        self.buffer = bytearray()
        self.ended = False          # an `end` frame went through

    def feed(self, chunk: bytes) -> bytes:
        """The complete frames `chunk` finishes, as one bytes (b"" when none)."""
        self.buffer += chunk
        at = 0
        while len(self.buffer) - at >= 4:
            header_len = _U32.unpack_from(self.buffer, at)[0]
            if len(self.buffer) - at < 4 + header_len + 8:
                break
            payload_len = _U64.unpack_from(self.buffer, at + 4 + header_len)[0]
            end = at + 4 + header_len + 8 + payload_len
            if len(self.buffer) < end:
                break
            self.ended = self.ended or self.buffer[at + 4:at + 17] == b'{"type":"end"'
            at = end
        out = bytes(self.buffer[:at])
        del self.buffer[:at]
        return out


def lost_frames(request_id: str, why: str) -> bytes:
    """What a request whose replica died ends with: an error frame, then `end`."""
    return (encode_frame({"type": "error", "request_id": request_id, "message": why, "cancelled": False})
            + encode_frame({"type": "end", "request_id": request_id, "status": "error"}))

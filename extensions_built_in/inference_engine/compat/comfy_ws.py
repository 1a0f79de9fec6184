"""ComfyUI's `/ws`: the sockets of connected clients by their `clientId`, and the messages sent to them
from any thread: JSON `{type, data}` text messages, and binary preview frames in ComfyUI's format
(a 4-byte big-endian event type, 1 = PREVIEW_IMAGE, then a 4-byte image type, 1 = JPEG, then the JPEG).

Every app serving ComfyUI's API (the engine port's /comfy, engine.comfy_port) shares one `Sockets`; a
socket belongs to the event loop that accepted it, and a message reaches it through that loop
(call_soon_threadsafe), so a prompt followed on its own thread sends in order."""
import asyncio
import json
import struct
import threading
import uuid

from fastapi import WebSocket, WebSocketDisconnect
from fastapi.responses import JSONResponse

from extensions_built_in.inference_engine.compat.common import authorized
from extensions_built_in.inference_engine.routes.common import token_matches

PREVIEW_IMAGE = 1                # ComfyUI's BinaryEventTypes.PREVIEW_IMAGE
JPEG = 1                         # its image type for a JPEG preview
MAX_WAITING = 64                 # messages a socket may have unsent before previews are skipped for it
# messages a socket may have unsent at all: past it the client is too far behind (it stopped reading) and
# is disconnected (close code 1013, try again later) rather than held in memory; a ComfyUI client that
# reconnects reads what it missed from /history. A progress message is ~150 bytes, a preview at most
# a 256 px JPEG, of which at most MAX_WAITING wait: a socket holds a few MiB at most.
MAX_BEHIND = 1024
LAGGING_CLOSE = 1013


def preview_message(jpeg: bytes) -> bytes:
    return struct.pack(">II", PREVIEW_IMAGE, JPEG) + jpeg


class Socket:
    """One client's connection: its loop and the queue its sender task empties."""

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop = loop
        self.queue: asyncio.Queue = asyncio.Queue()
        self.waiting = 0            # messages put and not taken by the sender (those scheduled on the loop too)
        self.lagging = False        # a message was dropped past MAX_BEHIND: the sender closes the socket
        self.lock = threading.Lock()

    def put(self, message, droppable: bool = False):
        """From any thread; a preview (`droppable`) is skipped while the client is behind, any message
        once it is MAX_BEHIND behind (the socket is then closed)."""
        with self.lock:
            if self.waiting >= (MAX_WAITING if droppable else MAX_BEHIND):
                self.lagging = self.lagging or not droppable
                return
            self.waiting += 1
        try:
            self.loop.call_soon_threadsafe(self.queue.put_nowait, message)
        except RuntimeError:            # its loop is closed: the server stopped
            pass

    async def get(self):
        message = await self.queue.get()
        with self.lock:
            self.waiting -= 1
        return message


class Sockets:
    def __init__(self, queue_info):
        """`queue_info()`: ComfyUI's `{exec_info: {queue_remaining}}`, what `status` carries."""
        self.queue_info = queue_info
        self.lock = threading.Lock()
        self.by_sid: dict[str, Socket] = {}

    def send(self, event: str, data: dict, sid: str | None = None):
        """A JSON message to the socket of `sid`, or to every socket when `sid` is None (as ComfyUI
        does for a prompt posted without a client_id, and for `status`)."""
        self._put(json.dumps({"type": event, "data": data}), sid)

    def send_preview(self, jpeg: bytes, sid: str | None = None):
        self._put(preview_message(jpeg), sid, droppable=True)

    def status(self):
        """The queue changed: `status` to everyone."""
        self.send("status", {"status": self.queue_info()})

    def _put(self, message, sid, droppable=False):
        with self.lock:
            targets = list(self.by_sid.values()) if sid is None else [s for s in (self.by_sid.get(sid),) if s]
        for s in targets:
            s.put(message, droppable)

    async def serve(self, websocket: WebSocket):
        """The /ws endpoint: the token (as every route takes it, or `?token=`), then `status` with the
        client's sid first, then whatever is sent to it until it goes away. What a client sends (ComfyUI's
        feature flags) is read and ignored."""
        query_token = websocket.query_params.get("token")
        if not (authorized(websocket) or (query_token and token_matches(websocket, query_token))):
            await deny(websocket)
            return
        await websocket.accept()
        sid = websocket.query_params.get("clientId") or uuid.uuid4().hex
        sock = Socket(asyncio.get_running_loop())
        with self.lock:     # the first message, before any broadcast can reach the socket
            sock.put(json.dumps({"type": "status", "data": {"status": self.queue_info(), "sid": sid}}))
            self.by_sid[sid] = sock          # a reconnect with the same clientId replaces the old socket
        sender = asyncio.ensure_future(self._send_loop(websocket, sock))
        try:
            while True:
                message = await websocket.receive()
                if message["type"] == "websocket.disconnect":
                    break
        except (WebSocketDisconnect, RuntimeError):
            pass
        finally:
            sender.cancel()
            with self.lock:
                if self.by_sid.get(sid) is sock:
                    del self.by_sid[sid]

    @staticmethod
    async def _send_loop(websocket: WebSocket, sock: Socket):
        try:
            while True:
                message = await sock.get()
                if sock.lagging:        # it missed a message: it reconnects and reads /history
                    await websocket.close(code=LAGGING_CLOSE)
                    return
                if isinstance(message, bytes):
                    await websocket.send_bytes(message)
                else:
                    await websocket.send_text(message)
        except (WebSocketDisconnect, RuntimeError, OSError):
            pass           # the receive loop sees the disconnect


async def deny(websocket: WebSocket):
    """A 401 for the upgrade request where the server can answer one (uvicorn can), else a close."""
    if "websocket.http.response" in websocket.scope.get("extensions", {}):
        await websocket.send_denial_response(JSONResponse(
            {"error": {"type": "unauthorized", "message": "missing or bad engine token", "details": "",
                       "extra_info": {}}, "field": "token"}, status_code=401))
    else:
        await websocket.close(code=1008)

"""The engine's HTTP process (run.py; no torch, generation in the worker process) holds what a reader has
not taken yet, not what a request produced: its peak RSS does not grow with a request's steps or size,
whether its readers keep up or stop reading (routes/generation.py FrameQueue; the OpenAI stream and
ComfyUI's /ws bound theirs the same way, their previews being a few KiB each, too small to tell here).

A real engine process on tiny:zimage; VmHWM (the kernel's peak RSS of the process) read from
/proc/<pid>/status after a warm-up (first-use imports and buffers raise it once), then after the big
requests. Readers that stop reading are raw sockets with a small receive buffer that read nothing until
the request has ended, which a second reader (GET /stream, re-attached) says: no timing involved."""
import json
import socket

import pytest

from extensions_built_in.inference_engine.protocol import FrameReader
from testing.engine_client import EngineProcess

MODEL = {"arch": "zimage", "name_or_path": "tiny:zimage"}
FULL = {"latents": "raw", "preview_image": "jpeg"}      # a latent and a JPEG preview every step
BIG, STEPS = 1024, 60
# The bound on VmHWM's growth. Held by design: a stalled reader's FrameQueue holds at most PENDING_LATENTS
# (4) droppable frames, the largest a latent of 16 x 128 x 128 fp16 = 512 KiB at 1024x1024 (tiny zimage's
# 16 channels, 8x downscale): 2 MiB, and the re-attached reader as much again; the pipe holds one such frame
# and its unpickled copy (1 MiB); the request keeps its newest latent and preview (0.6 MiB); the progress,
# status and result frames are ~300 bytes a step (18 KiB). ~6 MiB, and 2 MiB of allocator slack. What
# accumulating frames would cost: 60 latents x 512 KiB = 30 MiB for the stalled reader.
BOUND_KIB = 8 << 10


def vm_hwm_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise AssertionError("no VmHWM")


def stalled(info: dict, path: str, body: dict, headers: dict) -> socket.socket:
    """POST `body` and read nothing yet: the server's writes stop once the (small) socket buffers fill."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect((info["host"], info["port"]))
    data = json.dumps(body).encode()
    head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    s.sendall(f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
              f"Content-Length: {len(data)}\r\nConnection: close\r\n{head}\r\n".encode() + data)
    return s


def read_head(s: socket.socket) -> bytes:
    """The response's status line and headers, byte by byte: a streaming response's head is sent once its
    request is submitted."""
    got = b""
    while not got.endswith(b"\r\n\r\n"):
        b = s.recv(1)
        assert b, got
        got += b
    return got


def read_rest(s: socket.socket) -> bytes:
    """Everything else, to the close (Connection: close)."""
    s.settimeout(120)
    parts = []
    while b := s.recv(1 << 16):
        parts.append(b)
    s.close()
    return b"".join(parts)


def body(size: int, steps: int, stream: dict | None, request_id: str | None = None) -> dict:
    return {"model": MODEL, "sample": {"prompt": "a fox", "width": size, "height": size, "num_inference_steps": steps,
                                       "seed": 1}, "stream": stream, "request_id": request_id}


def wait_end(client, request_id: str) -> dict:
    """Re-attach to the request (GET /stream) and read to its end: the request has ended."""
    frames = client.stream({}, path=f"/stream/{request_id}", method="GET")
    assert frames[-1][0]["type"] == "end", frames[-1][0]
    return frames[-1][0]


@pytest.fixture(scope="module")
def engine(tiny, tiny_root, tmp_path_factory):
    tiny("zimage")
    ep = EngineProcess(str(tmp_path_factory.mktemp("rss")), env={"AITK_TINY_CACHE": str(tiny_root), "HF_HUB_OFFLINE": "1"})
    try:
        yield ep.wait_ready()
    finally:
        ep.stop()


def test_http_peak_rss_does_not_grow_with_steps_size_or_slow_readers(engine):
    c, info, pid = engine.client, engine.info, engine.proc.pid
    # warm-up: both paths below once, small (imports, Pillow's JPEG decoder, the allocator's first arenas)
    frames = c.stream(body(128, 2, FULL))
    assert frames[-1][0]["status"] == "ok"
    s = stalled(info, "/generate", body(128, 2, FULL, "warm-stalled"), {"X-Engine-Token": info["token"]})
    assert b" 200 " in read_head(s)     # submitted
    wait_end(c, "warm-stalled")
    assert b'{"type":"end"' in read_rest(s)
    before = vm_hwm_kib(pid)

    # a reader that keeps up, then one that stops reading: 60 steps at 1024x1024, a latent and a preview each
    frames = c.stream(body(BIG, STEPS, FULL))
    assert frames[-1][0]["status"] == "ok"
    assert sum(h["type"] == "latent" for h, _p in frames) == STEPS
    latent_bytes = max(len(p) for h, p in frames if h["type"] == "latent")
    assert latent_bytes == 16 * (BIG // 8) ** 2 * 2         # what the bound's arithmetic takes
    s = stalled(info, "/generate", body(BIG, STEPS, FULL, "stalled"), {"X-Engine-Token": info["token"]})
    assert b" 200 " in read_head(s)
    assert wait_end(c, "stalled")["status"] == "ok"
    rest = read_rest(s)
    assert b'{"type":"end"' in rest and rest.count(b'"type":"latent"') < STEPS     # it skipped latents

    grown = vm_hwm_kib(pid) - before
    assert grown < BOUND_KIB, f"the HTTP process's peak RSS grew by {grown} KiB (bound {BOUND_KIB} KiB)"

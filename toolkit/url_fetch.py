"""A direct-URL download (toolkit/downloads.py), resumable: bytes go to `<file>.part`, and a request
that finds one asks for the rest with `Range: bytes=<size>-` (a server that answers 200 instead starts
it again). A cut connection is continued the same way, up to `retries` times in a row without new
bytes. The file gets its final name only when complete. HF_TOKEN goes along to the hub's own host
(HF_ENDPOINT, else huggingface.co) and nowhere else."""
import os
import re
import socket
from urllib.parse import urlparse

import httpx

_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+|\*)")


def _headers(url: str, offset: int) -> dict:
    h = {"Accept-Encoding": "identity"}
    if offset:
        h["Range"] = f"bytes={offset}-"
    token = os.environ.get("HF_TOKEN")
    hub = urlparse(os.environ.get("HF_ENDPOINT") or "https://huggingface.co").netloc
    if token and urlparse(url).netloc == hub:
        h["Authorization"] = f"Bearer {token}"
    return h


def _total(r: httpx.Response, offset: int) -> int | None:
    m = _RANGE.match(r.headers.get("content-range", ""))
    if m and m.group(3) != "*":
        return int(m.group(3))
    n = r.headers.get("content-length")
    return int(n) + offset if n and n.isdigit() else None


def _attempt(d, part: str) -> bool:
    """One request, appending to `part`; True when the body ended complete, False when cancelled.
    Raises httpx.TransportError when the connection is cut."""
    offset = os.path.getsize(part) if os.path.exists(part) else 0
    with httpx.stream("GET", d.source, headers=_headers(d.source, offset), follow_redirects=True,
                      timeout=httpx.Timeout(30.0, read=120.0)) as r:
        if r.status_code == 416 and offset:          # the .part is already the whole file
            d.bytes_done = offset
            d.bytes_total = d.bytes_total or offset
            return True
        if r.status_code >= 400:
            raise RuntimeError(f"HTTP {r.status_code} from {urlparse(d.source).netloc}")
        d.abort = lambda: _shutdown(r)               # a cancel unblocks a read waiting on a stalled server
        if d.cancel.is_set():
            return False
        if r.status_code != 206:
            offset = 0                               # no range support: from the start
        d.bytes_total = _total(r, offset)
        d.bytes_done = offset
        with open(part, "ab" if offset else "wb") as f:
            for chunk in r.iter_bytes():          # as the bytes arrive: progress while a server trickles
                if d.cancel.is_set():
                    return False
                f.write(chunk)
                d.bytes_done += len(chunk)
    if d.bytes_total is not None and d.bytes_done < d.bytes_total:
        raise IncompleteError(f"{d.bytes_done} of {d.bytes_total} bytes")
    return True


def _shutdown(r: httpx.Response):
    sock = (r.extensions.get("network_stream") or None)
    sock = sock.get_extra_info("socket") if sock is not None else None
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def fetch(d, retries: int = 3) -> bool:
    """Download `d.source` to `d.dest`; True when done, False when cancelled (the .part kept)."""
    os.makedirs(os.path.dirname(d.dest), exist_ok=True)
    part = d.dest + ".part"
    stalls = 0
    while True:
        before = os.path.getsize(part) if os.path.exists(part) else 0
        try:
            if not _attempt(d, part):
                return False
            break
        except (httpx.TransportError, IncompleteError) as e:
            if d.cancel.is_set():
                return False
            grew = (os.path.getsize(part) if os.path.exists(part) else 0) > before
            stalls = 0 if grew else stalls + 1
            if stalls >= retries:
                raise RuntimeError(f"the connection kept failing ({type(e).__name__}: {e})") from e
    d.abort = None
    os.replace(part, d.dest)
    d.path = d.dest
    d.bytes_total = d.bytes_done
    return True


class IncompleteError(Exception):
    """The server ended the body before its declared length."""

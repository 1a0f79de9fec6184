"""A Python client and command line for a running inference engine (docs/engine_api.md).

    python -m toolkit.client generate "a fox" --arch zimage --steps 8 -o fox.png
    python -m toolkit.client queue | cancel ID | attach ID | health | models | library

The engine is found from its engine.json (`--engine FILE_OR_JOB_FOLDER`, else $AITK_ENGINE, else
output/inference_engine/engine.json), or given as `--url` and `--token` ($AITK_ENGINE_URL,
$AITK_ENGINE_TOKEN). Exit codes: 0 ok, 1 the request failed (an error frame, or the engine is
unreachable), 2 the engine refused the input (a 4xx: its message names the field), 130 Ctrl-C (the
request is cancelled on the engine first).

Production code: stdlib, httpx and rich only. It reads the frame stream with its own parser (the
same format and limits as extensions_built_in/inference_engine/protocol.py, which it does not import:
a client needs nothing of the engine's package).
"""
from __future__ import annotations

import argparse
import json
import os
import struct
import sys
import time
import uuid
from dataclasses import dataclass, field
from typing import Iterator

import httpx

EXIT_OK, EXIT_ERROR, EXIT_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130
DEFAULT_ENGINE_JSON = os.path.join("output", "inference_engine", "engine.json")

# the frame stream's limits (protocol.py MAX_HEADER / MAX_PAYLOAD / MAX_DEPTH)
MAX_HEADER = 1 << 20
MAX_PAYLOAD = 512 << 20
MAX_DEPTH = 64


# -- errors ------------------------------------------------------------------------------------------
class ClientError(Exception):
    """The engine could not be reached or found, or its stream broke."""


class EngineRefused(ClientError):
    """A 4xx/5xx answer: `detail` and `field` are the engine's ErrorBody."""

    def __init__(self, status: int, detail: str, field: str | None):
        super().__init__(f"{status}: {detail}")
        self.status, self.detail, self.field = status, detail, field


# -- frames ------------------------------------------------------------------------------------------
@dataclass
class Frame:
    header: dict
    payload: bytes = b""

    @property
    def type(self) -> str:
        return self.header["type"]


class FrameParser:
    """Incremental reader of `u32 LE header_len | JSON header | u64 LE payload_len | payload`: feed
    chunks, get whole frames. Lengths past the limits are refused before anything is buffered for them."""

    def __init__(self):
        self._buf = bytearray()
        self._header: dict | None = None
        self._need = 0

    def feed(self, data: bytes) -> list[Frame]:
        self._buf += data
        out = []
        while True:
            if self._header is None:
                if len(self._buf) < 4:
                    return out
                (hlen,) = struct.unpack_from("<I", self._buf, 0)
                if hlen > MAX_HEADER:
                    raise ClientError(f"bad stream: a frame header of {hlen} bytes")
                if len(self._buf) < 4 + hlen + 8:
                    return out
                header = _decode_header(bytes(self._buf[4:4 + hlen]))
                (plen,) = struct.unpack_from("<Q", self._buf, 4 + hlen)
                if plen > MAX_PAYLOAD:
                    raise ClientError(f"bad stream: a frame payload of {plen} bytes")
                del self._buf[:4 + hlen + 8]
                self._header, self._need = header, plen
            if len(self._buf) < self._need:
                return out
            payload = bytes(self._buf[:self._need])
            del self._buf[:self._need]
            out.append(Frame(self._header, payload))
            self._header = None

    def close(self):
        if self._buf or self._header is not None:
            raise ClientError("bad stream: it ended in the middle of a frame")


def _decode_header(raw: bytes) -> dict:
    if raw.count(b"[") + raw.count(b"{") > MAX_DEPTH * 4:      # cheap bound before a recursive decoder
        raise ClientError("bad stream: a frame header nests too deep")
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise ClientError(f"bad stream: a frame header is not JSON ({e})") from None
    if not isinstance(header, dict) or not isinstance(header.get("type"), str) \
            or not isinstance(header.get("request_id"), str):
        raise ClientError("bad stream: a frame header without string type and request_id")
    return header


# -- requests ----------------------------------------------------------------------------------------
@dataclass
class GenerateRequest:
    """POST /generate's body. `model` is a profile name or a ModelConfig dict; None values are left
    out, so the engine fills its defaults (profile > variant > arch)."""
    prompt: str
    arch: str | None = None
    model: str | None = None              # a profile name, or a name_or_path for `arch`
    steps: int | None = None
    width: int | None = None
    height: int | None = None
    seed: int | None = None
    negative_prompt: str | None = None
    guidance_scale: float | None = None
    sample_extra: dict = field(default_factory=dict)
    stream: dict | None = None
    request_id: str = field(default_factory=lambda: uuid.uuid4().hex[:16])

    def model_body(self, profiles: set | None = None):
        if self.arch is None:
            if not self.model:
                raise ValueError("name an --arch, or a profile with --model")
            return {"profile": self.model}
        m = {"arch": self.arch}
        if self.model:
            m["name_or_path"] = self.model
        return m

    def body(self, wait: bool = False) -> dict:
        sample = {"prompt": self.prompt, "negative_prompt": self.negative_prompt, "num_inference_steps": self.steps,
                  "width": self.width, "height": self.height, "seed": self.seed,
                  "guidance_scale": self.guidance_scale, **self.sample_extra}
        out = {"model": self.model_body(), "sample": {k: v for k, v in sample.items() if v is not None},
               "request_id": self.request_id}
        if self.stream is not None:
            out["stream"] = self.stream
        if wait:
            out["wait"] = True
        return out


# -- finding the engine ------------------------------------------------------------------------------
def read_engine_json(path: str) -> tuple[str, str]:
    """(url, token) from a running engine's engine.json (a file, or the job folder holding it)."""
    if os.path.isdir(path):
        path = os.path.join(path, "engine.json")
    try:
        with open(path) as f:
            info = json.load(f)
        return f"http://{info['host']}:{info['port']}", info["token"]
    except FileNotFoundError:
        raise ClientError(f"no engine.json at {path}: is the engine running? (or pass --url and --token)") from None
    except (ValueError, KeyError, TypeError) as e:
        raise ClientError(f"{path} is not an engine.json ({e})") from None


def find_engine(engine: str | None = None, url: str | None = None, token: str | None = None) -> tuple[str, str]:
    url = url or os.environ.get("AITK_ENGINE_URL")
    token = token or os.environ.get("AITK_ENGINE_TOKEN")
    if url and not engine:
        if not token:
            raise ClientError("--url needs --token (or $AITK_ENGINE_TOKEN)")
        return url.rstrip("/"), token
    return read_engine_json(engine or os.environ.get("AITK_ENGINE") or DEFAULT_ENGINE_JSON)


# -- the client --------------------------------------------------------------------------------------
class EngineClient:
    def __init__(self, url: str, token: str, timeout: float = 30.0):
        self.url = url.rstrip("/")
        # X-Client: the results feed records who asked
        self.http = httpx.Client(base_url=self.url, headers={"X-Engine-Token": token, "X-Client": "cli"},
                                 timeout=httpx.Timeout(timeout, read=None))

    @classmethod
    def find(cls, engine: str | None = None, url: str | None = None, token: str | None = None) -> "EngineClient":
        return cls(*find_engine(engine, url, token))

    def close(self):
        self.http.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _call(self, method: str, path: str, **kw):
        try:
            r = self.http.request(method, path, **kw)
        except httpx.HTTPError as e:
            raise ClientError(f"cannot reach the engine at {self.url}: {e}") from None
        _raise_for(r)
        return r

    def health(self) -> dict:
        return self._call("GET", "/health").json()

    def models(self) -> dict:
        return self._call("GET", "/models").json()

    def queue(self) -> dict:
        return self._call("GET", "/queue").json()

    def library(self) -> dict:
        return self._call("GET", "/library").json()

    def cancel(self, request_id: str) -> dict:
        return self._call("POST", f"/cancel/{request_id}").json()

    def output(self, url: str) -> bytes:
        return self._call("GET", url).content

    def wait(self, req: GenerateRequest) -> dict:
        """POST /generate with `wait: true`: `{request_id, status, results, error}` once it ends."""
        return self._call("POST", "/generate", json=req.body(wait=True)).json()

    def generate(self, req: GenerateRequest) -> Iterator[Frame]:
        """The request's frames, `start` to `end`. Leaving the loop early disconnects (which cancels the
        request on the engine unless its stream options say `detach`)."""
        return self._frames("POST", "/generate", json=req.body())

    def attach(self, request_id: str) -> Iterator[Frame]:
        """Re-attach to a request (GET /stream/{id}): its frames so far (the newest latent only), then live."""
        return self._frames("GET", f"/stream/{request_id}")

    def _frames(self, method, path, **kw) -> Iterator[Frame]:
        parser = FrameParser()
        try:
            with self.http.stream(method, path, **kw) as r:
                if r.status_code != 200:
                    r.read()
                    _raise_for(r)
                for chunk in r.iter_bytes():
                    for frame in parser.feed(chunk):
                        yield frame
                        if frame.type == "end":
                            return
        except httpx.HTTPError as e:
            raise ClientError(f"the engine at {self.url} went away: {e}") from None
        parser.close()
        raise ClientError("the stream ended without an end frame")


def _raise_for(r: httpx.Response):
    if r.status_code < 400:
        return
    try:
        body = r.json()
        detail, fld = str(body.get("detail")), body.get("field")
    except ValueError:
        detail, fld = r.text.strip() or r.reason_phrase, None
    raise EngineRefused(r.status_code, detail, fld)


# -- latent preview ----------------------------------------------------------------------------------
def latent_to_rgb(header: dict, payload: bytes, preview: dict | None, max_width: int = 64,
                  max_height: int = 64) -> list[list[tuple[int, int, int]]]:
    """Item 0 (frame 0 of a video) of a `latent` frame as rows of RGB, sampled down to fit
    max_width x max_height, by the projection of docs/engine_api.md: `rgb_factors`/`rgb_bias` from the
    start frame's `preview`, else the first three channels normalised by their own min/max."""
    shape, layout = header["shape"], header.get("layout", "BCHW")
    if layout == "BCHW":
        _b, c, h, w = shape
        frame_stride = 0
    elif layout == "BCFHW":
        _b, c, f, h, w = shape
        frame_stride = f
    else:                          # audio (BLC): time x channels heatmap
        _b, length, c = shape
        values = struct.unpack(f"<{length * c}e", payload[:length * c * 2])
        lo, hi = min(values), max(values)
        scale = 255 / (hi - lo) if hi > lo else 0
        xs = _sample(length, max_width)
        return [[(v, v, v) for v in (int((values[x * c + ch] - lo) * scale) for x in xs)] for ch in range(c)]
    plane = h * w
    chan_stride = plane * frame_stride if frame_stride else plane
    n = c * chan_stride
    values = struct.unpack(f"<{n}e", payload[:n * 2])
    xs, ys = _sample(w, max_width), _sample(h, max_height)

    def at(ch, y, x):
        return values[ch * chan_stride + y * w + x]

    factors = (preview or {}).get("rgb_factors")
    bias = (preview or {}).get("rgb_bias") or [0.0, 0.0, 0.0]
    if factors and len(factors) == c:
        rows = []
        for y in ys:
            row = []
            for x in xs:
                px = [at(ch, y, x) for ch in range(c)]
                rgb = [sum(px[ch] * factors[ch][k] for ch in range(c)) + bias[k] for k in range(3)]
                row.append(tuple(round(min(max((v + 1) / 2, 0.0), 1.0) * 255) for v in rgb))
            rows.append(row)
        return rows
    chans = [0, 1, 2] if c >= 3 else [0, 0, 0]
    ranges = []
    for ch in chans:
        vals = [at(ch, y, x) for y in range(h) for x in range(w)]
        ranges.append((min(vals), max(vals)))
    return [[tuple(int((at(ch, y, x) - lo) * 255 / (hi - lo)) if hi > lo else 0 for ch, (lo, hi) in zip(chans, ranges))
             for x in xs] for y in ys]


def _sample(n: int, most: int) -> list[int]:
    if n <= most:
        return list(range(n))
    return [int(i * n / most) for i in range(most)]


def half_blocks(rows: list[list[tuple[int, int, int]]]):
    """A rich Text of the image, two pixel rows per line: ▀ with the top pixel as foreground and the
    bottom one as background."""
    from rich.color import Color
    from rich.style import Style
    from rich.text import Text
    text = Text()
    for i in range(0, len(rows), 2):
        top, bottom = rows[i], rows[i + 1] if i + 1 < len(rows) else None
        for x, t in enumerate(top):
            b = bottom[x] if bottom else (0, 0, 0)
            text.append("▀", Style(color=Color.from_rgb(*t), bgcolor=Color.from_rgb(*b)))
        text.append("\n")
    return text


# -- the command line --------------------------------------------------------------------------------
def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m toolkit.client", description="Talk to a running inference engine.")
    where = argparse.ArgumentParser(add_help=False)
    where.add_argument("--engine", help="engine.json of a running engine, or its job folder "
                       f"(default: $AITK_ENGINE, else {DEFAULT_ENGINE_JSON})")
    where.add_argument("--url", help="the engine's URL (with --token) instead of an engine.json")
    where.add_argument("--token", help="the engine's token (with --url)")
    sub = p.add_subparsers(dest="command", required=True)

    g = sub.add_parser("generate", parents=[where], help="generate and save the output")
    g.add_argument("prompt")
    g.add_argument("--arch", help="the model's arch (zimage, flux, ...); omit with --model PROFILE")
    g.add_argument("--model", help="a name_or_path for --arch, or a profile name without --arch")
    g.add_argument("--steps", type=int)
    g.add_argument("--width", type=int)
    g.add_argument("--height", type=int)
    g.add_argument("--seed", type=int)
    g.add_argument("--negative", dest="negative_prompt")
    g.add_argument("--cfg", dest="guidance_scale", type=float)
    g.add_argument("--set", action="append", default=[], metavar="KEY=JSON",
                   help="any other sample key, e.g. --set output_ext='\"jpg\"' (repeatable)")
    g.add_argument("-o", "--output", help="where to write the output (a batch adds -<i> before the extension; "
                   "default: the engine's file name, here)")
    g.add_argument("--preview", action="store_true", help="draw the live latent in the terminal")
    g.add_argument("--wait", action="store_true", help="no stream: one answer when the request ends")
    g.add_argument("--request-id")

    a = sub.add_parser("attach", parents=[where], help="re-attach to a request's stream and save its output")
    a.add_argument("request_id")
    a.add_argument("-o", "--output")
    a.add_argument("--preview", action="store_true")

    c = sub.add_parser("cancel", parents=[where], help="cancel a request")
    c.add_argument("request_id")
    for name, text in (("queue", "the running, queued and finished requests"), ("health", "the engine's state"),
                       ("models", "archs and profiles"), ("library", "the engine's library (GET /library)")):
        s = sub.add_parser(name, parents=[where], help=text)
        s.add_argument("--json", action="store_true", help="print the engine's JSON as it is")
    return p


def main(argv=None, console=None) -> int:
    from rich.console import Console
    args = _parser().parse_args(argv)
    console = console or Console(stderr=True)
    out = Console() if console.file is sys.stderr else console
    try:
        client = EngineClient.find(args.engine, args.url, args.token)
    except ClientError as e:
        console.print(f"[red]error:[/] {e}")
        return EXIT_ERROR
    try:
        with client:
            return COMMANDS[args.command](client, args, console, out)
    except EngineRefused as e:
        where = f" (field {e.field})" if e.field and e.field not in ("body", "path") else ""
        if e.status == 404 and e.field == "path":
            console.print(f"[red]error:[/] this engine has no such route: {e.detail}")
        else:
            console.print(f"[red]refused ({e.status}){where}:[/] {e.detail}")
        return EXIT_INPUT if e.status < 500 else EXIT_ERROR
    except ClientError as e:
        console.print(f"[red]error:[/] {e}")
        return EXIT_ERROR


def _generate(client: EngineClient, args, console, out) -> int:
    extra = {}
    for item in args.set:
        key, _, value = item.partition("=")
        try:
            extra[key] = json.loads(value)
        except ValueError:
            extra[key] = value
    if args.arch is None and not args.model:
        console.print("[red]refused:[/] name --arch (and optionally --model NAME_OR_PATH), or --model PROFILE")
        return EXIT_INPUT
    req = GenerateRequest(prompt=args.prompt, arch=args.arch, model=args.model, steps=args.steps, width=args.width,
                          height=args.height, seed=args.seed, negative_prompt=args.negative_prompt,
                          guidance_scale=args.guidance_scale, sample_extra=extra,
                          stream=None if args.preview else {"latents": "none"})
    if args.request_id:
        req.request_id = args.request_id
    try:
        if args.wait:
            answer = client.wait(req)
            if answer["status"] != "ok":
                console.print(f"[red]{answer['status']}:[/] {answer.get('error')}")
                return EXIT_ERROR
            _save(client, answer["results"], args.output, console)
            return EXIT_OK
        return _follow(client, client.generate(req), args, console)
    except KeyboardInterrupt:
        return _interrupted(client, req.request_id, console)


def _attach(client: EngineClient, args, console, out) -> int:
    try:
        return _follow(client, client.attach(args.request_id), args, console)
    except KeyboardInterrupt:      # a re-attached reader only stops reading: the request goes on
        console.print(f"stopped reading; {args.request_id} goes on (cancel it with: cancel {args.request_id})")
        return EXIT_INTERRUPTED


def _interrupted(client: EngineClient, request_id: str, console) -> int:
    try:
        answer = client.cancel(request_id)
        console.print(f"interrupted: request {request_id} {answer.get('status')}")
    except ClientError as e:
        console.print(f"interrupted: could not cancel {request_id}: {e}")
    return EXIT_INTERRUPTED


def _follow(client: EngineClient, frames: Iterator[Frame], args, console) -> int:
    view = _View(console, getattr(args, "preview", False))
    results, status, error = [], None, None
    with view:
        for frame in frames:
            h = frame.header
            if frame.type == "start":
                view.start(h)
            elif frame.type == "status":
                view.status(h.get("message", ""))
            elif frame.type == "progress":
                view.progress(h["step"], h["total"])
            elif frame.type == "latent":
                view.latent(h, frame.payload)
            elif frame.type == "result":
                results.append(h)
            elif frame.type == "error":
                error = h.get("message")
            elif frame.type == "end":
                status = h.get("status")
    if status != "ok":
        console.print(f"[red]{status}:[/] {error or status}")
        return EXIT_ERROR
    _save(client, results, args.output, console)
    return EXIT_OK


def _save(client: EngineClient, results: list, output: str | None, console):
    for i, r in enumerate(results):
        data = client.output(r["url"])
        if output:
            stem, ext = os.path.splitext(output)
            path = output if len(results) == 1 else f"{stem}-{i}{ext or '.' + r.get('ext', 'png')}"
        else:
            path = os.path.basename(r["relpath"])
        with open(path, "wb") as f:
            f.write(data)
        console.print(f"wrote {path} ({len(data)} bytes, seed {r.get('seed')})")


class _View:
    """The progress display: a rich progress bar and the latent preview on a terminal, plain lines
    (`step 3/8 2.1 it/s ETA 2.4s`) elsewhere (a pipe or a log keeps every step)."""

    def __init__(self, console, preview: bool):
        self.console, self.want_preview = console, preview
        self.live_mode = console.is_terminal
        self.preview_info, self.image = None, None
        self.t0, self.first_step = time.monotonic(), None
        self.bar = self.task = self.live = None

    def __enter__(self):
        if self.live_mode:
            from rich.console import Group
            from rich.live import Live
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn)
            self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                     TextColumn("{task.fields[rate]}"), TextColumn("ETA"), TimeRemainingColumn(),
                                     console=self.console)
            self.task = self.bar.add_task("starting", total=None, rate="")
            self.live = Live(Group(self.bar), console=self.console, refresh_per_second=8, transient=False)
            self.live.__enter__()
        return self

    def __exit__(self, *exc):
        if self.live is not None:
            self.live.__exit__(*exc)

    def _refresh(self):
        if self.live is not None:
            from rich.console import Group
            self.live.update(Group(self.bar, *([self.image] if self.image is not None else [])))

    def start(self, header):
        self.preview_info = header.get("preview")
        self.status("queued")

    def status(self, message: str):
        if self.live_mode:
            self.bar.update(self.task, description=message)
        else:
            self.console.print(message, highlight=False)

    def progress(self, step: int, total: int):
        now = time.monotonic()
        if self.first_step is None or step == 1:
            self.first_step = (step, now)
        s0, t0 = self.first_step
        rate = (step - s0) / (now - t0) if step > s0 and now > t0 else None
        eta = (total - step) / rate if rate else None
        rate_text = f"{rate:.2f} it/s" if rate else "- it/s"
        if self.live_mode:
            self.bar.update(self.task, completed=step, total=total, description="sampling", rate=rate_text)
            self._refresh()
        else:
            eta_text = f"ETA {eta:.1f}s" if eta is not None else "ETA -"
            self.console.print(f"step {step}/{total} {rate_text} {eta_text}", highlight=False)

    def latent(self, header, payload):
        if not self.want_preview:
            return
        width = max(8, min(64, self.console.width - 2))
        self.image = half_blocks(latent_to_rgb(header, payload, self.preview_info, max_width=width, max_height=48))
        if self.live_mode:
            self._refresh()
        else:
            self.console.print(self.image)


def _queue(client, args, console, out) -> int:
    q = client.queue()
    if args.json:
        out.print_json(data=q)
        return EXIT_OK
    from rich.table import Table
    t = Table("request", "status", "arch", "step", "prompt")
    for kind in ("batch", "queued", "finished"):
        rows = q.get(kind) or ([q["running"]] if kind == "batch" and q.get("running") else [])
        for r in rows:
            t.add_row(r["request_id"], r["status"], r["arch"], f"{r['step']}/{r['total']}", (r["prompt"] or "")[:40])
    out.print(t)
    return EXIT_OK


def _cancel(client, args, console, out) -> int:
    answer = client.cancel(args.request_id)
    out.print(f"{answer['request_id']}: {answer['status']}")
    return EXIT_OK


def _health(client, args, console, out) -> int:
    h = client.health()
    if args.json:
        out.print_json(data=h)
        return EXIT_OK
    active = h.get("active") or {}
    pool = h.get("pool") or {}
    out.print(f"busy: {h.get('busy')}  queue: {h.get('queue')}  active: {active.get('arch', '-')} "
              f"{active.get('name_or_path') or ''}".rstrip())
    out.print(f"pool: {pool.get('hits', 0)} hits, {pool.get('misses', 0)} misses, {pool.get('evictions', 0)} "
              f"evictions, {pool.get('resident_bytes', 0) / (1 << 20):.1f} MiB resident")
    mem = h.get("memory") or {}
    out.print(f"memory ({mem.get('device')}): {mem.get('used', 0) / (1 << 30):.2f} / "
              f"{mem.get('total', 0) / (1 << 30):.2f} GiB  uptime: {h.get('uptime', 0):.0f}s")
    return EXIT_OK


def _models(client, args, console, out) -> int:
    m = client.models()
    if args.json:
        out.print_json(data=m)
        return EXIT_OK
    from rich.table import Table
    t = Table("arch", "modality", "default steps", "size", "tasks")
    for a in m.get("archs", []):
        d = a.get("defaults") or {}
        t.add_row(a["name"], a.get("modality", ""), str(d.get("num_inference_steps", "")),
                  f"{d.get('width')}x{d.get('height')}", ", ".join(x["name"] for x in a.get("tasks", [])))
    out.print(t)
    profiles = m.get("profiles") or []
    if profiles:
        p = Table("profile", "architecture", "variant")
        for row in profiles:
            p.add_row(row["name"], row.get("architecture", ""), row.get("variant") or "")
        out.print(p)
    return EXIT_OK


def _library(client, args, console, out) -> int:
    lib = client.library()
    if args.json:
        out.print_json(data=lib)
        return EXIT_OK
    from rich.table import Table
    t = Table("name", "source", "kind", "arch", "format", "size", "complete")
    for e in lib.get("entries", []):
        t.add_row(e.get("name", ""), e.get("source", ""), e.get("kind", ""), e.get("arch") or "?",
                  e.get("format") or "", f"{(e.get('bytes') or 0) / (1 << 20):.1f} MiB", "yes" if e.get("complete") else "no")
    out.print(t)
    for a in lib.get("archs", []):      # a default repo not here: the command that fetches it
        if not a.get("default_present") and a.get("download"):
            out.print(f"{a['arch']}: default repo {a.get('repo')} is not downloaded: {a['download']}")
    return EXIT_OK


COMMANDS = {"generate": _generate, "attach": _attach, "cancel": _cancel, "queue": _queue, "health": _health,
            "models": _models, "library": _library}


if __name__ == "__main__":
    sys.exit(main())

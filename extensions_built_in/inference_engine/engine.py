"""The engine: a FIFO of generation requests run one at a time on the calling (main) thread,
the active holder, and the component pool that makes a model switch load only what differs.

It knows requests and holders, not HTTP: the server submits, cancels, subscribes to frames
and reads snapshots; every frame a request produces goes through `Request.publish`.
"""
import collections
import os
import re
import threading
import time
import uuid
from dataclasses import dataclass, field

import torch

from extensions_built_in.inference_engine.protocol import encode_frame
from toolkit.config_modules import GenerateImageConfig, ModelConfig
from toolkit.errors import ConfigError, check_keys
from toolkit.models import latents as latent_frames
from toolkit.models.base_model import get_model_class
from toolkit.models.registry import ARCHS as ARCHS_BY_NAME
from toolkit.profiles import EMPTY as EMPTY_PROFILES
from toolkit.request import resolve_request
from toolkit.models.v2.pool import ComponentPool

REQUEST_ID = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
FINISHED_KEPT = 100
STREAM_DEFAULTS = {"latents": "raw", "every_n_steps": 1, "max_frames": 4, "preview": "x0", "detach": False}


class GenerationCancelled(Exception):
    pass


class EngineBusy(RuntimeError):
    pass


def is_oom(e: BaseException) -> bool:
    return isinstance(e, torch.OutOfMemoryError) or "out of memory" in str(e).lower()


def parse_stream(d) -> dict:
    d = dict(d or {})
    check_keys(d, STREAM_DEFAULTS, "stream")
    out = {**STREAM_DEFAULTS, **d}
    if out["latents"] not in ("raw", "none"):
        raise ConfigError("stream.latents", "must be 'raw' or 'none'")
    if out["preview"] not in ("x0", "noisy"):
        raise ConfigError("stream.preview", "must be 'x0' or 'noisy'")
    for k in ("every_n_steps", "max_frames"):
        if isinstance(out[k], bool) or not isinstance(out[k], int) or out[k] < 1:
            raise ConfigError(f"stream.{k}", "must be an integer >= 1")
    if not isinstance(out["detach"], bool):
        raise ConfigError("stream.detach", "must be true or false")
    return out


class Subscriber:
    """One live reader of a request's frames: `deliver(frame, is_latent)` is called on the
    generation thread for every frame published after it attached (the server hands them to
    its event loop, skipping latents a slow reader has not taken yet)."""

    def __init__(self, deliver):
        self.deliver = deliver


@dataclass
class Request:
    request_id: str
    model: ModelConfig
    sample: GenerateImageConfig
    stream: dict
    status: str = "queued"            # queued | running | ok | error | cancelled
    created_at: float = field(default_factory=time.time)
    started_at: float | None = None
    finished_at: float | None = None
    step: int = 0
    total: int = 0
    results: list = field(default_factory=list)
    error: str | None = None
    cancel_event: threading.Event = field(default_factory=threading.Event)
    done_event: threading.Event = field(default_factory=threading.Event)
    history: list = field(default_factory=list)      # (type, encoded frame) of every non-latent frame
    latest_latent: bytes | None = None
    subscribers: list = field(default_factory=list)
    ended: bool = False                               # the `end` frame is published (under `lock`)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def finished(self) -> bool:
        return self.status in ("ok", "error", "cancelled")

    def publish(self, header: dict, payload: bytes = b""):
        header = {"type": header.pop("type"), "request_id": self.request_id, **header}
        frame = encode_frame(header, payload)
        latent = header["type"] == "latent"
        with self.lock:
            if latent:
                self.latest_latent = frame
            else:
                self.history.append((header["type"], frame))
            subs = list(self.subscribers)
            if header["type"] == "end":
                self.ended = True
                self.subscribers.clear()
        for s in subs:
            s.deliver(frame, latent)

    def attach(self, subscriber: Subscriber) -> list:
        """Register a reader; returns the replay (non-latent frames and the newest latent)
        taken atomically with the registration, so no frame is missed or doubled."""
        with self.lock:
            replay = [frame for _type, frame in self.history]
            if self.latest_latent is not None:   # it belongs right after the last progress frame
                last = max((i for i, (t, _f) in enumerate(self.history) if t == "progress"), default=len(replay) - 1)
                replay.insert(last + 1, self.latest_latent)
            if not self.ended:      # else the replay already ends with `end`
                self.subscribers.append(subscriber)
        return replay

    def detach(self, subscriber: Subscriber):
        with self.lock:
            if subscriber in self.subscribers:
                self.subscribers.remove(subscriber)

    def summary(self) -> dict:
        return {"request_id": self.request_id, "status": self.status, "arch": self.model.arch,
                "prompt": self.sample.prompt, "created_at": self.created_at, "started_at": self.started_at,
                "finished_at": self.finished_at, "step": self.step, "total": self.total,
                "results": self.results, "error": self.error}


@dataclass
class Faults:
    """Injected failures for tests: raise an out-of-memory error on the n-th component load or
    sampling step (counted from 1, once each). Also read from AITK_ENGINE_FAULTS="load_oom=2,sample_oom=1"."""
    load_oom: int = 0
    sample_oom: int = 0
    load_delay: float = 0.0     # seconds per component load: makes "cancel during a load" testable
    _loads: int = 0
    _steps: int = 0

    @classmethod
    def from_env(cls) -> "Faults":
        spec = os.environ.get("AITK_ENGINE_FAULTS", "")
        values = dict(part.split("=", 1) for part in spec.split(",") if "=" in part)
        return cls(load_oom=int(values.get("load_oom", 0)), sample_oom=int(values.get("sample_oom", 0)),
                   load_delay=float(values.get("load_delay", 0)))

    def on_load(self):
        if self.load_delay:
            time.sleep(self.load_delay)
        if self.load_oom:
            self._loads += 1
            if self._loads == self.load_oom:
                self.load_oom = 0
                raise torch.OutOfMemoryError("injected out of memory during load")

    def on_step(self):
        if self.sample_oom:
            self._steps += 1
            if self._steps == self.sample_oom:
                self.sample_oom = 0
                raise torch.OutOfMemoryError("injected out of memory during sampling")


class Engine:
    def __init__(self, *, device: str = "cpu", output_folder: str, assets_folder: str | None = None,
                 dtype: str = "auto", keep_resident_gb: float = 0, idle_unload_seconds: float = 0,
                 on_info=None, faults: Faults | None = None, pool: ComponentPool | None = None, profiles=None):
        self.device = device
        self.output_folder = os.path.abspath(output_folder)
        self.assets_folder = os.path.abspath(assets_folder) if assets_folder else None
        self.dtype = dtype
        self.idle_unload_seconds = idle_unload_seconds
        self.pool = pool or ComponentPool(int(keep_resident_gb * (1 << 30)))
        self.on_info = on_info or (lambda info, step=None: None)
        self.faults = faults or Faults.from_env()
        self.profiles = profiles or EMPTY_PROFILES
        self.holder = None
        self.active_config: ModelConfig | None = None
        self.current: Request | None = None
        self.requests: dict[str, Request] = {}
        self._queue: collections.deque[Request] = collections.deque()
        self._finished: collections.deque[Request] = collections.deque()
        self._cv = threading.Condition()
        self._stopping = threading.Event()
        self._last_active = time.time()
        self.started_at = time.time()
        self.builds = 0                     # holder builds (not fast-path reuses)
        os.makedirs(self.output_folder, exist_ok=True)

    # -- the server's side (any thread) -------------------------------------------------------------
    def submit(self, model: dict, sample: dict, stream: dict | None = None, request_id: str | None = None) -> Request:
        """Validate and queue a request. Raises ConfigError naming the bad field."""
        if self._stopping.is_set():
            raise EngineBusy("the engine is stopping")
        mc, gen = self.resolve(model, sample)
        if gen.ctrl_img:
            gen.ctrl_img = self.resolve_asset(gen.ctrl_img)
        opts = parse_stream(stream)
        if request_id is None:
            request_id = uuid.uuid4().hex[:16]
        elif not isinstance(request_id, str) or not REQUEST_ID.match(request_id):
            raise ConfigError("request_id", "must be 1-64 characters of letters, digits, '_', '-', '.'")
        with self._cv:
            if request_id in self.requests:
                raise ConfigError("request_id", f"{request_id!r} is already in use")
            gen.resolved_seed()
            req = Request(request_id, mc, gen, opts)
            self.requests[request_id] = req
            ahead = len(self._queue) + (self.current is not None)
            self._queue.append(req)
            self._cv.notify_all()
        req.publish({"type": "start", "model": mc.to_dict(), "sample": gen.to_dict(),
                     "modality": mc.spec.modality, "preview": mc.spec.latents.preview()})
        for warning in gen.warnings:
            req.publish({"type": "status", "message": f"warning: {warning}", "stage": "warning"})
        req.publish({"type": "status", "message": f"queued ({ahead} ahead)" if ahead else "queued",
                     "stage": "queued"})
        return req

    def resolve(self, model, sample) -> tuple[ModelConfig, GenerateImageConfig]:
        """A request's model (a config or `{profile: NAME}`) and sample settings, with the precedence
        request > [generation] > profile > variant > arch."""
        return resolve_request(model, sample, self.profiles, self.dtype)

    def model_for_name(self, name: str | None) -> dict:
        """A model named by a client that knows names only (compat APIs): a profile, an arch, or
        None for the active model (else the default)."""
        if name in (None, ""):
            if self.active_config is not None:
                return self.active_config.to_dict()
            if self.default_model is not None:
                return self.default_model if isinstance(self.default_model, dict) else {"profile": self.default_model}
            raise ConfigError("model", "no model is loaded and none was named")
        if name in self.profiles.profiles:
            return {"profile": name}
        if name in ARCHS_BY_NAME:
            return {"arch": name}
        raise ConfigError("model", f"unknown model {name!r} (profiles: {', '.join(self.model_names()) or 'none'})")

    def model_names(self) -> list[str]:
        return sorted(self.profiles.profiles) + sorted(ARCHS_BY_NAME)

    def resolve_asset(self, path: str) -> str:
        """ctrl_img must name a file under the assets folder (an upload)."""
        if not self.assets_folder:
            raise ConfigError("sample.ctrl_img", "this engine has no assets folder")
        full = os.path.realpath(os.path.join(self.assets_folder, path))
        if not full.startswith(os.path.realpath(self.assets_folder) + os.sep) or not os.path.isfile(full):
            raise ConfigError("sample.ctrl_img", "must be a path returned by POST /assets")
        return full

    def cancel(self, request_id: str) -> Request | None:
        with self._cv:
            req = self.requests.get(request_id)
            if req is None:
                return None
            req.cancel_event.set()
            queued = req in self._queue
            if queued:
                self._queue.remove(req)
        if queued:
            self._finish(req, "cancelled", "cancelled before it started")
        return req

    def get(self, request_id: str) -> Request | None:
        return self.requests.get(request_id)

    def queue_snapshot(self) -> dict:
        with self._cv:
            return {"running": self.current.summary() if self.current else None,
                    "queued": [r.summary() for r in self._queue],
                    "finished": [r.summary() for r in reversed(self._finished)]}

    def queue_length(self) -> int:
        return len(self._queue)

    def busy(self) -> bool:
        return self.current is not None or bool(self._queue)

    def health(self) -> dict:
        mc = self.active_config
        return {"ok": True, "busy": self.busy(), "queue": len(self._queue),
                "active": {"arch": mc.arch, "name_or_path": mc.profile or display_name(mc.name_or_path),
                           "profile": mc.profile, "variant": mc.variant} if mc else None,
                "memory": memory_info(self.device), "pool": self.pool.stats(),
                "uptime": time.time() - self.started_at}

    def request_unload(self):
        """Drop the holder and every pooled component (refused while a request runs or waits)."""
        with self._cv:
            if self.busy():
                raise EngineBusy("a request is running or queued")
            self._unload_pending = True
            self._cv.notify_all()

    def stop(self):
        """Cancel everything; run_forever returns after the current step."""
        self._stopping.set()
        with self._cv:
            pending = list(self._queue)
            self._queue.clear()
            if self.current is not None:
                self.current.cancel_event.set()
            self._cv.notify_all()
        for req in pending:
            req.cancel_event.set()
            self._finish(req, "cancelled", "the engine is stopping")

    # -- the main thread -----------------------------------------------------------------------------
    _unload_pending = False

    def run_forever(self):
        self._set_idle()
        while not self._stopping.is_set():
            req = self._next_request()
            if req is not None:
                self.execute(req)
                self._last_active = time.time()
                self._set_idle()
        self.unload_all()

    def _next_request(self) -> Request | None:
        with self._cv:
            while not self._queue and not self._stopping.is_set():
                if self._unload_pending:
                    break
                timeout = 1.0
                if self.idle_unload_seconds and self.holder is not None:
                    remaining = self._last_active + self.idle_unload_seconds - time.time()
                    if remaining <= 0:
                        break
                    timeout = min(timeout, remaining)
                self._cv.wait(timeout)
            if self._queue and not self._stopping.is_set():
                self.current = self._queue.popleft()
                return self.current
        if self._unload_pending or (self.idle_unload_seconds and self.holder is not None):
            self._unload_pending = False
            self.unload_all()
            self._set_idle()
        return None

    def unload_all(self):
        self.holder = None
        self.active_config = None
        self.pool.unload_all()

    default_model = None

    def warm_load(self, model):
        self.default_model = model
        mc, _gen = self.resolve(model, {})
        self._ensure_holder(mc, None)
        self._set_idle()

    def execute(self, req: Request):
        req.status, req.started_at = "running", time.time()
        t0 = time.perf_counter()
        try:
            holder = self._ensure_holder(req.model, req)
            self._check_cancel(req)
            self._sample(holder, req, t0)
            self._finish(req, "ok")
        except GenerationCancelled:
            self._finish(req, "cancelled", "cancelled")
        except ConfigError as e:
            self._finish(req, "error", e.one_line())
        except Exception as e:  # the engine keeps serving whatever one request did
            message = f"out of memory: {e}" if is_oom(e) else f"{type(e).__name__}: {e}"
            self._finish(req, "error", message)
        finally:
            if self.holder is not None:
                self.holder.sample_step_hook = None
                self.holder.status_hook = None
            with self._cv:
                self.current = None

    def _ensure_holder(self, mc: ModelConfig, req: Request | None):
        if self.holder is not None and self.active_config == mc:
            return self.holder                        # fast path: nothing to load
        status = self._status_fn(req, f"Loading {mc.arch}")
        self.holder, self.active_config = None, None   # drop references so released entries can be freed
        try:
            holder = self._build(mc, status)
        except Exception as e:
            if not is_oom(e):
                raise
            status("out of memory while loading: freeing unused components and retrying", "loading")
            self.pool.evict_untouched()
            holder = self._build(mc, status)
        self.pool.release_unused()
        self.holder, self.active_config = holder, mc
        self.builds += 1
        return holder

    def _build(self, mc: ModelConfig, status):
        def on_status(message, stage="status"):
            if stage == "loading" and message.startswith("loading "):
                self.faults.on_load()
            status(message, stage)
        holder = get_model_class(mc.arch)(mc, device=self.device, status_hook=on_status)
        with self.pool.building():
            holder.load_model()
        return holder

    def _status_fn(self, req: Request | None, prefix: str):
        def status(message, stage="status"):
            if req is not None:
                self._check_cancel(req)
                req.publish({"type": "status", "message": message, "stage": stage})
            self.on_info(f"{prefix}: {message}" if stage in ("loading", "quantizing") else message)
        return status

    def _sample(self, holder, req: Request, t0: float):
        spec, opts, gen = req.model.spec, req.stream, req.sample
        holder.status_hook = self._status_fn(req, "Generating")

        def on_step(i, n, timestep, latents, x0):
            self._check_cancel(req)
            self.faults.on_step()
            req.step, req.total = i + 1, n
            req.publish({"type": "progress", "step": i + 1, "total": n, "elapsed": time.perf_counter() - t0})
            if opts["latents"] == "raw" and ((i + 1) % opts["every_n_steps"] == 0 or i + 1 == n):
                src = x0 if (opts["preview"] == "x0" and x0 is not None) else latents
                frame, layout = latent_frames.to_frame(src, spec.latents, height=gen.height, width=gen.width,
                                                       num_frames=gen.num_frames, max_frames=opts["max_frames"])
                req.publish({"type": "latent", "step": i + 1, "total": n, "layout": layout,
                             "shape": list(frame.shape), "dtype": "float16"}, latent_frames.payload_bytes(frame))
            self.on_info(f"Generating {i + 1}/{n}", i + 1)

        holder.sample_step_hook = on_step
        name = f"{req.request_id}.{gen.output_ext}"
        gen.output_path = os.path.join(self.output_folder, name)
        records = holder.generate_images([gen])
        for rec in records:
            relpath = os.path.relpath(rec["path"], self.output_folder)
            result = {"type": "result", "path": rec["path"], "relpath": relpath, "url": f"/outputs/{relpath}",
                      "kind": rec["kind"], "ext": rec["ext"], "bytes": rec["bytes"], "seed": rec["seed"],
                      "width": rec.get("width"), "height": rec.get("height"),
                      "num_frames": rec.get("num_frames"), "fps": rec.get("fps"), "duration": rec.get("duration")}
            req.results.append({k: v for k, v in result.items() if k != "type"})
            req.publish(result)

    @staticmethod
    def _check_cancel(req: Request):
        if req.cancel_event.is_set():
            raise GenerationCancelled()

    def _finish(self, req: Request, status: str, error: str | None = None):
        req.status, req.error, req.finished_at = status, error, time.time()
        if status != "ok":
            req.publish({"type": "error", "message": error or status, "cancelled": status == "cancelled"})
        req.publish({"type": "end", "status": status})
        req.done_event.set()
        with self._cv:
            self._finished.append(req)
            while len(self._finished) > FINISHED_KEPT:
                old = self._finished.popleft()
                self.requests.pop(old.request_id, None)

    def _set_idle(self):
        mc = self.active_config
        self.on_info(f"Idle — {mc.arch}" if mc else "Idle — no model loaded", 0)


def display_name(name_or_path: str) -> str:
    """A model name safe to show anywhere: repo ids and tiny:<arch> as given, local paths by basename."""
    if not name_or_path:
        return ""
    if os.path.exists(os.path.expanduser(name_or_path)):
        return os.path.basename(os.path.normpath(name_or_path))
    return name_or_path


def memory_info(device: str) -> dict:
    if str(device).startswith("cuda") and torch.cuda.is_available():
        free, total = torch.cuda.mem_get_info(torch.device(device))
        return {"device": str(device), "used": total - free, "total": total}
    try:
        with open("/proc/self/statm") as f:
            rss = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (OSError, ValueError):
        rss, total = 0, 0
    return {"device": "cpu", "used": rss, "total": total}



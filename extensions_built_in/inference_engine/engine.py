"""The engine: a FIFO of generation requests, their records and frame buffers, and the supervision
of the generation worker that runs them (worker.py, in a process of its own). No torch here.

It knows requests, not HTTP: the server submits, cancels, subscribes to frames and reads snapshots;
every frame a request produces goes through `Request.publish`. It knows the worker only through
the messages of messages.py: a Run goes out, frames and a Done come back. A worker that does not
honour a cancel or a stop within `grace_seconds`, or that dies, is killed and replaced; the request
it was running ends with an error saying so, and the queue goes on on the fresh worker.
"""
import collections
import functools
import os
import re
import sys
import threading
import time
import traceback
import uuid
from dataclasses import dataclass, field, replace

from extensions_built_in.inference_engine import batching
from extensions_built_in.inference_engine import joblog
from extensions_built_in.inference_engine import admission as lim
from extensions_built_in.inference_engine import lora_folder as loras
from extensions_built_in.inference_engine import messages as m
from extensions_built_in.inference_engine.metrics import EngineMetrics
from extensions_built_in.inference_engine import queue_policy as qp
from extensions_built_in.inference_engine.results_feed import RESULTS_KEPT, ResultsFeed, entry_for
from extensions_built_in.inference_engine.protocol import FrameError, encode_frame
from extensions_built_in.inference_engine.supervisor import WORKERS, WorkerDied
from extensions_built_in.inference_engine.worker import Faults
from extensions_built_in.inference_engine.engine_settings import EngineSettings
from extensions_built_in.inference_engine.stages import ordered as ordered_stages
from toolkit.config_modules import GenerateImageConfig, ModelConfig
from toolkit import images, input_media, model_trees
from toolkit.errors import ConfigError
from toolkit.file_settings import display_name
from toolkit.hires import UPSCALE
from toolkit.local_weights import weights_here
from toolkit.models.base_model import batch_paths, output_files
from toolkit.media import atomic_path
from toolkit.models.registry import ARCHS as ARCHS_BY_NAME
from toolkit.weight_files import check_named_files
from toolkit.profiles import EMPTY as EMPTY_PROFILES
from toolkit.request import GenerationRequest, Policy, StreamOptions, resolve_model, resolve_request

FINISHED_KEPT = 100
POLL_SECONDS = 0.1          # how often the supervision loop looks at cancel and stop deadlines
STOP_SECONDS = 3.0          # a stopping engine waits this long for the worker, then kills it


class EngineBusy(RuntimeError):
    pass


class NotQueued(RuntimeError):
    """A move of a request that is not waiting (running, starting or finished): a 409."""


class QueueFull(EngineBusy):
    """engine.limits.max_queued requests wait already: a 503, as for a stopping engine. The queue is
    shared by every client, so this is the server's capacity, not one client's rate (429)."""


class Subscriber:
    """One live reader of a request's frames: `deliver(frame, is_latent)` is called on the
    generation thread for every frame published after it attached (the server hands them to
    its event loop, skipping latents a slow reader has not taken yet)."""

    def __init__(self, deliver):
        self.deliver = deliver


@dataclass
class Request:
    """A queued request's record: the GenerationRequest it runs (`work`), its state and its frames."""
    work: GenerationRequest
    status: str = "queued"            # queued | running | ok | error | cancelled
    created_at: float = field(default_factory=time.time)   # set again as it joins the queue (submit)
    started_at: float | None = None
    finished_at: float | None = None
    cancel_at: float | None = None    # monotonic time the running request was asked to stop
    overtaken: int = 0                # times a later request went first (queue_policy.pick)
    pinned: bool = False              # placed by a person (Engine.move): the policy keeps its place
    cancelled_by: str | None = None   # who asked for the cancel (the job log says)
    step: int = 0
    total: int = 0
    results: list = field(default_factory=list)
    error: str | None = None
    cancel_event: threading.Event = field(default_factory=threading.Event)
    done_event: threading.Event = field(default_factory=threading.Event)
    history: list = field(default_factory=list)      # (type, encoded frame) of every non-latent frame
    latest_latent: bytes | None = None
    latest_preview: bytes | None = None               # the newest `preview` frame (stream.preview_image)
    subscribers: list = field(default_factory=list)
    ended: bool = False                               # the `end` frame is published (under `lock`)
    lock: threading.Lock = field(default_factory=threading.Lock)
    api: str = "native"                # which API submitted it (native, a1111, openai): the results feed says
    client: str | None = None          # who, as the client named itself (native X-Client: grid, cli, ...)
    load_started: float | None = None  # monotonic time of its first `loading` status (a model load for it)
    load_seconds: float | None = None  # from that to its `loaded` status
    released_at: float | None = None   # its call was over, its file still to be written (messages.Released)
    # durations on the monotonic clock (the wall-clock fields above are for display): accepted, started, finished
    accepted_mono: float = field(default_factory=time.monotonic)
    started_mono: float | None = None
    finished_mono: float | None = None
    stages: dict = field(default_factory=dict)     # the seconds of each stage (stages.py): the engine's, then the worker's

    @property
    def finished(self) -> bool:
        return self.status in ("ok", "error", "cancelled")

    @property
    def request_id(self) -> str:
        return self.work.request_id

    @property
    def model(self) -> ModelConfig:
        return self.work.model

    @property
    def sample(self) -> GenerateImageConfig:
        return self.work.sample

    @property
    def stream(self) -> StreamOptions:
        return self.work.stream

    def publish(self, header: dict, payload: bytes = b""):
        header = {"type": header.pop("type"), "request_id": self.request_id, **header}
        frame = encode_frame(header, payload)
        latent = header["type"] in ("latent", "preview")     # newest-only frames a slow reader may skip
        with self.lock:
            if header["type"] == "preview":
                self.latest_preview = frame
            elif latent:
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
            newest = [f for f in (self.latest_latent, self.latest_preview) if f is not None]
            if newest:          # they belong right after the last progress frame
                last = max((i for i, (t, _f) in enumerate(self.history) if t == "progress"), default=len(replay) - 1)
                replay[last + 1:last + 1] = newest
            if not self.ended:      # else the replay already ends with `end`
                self.subscribers.append(subscriber)
        return replay

    def detach(self, subscriber: Subscriber):
        with self.lock:
            if subscriber in self.subscribers:
                self.subscribers.remove(subscriber)

    def summary(self) -> dict:
        return {"request_id": self.request_id, "status": self.status, "arch": self.model.arch,
                "model": self.model.profile or display_name(self.model.name_or_path or ""),
                "width": self.sample.width, "height": self.sample.height,
                "steps": self.sample.num_inference_steps, "batch_size": self.sample.batch_size,
                "pinned": self.pinned, "prompt": self.sample.prompt, "created_at": self.created_at, "started_at": self.started_at,
                "finished_at": self.finished_at, "step": self.step, "total": self.total,
                "results": self.results, "error": self.error}


class Engine:
    def __init__(self, settings: EngineSettings | None = None, *, output_folder: str, assets_folder: str | None = None,
                 device: str = "cpu", profiles=None, model_roots=None, on_info=None, faults=None,
                 results_kept: int = RESULTS_KEPT, **keys):
        """`settings`: the engine: block (engine_settings.EngineSettings); its fields may also be given as
        keywords (`keys`, over `settings`: how tests build engines), checked the same way. `worker`
        "process" runs generation in a child process (production), "thread" on a thread of this
        process (in-process tests); `faults` (worker.Faults) are injected there. `model_roots`: the
        folders a request may name local files in (None: anywhere; InferenceEngine._model_roots
        computes them from the settings), the LoRA folder and the model folders joining them.
        `results_kept`: the results feed's ring (results_feed.py), in the output folder."""
        if keys or settings is None:
            settings = EngineSettings.from_dict({**(settings.to_dict() if settings else {}), **keys}, "engine")
        self.settings = s = settings
        self.device = device
        self.output_folder = os.path.abspath(output_folder)
        self.assets_folder = os.path.abspath(assets_folder) if assets_folder else None
        self.dtype = s.dtype
        self.idle_unload_seconds = s.idle_unload_seconds
        self.grace_seconds = s.grace_seconds
        self.lora_folder = os.path.abspath(os.path.expanduser(s.lora_folder)) if s.lora_folder else None
        self.model_roots = [os.path.realpath(os.path.expanduser(r)) for r in model_roots] if model_roots else None
        if self.model_roots is not None and self.lora_folder:
            self.model_roots.append(os.path.realpath(self.lora_folder))
        self.model_folders = [os.path.abspath(os.path.expanduser(f)) for f in s.folders()]
        self.upscaler_folder = os.path.abspath(os.path.expanduser(s.upscaler_folder)) if s.upscaler_folder else None
        if self.model_roots is not None:
            self.model_roots.extend(os.path.realpath(f) for f in self.model_folders)
        self.limits = s.limits
        self.assets = lim.AssetBudget(self.assets_folder, self.limits.max_asset_bytes)
        self.on_info = on_info or (lambda info, step=None: None)
        self.profiles = profiles or EMPTY_PROFILES
        self.faults = faults
        self.worker_options = {"device": device, "keep_resident_gb": s.keep_resident_gb, "faults": faults,
                               "keep_host_gb": s.keep_host_gb, "reserve_gb": s.reserve_gb,
                               "cond_cache_mb": s.cond_cache_mb, "prefetch": s.prefetch,
                               "model_folders": tuple(self.model_folders), "preview_decoder": s.preview_decoder,
                               "compile": s.compile, "compile_cache_dir": s.compile_cache_dir,
                               "compile_lora_rank": s.compile_lora_rank,
                               "write_behind": s.write_behind,
                               "model_roots": tuple(self.model_roots) if self.model_roots is not None else None}
        self.policy = EnginePolicy(self)
        self.worker_kind = s.worker
        self.worker = None
        self.worker_state: m.State | None = None
        self.worker_restarts = 0
        self.worker_last_exit: str | None = None
        self.current: Request | None = None
        self.running: list[Request] = []        # the current call's requests: `current` and its batch members
        self.writing: dict[str, Request] = {}    # released by the worker, their files still being written
        self.max_batch, self.queue_policy, self.max_overtake = s.max_batch, s.queue_policy, s.max_overtake
        self.step_seconds: float | None = None  # recent seconds per step of a call (for /queue's estimates)
        self._last_step: tuple | None = None     # (request_id, monotonic) of the last progress frame
        self._files_bytes: dict = {}             # model key -> its weight files' bytes (queue_policy.load_cost)
        self.requests: dict[str, Request] = {}
        self._queue: collections.deque[Request] = collections.deque()
        self._calls: collections.deque[WorkerCall] = collections.deque()   # worker_call()s waiting their turn
        self._finished: collections.deque[Request] = collections.deque()
        self._cv = threading.Condition()
        self._stopping = threading.Event()
        self._last_active = time.time()
        self._names: set = set()            # output file names handed out by this engine
        self.started_at = time.time()
        self.created_mono = time.monotonic()
        self.startup: dict = {}             # seconds of the engine's start: worker, its imports, default model, ready
        self.metrics_open = s.metrics_open
        self.metrics = EngineMetrics(self)
        os.makedirs(self.output_folder, exist_ok=True)
        for folder in (self.output_folder, self.assets_folder):     # what a killed engine left half-written
            if folder and os.path.isdir(folder):
                remove_partial_files(folder)
        self.results = ResultsFeed(self.output_folder, results_kept)

    # -- the server's side (any thread) -------------------------------------------------------------
    def submit(self, model: dict, sample: dict, stream: dict | None = None, request_id: str | None = None, *,
               api: str = "native", client: str | None = None) -> Request:
        """Validate and queue a request. Raises ConfigError naming the bad field (engine.limits and
        the memory pre-flight included), QueueFull when engine.limits.max_queued wait already.
        `api`, `client`: who asked, as the results feed records it."""
        if self._stopping.is_set():
            raise EngineBusy("the engine is stopping")
        work = self.resolve(model, sample, stream, request_id)
        request_id = work.request_id or uuid.uuid4().hex[:16]
        req = Request(replace(work, request_id=request_id), api=api, client=client)
        mc, gen = req.model, req.sample
        try:      # the start frame before the queue: a request that cannot be streamed is never queued
            req.publish({"type": "start", "model": mc.to_dict(), "sample": gen.to_dict(),
                         "modality": mc.spec.modality, "preview": self.preview_of(mc.spec)})
        except FrameError as e:
            raise ConfigError("sample", f"too large to stream: {e}") from None
        with self._cv:
            if request_id in self.requests:
                raise ConfigError("request_id", f"{request_id!r} is already in use")
            if len(self._queue) >= self.limits.max_queued:
                raise QueueFull(f"the queue is full: {len(self._queue)} requests wait "
                                f"(engine.limits.max_queued); retry once some have run")
            self.requests[request_id] = req
            ahead = len(self._queue) + (self.current is not None)
            # queued-at, taken under the queue's lock: two clients' created_at then order as the queue does
            req.created_at, req.accepted_mono = time.time(), time.monotonic()
            self._queue.append(req)
            self._cv.notify_all()
        for warning in gen.warnings:
            req.publish({"type": "status", "message": f"warning: {warning}", "stage": "warning"})
        req.publish({"type": "status", "message": f"queued ({ahead} ahead)" if ahead else "queued",
                     "stage": "queued"})
        return req

    def resolve(self, model, sample, stream=None, request_id: str | None = None, *,
                dry_run: bool = False) -> GenerationRequest:
        """A request's model (a config or `{profile: NAME}`), sample settings and stream options, with
        the precedence request > [generation] > profile > variant > arch, checked against this
        engine's roots, limits and memory (EnginePolicy). `dry_run`: POST /resolve's answer
        (toolkit/request.py)."""
        return resolve_request(model, sample, stream, profiles=self.profiles, dtype=self.dtype, policy=self.policy,
                               request_id=request_id, dry_run=dry_run, device=self.device)

    def upscaler_folders(self) -> tuple:
        """(model folders, upscaler folders): where upscale models are found (toolkit/upscalers.py)."""
        return tuple(self.model_folders), ((self.upscaler_folder,) if self.upscaler_folder else ())

    def model_for_name(self, name: str | None, modality: str | None = None) -> dict:
        """A model named by a client that knows names only (compat APIs): a profile, an arch, or None
        for the active model (else the default), as a ModelConfig dict (`arch` always set). A name
        that cannot load here is a ConfigError("model") now, before anything is submitted or unloaded.
        `modality` (for None): a route that makes images after a video request gets the default model
        where the active one is of another modality and the default is of this one."""
        if name in (None, ""):
            active = self.active_config.to_dict() if self.active_config is not None else None
            if active is not None and (modality is None or self.default_model is None
                                       or ARCHS_BY_NAME[active["arch"]].modality == modality):
                return active
            if self.default_model is None:
                raise ConfigError("model", "no model is loaded and none was named")
            model = self.default_model if isinstance(self.default_model, dict) else {"profile": self.default_model}
            if active is not None:
                model = self.profiles.resolve_model(model)[0]
                return model if ARCHS_BY_NAME[model["arch"]].modality == modality else active
        elif name in self.profiles.profiles or name in ARCHS_BY_NAME:
            why = self._not_here(name)
            if why:
                raise ConfigError("model", why)
            model = {"profile": name} if name in self.profiles.profiles else {"arch": name}
        else:
            model = self.library_models().get(name)     # a checkpoint of the model folders, by its file name
            if model is None:
                raise ConfigError("model", f"unknown model {name!r} (models here: "
                                  f"{', '.join(self.model_names()) or 'none'})")
        return self.profiles.resolve_model(model)[0]

    def model_names(self, modality: str | None = None) -> list[str]:
        """The names model_for_name takes that can load here, without the network: profiles whose
        files exist, then archs whose default weights are a local folder or in the local hub cache."""
        names = sorted(self.profiles.profiles) + sorted(set(ARCHS_BY_NAME) - set(self.profiles.profiles))
        names = [n for n in names if (modality is None or self._arch_of_name(n).modality == modality)
                 and self._not_here(n) is None]
        # then the model folders' checkpoints and denoiser files, by file name
        return names + [n for n, model in sorted(self.library_models().items()) if n not in names
                        and (modality is None or ARCHS_BY_NAME[model["arch"]].modality == modality)]

    def _arch_of_name(self, name: str):
        prof = self.profiles.profiles.get(name)
        return ARCHS_BY_NAME[prof.architecture if prof else name]

    def _not_here(self, name: str) -> str | None:
        """Why a profile or arch name cannot load here, or None."""
        if name in self.profiles.profiles:
            try:
                self.profiles.get(name).model_config()
            except ConfigError as e:
                return f"{name!r} cannot load: {e.one_line()}"
            return None
        spec = ARCHS_BY_NAME[name]
        if weights_here(spec):
            return None
        source = spec.default_source()
        if not source:
            return f"arch {name!r} has no public weights: name a profile for it"
        return (f"{name!r}: its weights ({source}) are not in the local hub cache; download them "
                f"(hf download {source}) or name a profile")

    def preview_of(self, spec) -> dict:
        """An arch's `preview` block (start frames, GET /models): its latent layout and RGB table, the tiny
        autoencoder that fits it (`tae`), and `decoder`, what makes this engine's preview images: that
        autoencoder where a model folder has its file (engine.preview_decoder auto), else "projection"."""
        from toolkit.models import tiny_autoencoder
        found = tiny_autoencoder.decoder_for(spec.latents.format, self.model_folders, self.settings.preview_decoder)
        return {**spec.latents.preview(), "decoder": found.tae if found else tiny_autoencoder.PROJECTION}

    def default_sample(self, *, profile: str | None = None, arch: str | None = None,
                       variant: str | None = None) -> dict:
        """The sample a request that sets no sample key gets, as GenerateImageConfig.to_dict(): for a
        profile, [generation] over its defaults over its variant's and arch's; for an arch, its variant's
        over its own. What the Generate form starts from. An input image its default task needs (an
        edit's control image, a refiner's init image) is left None."""
        sample = {}
        if profile is not None:
            prof = self.profiles.get(profile)
            arch, variant, sample = prof.architecture, prof.variant, self.profiles.sample_defaults(profile)
        spec = ARCHS_BY_NAME[arch]
        # the default task's images: stand-ins to validate; the form asks the person for them
        task = spec.task(sample["task"]) if sample.get("task") else spec.tasks_for(variant)[0]
        stand_in = [n for n in (task.needs if task else ()) if not sample.get(n)]
        sample = {**sample, **{n: n for n in stand_in}}
        out = GenerateImageConfig.from_dict(sample, arch, "sample", variant).to_dict()
        for name in stand_in:
            out[name] = None
        return out

    def check_path(self, value: str, key: str):
        """One local path a request names, as check_paths checks each."""
        if self.model_roots is None or not isinstance(value, str) or not _is_local_path(value):
            return
        real = os.path.realpath(os.path.expanduser(value))
        if not any(real == root or real.startswith(root + os.sep) for root in self.model_roots):
            raise ConfigError(key, "is not in a folder this engine loads models from (engine.model_roots)")

    def check_paths(self, model):
        """Local paths a request names must lie under `model_roots`, checked before anything looks at
        them, with one answer whether they exist or not: the API does not tell a token holder which
        files exist elsewhere on this machine. (A profile's paths are the operator's, not the request's.)"""
        if self.model_roots is None or not isinstance(model, dict):
            return
        named = [(f"model.{k}", model.get(k)) for k in ("name_or_path", "extras_name_or_path", "vae")] + \
            loras.lora_keys(model)
        if isinstance(model.get("components"), dict):
            named += [(f"model.components.{role}", path) for role, path in model["components"].items()]
        for key, value in named:
            if not isinstance(value, str) or not _is_local_path(value):
                continue
            real = os.path.realpath(os.path.expanduser(value))
            if not any(real == root or real.startswith(root + os.sep) for root in self.model_roots):
                raise ConfigError(key, "is not in a folder this engine loads models from (engine.model_roots)")

    def check_batch(self, count: int):
        """A compatibility call that queues `count` requests at once (ConfigError key `batch`)."""
        lim.check_batch(self.limits, count)

    def asset_upload(self) -> lim.AssetUpload:
        """An upload's share of engine.limits.max_asset_bytes (a context manager; see admission.py)."""
        return self.assets.upload()

    def resolve_asset(self, value: str, field: str = "sample.ctrl_img", kind: str = "image") -> str:
        """An input's file, checked as a `kind` (image, video, audio): `value` is an asset id (the `path`
        POST /assets returned), a path under the assets folder, or a `data:<kind>/...;base64,` URL
        (stored here as an asset, within engine.limits.max_asset_bytes). Anything else, wherever it
        points, is refused with one message (the API does not say which files exist elsewhere); so is
        a file that is not of its kind, a truncated one, or one past its bounds by its header
        (toolkit.images, toolkit.input_media: checked before it is decoded). ConfigError names `field`."""
        if not self.assets_folder:
            raise ConfigError(field, "this engine has no assets folder")
        root = os.path.realpath(self.assets_folder)
        if images.is_data_url(value):
            full = self._store_data_url(value, field, kind)
            try:
                input_media.check_input(full, field, kind)
            except ConfigError:
                os.remove(full)             # keep no asset that no request can use
                raise
            return full
        try:
            full = os.path.realpath(os.path.join(root, value))
        except ValueError:                  # an embedded NUL: no file has that name
            full = ""
        if not full.startswith(root + os.sep) or not os.path.isfile(full):
            raise ConfigError(field, "must be an asset id from POST /assets, a path under the assets folder, "
                              f"or a data:{kind}/...;base64, URL")
        input_media.check_input(full, field, kind)
        return full

    def _store_data_url(self, url: str, field: str, kind: str = "image") -> str:
        data, ext = images.decode_data_url(url, field, kind)
        with self.asset_upload() as upload:
            if not upload.take(len(data)):
                raise ConfigError(field, upload.refusal)
            os.makedirs(self.assets_folder, exist_ok=True)
            full = os.path.join(os.path.realpath(self.assets_folder),
                                f"{uuid.uuid4().hex[:8]}_{field.rpartition('.')[2]}.{ext}")
            with atomic_path(full) as tmp:
                with open(tmp, "wb") as f:
                    f.write(data)
            upload.stored()
        return full

    def cancel(self, request_id: str, by: str = "a client") -> Request | None:
        """`by`: who asked, for the job log (POST /cancel, a client that went away, ...)."""
        with self._cv:
            req = self.requests.get(request_id)
            if req is None:
                return None
            if not req.finished and req.cancelled_by is None:
                req.cancelled_by = by
            self.metrics.cancel()
            req.cancel_event.set()
            queued = req in self._queue
            if queued:
                self._queue.remove(req)
            running = (req in self.running or req.request_id in self.writing) and not req.finished
            if running and req.cancel_at is None:
                req.cancel_at = time.monotonic()
        if queued:
            self._finish(req, "cancelled", "cancelled before it started")
        elif running and self.worker is not None:
            self.worker.send(m.Cancel(request_id))
        return req

    def move(self, request_id: str, position) -> tuple[Request, int] | None:
        """Put a queued request at `position` of the queue (0: the next to run; past the end: last,
        as a client's view of the queue may be stale). None for an unknown id; NotQueued when it is
        not waiting; ConfigError("position") for a bad position. The moved request is pinned: the
        queue policy neither passes it nor lets it pass anyone (queue_policy.pick), so a person's
        order holds under affinity too. Returns the request and the position it took."""
        if isinstance(position, bool) or not isinstance(position, int) or position < 0:
            raise ConfigError("position", f"must be an integer >= 0 (0: the next to run), got {position!r}")
        with self._cv:
            req = self.requests.get(request_id)
            if req is None:
                return None
            if req not in self._queue:
                state = "starting" if req.status == "queued" else req.status
                raise NotQueued(f"request {request_id!r} is {state}: only a queued request can be moved")
            self._queue.remove(req)
            position = min(position, len(self._queue))
            self._queue.insert(position, req)
            req.pinned = True
            self._cv.notify_all()
        return req, position

    def get(self, request_id: str) -> Request | None:
        return self.requests.get(request_id)

    def running_request(self) -> Request | None:
        return self.current

    def queue_snapshot(self) -> dict:
        """`running`: the call's head; `batch`: every request of that call (its dynamic batch, head
        first); `writing`: requests whose call is over and whose files are being written (engine.write_behind); `queued`: in queue order (arrival order, as moved by Engine.move), each with `estimated_start` (seconds from now at the recent
        step time, None before a step was timed; a rough bound: requests that join a batch or that
        affinity moves up start sooner, loads are not counted) and `load_cost` (bytes it would load first: 0 on the resident model)."""
        with self._cv:
            running, queued, writing = list(self.running), list(self._queue), list(self.writing.values())
            head = self.current
        left = (head.total or head.sample.num_inference_steps) - head.step if head is not None else 0
        starts = qp.estimated_starts(left, [r.sample.num_inference_steps for r in queued], self.step_seconds)
        active, pool = self.active_config, self.worker_state.pool if self.worker_state else None
        out = []
        for r, start in zip(queued, starts):
            files = lambda mc: self._files_bytes.setdefault(repr(mc.without_loras()), qp.weight_files_bytes(mc))
            out.append({**r.summary(), "estimated_start": start,
                        "load_cost": qp.load_cost(r.model, active, pool, files_bytes=files)})
        return {"running": head.summary() if head else None, "batch": [r.summary() for r in running],
                "writing": [r.summary() for r in writing],
                "queued": out, "finished": [r.summary() for r in reversed(self._finished)]}

    def queue_length(self) -> int:
        return len(self._queue)

    def busy(self) -> bool:
        return self.current is not None or bool(self._queue) or bool(self.writing)

    @property
    def active_config(self) -> ModelConfig | None:
        """The model the worker holds (from its last State)."""
        return self.worker_state.active if self.worker_state else None

    def scheduler_name(self) -> str | None:
        """The active model's scheduler class (what the compatibility routes call its sampler)."""
        return self.worker_state.scheduler if self.worker_state else None

    def health(self) -> dict:
        """Answered from what the engine already knows: never waits on the worker."""
        mc, state = self.active_config, self.worker_state
        w = self.worker
        return {"ok": True, "ready": self.ready_mono is not None, "starting": self.starting,
                "busy": self.busy(), "queue": len(self._queue),
                "active": {"arch": mc.arch, "name_or_path": mc.profile or display_name(mc.name_or_path),
                           "profile": mc.profile, "variant": mc.variant,
                           "placement": dict(state.placement) if state and state.placement else None} if mc else None,
                "memory": state.memory if state else {"device": self.device, "used": 0, "total": 0},
                "pool": state.pool if state else {"hits": 0, "misses": 0, "evictions": 0, "loads": 0,
                                                  "resident_bytes": 0, "entries": []},
                "worker": {"kind": self.worker_kind, "pid": w.pid if w else None, "alive": bool(w and w.alive()),
                           "restarts": self.worker_restarts, "last_exit": self.worker_last_exit},
                "cond_cache": state.cond_cache if state else {}, "prefetch": state.prefetch if state else {},
                "compile": state.compile if state else {},
                "uptime": time.time() - self.started_at, "startup": dict(self.startup)}

    def worker_call(self, message, reply_type, timeout: float):
        """Any thread: send `message` (one with a `task_id`, e.g. messages.Preprocess) to the worker between
        requests, ahead of the queued ones, and return its `reply_type` answer. EngineBusy when the engine
        stops, or the answer does not come within `timeout` seconds (a long request runs)."""
        call = WorkerCall(message, reply_type)
        with self._cv:
            if self._stopping.is_set():
                raise EngineBusy("the engine is stopping")
            self._calls.append(call)
            self._cv.notify_all()
        if not call.done.wait(timeout):
            with self._cv:
                if call in self._calls:
                    self._calls.remove(call)
            raise EngineBusy(f"the worker did not get to it within {timeout:g} s (a request is running): try again")
        if call.reply is None:
            raise EngineBusy(call.error or "the engine is stopping")
        return call.reply

    def request_unload(self):
        """Drop the holder and every pooled component (refused while a request runs or waits)."""
        with self._cv:
            if self.busy():
                raise EngineBusy("a request is running or queued")
            self._unload_pending = True
            self._cv.notify_all()

    def stop(self):
        """Cancel everything; run_forever returns within STOP_SECONDS whatever the worker does."""
        self._stopping.set()
        if "downloads" in self.__dict__:
            self.downloads.stop()          # a hub download's process ends with the engine
        with self._cv:
            pending = list(self._queue)
            self._queue.clear()
            calls, self._calls = list(self._calls), collections.deque()
        for call in calls:
            call.error = "the engine is stopping"
            call.done.set()
        with self._cv:
            running = [r for r in [*self.running, *self.writing.values()] if not r.finished]
            for r in pending + running:
                r.cancelled_by = r.cancelled_by or "the engine stopping"
            for current in running:
                current.cancel_event.set()
                current.cancel_at = current.cancel_at or time.monotonic()
            self._cv.notify_all()
        for current in running:
            if self.worker is not None:
                self.worker.send(m.Cancel(current.request_id))
        for req in pending:
            req.cancel_event.set()
            self._finish(req, "cancelled", "the engine is stopping")

    # -- the main thread -----------------------------------------------------------------------------
    _unload_pending = False
    default_model = None

    # what the engine is doing before it can serve (GET /health `starting`; None once `ready`)
    starting = "starting the generation worker"
    ready_mono: float | None = None          # when it could first serve (the worker up, the default model loaded)
    _spawned_mono: float | None = None

    def spawn_worker(self):
        """Start the worker process without waiting for it: its imports (torch, diffusers: seconds) then
        overlap the HTTP server's start and the first request's arrival. start_worker() waits for it."""
        if self.worker is None:
            self._spawned_mono = time.monotonic()
            self.worker = WORKERS[self.worker_kind](self.worker_options).start()

    def start_worker(self):
        self.spawn_worker()
        state = self._pump_until(lambda msg: isinstance(msg, m.State))
        now = time.monotonic()
        boot = state.boot or {}
        self.startup["worker_seconds"] = round(now - self._spawned_mono, 3)
        if boot.get("imports") is not None:
            self.startup["worker_imports_seconds"] = boot["imports"]
        joblog.emit(joblog.worker_ready_line(now - self._spawned_mono, boot))

    def mark_ready(self):
        """The engine serves now (the worker is up, the default model loaded when there is one)."""
        if self.ready_mono is None:
            self.ready_mono = time.monotonic()
            self.startup["ready_seconds"] = round(self.ready_mono - self.created_mono, 3)
            self.starting = None

    def run_forever(self):
        if self.worker_state is None:
            self.start_worker()
        self.mark_ready()
        self._set_idle()
        try:
            while not self._stopping.is_set():
                if self.writing and not self._queue and not self._calls:
                    self._pump_writes()
                    continue
                req = self._next_request()
                if req is not None:
                    self.execute(req)
                    self._last_active = time.time()
                    self._set_idle()
        finally:
            self.shutdown_worker()
            self._end_all("the engine stopped")

    def _end_all(self, reason: str):
        """Every request not finished yet ends (its `end` frame, its waiters woken): nothing waits on
        an engine that no longer runs."""
        with self._cv:
            left = [r for r in self.requests.values() if not r.finished]
            self._queue.clear()
            calls, self._calls = list(self._calls), collections.deque()
        for call in calls:
            call.error = reason
            call.done.set()
        for r in left:
            r.cancel_event.set()
            self._finish(r, "cancelled" if self._stopping.is_set() else "error", reason)

    def _next_request(self) -> Request | None:
        with self._cv:
            while not self._queue and not self._calls and not self._stopping.is_set():
                if self._unload_pending:
                    break
                timeout = 1.0
                if self.idle_unload_seconds and self.active_config is not None:
                    remaining = self._last_active + self.idle_unload_seconds - time.time()
                    if remaining <= 0:
                        break
                    timeout = min(timeout, remaining)
                self._cv.wait(timeout)
            call = self._calls.popleft() if self._calls and not self._stopping.is_set() else None
            if call is None and self._queue and not self._stopping.is_set():
                active = self.active_config
                queued = list(self._queue)
                i = qp.pick(queued, active.without_loras() if active else None, self.queue_policy, self.max_overtake)
                self.current = queued[i]
                self._queue.remove(self.current)
                return self.current
        if call is not None:
            self._run_call(call)
            return None
        if self._stopping.is_set():
            return None
        if self._unload_pending or (self.idle_unload_seconds and self.active_config is not None):
            self._unload_pending = False
            self.unload_all()
        return None

    def _run_call(self, call: "WorkerCall"):
        """A worker_call on the main thread: the message out, messages handled until its answer."""
        try:
            if self.worker is None or not self.worker.alive():
                self._restart_worker(None)
            self.worker.send(call.message)
            task_id = call.message.task_id
            call.reply = self._pump_until(lambda msg: isinstance(msg, call.reply_type) and msg.task_id == task_id)
        except WorkerDied as e:
            call.error = f"the generation worker {e}; it was restarted"
            self._restart_worker(str(e))
        except Exception as e:      # noqa: BLE001 - one call never ends the engine
            contained("a worker call", e)
            call.error = f"internal error: {type(e).__name__}: {e}"
        finally:
            call.done.set()

    def unload_all(self):
        """Drop the worker's holder and pool (waits for its State)."""
        if self.worker is not None and self.worker.alive():
            self.worker.send(m.Unload())
            self._pump_until(lambda msg: isinstance(msg, m.State))
        self._set_idle()

    def list_loras(self, arch: str | None = None, metadata: bool = False) -> dict:
        """The LoRA folder's files, from their headers (lora_folder.listing)."""
        return loras.listing(self.lora_folder, arch, metadata)

    def library(self) -> dict:
        """Every model usable here: the loaded one, the tiny ones, hub cache, model folders, profiles
        (toolkit/library.py); `annotators`: the preprocessors' model folders found (toolkit/annotators.py)."""
        from toolkit import annotators, library
        return {**library.scan(self.model_folders, self.profiles, loaded=self.active_config),
                "annotators": annotators.listing(self.model_folders)}

    @functools.cached_property
    def downloads(self):
        """The downloads people asked for (POST /downloads): toolkit/downloads.py."""
        from toolkit.downloads import Downloads
        return Downloads(self.model_folders)

    def library_models(self) -> dict:
        """The model folders' diffusers folders, checkpoints and denoiser files that load as they are
        (companions found), by the name a client that knows names picks them by (library.title:
        "ponyXL.safetensors", "Z-Image-Turbo"): {name: model}. The first of two with one name wins."""
        from toolkit import library
        if not self.model_folders:
            return {}
        out = {}
        for e in library.scan(self.model_folders, hub_cache=False)["entries"]:
            if (e["source"] == "folder" and e["model"] and e["complete"]
                    and e["kind"] in ("pipeline", "checkpoint", "single_file")):
                out.setdefault(library.title(e), e["model"])
        return out

    def vae_files(self) -> dict:
        """The model folders' VAE files, {name (library.title): path}: what A1111's sd_vae names."""
        from toolkit import library
        if not self.model_folders:
            return {}
        out = {}
        for e in library.scan(self.model_folders, hub_cache=False)["entries"]:
            if e["kind"] == "component" and e["complete"] and any(f["role"] == "vae" for f in e.get("fits") or ()):
                out.setdefault(library.title(e), e["path"])
        return out

    def warm_load(self, model):
        model = loras.resolve_paths(model, self.lora_folder)
        self.default_model = model
        mc, _defaults = resolve_model(model, profiles=self.profiles, dtype=self.dtype, policy=self.policy,
                                      device=self.device)
        if self.worker_state is None:
            self.start_worker()
        self.starting = f"loading the default model {joblog.model_label(mc)}"
        t0 = time.monotonic()
        self.on_info(f"Loading the default model {joblog.model_label(mc)}", 0)
        self.worker.send(m.Load(mc))
        self._pump_until(lambda msg: isinstance(msg, m.State))
        self.startup["default_model_seconds"] = round(time.monotonic() - t0, 3)
        self._set_idle()

    def shutdown_worker(self):
        if self.worker is not None:
            self.worker.stop(STOP_SECONDS)
            self.worker = None

    def execute(self, req: Request):
        """Run `req` on the worker, with the queued requests that can share its pipeline call
        (batching.py, up to max_batch images): forward their frames until each is done, or until the
        worker dies or does not honour a cancel within grace_seconds (then it is killed and replaced,
        and every request of the call ends with that error)."""
        try:
            if self.worker is None or not self.worker.alive():
                self._restart_worker(None)
            batch = self._claim_batch(req)
            now, mono = time.time(), time.monotonic()
            for r in batch:
                r.status, r.started_at, r.started_mono = "running", now, mono
                r.stages = self._waited(r, mono)
            for r in batch:
                if r.cancel_event.is_set():
                    self._finish(r, "cancelled", "cancelled")
            try:      # again: submit had no device total while the worker was (re)starting
                lim.check_memory(req.model, req.sample, self.worker_state.memory if self.worker_state else None)
            except ConfigError as e:
                for r in batch:
                    self._finish(r, "error", e.one_line())
                return
            batch = [r for r in batch if not r.finished]
            if not batch:
                return
            self.worker.send(m.Run(tuple(r.work.at(self._output_path(r)) for r in batch)))
            self._prefetch_next(req)
            # until each request ended, or its file is written behind the call (the next Run may go)
            while not all(r.finished or r.released_at is not None for r in batch):
                try:
                    msg = self.worker.recv(POLL_SECONDS)
                except WorkerDied as e:
                    for r in batch:
                        self._finish(r, "error", f"the generation worker {e}; it was restarted and the queue goes on")
                    self._restart_worker(str(e))
                    return
                if msg is not None:
                    self._dispatch(msg)
                grace = min(self.grace_seconds, STOP_SECONDS) if self._stopping.is_set() else self.grace_seconds
                if any(not r.finished and r.cancel_at is not None and time.monotonic() - r.cancel_at > grace
                       for r in batch):
                    self.worker.kill()
                    for r in batch:
                        self._finish(r, "error", f"the generation worker did not stop within {grace:g} s of the "
                                                 "cancel; it was restarted and the queue goes on")
                    self._restart_worker(f"killed: a cancel not honoured within {grace:g} s")
                    return
        except Exception as e:      # noqa: BLE001 - one request never ends the engine
            contained(f"running request {req.request_id}", e)
            for r in self.running or [req]:
                self._finish(r, "error", f"internal error: {type(e).__name__}: {e}")
                try:        # the worker stops what it may still be running for it
                    if self.worker is not None and self.worker.alive():
                        self.worker.send(m.Cancel(r.request_id))
                except Exception:       # noqa: BLE001 - a dead worker is replaced by the next execute
                    pass
        finally:
            with self._cv:
                self.writing.update((r.request_id, r) for r in self.running
                                    if r.released_at is not None and not r.finished)
                self.current = None
                self.running = []
            self._last_step = None

    def _pump_writes(self):
        """Files are written behind a finished call and nothing else waits: the worker's messages (their
        result frames and Done) are handled until they are written, or a request or call comes."""
        try:
            while (self.writing and self.worker is not None and not self._queue and not self._calls
                   and not self._stopping.is_set()):
                msg = self.worker.recv(POLL_SECONDS)
                if msg is not None:
                    self._dispatch(msg)
        except WorkerDied as e:
            self._restart_worker(str(e))

    def _claim_batch(self, head: Request) -> list[Request]:
        """`head` and the queued requests that join its call (taken off the queue): compatible with
        it (batching.py), within max_batch images and within the device's memory as one batch."""
        memory = self.worker_state.memory if self.worker_state else None
        with self._cv:
            members = batching.take_batch(head, list(self._queue), self.max_batch)
            while members:      # the memory pre-flight for the call's rows: drop members until it fits
                rows = head.sample.batch_size + sum(r.sample.batch_size for r in members)
                try:
                    lim.check_memory(head.model, replace(head.sample, batch_size=rows), memory)
                    break
                except ConfigError:
                    members.pop()
            for r in members:
                self._queue.remove(r)
            self.current, self.running = head, [head, *members]
        return self.running

    def _prefetch_next(self, req: Request):
        """The request the queue policy would run next needs another model: the worker reads its
        components meanwhile."""
        resident = req.model.without_loras()
        with self._cv:
            queued = list(self._queue)
            nxt = queued[qp.pick(queued, resident, self.queue_policy, self.max_overtake, bump=False)] if queued else None
        if nxt is not None and nxt.model.without_loras() != resident and nxt.sample.task != UPSCALE:
            self.worker.send(m.Prefetch(nxt.model))

    def _waited(self, req: Request, until: float) -> dict:
        """`worker`: the seconds `req` waited for the engine's start (the worker, the default model);
        `queue`: the rest of its wait before it ran (stages.py)."""
        ready = self.ready_mono if self.ready_mono is not None else until
        worker = min(max(0.0, ready - req.accepted_mono), until - req.accepted_mono)
        out = {"worker": worker} if worker > 0 else {}
        return {**out, "queue": max(0.0, until - req.accepted_mono - worker)}

    def _restart_worker(self, reason: str | None):
        """Replace a dead or killed worker (not while the engine stops)."""
        if reason is not None:
            self.worker_last_exit = reason
            self.worker_restarts += 1
            joblog.emit(joblog.worker_restart_line(f"{reason}; starting a new one"))
        for r in list(self.writing.values()):       # files it was writing behind a finished call
            self._finish(r, "error", f"the generation worker {reason or 'stopped'} before the file was written; "
                                     "it was restarted and the queue goes on")
        if self.worker is not None:
            self.worker.kill()
        self.worker = None
        self.worker_state = None
        # injected faults were for the worker that met them: a fresh worker starts clean
        self.worker_options = {**self.worker_options, "faults": Faults()}
        if not self._stopping.is_set():
            self.start_worker()

    def _pump_until(self, done):
        """Handle the worker's messages until one satisfies `done` (or it dies: WorkerDied)."""
        while True:
            msg = self.worker.recv(POLL_SECONDS)
            if msg is None:
                continue
            self._dispatch(msg)
            if done(msg):
                return msg

    def _dispatch(self, msg):
        if isinstance(msg, m.Frame):
            req = self.requests.get(msg.request_id)
            if req is not None and not req.finished:
                if msg.header.get("type") == "progress":
                    req.step, req.total = msg.header["step"], msg.header["total"]
                    if req is self.current:
                        self._time_step(req)
                elif msg.header.get("type") == "status":
                    _time_load(req, msg.header.get("stage"))
                    if "stages" in msg.header:       # the worker's stages, after the engine's own (worker, queue)
                        msg.header["stages"] = ordered_stages({**req.stages, **msg.header["stages"]})
                    if msg.header.get("stage") == "retry":      # an out-of-memory retry: the job log says so
                        joblog.emit(joblog.retry_line(req.request_id, msg.header.get("message", "")))
                req.publish(dict(msg.header), msg.payload)
        elif isinstance(msg, m.Done):
            req = self.requests.get(msg.request_id)
            if req is not None and not req.finished:
                req.results.extend(msg.results)
                req.stages = {**req.stages, **msg.stages}
                self._finish(req, msg.status, msg.error)
        elif isinstance(msg, m.Released):
            for rid in msg.request_ids:
                req = self.requests.get(rid)
                if req is not None and not req.finished:
                    req.released_at = time.time()
        elif isinstance(msg, m.State):
            try:
                for line in joblog.state_lines(self.worker_state, msg, self.current.request_id if self.current else None):
                    joblog.emit(line)
            except Exception as e:      # noqa: BLE001 - the log is bookkeeping
                contained("logging the worker's state", e)
            self.worker_state = msg
        elif isinstance(msg, m.Info):
            self.on_info(msg.info, msg.step)

    def _time_step(self, req: Request):
        """The running call's seconds per step, smoothed (first steps of a call include no load: a
        step is timed from the previous progress frame of the same request only)."""
        now = time.monotonic()
        last, self._last_step = self._last_step, (req.request_id, now)
        if last is not None and last[0] == req.request_id:
            dt = now - last[1]
            self.step_seconds = dt if self.step_seconds is None else 0.7 * self.step_seconds + 0.3 * dt
            self.metrics.step(dt)

    def _output_path(self, req: Request) -> str:
        """`<request_id>.<ext>`, or with a suffix when that name was ever used: never overwrites. A batch
        writes `<name>-<i>.<ext>` (base_model.batch_paths), a file per image (output_files): every one of
        its names is free."""
        ext, batch = req.sample.output_ext, output_files(req.model.spec, req.sample)
        name, n = f"{req.request_id}.{ext}", 1
        while any(p in self._names or os.path.lexists(os.path.join(self.output_folder, p))
                  for p in batch_paths(name, batch)):
            n += 1
            name = f"{req.request_id}-{n}.{ext}"
        self._names.update(batch_paths(name, batch))
        return os.path.join(self.output_folder, name)

    def _finish(self, req: Request, status: str, error: str | None = None):
        with req.lock:
            if req.finished:
                return
            req.status, req.error, req.finished_at, req.finished_mono = status, error, time.time(), time.monotonic()
            if req.started_mono is None:        # it never ran: its wait is all it has
                req.stages = self._waited(req, req.finished_mono)
            req.stages = ordered_stages(req.stages)
        try:
            if status != "ok":
                req.publish({"type": "error", "message": error or status, "cancelled": status == "cancelled"})
            try:        # bookkeeping: a failure here costs a metric or a log line, never the request's end
                self.metrics.request_finished(req)
                joblog.emit(joblog.request_line(req))
            except Exception as e:      # noqa: BLE001
                contained("recording a finished request", e)
            try:        # before `end`: a reader that saw the end finds its entry
                self.results.record(lambda seq: entry_for(req, seq, req.load_seconds))
            except Exception as e:      # noqa: BLE001
                contained("recording a finished request in the results feed", e)
            req.publish({"type": "end", "status": status, "stages": req.stages})
        finally:
            req.done_event.set()
        with self._cv:
            self.writing.pop(req.request_id, None)
            self._finished.append(req)
            while len(self._finished) > FINISHED_KEPT:
                old = self._finished.popleft()
                self.requests.pop(old.request_id, None)

    def _set_idle(self):
        mc = self.active_config
        self.on_info(f"Idle — {mc.arch}" if mc else "Idle — no model loaded", 0)


@dataclass(eq=False)
class WorkerCall:
    """A message for the worker outside the request queue (Engine.worker_call), and its answer."""
    message: object
    reply_type: type
    reply: object = None
    error: str | None = None
    done: threading.Event = field(default_factory=threading.Event)


class EnginePolicy(Policy):
    """The engine's part of a request's validation (toolkit/request.py Policy): local paths only under
    engine.model_roots (checked before anything looks at them), LoRA paths relative to
    engine.lora_folder, LoRA and weight files readable, engine.limits, the memory pre-flight, and
    input images as assets."""

    def __init__(self, engine: "Engine"):
        self.engine = engine

    def model(self, model):
        model = loras.resolve_paths(model, self.engine.lora_folder)
        self.engine.check_paths(model)
        return model

    def check(self, mc, gen):
        if gen.task == UPSCALE:      # the upscaler alone: nothing of the model loads, its sizes are not made
            return
        loras.check_files(mc)
        check_named_files(mc)                  # a malformed safetensors file: a 422 naming its key
        lim.check_request(self.engine.limits, mc, gen)
        state = self.engine.worker_state
        lim.check_memory(mc, gen, state.memory if state else None)
        lim.check_placement(mc, gen, state.memory if state else None, int(self.engine.settings.reserve_gb * (1 << 30)),
                            self.engine.model_folders, self.engine.model_roots)

    def input(self, value, where, kind="image"):
        return self.engine.resolve_asset(value, where, kind)

    def check_inputs(self, mc, gen):
        lim.check_upscale_input(self.engine.limits, gen)

    def upscaler(self, name, where):
        """A name of GET /upscalers (engine.upscaler_folder, the model folders' ESRGAN/ and upscale_models/)."""
        from toolkit import upscalers
        folders = self.engine.upscaler_folders()
        return upscalers.resolve(name, where, folders, roots=[*folders[0], *folders[1]])

    def model_file(self, value, where, kind):
        """A path inside engine.model_roots, or a file's name in the model folders' trees (an IP-Adapter in
        ComfyUI's models/ipadapter or A1111's models/ControlNet, an image encoder in models/clip_vision)."""
        from toolkit import ip_adapter_files
        if not os.path.isabs(os.path.expanduser(value)):
            found = ip_adapter_files.find(value, self.engine.model_folders, kind)
            if found is None:
                raise ConfigError(where, f"no such file: no {kind} file named {value!r} in the model folders "
                                  f"(engine.model_folders: {', '.join(model_trees.KIND_FOLDERS[kind])})")
            return found
        self.engine.check_path(value, where)
        return super().model_file(value, where, kind)

    def folders(self):
        return tuple(self.engine.model_folders)

    def controls(self, gen, spec):
        """Control models by path (under engine.model_roots, one answer whether they exist or not) or by
        name in the model folders' controlnet directories, checked against the arch from their headers."""
        from toolkit import control_models
        roots, folders = self.engine.model_roots, self.engine.model_folders
        dirs = [os.path.realpath(d) for d in control_models.control_dirs(folders)]

        def inside(real, places):
            return any(real == p or real.startswith(p + os.sep) for p in places)

        for i, ref in enumerate(gen.controls):
            if roots is None or not (os.sep in ref.model or ref.model.startswith("~")):
                continue           # a bare name: looked up in the controlnet directories only
            where = f"sample.controls[{i}].model"
            given = os.path.expanduser(ref.model)
            # a path is checked before it is looked for (one answer whether it exists or not); a name with a
            # folder in it (GET /library's `controlnet/canny.safetensors`) where it is found
            real = os.path.realpath(given if os.path.isabs(given) else control_models.find(ref.model, folders, where))
            if not inside(real, roots) and not inside(real, dirs):
                raise ConfigError(where, "is not in a folder this engine loads models from (engine.model_roots)")
        from extensions_built_in.inference_engine.preprocess import check_params
        for i, ref in enumerate(gen.controls):     # a model-based preprocessor's model is here
            check_params(ref.preprocessor, ref.processor_res, ref.threshold_a, ref.threshold_b,
                         where=f"sample.controls[{i}]", model_folders=self.engine.model_folders)
        return control_models.check_all(gen, spec, self.engine.model_folders)


def _time_load(req: Request, stage: str | None):
    """A model load for `req`, timed from its first `loading` status to its `loaded` one."""
    if stage == "loading" and req.load_started is None:
        req.load_started = time.monotonic()
    elif stage == "loaded" and req.load_started is not None:
        req.load_seconds = time.monotonic() - req.load_started


def contained(doing: str, error: BaseException):
    """An exception the engine survives (in logging, metrics, bookkeeping or one request): said on
    stderr with its traceback, for the job log, and never raised again."""
    try:
        text = "".join(traceback.format_exception(error))
        print(f"engine: an error while {doing} was contained: {text}".encode("ascii", "backslashreplace")
              .decode("ascii"), file=sys.stderr, flush=True)
    except Exception:       # noqa: BLE001 - stderr itself failing leaves nothing to tell
        pass


def _is_local_path(value: str) -> bool:
    """A filesystem path as the loader will read it: not a `tiny:<arch>` name, and not a hub repo id
    (`org/name` that is no folder here; the loader tries a local path first)."""
    from toolkit.models.tiny import is_tiny
    from toolkit.models.v2.sources import looks_like_repo_id
    if not value or is_tiny(value):
        return False
    return not looks_like_repo_id(value) or os.path.exists(value)


def remove_partial_files(folder: str) -> int:
    """Temp files a killed run left behind (toolkit.media.atomic_path's `.<name>.<hex>.tmp`): no
    reader ever sees them, and nothing else will remove them."""
    pattern = re.compile(r"^\..+\.[0-9a-f]{12}\.tmp$")
    removed = 0
    for name in os.listdir(folder):
        if pattern.match(name):
            try:
                os.remove(os.path.join(folder, name))
                removed += 1
            except OSError:
                pass
    return removed



"""Prefetch: the queue's next model's missing components read into CPU memory while a request samples.

The engine (no torch) sends `messages.Prefetch(model)` when it starts a request whose successor in
the queue runs another model. Here, on a background thread, the worker resolves that model's
component loads (BaseModel.component_loads, the same list a build reads), asks the funnel for each
one's identity (OstrisModelMixin.identify: what the pool keys on) and reads the ones the pool lacks
through the funnel with device=cpu, registering them in the pool. The swap then finds them there; a
pool hit re-applies the build's placement (aitk_post_load), so on a GPU the swap only moves them to
the device, and on a CPU-only machine the prefetched module is the loaded one.

Rules:
- It runs only while a request samples (`sampling()`): a Prefetch that arrives during a build waits
  for the build to end, and a build (`paused()`) first waits for a running prefetch, which it stops
  between components if it is for another model. So the pool never sees two loads at once; the
  pool's own lock still guards its books against the HTTP thread's reads.
- It reads only what fits: the weight bytes it would add must stay within the RAM available less a
  margin (the placement planner's host reserve, toolkit/placement.HOST_RESERVE) and less `keep_resident_gb`
  and `keep_host_gb` (room promised to warm components is not spent on a guess). What it reads is a host
  copy in the pool (`at_rest: host`), which the planner counts as host memory the next build reuses.
- It is a hint: a model that fails to resolve or load is recorded (stats `failed`; the message, which may name paths, only in `last_error`, never in /health) and
  forgotten; the request itself loads what is missing and reports its own error.
"""
import contextlib
import threading
import time
from dataclasses import replace

from toolkit.models.v2.pool import available_memory
from toolkit.placement import HOST_RESERVE

MARGIN_BYTES = HOST_RESERVE     # RAM a prefetch leaves free besides the budget: the placement planner's host reserve


class _Register:
    """The funnel's interceptor on the prefetch thread: every load is a known miss (identify said so),
    registered in the pool without counting a miss or evicting anything."""

    def __init__(self, prefetcher):
        self.prefetcher = prefetcher

    def lookup(self, identity, policy):
        return None

    def register(self, identity, module, policy):
        self.prefetcher.pool.register(identity, module, policy)
        entry = self.prefetcher.pool.entries.get(identity.key)
        with self.prefetcher._lock:
            self.prefetcher.loads += 1
            self.prefetcher.bytes += entry.bytes if entry is not None else 0


class Prefetcher:
    def __init__(self, pool, device: str = "cpu", *, enabled: bool = True, free_memory=available_memory,
                 margin_bytes: int = MARGIN_BYTES, folders=(), roots=None):
        self.pool = pool
        self.folders, self.roots = tuple(folders), roots    # engine.model_folders and model_roots, as a build takes them
        self.device = device
        self.enabled = enabled
        self.free_memory = free_memory          # injectable: tests fake a small machine
        self.margin_bytes = margin_bytes
        self.requests = self.done = self.skipped = self.failed = self.stopped = 0
        self.loads = self.bytes = 0             # components and bytes read ahead (pool.loads counts them too)
        self.last: dict | None = None           # the latest prefetch's outcome
        self.last_error: str | None = None      # the latest failure's message (in logs and tests, not /health)
        self.finished = threading.Event()       # set whenever no prefetch runs (tests wait on it)
        self.finished.set()
        self._lock = threading.Lock()
        self._pending = None        # the ModelConfig to prefetch next
        self._running = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._sampling = False

    # -- any thread ---------------------------------------------------------------------------------
    def request(self, model):
        """Prefetch `model` (a ModelConfig) now if a request samples, else once one does (the latest
        request wins)."""
        if not self.enabled:
            return
        model = model.without_loras()   # as a build names it (paused() compares): LoRAs are no components
        with self._lock:
            self.requests += 1
            self._pending = model
            start = self._sampling and self._thread is None
        if start:
            self._start()

    def stats(self) -> dict:
        with self._lock:
            return {"enabled": self.enabled, "requests": self.requests, "done": self.done, "skipped": self.skipped,
                    "failed": self.failed, "stopped": self.stopped, "loads": self.loads, "bytes": self.bytes,
                    "running": self._running is not None, "last": dict(self.last) if self.last else None}

    # -- the worker's main thread ---------------------------------------------------------------------
    @contextlib.contextmanager
    def sampling(self):
        """A request samples: a pending prefetch starts now."""
        with self._lock:
            self._sampling = True
        self._start()
        try:
            yield
        finally:
            with self._lock:
                self._sampling = False

    @contextlib.contextmanager
    def paused(self, model=None):
        """No prefetch runs inside: one for `model` is waited for (it does this build's reads), one for
        another model is stopped between components and kept pending (its reads stay in the pool)."""
        with self._lock:
            running, thread = self._running, self._thread
        if thread is not None:
            if running != model:
                self._stop.set()
            thread.join()
        yield

    def wait(self, timeout: float | None = None) -> bool:
        """Until no prefetch runs (tests, benchmarks)."""
        return self.finished.wait(timeout)

    # -- the prefetch thread --------------------------------------------------------------------------
    def _start(self):
        with self._lock:
            if self._pending is None or self._thread is not None:
                return
            model, self._pending = self._pending, None
            self._running = model
            self._stop.clear()
            self.finished.clear()
            self._thread = threading.Thread(target=self._run, args=(model,), daemon=True, name="prefetch")
            self._thread.start()

    def _run(self, model):
        t0 = time.perf_counter()
        outcome = {"arch": model.arch, "status": "done", "loads": 0, "bytes": 0}
        try:
            outcome.update(self._prefetch(model))
        except Exception as e:  # a hint that failed: the request itself will load and say why
            outcome.update(status="failed", error=type(e).__name__)
            self.last_error = f"{type(e).__name__}: {e}"
        outcome["seconds"] = time.perf_counter() - t0
        with self._lock:
            counter = {"done": "done", "skipped": "skipped", "failed": "failed", "stopped": "stopped"}[outcome["status"]]
            setattr(self, counter, getattr(self, counter) + 1)
            if outcome["status"] == "stopped" and self._pending is None:
                self._pending = model           # its turn comes at the next sampling
            self.last = outcome
            self._running, self._thread = None, None
        self.finished.set()

    def _plan(self, mc) -> list:
        """[(class, source, cpu load kwargs, identity)] of the components the pool lacks."""
        from toolkit.models.base_model import get_model_class

        holder = get_model_class(mc.arch)(mc, device=self.device)
        holder.library_folders, holder.library_roots = self.folders, self.roots
        plan, seen = [], set()
        for _role, cls, source, kwargs in holder.component_loads():
            if cls is None:
                continue
            # read into host memory as a cpu_cache copy would be: a build's hit places it (v2/residency.py)
            kwargs = {**kwargs, "policy": replace(kwargs["policy"], device="cpu", placement="cpu_cache")}
            identity = cls.identify(source, **kwargs)
            if identity.key in self.pool.entries or identity.key in seen:
                continue
            seen.add(identity.key)
            plan.append((cls, source, kwargs, identity))
        return plan

    def _prefetch(self, model) -> dict:
        from toolkit.models.v2.mixin import thread_load_interceptor

        plan = self._plan(model)
        need = sum(size for *_rest, identity in plan for _file, size, _mtime in identity.weights)
        budget = self.free_memory("host") - self.margin_bytes - self.pool.keep_resident_bytes - self.pool.keep_host_bytes
        if need > budget:
            return {"status": "skipped", "need": need, "budget": budget,
                    "reason": f"{need} bytes to read, {max(budget, 0)} within the memory budget"}
        loads0, bytes0 = self.loads, self.bytes
        with thread_load_interceptor(_Register(self)):
            for cls, source, kwargs, _identity in plan:
                if self._stop.is_set():
                    return {"status": "stopped", "loads": self.loads - loads0, "bytes": self.bytes - bytes0}
                cls.load(source, **kwargs)
        return {"status": "done", "need": need, "loads": self.loads - loads0, "bytes": self.bytes - bytes0}


__all__ = ["MARGIN_BYTES", "Prefetcher"]

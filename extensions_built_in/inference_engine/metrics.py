"""The engine's Prometheus metrics (GET /metrics), in a registry of its own per Engine: tests and
benches run several engines in one process, and the global registry would mix them.

Two kinds of figures:
- events the engine sees (a request finished, a step timed, a cancel asked): counters and
  histograms updated by the engine as they happen (`request_finished`, `step`, `cancel`);
- state the engine already holds (the queue, the worker's last State: pool, loads): read at scrape
  time by a collector from `engine.health()`, so nothing is copied on the hot path. The pool's
  counters come from the worker and start again at 0 on a fresh worker, which Prometheus reads as
  a counter reset (rate() and increase() handle it).
No torch here, and nothing about HTTP but the text format.
"""
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
STEP_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
REQUEST_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800)


class EngineMetrics:
    def __init__(self, engine):
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter("aitk_requests", "Requests finished, by final status (ok, error, cancelled) and arch",
                                ("status", "arch"), registry=r)
        self.cancels = Counter("aitk_cancels", "Cancels asked for (POST /cancel, disconnects, compat interrupts)",
                               registry=r)
        self.step_seconds = Histogram("aitk_step_duration_seconds", "Seconds between two progress frames of the "
                                      "running request (one sampling step)", registry=r, buckets=STEP_BUCKETS)
        self.request_seconds = Histogram("aitk_request_duration_seconds", "Seconds from submit to end of a "
                                         "request (queue wait, load and sampling), by status",
                                         ("status",), registry=r, buckets=REQUEST_BUCKETS)
        r.register(_StateCollector(engine))

    # -- events, called by the engine ----------------------------------------------------------------
    def request_finished(self, req):
        self.requests.labels(req.status, req.model.arch).inc()
        if req.finished_at is not None:
            self.request_seconds.labels(req.status).observe(max(0.0, req.finished_at - req.created_at))

    def step(self, seconds: float):
        self.step_seconds.observe(seconds)

    def cancel(self):
        self.cancels.inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)


class _StateCollector:
    """Scrape-time figures from engine.health() (what the worker last reported, never waited on)."""

    def __init__(self, engine):
        self.engine = engine

    def describe(self):
        return []        # names are only known by collecting; describing nothing skips the duplicate check

    def collect(self):
        health = self.engine.health()
        pool = health.get("pool") or {}
        prefetch = health.get("prefetch") or {}
        worker = health.get("worker") or {}

        def gauge(name, doc, value):
            g = GaugeMetricFamily(name, doc)
            g.add_metric([], float(value or 0))
            return g

        def counter(name, doc, value):
            c = CounterMetricFamily(name, doc)
            c.add_metric([], float(value or 0))
            return c

        yield gauge("aitk_queue_depth", "Requests waiting (not counting the running call)", health.get("queue"))
        yield gauge("aitk_busy", "1 while a request runs or waits", 1 if health.get("busy") else 0)
        yield counter("aitk_pool_hits", "Component loads served by the pool (this worker)", pool.get("hits"))
        yield counter("aitk_pool_misses", "Component loads the pool did not hold (this worker)", pool.get("misses"))
        yield counter("aitk_pool_evictions", "Components evicted from the pool (this worker)", pool.get("evictions"))
        yield counter("aitk_pool_loads", "Components read from disk and registered (this worker)", pool.get("loads"))
        yield counter("aitk_load_bytes", "Bytes of components loaded into the pool (this worker)",
                      pool.get("loaded_bytes"))
        yield counter("aitk_load_seconds", "Seconds spent building model holders (loading components; this worker)",
                      pool.get("load_seconds"))
        yield counter("aitk_prefetch_bytes", "Bytes read ahead by prefetch (this worker)", prefetch.get("bytes"))
        yield gauge("aitk_pool_resident_bytes", "Bytes of components held by the pool", pool.get("resident_bytes"))
        yield counter("aitk_worker_restarts", "Generation workers replaced (died, or a cancel not honoured)",
                      worker.get("restarts"))
        comp = health.get("compile") or {}
        yield counter("aitk_compiles", "Graphs compiled for a compiled denoiser's first calls (this worker)",
                      comp.get("compiles"))
        yield counter("aitk_recompiles", "Graphs compiled again later (a new size or variant; this worker)",
                      comp.get("recompiles"))
        yield counter("aitk_compile_seconds", "Seconds spent compiling graphs (this worker)", comp.get("seconds"))
        yield counter("aitk_compile_eager_calls", "Calls that ran a compiled denoiser eagerly (a rule; this worker)",
                      comp.get("eager_calls"))
        yield counter("aitk_compile_cache_hits", "Compiled graphs read from the inductor cache (this worker)",
                      comp.get("cache_hits"))
        memory = health.get("memory") or {}
        yield gauge("aitk_memory_used_bytes", "Device memory in use (the worker's last report)", memory.get("used"))
        yield gauge("aitk_memory_total_bytes", "Device memory in total", memory.get("total"))

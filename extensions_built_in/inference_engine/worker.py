"""The generation worker: torch, the component pool and the holders, in a process of its own.

The engine (engine.py) sends it `messages.Run`/`Cancel`/`Load`/`Unload`/`Shutdown` and gets back
frames, the request's end, and a `State` of what is resident. `main()` is the child process's entry:
a listener thread takes messages off the pipe (so a cancel lands while a step runs) and the main
thread runs requests one at a time. `WorkerCore` is the same logic without a process, which the
engine also runs on a thread for in-process tests. Libraries load in WorkerCore, not at import, so
the engine can name this module without importing torch.
"""
import os
import queue
import signal
import threading
import time
from dataclasses import dataclass

from extensions_built_in.inference_engine import messages as m
from extensions_built_in.inference_engine.joblog import model_label
from extensions_built_in.inference_engine.stages import StageClock
from toolkit import host_heap
from toolkit.models import compiled     # torch-free at import
from toolkit.oom import is_oom

# seconds with no message before the heap's free pages go back to the system: back-to-back requests keep
# them (toolkit/host_heap.py)
IDLE_RELEASE_S = 2.0


class GenerationCancelled(Exception):
    pass


@dataclass
class Faults:
    """Injected failures for tests (counted from 1, once each): an out-of-memory error on the n-th
    component load, sampling step or VAE decode (as the decode starts: toolkit/models/vae_tiling.py retries it
    tiled); a stuck step (sleeps `stuck_seconds` at step n with Python
    signals blocked, ignoring cancel, as a long CUDA kernel would); a crash (`os._exit`) at step n.
    `hold_step` holds step n until the request is cancelled (a long step that does honour a cancel);
    `hold_write` the n-th output file the same way, as it starts (a file being written behind the next call).
    `device_mb` (with `host_mb`) makes the device a simulated one of that size (v2/residency.SimulatedDevice:
    a fake mem_get_info the placement planner and /health read, counting what is placed and moved there),
    so placement plans, retries and refusals run on a CPU.
    Also read from AITK_ENGINE_FAULTS="load_oom=2,sample_oom=1,decode_oom=1,stuck_step=1,crash_step=2,device_mb=64"."""
    load_oom: int = 0
    sample_oom: int = 0
    decode_oom: int = 0
    load_delay: float = 0.0     # seconds per component load: makes "cancel during a load" testable
    stuck_step: int = 0
    stuck_seconds: float = 3600.0
    crash_step: int = 0
    hold_step: int = 0
    hold_write: int = 0
    device_mb: float = 0.0      # a simulated device of this many MiB (0: the real one)
    host_mb: float = 0.0        # and host memory of this many MiB (0: the real RAM)
    _loads: int = 0
    _steps: int = 0
    _decodes: int = 0
    _writes: int = 0

    @classmethod
    def from_env(cls) -> "Faults":
        spec = os.environ.get("AITK_ENGINE_FAULTS", "")
        values = dict(part.split("=", 1) for part in spec.split(",") if "=" in part)
        return cls(load_oom=int(values.get("load_oom", 0)), sample_oom=int(values.get("sample_oom", 0)),
                   decode_oom=int(values.get("decode_oom", 0)),
                   load_delay=float(values.get("load_delay", 0)), stuck_step=int(values.get("stuck_step", 0)),
                   stuck_seconds=float(values.get("stuck_seconds", 3600)), crash_step=int(values.get("crash_step", 0)),
                   hold_step=int(values.get("hold_step", 0)), hold_write=int(values.get("hold_write", 0)),
                   device_mb=float(values.get("device_mb", 0)),
                   host_mb=float(values.get("host_mb", 0)))

    def reset(self, **faults):
        """Count steps and loads from zero again, with these faults armed (tests reuse one engine)."""
        self._loads = self._steps = self._decodes = self._writes = 0
        for name, value in faults.items():
            setattr(self, name, value)

    def on_load(self):
        import torch
        if self.load_delay:
            time.sleep(self.load_delay)
        if self.load_oom:
            self._loads += 1
            if self._loads == self.load_oom:
                self.load_oom = 0
                raise torch.OutOfMemoryError("injected out of memory during load")

    def on_decode(self):
        import torch
        if self.decode_oom:
            self._decodes += 1
            if self._decodes == self.decode_oom:
                self.decode_oom = 0
                raise torch.OutOfMemoryError("injected out of memory during decoding")

    def on_write(self, check_cancel):
        if self.hold_write:
            self._writes += 1
            if self._writes == self.hold_write:
                self.hold_write = 0
                _hold_until_cancelled(check_cancel)

    def on_step(self, check_cancel):
        import torch
        if not (self.sample_oom or self.stuck_step or self.crash_step or self.hold_step):
            return
        self._steps += 1
        if self._steps == self.hold_step:
            self.hold_step = 0
            _hold_until_cancelled(check_cancel)
        if self._steps == self.crash_step:
            os._exit(70)
        if self._steps == self.stuck_step:
            self.stuck_step = 0
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
            time.sleep(self.stuck_seconds)
        if self._steps == self.sample_oom:
            self.sample_oom = 0
            raise torch.OutOfMemoryError("injected out of memory during sampling")


def _hold_until_cancelled(check_cancel):
    """An injected hold: returns never, raises GenerationCancelled once the cancel lands."""
    while True:
        check_cancel()
        time.sleep(0.01)


class WorkerCore:
    """Runs requests: builds holders through the pool, samples with the step hook, writes the file.
    `emit(message)` sends each output; `cancel(request_id)` may be called from any thread."""

    def __init__(self, emit, *, device: str = "cpu", keep_resident_gb: float = 0, faults: Faults | None = None,
                 pool=None, cond_cache_mb: float = 256, prefetch: bool = True, model_folders=(), model_roots=None,
                 preview_decoder: str = "auto", reserve_gb: float = 1.0, keep_host_gb: float = 0,
                 compile: str = "auto", compile_cache_dir: str | None = None, compile_lora_rank: int = 64,
                 write_behind: bool = False):
        from extensions_built_in.inference_engine.prefetch import Prefetcher
        from toolkit.models.v2.cond_cache import ConditioningCache
        from toolkit.models.v2.pool import ComponentPool
        from toolkit.models.v2.residency import SimulatedDevice

        self.emit = emit
        self.device = device
        self.faults = faults or Faults.from_env()
        self.reserve = int(reserve_gb * (1 << 30))    # engine.reserve_gb: device memory no plan uses
        self.pool = pool or ComponentPool(int(keep_resident_gb * (1 << 30)), free_memory=self._free_memory,
                                          keep_host_bytes=int(keep_host_gb * (1 << 30)))
        # a simulated device (Faults.device_mb): the placement tests' fake mem_get_info
        self.memory = None
        if self.faults.device_mb:
            self.memory = SimulatedDevice(int(self.faults.device_mb * (1 << 20)), lambda: self.pool.bytes_at("device"),
                                          int(self.faults.host_mb * (1 << 20)) if self.faults.host_mb else None,
                                          lambda: self.pool.bytes_at("host"))
        self._parts: dict = {}        # model (without LoRAs) -> its planner Parts (file headers)
        self._stage = "loading"       # the running request's stage (loading, encoding, sampling, decoding, saving)
        # prompt embeddings shared by every holder built here (a swap keeps them): see cond_cache.py
        self.cond_cache = ConditioningCache(int(cond_cache_mb * (1 << 20)))
        # engine.model_folders: a model named by one file takes its companion files from there
        self.model_folders = tuple(model_folders or ())
        self.model_roots = tuple(model_roots) if model_roots is not None else None   # engine.model_roots
        self.preview_decoder = preview_decoder        # engine.preview_decoder: auto | projection
        self.compile, self.compile_lora_rank = compile, compile_lora_rank     # engine.compile: auto | on | off
        compiled.use_cache_dir(compile_cache_dir)     # before this process compiles anything
        self.prefetcher = Prefetcher(self.pool, device, enabled=prefetch, folders=self.model_folders,
                                     roots=self.model_roots)
        # engine.write_behind: a call's files are written on a thread of their own while the next call runs
        self.writer = None
        if write_behind:
            from extensions_built_in.inference_engine.writer import Writer
            self.writer = Writer()
        self.holder = None
        self.active_config = None
        self.builds = 0
        self.load_seconds = 0.0       # time spent building holders (GET /metrics aitk_load_seconds)
        self._cancelled: set = set()
        self._lock = threading.Lock()
        self._clock: StageClock | None = None     # the running call's stages (stages.py)
        self.boot: dict = {}                      # main(): when this process started, its imports' seconds

    # -- any thread ---------------------------------------------------------------------------------
    def cancel(self, request_id: str):
        with self._lock:
            self._cancelled.add(request_id)

    def cancel_all(self):
        """Shutting down: whatever runs stops at its next check."""
        self._stopping = True

    _stopping = False

    def _check_cancel(self, request_id: str):
        with self._lock:
            if self._stopping or request_id in self._cancelled:
                raise GenerationCancelled()

    # -- the worker's main thread -------------------------------------------------------------------
    def prefetch(self, model):
        """Any thread: read `model`'s missing components into CPU memory while the current request samples."""
        self.prefetcher.request(model)

    def handle(self, msg):
        if isinstance(msg, m.Prefetch):
            self.prefetch(msg.model)
            return
        if isinstance(msg, m.Run):
            self.run(msg)                 # emits its State before its Done
            return
        if isinstance(msg, m.Preprocess):
            self.preprocess(msg)          # emits its State before its Preprocessed
            return
        if isinstance(msg, m.Load):
            self.load(msg.model)
        elif isinstance(msg, m.Unload):
            self.unload_all()
        self.emit(self.state())

    def _free_memory(self, where: str) -> int:
        """The pool's free-memory question (where a load lands: the device, or "host")."""
        from toolkit.models.v2.pool import available_memory
        if self.memory is not None:
            if where == "host":
                host = self.memory.host_available()
                return available_memory("host") if host is None else host
            return self.memory.mem_get_info()[0]
        return available_memory(where)

    def state(self) -> m.State:
        mc = self.active_config
        sched = getattr(getattr(self.holder, "pipeline", None), "scheduler", None)
        plan = getattr(self.holder, "plan", None)
        return m.State(active=mc, scheduler=type(sched).__name__ if sched else None,
                       pool={**self.pool.stats(), "loaded_bytes": self.pool.loaded_bytes,
                             "load_seconds": self.load_seconds},
                       memory=memory_info(self.device, self.memory), builds=self.builds,
                       cond_cache=self.cond_cache.stats(), prefetch=self.prefetcher.stats(),
                       placement={**plan.describe(), "summary": plan.summary()} if plan is not None else {},
                       compile=compiled.stats(), boot=self.boot)

    def load(self, mc):
        self._ensure_holder(mc, None, self._plan(mc))
        self._info_idle()

    def annotator(self, key):
        """A control-map preprocessor's (model, processor), loaded through the funnel into this worker's pool
        (toolkit/annotators.py), where it stays as any unused component does."""
        from toolkit import annotators
        from toolkit.models.v2.mixin import thread_load_interceptor

        status = lambda message, stage="status": self.emit(m.Info(f"Preprocessing: {message}"))
        with self.prefetcher.paused(), thread_load_interceptor(self.pool):
            return annotators.load(key, self.model_folders, device=self.device, status=status)

    def preprocess(self, msg: m.Preprocess):
        """A control map (toolkit/control_maps.py); a model-based preprocessor's model loads through the funnel
        into this worker's pool (toolkit/annotators.py), where it stays as any unused component does."""
        import io

        from PIL import Image, ImageOps

        from toolkit import annotators, control_maps
        from toolkit.errors import ConfigError

        try:
            with Image.open(io.BytesIO(msg.image)) as im:      # checked by the engine before it was sent
                im = ImageOps.exif_transpose(im)
                im.load()
            out = control_maps.make_map(msg.preprocessor, im, resolution=msg.resolution, threshold_a=msg.threshold_a,
                                        threshold_b=msg.threshold_b, load_model=self.annotator)
            buf = io.BytesIO()
            out.save(buf, format="PNG")
            reply = m.Preprocessed(msg.task_id, buf.getvalue())
        except ConfigError as e:
            reply = m.Preprocessed(msg.task_id, error=e.message, field=e.key)
        except annotators.AnnotatorMissing as e:
            reply = m.Preprocessed(msg.task_id, error=str(e), field="preprocessor")
        except Exception as e:   # the worker keeps serving whatever one map did
            reply = m.Preprocessed(msg.task_id, error=f"{type(e).__name__}: {e}")
        self._info_idle()
        self.emit(self.state())          # what is resident is known before the map is seen to end
        self.emit(reply)

    def unload_all(self):
        if self.writer is not None:      # the files handed over are written (or cancelled) first
            self.writer.drain()
        self._drop_holder()
        with self.prefetcher.paused():
            self.pool.unload_all()
        self.cond_cache.clear()
        self._info_idle()

    def run(self, msg: m.Run):
        """One pipeline call for the Run's requests (one, or a dynamic batch: holder.generate_single's
        `rows`), each with its own frames, latent rows, file and Done. A member cancelled mid-call
        ends at once (nothing written; its rows go on being computed, unseen); when all are, the
        call stops. The requests arrive resolved (toolkit/request.py): nothing is validated again."""
        from toolkit.errors import ConfigError
        from toolkit.hires import UPSCALE

        members = _Members(self, msg.requests)
        t0 = time.perf_counter()
        self._clock = StageClock()
        self._clock.enter("load")      # planning and building the holder count as its load, as its reads do
        error, ends, behind = None, {}, {}
        self._stage = "loading"
        mc = msg.requests[0].model
        self._ip_sample = msg.requests[0].sample     # its IP-Adapters' image encoder loads with a build
        try:
            if msg.requests[0].sample.task == UPSCALE:     # the upscaler alone: the model is not loaded
                ends = self._upscale(members)
                raise _Ended
            plan = self._plan(mc, members.runs)
            holder = self._ensure_holder(mc, members, plan)
            self._load_ip_encoder(holder)
            members.check()
            lighter = None
            try:
                with self.prefetcher.sampling():      # the next model's reads overlap this one's steps
                    ends, behind = self._sample(holder, members, mc, t0)
            except Exception as e:
                lighter = self._lighter(mc, holder.plan) if is_oom(e) else None
                if lighter is None:
                    raise
            if lighter is not None:    # past the except block: its traceback held the failed attempt's tensors
                holder = self._retry(mc, members, lighter)
                with self.prefetcher.sampling():
                    ends, behind = self._sample(holder, members, mc, t0)
        except _Ended:
            pass
        except GenerationCancelled:
            error = ("cancelled", "cancelled")
        except ConfigError as e:
            error = ("error", e.one_line())
        except Exception as e:  # the worker keeps serving whatever one call did
            error = ("error", self._oom_message(mc, e) if is_oom(e) else f"{type(e).__name__}: {e}")
        self._clock.close()
        members.stages, self._clock = self._clock.snapshot(), None
        self._info_idle()
        self.emit(self.state())          # what is resident is known before a request is seen to end
        for rid, end in ends.items():
            members.end(rid, *end)
        rest = [rid for rid in members.live if rid not in behind]
        if behind:       # the pipeline is free: the engine may send the next Run while these files are written
            self.emit(m.Released(tuple(behind)))
            self.writer.submit(lambda: self._write_behind(members, behind))
        for rid in rest:
            members.end(rid, *(error or ("error", "the call ended without a result")))

    # -- placement (toolkit/placement.py: the plan; toolkit/models/v2/residency.py: its runtime) -----------
    def _plan(self, mc, runs=None):
        """The placement `mc` runs with for these requests (None: a warm load, the arch's default request):
        planned from the device's free memory now (every request plans again), the request's own placements
        kept. A plan that fits nowhere is a ConfigError naming the component, its bytes and the budget."""
        from toolkit import placement
        from toolkit.models.base_model import get_model_class
        from toolkit.models.v2.planning import plan_for, requested_for
        head = runs[0].sample if runs else None
        rows = sum(r.sample.batch_size for r in runs) if runs else 1
        try:
            return plan_for(mc, head, estimate=get_model_class(mc.arch).estimate_stage_bytes, device=self.device,
                            pool=self.pool, memory=self.memory, reserve=self.reserve,
                            batch=rows, parts=self._model_parts(mc))
        except placement.PlacementError as e:
            raise ConfigError("model.placement" if requested_for(mc)[0] else "model", str(e)) from None

    def _model_parts(self, mc) -> list:
        """`mc`'s planner Parts from its files' headers (toolkit/models/component_sizes.py), once per model."""
        from dataclasses import replace

        from toolkit.models import component_sizes
        from toolkit.models.tiny import is_tiny, resolve_tiny
        base = mc.without_loras()
        key = repr(base)
        if key not in self._parts:
            if is_tiny(base.name_or_path):
                base = replace(base, name_or_path=resolve_tiny(base.name_or_path, base.arch))
            self._parts = {key: component_sizes.parts(base, self.model_folders, self.model_roots, device=self.device)}
        return self._parts[key]

    def _lighter(self, mc, plan):
        """The next lighter plan after `plan` (toolkit/placement.lighter), or None."""
        from toolkit import placement
        if self.memory is None and not str(self.device).startswith("cuda"):
            return None           # the CPU is both: no placement holds less of it
        parts = self._model_parts(mc)
        if not parts or plan is None or not plan.placements:
            return None
        current = placement.evaluate(parts, {p.role: plan.placements.get(p.role, placement.RESIDENT) for p in parts},
                                     plan.groups, plan.activation, plan.budget, plan.rung)
        return placement.lighter(parts, current, staged=not mc.loras)

    def _retry(self, mc, members, plan):
        """Out of memory while sampling: said in a status frame (stage `retry`, the job log's `retry` line)
        naming the stage and the model, then the holder is placed by `plan` and the call runs once more.
        Dtype and quantization stay as they are: only where the components live changes."""
        import gc

        import torch
        message = (f"out of memory in the {self._stage} stage of {model_label(mc)}; retrying once with "
                   f"placement {plan.summary()} ({plan.rung})")
        self._status_fn(members, "Generating")(message, "retry")
        members.check()
        if self.holder is not None and self.holder.residency is not None:
            self.holder.residency.finish()
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        return self._ensure_holder(mc, members, plan)

    def _oom_message(self, mc, e) -> str:
        return f"out of memory in the {self._stage} stage of {model_label(mc)}: {e}"

    def _sample(self, holder, members: "_Members", mc, t0: float):
        from toolkit.models import latent_copy
        from toolkit.models import latents as latent_frames

        works = members.runs
        head, spans, rows = works[0].sample, {}, []
        for work in works:     # member-major: a member's batch_size rows, seed + j
            gen = work.sample
            spans[work.request_id] = (len(rows), len(rows) + gen.batch_size)
            rows += [(gen.prompt, gen.negative_prompt, gen.seed + j) for j in range(gen.batch_size)]
        spec = mc.spec
        copier = latent_copy.copier_for(self.device)
        # on CUDA a frame leaves the device without stalling it, delivered a step later (in order)
        streams = {w.request_id: latent_copy.FrameStream(self._latent_delivery(w.request_id), copier) for w in works}
        tae, decoder = holder.preview_decoder or (None, None)
        previews = {w.request_id: self._previews(w.request_id, w.stream, spec, head, decoder, tae) for w in works}
        batch = f" (a batch of {len(works)})" if len(works) > 1 else ""
        status = self._status_fn(members, "Generating")

        def on_status(message, stage="status"):
            status(message, stage)
            if stage == "decoding":      # an injected fault (Faults.decode_oom) meets the decode as it starts
                self.faults.on_decode()
        now = {"gen": head, "pass": {}}      # a hires request's pass (toolkit/models/hires_run.py): its size, its name

        def on_pass(name, gen):
            """A hires pass begins: its frames name it (`pass`), and its latents are of its size."""
            for work in members.live_runs():
                streams[work.request_id].flush()
                if previews[work.request_id]:
                    previews[work.request_id].flush()
                    previews[work.request_id] = self._previews(work.request_id, work.stream, spec, gen, decoder, tae)
                self.emit(m.Frame(work.request_id, {"type": "status", "message": f"{name} pass: {gen.width}x{gen.height}, "
                                                    f"{gen.num_inference_steps} steps", "stage": "pass", "pass": name}))
            now.update(gen=gen, **{"pass": {"pass": name}})

        def on_step(i, n, timestep, latents, x0):
            members.check()
            size = now["gen"]
            for work in members.live_runs():
                rid, opts = work.request_id, work.stream
                a, b = spans[rid]        # the member's own rows only
                self.emit(m.Frame(rid, {"type": "progress", "step": i + 1, "total": n,
                                        "elapsed": time.perf_counter() - t0, **now["pass"]}))
                if opts.latents == "raw" and ((i + 1) % opts.every_n_steps == 0 or i + 1 == n):
                    src = x0 if (opts.preview == "x0" and x0 is not None) else latents
                    frame, layout = latent_frames.frame_on_device(src[a:b], spec.latents, height=size.height,
                                                                  width=size.width, num_frames=head.num_frames,
                                                                  max_frames=opts.max_frames)
                    streams[rid].push({"type": "latent", "step": i + 1, "total": n, "layout": layout, **now["pass"]},
                                      frame)
                if previews[rid]:
                    previews[rid].step(i, n, latents[a:b], x0[a:b] if x0 is not None else None)
                if i + 1 == n:
                    streams[rid].flush()     # the last frame goes out before decoding and the result
                    if previews[rid]:
                        previews[rid].flush()
            self.emit(m.Info(f"Generating {i + 1}/{n}{batch}", i + 1))
            self.faults.on_step(members.check)     # after the step is reported

        if head.controls:      # the request's ControlNets: pool components (a resident one is a hit)
            from toolkit.models.v2.mixin import thread_load_interceptor
            holder.annotator_loader = self.annotator      # their maps' preprocessor models too
            with thread_load_interceptor(self.pool):
                holder.ensure_controls(head, self._status_fn(members, "Generating"))
        try:     # a request alone runs as itself (batch_size rows from one seed); several as rows
            if head.hires is not None:     # one request (never batched): two passes, the upscaler a pool component
                from toolkit.models.hires_run import generate_hires
                from toolkit.models.v2.mixin import thread_load_interceptor
                with thread_load_interceptor(self.pool):
                    data = generate_hires(holder, head, on_step=on_step, on_pass=on_pass, on_status=on_status)
            else:
                data = holder.generate_single(head, rows=rows if len(works) > 1 else None, on_step=on_step,
                                              on_status=on_status)
            for stream in streams.values():
                stream.flush()
        finally:
            for rid, stream in streams.items():   # a member cancelled or ended early: its frames are dropped
                stream.discard()
                if previews[rid]:
                    previews[rid].discard()
        items = data if len(works) > 1 or head.batch_size > 1 else [data]
        members.check()
        # rid -> (status, error, results), said by run() after its State; and rid -> (work, files) written behind
        ends, behind = {}, {}
        for work in works:
            rid = work.request_id
            if rid not in members.live:
                continue
            a, b = spans[rid]
            try:     # what each file holds, its metadata included, is fixed now: the holder serves the next call next
                files = holder.planned_files(work.sample, items[a:b], work.output_path)
            except Exception as e:
                ends[rid] = ("error", f"{type(e).__name__}: {e}")
                continue
            if self.writer is not None:
                behind[rid] = (work, files)
            else:
                ends[rid] = self._write(rid, work, files, self._status_fn(rid, "Generating"))
        return ends, behind

    def _write(self, rid: str, work, files: list, status) -> tuple:
        """One request's files (base_model.write_files), then its result frames: its end (status, error, results)."""
        from toolkit.models.base_model import write_files

        def on_status(message, stage="status"):
            status(message, stage)
            if stage == "saving":        # an injected fault (Faults.hold_write) holds the file as it starts
                self.faults.on_write(lambda: self._check_cancel(rid))
        try:
            records = write_files(work.model.spec.modality, files, cancel=lambda: self._check_cancel(rid),
                                  on_status=on_status)
        except GenerationCancelled:
            return ("cancelled", "cancelled")
        except Exception as e:      # one member's file (a full disk, say): the others are written
            return ("error", f"{type(e).__name__}: {e}")
        out_dir = os.path.dirname(work.output_path)
        results = [result_record(rec, index, out_dir) for index, rec in enumerate(records)]
        for result in results:
            self.emit(m.Frame(rid, {"type": "result", **result}))
        return ("ok", None, results)

    def _write_behind(self, members: "_Members", behind: dict):
        """On the writer's thread: each request's files, result frames and Done. A cancel still wins up to
        each file's move into place; its status frames say `saving` (no job line: the next call has it)."""
        for rid, (work, files) in behind.items():
            clock = StageClock()

            def status(message, stage="status", rid=rid, clock=clock):
                self._check_cancel(rid)
                clock.status(stage)
                self.emit(m.Frame(rid, {"type": "status", "message": message, "stage": stage,
                                        "stages": {**members.stages, **clock.snapshot()}}))
            try:
                end = self._write(rid, work, files, status)
            except BaseException as e:      # noqa: BLE001 - a request never goes without its Done
                end = ("error", f"{type(e).__name__}: {e}")
            clock.close()
            members.end(rid, *end, stages={**members.stages, **clock.snapshot()})

    def _upscale(self, members: "_Members") -> dict:
        """Task upscale (toolkit/hires.py): each request's init_img through its upscaler (a model: a pool
        component, through the funnel), written as its result. No holder is built or dropped."""
        from toolkit.models import upscale_task
        from toolkit.models.v2.mixin import thread_load_interceptor

        ends = {}
        for work in members.runs:
            rid = work.request_id
            status = self._status_fn(rid, "Upscaling")
            with thread_load_interceptor(self.pool):
                record = upscale_task.run(work, device=self.device, status=status,
                                          cancel=lambda rid=rid: self._check_cancel(rid))
            results = [result_record(record, 0, os.path.dirname(work.output_path))]
            for result in results:
                self.emit(m.Frame(rid, {"type": "result", **result}))
            ends[rid] = ("ok", None, results)
        return ends

    def _ensure_holder(self, mc, rid: str | None, plan=None):
        """The holder for `mc` without its LoRAs placed by `plan` (reused when both match: a new plan
        rebuilds it from the pool, each component re-placed, nothing read again), then `mc`'s LoRA state
        set on it. The state is set on every request: the pool's modules are shared, so what another
        request or holder left in them is never trusted."""
        base = mc.without_loras()
        if (self.holder is None or self.active_config is None or self.active_config.without_loras() != base
                or (plan is not None and not _same_placement(self.holder.plan, plan))):
            self._build_holder(base, rid, plan)
        self._apply_loras(mc, rid)
        return self.holder

    def _drop_holder(self):
        """Unhook and forget the holder (its visiting component leaves the device), so released entries can be freed."""
        holder, self.holder, self.active_config = self.holder, None, None
        if holder is not None:
            holder.unload()

    def _build_holder(self, base, rid: str | None, plan=None):
        status = self._status_fn(rid, f"Loading {base.arch}")
        self._drop_holder()
        t0 = time.perf_counter()
        with self.prefetcher.paused(base):   # a prefetch never loads beside a build
            try:
                holder = self._build(base, status, plan)
            except Exception as e:
                if not is_oom(e):
                    raise
                status("out of memory while loading: freeing unused components and retrying", "loading")
                self.pool.evict_untouched()
                holder = self._build(base, status, plan)
            self.pool.release_unused()
        self.load_seconds += time.perf_counter() - t0
        self.holder, self.active_config = holder, base
        self.builds += 1

    def _apply_loras(self, mc, rid: str | None):
        """A LoRA that fails to load leaves the holder serving with no LoRA active (and the error raised)."""
        status = self._status_fn(rid, f"Loading {mc.arch}")
        try:
            self.holder.apply_loras(mc, self.pool, status)
        except BaseException:
            self.active_config = None
            self.holder.apply_loras(mc.without_loras(), self.pool)
            self.active_config = mc.without_loras()
            raise
        self.active_config = mc

    def _build(self, mc, status, plan=None):
        from toolkit.models.base_model import get_model_class

        def on_status(message, stage="status"):
            if stage == "loading" and message.startswith("loading "):
                self.faults.on_load()
            status(message, stage)
        holder = get_model_class(mc.arch)(mc, device=self.device, status_hook=on_status, plan=plan, memory=self.memory)
        holder.cond_cache = self.cond_cache
        holder.compile_mode, holder.compile_lora_rank = self.compile, self.compile_lora_rank
        holder.library_folders, holder.library_roots = self.model_folders, self.model_roots
        with self.pool.building():
            holder.load_model()
            holder.preview_decoder = self._load_preview_decoder(holder, on_status)
            self._load_ip_encoder(holder)
        return holder

    def _load_ip_encoder(self, holder):
        """The image encoder the running request's IP-Adapters need, through the pool: an entry as any
        component is, shared by every holder (two fine-tunes of one arch use one); loaded within a build
        it is that build's, so the build does not release it."""
        from toolkit.models.v2.mixin import set_load_interceptor

        gen = getattr(self, "_ip_sample", None)
        if gen is None or not gen.ip_adapter:
            return
        previous = set_load_interceptor(self.pool)
        try:
            holder.ip_encoder(gen)
        finally:
            set_load_interceptor(previous)

    def _load_preview_decoder(self, holder, status):
        """(tae, AutoencoderTiny) for the holder's latent space where a model folder has its file and
        engine.preview_decoder is auto, loaded beside the model (a pool component); else None."""
        from toolkit.models import tiny_autoencoder

        found = tiny_autoencoder.decoder_for(holder.spec.latents.format, self.model_folders, self.preview_decoder)
        if found is None:
            return None
        decoder = tiny_autoencoder.load(found, device=self.device, dtype=holder.dtype, status=status)
        return (found.tae, decoder) if decoder is not None else None

    def _status_fn(self, rid: str | None, prefix: str):
        def status(message, stage="status"):
            if stage in ("loading", "compiling", "encoding", "sampling", "decoding", "saving"):
                self._stage = stage
            header = {"type": "status", "message": message, "stage": stage}
            clock = self._clock
            if clock is not None and rid is not None:     # a request's: the seconds of its stages so far
                clock.status(stage)
                header["stages"] = clock.snapshot()
                if stage == "loaded":        # each component read for it, and its seconds
                    header["components"] = dict(self.pool.last_build.get("seconds") or {})
            if isinstance(rid, _Members):      # a batch: every live member hears it
                rid.check()
                for run in rid.live_runs():
                    self.emit(m.Frame(run.request_id, dict(header)))
            elif rid is not None:
                self._check_cancel(rid)
                self.emit(m.Frame(rid, header))
            self.emit(m.Info(f"{prefix}: {message}" if stage in ("loading", "quantizing") else message))
        return status

    def _latent_delivery(self, rid: str):
        """deliver(header, host frame) for a FrameStream: the request's latent frame."""
        from toolkit.models import latents as latent_frames

        def deliver(header, frame):
            self.emit(m.Frame(rid, {**header, "shape": list(frame.shape), "dtype": "float16"},
                              latent_frames.payload_bytes(frame)))
        return deliver

    def _previews(self, rid: str, opts, spec, gen, decoder=None, tae=None):
        """The request's preview images (toolkit/models/preview_image.py), or None when not asked for;
        `decoder`: the holder's tiny autoencoder (named `tae`), else they are projected."""
        from toolkit.models import preview_image

        return preview_image.for_request(lambda header, payload: self.emit(m.Frame(rid, header, payload)),
                                         spec.latents, opts, width=gen.width, height=gen.height,
                                         num_frames=gen.num_frames, device=self.device, decoder=decoder, tae=tae)

    def _info_idle(self):
        mc = self.active_config
        self.emit(m.Info(f"Idle — {mc.arch}" if mc else "Idle — no model loaded", 0))


class _Ended(Exception):
    """A run that needed no model ended (task upscale): its ends are set."""


class _Members:
    """The requests of a Run still streaming (`live`): `check()` ends each newly cancelled one while
    others stream on (its Done now, so the engine frees it without waiting for the call), and
    raises GenerationCancelled when every live one is cancelled (or the worker stops)."""

    def __init__(self, core: WorkerCore, runs):
        self.core, self.runs = core, list(runs)
        self.live = {run.request_id for run in self.runs}
        self.stages: dict = {}      # the call's stages, once it is over (run())

    def live_runs(self) -> list:
        return [run for run in self.runs if run.request_id in self.live]

    def check(self):
        core = self.core
        with core._lock:
            cancelled = [rid for rid in self.live if rid in core._cancelled]
            stopping = core._stopping
        if stopping or set(cancelled) >= self.live:
            # the last ones: ended by Run's end, after its State (what is resident is known first)
            raise GenerationCancelled()
        for rid in cancelled:
            self.end(rid, "cancelled", "cancelled")

    def end(self, rid: str, status: str, error: str | None, results=(), stages: dict | None = None):
        if rid not in self.live:
            return
        self.live.discard(rid)
        with self.core._lock:
            self.core._cancelled.discard(rid)
        if stages is None:       # the call's, or (a member cancelled while it runs) its stages so far
            clock = self.core._clock
            stages = self.stages or (clock.snapshot() if clock is not None else {})
        self.core.emit(m.Done(rid, status, error, list(results), stages))


def result_record(rec: dict, index: int, out_dir: str) -> dict:
    """A written file's record as its result frame and Done carry it."""
    relpath = os.path.relpath(rec["path"], out_dir)
    return {"path": rec["path"], "relpath": relpath, "url": f"/outputs/{relpath}", "kind": rec["kind"],
            "ext": rec["ext"], "bytes": rec["bytes"], "seed": rec["seed"], "index": index,
            "width": rec.get("width"), "height": rec.get("height"), "num_frames": rec.get("num_frames"),
            "fps": rec.get("fps"), "duration": rec.get("duration"), "audio": bool(rec.get("audio"))}


def memory_info(device: str, simulated=None) -> dict:
    """The device's memory in use: CUDA's (or a simulated device's: `simulated: true`), or this worker's
    resident set on the CPU; with the host's RAM (`host_total`, `host_available`) the placement pre-flight
    reads."""
    import torch
    host = _host_memory()
    if simulated is not None:
        free, total = simulated.mem_get_info()
        if simulated.host_total is not None:
            host = {"host_total": simulated.host_total, "host_available": simulated.host_available()}
        return {"device": str(device), "used": total - free, "total": total, "simulated": True, "peak": simulated.peak,
                **host}
    if str(device).startswith("cuda") and torch.cuda.is_available():
        free, total = torch.cuda.mem_get_info(torch.device(device))
        return {"device": str(device), "used": total - free, "total": total, **host}
    try:
        with open("/proc/self/statm") as f:
            rss = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (OSError, ValueError):
        rss, total = 0, 0
    return {"device": "cpu", "used": rss, "total": total, **host}


def _host_memory() -> dict:
    from toolkit.models.v2.pool import available_memory
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (OSError, ValueError):
        total = 0
    return {"host_total": total, "host_available": available_memory("host")}


def _same_placement(a, b) -> bool:
    """Two plans that place every component alike (the holder built with `a` serves `b`)."""
    return a is not None and b is not None and a.placements == b.placements and a.groups == b.groups


# -- the worker process ------------------------------------------------------------------------------
def _die_with_parent():
    """On Linux, the kernel kills this worker when the engine process dies, however it dies (SIGKILL
    included): no worker outlives its engine holding the GPU, not even one stuck in a step. (A worker
    that is not stuck also ends on its own: its pipe closes.)"""
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))    # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() == 1:          # the engine died before the line above ran
        os._exit(0)


def main(conn, options: dict):
    """The child process: `options` are WorkerCore's keyword arguments (device, keep_resident_gb,
    faults). Ctrl-C reaches the whole process group; the engine decides when this process ends,
    so SIGINT is ignored here."""
    started = time.monotonic()
    host_heap.keep_freed()          # before torch: a step reuses the last one's pages (toolkit/host_heap.py)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent()
    send_lock = threading.Lock()
    closed = threading.Event()

    def emit(msg):
        if closed.is_set():
            return
        with send_lock:
            try:
                conn.send(msg)
            except (BrokenPipeError, OSError):
                closed.set()

    core = WorkerCore(emit, **options)     # torch and diffusers are imported here
    core.boot = {"started": started, "imports": round(time.monotonic() - started, 3)}
    work: queue.Queue = queue.Queue()

    def listen():
        while True:
            try:
                msg = conn.recv()
            except (EOFError, OSError):
                msg = m.Shutdown()
            if isinstance(msg, m.Cancel):
                core.cancel(msg.request_id)
            elif isinstance(msg, m.Prefetch):    # not behind the Run it overlaps
                core.prefetch(msg.model)
            else:
                work.put(msg)
            if isinstance(msg, m.Shutdown):
                core.cancel_all()
                return

    threading.Thread(target=listen, daemon=True, name="worker-listen").start()
    emit(core.state())
    while True:
        try:
            msg = work.get(timeout=IDLE_RELEASE_S)
        except queue.Empty:         # idle: the pages the last request freed go back to the system
            host_heap.release()
            msg = work.get()
        if isinstance(msg, m.Shutdown):
            break
        core.handle(msg)
    core.unload_all()
    closed.set()
    conn.close()

"""The inference engine against the bare diffusers pipeline, side by side, on tiny zimage (CPU).

    .venv/bin/python testing/bench_engine.py [--repeat 9] [--quick]
    .venv/bin/python testing/bench_engine.py --all-archs [--repeat 5]     # every arch, and the swap pairs
    .venv/bin/python testing/bench_engine.py --worker [--repeat 9]        # the worker process's cost and recovery
    .venv/bin/python testing/bench_engine.py --lora [--repeat 9] [--dim 1024 --layers 8 --rank 16]
                                                                     # LoRA switches vs a transformer reload
    .venv/bin/python testing/bench_engine.py --throughput [--quick]        # dynamic batching, queue policy
    .venv/bin/python testing/bench_engine.py --compile [--quick]           # compiled vs eager (testing/bench_compile.py)
    .venv/bin/python testing/bench_engine.py --cold [--repeat 3] [--quick] [--write-doc]
                                                                     # process start to the first image (bench_cold.py)

--all-archs: per arch, the engine's request time (tiny model, 64x64 or the arch's tiny size, a
latent streamed every step) against the bare pipeline's call with the same arguments, interleaved,
medians and their ratio; then each swap pair of testing/test_inference_engine.py (CROSS_PAIRS and
same-arch shared pairs) on an emptied pool: what each request loaded and what was a pool hit.
Writes testing/.bench/bench_all_archs.json and .md.

--worker: the generation worker in its own process (engine.worker: process, the default) against
generation inside the engine process (engine.worker: thread, as before the split), side by side in
one run: request/bare at 64x64 and 512x512, /health p50/p99 during a 512x512 generation; then the
recovery from a stuck step (a fault that blocks step 1 with signals masked): seconds from the
cancel to the next queued request's end, against grace_seconds + a fresh worker's start.
Writes testing/.bench/bench_worker.json.

--lora: in one WorkerCore (in-process, tiny zimage or with --dim a wider random transformer, two
random LoRAs of --rank, a keep-resident budget so the
inactive one stays warm), medians of: switching the resident model to a LoRA never injected (a
load), to a warm one, a scale change, back to none; against a full reload of the same transformer
(its pool entry dropped, the holder rebuilt: what a LoRA change cost when LoRAs were merged at
load). Then per-step sampling time with the LoRA unmerged, fused (model.lora_fuse) and with none.
Writes testing/.bench/bench_lora.json.

--throughput: testing/bench_throughput.py (one function per figure): 8 concurrent requests with
engine.max_batch 4 vs 1 at 64x64 and 256x256, images/s against concurrency (fifo vs batched, an SVG
chart), and a 40-request trace over 3 models under fifo vs affinity (time, bytes loaded).
Writes testing/.bench/bench_throughput.{json,md,svg}.

--cold: testing/bench_cold.py: process start to the first image on an SD 1.5-shaped folder at the real
dims (testing/sd15_real_dims.py), 64x64/2 steps and 256x256/10 steps: the engine (`run.py`, a POST
/generate as soon as engine.json appears, to the `end` frame; then a warm request, and peak RSS), a bare
diffusers script in its own process (to the PNG written) and the one-shot Generate job (to `wrote`),
interleaved, medians (--repeat, default 3 here; --quick: 64x64 once). Writes testing/.bench/bench_cold.json;
--write-doc also rewrites its section of docs/benchmarks.md.

The engine runs as `run.py` does (testing/engine_client.EngineProcess: its own process, HTTP on
127.0.0.1); the bare pipeline (DiffusionPipeline.from_pretrained of the same folder) runs in this
process. Runs are interleaved and medians taken. Prints a table and writes
testing/.bench/bench_engine.json.

Figures and targets:
  request vs bare call, 20 steps, a latent streamed every step   64x64 <= 1.10, 512x512 <= 1.03
  swap: serve B after A (shared TE+VAE) / cold B (empty pool)    <= denoiser share of B's bytes + 0.05
  fast path (identical request): loads                            == 0, added time vs bare < 10 ms
  time to first frame (warm), p50 of 20                           < 20 ms
  /health latency while a generation runs, p99                    < 50 ms
  engine RSS after 20 A/B swaps vs after 2                        <= +5%
"""
import argparse
import io
import contextlib
import json
import os
import statistics
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402

from testing.engine_client import EngineClient, EngineProcess  # noqa: E402
from toolkit.models.tiny import cached_tiny, make_shared_pair, own_roles  # noqa: E402

ARCH = "zimage"
PROMPT = "a fox in the snow"
GUIDANCE = 4.0            # sample_settings("zimage"): CFG on, on both sides
SEED = 7


def pct(values, q):
    v = sorted(values)
    if not v:
        return float("nan")
    k = (len(v) - 1) * q / 100
    lo, hi = int(k), min(int(k) + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def med(values):
    return statistics.median(values)


def weight_bytes(folder, components=None):
    total = 0
    for comp in sorted(os.listdir(folder)):
        d = os.path.join(folder, comp)
        if not os.path.isdir(d) or (components is not None and comp not in components):
            continue
        total += sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d)
                     if f.endswith((".safetensors", ".bin")))
    return total


class Bench:
    def __init__(self, args, engine_extra=None, env=None, job_name="engine_job"):
        self.args = args
        self.a = str(cached_tiny(ARCH, 0))
        _a, b = make_shared_pair(ARCH, self.a, os.path.join(os.path.dirname(self.a), f"{ARCH}-seed1-shared0"))
        self.b = str(b)
        job = os.path.join(ROOT, "testing", ".bench", job_name)
        import shutil
        shutil.rmtree(job, ignore_errors=True)
        self.ep = EngineProcess(job, name="bench_engine", engine_extra=engine_extra, env=env).wait_ready()
        self.client = self.ep.client
        import psutil
        self.proc = psutil.Process(self.ep.proc.pid)
        self.bare = None

    def close(self):
        self.ep.stop()

    # -- requests ---------------------------------------------------------------------------------
    def body(self, folder, size=64, steps=20, latents="raw", seed=SEED):
        return {"model": {"arch": ARCH, "name_or_path": folder},
                "sample": {"prompt": PROMPT, "width": size, "height": size, "num_inference_steps": steps,
                           "guidance_scale": GUIDANCE, "seed": seed},
                "stream": {"latents": latents, "every_n_steps": 1}}

    def request(self, body):
        """(seconds from POST to the end frame, seconds to the first frame, frames)."""
        t0 = time.perf_counter()
        first = []

        def on_frame(h, _p):
            if not first:
                first.append(time.perf_counter() - t0)
        frames = self.client.stream(body, on_frame=on_frame)
        total = time.perf_counter() - t0
        end = frames[-1][0]
        if end.get("type") != "end" or end.get("status") != "ok":
            errs = [h.get("message") for h, _p in frames if h["type"] == "error"]
            raise RuntimeError(f"engine request failed: {end} {errs}")
        return total, first[0], frames

    def pool(self):
        return self.client.health()["pool"]

    # -- the bare pipeline ------------------------------------------------------------------------
    def bare_call(self, size, steps):
        if self.bare is None:
            from diffusers import DiffusionPipeline
            self.bare = DiffusionPipeline.from_pretrained(self.a, local_files_only=True, dtype=torch.float32)
            self.bare.set_progress_bar_config(disable=True)
        t0 = time.perf_counter()
        out = self.bare(prompt=PROMPT, negative_prompt="", width=size, height=size, num_inference_steps=steps,
                        guidance_scale=GUIDANCE, generator=torch.Generator("cpu").manual_seed(SEED),
                        output_type="pil")
        return time.perf_counter() - t0, out.images[0]

    # -- 1. request vs bare call ------------------------------------------------------------------
    def versus_bare(self, size, repeat, latents="raw"):
        body = self.body(self.a, size=size, latents=latents)
        self.request(body), self.bare_call(size, 20)            # warm both (model load, allocator)
        before = self.pool()
        eng, bare, latent_counts, results, ids, png = [], [], [], [], [], []
        for _ in range(repeat):
            t, _first, frames = self.request(body)
            eng.append(t)
            ids.append(frames[0][0]["request_id"])
            latent_counts.append(sum(1 for h, _p in frames if h["type"] == "latent"))
            results.append(next(h for h, _p in frames if h["type"] == "result"))
            tb, image = self.bare_call(size, 20)
            bare.append(tb)
            t0 = time.perf_counter()
            image.save(io.BytesIO(), format="png")
            png.append(time.perf_counter() - t0)
        after = self.pool()
        # the engine's own view: Req.started_at -> finished_at (holder call, latents, file write)
        finished = {r["request_id"]: r for r in self.client.get("/queue").json()["finished"]}
        inside = [finished[i]["finished_at"] - finished[i]["started_at"] for i in ids if i in finished]
        import numpy as np
        from PIL import Image
        with Image.open(results[-1]["path"]) as im:
            same = bool(np.array_equal(np.asarray(im.convert("RGB")), np.asarray(image.convert("RGB"))))
        return {"size": size, "steps": 20, "latents": latents, "engine_s": med(eng), "bare_s": med(bare),
                "ratio": med(eng) / med(bare), "added_ms": (med(eng) - med(bare)) * 1e3,
                "ratio_of_mins": min(eng) / min(bare),
                "engine_inside_s": med(inside), "inside_ratio": med(inside) / med(bare),
                "http_ms": (med(eng) - med(inside)) * 1e3, "bare_png_encode_ms": med(png) * 1e3,
                "engine_runs_s": eng, "bare_runs_s": bare, "latent_frames": min(latent_counts),
                "loads": after["loads"] - before["loads"], "misses": after["misses"] - before["misses"],
                "same_pixels_as_bare": same}

    # -- 2. swap cost -----------------------------------------------------------------------------
    def swap_cost(self, repeat):
        """1-step 64x64 requests: B after A (only the denoiser should load), B on an empty pool
        (/unload), and B warm (fast path); load cost = request - warm request."""
        b_body, a_body = self.body(self.b, steps=1, latents="none"), self.body(self.a, steps=1, latents="none")
        swap, cold, warm, swap_loads, cold_loads = [], [], [], [], []
        for _ in range(repeat):
            r = self.client.post("/unload")
            assert r.status_code == 200, r.text
            p0 = self.pool()
            cold.append(self.request(b_body)[0])
            p1 = self.pool()
            warm.append(self.request(b_body)[0])
            self.request(a_body)
            p2 = self.pool()
            swap.append(self.request(b_body)[0])
            p3 = self.pool()
            cold_loads.append(p1["loads"] - p0["loads"])
            swap_loads.append(p3["loads"] - p2["loads"])
        total = weight_bytes(self.b)
        den = weight_bytes(self.b, own_roles(ARCH))
        share = den / total
        w = med(warm)
        return {"swap_s": med(swap), "cold_s": med(cold), "warm_s": w, "request_ratio": med(swap) / med(cold),
                "load_ratio": (med(swap) - w) / (med(cold) - w), "denoiser_share": share,
                "target": share + 0.05, "bytes_total": total, "bytes_denoiser": den,
                "loads_swap": med(swap_loads), "loads_cold": med(cold_loads),
                "swap_runs_s": swap, "cold_runs_s": cold, "warm_runs_s": warm}

    # -- 3. time to first frame -------------------------------------------------------------------
    def first_frame(self, n):
        body = self.body(self.a, steps=2)
        self.request(body)
        ttff = [self.request(body)[1] for _ in range(n)]
        return {"p50_ms": pct(ttff, 50) * 1e3, "p90_ms": pct(ttff, 90) * 1e3, "max_ms": max(ttff) * 1e3, "n": n}

    # -- 4. /health while generating --------------------------------------------------------------
    def health_under_load(self, size, steps):
        body = self.body(self.a, size=size, steps=steps)
        self.request(self.body(self.a, size=size, steps=1))     # warm at this size
        done = threading.Event()
        gen = {}

        def run():
            try:
                gen["s"] = self.request(body)[0]
            finally:
                done.set()
        hc = EngineClient(self.ep.client.base_url, self.ep.client.token, timeout=30)
        th = threading.Thread(target=run)
        th.start()
        lat, busy = [], 0
        while not self.client.health().get("busy") and not done.is_set():
            time.sleep(0.002)
        while not done.is_set():
            t0 = time.perf_counter()
            r = hc.get("/health")
            lat.append(time.perf_counter() - t0)
            busy += bool(r.json().get("busy"))
        th.join()
        hc.close()
        return {"n": len(lat), "busy_answers": busy, "p50_ms": pct(lat, 50) * 1e3, "p99_ms": pct(lat, 99) * 1e3,
                "max_ms": max(lat) * 1e3 if lat else float("nan"), "generation_s": gen.get("s"),
                "size": size, "steps": steps}

    # -- 5. RSS over swaps ------------------------------------------------------------------------
    def rss_over_swaps(self, swaps):
        bodies = [self.body(self.a, steps=1, latents="none"), self.body(self.b, steps=1, latents="none")]
        self.request(bodies[0])
        rss = {}
        for i in range(1, swaps + 1):
            self.request(bodies[i % 2])
            if i in (2, swaps):
                time.sleep(0.2)
                rss[i] = self.proc.memory_info().rss
        return {"rss_after_2": rss[2], "rss_after_n": rss[swaps], "swaps": swaps, "ratio": rss[swaps] / rss[2]}


def worker_bench(args) -> dict:
    """engine.worker process vs thread, side by side; then a stuck step's recovery."""
    rep = args.repeat
    res = {"torch": torch.__version__, "cpus": os.cpu_count(), "loadavg_start": os.getloadavg()}
    benches = {kind: Bench(args, engine_extra={"worker": kind}, job_name=f"engine_{kind}")
               for kind in ("process", "thread")}
    try:
        for size, n in ((64, rep * 2), (512, max(3, rep // 2 + 1))):
            for kind, bench in benches.items():      # alternate, so load drift hits both alike
                res[f"{kind}_{size}"] = bench.versus_bare(size, n)
        for kind, bench in benches.items():
            res[f"{kind}_health"] = bench.health_under_load(512, 30 if args.quick else 60)
    finally:
        for bench in benches.values():
            bench.close()
    res["recovery"] = stuck_step_recovery()
    res["loadavg_end"] = os.getloadavg()
    return res


def stuck_step_recovery(grace: float = 2.0) -> dict:
    """A step that hangs with signals masked: cancel it, and time until the next queued request ends."""
    import shutil
    job = os.path.join(ROOT, "testing", ".bench", "engine_stuck")
    shutil.rmtree(job, ignore_errors=True)
    folder = str(cached_tiny(ARCH, 0))
    ep = EngineProcess(job, name="bench_stuck", engine_extra={"grace_seconds": grace},
                       env={"AITK_ENGINE_FAULTS": "stuck_step=1"}).wait_ready()
    body = {"model": {"arch": ARCH, "name_or_path": folder},
            "sample": {"prompt": PROMPT, "width": 64, "height": 64, "num_inference_steps": 4, "seed": SEED}}
    try:
        marks = {}

        def on_frame(h, _p):
            if h["type"] == "progress" and "cancel" not in marks:
                marks["cancel"] = time.perf_counter()
                ep.client.post(f"/cancel/{h['request_id']}")
        t = threading.Thread(target=lambda: ep.client.stream(body, on_frame=on_frame))
        t.start()
        while "cancel" not in marks:
            time.sleep(0.01)
        frames = ep.client.stream({**body, "sample": {**body["sample"], "seed": SEED + 1}})
        done = time.perf_counter()
        t.join(60)
        health = ep.client.health()
        return {"grace_s": grace, "cancel_to_next_done_s": done - marks["cancel"],
                "next_status": frames[-1][0].get("status"), "restarts": health["worker"]["restarts"],
                "last_exit": health["worker"]["last_exit"]}
    finally:
        ep.stop()


def write_worker(res: dict, out: str):
    rows = []
    for size in (64, 512):
        p, t = res[f"process_{size}"], res[f"thread_{size}"]
        rows.append((f"request/bare {size}x{size}, 20 steps, latents every step",
                     f"process {p['ratio']:.3f} ({p['engine_s'] * 1e3:.1f} ms)  thread {t['ratio']:.3f} "
                     f"({t['engine_s'] * 1e3:.1f} ms)  process/thread {p['engine_s'] / t['engine_s']:.3f}"))
    for kind in ("process", "thread"):
        h = res[f"{kind}_health"]
        rows.append((f"/health during a 512x512 generation ({kind})", f"p50 {h['p50_ms']:.1f} ms  p99 "
                     f"{h['p99_ms']:.1f} ms  (n={h['n']})"))
    r = res["recovery"]
    rows.append(("stuck step: cancel -> next request done", f"{r['cancel_to_next_done_s']:.2f} s (grace "
                 f"{r['grace_s']:g} s; next {r['next_status']}; restarts {r['restarts']})"))
    res["table"] = [{"figure": f, "value": v} for f, v in rows]
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump(res, f, indent=2, default=str)
    w = max(len(f) for f, _v in rows)
    for f, v in rows:
        print(f"{f:<{w}}  {v}")
    print(f"load avg {res['loadavg_start'][0]:.2f} -> {res['loadavg_end'][0]:.2f}; wrote {out}")


SWAP_SEQUENCES = [("wan21", "wan22_5b", "wan21"), ("wan21", "wan22_a14b", "wan21"),
                  ("qwen_image", "qwen_image_edit", "qwen_image"), ("flux", "chroma", "flux"),
                  ("flux", "flux_kontext", "flux"), ("sd3", "sd3:b", "sd3"), ("sdxl", "sdxl:b", "sdxl"),
                  ("krea2-turbo", "krea2-raw", "krea2-turbo")]


def _import_named_modules(folder: str):
    """The project's modules a tiny folder's model_index.json names (Cosmos' stand-in guardrail): diffusers
    loads a component only from a module already imported."""
    import importlib
    with open(os.path.join(folder, "model_index.json")) as f:
        index = json.load(f)
    for value in index.values():
        if isinstance(value, list) and value and isinstance(value[0], str) and value[0].startswith("toolkit."):
            importlib.import_module(value[0])


def all_archs(args) -> dict:
    """Every arch: engine request vs bare call at the tiny size; then the swap pairs' pool traffic."""
    from testing import test_inference_engine as sweep
    from toolkit.config_modules import GenerateImageConfig
    from toolkit.models.base_model import get_model_class
    from toolkit.models.patches import patched
    from toolkit.models.registry import ARCHS

    job = os.path.join(ROOT, "testing", ".bench", "all_archs_job")
    import shutil
    shutil.rmtree(job, ignore_errors=True)
    ep = EngineProcess(job, name="bench_all_archs").wait_ready()
    client = ep.client
    rows, swaps = [], []

    def request(body):
        t0 = time.perf_counter()
        frames = client.stream(body)
        end = frames[-1][0]
        if end.get("status") != "ok":
            raise RuntimeError(f"{body['model']['arch']}: {[h.get('message') for h, _p in frames if h['type'] == 'error']}")
        return time.perf_counter() - t0

    try:
        for arch in (args.archs.split(",") if args.archs else ARCHS):
            folder = str(cached_tiny(arch, 0))
            sample = sweep.with_inputs(client, arch, sweep.sample_for(arch, seed=SEED), job)
            body = {"model": {"arch": arch, "name_or_path": folder}, "sample": sample,
                    "stream": {"latents": "raw", "every_n_steps": 1}}
            holder = get_model_class(arch)({"arch": arch, "name_or_path": folder}, device="cpu")
            # the holder here reads the uploaded inputs where the engine stored them
            local = {k: os.path.join(job, "assets", v) if k in GenerateImageConfig.INPUTS and v else v
                     for k, v in sample.items()}
            gen = GenerateImageConfig.from_dict(local, holder.model_config)
            from diffusers import DiffusionPipeline
            _import_named_modules(folder)
            bare = DiffusionPipeline.from_pretrained(folder, local_files_only=True, dtype=torch.float32)
            bare.set_progress_bar_config(disable=True)
            kwargs = holder.pipeline_kwargs(gen)

            def bare_call():
                # under the arch's declared call patches, as the contract suite runs it (the request's size
                # where a pipeline would derive another from its input image)
                with contextlib.ExitStack() as stack:
                    for obj, name, wrapper in holder.call_patches(gen, bare):
                        stack.enter_context(patched(obj, name, wrapper))
                    t0 = time.perf_counter()
                    bare(**kwargs, generator=torch.Generator("cpu").manual_seed(SEED), output_type=holder.output_type)
                    return time.perf_counter() - t0
            request(body), bare_call()                          # load and warm both
            eng, ref = [], []
            for _ in range(args.repeat):
                eng.append(request(body))
                ref.append(bare_call())
            del bare
            rows.append({"arch": arch, "modality": ARCHS[arch].modality, "steps": sample["num_inference_steps"],
                         "size": f"{sample.get('width', '')}x{sample.get('height', '')}".strip("x"),
                         "engine_ms": med(eng) * 1e3, "bare_ms": med(ref) * 1e3, "ratio": med(eng) / med(ref)})
            print(f"{arch:16} engine {rows[-1]['engine_ms']:8.1f} ms  bare {rows[-1]['bare_ms']:8.1f} ms  "
                  f"ratio {rows[-1]['ratio']:.3f}", flush=True)
        for names in SWAP_SEQUENCES:
            if not all(n in sweep.COMFY_MODELS or n.split(":")[0] in ARCHS for n in names):
                continue          # a pair of archs this checkout does not have
            r = client.post("/unload")
            assert r.status_code == 200, r.text
            models = sweep.resolve_models(list(names))
            seq = []
            for name, arch, folder in models:
                model = folder if isinstance(folder, dict) else {"arch": arch, "name_or_path": folder}
                sample = sweep.with_inputs(client, arch, sweep.sample_for(arch, num_inference_steps=1), job)
                before = client.health()["pool"]
                t = request({"model": model, "sample": sample, "stream": {"latents": "none"}})
                d = sweep._pool_diff(before, client.health()["pool"])
                seq.append({"model": name, "seconds": t,
                            "loaded": sorted(r for e in d["loaded"] for r in sweep._roles(e)),
                            "hit": sorted(r for e in d["hit"] for r in sweep._roles(e)),
                            "loaded_bytes": sum(e["bytes"] for e in d["loaded"]),
                            "hit_bytes": sum(e["bytes"] for e in d["hit"])})
            swaps.append({"sequence": ",".join(names), "requests": seq})
            print(f"swap {','.join(names)}: " + " | ".join(f"{q['model']}: loaded {q['loaded']} hit {q['hit']}"
                                                         for q in seq), flush=True)
    finally:
        ep.stop()
    return {"archs": rows, "swaps": swaps}


def lora_bench(args) -> dict:
    """LoRA switch time vs a transformer reload; per-step time unmerged vs fused (see the docstring)."""
    import shutil

    from extensions_built_in.inference_engine.worker import WorkerCore
    from testing.fixtures import make_tiny_lora
    from toolkit.config_modules import GenerateImageConfig, ModelConfig

    from toolkit.models.tiny.loras import write_tiny_lora

    folder = str(cached_tiny(ARCH, 0))
    if args.dim:
        folder = widened_model(folder, args.dim, args.layers)
    tmp = os.path.join(ROOT, "testing", ".bench", "loras")
    shutil.rmtree(tmp, ignore_errors=True)
    files = [str(write_tiny_lora(ARCH, folder, os.path.join(tmp, f"l{i}.safetensors"), seed=i, rank=args.rank))
             for i in range(2)]
    rep = args.repeat
    res = {"torch": torch.__version__, "threads": torch.get_num_threads(), "loadavg_start": os.getloadavg(),
           "model": {"dim": args.dim or 32, "layers": args.layers if args.dim else 2, "rank": args.rank,
                     "dtype": args.dtype}}
    core = WorkerCore(lambda msg: None, keep_resident_gb=1)

    def mc(*loras, fuse=False):
        return ModelConfig.from_dict({"arch": ARCH, "name_or_path": folder, "lora_fuse": fuse, "dtype": args.dtype,
                                      "loras": [{"path": p, "scale": s} for p, s in loras]})

    def timed(config):
        t0 = time.perf_counter()
        core._ensure_holder(config, None)
        return time.perf_counter() - t0

    timed(mc())
    times = {k: [] for k in ("new", "warm", "scale", "none", "reload")}
    for i in range(rep):
        for entry in list(core.pool.adapters.values()):       # forget the adapters: the next A is a load
            core.holder.pipeline.delete_adapters(entry.adapter)
        core.pool.adapters.clear()
        timed(mc())
        times["new"].append(timed(mc((files[0], 0.8))))
        timed(mc((files[1], 0.5)))
        times["warm"].append(timed(mc((files[0], 0.8))))
        times["scale"].append(timed(mc((files[0], 0.5 + 0.01 * i))))
        times["none"].append(timed(mc()))
        core.pool._drop(core.pool.holds("transformer"))       # the same transformer, reloaded
        core.holder = None
        times["reload"].append(timed(mc()))
    res["switch_ms"] = {k: med(v) * 1e3 for k, v in times.items()}
    res["lora_bytes"] = os.path.getsize(files[0])
    res["transformer_bytes"] = sum(e.bytes for e in core.pool.holds("transformer"))
    res["adapter_loads"], res["loads"] = core.pool.adapter_loads, core.pool.loads
    steps = 8
    gen = lambda: GenerateImageConfig.from_dict({"prompt": PROMPT, "width": 64, "height": 64, "seed": SEED,
                                                 "num_inference_steps": steps}, ARCH)
    per_step = {k: [] for k in ("none", "unmerged", "fused")}
    for _i in range(rep):                                      # interleaved, so load drift hits all alike
        for kind, config in (("none", mc()), ("unmerged", mc((files[0], 0.8))),
                             ("fused", mc((files[0], 0.8), fuse=True))):
            holder = core._ensure_holder(config, None)
            t0 = time.perf_counter()
            holder.generate_single(gen())
            per_step[kind].append((time.perf_counter() - t0) / steps)
    res["per_step_ms"] = {k: med(v) * 1e3 for k, v in per_step.items()}
    res["per_step_min_ms"] = {k: min(v) * 1e3 for k, v in per_step.items()}   # less exposed to other load
    res["loadavg_end"] = os.getloadavg()
    return res


def widened_model(tiny_folder: str, dim: int, layers: int) -> str:
    """The tiny model with a wider, deeper random transformer (the rest shared by links): LoRA loads cost
    per layer and reloads per byte, so the switch/reload ratio means something only at a real-ish size."""
    import json
    import shutil

    from diffusers import ZImageTransformer2DModel

    out = os.path.join(ROOT, "testing", ".bench", f"{ARCH}-dim{dim}-l{layers}")
    if os.path.isfile(os.path.join(out, "transformer", "config.json")):
        return out
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    for name in os.listdir(tiny_folder):
        if name != "transformer":
            os.symlink(os.path.join(tiny_folder, name), os.path.join(out, name))
    with open(os.path.join(tiny_folder, "transformer", "config.json")) as f:
        config = {k: v for k, v in json.load(f).items() if not k.startswith("_")}
    heads = dim // 128
    config.update(dim=dim, n_layers=layers, n_heads=heads, n_kv_heads=heads, axes_dims=[32, 48, 48])
    torch.manual_seed(0)
    ZImageTransformer2DModel(**config).save_pretrained(os.path.join(out, "transformer"))
    return out


def write_lora(res: dict, out: str):
    sw, ps = res["switch_ms"], res["per_step_ms"]
    share = res["lora_bytes"] / res["transformer_bytes"]
    rows = [("switch to a LoRA not injected yet (load)", f"{sw['new']:.1f} ms"),
            ("switch to a warm LoRA", f"{sw['warm']:.1f} ms"),
            ("scale change", f"{sw['scale']:.1f} ms"),
            ("back to no LoRA", f"{sw['none']:.1f} ms"),
            ("full transformer reload of the same model", f"{sw['reload']:.1f} ms"),
            ("LoRA file / transformer bytes (the LoRA's share)", f"{share:.3f}"),
            ("new-LoRA switch / reload (target <= share + 0.05)",
             f"{sw['new'] / sw['reload']:.3f} ({'met' if sw['new'] / sw['reload'] <= share + 0.05 else 'NOT met'})"),
            ("reload / new-LoRA switch", f"{sw['reload'] / sw['new']:.1f}x"),
            ("reload / warm switch", f"{sw['reload'] / sw['warm']:.1f}x"),
            ("per step 64x64: none / unmerged / fused", f"{ps['none']:.2f} / {ps['unmerged']:.2f} / "
             f"{ps['fused']:.2f} ms"),
            ("  same, minimum of the runs", " / ".join(f"{res['per_step_min_ms'][k]:.2f}"
                                                      for k in ("none", "unmerged", "fused")) + " ms"),
            ("unmerged / fused per step (medians; mins)", f"{ps['unmerged'] / ps['fused']:.3f}; "
             f"{res['per_step_min_ms']['unmerged'] / res['per_step_min_ms']['fused']:.3f}")]
    res["table"] = [{"figure": f, "value": v} for f, v in rows]
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump(res, f, indent=2, default=str)
    w = max(len(f) for f, _v in rows)
    m = res["model"]
    print(f"{ARCH} dim {m['dim']} x {m['layers']} layers, {m['dtype']} ({res['transformer_bytes'] / 2**20:.0f} MB), LoRA rank "
          f"{m['rank']} ({res['lora_bytes'] / 2**20:.1f} MB), CPU, torch {res['threads']} threads; adapter loads {res['adapter_loads']}, "
          f"component loads {res['loads']}")
    for f, v in rows:
        print(f"{f:<{w}}  {v}")
    print(f"load avg {res['loadavg_start'][0]:.2f} -> {res['loadavg_end'][0]:.2f}; wrote {out}")


def write_all_archs(res: dict, out: str):
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out + ".json", "w") as f:
        json.dump(res, f, indent=2, default=str)
    lines = ["# Engine vs bare pipeline, every arch (tiny models, CPU)", "",
             "| arch | modality | size | steps | engine ms | bare ms | ratio |", "|---|---|---|---|---|---|---|"]
    lines += [f"| {r['arch']} | {r['modality']} | {r['size']} | {r['steps']} | {r['engine_ms']:.1f} | "
              f"{r['bare_ms']:.1f} | {r['ratio']:.3f} |" for r in res["archs"]]
    lines += ["", "## Swap pairs (pool emptied first; 1-step requests)", "",
              "| sequence | request | loaded | pool hits | loaded MB | hit MB |", "|---|---|---|---|---|---|"]
    for sw in res["swaps"]:
        for i, q in enumerate(sw["requests"]):
            lines.append(f"| {sw['sequence'] if i == 0 else ''} | {q['model']} | {', '.join(q['loaded']) or '-'} | "
                         f"{', '.join(q['hit']) or '-'} | {q['loaded_bytes'] / 2**20:.2f} | {q['hit_bytes'] / 2**20:.2f} |")
    with open(out + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=None, help="interleaved pairs per comparison (medians; default 9, "
                    "--cold: 3)")
    ap.add_argument("--quick", action="store_true", help="fewer repeats (a smoke run)")
    ap.add_argument("--all-archs", action="store_true", help="every arch vs its bare pipeline, and the swap pairs")
    ap.add_argument("--archs", help="with --all-archs: only these (comma-separated)")
    ap.add_argument("--worker", action="store_true", help="worker process vs in-process generation, and recovery")
    ap.add_argument("--lora", action="store_true", help="LoRA switch vs transformer reload; unmerged vs fused steps")
    ap.add_argument("--dim", type=int, default=0, help="with --lora: a wider random transformer (multiple of 128)")
    ap.add_argument("--layers", type=int, default=8, help="with --lora --dim: its layer count")
    ap.add_argument("--rank", type=int, default=4, help="with --lora: the LoRAs' rank")
    ap.add_argument("--dtype", default="auto", help="with --lora: the model's dtype; float32 weights read as "
                    "bf16 are converted, so a reload reads every byte as it does onto a GPU (float32 on the "
                    "CPU is mapped from the page cache, copying nothing)")
    ap.add_argument("--control", action="store_true", help="adding a ControlNet to a resident model vs a ControlNet "
                    "pipeline from scratch (testing/bench_control.py)")
    ap.add_argument("--throughput", action="store_true", help="dynamic batching and queue policy figures "
                    "(testing/bench_throughput.py)")
    ap.add_argument("--hires", action="store_true", help="hires fix in one request vs two requests "
                    "(testing/bench_hires.py)")
    ap.add_argument("--hires-size", type=int, default=256, help="with --hires: the base pass's side")
    ap.add_argument("--hires-steps", type=int, default=10, help="with --hires: steps per pass")
    ap.add_argument("--model", help="with --hires: a model folder or file (default: tiny sd1)")
    ap.add_argument("--arch", help="with --hires --model: its arch")
    ap.add_argument("--device", help="with --hires: the engine's device (default cpu)")
    ap.add_argument("--compile", action="store_true", help="compiled vs eager denoisers at real widths, the engine "
                    "with compile + conditioning cache + batching vs bare (testing/bench_compile.py)")
    ap.add_argument("--flux-layers", type=int, default=1, help="with --compile: FLUX.1-width double blocks (x2 single)")
    ap.add_argument("--cold", action="store_true", help="process start to the first image: engine, bare diffusers "
                    "script and Generate job on real-dims SD 1.5 (testing/bench_cold.py; --repeat defaults to 3)")
    ap.add_argument("--write-doc", action="store_true", help="with --cold: rewrite docs/benchmarks.md's cold-start "
                    "section from the run")
    ap.add_argument("--out", default=os.path.join(ROOT, "testing", ".bench", "bench_engine.json"))
    args = ap.parse_args()
    if args.repeat is None:
        args.repeat = 3 if args.cold else 9
    if args.cold:
        from testing import bench_cold
        res = bench_cold.run(args)
        bench_cold.write(res)
        if args.write_doc:
            bench_cold.write_doc(res)
        return
    if args.compile:
        from testing import bench_compile
        bench_compile.write(bench_compile.run(args), os.path.join(ROOT, "testing", ".bench", "bench_compile.json"))
        return
    if args.hires:
        from testing import bench_hires
        args.repeat = 3 if args.quick else args.repeat
        bench_hires.write(bench_hires.run(args), os.path.join(ROOT, "testing", ".bench", "bench_hires.json"))
    if args.control:
        from testing import bench_control
        args.repeat = 3 if args.quick else args.repeat
        bench_control.write_control(bench_control.control_bench(args, ROOT),
                                    os.path.join(ROOT, "testing", ".bench", "bench_control.json"))
        return
    if args.throughput:
        from testing import bench_throughput
        bench_throughput.write(bench_throughput.run(args), os.path.join(ROOT, "testing", ".bench"))
        return
    if args.worker:
        args.repeat = 3 if args.quick else args.repeat
        write_worker(worker_bench(args), os.path.join(ROOT, "testing", ".bench", "bench_worker.json"))
        return
    if args.lora:
        args.repeat = 3 if args.quick else args.repeat
        write_lora(lora_bench(args), os.path.join(ROOT, "testing", ".bench", "bench_lora.json"))
        return
    if args.all_archs:
        args.repeat = 3 if args.quick else min(args.repeat, 5)
        write_all_archs(all_archs(args), os.path.join(ROOT, "testing", ".bench", "bench_all_archs"))
        return
    rep = 3 if args.quick else args.repeat
    t_start = time.perf_counter()
    res = {"torch": torch.__version__, "threads": torch.get_num_threads(), "cpus": os.cpu_count(),
           "loadavg_start": os.getloadavg()}
    bench = Bench(args)
    try:
        res["vs_bare_64"] = bench.versus_bare(64, rep * 2)
        res["vs_bare_512"] = bench.versus_bare(512, max(3, rep // 2 + 1))
        res["fast_path"] = bench.versus_bare(64, rep * 2, latents="none")
        res["swap"] = bench.swap_cost(rep)
        res["first_frame"] = bench.first_frame(20)
        res["health"] = bench.health_under_load(512, 30 if args.quick else 100)
        res["rss"] = bench.rss_over_swaps(20)
    finally:
        bench.close()
    res["loadavg_end"] = os.getloadavg()
    res["wall_s"] = time.perf_counter() - t_start

    v64, v512, fp, sw, ff, hl, rs = (res[k] for k in ("vs_bare_64", "vs_bare_512", "fast_path", "swap",
                                                      "first_frame", "health", "rss"))
    rows = [
        ("request/bare 64x64, 20 steps, latents every step", f"{v64['ratio']:.3f}  ({v64['engine_s']*1e3:.1f} vs "
         f"{v64['bare_s']*1e3:.1f} ms; mins {v64['ratio_of_mins']:.3f})", "<= 1.10", v64["ratio"] <= 1.10),
        ("request/bare 512x512, 20 steps, latents every step", f"{v512['ratio']:.3f}  ({v512['engine_s']*1e3:.0f} vs "
         f"{v512['bare_s']*1e3:.0f} ms; mins {v512['ratio_of_mins']:.3f})", "<= 1.03", v512["ratio"] <= 1.03),
        ("  same, engine-side (Req started_at -> finished_at)", f"{v64['inside_ratio']:.3f}  (HTTP/stream "
         f"{v64['http_ms']:.1f} ms)", "(info)", None),
        ("  same, engine-side, 512x512", f"{v512['inside_ratio']:.3f}  (HTTP/stream {v512['http_ms']:.1f} ms; "
         f"PNG encode {v512['bare_png_encode_ms']:.1f} ms)", "(info)", None),
        ("swap B after A / cold B: load time (request - warm)", f"{sw['load_ratio']:.3f}  (share "
         f"{sw['denoiser_share']:.3f})", f"<= {sw['target']:.3f}", sw["load_ratio"] <= sw["target"]),
        ("swap B after A / cold B: whole 1-step request", f"{sw['request_ratio']:.3f}  ({sw['swap_s']*1e3:.0f} vs "
         f"{sw['cold_s']*1e3:.0f} ms; loads {sw['loads_swap']:g} vs {sw['loads_cold']:g})", "(info)", None),
        ("fast path: loads / misses over identical requests", f"{fp['loads']} / {fp['misses']}", "0 / 0",
         fp["loads"] == 0 and fp["misses"] == 0),
        ("fast path: added time vs bare (64x64, 20 steps, no latents)", f"{fp['added_ms']:.1f} ms  (ratio "
         f"{fp['ratio']:.3f})", "< 10 ms", fp["added_ms"] < 10),
        ("  same, engine-side", f"{fp['engine_inside_s']*1e3 - fp['bare_s']*1e3:.1f} ms", "(info)", None),
        ("time to first frame, warm, p50 of 20", f"{ff['p50_ms']:.1f} ms  (p90 {ff['p90_ms']:.1f})", "< 20 ms",
         ff["p50_ms"] < 20),
        ("/health during a generation, p50 / p99", f"{hl['p50_ms']:.1f} / {hl['p99_ms']:.1f} ms  (n={hl['n']})",
         "p99 < 50 ms", hl["p99_ms"] < 50),
        ("engine RSS after 20 A/B swaps vs after 2", f"{rs['ratio']:.3f}  ({rs['rss_after_2']/2**20:.0f} -> "
         f"{rs['rss_after_n']/2**20:.0f} MiB)", "<= 1.05", rs["ratio"] <= 1.05),
        ("engine output == bare output (pixels, 64 / 512)", f"{v64['same_pixels_as_bare']} / "
         f"{v512['same_pixels_as_bare']}", "(info)", None),
    ]
    res["table"] = [{"figure": f, "value": v, "target": t, "met": m} for f, v, t, m in rows]
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(res, f, indent=2, default=str)
    w = max(len(r[0]) for r in rows)
    print(f"tiny {ARCH}, CPU, torch {res['threads']} threads, {res['cpus']} cpus, load avg "
          f"{res['loadavg_start'][0]:.2f} -> {res['loadavg_end'][0]:.2f}, {res['wall_s']:.0f} s")
    if max(res["loadavg_start"][0], res["loadavg_end"][0]) > 1.5:
        print("WARNING: other work is loading this machine (load average above); timings are unreliable")
    print(f"{'figure':<{w}}  {'value':<44} {'target':<12} met")
    for fig, val, tgt, met in rows:
        print(f"{fig:<{w}}  {val:<44} {tgt:<12} {'-' if met is None else ('yes' if met else 'NO')}")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

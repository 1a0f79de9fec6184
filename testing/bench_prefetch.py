"""Prefetch benchmark: a trace of requests alternating 2-3 tiny models (shared encoders, own
denoisers), queued at once on an in-process engine (thread worker) so each request's successor is
known while it samples; run with engine.prefetch on and off, alternately (--repeats), on fresh
engines. Reports the trace's wall time, per-request time (medians) and what the request path itself
loaded (pool loads and bytes less what the prefetch read ahead).

    python testing/bench_prefetch.py [--arch zimage] [--models 3] [--trace 9] [--repeats 2] [--steps 4]

Writes testing/.bench/bench_prefetch.json. `run(args) -> dict` is what bench_engine's --throughput calls."""
import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--arch", default="zimage")
    ap.add_argument("--models", type=int, default=3, choices=(2, 3))
    ap.add_argument("--trace", type=int, default=9, help="requests per run, cycling through the models")
    ap.add_argument("--repeats", type=int, default=2, help="runs per side, alternating on/off")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--out", default=os.path.join(ROOT, "testing", ".bench", "bench_prefetch.json"))
    return ap.parse_args(argv)


def _models(args, root) -> list:
    from toolkit.models.tiny import make_shared_pair
    a, b = make_shared_pair(args.arch, os.path.join(root, "m0"), os.path.join(root, "m1"), 0, 1)
    folders = [a, b]
    if args.models == 3:
        folders.append(make_shared_pair(args.arch, a, os.path.join(root, "m2"), 0, 2)[1])
    return [{"arch": args.arch, "name_or_path": str(f), "dtype": "float32"} for f in folders]


def _trace_run(models, args, root, prefetch: bool, tag: str) -> dict:
    from extensions_built_in.inference_engine.engine import Engine

    eng = Engine(output_folder=os.path.join(root, f"out_{tag}"), worker="thread", prefetch=prefetch)
    eng.start_worker()
    sample = {"prompt": "a fox", "width": args.size, "height": args.size, "num_inference_steps": args.steps}
    reqs = [eng.submit(models[i % len(models)], {**sample, "seed": i}) for i in range(args.trace)]
    loop = threading.Thread(target=eng.run_forever, daemon=True)
    t0 = time.perf_counter()
    loop.start()
    try:
        for r in reqs:
            if not r.done_event.wait(600) or r.status != "ok":
                raise RuntimeError(f"request {r.request_id}: {r.status} {r.error}")
        wall = time.perf_counter() - t0
        core = eng.worker.core
        core.prefetcher.wait(60)
        pool, pre = core.pool, core.prefetcher
        return {"wall_s": wall, "request_s": [r.finished_at - r.started_at for r in reqs],
                "path_loads": pool.loads - pre.loads, "path_bytes": pool.loaded_bytes - pre.bytes,
                "prefetch": pre.stats()}
    finally:
        eng.stop()
        loop.join(30)


def run(args=None) -> dict:
    args = args or parse_args([])
    root = tempfile.mkdtemp(prefix="bench_prefetch_")
    models = _models(args, root)
    runs = {"prefetch": [], "no_prefetch": []}
    _trace_run(models, args, root, True, "warmup")     # first-call costs (imports, kernels) counted in neither
    for rep in range(args.repeats):
        order = ("prefetch", "no_prefetch") if rep % 2 == 0 else ("no_prefetch", "prefetch")
        for name in order:
            runs[name].append(_trace_run(models, args, root, name == "prefetch", f"{name}{rep}"))
    out = {"arch": args.arch, "models": args.models, "trace": args.trace, "steps": args.steps,
           "repeats": args.repeats}
    for name, rs in runs.items():
        times = [t for r in rs for t in r["request_s"]]
        out[name] = {"wall_s_median": statistics.median(r["wall_s"] for r in rs),
                     "request_s_median": statistics.median(times),
                     "path_loads_per_run": statistics.median(r["path_loads"] for r in rs),
                     "path_bytes_per_run": statistics.median(r["path_bytes"] for r in rs),
                     "prefetched_bytes_per_run": statistics.median(r["prefetch"]["bytes"] for r in rs),
                     "prefetch_done": sum(r["prefetch"]["done"] for r in rs)}
    out["wall_speedup"] = out["no_prefetch"]["wall_s_median"] / out["prefetch"]["wall_s_median"]
    return out


def main(argv=None):
    args = parse_args(argv)
    res = run(args)
    print(f"{res['arch']}: {res['trace']} requests alternating {res['models']} models, {res['repeats']} runs each")
    print(f"{'':12} {'wall s':>8} {'req s med':>10} {'path loads':>11} {'path bytes':>11} {'prefetched':>11}")
    for name in ("prefetch", "no_prefetch"):
        r = res[name]
        print(f"{name:12} {r['wall_s_median']:8.3f} {r['request_s_median']:10.4f} {r['path_loads_per_run']:11.0f} "
              f"{r['path_bytes_per_run']:11.0f} {r['prefetched_bytes_per_run']:11.0f}")
    print(f"wall speedup: {res['wall_speedup']:.2f}x")
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(res, f, indent=2, default=str)
    print(f"wrote {args.out}")
    return res


if __name__ == "__main__":
    main()

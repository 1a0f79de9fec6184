"""Conditioning cache benchmark: the same prompt on two tiny models that share their text encoder,
alternated (a, b, a, b, ...) on two workers side by side, one with the cache (engine.cond_cache_mb)
and one without (0); rounds interleave the two so other load on the machine hits both alike.
Reports per-request wall time (medians, and minimums: a shared 2-core machine swings) and the text
encoder's forward calls (a forward hook on the pool's resident text encoder).

    python testing/bench_cond_cache.py [--arch zimage] [--rounds 6] [--steps 2] [--keep-gb 1]

Writes testing/.bench/bench_cond_cache.json. `run(args) -> dict` is what bench_engine's --throughput
calls."""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from testing.tiny_runs import run_message

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

STREAM = {"latents": "none", "every_n_steps": 1, "max_frames": 4, "preview": "x0", "detach": False}


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--arch", default="zimage", help="an arch whose tiny pair shares the text encoder")
    ap.add_argument("--rounds", type=int, default=6, help="a,b requests per worker per round")
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--keep-gb", type=float, default=1.0, help="keep_resident_gb: swaps hit the pool, not the disk")
    ap.add_argument("--prompt", default="a red fox in the snow, photograph")
    ap.add_argument("--out", default=os.path.join(ROOT, "testing", ".bench", "bench_cond_cache.json"))
    return ap.parse_args(argv)


def _hook_text_encoders(core, counter: dict):
    """Count forwards of every text encoder the pool holds (hooked once per module)."""
    for entry in core.pool.entries.values():
        module = entry.module
        if "text_encoder" in entry.role and not getattr(module, "_bench_hooked", False):
            module._bench_hooked = True
            module.register_forward_hook(lambda *_a: counter.__setitem__("calls", counter["calls"] + 1))


def run(args=None) -> dict:
    from extensions_built_in.inference_engine import messages as m
    from extensions_built_in.inference_engine.worker import WorkerCore
    from toolkit.models.tiny import make_shared_pair

    args = args or parse_args([])
    root = tempfile.mkdtemp(prefix="bench_cond_")
    a, b = make_shared_pair(args.arch, os.path.join(root, "a"), os.path.join(root, "b"))
    models = [{"arch": args.arch, "name_or_path": str(a), "dtype": "float32"},
              {"arch": args.arch, "name_or_path": str(b), "dtype": "float32"}]
    sample = {"prompt": args.prompt, "width": args.size, "height": args.size, "num_inference_steps": args.steps,
              "seed": 1}
    sides = {}
    for name, mb in (("cache", 256), ("no_cache", 0)):
        sides[name] = {"core": WorkerCore(lambda msg: None, keep_resident_gb=args.keep_gb, cond_cache_mb=mb,
                                          prefetch=False), "times": [], "te": {"calls": 0}, "n": 0}

    def request(side, model):
        core, done = side["core"], []
        core.emit = lambda msg: done.append(msg) if isinstance(msg, m.Done) else None
        side["n"] += 1
        t0 = time.perf_counter()
        core.run(run_message(f"r{side['n']}", model, sample, os.path.join(root, f"out_{id(side)}_{side['n']}.png"), STREAM))
        dt = time.perf_counter() - t0
        if not done or done[-1].status != "ok":
            raise RuntimeError(f"request failed: {done[-1] if done else 'no Done'}")
        _hook_text_encoders(core, side["te"])
        return dt

    for side in sides.values():           # warm: both models built once, the encoder hooked
        for model in models:
            request(side, model)
        side["te"]["calls"] = 0
        side["core"].cond_cache.hits = side["core"].cond_cache.misses = 0
    order = list(sides)
    for r in range(args.rounds):
        for name in (order if r % 2 == 0 else order[::-1]):      # interleaved, alternating who goes first
            for model in models:
                sides[name]["times"].append(request(sides[name], model))
    out = {"arch": args.arch, "rounds": args.rounds, "steps": args.steps, "size": args.size,
           "requests_per_side": 2 * args.rounds}
    for name, side in sides.items():
        t = side["times"]
        out[name] = {"median_s": statistics.median(t), "min_s": min(t), "text_encoder_calls": side["te"]["calls"],
                     "cond_cache": side["core"].cond_cache.stats()}
    out["speedup_median"] = out["no_cache"]["median_s"] / out["cache"]["median_s"]
    return out


def main(argv=None):
    args = parse_args(argv)
    res = run(args)
    print(f"{res['arch']}: same prompt on two models sharing the text encoder, {res['requests_per_side']} requests each")
    print(f"{'':10} {'median s':>10} {'min s':>10} {'TE calls':>9} {'hits':>6} {'misses':>7}")
    for name in ("cache", "no_cache"):
        r = res[name]
        print(f"{name:10} {r['median_s']:10.4f} {r['min_s']:10.4f} {r['text_encoder_calls']:9d} "
              f"{r['cond_cache']['hits']:6d} {r['cond_cache']['misses']:7d}")
    print(f"speedup (median): {res['speedup_median']:.2f}x")
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(res, f, indent=2, default=str)
    print(f"wrote {args.out}")
    return res


if __name__ == "__main__":
    main()

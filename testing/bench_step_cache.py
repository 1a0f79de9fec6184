"""Step caches (`sample.cache`) on the tiny models: per arch and cache type, the denoiser work skipped
(Linear calls, counted with forward pre-hooks), wall time vs uncached, and the output's PSNR against the
uncached output of the same seed.

    python testing/bench_step_cache.py [--archs zimage flux] [--sizes 64 256] [--steps 20]

`run(args) -> dict` is what testing/bench_engine.py's --throughput calls; `main()` prints a table and
writes testing/.bench/step_cache.json. Tiny random weights: the skip counts show the hooks work; the
PSNR and speed of a real model differ (its caches are tuned on trained weights).
"""
import argparse
import json
import math
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
os.environ.setdefault("HF_HUB_OFFLINE", "1")

# parameters per type for a tiny model (the defaults are tuned for trained ones)
PARAMS = {"first_block": {"threshold": 0.2}, "mag": {}, "taylorseer": {}, "faster": {}}


def psnr(a, b) -> float:
    import numpy as np

    mse = float(((np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)) ** 2).mean())
    return math.inf if mse == 0 else 10 * math.log10(255.0 ** 2 / mse)


def run(args) -> dict:
    import torch

    from toolkit.config_modules import GenerateImageConfig, ModelConfig
    from toolkit.models.base_model import get_model_class
    from toolkit.models.registry import get_arch
    from toolkit.models.tiny import cached_tiny

    rows = []
    for arch in args.archs:
        spec = get_arch(arch)
        if not spec.step_caches:
            continue
        mc = ModelConfig.from_dict({"arch": arch, "name_or_path": str(cached_tiny(arch, 0))})
        holder = get_model_class(arch)(mc).load_model()
        denoiser = holder.pipeline.components[spec.denoiser_roles[0]]
        calls = [0]
        for mod in denoiser.modules():
            if isinstance(mod, torch.nn.Linear):
                mod.register_forward_pre_hook(lambda *a: calls.__setitem__(0, calls[0] + 1))
        for size in args.sizes:
            sample = dict(spec.tiny.sample, width=size, height=size, num_inference_steps=args.steps, seed=args.seed)

            def once(cache):
                gen = GenerateImageConfig.from_dict(dict(sample, cache=cache), mc)
                calls[0] = 0
                t = time.perf_counter()
                out = holder.generate_single(gen)
                return out, time.perf_counter() - t, calls[0]

            once(None)                                       # warm-up
            ref, times = None, []
            for _ in range(args.repeat):
                ref, t, full = once(None)
                times.append(t)
            base = statistics.median(times)
            for kind in spec.step_caches:
                cache = {"type": kind, **PARAMS[kind]}
                times = []
                for _ in range(args.repeat):
                    out, t, work = once(cache)
                    times.append(t)
                secs = statistics.median(times)
                rows.append({"arch": arch, "size": size, "steps": args.steps, "cache": kind, "params": PARAMS[kind],
                             "linear_calls": work, "linear_calls_uncached": full,
                             "skipped_fraction": round(1 - work / full, 3), "seconds": round(secs, 3),
                             "seconds_uncached": round(base, 3), "speedup": round(base / secs, 2),
                             "psnr_db": round(psnr(out, ref), 2)})
        del holder
    return {"threads": torch.get_num_threads(), "cpus": os.cpu_count(), "rows": rows}


def table(res: dict) -> str:
    head = f"{'arch':<10} {'size':>5} {'cache':<12} {'skipped':>8} {'s':>7} {'s uncached':>10} {'speedup':>7} {'PSNR dB':>8}"
    lines = [head, "-" * len(head)]
    for r in res["rows"]:
        lines.append(f"{r['arch']:<10} {r['size']:>5} {r['cache']:<12} {r['skipped_fraction']:>8.1%} "
                     f"{r['seconds']:>7.3f} {r['seconds_uncached']:>10.3f} {r['speedup']:>7.2f} {r['psnr_db']:>8.2f}")
    return "\n".join(lines)


def parser():
    ap = argparse.ArgumentParser(description="step caches on the tiny models")
    ap.add_argument("--archs", nargs="+", default=["zimage", "flux"])
    ap.add_argument("--sizes", type=int, nargs="+", default=[64, 256])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default=os.path.join(ROOT, "testing", ".bench", "step_cache.json"))
    return ap


def main(argv=None):
    args = parser().parse_args(argv)
    res = run(args)
    print(table(res))
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(res, f, indent=1)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

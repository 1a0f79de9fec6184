"""Throughput figures of the engine's scheduling (`bench_engine.py --throughput`), on tiny zimage (CPU).

One function per figure, each returning a JSON-able dict; `run(args)` calls them and `write(res, folder)`
writes bench_throughput.json, .md and an SVG chart. Add a figure by adding a function and a line in
`run` (and, if it has a table, in `markdown`).

  batching_speedup       8 concurrent requests, 20 steps, engine.max_batch 4 vs 1 at 64x64 and 256x256:
                         images per second, and the ratio (target >= 1.5 at 64x64)
  concurrency_curve      images per second against concurrency 1, 2, 4, 8, fifo (max_batch 1) and
                         batched (max_batch 4), at 64x64 (the SVG)
  swap_trace             40 requests over 3 tiny models (a seeded mix, all queued at once, warm on the
                         first), fifo vs affinity: total time, model switches and weight bytes loaded

The engine runs in this process with its worker on a thread (engine.worker: thread) and requests are
submitted to Engine.submit directly: the figures are the scheduler's and the pipeline's, not HTTP's.
Requests are submitted while the engine runs, as concurrent clients would: the first of a burst starts
alone and the rest wait (and batch) behind it.
"""
import json
import os
import random
import statistics
import tempfile
import threading
import time

ARCH = "zimage"
GUIDANCE = 4.0
PROMPTS = ["a fox in the snow", "a red house by the sea", "an owl at night", "a bowl of fruit",
           "a city street in the rain", "a mountain lake", "a cat on a sofa", "a ship in a storm"]


class Served:
    """An in-process engine (thread worker) on `folder`, warm, its loop on a thread."""

    def __init__(self, folder: str, **engine_kw):
        from extensions_built_in.inference_engine.engine import Engine

        self.tmp = tempfile.TemporaryDirectory(prefix="bench_tp_")
        self.engine = Engine(output_folder=self.tmp.name, worker="thread", **engine_kw)
        self.engine.warm_load({"arch": ARCH, "name_or_path": folder})
        self.loop = threading.Thread(target=self.engine.run_forever, daemon=True)
        self.loop.start()
        self.n = 0

    def burst(self, models: list, size: int, steps: int) -> list:
        """Submit one request per entry of `models` (folders) at once; wait for all; the requests."""
        reqs = []
        for folder in models:
            self.n += 1
            sample = {"prompt": PROMPTS[self.n % len(PROMPTS)], "width": size, "height": size,
                      "num_inference_steps": steps, "guidance_scale": GUIDANCE, "seed": self.n}
            reqs.append(self.engine.submit({"arch": ARCH, "name_or_path": folder}, sample,
                                           stream={"latents": "none"}))
        for r in reqs:
            r.done_event.wait(600)
            if r.status != "ok":
                raise RuntimeError(f"{r.request_id}: {r.status} {r.error}")
        return reqs

    def close(self):
        self.engine.stop()
        self.loop.join(30)
        self.tmp.cleanup()


def _rate(reqs, t0) -> float:
    """Images per second from the first submit to the last end."""
    return len(reqs) / (max(r.finished_at for r in reqs) - t0)


def throughput(folder: str, max_batch: int, concurrency: int, size: int, steps: int, repeat: int) -> dict:
    served = Served(folder, max_batch=max_batch)
    try:
        served.burst([folder], size, steps)         # a first call: lazy pipeline state out of the way
        rates, calls = [], []
        for _ in range(repeat):
            t0 = time.time()
            reqs = served.burst([folder] * concurrency, size, steps)
            rates.append(_rate(reqs, t0))
            calls.append(len({r.started_at for r in reqs}))
        return {"images_per_s": statistics.median(rates), "runs": rates, "calls_per_burst": calls}
    finally:
        served.close()


def batching_speedup(folder: str, sizes=(64, 256), n: int = 8, steps: int = 20, repeat: int = 3) -> dict:
    out = {}
    for size in sizes:
        one = throughput(folder, 1, n, size, steps, repeat)
        four = throughput(folder, 4, n, size, steps, repeat)
        out[str(size)] = {"max_batch_1": one, "max_batch_4": four,
                          "ratio": four["images_per_s"] / one["images_per_s"]}
    return out


def concurrency_curve(folder: str, levels=(1, 2, 4, 8), size: int = 64, steps: int = 20, repeat: int = 3) -> dict:
    return {"size": size, "levels": list(levels),
            "fifo": [throughput(folder, 1, c, size, steps, repeat)["images_per_s"] for c in levels],
            "batched": [throughput(folder, 4, c, size, steps, repeat)["images_per_s"] for c in levels]}


# (name, engine.queue_policy, engine.prefetch): the swap trace's three schedules
TRACE_VARIANTS = (("fifo", "fifo", False), ("affinity", "affinity", False), ("affinity+prefetch", "affinity", True))


def swap_trace(folders: list, n: int = 40, seed: int = 0, size: int = 64, steps: int = 4, max_overtake: int = 2) -> dict:
    """The same seeded mix under fifo and affinity (max_batch 1, so only the order differs); bytes
    loaded = the weight files of each model switched to (keep_resident_gb 0: a switch loads all)."""
    from extensions_built_in.inference_engine.queue_policy import weight_files_bytes
    from toolkit.config_modules import ModelConfig

    rng = random.Random(seed)
    mix = [rng.choice(folders) for _ in range(n)]
    size_of = {f: weight_files_bytes(ModelConfig.from_dict({"arch": ARCH, "name_or_path": f})) for f in folders}
    out = {"n": n, "models": len(folders), "seed": seed, "max_overtake": max_overtake}
    for name, policy, prefetch in TRACE_VARIANTS:
        served = Served(folders[0], max_batch=1, queue_policy=policy, max_overtake=max_overtake, prefetch=prefetch)
        try:
            loads0 = served.engine.worker_state.pool["loads"]
            t0 = time.time()
            reqs = served.burst(mix, size, steps)
            total = max(r.finished_at for r in reqs) - t0
            order = [r.model.name_or_path for r in sorted(reqs, key=lambda r: r.started_at)]
            switches = [b for a, b in zip([folders[0]] + order, order) if a != b]
            state = served.engine.worker_state
            out[name] = {"total_s": total, "switches": len(switches),
                         "bytes_loaded": sum(size_of[f] for f in switches),
                         "component_loads": state.pool["loads"] - loads0,
                         "prefetched_bytes": (state.prefetch or {}).get("bytes", 0),
                         "max_overtaken": max(r.overtaken for r in reqs)}
        finally:
            served.close()
    return out


def run(args) -> dict:
    from toolkit.models.tiny import cached_tiny

    quick = getattr(args, "quick", False)
    repeat = 1 if quick else 3
    folder = str(cached_tiny(ARCH, 0))
    res = {"cpus": os.cpu_count(), "loadavg_start": os.getloadavg()}
    res["batching"] = batching_speedup(folder, repeat=repeat)
    res["concurrency"] = concurrency_curve(folder, repeat=repeat)
    res["swap_trace"] = swap_trace([folder] + [str(cached_tiny(ARCH, s)) for s in (1, 2)])
    # the other developers' figures, each its own script (run alone for more options)
    from testing import bench_cond_cache, bench_step_cache

    res["cond_cache"] = bench_cond_cache.run(bench_cond_cache.parse_args(["--rounds", "2"] if quick else []))
    res["step_cache"] = bench_step_cache.run(bench_step_cache.parser().parse_args(
        ["--repeat", "1", "--sizes", "64"] if quick else []))
    res["loadavg_end"] = os.getloadavg()
    return res


# -- output ---------------------------------------------------------------------------------------------

def markdown(res: dict) -> str:
    b, c, s = res["batching"], res["concurrency"], res["swap_trace"]
    lines = ["# Engine throughput (tiny zimage, CPU)", "",
             f"{res['cpus']} cpus, load average {res['loadavg_start'][0]:.2f} -> {res['loadavg_end'][0]:.2f}."
             + (" **Other work loaded this machine: timings are noisy (compare calls per burst, switches "
                "and bytes, which are not).**" if max(res["loadavg_start"][0], res["loadavg_end"][0]) > 1.5
                else ""), "",
             "## Dynamic batching: 8 concurrent requests, 20 steps", "",
             "| size | max_batch 1 (img/s) | max_batch 4 (img/s) | ratio | target |", "|---|---|---|---|---|"]
    for size, row in b.items():
        target = ">= 1.5" if size == "64" else "(info)"
        lines.append(f"| {size}x{size} | {row['max_batch_1']['images_per_s']:.2f} | "
                     f"{row['max_batch_4']['images_per_s']:.2f} | {row['ratio']:.2f} | {target} |")
    lines += ["", "Pipeline calls per burst of 8: " + ", ".join(
        f"{size}x{size}: {row['max_batch_1']['calls_per_burst']} vs {row['max_batch_4']['calls_per_burst']}"
        for size, row in b.items())]
    lines += ["", f"## Throughput vs concurrency ({c['size']}x{c['size']}, 20 steps)", "",
              "![throughput vs concurrency](bench_throughput.svg)", "",
              "| concurrency | fifo (img/s) | batched (img/s) |", "|---|---|---|"]
    lines += [f"| {lv} | {f:.2f} | {bt:.2f} |" for lv, f, bt in zip(c["levels"], c["fifo"], c["batched"])]
    lines += ["", f"## Swap trace: {s['n']} requests over {s['models']} models, all queued at once "
              f"(max_overtake {s['max_overtake']})", "",
              "| schedule | total (s) | switches | weight bytes loaded | of them read ahead (prefetch) | "
              "component loads | most times passed |", "|---|---|---|---|---|---|---|"]
    for name, _policy, _prefetch in TRACE_VARIANTS:
        p = s[name]
        lines.append(f"| {name} | {p['total_s']:.1f} | {p['switches']} | {p['bytes_loaded']/2**20:.1f} MiB | "
                     f"{p['prefetched_bytes']/2**20:.1f} MiB | {p['component_loads']} | {p['max_overtaken']} |")
    if "cond_cache" in res:
        cc = res["cond_cache"]
        lines += ["", "## Conditioning cache: the same prompt on two models sharing a text encoder", "",
                  "| | median request (s) | text-encoder calls |", "|---|---|---|"]
        lines += [f"| {k} | {cc[k]['median_s']:.3f} | {cc[k]['text_encoder_calls']} |" for k in ("cache", "no_cache")]
        lines.append(f"\nspeedup (median): {cc['speedup_median']:.2f}x")
    if "step_cache" in res:
        from testing.bench_step_cache import table
        lines += ["", "## Step caching (transformer calls skipped, time, PSNR against uncached)", "", "```", table(res["step_cache"]), "```"]
    return "\n".join(lines) + "\n"


def svg_lines(series: dict, xs: list, title: str, xlabel: str, ylabel: str, w: int = 560, h: int = 360) -> str:
    """A line chart as SVG text (no plotting library here): `series` name -> y values over `xs`."""
    left, right, top, bottom = 60, 130, 40, 50
    ymax = max(max(v) for v in series.values()) * 1.1 or 1.0
    px = lambda i: left + (w - left - right) * i / max(len(xs) - 1, 1)
    py = lambda y: h - bottom - (h - top - bottom) * y / ymax
    colors = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"]
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
           f'<rect width="{w}" height="{h}" fill="white"/>',
           f'<text x="{w / 2}" y="22" text-anchor="middle" font-size="14">{title}</text>',
           f'<line x1="{left}" y1="{h - bottom}" x2="{w - right}" y2="{h - bottom}" stroke="black"/>',
           f'<line x1="{left}" y1="{top}" x2="{left}" y2="{h - bottom}" stroke="black"/>',
           f'<text x="{(left + w - right) / 2}" y="{h - 12}" text-anchor="middle">{xlabel}</text>',
           f'<text x="16" y="{(top + h - bottom) / 2}" text-anchor="middle" '
           f'transform="rotate(-90 16 {(top + h - bottom) / 2})">{ylabel}</text>']
    for i, x in enumerate(xs):
        out.append(f'<text x="{px(i)}" y="{h - bottom + 16}" text-anchor="middle">{x}</text>')
    for k in range(5):
        y = ymax * k / 4
        out.append(f'<text x="{left - 6}" y="{py(y) + 4}" text-anchor="end">{y:.1f}</text>')
        out.append(f'<line x1="{left}" y1="{py(y)}" x2="{w - right}" y2="{py(y)}" stroke="#ddd"/>')
    for j, (name, ys) in enumerate(series.items()):
        color = colors[j % len(colors)]
        points = " ".join(f"{px(i):.1f},{py(y):.1f}" for i, y in enumerate(ys))
        out.append(f'<polyline points="{points}" fill="none" stroke="{color}" stroke-width="2"/>')
        out += [f'<circle cx="{px(i):.1f}" cy="{py(y):.1f}" r="3" fill="{color}"/>' for i, y in enumerate(ys)]
        out.append(f'<text x="{w - right + 10}" y="{top + 18 * j + 10}" fill="{color}">{name}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def write(res: dict, folder: str):
    os.makedirs(folder, exist_ok=True)
    c = res["concurrency"]
    with open(os.path.join(folder, "bench_throughput.json"), "w") as f:
        json.dump(res, f, indent=2, default=str)
    with open(os.path.join(folder, "bench_throughput.md"), "w") as f:
        f.write(markdown(res))
    with open(os.path.join(folder, "bench_throughput.svg"), "w") as f:
        f.write(svg_lines({"fifo (max_batch 1)": c["fifo"], "batched (max_batch 4)": c["batched"]}, c["levels"],
                          f"tiny zimage {c['size']}x{c['size']}, 20 steps", "concurrent requests", "images / s"))
    print(markdown(res))
    print(f"wrote {folder}/bench_throughput.{{json,md,svg}}")

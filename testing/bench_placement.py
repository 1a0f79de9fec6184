"""Each placement's cost against `resident` on this CPU: the machinery itself (hooks, the stage switch, the
moves between host copies and the "device", staged re-reads from disk), not PCIe, which a CPU does not have.

    .venv/bin/python testing/bench_placement.py [--dim 3840 --layers 1 --size 128 --steps 4 --repeat 2]

The model: the tiny Z-Image with its transformer widened to a real width (`--dim`, Z-Image's 3840; `--layers`
main blocks beside its two refiner blocks; random weights; testing/bench_engine.widened_model), float32 on
the CPU. Every row is built through one ComponentPool, as the engine's worker builds holders: a placement
after the first re-places the same modules (nothing is read again but what `staged` reads by design). Per
row: seconds per step (the median of each call's steps after its first), seconds per request, the stage
switch's arrivals per request, and on a simulated device (v2/residency.SimulatedDevice) the most bytes it
held. Two calls of each row warm up first (the first touches of fresh pages cost as much as the compute on a
CPU). On a CPU a move is a memory copy into freshly allocated pages, standing in for the host->device copy:
it costs once per request for cpu_cache and staged (plus the disk read), and nothing per step. Then what `auto` picks on simulated devices from the resident peak down. Every row's output is
checked equal to resident's (bit for bit). Prints a table; writes testing/.bench/bench_placement.json.
"""
import argparse
import json
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
os.environ.setdefault("HF_HUB_OFFLINE", "1")

ROWS = ["resident", "cpu_cache", {"layers": 1}, {"layers": 2}, "staged",
        {"text_encoder": "cpu_cache", "vae": "cpu_cache"}]


def _label(placement) -> str:
    return placement if isinstance(placement, str) else json.dumps(placement, separators=(",", ":"))


def run_row(folder, pool, placement, gen, repeat, memory=None):
    import numpy as np

    from toolkit.models.base_model import get_model_class

    holder = get_model_class("zimage")({"arch": "zimage", "name_or_path": folder, "placement": placement},
                                       device="cpu", memory=memory)
    t0 = time.perf_counter()
    with pool.building():
        holder.load_model()
    pool.release_unused()
    build = time.perf_counter() - t0
    steps, requests, out, calls = [], [], None, repeat + 2
    moves0 = holder.residency.moves
    for _ in range(repeat + 2):                      # two calls warm up (pages touched first, allocator)
        marks = []
        t = time.perf_counter()
        image = holder.generate_single(gen, on_step=lambda *a: marks.append(time.perf_counter()))
        requests.append(time.perf_counter() - t)
        steps.append([b - a for a, b in zip(marks, marks[1:])])
        out = np.asarray(image)
    row = {"placement": _label(placement), "plan": holder.plan.summary(), "build_s": round(build, 3),
           "s_per_step": round(statistics.median([s for call in steps[2:] for s in call]), 4),
           "s_per_request": round(statistics.median(requests[2:]), 4),
           "arrivals_per_request": (holder.residency.moves - moves0) / calls}
    if memory is not None:
        row["simulated_peak_mib"] = round(memory.peak / 2 ** 20, 1)
    holder.unload()
    return row, out


def auto_rows(folder, gen) -> list:
    """What auto plans on simulated devices of exactly each rung's device peak for this request, then one
    byte short of the lightest (the plan only: no run)."""
    from toolkit import placement as P
    from toolkit.config_modules import ModelConfig
    from toolkit.models import component_sizes
    from toolkit.models.base_model import get_model_class
    from toolkit.models.v2.planning import plan_for
    from toolkit.models.v2.residency import SimulatedDevice

    mc = ModelConfig.from_dict({"arch": "zimage", "name_or_path": folder})
    parts = component_sizes.parts(mc)
    act = get_model_class("zimage").estimate_stage_bytes(mc, gen, device="cpu")
    groups = {p.role: 1 for p in parts if p.kind == "denoiser"}
    peaks = sorted({P.evaluate(parts, placements, groups, act, P.Budget(0, 0), name).device_peak
                    for name, placements in P.candidates(parts)}, reverse=True)
    rows = []
    for total in peaks + [peaks[-1] - 1]:
        try:
            plan = plan_for(mc, gen, estimate=get_model_class("zimage").estimate_stage_bytes, device="cpu",
                            memory=SimulatedDevice(total), reserve=0, parts=parts)
            rows.append({"device_mib": round(total / 2 ** 20, 3), "rung": plan.rung, "plan": plan.summary()})
        except P.PlacementError as e:
            rows.append({"device_mib": round(total / 2 ** 20, 3), "rung": "refused", "plan": str(e)[:110] + "..."})
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dim", type=int, default=3840)
    ap.add_argument("--layers", type=int, default=1)
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1,
                    help="torch threads (1: steadier figures on a shared machine, where a second OpenMP thread "
                         "waiting on a busy core costs more than it gives)")
    args = ap.parse_args(argv)
    import torch
    torch.set_num_threads(args.threads)

    import numpy as np

    from testing.bench_engine import widened_model
    from toolkit.config_modules import GenerateImageConfig
    from toolkit.models.tiny import cached_tiny
    from toolkit.models.v2.pool import ComponentPool
    from toolkit.models.v2.residency import SimulatedDevice

    folder = widened_model(str(cached_tiny("zimage", 0)), args.dim, args.layers)
    gen = GenerateImageConfig.from_dict({"prompt": "a lighthouse at dusk", "width": args.size, "height": args.size,
                                         "num_inference_steps": args.steps, "seed": 1}, "zimage")
    pool = ComponentPool()
    sim = SimulatedDevice(1 << 40, lambda: pool.bytes_at("device"))
    rows, reference = [], None
    for placement in ROWS:
        sim.peak = 0
        row, out = run_row(folder, pool, placement, gen, args.repeat, memory=sim)
        if reference is None:
            reference = out
        row["equal_to_resident"] = bool(np.array_equal(out, reference))
        base = rows[0]["s_per_step"] if rows else row["s_per_step"]
        row["step_vs_resident"] = round(row["s_per_step"] / base, 3)
        rows.append(row)
        print(json.dumps(row), flush=True)
    transformer = sum(e.bytes for e in pool.entries.values() if e.role == "transformer")
    auto = auto_rows(folder, gen)
    result = {"dim": args.dim, "layers": args.layers, "size": args.size, "steps": args.steps,
              "transformer_bytes": transformer, "rows": rows, "auto": auto}
    os.makedirs(os.path.join(ROOT, "testing", ".bench"), exist_ok=True)
    with open(os.path.join(ROOT, "testing", ".bench", "bench_placement.json"), "w") as f:
        json.dump(result, f, indent=1)
    print(f"\nZ-Image transformer at width {args.dim} ({transformer / 2 ** 30:.2f} GiB float32), "
          f"{args.size}x{args.size}, {args.steps} steps, CPU")
    print(f"{'placement':<48} {'s/step':>8} {'x resident':>10} {'s/request':>10} {'arrivals':>8} {'peak MiB':>9} equal")
    for r in rows:
        print(f"{r['placement']:<48} {r['s_per_step']:>8.4f} {r['step_vs_resident']:>10.3f} {r['s_per_request']:>10.3f} "
              f"{r['arrivals_per_request']:>8.1f} {r.get('simulated_peak_mib', 0):>9.1f} {r['equal_to_resident']}")
    print("\nauto on simulated devices of each rung's peak (reserve 0):")
    for a in auto:
        print(f"  {a['device_mib']:>10.3f} MiB: {a['rung']:<24} {a['plan']}")
    return 0 if all(r["equal_to_resident"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())

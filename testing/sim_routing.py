"""Routing simulation at scale: random, least_queue, power_of_two (Ray Serve's default) and
affinity over 4, 16 and 64 simulated GPU replicas (testing/sim/: catalog, trace, replica, policies).

    .venv/bin/python testing/sim_routing.py [--replicas 4 16 64] [--requests 4000] [--seed 0]
        [--json] [--markdown] [--plot docs/scale.png] [--quick] [hardware and router settings]

Every policy sees the same seeded trace at a replica count. Prints a table (--markdown: as markdown),
or with --json one line: a list of rows {policy, replicas, p50_s, p99_s, bytes_loaded, load_s,
hit_rate}. load_s is GPU-seconds spent loading; hit_rate is the pools' component lookups that hit;
the table adds the wait (queueing + loading, the latency less sampling), which routing decides.
Results and the settings behind them: docs/scale.md.
"""
import argparse
import dataclasses
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from testing.sim.catalog import build_models  # noqa: E402
from testing.sim.params import SimParams  # noqa: E402
from testing.sim.policies import EXTRA_POLICIES, POLICIES  # noqa: E402
from testing.sim.simulate import simulate  # noqa: E402
from testing.sim.trace import make_trace  # noqa: E402

COLUMNS = ("policy", "replicas", "p50_s", "p99_s", "bytes_loaded", "load_s", "hit_rate")


def parse(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--replicas", type=int, nargs="+", default=[4, 16, 64])
    ap.add_argument("--policies", nargs="+", choices=[*POLICIES, *EXTRA_POLICIES], default=list(POLICIES))
    ap.add_argument("--requests", type=int, default=4000)
    ap.add_argument("--models", type=int, default=40, help="models in the catalog")
    ap.add_argument("--zipf", type=float, default=1.1, help="Zipf exponent of model popularity")
    ap.add_argument("--utilization", type=float, default=0.5,
                    help="share of the GPUs' time sampling alone would take (loads come on top)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="a small run: 400 requests")
    ap.add_argument("--json", action="store_true", help="print one JSON line: the list of rows")
    ap.add_argument("--markdown", action="store_true", help="print the table as markdown")
    ap.add_argument("--plot", metavar="PNG", help="write the plot there")
    for f in dataclasses.fields(SimParams):
        ap.add_argument("--" + f.name.replace("_", "-"), type=type(f.default), default=f.default,
                        **({"choices": ["local", "shared"]} if f.name == "storage" else {}))
    args = ap.parse_args(argv)
    if args.quick:
        args.requests = 400
    for name in ("requests", "models", "gpus_per_node"):
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be >= 1")
    if min(args.replicas) < 1:
        ap.error("--replicas must be >= 1")
    if not 0 < args.utilization:
        ap.error("--utilization must be > 0")
    for f in dataclasses.fields(SimParams):
        value, flag = getattr(args, f.name), "--" + f.name.replace("_", "-")
        if f.name == "max_imbalance" and value < 0:
            ap.error(f"{flag} must be >= 0")
        elif f.name not in ("max_imbalance", "storage") and value <= 0:
            ap.error(f"{flag} must be > 0")
    if args.reserve_gb >= args.gpu_gb:
        ap.error("--reserve-gb must be less than --gpu-gb")
    return args


def run(args) -> list:
    params = SimParams(**{f.name: getattr(args, f.name) for f in dataclasses.fields(SimParams)})
    models = build_models(args.models)
    rows = []
    for n in args.replicas:
        trace = make_trace(models, args.requests, n, args.utilization, args.zipf, args.seed)
        rows += [simulate(models, trace, n, p, params, args.seed) for p in args.policies]
    return rows


def fmt(row: dict) -> list:
    return [row["policy"], str(row["replicas"]), f"{row['p50_s']:.1f}", f"{row['p99_s']:.1f}",
            f"{row['wait_p50_s']:.1f}", f"{row['wait_p99_s']:.1f}",
            f"{row['bytes_loaded'] / 1e12:.2f}", f"{row['load_s']:.0f}", f"{row['hit_rate']:.3f}"]


HEAD = ["policy", "replicas", "p50 s", "p99 s", "wait p50 s", "wait p99 s", "TB loaded", "GPU-s loading", "hit rate"]


def table(rows: list, markdown: bool = False) -> str:
    cells = [HEAD] + [fmt(r) for r in rows]
    if markdown:
        lines = ["| " + " | ".join(c) + " |" for c in cells]
        return "\n".join(lines[:1] + ["|" + "---|" * len(HEAD)] + lines[1:])
    widths = [max(len(c[k]) for c in cells) for k in range(len(HEAD))]
    return "\n".join("  ".join(c[k].rjust(widths[k]) for k in range(len(HEAD))) for c in cells)


def main(argv=None) -> int:
    args = parse(argv)
    t0 = time.perf_counter()
    try:
        rows = run(args)
    except ValueError as e:              # a model larger than --gpu-gb less --reserve-gb
        print(f"sim_routing.py: error: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps([{k: r[k] for k in COLUMNS} for r in rows], separators=(",", ":")))
    else:
        print(table(rows, args.markdown))
        print(f"({len(rows)} runs of {args.requests} requests in {time.perf_counter() - t0:.1f} s)", file=sys.stderr)
    if args.plot:
        from testing.sim.plot import plot
        plot(rows, args.plot, f"{args.requests} requests, {args.models} models, Zipf {args.zipf}, "
                              f"utilization {args.utilization}, seed {args.seed}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

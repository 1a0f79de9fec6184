"""Cluster benchmark: a local InferenceCluster (2 CPU replicas on a Ray head on loopback) serving a
seeded mixed trace over 3 tiny models with Serve's default router (power of two choices) and with
the affinity router, alternately (--repeats each, medians), each run on a fresh cluster; and one warm request's latency
through the cluster against a single engine started as run.py starts it.

Reports the bytes the replicas' pools loaded (each replica's pool counter `loaded_bytes`, summed),
the loads, the trace's wall time and where each model went.

    python testing/bench_cluster.py [--requests 40] [--clients 4] [--seed 0] [--steps 2] [--repeats 3] [--shared] [--keep-resident-gb 0]

Writes testing/.bench/bench_cluster.json."""
import argparse
import collections
import json
import os
import random
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

WEIGHTS = (0.5, 0.3, 0.2)       # how often each of the 3 models is asked for
NUM_CPUS = 0.5                  # per replica: two fit on a 2-core machine


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--arch", default="zimage")
    ap.add_argument("--requests", type=int, default=40)
    ap.add_argument("--clients", type=int, default=4, help="requests in flight at once (closed loop)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3, help="runs per router, alternating (medians reported)")
    ap.add_argument("--warm", type=int, default=10, help="warm requests timed for the overhead figure")
    ap.add_argument("--keep-resident-gb", type=float, default=0.0,
                    help="each replica's engine.keep_resident_gb (0: a replica holds one model at a time)")
    ap.add_argument("--shared", action="store_true", help="the 3 models share their text encoder and VAE files")
    ap.add_argument("--out", default=os.path.join(ROOT, "testing", ".bench", "bench_cluster.json"))
    return ap.parse_args(argv)


def models(args, root) -> list:
    from toolkit.models.tiny import cached_tiny, make_shared_pair
    if args.shared:
        a, b = make_shared_pair(args.arch, os.path.join(root, "m0"), os.path.join(root, "m1"), 0, 1)
        folders = [a, b, make_shared_pair(args.arch, a, os.path.join(root, "m2"), 0, 2)[1]]
    else:
        folders = [cached_tiny(args.arch, seed, root=os.path.join(root, "tiny")) for seed in (0, 1, 2)]
    return [{"arch": args.arch, "name_or_path": str(f)} for f in folders]


def body(args, model, seed) -> dict:
    return {"model": model, "wait": True, "sample": {"prompt": "a fox", "width": args.size, "height": args.size,
                                                     "num_inference_steps": args.steps, "seed": seed}}


def trace_run(router: str, trace: list, ms: list, args, root: str, overhead_too: bool = False) -> dict:
    from testing.local_cluster import LocalCluster
    cluster = LocalCluster(tempfile.mkdtemp(prefix=f"cluster_{router}_", dir=root), replicas=2, num_cpus=NUM_CPUS, router=router,
                           token="bench-token-123", engine_extra={"keep_resident_gb": args.keep_resident_gb})
    try:
        where = collections.defaultdict(collections.Counter)

        def one(i):
            r = cluster.client.post("/generate", json=body(args, ms[trace[i]], i))
            if r.status_code != 200 or r.json()["status"] != "ok":
                raise RuntimeError(f"request {i}: {r.status_code} {r.text[:300]}")
            where[f"model{trace[i]}"][r.headers["x-engine-replica"]] += 1
        t0 = time.perf_counter()
        with ThreadPoolExecutor(args.clients) as ex:
            list(ex.map(one, range(len(trace))))
        wall = time.perf_counter() - t0
        pools = {r["replica"]: r["pool"] for r in cluster.health()["replicas"]}
        out = {"router": router, "wall_s": round(wall, 2),
               "bytes_loaded": sum(p["loaded_bytes"] for p in pools.values()),
               "loads": sum(p["loads"] for p in pools.values()),
               "per_replica": {rid: {"loaded_bytes": p["loaded_bytes"], "loads": p["loads"]} for rid, p in pools.items()},
               "placement": {m: dict(c) for m, c in sorted(where.items())}}
        if overhead_too:
            out["warm_request_s"] = overhead(cluster, ms[0], args, root)
        return out
    finally:
        cluster.close()


def overhead(cluster, model, args, root) -> dict:
    """Median seconds of one request on a resident model through the cluster and on one engine as
    `run.py` starts it (its own process and worker), alternating the two so both see the same load
    on the machine; one warm-up request each first."""
    from testing.engine_client import EngineProcess
    # Ray gives an actor OMP_NUM_THREADS = its num_cpus (at least 1): the single engine gets the same torch threads
    threads = str(max(1, int(NUM_CPUS)))
    single = EngineProcess(os.path.join(root, "single"), engine_extra={"token": "bench-token-123"},
                           env={"OMP_NUM_THREADS": threads}).wait_ready()
    try:
        times = {"cluster": [], "single_engine": []}
        posts = {"cluster": cluster.client.post, "single_engine": single.client.post}
        for i in range(args.warm + 1):
            for name, post in posts.items():
                t0 = time.perf_counter()
                r = post("/generate", json=body(args, model, 1000 + i))
                assert r.status_code == 200 and r.json()["status"] == "ok", r.text[:300]
                times[name].append(time.perf_counter() - t0)
    finally:
        single.stop()
    out = {name: round(statistics.median(t[1:]), 4) for name, t in times.items()}
    out["overhead_s"] = round(out["cluster"] - out["single_engine"], 4)
    return out


def main(argv=None):
    args = parse_args(argv)
    root = tempfile.mkdtemp(prefix="bench_cluster_")
    os.environ["AITK_TINY_CACHE"] = os.path.join(root, "tiny")       # the replicas may read these folders
    ms = models(args, root)
    trace = random.Random(args.seed).choices(range(3), weights=WEIGHTS, k=args.requests)
    runs = []
    for i in range(args.repeats):           # alternating, so both see the machine's load alike
        for router in ("default", "affinity"):
            runs.append(trace_run(router, trace, ms, args, root, overhead_too=(i == 0 and router == "affinity")))
    median = {router: {k: statistics.median(r[k] for r in runs if r["router"] == router)
                       for k in ("bytes_loaded", "loads", "wall_s")} for router in ("default", "affinity")}
    result = {"requests": args.requests, "clients": args.clients, "seed": args.seed, "steps": args.steps,
              "repeats": args.repeats, "shared_components": args.shared, "keep_resident_gb": args.keep_resident_gb,
              "trace_counts": dict(collections.Counter(f"model{m}" for m in trace)), "median": median,
              "bytes_ratio_affinity_vs_default": round(median["affinity"]["bytes_loaded"]
                                                       / max(median["default"]["bytes_loaded"], 1), 3),
              "warm_request_s": next(r.pop("warm_request_s") for r in runs if "warm_request_s" in r), "runs": runs}
    for r in runs:
        print(f"{r['router']:>8}: {r['bytes_loaded'] / 1e6:8.2f} MB loaded in {r['loads']:3d} loads, "
              f"wall {r['wall_s']:6.1f} s, placement {r['placement']}")
    for router, m in median.items():
        print(f"median {router:>8}: {m['bytes_loaded'] / 1e6:8.2f} MB, {m['loads']} loads, wall {m['wall_s']:.1f} s")
    print(f"affinity / default bytes (medians): {result['bytes_ratio_affinity_vs_default']}")
    w = result["warm_request_s"]
    print(f"one warm request: cluster {w['cluster']:.3f} s, single engine {w['single_engine']:.3f} s, "
          f"overhead {w['overhead_s'] * 1000:.0f} ms")
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    tmp = args.out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(result, f, indent=1)
    os.replace(tmp, args.out)
    print(f"wrote {args.out}")
    return result


if __name__ == "__main__":
    main()

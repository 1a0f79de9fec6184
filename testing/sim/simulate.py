"""The event loop: arrivals in trace order, completions from a heap; one result row per run."""
import heapq
import math
import random

import numpy as np

from testing.sim.catalog import Model
from testing.sim.params import SimParams
from testing.sim.policies import EXTRA_POLICIES, POLICIES
from testing.sim.replica import Channel, Node, Replica


def build_replicas(n: int, params: SimParams) -> list:
    """n replicas, gpus_per_node to a node; nodes read their own disk, or a network link into one
    store every node shares."""
    store = Channel(params.storage_gbps) if params.storage == "shared" else None
    nodes = []
    for _ in range(math.ceil(n / params.gpus_per_node)):
        channels = (Channel(params.nic_gbps), store) if store else (Channel(params.disk_gbps),)
        nodes.append(Node(params, channels))
    return [Replica(nodes[i // params.gpus_per_node], params) for i in range(n)]


def simulate(models: list[Model], trace: list, n_replicas: int, policy: str, params: SimParams = SimParams(),
             seed: int = 0) -> dict:
    """Run `trace` (requests in arrival order) on n_replicas, all cold, routed by `policy`.
    Deterministic for a seed (it seeds the policy's random draws)."""
    choose = {**POLICIES, **EXTRA_POLICIES}[policy]
    rng = random.Random(seed)
    replicas = build_replicas(n_replicas, params)
    heap, latencies, waits = [], [], []

    def finish():
        t, i = heapq.heappop(heap)
        r = replicas[i]
        latencies.append(t - r.running.t)
        waits.append(t - r.running.t - r.running.service_s)
        r.running = None
        if r.queue:
            heapq.heappush(heap, (r.start_next(t), i))

    for req in trace:
        while heap and heap[0][0] <= req.t:     # a completion at the arrival's instant frees its replica first
            finish()
        model = models[req.model]
        i = choose(replicas, model, rng, params, req.t)
        r = replicas[i]
        r.enqueue(req, model)
        if r.running is None:
            heapq.heappush(heap, (r.start_next(req.t), i))
    while heap:
        finish()

    hits, misses = sum(r.hits for r in replicas), sum(r.misses for r in replicas)
    return {"policy": policy, "replicas": n_replicas,
            "p50_s": round(float(np.percentile(latencies, 50)), 3),
            "p99_s": round(float(np.percentile(latencies, 99)), 3),
            "bytes_loaded": int(sum(r.bytes_loaded for r in replicas)),
            "load_s": round(sum(r.load_s for r in replicas), 3),
            "hit_rate": round(hits / (hits + misses), 4) if hits + misses else 0.0,
            # not in --json's rows: the part of the latency routing decides (queueing and loading)
            "wait_p50_s": round(float(np.percentile(waits, 50)), 3),
            "wait_p99_s": round(float(np.percentile(waits, 99)), 3)}

"""Affinity ranking of replicas for one request: pure data in, ranks out (no Ray; router.py calls it).

A request's `components` are {public key: bytes} of every component its model loads (the pool's
identity, plan.py); a replica's `resident` are the keys it holds or will hold once its queue drains.
The cost of a replica is the bytes it would still have to load. Replicas whose queue exceeds the
shortest by more than `max_imbalance` go last, so a hot model spills onto idle replicas instead of
piling onto the one that holds it.
"""
from dataclasses import dataclass


@dataclass(frozen=True)
class ReplicaView:
    replica_id: str
    resident: frozenset       # public keys of the components it holds (or is about to)
    queue: int                # requests running or waiting there


def bytes_to_load(components: dict, resident) -> int:
    return sum(size for key, size in components.items() if key not in resident)


def ranked(costs: list, max_imbalance: int = 2) -> list[list[int]]:
    """Indices of `costs` ((bytes to load, queue length) per replica) in ranks, best first: those whose
    queue is at most `max_imbalance` longer than the shortest by (bytes, queue), then the rest by queue;
    ties share a rank, in index order. The one ranking the router and testing/sim_routing.py use."""
    if not costs:
        return []
    shortest = min(q for _b, q in costs)
    fair = sorted((i for i, (_b, q) in enumerate(costs) if q - shortest <= max_imbalance), key=lambda i: costs[i])
    over = sorted((i for i, (_b, q) in enumerate(costs) if q - shortest > max_imbalance), key=lambda i: costs[i][1])
    ranks, last = [], None
    for i in fair:
        if costs[i] != last:
            ranks.append([])
            last = costs[i]
        ranks[-1].append(i)
    if over:
        ranks.append(over)
    return ranks


def rank(components: dict | None, replicas: list, max_imbalance: int = 2) -> list[list[str]]:
    """Replica ids in ranks, best first (ranked() over each replica's bytes to load and queue).
    Replicas tied on both share a rank (the caller picks among them)."""
    components = components or {}
    costs = [(bytes_to_load(components, r.resident), r.queue) for r in replicas]
    return [[replicas[i].replica_id for i in group] for group in ranked(costs, max_imbalance)]

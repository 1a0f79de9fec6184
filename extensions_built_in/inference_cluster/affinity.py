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


def rank(components: dict | None, replicas: list, max_imbalance: int = 2) -> list[list[str]]:
    """Replica ids in ranks, best first: within the imbalance bound by (bytes to load, queue), then
    the rest by queue. Replicas tied on both share a rank (the caller picks among them)."""
    if not replicas:
        return []
    components = components or {}
    shortest = min(r.queue for r in replicas)
    fair = sorted((r for r in replicas if r.queue - shortest <= max_imbalance),
                  key=lambda r: (bytes_to_load(components, r.resident), r.queue))
    over = sorted((r for r in replicas if r.queue - shortest > max_imbalance), key=lambda r: r.queue)
    ranks, last = [], None
    for r in fair:
        key = (bytes_to_load(components, r.resident), r.queue)
        if key != last:
            ranks.append([])
            last = key
        ranks[-1].append(r.replica_id)
    if over:
        ranks.append([r.replica_id for r in over])
    return ranks

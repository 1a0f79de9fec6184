"""Ray Serve request routers for the engine replicas (the RequestRouter API is alpha in Ray: keep this
small). Both honour `target` (a replica id: cancel, re-attach, per-replica health go to the replica
that holds the request); a target that is gone falls back to any replica, which answers 404.

- AffinityRouter: ranks by the bytes a replica would load for the request (affinity.rank), from the
  components each replica reports in record_routing_stats(), then by queue length.
- DefaultRouter: Serve's own power-of-two-choices router (the baseline the benchmark compares).
"""
import collections
import random

from ray.serve._private.request_router.pow_2_router import PowerOfTwoChoicesRequestRouter
from ray.serve.request_router import RequestRouter

from extensions_built_in.inference_cluster.affinity import ReplicaView, rank


def _routing_kwargs(pending_request) -> tuple:
    kw = pending_request.kwargs if pending_request is not None else {}
    return kw.get("target"), kw.get("components")


def _targeted(router, candidates, target):
    if target is None:
        return None
    chosen = [r for r in candidates if r.replica_id.unique_id == target]
    return [chosen] if chosen else [list(candidates)]


class AffinityRouter(RequestRouter):
    def initialize_state(self, max_imbalance: int = 2, **_):
        self.max_imbalance = max_imbalance
        self.expected: dict = {}          # replica id -> the keys of the last request routed there
        self.inflight = collections.Counter()   # replica id -> calls sent and not completed

    async def choose_replicas(self, candidate_replicas, pending_request=None):
        target, components = _routing_kwargs(pending_request)
        targeted = _targeted(self, candidate_replicas, target)
        if targeted is not None:
            return targeted
        by_id, views = {}, []
        for r in candidate_replicas:
            rid = r.replica_id.unique_id
            by_id[rid] = r
            stats = r.routing_stats or {}
            # the stats are polled (request_routing_stats_period_s): they lag behind a burst and a
            # just-finished load, so what this router sent counts too. A replica holds the last model
            # routed there once it gets to it; what it holds now stays only when it keeps components
            # warm (engine.keep_resident_gb), else the new model replaces it.
            queue = max(self.inflight[rid], stats.get("queue", 0))
            now, last = set(stats.get("resident", ())), self.expected.get(rid)
            resident = now if last is None else (now | last if stats.get("keeps_warm") else last)
            views.append(ReplicaView(rid, frozenset(resident), queue))
        # one replica per rank, ties in random order: the first is the one Serve sends to (unless it
        # is full), so this router knows where the request's model is going
        order = [rid for group in rank(components, views, self.max_imbalance)
                 for rid in random.sample(group, len(group))]
        if order and components:
            self.expected[order[0]] = set(components)
        return [[by_id[rid]] for rid in order]

    def on_send_request(self, replica_id):
        super().on_send_request(replica_id)
        self.inflight[replica_id.unique_id] += 1

    def on_request_completed(self, replica_id, internal_request_id):
        super().on_request_completed(replica_id, internal_request_id)
        self.inflight[replica_id.unique_id] -= 1

    def on_replica_actor_died(self, replica_id):
        super().on_replica_actor_died(replica_id)
        self.expected.pop(replica_id.unique_id, None)
        self.inflight.pop(replica_id.unique_id, None)


class DefaultRouter(PowerOfTwoChoicesRequestRouter):
    def initialize_state(self, **kwargs):
        super().initialize_state(**{k: v for k, v in kwargs.items() if k != "max_imbalance"})

    async def choose_replicas(self, candidate_replicas, pending_request=None):
        targeted = _targeted(self, candidate_replicas, _routing_kwargs(pending_request)[0])
        if targeted is not None:
            return targeted
        return await super().choose_replicas(candidate_replicas, pending_request)


ROUTERS = {"affinity": AffinityRouter, "default": DefaultRouter}

"""Ray Serve request routers for the engine replicas (the RequestRouter API is alpha in Ray: keep this
small). Both honour `target` (a replica id: cancel, re-attach, per-replica health go to the replica
that holds the request); a target that is gone falls back to any replica, which answers 404.

- AffinityRouter: ranks by the bytes a replica would load for the request (affinity.rank), from the
  components each replica reports in record_routing_stats(), then by queue length.
- DefaultRouter: Serve's own power-of-two-choices router (the baseline the benchmark compares).
"""
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
            queue = self.replica_queue_len_cache.get(r.replica_id)
            queue = stats.get("queue", 0) if queue is None else queue
            # a replica holds the last model routed there once it gets to it: the stats, polled every
            # request_routing_stats_period_s, lag behind a burst or a just-finished load
            resident = set(stats.get("resident", ())) | self.expected.get(rid, set())
            views.append(ReplicaView(rid, frozenset(resident), queue))
        return [[by_id[i] for i in ids] for ids in rank(components, views, self.max_imbalance)]

    def on_request_routed(self, pending_request, replica_id, result):
        _target, components = _routing_kwargs(pending_request)
        if components:
            self.expected[replica_id.unique_id] = set(components)

    def on_replica_actor_died(self, replica_id):
        super().on_replica_actor_died(replica_id)
        self.expected.pop(replica_id.unique_id, None)


class DefaultRouter(PowerOfTwoChoicesRequestRouter):
    def initialize_state(self, **kwargs):
        super().initialize_state(**{k: v for k, v in kwargs.items() if k != "max_imbalance"})

    async def choose_replicas(self, candidate_replicas, pending_request=None):
        targeted = _targeted(self, candidate_replicas, _routing_kwargs(pending_request)[0])
        if targeted is not None:
            return targeted
        return await super().choose_replicas(candidate_replicas, pending_request)


ROUTERS = {"affinity": AffinityRouter, "default": DefaultRouter}

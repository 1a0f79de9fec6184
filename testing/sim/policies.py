"""Routing policies: which replica a new request goes to. Each takes (replicas, model, rng, params, t)."""

from extensions_built_in.inference_cluster.affinity import ranked


def affinity_choice(costs: list, max_imbalance: int) -> int:
    """The index in `costs` ((bytes to load, queue length) per replica) of the replica to send to: the
    first of the best rank of the Ray Serve affinity router's own ranking (fewest bytes to load, then
    the shortest queue, among replicas at most `max_imbalance` longer than the shortest queue)."""
    return ranked(costs, max_imbalance)[0][0]


def _rotated(n: int, rng) -> list:
    """Replica indices from a random start: ties go to a random replica, not always the first."""
    k = rng.randrange(n)
    return list(range(k, n)) + list(range(k))


def random_policy(replicas, model, rng, params, t) -> int:
    return rng.randrange(len(replicas))


def least_queue(replicas, model, rng, params, t) -> int:
    order = _rotated(len(replicas), rng)
    return min(order, key=lambda i: replicas[i].queue_len())


def power_of_two(replicas, model, rng, params, t) -> int:
    """Serve's default router: two replicas at random, the one with fewer ongoing requests (without
    its max_ongoing_requests back-off: replica queues here are unbounded)."""
    if len(replicas) == 1:
        return 0
    i, j = rng.sample(range(len(replicas)), 2)
    return j if replicas[j].queue_len() < replicas[i].queue_len() else i


def affinity(replicas, model, rng, params, t) -> int:
    order = _rotated(len(replicas), rng)
    costs = [(replicas[i].bytes_to_load(model), replicas[i].queue_len()) for i in order]
    return order[affinity_choice(costs, params.max_imbalance)]


def affinity_time(replicas, model, rng, params, t) -> int:
    """Not the router's ranking: the earliest estimated start, work ahead plus the load's seconds at
    the rate the replica's recent loads ran (the queue counted in seconds, not requests)."""
    order = _rotated(len(replicas), rng)
    return min(order, key=lambda i: replicas[i].work_s(t) + replicas[i].bytes_to_load(model) * replicas[i].load_s_per_byte)


POLICIES = {"random": random_policy, "least_queue": least_queue, "power_of_two": power_of_two, "affinity": affinity}
EXTRA_POLICIES = {"affinity_time": affinity_time}     # not in the default grid: see docs/scale.md

"""Seeded request traces: Zipf popularity over the catalog's models, Poisson arrivals, request sizes."""
from dataclasses import dataclass

import numpy as np

SIZES = (0.25, 0.5, 1.0, 2.0)          # pixels (or voxels) relative to the family's reference size
SIZE_P = (0.15, 0.25, 0.45, 0.15)


@dataclass(frozen=True)
class Request:
    id: int
    t: float            # arrival, seconds
    model: int          # index into the catalog
    steps: int
    size: float
    service_s: float    # sampling seconds once its components are resident (steps x step_s x size)


def zipf_p(n: int, s: float) -> np.ndarray:
    w = 1.0 / np.arange(1, n + 1) ** s
    return w / w.sum()


def make_trace(models: list, n_requests: int, replicas: int, utilization: float, zipf_s: float,
               seed: int) -> list:
    """n_requests requests whose sampling alone would keep `replicas` GPUs `utilization` busy (loads
    come on top). The seed fixes which models are popular, the picks, sizes and the arrival gaps:
    one seed gives one sequence of requests at any replica count, its times scaled by 1/replicas."""
    rng = np.random.default_rng(seed)
    rank = rng.permutation(len(models))          # popularity rank -> model: which family is hot is drawn too
    picks = rank[rng.choice(len(models), size=n_requests, p=zipf_p(len(models), zipf_s))]
    sizes = rng.choice(SIZES, size=n_requests, p=SIZE_P)
    steps = [models[m].family.steps[int(u * len(models[m].family.steps))]
             for m, u in zip(picks, rng.random(n_requests))]
    service = np.array([st * models[m].family.step_s * sz for m, st, sz in zip(picks, steps, sizes)])
    rate = utilization * replicas / service.mean()
    times = np.cumsum(rng.exponential(1.0 / rate, size=n_requests))
    return [Request(i, float(t), int(m), int(st), float(sz), float(sv))
            for i, (t, m, st, sz, sv) in enumerate(zip(times, picks, steps, sizes, service))]

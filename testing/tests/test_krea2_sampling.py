"""Krea 2 sampling formulas (the official recipe): the timestep shift and mu. Model-level checks (guidance,
CFG-0 encoding, prefix boundary) are in test_krea2.py."""
import math

import numpy as np
import pytest
import torch

from toolkit.models.archs.krea2 import SCHEDULER_CONFIG, image_tokens, krea2_mu, shifted_timesteps


def test_mu_turbo_is_pinned_and_raw_interpolates():
    assert krea2_mu(1024, 1024, "turbo") == 1.15
    assert krea2_mu(256, 256, "raw") == pytest.approx(0.5)           # 256 image tokens -> y1
    assert krea2_mu(1280, 1280, "raw") == pytest.approx(1.15)        # 6400 image tokens -> y2
    mid = image_tokens(1024, 1024)
    assert mid == 4096
    assert krea2_mu(1024, 1024, "raw") == pytest.approx(0.5 + (1.15 - 0.5) * (4096 - 256) / (6400 - 256))
    assert krea2_mu(1024, 1024, "raw", y1=0.3, y2=1.5) == pytest.approx(0.3 + 1.2 * 3840 / 6144)
    assert krea2_mu(1024, 1024, "turbo", mu=0.7) == 0.7 and krea2_mu(512, 512, "raw", mu=2.0) == 2.0


@pytest.mark.parametrize("steps,mu", [(8, 1.15), (52, 0.93), (3, 0.5)])
def test_shift_formula_matches_the_scheduler(steps, mu):
    """shifted(t) = e^mu / (e^mu + (1/t - 1)) on the uniform grid 1 -> 0 with steps+1 points."""
    from diffusers import FlowMatchEulerDiscreteScheduler
    cfg = {k: v for k, v in SCHEDULER_CONFIG.items() if k != "_class_name"}
    sched = FlowMatchEulerDiscreteScheduler(**cfg)
    sched.set_timesteps(sigmas=np.linspace(1.0, 1 / steps, steps), mu=mu)
    expected = shifted_timesteps(steps, mu)
    assert len(expected) == steps + 1 and expected[0] == 1.0 and expected[-1] == 0.0
    assert torch.allclose(sched.sigmas.double(), torch.tensor(expected, dtype=torch.float64), atol=1e-6)
    t = 0.25
    assert shifted_timesteps(4, mu)[3] == pytest.approx(math.exp(mu) / (math.exp(mu) + (1 / t - 1)))
    # descending
    assert all(a > b for a, b in zip(expected, expected[1:]))

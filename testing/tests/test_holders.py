"""Holders on tiny models: the step hook and its x0, and what a raising hook leaves behind. (The
holder-vs-diffusers fidelity of every arch is in test_arch_contract.py.)"""
import numpy as np
import pytest
import torch

from toolkit.config_modules import GenerateImageConfig
from toolkit.models.base_model import get_model_class
from toolkit.models.tiny import sample_settings


def _holder(arch, folder, **model):
    return get_model_class(arch)({"arch": arch, "name_or_path": folder, **model}, device="cpu").load_model()


def _gen(arch, tmp_path, **over):
    return GenerateImageConfig.from_dict({**sample_settings(arch), "prompt": "a small test prompt", "seed": 1234,
                                          **over}, arch)


def test_hook_unset_leaves_scheduler_untouched(tiny, tmp_path):
    holder = _holder("zimage", tiny("zimage"))
    before = holder.pipeline.scheduler.__dict__.get("step")
    gen = _gen("zimage", tmp_path)
    holder.generate_single(gen)
    assert holder.pipeline.scheduler.__dict__.get("step") is before is None


def test_hook_exception_leaves_holder_usable(tiny, tmp_path):
    """A hook that raises (how the engine cancels) unwinds cleanly; the next run is identical."""
    holder = _holder("zimage", tiny("zimage"))
    gen = _gen("zimage", tmp_path)
    first = np.asarray(holder.generate_single(gen))

    class Stop(Exception):
        pass

    def stop(i, *a):
        if i == 1:
            raise Stop
    with pytest.raises(Stop):
        holder.generate_single(gen, on_step=stop)
    assert "step" not in holder.pipeline.scheduler.__dict__
    assert np.array_equal(np.asarray(holder.generate_single(gen)), first)


def test_flow_matching_x0(tiny, tmp_path):
    """For flow matching, the hook's x0 is x_t - sigma_t * v (checked on the last step, where x_{t-1} = x0)."""
    holder = _holder("zimage", tiny("zimage"))
    seen = []
    holder.generate_single(_gen("zimage", tmp_path), on_step=lambda i, n, t, lat, x0: seen.append((lat.clone(),
                                                                                                 x0.clone())))
    last_latents, last_x0 = seen[-1]
    # the final sigma is 0, so the last Euler step lands exactly on the predicted x0
    assert torch.allclose(last_latents, last_x0, atol=1e-5)

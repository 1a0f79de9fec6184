"""Qwen-Image 2.1's Turbo variant (the contract suite runs the base): its checkpoint fixes an 8-step
sigma grid in model_index.json (`sample_sigmas`), which the pipeline runs whatever num_inference_steps
says. The holder runs that grid for a request of 8 steps, bit for bit as the bare pipeline built with
it, and the pipeline's own grid for another step count (as many steps as asked)."""
import numpy as np
import pytest
import torch

from toolkit.config_modules import GenerateImageConfig
from toolkit.models.archs.qwen_image_2 import TURBO_SIGMAS
from toolkit.models.base_model import get_model_class

SAMPLE = {"prompt": "a small test prompt", "seed": 7, "width": 64, "height": 64, "guidance_scale": 1.0}


@pytest.fixture(scope="module")
def turbo(tiny_root):
    from toolkit.models.tiny import cached_tiny

    folder = str(cached_tiny("qwen_image_2", 0, root=str(tiny_root)))
    holder = get_model_class("qwen_image_2")({"arch": "qwen_image_2", "name_or_path": folder, "local_only": True,
                                              "variant": "turbo"}, device="cpu")
    holder.load_model()
    return folder, holder


def _run(pipe, kwargs):
    steps = []
    original = pipe.scheduler.step

    def step(*args, **kw):
        steps.append(float(pipe.scheduler.sigmas[pipe.scheduler.step_index or 0]))
        return original(*args, **kw)

    pipe.scheduler.step = step
    try:
        out = pipe(**kwargs, generator=torch.Generator("cpu").manual_seed(7), output_type="np").images
    finally:
        del pipe.scheduler.step
    return out, steps


@pytest.mark.parametrize("steps", [8, 3])
def test_turbo_runs_its_grid_for_its_steps_and_asked_steps_otherwise(turbo, steps):
    from diffusers import QwenImage21Pipeline

    folder, holder = turbo
    assert list(holder.pipeline.config.sample_sigmas) == TURBO_SIGMAS
    gen = GenerateImageConfig.from_dict({**SAMPLE, "num_inference_steps": steps}, holder.model_config)
    kwargs = holder.pipeline_kwargs(gen)
    assert ("sigmas" in kwargs) == (steps != len(TURBO_SIGMAS))
    got, sigmas = _run(holder.pipeline, kwargs)
    assert len(sigmas) == steps

    bare = QwenImage21Pipeline.from_pretrained(folder, local_files_only=True, dtype=torch.float32,
                                               sample_sigmas=TURBO_SIGMAS)
    bare.set_progress_bar_config(disable=True)
    if steps == len(TURBO_SIGMAS):          # the checkpoint's grid, as the bare pipeline runs it by itself
        want, want_sigmas = _run(bare, {k: v for k, v in kwargs.items()})
    else:                                   # the grid the pipeline makes for `steps` without a fixed one
        bare.register_to_config(sample_sigmas=None)
        want, want_sigmas = _run(bare, {k: v for k, v in kwargs.items() if k != "sigmas"})
    assert sigmas == want_sigmas and np.array_equal(got, want)

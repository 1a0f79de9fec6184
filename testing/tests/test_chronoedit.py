"""ChronoEdit's own facts the contract suite does not single out: temporal reasoning (a 29-frame trajectory
for the first steps, then only its two ends) runs as the bare pipeline does and still yields the last
frame as the image; it is refused with a sampler other than UniPC, whose history it trims; and the
image to edit is loaded at the request size, not stretched by the pipeline."""
from dataclasses import replace

import numpy as np
import pytest
import torch

from testing.fixtures import input_image
from toolkit.config_modules import GenerateImageConfig
from toolkit.errors import ConfigError
from toolkit.models.base_model import get_model_class

ARCH = "chronoedit"


@pytest.fixture(scope="module")
def holder(tiny):
    h = get_model_class(ARCH)({"arch": ARCH, "name_or_path": tiny(ARCH), "local_only": True}, device="cpu")
    return h.load_model()


def _gen(holder, tmp_path, **over):
    sample = {"prompt": "add a hat", "width": 64, "height": 48, "num_inference_steps": 2, "guidance_scale": 5.0,
              "seed": 5, "ctrl_img": input_image(tmp_path / "in.png", 80, 80), **over}
    return GenerateImageConfig.from_dict(sample, holder.model_config)


def test_temporal_reasoning_runs_as_the_bare_pipeline_and_yields_the_last_frame(holder, tiny, tmp_path):
    from diffusers import ChronoEditPipeline

    gen = _gen(holder, tmp_path, enable_temporal_reasoning=True, num_temporal_reasoning_steps=1)
    kwargs = holder.pipeline_kwargs(gen)
    assert kwargs["enable_temporal_reasoning"] and kwargs["num_frames"] == 29
    shapes = []
    image = holder.generate_single(gen, on_step=lambda i, n, t, lat, x0: shapes.append((i, n, tuple(lat.shape))))
    assert image.size == (64, 48)
    assert shapes == [(0, 2, (1, 16, 6, 8)), (1, 2, (1, 16, 6, 8))], "the edited frame, before and after the trim"

    bare = ChronoEditPipeline.from_pretrained(tiny(ARCH), local_files_only=True, dtype=torch.float32)
    bare.set_progress_bar_config(disable=True)
    frames = bare(**kwargs, generator=torch.Generator("cpu").manual_seed(5), output_type="pil").frames[0]
    # trimmed to the two ends after the first step: 2 latent frames decode to 5
    assert len(frames) == 5 and np.array_equal(np.asarray(image), np.asarray(frames[-1]))


def test_temporal_reasoning_with_another_sampler_is_refused_naming_the_sampler(holder, tmp_path):
    """While the request is validated (the arch row's check), so the engine answers 422 before queueing."""
    with pytest.raises(ConfigError) as e:
        _gen(holder, tmp_path, enable_temporal_reasoning=True, sampler="euler")
    assert e.value.key == "sample.sampler"
    assert _gen(holder, tmp_path, enable_temporal_reasoning=True, sampler="unipc").sampler == "unipc"
    assert "enable_temporal_reasoning" not in holder.pipeline_kwargs(_gen(holder, tmp_path, sampler="euler"))


def test_the_image_to_edit_is_loaded_at_the_request_size(holder, tmp_path):
    from toolkit.images import load_image

    gen = _gen(holder, tmp_path)
    got = holder.pipeline_kwargs(gen)["image"]
    want = load_image(gen.ctrl_img, 64, 48, gen.resize_mode)     # cropped to 4:3, not stretched
    assert got.size == (64, 48) and np.array_equal(np.asarray(got), np.asarray(want))

"""ERNIE-Image's prompt enhancer (`use_pe`): the holder runs it seeded, as the bare pipeline run under the
same global seed does (bit for bit); the conditioning cache reuses its rewrite for a repeated prompt and
seed; a batch with it on is refused (its items would share one rewrite)."""
import numpy as np
import pytest
import torch

from toolkit.config_modules import GenerateImageConfig, ModelConfig
from toolkit.errors import ConfigError
from toolkit.models.base_model import get_model_class, global_rng_seeded
from toolkit.models.v2.cond_cache import ConditioningCache

SAMPLE = {"prompt": "a red fox in the snow", "width": 64, "height": 64, "num_inference_steps": 2,
          "guidance_scale": 4.0, "seed": 11, "use_pe": True}


@pytest.fixture
def holder(tiny):
    mc = ModelConfig.from_dict({"arch": "ernie_image", "name_or_path": tiny("ernie_image"), "dtype": "float32",
                                "local_only": True})
    return get_model_class("ernie_image")(mc).load_model()


def _pe_calls(holder) -> list:
    calls = []
    holder.loaded["pe"].register_forward_hook(lambda *_a: calls.append(1))
    return calls


def test_the_enhancer_runs_seeded_like_the_bare_pipeline(holder):
    from diffusers import DiffusionPipeline

    calls = _pe_calls(holder)
    gen = GenerateImageConfig.from_dict(SAMPLE, holder.model_config)
    got = np.asarray(holder.generate_single(gen))
    assert calls, "use_pe did not run the prompt enhancer"
    assert np.array_equal(got, np.asarray(holder.generate_single(gen))), "a seed does not reproduce the rewrite"
    bare = DiffusionPipeline.from_pretrained(holder.model_config.name_or_path, local_files_only=True,
                                             dtype=torch.float32)
    bare.set_progress_bar_config(disable=True)
    with global_rng_seeded(11):
        out = bare(**holder.pipeline_kwargs(gen), generator=torch.Generator("cpu").manual_seed(11))
    assert np.array_equal(got, np.asarray(out.images[0]))
    off = GenerateImageConfig.from_dict({**SAMPLE, "use_pe": False}, holder.model_config)
    assert not np.array_equal(got, np.asarray(holder.generate_single(off))), "the rewrite changed nothing"


def test_a_repeated_prompt_and_seed_reuse_the_rewrite(holder):
    calls = _pe_calls(holder)
    holder.cond_cache = ConditioningCache(64 << 20)
    gen = GenerateImageConfig.from_dict(SAMPLE, holder.model_config)
    first = np.asarray(holder.generate_single(gen))
    assert calls
    calls.clear()
    assert np.array_equal(first, np.asarray(holder.generate_single(gen))) and not calls
    holder.generate_single(GenerateImageConfig.from_dict({**SAMPLE, "seed": 12}, holder.model_config))
    assert calls, "another seed samples another rewrite"


def test_a_batch_with_the_enhancer_is_refused(holder):
    gen = GenerateImageConfig.from_dict({**SAMPLE, "batch_size": 2}, holder.model_config)
    with pytest.raises(ConfigError, match="batch_size"):
        holder.generate_single(gen)

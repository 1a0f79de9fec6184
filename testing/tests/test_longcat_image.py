"""LongCat-Image's prompt rewrite (the contract suite's tiny request leaves it off): on by default, as the
pipeline has it, the Qwen2.5-VL text encoder generates a new prompt before encoding, and the holder's
image is the bare pipeline's, bit for bit; off, nothing is generated. Both pipelines read and write 16
tokens here, not 512 (`tokenizer_max_length`, the rewrite's max_new_tokens and the encoding's padding):
a random tiny LLM rarely stops early."""
import numpy as np
import pytest
import torch

from toolkit.config_modules import GenerateImageConfig
from toolkit.models.base_model import get_model_class

SAMPLE = {"prompt": "a small test prompt", "seed": 7, "width": 64, "height": 64, "num_inference_steps": 2,
          "guidance_scale": 4.5}
MAX_TOKENS = 16


@pytest.fixture(scope="module")
def longcat(tiny_root):
    from toolkit.models.tiny import cached_tiny

    folder = str(cached_tiny("longcat_image", 0, root=str(tiny_root)))
    holder = get_model_class("longcat_image")({"arch": "longcat_image", "name_or_path": folder, "local_only": True},
                                              device="cpu")
    holder.load_model()
    holder.pipeline.tokenizer_max_length = MAX_TOKENS
    return folder, holder


@pytest.mark.parametrize("rewrite", [None, False])
def test_the_rewrite_runs_by_default_and_matches_the_pipeline(longcat, rewrite):
    from diffusers import LongCatImagePipeline

    folder, holder = longcat
    gen = GenerateImageConfig.from_dict({**SAMPLE, "prompt_rewrite": rewrite}, holder.model_config)
    assert gen.extras["prompt_rewrite"] is (rewrite is not False)       # unset: the pipeline's default, on
    generated = []
    encoder = holder.pipeline.text_encoder
    original = encoder.generate
    encoder.generate = lambda *a, **kw: generated.append(1) or original(*a, **kw)
    try:
        got = holder.generate_single(gen)
    finally:
        del encoder.generate
    assert bool(generated) == gen.extras["prompt_rewrite"]

    bare = LongCatImagePipeline.from_pretrained(folder, local_files_only=True, dtype=torch.float32)
    bare.set_progress_bar_config(disable=True)
    bare.tokenizer_max_length = MAX_TOKENS
    want = bare(**holder.pipeline_kwargs(gen), generator=torch.Generator("cpu").manual_seed(7)).images[0]
    assert np.array_equal(np.asarray(got), np.asarray(want))


def test_the_edit_makes_the_requested_size_from_an_input_of_another(tiny, tmp_path):
    """LongCat-Image-Edit's pipeline derives its size from the input (its aspect at 1024^2): the holder
    fits the input to the request and has the pipeline make the request's size."""
    from testing.fixtures import input_image

    holder = get_model_class("longcat_image_edit")({"arch": "longcat_image_edit", "name_or_path":
                                                    tiny("longcat_image_edit"), "local_only": True}, device="cpu")
    holder.load_model()
    gen = GenerateImageConfig.from_dict({**SAMPLE, "width": 96, "height": 64,
                                         "ctrl_img": input_image(tmp_path / "in.png", 48, 80)}, holder.model_config)
    assert holder.pipeline_kwargs(gen)["image"].size == (96, 64)
    assert holder.generate_single(gen).size == (96, 64)

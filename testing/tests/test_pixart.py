"""PixArt's variants run their own pipeline class over the same components (the contract suite runs
the default, alpha): the sigma variant is PixArtSigmaPipeline, bit for bit, and feeds the transformer
its 300 T5 tokens where alpha feeds 120."""
import numpy as np
import pytest
import torch

from toolkit.config_modules import GenerateImageConfig
from toolkit.models.base_model import get_model_class

SAMPLE = {"prompt": "a small test prompt", "seed": 7, "width": 64, "height": 64, "num_inference_steps": 2,
          "guidance_scale": 4.5, "resolution_binning": False}


def _text_lengths(pipe) -> list:
    """The T5 sequence length of every transformer call of the next run."""
    seen = []
    pipe.transformer.register_forward_hook(lambda m, args, kw, out: seen.append(kw["encoder_hidden_states"].shape[1]),
                                           with_kwargs=True)
    return seen


@pytest.mark.parametrize("variant,cls,tokens", [("alpha", "PixArtAlphaPipeline", 120),
                                                 ("sigma", "PixArtSigmaPipeline", 300)])
def test_each_variant_runs_its_pipeline_bit_for_bit(variant, cls, tokens, tiny):
    import diffusers

    folder = tiny("pixart")
    holder = get_model_class("pixart")({"arch": "pixart", "name_or_path": folder, "local_only": True,
                                        "variant": variant}, device="cpu")
    holder.load_model()
    assert type(holder.pipeline).__name__ == cls
    gen = GenerateImageConfig.from_dict(dict(SAMPLE), holder.model_config)
    kwargs = holder.pipeline_kwargs(gen)
    assert kwargs["use_resolution_binning"] is False
    seen = _text_lengths(holder.pipeline)
    got = holder.pipeline(**kwargs, generator=torch.Generator("cpu").manual_seed(7), output_type="np").images
    assert seen and set(seen) == {tokens}

    bare = getattr(diffusers, cls).from_pretrained(folder, local_files_only=True, dtype=torch.float32)
    bare.set_progress_bar_config(disable=True)
    want = bare(**kwargs, generator=torch.Generator("cpu").manual_seed(7), output_type="np").images
    assert np.array_equal(got, want)

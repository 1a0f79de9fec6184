"""Ideogram 4's departures from the common call: the engine's guidance scale and polish extras become the
pipeline's per-step guidance schedule (at the defaults, the pipeline's own), and its latent tokens keep a
token's channels last, which the `latent` frames unpack as the pipeline's decoder does."""
import inspect

import torch

from toolkit.config_modules import GenerateImageConfig, ModelConfig
from toolkit.models.base_model import get_model_class
from toolkit.models.latents import to_frame
from toolkit.models.registry import ARCHS


def _kwargs(**sample):
    mc = ModelConfig.from_dict({"arch": "ideogram4", "name_or_path": "unused"})
    holder = get_model_class("ideogram4")(mc, device="cpu")
    return holder.pipeline_kwargs(GenerateImageConfig.from_dict({"prompt": "a sign", **sample}, mc))


def test_the_defaults_are_the_pipelines_own_guidance_schedule():
    from diffusers import Ideogram4Pipeline

    params = inspect.signature(Ideogram4Pipeline.__call__).parameters
    kw = _kwargs()
    assert "guidance_scale" not in kw and "negative_prompt" not in kw
    assert kw["num_inference_steps"] == params["num_inference_steps"].default
    assert kw["guidance_schedule"] == list(params["guidance_schedule"].default)
    assert kw["max_sequence_length"] == params["max_sequence_length"].default
    assert (kw["width"], kw["height"]) == (params["width"].default, params["height"].default)


def test_the_schedule_follows_the_steps_and_the_polish_extras():
    assert _kwargs(num_inference_steps=5, guidance_scale=4.0)["guidance_schedule"] == [4.0, 4.0, 3.0, 3.0, 3.0]
    assert _kwargs(num_inference_steps=2, guidance_scale=5.0, polish_steps=4)["guidance_schedule"] == [3.0, 3.0]
    assert _kwargs(num_inference_steps=3, guidance_scale=5.0, polish_steps=0)["guidance_schedule"] == [5.0] * 3


def test_a_frame_is_the_pipelines_own_unpacking_of_the_tokens():
    """The decode step of Ideogram4Pipeline.__call__ (pipeline_ideogram4.py), before its VAE: tokens of
    (dy, dx, channel) -> (B, 32, H/8, W/8); the frame must be that latent, channel for channel."""
    spec = ARCHS["ideogram4"].latents
    b, height, width, p = 2, 48, 80, spec.patch
    gh, gw = height // (spec.spatial * p), width // (spec.spatial * p)
    tokens = torch.randn(b, gh * gw, p * p * spec.channels, generator=torch.Generator().manual_seed(0))
    z = tokens.view(b, gh, gw, p, p, spec.channels).permute(0, 5, 1, 3, 2, 4).contiguous()
    z = z.view(b, spec.channels, gh * p, gw * p)
    frame, layout = to_frame(tokens, spec, height=height, width=width)
    assert layout == "BCHW" and torch.equal(frame, z.to(torch.float16))

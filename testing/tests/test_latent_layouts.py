"""Latent layouts a `latent` frame unfolds: a `patched` latent (patches folded into channels, as
ERNIE-Image's pipeline steps it) becomes the frame its own pipeline decodes from."""
import torch

from toolkit.models import latents as latent_frames
from toolkit.models.arch import Latents


def test_patched_frames_are_the_pipelines_unpatchified_latents():
    from diffusers import ErnieImagePipeline

    spatial = torch.randn(2, 32, 6, 10)                        # what the VAE decodes: B, 32, H/8, W/8
    stepped = ErnieImagePipeline._patchify_latents(spatial)    # what scheduler.step sees: B, 128, H/16, W/16
    assert stepped.shape == (2, 128, 3, 5)
    assert torch.equal(ErnieImagePipeline._unpatchify_latents(stepped), spatial)
    frame, layout = latent_frames.to_frame(stepped, Latents("patched", 32, patch=2), height=48, width=80)
    assert layout == "BCHW" and torch.equal(frame, spatial.to(torch.float16))

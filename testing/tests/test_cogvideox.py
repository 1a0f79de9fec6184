"""CogVideoX's own facts the contract suite does not single out: its frames-first latents reach a
`latent` frame as BCFHW, and `use_dynamic_cfg` reaches the pipeline only when a request sets it."""
import torch

from toolkit.config_modules import GenerateImageConfig
from toolkit.models import latents as latent_frames
from toolkit.models.base_model import get_model_class
from toolkit.models.registry import ARCHS


def test_frames_first_latents_are_framed_channels_second():
    spec = ARCHS["cogvideox"].latents
    x = torch.randn(2, 5, 16, 8, 8)                 # (B, F, C, H, W), as CogVideoXPipeline steps them
    frame, layout = latent_frames.to_frame(x, spec, height=64, width=64, num_frames=17, max_frames=0)
    assert layout == "BCFHW" and tuple(frame.shape) == (2, 16, 5, 8, 8)
    assert torch.equal(frame, x.transpose(1, 2).to(torch.float16))


def test_use_dynamic_cfg_reaches_the_pipeline_only_when_set():
    holder = get_model_class("cogvideox")({"arch": "cogvideox", "name_or_path": "x/y"}, device="cpu")
    base = {"prompt": "p", "width": 64, "height": 64, "num_frames": 9}
    assert "use_dynamic_cfg" not in holder.pipeline_kwargs(GenerateImageConfig.from_dict(base, holder.model_config))
    for value in (True, False):
        gen = GenerateImageConfig.from_dict({**base, "use_dynamic_cfg": value}, holder.model_config)
        assert holder.pipeline_kwargs(gen)["use_dynamic_cfg"] is value

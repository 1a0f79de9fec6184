"""Kandinsky 5 and Cosmos facts the contract suite does not single out: their latent layouts reach a
`latent` frame channels second; Kandinsky 5 I2V refuses videos too short for its first-frame
renormalisation; Kandinsky 5 Image makes the size asked for (the pipeline alone would snap it to a
trained one); the Cosmos guardrail's refusal reaches the request as the pipeline's error."""
import pytest
import torch

from toolkit.config_modules import GenerateImageConfig
from toolkit.errors import ConfigError
from toolkit.models import latents as latent_frames
from toolkit.models.base_model import get_model_class
from toolkit.models.registry import ARCHS


@pytest.mark.parametrize("arch,shape,want", [
    ("kandinsky5", (2, 5, 8, 8, 16), lambda x: x.permute(0, 4, 1, 2, 3)),        # (B, F, H, W, C)
    ("kandinsky5_image", (2, 1, 8, 8, 16), lambda x: x[:, 0].permute(0, 3, 1, 2)),   # (B, 1, H, W, C)
    ("cosmos2", (2, 16, 1, 8, 8), lambda x: x[:, :, 0]),                          # (B, C, 1, H, W)
])
def test_channels_last_and_one_frame_latents_are_framed_channels_second(arch, shape, want):
    spec = ARCHS[arch]
    x = torch.randn(*shape)
    frame, layout = latent_frames.to_frame(x, spec.latents, height=64, width=64, num_frames=17, max_frames=0)
    assert layout == spec.latents.frame_layout
    assert torch.equal(frame, want(x).to(torch.float16))


def test_kandinsky5_i2v_steps_every_latent_frame_but_the_first():
    lat = ARCHS["kandinsky5_i2v"].latents
    assert lat.latent_frames(121) == 31 and lat.stepped_frames(121) == 30


def _holder(arch):
    return get_model_class(arch)({"arch": arch, "name_or_path": "x/y"}, device="cpu")


def test_kandinsky5_i2v_refuses_fewer_frames_than_its_renormalisation_reads():
    holder = _holder("kandinsky5_i2v")
    base = {"prompt": "p", "width": 64, "height": 64, "init_img": "x.png"}
    with pytest.raises(ConfigError) as e:
        holder.pipeline_kwargs(GenerateImageConfig.from_dict({**base, "num_frames": 13}, holder.model_config))
    assert e.value.key == "sample.num_frames" and "17" in str(e.value)


def test_kandinsky5_image_adds_the_request_size_to_the_pipelines_trained_sizes():
    class Pipe:
        resolutions = [(1024, 1024), (1280, 768)]

    holder = _holder("kandinsky5_image")
    for size, want in (((64, 96), [(1024, 1024), (1280, 768), (64, 96)]), ((1280, 768), Pipe.resolutions)):
        gen = GenerateImageConfig.from_dict({"prompt": "p", "width": size[0], "height": size[1]}, holder.model_config)
        (obj, name, wrap), = holder.call_patches(gen, Pipe)
        assert obj is Pipe and name == "resolutions" and wrap(Pipe.resolutions) == want


def test_cosmos_guardrail_refusal_fails_the_request(tiny):
    from toolkit.models.tiny.cosmos_guardrail import BLOCKED

    holder = get_model_class("cosmos2")({"arch": "cosmos2", "name_or_path": tiny("cosmos2"), "local_only": True},
                                        device="cpu")
    holder.load_model()
    gen = GenerateImageConfig.from_dict({**ARCHS["cosmos2"].tiny.sample, "prompt": f"a fox {BLOCKED}", "seed": 1},
                                        holder.model_config)
    with pytest.raises(ValueError, match="Guardrail detected unsafe text"):
        holder.generate_single(gen)

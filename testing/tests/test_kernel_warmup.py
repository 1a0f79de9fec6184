"""The CPU's convolution kernels built from the files' headers while a model loads (toolkit/models/kernel_warmup.py):
the shapes read from a file are those of the modules diffusers builds from it, a load builds them, and a
CUDA load leaves them alone. How much it saves is a benchmark's (testing/bench_cold.py), not a test's."""
import torch

from toolkit.models import kernel_warmup
from toolkit.models.base_model import get_model_class
from toolkit.request import resolve_request


def _module_conv_shapes(module) -> set:
    return {tuple(m.weight.shape) for m in module.modules() if isinstance(m, (torch.nn.Conv2d, torch.nn.Conv3d))}


def test_header_shapes_are_the_modules_convolutions(tiny):
    """Read the other way round: the Conv2d modules diffusers builds from the same folder."""
    from diffusers import AutoencoderKL, UNet2DConditionModel
    folder = tiny("sd1")
    work = resolve_request({"arch": "sd1", "name_or_path": folder}, {"prompt": "a"})
    shapes = kernel_warmup.model_conv_shapes(work.model)
    unet = UNet2DConditionModel.from_pretrained(folder, subfolder="unet")
    vae = AutoencoderKL.from_pretrained(folder, subfolder="vae")
    assert shapes == _module_conv_shapes(unet) | _module_conv_shapes(vae)


def test_build_runs_each_configuration_and_stops_when_asked():
    shapes = {(8, 4, 3, 3), (8, 8, 1, 1), (4, 4, 3, 3, 3)}
    assert kernel_warmup.build(shapes, torch.float32) == 2 + 1 + 2     # a wide kernel at strides 1 and 2
    stop = kernel_warmup.Warmup(None).stop
    stop.set()
    assert kernel_warmup.build(shapes, torch.float32, stop) == 0


def test_a_cpu_load_builds_them_and_a_cuda_one_does_not_start(tiny):
    work = resolve_request({"arch": "sd1", "name_or_path": tiny("sd1")}, {"prompt": "a"})
    holder = get_model_class("sd1")(work.model, device="cpu").load_model()
    try:
        shapes = kernel_warmup.model_conv_shapes(holder.model_config)
        wide = sum(1 for s in shapes if max(s[2:]) > 1)
        assert holder.kernels_built == len(shapes) + wide > 0
    finally:
        holder.unload()
    assert kernel_warmup.start(work.model, "cuda:0", torch.bfloat16).thread is None

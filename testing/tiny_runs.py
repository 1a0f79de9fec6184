"""A tiny model loaded and run as the file-format tests compare them: a holder from a `model`
request, every weight in storage of its own, and one seeded sample's last latents and output."""
import numpy as np
import torch

from testing.fixtures import input_image
from toolkit.config_modules import GenerateImageConfig, ModelConfig
from toolkit.models.base_model import get_model_class


def load(model: dict):
    mc = ModelConfig.from_dict(model)
    return get_model_class(mc.arch)(mc, device="cpu").load_model()


def realigned(holder):
    """Every weight in storage of its own. A folder's weights may stay where the file's memory map puts them
    (8-byte aligned), a file read here is copied (64-byte aligned), and CPU kernels pick their
    accumulation order by alignment: the same weights then differ in the last bit of a product."""
    for module in holder.loaded.values():
        if isinstance(module, torch.nn.Module):
            for t in list(module.parameters()) + list(module.buffers()):
                t.data = t.data.clone()
    return holder


def run(holder, tmp_path):
    """(the last step's latents, the output as an array) of the arch's tiny sample at seed 7."""
    spec = holder.spec
    sample = {**spec.tiny.sample, "prompt": "a red fox in the snow", "seed": 7}
    for name in spec.needed_inputs:
        sample[name] = input_image(tmp_path / f"{name}.png", 64, 64)
    gen = GenerateImageConfig.from_dict(sample, holder.model_config)
    seen = []
    out = holder.generate_single(gen, on_step=lambda i, n, t, lat, x0: seen.append(lat.detach().clone()))
    return seen[-1], np.asarray(out)


def run_message(request_id: str, model, sample: dict, path, stream: dict | None = None):
    """The worker's Run of one request, resolved as every entry point resolves it (toolkit/request.py)."""
    from extensions_built_in.inference_engine import messages as m
    from toolkit.request import resolve_request
    return m.Run((resolve_request(model, sample, stream, request_id=request_id).at(str(path)),))

"""Every (arch, format) the tiny-LoRA factory writes loads in the bare diffusers pipeline through
diffusers' own converters, every down/up pair of the file becomes an adapter layer (no "unexpected"
or "missing" keys reported), and the adapter changes the output; formats an arch's row does not
list are refused by the factory."""
import contextlib
import logging
import warnings

import pytest

from toolkit.models.arch import LORA_FORMATS
from toolkit.models.registry import ARCHS
from toolkit.models.tiny.loras import write_tiny_lora

ARCH_NAMES = ("sd1", "sdxl", "flux", "zimage", "wan21", "qwen_image", "krea2", "skyreels_v2", "skyreels_v2_df")
CASES = [(a, f) for a in ARCH_NAMES for f in ARCHS[a].lora.formats]
# library messages that mean a key of the file was not used ("No LoRA keys associated to <text encoder>"
# only says the file has none for it: the per-component layer counts below check that side)
BAD = ("unexpected keys", "missing keys", "not found in", "not been correctly", "incompatible")


@contextlib.contextmanager
def captured_warnings():
    records = []

    class Grab(logging.Handler):
        def emit(self, record):
            if record.levelno >= logging.WARNING:
                records.append(record.getMessage())

    handler, names = Grab(), ("diffusers", "peft", "transformers")
    for n in names:
        logging.getLogger(n).addHandler(handler)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            yield records
        finally:
            for n in names:
                logging.getLogger(n).removeHandler(handler)
    records.extend(str(w.message) for w in caught)


def _adapter_layers(pipe, adapter: str) -> dict:
    """role -> how many modules of that component carry the adapter."""
    import torch

    out = {}
    for role, module in pipe.components.items():
        if isinstance(module, torch.nn.Module):
            n = sum(1 for m in module.modules() if isinstance(getattr(m, "lora_A", None), torch.nn.ModuleDict)
                    and adapter in m.lora_A)
            if n:
                out[role] = n
    return out


def _run(pipe, arch):
    import torch

    kw = {"num_frames": 5} if ARCHS[arch].modality == "video" else {}
    with torch.no_grad():
        out = pipe(prompt="a red square", width=64, height=64, num_inference_steps=2, output_type="latent",
                   generator=torch.Generator().manual_seed(0), **kw)
    images = out[0]
    return (images if isinstance(images, torch.Tensor) else torch.as_tensor(images)).float()


@pytest.mark.parametrize("arch,fmt", CASES)
def test_loads_in_bare_pipeline(tiny, tmp_path, arch, fmt):
    from diffusers import DiffusionPipeline
    from safetensors import safe_open

    folder = tiny(arch)
    text_encoder = bool(ARCHS[arch].lora.text_encoders) and fmt != "comfyui"
    path = write_tiny_lora(arch, folder, tmp_path / f"{arch}_{fmt}.safetensors", fmt=fmt, text_encoder=text_encoder)
    with safe_open(str(path), "np") as f:
        keys = list(f.keys())
    downs = [k for k in keys if k.endswith((".lora_down.weight", ".lora_A.weight"))]
    assert downs and len(downs) == len([k for k in keys if k.endswith((".lora_up.weight", ".lora_B.weight"))])

    pipe = DiffusionPipeline.from_pretrained(folder, local_files_only=True)
    pipe.set_progress_bar_config(disable=True)
    before = _run(pipe, arch)
    with captured_warnings() as messages:
        pipe.load_lora_weights(str(path), adapter_name="tiny")
    unused = [m for m in messages if any(b in m.lower() for b in BAD) and not m.startswith("No LoRA keys")]
    assert not unused, unused
    layers = _adapter_layers(pipe, "tiny")
    # a fused kohya/ComfyUI layer (Flux's qkv) becomes several diffusers layers: at least one each
    assert sum(layers.values()) >= len(downs), (layers, len(downs))
    if text_encoder:
        assert set(ARCHS[arch].lora.text_encoders.values()) <= set(layers)
    after = _run(pipe, arch)
    assert before.shape == after.shape
    assert (after - before).abs().max() > 1e-4


@pytest.mark.parametrize("arch", ARCH_NAMES)
def test_factory_refuses_formats_the_arch_does_not_take(tiny, tmp_path, arch):
    for fmt in set(LORA_FORMATS) - set(ARCHS[arch].lora.formats):
        with pytest.raises(ValueError, match=fmt):
            write_tiny_lora(arch, tiny(arch), tmp_path / "x.safetensors", fmt=fmt)

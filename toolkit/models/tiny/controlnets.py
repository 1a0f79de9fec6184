"""Tiny random ControlNets for the tiny models, in the layouts people download them in.

    write_tiny_controlnet(arch, model_folder, out, layout="folder", seed=0, cls="ControlNetModel") -> Path

- folder: a diffusers folder (config.json + diffusion_pytorch_model.safetensors), as diffusers' repos ship;
- original: one .safetensors file in lllyasviel's layout under `control_model.` (A1111's models/ControlNet),
  written with the arch's Control row's `original` inverse;
- file: one .safetensors file in diffusers' names (what ComfyUI users download for SDXL, and the Flux, SD3,
  Qwen-Image ControlNets and SDXL Union as their repos ship them, renamed).

Built with the class's `from_unet` over the tiny model's UNet (`from_transformer` over a DiT's), then every weight drawn anew from a seed
(the zero convolutions included, so a control visibly changes the output).
"""
from __future__ import annotations

import os
import pathlib

LAYOUTS = ("folder", "original", "file")


def build(arch: str, model_folder, seed: int = 0, cls: str = "ControlNetModel", **config):
    import inspect

    from toolkit.models.arch import load_class

    control_cls = load_class(cls)
    if os.path.isdir(os.path.join(model_folder, "unet")):
        from diffusers import UNet2DConditionModel
        unet = UNet2DConditionModel.from_pretrained(model_folder, subfolder="unet", local_files_only=True)
        net = control_cls.from_unet(unet, load_weights_from_unet=False)
    else:               # a DiT's ControlNet: one block of each kind, the transformer's widths
        from diffusers import AutoModel
        dit = AutoModel.from_pretrained(model_folder, subfolder="transformer", local_files_only=True)
        takes = inspect.signature(control_cls.from_transformer).parameters
        if next(iter(takes)) != "transformer":      # Z-Image's: built from its config, the DiT's sizes
            own = inspect.signature(control_cls.__init__).parameters
            return _randomized(control_cls(**{**{k: v for k, v in dit.config.items() if k in own}, **config}), seed)
        want = dict(num_layers=1, num_single_layers=1, load_weights_from_transformer=False,
                    num_extra_conditioning_channels=0, attention_head_dim=dit.config.get("attention_head_dim"),
                    num_attention_heads=dit.config.get("num_attention_heads"))
        net = control_cls.from_transformer(dit, **{k: v for k, v in want.items() if k in takes})
    if config:          # its own sizes over the base's (a union model's transformer at the tiny width)
        base = {k: v for k, v in net.config.items() if not k.startswith("_")}
        net = control_cls.from_config({**base, **config})
    return _randomized(net, seed)


def _randomized(net, seed: int):
    import torch

    gen = torch.Generator("cpu").manual_seed(seed)
    with torch.no_grad():
        for name, p in net.named_parameters():
            # the control image's embedding (a stack of convolutions) keeps its input's scale: at 0.3 the image
            # would reach the residuals ~0.3**8 weaker than the biases, and any two images give one picture
            scale = 0.05 if "norm" in name else 1.7 if "cond_embedding" in name and name.endswith("weight") else 0.3
            base = 1.0 if "norm" in name and name.endswith("weight") else 0.0
            p.copy_(base + scale * torch.randn(p.shape, generator=gen) / max(1, p[0].numel()) ** 0.5)
    return net.eval()


def write_tiny_controlnet(arch: str, model_folder, out, layout: str = "folder", seed: int = 0,
                          cls: str = "ControlNetModel", **config) -> pathlib.Path:
    from safetensors.torch import save_file

    from toolkit.models.arch import load_object
    from toolkit.models.registry import get_arch

    if layout not in LAYOUTS:
        raise ValueError(f"layout {layout!r} (known: {', '.join(LAYOUTS)})")
    net = build(arch, model_folder, seed, cls, **config)
    out = pathlib.Path(out)
    if layout == "folder":
        net.save_pretrained(out, safe_serialization=True)
        return out
    state = {k: v.contiguous() for k, v in net.state_dict().items()}
    if layout == "original":
        row = next(c for c in get_arch(arch).controls if c.cls == cls)
        sf = next(f for f in row.files if f.original)
        state = {sf.prefixes[0] + k: v for k, v in load_object(sf.original)(state).items()}
    os.makedirs(out.parent, exist_ok=True)
    save_file(state, str(out))
    return out

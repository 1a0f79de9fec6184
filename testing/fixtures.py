"""Test fixtures built on the tiny models (toolkit/models/tiny): files no arch's recipe writes."""
from __future__ import annotations

import os
import pathlib

from toolkit.models.tiny.kit import seeded_rng


def make_tiny_lora(arch: str, model_folder: str | os.PathLike, out_file: str | os.PathLike, seed: int = 0,
                   rank: int = 4) -> pathlib.Path:
    """A random LoRA for the denoiser of a tiny model, saved with the pipeline's own
    `save_lora_weights` (diffusers' LoRA file format). Its weights are large enough to change
    the output visibly."""
    import torch
    from diffusers import DiffusionPipeline
    from peft import LoraConfig
    from peft.utils import get_peft_model_state_dict

    pipe = DiffusionPipeline.from_pretrained(str(model_folder), local_files_only=True)
    role = "unet" if hasattr(pipe, "unet") and pipe.unet is not None else "transformer"
    denoiser = getattr(pipe, role)
    targets = sorted({n.rsplit(".", 1)[-1] for n, m in denoiser.named_modules()
                      if isinstance(m, torch.nn.Linear) and n.rsplit(".", 1)[-1] in ("to_q", "to_k", "to_v")})
    with seeded_rng(seed, "lora"):
        denoiser.add_adapter(LoraConfig(r=rank, lora_alpha=rank, target_modules=targets, init_lora_weights=False))
    layers = get_peft_model_state_dict(denoiser)
    out = pathlib.Path(out_file)
    out.parent.mkdir(parents=True, exist_ok=True)
    type(pipe).save_lora_weights(str(out.parent), weight_name=out.name, **{f"{role}_lora_layers": layers})
    return out


def input_image(path: str | os.PathLike, width: int = 64, height: int = 64) -> str:
    """A deterministic RGB test picture (gradients and a square) for archs that take an input image."""
    import numpy as np
    from PIL import Image

    y, x = np.mgrid[0:height, 0:width]
    rgb = np.stack([x * 255 // max(width - 1, 1), y * 255 // max(height - 1, 1), (x + y) * 127 // max(width + height - 2, 1)],
                   axis=-1).astype(np.uint8)
    rgb[height // 4: height // 2, width // 4: width // 2] = (250, 40, 40)
    pathlib.Path(path).parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(rgb, "RGB").save(path)
    return str(path)


def input_mask(path: str | os.PathLike, width: int = 64, height: int = 64) -> str:
    """A deterministic inpaint mask: white (repaint) over the centre half, black (keep) around it."""
    import numpy as np
    from PIL import Image

    mask = np.zeros((height, width), np.uint8)
    mask[height // 4: height * 3 // 4, width // 4: width * 3 // 4] = 255
    pathlib.Path(path).parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(mask).save(path)
    return str(path)

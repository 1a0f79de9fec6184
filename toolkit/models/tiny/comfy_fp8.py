"""A tiny model's denoiser written as a ComfyUI scaled-FP8 single file, the layout users download.

    write_comfy_fp8(arch, folder, out_path, role="transformer", markers="metadata", every_linear=False) -> dict

Reads the denoiser of a tiny diffusers folder (float32), maps it to the original key layout with
the arch row's `SingleFile.original` (the inverse of diffusers' converter), and writes:
- every 2-D weight inside a block (`<stack>.<n>.`) as float8_e4m3fn with a scalar F32
  `weight_scale` = amax/448 (ComfyUI's quantizer), every other tensor BF16 (as real files do);
  `every_linear=True` quantizes every 2-D weight, the embedders and projections outside the blocks
  too, as some real files do (whose callers read `.weight.dtype`: formats/scaled_fp8.py);
- the per-layer options as the header's `_quantization_metadata` ({"format_version", "layers"}),
  or per-layer `comfy_quant` uint8 JSON tensors (markers="comfy_quant"); every fourth quantized
  layer is marked `full_precision_matrix_mult`, as real files mark some layers;
- a denoiser's keys under `model.diffusion_model.`; a text encoder's as ComfyUI's `text_encoders/`
  files have them (no prefix).
Before writing, the inverse is checked: diffusers' converter applied to the original-layout
float tensors must give back the diffusers state dict exactly, so the file is one that
`from_single_file` (and the engine's reader) maps back to the same model.
"""
import json
import os
import re

import torch

PREFIX = "model.diffusion_model."
BLOCK = re.compile(r"(^|\.)(blocks|layers|transformer_blocks|single_blocks|double_blocks|joint_blocks|"
                   r"noise_refiner|context_refiner|single_transformer_blocks|visual_transformer_blocks|"
                   r"text_transformer_blocks|double_stream_blocks|single_stream_blocks|double_layers|single_layers)\.\d+\.")
FPMM_EVERY = 4


def _original_layout(spec, state: dict) -> dict:
    from toolkit.models.arch import load_object
    if spec.single_file is not None and spec.single_file.original:
        return load_object(spec.single_file.original)(dict(state))
    return dict(state)            # no row: the file uses the library's own names (a text encoder)


def _prefix(spec) -> str:
    from toolkit.models.arch import DENOISER
    return PREFIX if spec.kind == DENOISER else ""


def _check_inverse(spec, original: dict, state: dict, config_dir: str):
    from toolkit.models.formats.converted_fp8 import with_config, load_converter
    convert = with_config(load_converter(spec.single_file.converter if spec.single_file else None), config_dir)
    prefix = _prefix(spec)
    back = convert({prefix + k: v.clone() for k, v in original.items()})
    back = {k.removeprefix(prefix): v for k, v in back.items()}
    if set(back) != set(state):
        raise ValueError(f"{spec.role}: the original layout does not convert back: missing "
                         f"{sorted(set(state) - set(back))[:3]}, extra {sorted(set(back) - set(state))[:3]}")
    bad = [k for k in state if not torch.equal(back[k].reshape(state[k].shape), state[k])]
    if bad:
        raise ValueError(f"{spec.role}: the original layout converts back to other values for {bad[:3]}")


def quantized_names(original: dict, every_linear: bool = False) -> list:
    return [k for k, t in original.items() if k.endswith(".weight") and t.ndim == 2
            and (every_linear or BLOCK.search(k))]


def write_comfy_fp8(arch: str, folder, out_path, role: str = "transformer", markers: str = "metadata",
                    every_linear: bool = False) -> dict:
    """Write the file; returns {"path", "quantized", "full_precision_matrix_mult", "tensors"}."""
    from safetensors import safe_open
    from safetensors.torch import save_file

    from toolkit.models.formats.scaled_fp8 import quantize_fp8
    from toolkit.models.registry import get_arch

    spec = next(c for c in get_arch(arch).components if c.role == role)
    sub = os.path.join(str(folder), spec.folder)
    files = sorted(f for f in os.listdir(sub) if f.endswith(".safetensors"))
    state = {}
    for name in files:
        with safe_open(os.path.join(sub, name), "pt") as f:
            state.update({k: f.get_tensor(k) for k in f.keys()})
    original = _original_layout(spec, state)
    _check_inverse(spec, original, state, sub)
    tensors, layers = {}, {}
    prefix = _prefix(spec)
    for i, key in enumerate(quantized_names(original, every_linear)):
        layer = key[:-len(".weight")]
        q, s = quantize_fp8(original[key])
        tensors[prefix + key], tensors[prefix + layer + ".weight_scale"] = q, s
        layers[prefix + layer] = {"format": "float8_e4m3fn", **({"full_precision_matrix_mult": True}
                                                                if i % FPMM_EVERY == FPMM_EVERY - 1 else {})}
    for key, t in original.items():
        if prefix + key not in tensors:
            tensors[prefix + key] = t.to(torch.bfloat16) if t.is_floating_point() else t
    metadata = {}
    if markers == "metadata":
        metadata["_quantization_metadata"] = json.dumps({"format_version": "1.0", "layers": layers}, sort_keys=True)
    elif markers == "comfy_quant":
        for layer, entry in layers.items():
            tensors[layer + ".comfy_quant"] = torch.tensor(list(json.dumps(entry).encode()), dtype=torch.uint8)
    else:
        raise ValueError(f"markers must be metadata or comfy_quant, got {markers!r}")
    out_path = str(out_path)
    os.makedirs(os.path.dirname(os.path.abspath(out_path)), exist_ok=True)
    tmp = out_path + ".tmp"
    save_file({k: v.contiguous() for k, v in sorted(tensors.items())}, tmp, metadata=metadata or None)
    os.replace(tmp, out_path)
    return {"path": out_path, "quantized": len(layers), "tensors": len(tensors),
            "full_precision_matrix_mult": sum(1 for e in layers.values() if e.get("full_precision_matrix_mult"))}

"""GGUF denoisers through the load funnel: the file's tensors read strictly, converted from the
model's original key layout, then handed to diffusers' GGUF support (`from_single_file` with
`GGUFQuantizationConfig`), which keeps every quantized weight packed and dequantizes it per call
to the compute dtype. The text encoders and VAE come from the arch's other files (the config
source: `extras_name_or_path` or a profile).

Strict: a tensor type diffusers cannot dequantize, a key the layout does not consume, a missing or
misshapen weight, or a file that is not GGUF is an error naming the file and the tensor.
"""
import os

from toolkit.models.formats.gguf_header import FLOAT_TYPES, GGUFHeaderError, describe, open_reader, quantized_types
from toolkit.models.formats.gguf_layouts import LayoutError, readable, to_diffusers


def read_tensors(path: str) -> dict:
    """{key (checkpoint prefix stripped): torch tensor | GGUFParameter}; raises GGUFHeaderError."""
    import numpy as np
    import torch
    from diffusers.quantizers.gguf.utils import GGUFParameter

    reader = open_reader(path)
    supported = set(quantized_types())
    info = describe(path)
    prefix = info["prefix"]
    out = {}
    for t in reader.tensors:
        kind = t.tensor_type.name
        if kind not in FLOAT_TYPES and kind not in supported:
            raise GGUFHeaderError(f"{path}: tensor {t.name} has GGML type {kind}, which cannot be dequantized "
                                  f"(readable: {', '.join(FLOAT_TYPES + tuple(sorted(supported)))})")
        data = np.array(t.data)                                    # a copy: the file is not kept mapped
        if kind == "BF16":
            tensor = torch.from_numpy(data.view(np.int16)).view(torch.bfloat16)
        else:
            tensor = torch.from_numpy(data)
        shape = _orig_shape(reader, t.name)
        if shape is not None:
            if kind not in FLOAT_TYPES:
                raise GGUFHeaderError(f"{path}: tensor {t.name} is quantized ({kind}) and reshaped to {shape}")
            tensor = tensor.reshape(shape)
        out[t.name[len(prefix):]] = tensor if kind in FLOAT_TYPES else GGUFParameter(tensor, quant_type=t.tensor_type)
    return out


def _orig_shape(reader, name):
    """ComfyUI-GGUF's record of a tensor's real shape (tensors of more than 4 dims are stored flat)."""
    field = reader.get_field(f"comfy.gguf.orig_shape.{name}")
    if field is None:
        return None
    return tuple(int(field.parts[i][0]) for i in field.data)


def read_for_funnel(path, load_cls, config_dir, converter, component, policy):
    """The format table's reader (formats/dispatch.py): the config is `config_dir`'s own config.json;
    the key conversion is this module's (gguf_layouts.py), not the arch row's converter."""
    return read_gguf_denoiser(load_cls, path, config_dir, config_dir, None, policy)


def read_gguf_denoiser(cls, path: str, config_dir: str, config_root: str, subfolder, policy):
    """A diffusers model of `cls` from a GGUF file; its config from `config_dir` (= `config_root`/`subfolder`)."""
    import torch
    from diffusers import GGUFQuantizationConfig

    name = getattr(cls, "_aitk_base", cls).__name__
    classes = readable()
    if name not in classes:
        raise LayoutError(f"{os.path.basename(path)}: GGUF files of {name} are not read "
                          f"(readable: {', '.join(sorted(classes))})")
    if policy.qtype:
        raise LayoutError(f"{os.path.basename(path)} is already quantized (GGUF); turn model.quantize off for it")
    info = describe(path)
    if info["cls"] != name and info["gguf_architecture"] is not None:   # (files without the key: by their keys)
        raise LayoutError(f"{os.path.basename(path)}: a {info['gguf_architecture']} GGUF file, not a {name}")
    tensors = read_tensors(path)
    config = cls.load_config(config_dir)
    with torch.device("meta"):
        meta = cls.from_config(config)
        shapes = {k: tuple(v.shape) for k, v in meta.state_dict().items()}
        linear = {f"{n}.weight" for n, m in meta.named_modules() if isinstance(m, torch.nn.Linear)}
    try:
        converted = to_diffusers(name, tensors, shapes, dict(config))
    except LayoutError as e:
        raise LayoutError(f"{os.path.basename(path)}: {e}") from None
    for key, t in converted.items():
        real = tuple(getattr(t, "quant_shape", t.shape))
        if real != shapes[key]:
            raise LayoutError(f"{os.path.basename(path)}: {key} has shape {real}, the model's config wants {shapes[key]}")
    # diffusers keeps only Linear weights packed; a quantized parameter used directly (SD3's pos_embed,
    # Wan's modulation tables) is dequantized here once, as ComfyUI-GGUF would on first use
    from diffusers.quantizers.gguf.utils import dequantize_gguf_tensor
    unpacked = [k for k, t in converted.items() if hasattr(t, "quant_type") and k not in linear]
    for key in unpacked:
        converted[key] = dequantize_gguf_tensor(converted[key]).float().reshape(shapes[key])
    model = cls.from_single_file(converted, config=config_root, subfolder=subfolder, local_files_only=True,
                                 quantization_config=GGUFQuantizationConfig(compute_dtype=policy.dtype),
                                 dtype=policy.dtype)
    model._aitk_keep_dtypes = True         # packed weights: the funnel must not cast the whole module
    model._aitk_gguf = {"qtype": info["qtype"], "tensor_types": info["tensor_types"], "dequantized_at_load": unpacked}
    return model

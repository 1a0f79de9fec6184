"""ComfyUI scaled-FP8 single files of any arch with a diffusers single-file converter.

`read_converted_fp8(path, load_cls, config_dir, converter, component, policy, dequantize)` reads a
file in the original (ComfyUI/LDM) key layout whose Linear weights are `float8_e4m3fn` with a
scalar F32 `weight_scale` (quant.py describes the markers), and returns `load_cls` built from the
diffusers config in `config_dir`, with the FP8 weights still FP8 (`ScaledFp8Linear`).

1. Audit (quant.audit): every FP8 weight has its scale, every option is known, every scale and
   marker belongs to a layer; anything else is an error naming the layer.
2. Key conversion by diffusers' own converter (`converter`, the arch row's `single_file`), which
   renames, splits fused q/k/v (chunk/split on dim 0) and swaps halves. To learn where each
   original tensor went, the converter first runs on tags: each tensor replaced by a tiny tensor
   of its row count holding the tensor's number. A converted tensor whose tags all name one FP8
   weight keeps FP8 with that weight's scale (a row slice of a per-tensor-scaled weight has the
   same scale). An FP8 weight that the converter merges with another tensor is dequantized
   before the real conversion (a single scale cannot describe the merge): reported, never silent.
   An original tensor the converter drops is reported as dropped (diffusers' own choice).
3. Build on the meta device, put a ScaledFp8Linear at each FP8 Linear of a repeated block (an
   FP8 embedder or projection outside the blocks is dequantized: model code reads its
   `.weight.dtype` as the compute dtype, formats/scaled_fp8.py), account for every key (missing,
   unexpected, shape: named errors), then read the data and load strict. A converter that takes
   the library config (the LDM UNet's) gets the config folder's.

`dequantize=True` (text encoders, as ComfyUI always multiplies them in full precision) turns every
FP8 weight into `policy.dtype` at load instead.
"""
import importlib

import torch
import torch.nn as nn

from toolkit.models.formats import quant
from toolkit.models.formats.comfy import (_account, _empty_weights, _fail, _finish, _header, _install_scaled_layers,
                                          _policy)
from toolkit.models.formats.scaled_fp8 import FP8_DTYPES, in_repeated_block, keep_fp32_names, storage_dtype

FORMAT_NAME = "comfy_scaled_fp8"
PREFIXES = ("model.diffusion_model.", "diffusion_model.", "")


def load_converter(name: str | None):
    """`name` is a function of diffusers.loaders.single_file_utils, or "module:function"; None means
    the file already has the library's key names."""
    if not name:
        return lambda checkpoint, **_: dict(checkpoint)
    module, _, func = name.rpartition(":")
    return getattr(importlib.import_module(module or "diffusers.loaders.single_file_utils"), func)


def with_config(convert, config_dir: str):
    """A converter that takes the library config (the LDM UNet's: diffusers' convert_ldm_unet_checkpoint)
    gets the one in `config_dir`."""
    import functools
    import inspect
    import json
    import os
    try:
        takes = "config" in inspect.signature(convert).parameters
    except (TypeError, ValueError):
        return convert
    if not takes:
        return convert
    with open(os.path.join(config_dir, "config.json")) as f:
        return functools.partial(convert, config=json.load(f))


def file_prefix(keys) -> str:
    """The checkpoint prefix every key shares (ComfyUI writes `model.diffusion_model.`), else ""."""
    keys = list(keys)
    for p in PREFIXES:
        if p and keys and all(k.startswith(p) for k in keys):
            return p
    return ""


def _tag(i: int, shape) -> torch.Tensor:
    """Tensor number i as a tag: one value per row (converters split/cat/chunk along dim 0)."""
    if len(shape) == 0:
        return torch.tensor(float(i))
    return torch.full((int(shape[0]),) + (1,) * (len(shape) - 1), float(i), dtype=torch.float64)


def trace(convert, shapes: dict) -> tuple[dict, list]:
    """Run the converter on tags. Returns ({target key: sorted source keys}, dropped source keys)."""
    names = list(shapes)
    try:
        out = convert({k: _tag(i, shapes[k]) for i, k in enumerate(names)})
    except Exception:          # a converter that needs full shapes: zero-stride tags of the real shapes
        out = convert({k: torch.tensor(float(i), dtype=torch.float64).expand(tuple(shapes[k]))
                       for i, k in enumerate(names)})
    sources, used = {}, set()
    for target, t in out.items():
        ids = sorted({int(v) for v in torch.unique(t.detach().reshape(-1)).tolist()})
        sources[target] = [names[i] for i in ids]
        used.update(ids)
    dropped = [names[i] for i in range(len(names)) if i not in used]
    return sources, dropped


def read_converted_fp8(path: str, load_cls, config_dir: str, converter: str | None, *, component: str,
                       policy=None, dequantize: bool = False, prefix: str | None = None) -> nn.Module:
    """`prefix`: the component's keys in an all-in-one checkpoint (None: the prefix all keys share)."""
    from toolkit.models.formats.file_view import sub_header
    policy = _policy(policy)
    header = _header(path, component)
    if prefix is None:
        prefix = file_prefix(header.keys())
    else:
        header = sub_header(header, prefix)
    manifest, problems = quant.parse_manifest(header, prefix)
    result = quant.audit(header, manifest, prefix=prefix)
    result.problems[:0] = problems
    result.raise_for(component)
    plain = quant.plain_keys(header, result, prefix=prefix)
    weights = {layer + ".weight": spec for layer, spec in result.quantized.items()}
    shapes = {k: header.tensors[prefix + k].shape for k in plain + list(weights)}
    convert = with_config(load_converter(converter), config_dir)
    try:
        sources, dropped = trace(convert, shapes)
    except Exception as e:
        _fail(component, quant.UNEXPECTED_KEY, "", f"diffusers' converter {converter} cannot convert {path}: "
              f"{type(e).__name__}: {e}")
    merged = sorted({s for srcs in sources.values() if len(srcs) > 1 for s in srcs if s in weights})
    dropped_fp8 = [k for k in dropped if k in weights]
    if dropped_fp8:
        _fail(component, quant.UNEXPECTED_KEY, dropped_fp8[0][:-len(".weight")],
              f"{dropped_fp8[0]} is an FP8 weight that diffusers' converter {converter} does not use")

    cls = load_cls            # the funnel's mixed class (formats/dispatch.py)
    with _empty_weights():
        model = cls.from_config(cls.load_config(config_dir)) if hasattr(cls, "load_config") else \
            cls(cls.config_class.from_pretrained(config_dir))
    modules = dict(model.named_modules())
    fp8_targets, names = {}, {}
    for target, srcs in sources.items():
        names[target] = srcs[0] if len(srcs) == 1 else "+".join(srcs)
        src = srcs[0]
        if dequantize or len(srcs) != 1 or src not in weights or src in merged:
            continue
        layer = target[:-len(".weight")] if target.endswith(".weight") else None
        if layer is not None and isinstance(modules.get(layer), nn.Linear):
            fp8_targets[layer] = src[:-len(".weight")]
    # an FP8 weight that also feeds a tensor other than those Linears is dequantized everywhere
    shared = {srcs[0] for target, srcs in sources.items() if len(srcs) == 1 and srcs[0] in weights
              and target.removesuffix(".weight") not in fp8_targets}
    # FP8 stays in the repeated blocks; embedders and projections around them are dequantized, as
    # model code reads their `.weight.dtype` for the compute dtype (formats/scaled_fp8.py)
    fp8_targets = {layer: src for layer, src in fp8_targets.items()
                   if src + ".weight" not in shared and in_repeated_block(model, layer)}
    install, target_shapes = {}, {}
    for layer, src_layer in fp8_targets.items():
        spec = weights[src_layer + ".weight"]
        has_input = src_layer + ".input_scale" in result.consumed
        install[layer] = (spec, (layer + ".bias") in sources, has_input, policy.dtype)
        names.update({layer + ".weight_scale": src_layer + ".weight_scale"})
        target_shapes[layer + ".weight_scale"] = ()
        if has_input:
            names[layer + ".input_scale"] = src_layer + ".input_scale"
            target_shapes[layer + ".input_scale"] = ()
    _install_scaled_layers(model, install, component, type(model).__name__, fp8_targets)
    # the real conversion: FP8 weights that are merged, dequantized, or not Linear become floats
    keep_fp8 = {src + ".weight" for src in fp8_targets.values()}
    from safetensors import safe_open
    checkpoint = {}
    with safe_open(path, framework="pt", device="cpu") as f:
        for key in shapes:
            t = f.get_tensor(prefix + key)
            if key in weights and key not in keep_fp8:
                t = t.to(torch.float32) * f.get_tensor(prefix + key[:-len(".weight")] + ".weight_scale").float()
            checkpoint[key] = t
        scales = {}
        for layer, src_layer in fp8_targets.items():
            scales[layer + ".weight_scale"] = f.get_tensor(prefix + src_layer + ".weight_scale").float().reshape(())
            if layer + ".input_scale" in target_shapes:
                scales[layer + ".input_scale"] = f.get_tensor(prefix + src_layer + ".input_scale").float().reshape(())
    state = convert(checkpoint)
    del checkpoint
    expected = model.state_dict()
    for k, t in state.items():
        target_shapes[k] = tuple(t.shape) if k not in expected or t.numel() != expected[k].numel() \
            else tuple(expected[k].shape)
    _account(model, target_shapes, {k: names.get(k, k) for k in target_shapes}, component, type(model).__name__)
    keep = keep_fp32_names(model)
    owners = {f"{m}.{n}" if m else n: sub for m, sub in model.named_modules()
              for n in list(sub._parameters) + list(sub._buffers)}
    for k, t in list(state.items()):
        t = t.reshape(expected[k].shape)
        if t.dtype not in FP8_DTYPES:
            t = t.to(storage_dtype(k, t, policy.dtype, keep, owners.get(k)))
        state[k] = t.contiguous()
    state.update(scales)
    report = {"format": FORMAT_NAME, "component": component, "path": path, "prefix": prefix,
              "converter": converter or "(none: library key names)",
              "quantized_layers": len(result.quantized), "fp8_resident_layers": len(fp8_targets),
              "dequantized_layers": sorted(set(weights) - keep_fp8),
              "merged_by_converter": merged, "dropped_by_converter": dropped,
              "full_precision_matrix_mult": sum(1 for s in result.quantized.values() if s.full_precision_matrix_mult),
              "manifest_sources": list(manifest.sources)}
    return _finish(model, state, component, report)


def is_comfy_quantized(header) -> bool:
    """Whether a safetensors header carries ComfyUI quantization: `_quantization_metadata`, a
    `comfy_quant` marker, or FP8/foreign-quant tensors (which the audit then judges)."""
    if quant.METADATA_KEY in header.metadata:
        return True
    return any(k.endswith(quant.MARKER_SUFFIX) or k.endswith(quant.FOREIGN_QUANT_SUFFIXES) or k == "scaled_fp8"
               or k.endswith(quant.LEGACY_SUFFIXES) or info.dtype in ("F8_E4M3", "F8_E5M2")
               for k, info in header.tensors.items())


def is_comfy_file(path: str) -> bool:
    """The dispatch's detector: a .safetensors file whose header carries ComfyUI quantization."""
    from toolkit.models.formats.safetensors_header import HeaderError, read_header
    if not path.endswith(".safetensors"):
        return False
    try:
        return is_comfy_quantized(read_header(path))
    except (HeaderError, OSError):
        return False


def read_for_funnel(path, load_cls, config_dir, converter, component, policy):
    """The dispatch's reader. Text encoders (transformers models) are always dequantized at load, as
    ComfyUI multiplies them in full precision."""
    from transformers import PreTrainedModel
    return read_converted_fp8(path, load_cls, config_dir, converter, component=component, policy=policy,
                              dequantize=issubclass(load_cls, PreTrainedModel))

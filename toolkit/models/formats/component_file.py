"""Read one component from the files people have: an all-in-one checkpoint or a component file, in
its original key layout, with its config derived from the file (its row's `SingleFile.config`), no
config folder, nothing downloaded.

    read_component(path, single_file, prefix, load_cls, *, role, policy) -> module

1. The header (checked: safetensors_header.check_file) and the component's view under `prefix`.
2. The config from the view (the row's config function: shapes, key counts, the known configs).
3. The module built on the meta device from that config.
4. The tensors under `prefix`, renamed by the row's converter to the library's names, aligned with
   the module's own names (transformers 5 drops `text_model.` where a file keeps it, and the like),
   every key accounted for (a missing or unexpected key, or a shape that differs, is an error naming
   the component and the key), then loaded strict. FP8 storage without scales (ComfyUI's older
   `fp8_e4m3fn` checkpoints) becomes the compute dtype; ComfyUI scaled FP8 goes to its reader
   (formats/converted_fp8.py) with the derived config; the older `scaled_fp8` layout (`scale_weight`)
   of a text encoder is dequantized here (formats/quant.py), as ComfyUI computes text encoders.
   Tensors the converter gives under two names (a tied embedding) stay one tensor.
"""
import inspect
import json
import os
import tempfile

from toolkit.models.formats.file_view import FileKindError, derive
from toolkit.models.formats.scaled_fp8 import FP8_DTYPES, keep_fp32_names, storage_dtype


def build_empty(load_cls, config: dict):
    """The module on the meta device (buffers real), from a library config dict."""
    from accelerate import init_empty_weights
    with init_empty_weights(include_buffers=False):
        if hasattr(load_cls, "from_config"):
            return load_cls.from_config(dict(config))
        return load_cls(load_cls.config_class(**config))


def convert(single_file, state: dict, config: dict) -> dict:
    """The row's converter on the component's tensors (keys with the prefix cut)."""
    from toolkit.models.formats.converted_fp8 import load_converter
    fn = load_converter(single_file.converter)
    takes_config = "config" in inspect.signature(fn).parameters
    return fn(state, config=config) if takes_config else fn(state)


def align(state: dict, expected) -> dict:
    """`state`'s keys as the module names them, where the two differ by a leading segment (a file's
    `text_model.`, `model.` or `transformer.` that the library class does or does not keep)."""
    expected = set(expected)
    if set(state) <= expected:
        return state
    best, best_hits = state, sum(k in expected for k in state)
    heads = {k.split(".", 1)[0] + "." for k in expected if "." in k} | {""}
    for cut in {k.split(".", 1)[0] + "." for k in state if "." in k} | {""}:
        for add in heads:
            moved = {add + (k[len(cut):] if cut and k.startswith(cut) else k): v for k, v in state.items()}
            hits = sum(k in expected for k in moved)
            if hits > best_hits:
                best, best_hits = moved, hits
    return best


def read_component(path: str, single_file, prefix: str, load_cls, *, role: str, policy=None):
    from safetensors import safe_open

    from toolkit.models.formats.comfy import _finish
    from toolkit.models.formats.converted_fp8 import is_comfy_quantized
    from toolkit.models.formats.safetensors_header import check_file
    from toolkit.models.v2.policy import LoadPolicy

    policy = policy or LoadPolicy()
    header = check_file(path)
    base = os.path.basename(path)
    try:
        fc = derive(header, single_file, prefix)
    except FileKindError as e:
        raise FileKindError(f"{role}: {base}: {e}") from None
    names = [k for k in header.tensors if k.startswith(prefix)]
    legacy = _legacy_text_encoder(load_cls, [k[len(prefix):] for k in names])
    if not legacy and _scaled(header, names, is_comfy_quantized):
        return _read_scaled(path, single_file, prefix, load_cls, fc, role, policy)
    if legacy:
        from toolkit.models.formats import quant
        problems = quant.legacy_problems(header, prefix)
        if problems:
            raise quant.CheckpointFormatError(f"{role}: {base}", problems)
    model = build_empty(load_cls, fc.config)
    expected = model.state_dict()
    with safe_open(path, framework="pt", device="cpu") as f:
        state = {k[len(prefix):]: f.get_tensor(k) for k in names}
    dequantized = []
    if legacy:
        state, dequantized = quant.dequantize_legacy(state)
    state = align(convert(single_file, state, fc.config), expected)
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    if missing or unexpected:
        what = [f"missing {k}" for k in missing[:2]] + [f"unexpected {k}" for k in unexpected[:2]]
        raise FileKindError(f"{role}: {base}: {len(missing)} missing and {len(unexpected)} unexpected weights "
                            f"for {load_cls.__name__} ({', '.join(what)})")
    keep = keep_fp32_names(model)
    out, done = {}, {}
    for k, t in state.items():
        if id(t) in done:               # a tied tensor under its second name: the same converted tensor
            out[k] = done[id(t)]
            continue
        want = expected[k]
        if tuple(t.shape) != tuple(want.shape):
            if t.numel() != want.numel():
                raise FileKindError(f"{role}: {base}: {k} is {tuple(t.shape)}, {load_cls.__name__} takes "
                                    f"{tuple(want.shape)}")
            t = t.reshape(want.shape)
        if t.dtype in FP8_DTYPES:       # FP8 storage without a scale (ComfyUI's plain fp8 files): the weights
            t = t.to(policy.dtype)
        out[k] = done[id(state[k])] = t.to(storage_dtype(k, t, policy.dtype, keep)).contiguous()
    report = {"format": "original", "component": role, "path": path, "prefix": prefix,
              "kind": single_file.kind, "known_config": fc.known, "variant": fc.variant, "notes": list(fc.notes)}
    if legacy:
        report.update(format="comfy_scaled_fp8_legacy", dequantized_layers=dequantized)
    model = _finish(model, out, role, report)
    model._aitk_file_config = fc
    return model


def _legacy_text_encoder(load_cls, keys) -> bool:
    """A transformers model in ComfyUI's older scaled_fp8 layout: dequantized at load."""
    from toolkit.models.formats import quant
    if not quant.is_legacy_scaled(keys):
        return False
    from transformers import PreTrainedModel
    return isinstance(load_cls, type) and issubclass(load_cls, PreTrainedModel)


def _scaled(header, names, is_comfy_quantized) -> bool:
    """ComfyUI scaled FP8 (its markers or scales), not plain FP8 storage."""
    from toolkit.models.formats import quant
    sub = type(header)(header.path, {k: header.tensors[k] for k in names}, header.metadata, header.data_start,
                       header.file_size)
    if quant.METADATA_KEY in header.metadata:
        return True
    return any(k.endswith(quant.SCALE_SUFFIXES + quant.LEGACY_SUFFIXES + (quant.MARKER_SUFFIX,)) or k == "scaled_fp8"
               for k in sub.tensors) and is_comfy_quantized(sub)


def _read_scaled(path, single_file, prefix, load_cls, fc, role, policy):
    """ComfyUI scaled FP8: formats/converted_fp8.py with the derived config, in a config folder."""
    from toolkit.models.formats.converted_fp8 import read_converted_fp8
    from transformers import PreTrainedModel
    with tempfile.TemporaryDirectory(prefix="aitk_config_") as folder:
        write_config(load_cls, fc.config, folder)
        model = read_converted_fp8(path, load_cls, folder, single_file.converter, component=role, policy=policy,
                                   dequantize=issubclass(load_cls, PreTrainedModel), prefix=prefix)
    model._aitk_file_config = fc
    return model


def write_config(load_cls, config: dict, folder: str):
    """The library's config.json for `config` in `folder` (what its from_pretrained reads)."""
    if hasattr(load_cls, "config_class") and not hasattr(load_cls, "from_config"):
        load_cls.config_class(**config).save_pretrained(folder)
        return
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump({"_class_name": getattr(load_cls, "_aitk_base", load_cls).__name__, **config}, f)

"""Which quantized single-file format a file is in, and its reader: a table of formats.

The funnel (v2/mixin.py) asks `detect_format(path)` for a single file that has no arch-specific
reader; a format that recognises the file reads it with the arch row's converter and the config
folder. Each row is (name, detect(path) -> bool, read(path, load_cls, config_dir, converter,
component, policy) -> module). Text encoders (transformers models) are always dequantized at load,
as ComfyUI multiplies them in full precision.
"""
from dataclasses import dataclass


@dataclass(frozen=True)
class FileFormat:
    name: str
    detect: object
    read: object


def _is_comfy_fp8(path: str) -> bool:
    if not path.endswith(".safetensors"):
        return False
    from toolkit.models.formats.converted_fp8 import is_comfy_quantized
    from toolkit.models.formats.safetensors_header import HeaderError, read_header
    try:
        return is_comfy_quantized(read_header(path))
    except (HeaderError, OSError):
        return False


def _read_comfy_fp8(path, load_cls, config_dir, converter, component, policy):
    from toolkit.models.formats.converted_fp8 import read_converted_fp8
    return read_converted_fp8(path, load_cls, config_dir, converter, component=component, policy=policy,
                              dequantize=_is_transformers(load_cls))


def _is_transformers(cls) -> bool:
    from transformers import PreTrainedModel
    return issubclass(cls, PreTrainedModel)


FORMATS = [
    FileFormat("comfy_scaled_fp8", _is_comfy_fp8, _read_comfy_fp8),
]


def detect_format(path: str) -> str | None:
    """The name of the quantized format `path` is stored in, or None (a plain file)."""
    return next((f.name for f in FORMATS if f.detect(path)), None)


def read_format(name: str, path: str, load_cls, config_dir: str, converter, *, component: str, policy):
    """Read `path` in format `name`; the config is `config_dir`'s, or its `component` subfolder's (a
    component given as a file takes its config from the model folder's folder of that role)."""
    import os
    if not os.path.isfile(os.path.join(config_dir, "config.json")) and \
            os.path.isfile(os.path.join(config_dir, component, "config.json")):
        config_dir = os.path.join(config_dir, component)
    fmt = next(f for f in FORMATS if f.name == name)
    return fmt.read(path, load_cls, config_dir, converter, component, policy)

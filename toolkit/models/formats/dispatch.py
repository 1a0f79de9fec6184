"""Which quantized single-file format a file is in, and its reader: a table of formats.

The funnel (v2/mixin.py) asks `detect_format(path)` for a single file that has no arch-specific
reader; a format that recognises the file reads it with the arch row's converter and the config
folder. Each row names, as "module:function" strings (imported on use, so the funnel imports no
reader): detect(path) -> bool and read(path, load_cls, config_dir, converter, component, policy)
-> module, and optionally name_of(path) -> the file's own format name ("gguf-Q4_K": a quantization
joins the pool identity), which starts with the row's name and a dash.
"""
import importlib
import os
from dataclasses import dataclass


@dataclass(frozen=True)
class FileFormat:
    name: str
    detect: str
    read: str
    name_of: str | None = None


FORMATS = [
    FileFormat("comfy_scaled_fp8", "toolkit.models.formats.converted_fp8:is_comfy_file",
               "toolkit.models.formats.converted_fp8:read_for_funnel"),
    FileFormat("gguf", "toolkit.models.formats.gguf_header:is_gguf_file",
               "toolkit.models.formats.gguf:read_for_funnel", name_of="toolkit.models.formats.gguf_header:format_name"),
]


def _load(ref: str):
    module, _, name = ref.partition(":")
    return getattr(importlib.import_module(module), name)


def detect_format(path: str) -> str | None:
    """The name of the quantized format `path` is stored in, or None (a plain file). A ValueError
    (naming the file) when a format recognises it but cannot parse it."""
    for f in FORMATS:
        if _load(f.detect)(path):
            return _load(f.name_of)(path) if f.name_of else f.name
    return None


def read_format(name: str, path: str, load_cls, config_dir: str, converter, *, component: str, policy):
    """Read `path` in format `name`; the config is `config_dir`'s, or its `component` subfolder's (a
    component given as a file takes its config from the model folder's folder of that role)."""
    if not os.path.isfile(os.path.join(config_dir, "config.json")) and \
            os.path.isfile(os.path.join(config_dir, component, "config.json")):
        config_dir = os.path.join(config_dir, component)
    fmt = next(f for f in FORMATS if name == f.name or name.startswith(f"{f.name}-"))
    return _load(fmt.read)(path, load_cls, config_dir, converter, component, policy)

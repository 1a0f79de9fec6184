"""The safetensors files a request names itself, checked from their headers before it is queued: a
malformed one is a ConfigError naming the request key and the file's basename (the API never says
where a file lies), a 422 instead of a request that fails in the worker. Plain file I/O, no torch.

Files are checked when a request names them directly: `name_or_path` or `extras_name_or_path` as a
single file, `components.<role>` (LoRAs: lora_headers.check_lora, the same check). Files inside a
folder or a hub snapshot are the load funnel's to check, when the worker opens them
(toolkit/models/v2/mixin.py). Other files (GGUF, a tokenizer file) are left to their readers.
"""
import os

from toolkit.errors import ConfigError
from toolkit.models.formats.safetensors_header import HeaderError, check_file, is_safetensors_name


def named_files(mc) -> list:
    """(request key, path) of each safetensors file `mc` names directly."""
    named = [("model.name_or_path", mc.name_or_path), ("model.extras_name_or_path", mc.extras_name_or_path)]
    named += [(f"model.components.{role}", path) for role, path in (mc.components or {}).items()]
    out = []
    for key, value in named:
        if isinstance(value, str) and value and is_safetensors_name(value):
            path = os.path.expanduser(value)
            if os.path.isfile(path):
                out.append((key, path))
    return out


def check_named_files(mc):
    """Each safetensors file `mc` names, well formed by its header (safetensors_header.check_file)."""
    for key, path in named_files(mc):
        try:
            check_file(path)
        except HeaderError as e:
            raise ConfigError(key, e.named()) from None

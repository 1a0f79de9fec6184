"""The models of GET /library the engine itself offers, besides the files it finds: the tiny models
(`tiny:<arch>`, built offline on first use: toolkit/models/tiny) and the one the worker holds loaded.
No torch: the tiny cache is read from its markers, the loaded model from the engine's last State.

    tiny_entries(root=None) -> [Entry…]      # source "tiny", one per arch with a tiny instance
    loaded_entry(model_config) -> Entry      # source "loaded"
"""
import dataclasses
import os

from toolkit.models import tiny


def _bytes(folder: str) -> int:
    return sum(os.path.getsize(os.path.join(r, f)) for r, _d, fs in os.walk(folder) for f in fs)


def tiny_entries(root: str | None = None) -> list:
    """Every tiny model: always usable (built on first use, a few MB, in about a second). `built`: its
    folder is in the tiny cache already (then `path` and `bytes` are the folder's)."""
    from toolkit.models.registry import ARCHS
    base = root or str(tiny.default_cache_root())
    out = []
    for arch in tiny.tiny_archs():
        folder = os.path.join(base, f"{arch}-seed0")
        built = os.path.isfile(os.path.join(folder, tiny.MARKER_NAME))
        name = f"{tiny.PREFIX}{arch}"
        out.append({"name": name, "source": "tiny", "path": folder if built else None, "repo": None,
                    "kind": "pipeline", "arch": arch, "variant": ARCHS[arch].default_variant, "role": None,
                    "dtype": "f32", "format": "f32 diffusers (random weights)", "bytes": _bytes(folder) if built else 0,
                    "built": built, "complete": True, "missing": [], "model": {"arch": arch, "name_or_path": name}})
    return out


def request_model(mc) -> dict:
    """A ModelConfig as the `model` of a request: the fields that differ from their defaults (the tiny
    name as asked, not its cache folder)."""
    out = {}
    for f in dataclasses.fields(mc):
        v = getattr(mc, f.name)
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        if f.name == "arch" or v != default:
            out[f.name] = [dataclasses.asdict(x) for x in v] if f.name == "loras" else v
    return out


def loaded_entry(mc) -> dict:
    """The model the worker holds (its config as the request named it: `tiny:<arch>` unresolved)."""
    from toolkit.file_settings import display_name
    model = request_model(mc)
    name = mc.profile or display_name(mc.name_or_path or "") or mc.arch
    return {"name": name, "source": "loaded", "path": None, "repo": None, "kind": "pipeline", "arch": mc.arch,
            "variant": mc.variant, "role": None, "dtype": None if mc.dtype == "auto" else mc.dtype, "format": None,
            "bytes": 0, "complete": True, "missing": [], "model": {"profile": mc.profile} if mc.profile else model}

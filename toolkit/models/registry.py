"""The arch registry: every module in toolkit/models/archs/ is one arch, named by its file.

A lazy table of module paths (as vLLM's model registry keeps one): listing the names reads the
folder, and an arch's module is imported the first time its row is asked for. Arch modules are
plain data plus a holder class and import no library at module level, so this stays usable
without torch. Adding an arch is adding one file there (docs/archs.md, "Adding an arch").
"""
import importlib
import os
import pkgutil
from collections.abc import Mapping

from toolkit.models.arch import ArchSpec

PACKAGE = "toolkit.models.archs"
_FOLDER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "archs")


def _module_table() -> dict:
    return {m.name: f"{PACKAGE}.{m.name}" for m in sorted(pkgutil.iter_modules([_FOLDER]), key=lambda m: m.name)
            if not m.name.startswith("_")}


class _Registry(Mapping):
    """name -> ArchSpec, importing each arch module on first access."""

    def __init__(self):
        self.modules = _module_table()
        self._specs: dict = {}

    def __getitem__(self, name: str) -> ArchSpec:
        spec = self._specs.get(name)
        if spec is None:
            if name not in self.modules:
                raise KeyError(name)
            spec = importlib.import_module(self.modules[name]).SPEC
            if spec.name != name:
                raise RuntimeError(f"{self.modules[name]} declares arch {spec.name!r}: an arch is named by its file")
            self._specs[name] = spec
        return spec

    def __iter__(self):
        return iter(self.modules)

    def __len__(self) -> int:
        return len(self.modules)

    def __contains__(self, name) -> bool:
        return name in self.modules


ARCHS = _Registry()


def get_arch(name: str) -> ArchSpec:
    try:
        return ARCHS[name]
    except KeyError:
        raise KeyError(f"unknown arch {name!r} (known: {', '.join(sorted(ARCHS))})") from None

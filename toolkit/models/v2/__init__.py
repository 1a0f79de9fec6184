"""The v2 load API: `aitk(cls).load(...)` (mixin.py), LoadPolicy (policy.py), the pool (pool.py).

Names are resolved on first use (PEP 562): the engine's HTTP process imports the torch-free parts
(sources.py, identity.py) through this package, and must not pay for torch with them.
"""
_LAZY = {"OstrisModelMixin": "mixin", "aitk": "mixin", "get_load_interceptor": "mixin",
         "set_load_interceptor": "mixin", "LoadPolicy": "policy"}

__all__ = list(_LAZY)


def __getattr__(name):
    if name in _LAZY:
        import importlib
        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

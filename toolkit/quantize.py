"""Weight quantization with optimum-quanto, applied by the load funnel."""
import torch


def _qtypes():
    from optimum.quanto import qfloat8, qfloat8_e4m3fn, qfloat8_e5m2, qint2, qint4, qint8
    return {"qfloat8": qfloat8, "qfloat8_e4m3fn": qfloat8_e4m3fn, "qfloat8_e5m2": qfloat8_e5m2,
            "qint8": qint8, "qint4": qint4, "qint2": qint2}


def quantize_module(module: torch.nn.Module, qtype: str) -> torch.nn.Module:
    """Quantize the module's Linear weights in place to `qtype` and freeze them (weights stored quantized)."""
    from optimum.quanto import freeze, quantize

    qtypes = _qtypes()
    if qtype not in qtypes:
        raise ValueError(f"unknown qtype {qtype!r} (known: {', '.join(qtypes)})")
    # quanto walks submodules; embeddings and norms stay in the module's dtype.
    quantize(module, weights=qtypes[qtype])
    freeze(module)
    return module


def is_quantized(module: torch.nn.Module) -> bool:
    from optimum.quanto import QModuleMixin
    return any(isinstance(m, QModuleMixin) for m in module.modules())

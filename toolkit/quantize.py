"""Weight quantization with optimum-quanto, applied by the load funnel."""
import torch


_FP8 = tuple(getattr(torch, n) for n in ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz")
             if hasattr(torch, n))


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
    # quanto walks submodules; embeddings and norms stay in the module's dtype, and layers already
    # stored quantized (scaled FP8 Linears) are left as they are.
    stored = [name for name, m in module.named_modules()
              if isinstance(getattr(m, "weight", None), torch.Tensor) and m.weight.dtype in _FP8]
    quantize(module, weights=qtypes[qtype], exclude=stored or None)
    freeze(module)
    return module

"""The ComfyUI quantization manifest, normalised and audited. Pure Python: no torch.

ComfyUI marks quantized layers in one of two equivalent ways (comfy/quant_ops.py, comfy/utils.py):
- file-level safetensors metadata `_quantization_metadata` holding JSON
  {"format_version": "1.0", "layers": {"<layer>": {"format": "float8_e4m3fn", ...}}}, layer names
  being full state-dict keys without the trailing `.weight` (including any checkpoint prefix);
- a per-layer `<layer>.comfy_quant` uint8 tensor holding the same per-layer JSON as bytes.
Both are normalised into one `QuantizationManifest` keyed by layer name with the checkpoint prefix
stripped. When a file carries both, they must agree layer for layer.

Supported: exactly one format, "float8_e4m3fn": `<layer>.weight` stored F8_E4M3 (2-D, a Linear),
`<layer>.weight_scale` a scalar F32 (dequantized weight = weight * weight_scale), an optional scalar
F32 `<layer>.input_scale`, an optional ordinary-float bias, and the only per-layer option
`full_precision_matrix_mult` (compute the product in the activation dtype, never in FP8).

Everything else is rejected by `audit`, each problem naming the layer: other formats (int8_tensorwise,
nvfp4, mxfp8, asym_w4a8_int8, float8_e5m2, ...), FP8 convolutions, quantized biases, integer or
packed storage (INT8/INT4/FP4/uint8), missing or non-scalar scales, and metadata that disagrees
with the tensors (a manifest layer whose weight is not F8, an F8 tensor or a scale without a
manifest entry, `comfy_quant` bytes that differ from the file metadata). Rejecting is safer than
producing plausible but wrong images: an ignored or misread scale keeps every shape valid.
"""
import json
from dataclasses import dataclass, field

from toolkit.models.formats.safetensors_header import (FLOAT_DTYPES, FP8_DTYPES, INTEGER_DTYPES, SUBBYTE_DTYPES,
                                                       SafetensorsHeader, read_raw_bytes)

SUPPORTED_FORMAT = "float8_e4m3fn"
SUPPORTED_OPTIONS = ("format", "full_precision_matrix_mult")
METADATA_KEY = "_quantization_metadata"
METADATA_TOP_KEYS = ("layers", "format_version")
MARKER_SUFFIX = ".comfy_quant"
# per-layer tensors that belong to the quantization, not to the module
SCALE_SUFFIXES = (".weight_scale", ".input_scale")
FOREIGN_QUANT_SUFFIXES = (".weight_scale_2", ".bias_scale", ".weight_zero_point", ".input_zero_point",
                          ".weight_global_scale", ".block_scale", ".convrot")
LEGACY_SUFFIXES = (".scale_weight", ".scale_input")     # ComfyUI's older "scaled_fp8" layout

# Formats of the Krea 2 release (and others) refused by name: their exact definitions (block sizes,
# scale dtypes and swizzled layouts, the rotation of convrot) live in ComfyUI's comfy_kitchen kernels and
# could not be established from public sources here, so they are never guessed (docs/weight_formats.md).
_UNESTABLISHED = "its exact layout could not be established from public sources, so it is not read"
REFUSED_FORMATS = {"nvfp4": "NVFP4: " + _UNESTABLISHED, "mxfp8": "MXFP8: " + _UNESTABLISHED,
                   "int8_tensorwise": "INT8 (Krea 2 int8_convrot): " + _UNESTABLISHED,
                   "int8_convrot": "INT8 convrot: " + _UNESTABLISHED}

STORAGE_NAMES = {"I8": "INT8", "U8": "UINT8 (packed INT4/FP4)", "I16": "INT16", "U16": "UINT16", "I32": "INT32",
                 "U32": "UINT32 (packed)", "I64": "INT64", "U64": "UINT64", "BOOL": "BOOL", "F4": "FP4",
                 "F6_E2M3": "FP6", "F6_E3M2": "FP6", "F8_E8M0": "FP8 E8M0 block scales"}

# problem kinds (Problem.kind)
UNSUPPORTED_FORMAT = "unsupported_format"
UNSUPPORTED_OPTION = "unsupported_option"
UNSUPPORTED_STORAGE = "unsupported_storage"
MISSING_SCALE = "missing_scale"
NON_SCALAR_SCALE = "non_scalar_scale"
BAD_SCALE_DTYPE = "bad_scale_dtype"
FP8_CONVOLUTION = "fp8_convolution"
UNSUPPORTED_SHAPE = "unsupported_shape"
QUANTIZED_BIAS = "quantized_bias"
INCONSISTENT_METADATA = "inconsistent_metadata"
MALFORMED_METADATA = "malformed_metadata"
LEGACY_FORMAT = "legacy_format"
UNEXPECTED_KEY = "unexpected_key"
MISSING_KEY = "missing_key"


@dataclass(frozen=True)
class QuantizedLayerSpec:
    """Quantization settings for one layer."""
    format: str
    full_precision_matrix_mult: bool = False
    options: tuple = ()          # any other (key, json) pairs: a float8_e4m3fn layer must have none

    @property
    def supported(self) -> bool:
        return self.format == SUPPORTED_FORMAT and not self.options


@dataclass(frozen=True)
class QuantizationManifest:
    """Quantization settings by layer name (checkpoint prefix stripped)."""
    layers: dict = field(default_factory=dict)
    sources: tuple = ()          # which markers the file had: "metadata", "comfy_quant"

    def formats(self) -> dict:
        counts = {}
        for spec in self.layers.values():
            counts[spec.format] = counts.get(spec.format, 0) + 1
        return dict(sorted(counts.items()))


@dataclass(frozen=True)
class Problem:
    kind: str
    layer: str                   # the layer or key it is about (checkpoint prefix stripped)
    message: str                 # names the layer; the component is added by CheckpointFormatError

    def to_dict(self) -> dict:
        return {"kind": self.kind, "layer": self.layer, "message": self.message}


class CheckpointFormatError(ValueError):
    """A checkpoint this project will not read. The message names the component and the layer:
    "transformer: layer blocks.0.attn.wq is missing weight_scale"."""

    def __init__(self, component: str, problems):
        if isinstance(problems, str):
            problems = [Problem("error", "", problems)]
        self.component = component
        self.problems = list(problems)
        first = self.problems[0].message if self.problems else "unreadable checkpoint"
        more = len(self.problems) - 1
        tail = f" (and {more} more problem{'s' if more > 1 else ''}: " + "; ".join(
            p.message for p in self.problems[1:4]) + (", ..." if more > 3 else "") + ")" if more else ""
        super().__init__(f"{component}: {first}{tail}")

    @property
    def kinds(self) -> set:
        return {p.kind for p in self.problems}


def strip_prefix(name: str, prefix: str) -> str:
    return name[len(prefix):] if prefix and name.startswith(prefix) else name


def detect_prefix(keys, anchors, candidates=("model.diffusion_model.", "diffusion_model.", "")) -> str | None:
    """The first candidate prefix under which one of the `anchors` keys exists, else None."""
    keys = set(keys)
    for prefix in candidates:
        if any(prefix + a in keys for a in anchors):
            return prefix
    return None


def _spec(entry, where: str, problems: list) -> QuantizedLayerSpec | None:
    if not isinstance(entry, dict) or not isinstance(entry.get("format"), str):
        problems.append(Problem(MALFORMED_METADATA, where,
                                f"layer {where}: quantization entry {entry!r} has no format"))
        return None
    fpmm = entry.get("full_precision_matrix_mult", False)
    if not isinstance(fpmm, bool):
        problems.append(Problem(MALFORMED_METADATA, where,
                                f"layer {where}: full_precision_matrix_mult must be true or false, got {fpmm!r}"))
        fpmm = bool(fpmm)
    options = tuple(sorted((k, json.dumps(v, sort_keys=True)) for k, v in entry.items() if k not in SUPPORTED_OPTIONS))
    return QuantizedLayerSpec(entry["format"], fpmm, options)


def parse_manifest(header: SafetensorsHeader, prefix: str = "",
                   ignore_prefixes=()) -> tuple[QuantizationManifest, list]:
    """Normalise `_quantization_metadata` and/or `comfy_quant` markers into one manifest.
    Returns (manifest, problems); reads only the header and the few marker bytes. Markers of keys
    under `ignore_prefixes` (e.g. a vision tower the reader does not load) are not read."""
    problems: list = []
    from_meta: dict | None = None
    raw = header.metadata.get(METADATA_KEY)
    if raw is not None:
        from_meta = {}
        try:
            doc = json.loads(raw)
        except json.JSONDecodeError as e:
            doc = None
            problems.append(Problem(MALFORMED_METADATA, METADATA_KEY, f"{METADATA_KEY} is not JSON: {e}"))
        if doc is not None:
            if not isinstance(doc, dict) or not isinstance(doc.get("layers"), dict):
                problems.append(Problem(MALFORMED_METADATA, METADATA_KEY,
                                        f"{METADATA_KEY} must be an object with a \"layers\" object"))
            else:
                extra = sorted(set(doc) - set(METADATA_TOP_KEYS))
                if extra:
                    problems.append(Problem(MALFORMED_METADATA, METADATA_KEY,
                                            f"{METADATA_KEY} has unknown entries {extra}"))
                for name, entry in doc["layers"].items():
                    layer = strip_prefix(str(name), prefix)
                    spec = _spec(entry, layer, problems)
                    if spec is not None:
                        from_meta[layer] = spec
    from_markers: dict = {}
    for key, info in header.tensors.items():
        if not key.endswith(MARKER_SUFFIX) or is_ignored(key, ignore_prefixes):
            continue
        layer = strip_prefix(key[:-len(MARKER_SUFFIX)], prefix)
        if info.dtype != "U8" or info.ndim != 1:
            problems.append(Problem(MALFORMED_METADATA, layer,
                                    f"layer {layer}: comfy_quant must be a 1-D uint8 tensor, got {info.dtype} "
                                    f"{list(info.shape)}"))
            continue
        try:
            entry = json.loads(read_raw_bytes(header, key).decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError, ValueError) as e:
            problems.append(Problem(MALFORMED_METADATA, layer, f"layer {layer}: comfy_quant is not JSON: {e}"))
            continue
        spec = _spec(entry, layer, problems)
        if spec is not None:
            from_markers[layer] = spec
    sources = tuple(s for s, d in (("metadata", from_meta), ("comfy_quant", from_markers or None)) if d is not None)
    if from_meta is not None and from_markers:
        for layer in sorted(set(from_meta) | set(from_markers)):
            a, b = from_meta.get(layer), from_markers.get(layer)
            if a != b:
                problems.append(Problem(INCONSISTENT_METADATA, layer,
                                        f"layer {layer}: comfy_quant {_describe(b)} disagrees with "
                                        f"{METADATA_KEY} {_describe(a)}"))
    layers = dict(from_meta or {})
    for layer, spec in from_markers.items():
        layers.setdefault(layer, spec)
    return QuantizationManifest(layers, sources), problems


def _describe(spec: QuantizedLayerSpec | None) -> str:
    if spec is None:
        return "(absent)"
    extra = ", full_precision_matrix_mult" if spec.full_precision_matrix_mult else ""
    opts = "".join(f", {k}={v}" for k, v in spec.options)
    return f"({spec.format}{extra}{opts})"


def _storage(dtype: str) -> str:
    return STORAGE_NAMES.get(dtype, dtype)


def _is_scalar(shape) -> bool:
    return tuple(shape) in ((), (1,))


@dataclass
class Audit:
    """What `audit` found. `quantized` lists the supported FP8 layers, `consumed` every key the
    quantization accounts for (weights, scales, markers), `ignored` the allow-listed keys."""
    problems: list = field(default_factory=list)
    quantized: dict = field(default_factory=dict)      # layer -> QuantizedLayerSpec (supported ones)
    consumed: set = field(default_factory=set)         # stripped key names
    ignored: list = field(default_factory=list)        # full key names
    unsupported_formats: dict = field(default_factory=dict)   # format or storage name -> count

    def raise_for(self, component: str):
        if self.problems:
            raise CheckpointFormatError(component, self.problems)


def is_ignored(key: str, ignore_prefixes) -> bool:
    return any(key.startswith(p) for p in ignore_prefixes)


def audit(header: SafetensorsHeader, manifest: QuantizationManifest, *, prefix: str = "",
          ignore_prefixes=()) -> Audit:
    """Check every tensor of the file against the manifest (see the module docstring)."""
    out = Audit()
    tensors = {}
    for key, info in header.tensors.items():
        if is_ignored(key, ignore_prefixes):
            out.ignored.append(key)
        else:
            tensors[strip_prefix(key, prefix)] = info

    def bad(kind, layer, message, fmt=None):
        out.problems.append(Problem(kind, layer, message))
        if fmt:
            out.unsupported_formats[fmt] = out.unsupported_formats.get(fmt, 0) + 1

    layers = {k: v for k, v in manifest.layers.items() if not is_ignored(prefix + k + ".", ignore_prefixes)
              and not is_ignored(k + ".", ignore_prefixes)}
    for layer, spec in sorted(layers.items()):
        weight = tensors.get(layer + ".weight")
        for suffix in (MARKER_SUFFIX, *SCALE_SUFFIXES):
            if layer + suffix in tensors:
                out.consumed.add(layer + suffix)
        if spec.format != SUPPORTED_FORMAT:
            # the layer is rejected as a whole: its own tensors are not reported again one by one
            out.consumed.update(k for k in (layer + s for s in (".weight", ".bias", *FOREIGN_QUANT_SUFFIXES))
                                if k in tensors)
            why = "".join(f"; {r}" for r in [REFUSED_FORMATS.get(spec.format)] if r)
            bad(UNSUPPORTED_FORMAT, layer, f"unsupported quantization format in layer {layer}: {spec.format} "
                f"(only {SUPPORTED_FORMAT} with a scalar weight_scale is supported{why})", spec.format)
            continue
        if spec.options:
            out.consumed.update(k for k in (layer + ".weight",) if k in tensors)
            bad(UNSUPPORTED_OPTION, layer, f"layer {layer}: unsupported quantization option(s) "
                f"{', '.join(k for k, _ in spec.options)} for {spec.format}", f"{spec.format}+options")
            continue
        if weight is None:
            bad(INCONSISTENT_METADATA, layer, f"quantization metadata names layer {layer}, "
                f"but the checkpoint has no {layer}.weight")
            continue
        out.consumed.add(layer + ".weight")
        if weight.dtype != "F8_E4M3":
            if weight.dtype in INTEGER_DTYPES or weight.dtype in SUBBYTE_DTYPES:
                bad(UNSUPPORTED_STORAGE, layer, f"layer {layer} is marked {spec.format} but its weight is stored as "
                    f"{_storage(weight.dtype)} ({weight.dtype}): integer/packed storage is not supported",
                    _storage(weight.dtype))
            else:
                bad(INCONSISTENT_METADATA, layer, f"layer {layer} is marked {spec.format} but its weight is "
                    f"stored as {weight.dtype}")
            continue
        if weight.ndim >= 3:
            bad(FP8_CONVOLUTION, layer, f"layer {layer} has a {weight.ndim}-D FP8 weight {list(weight.shape)}: "
                "FP8 convolutions are not supported", "float8 convolution")
            continue
        if weight.ndim != 2:
            bad(UNSUPPORTED_SHAPE, layer, f"layer {layer} has a {weight.ndim}-D FP8 weight {list(weight.shape)}; "
                "only Linear (2-D) weights can be scaled FP8")
            continue
        ok = True
        scale = tensors.get(layer + ".weight_scale")
        if scale is None:
            bad(MISSING_SCALE, layer, f"layer {layer} is missing weight_scale")
            ok = False
        elif not _is_scalar(scale.shape):
            bad(NON_SCALAR_SCALE, layer, f"layer {layer}: expected a scalar weight_scale, got shape "
                f"{tuple(scale.shape)}", "non-scalar (per-channel/block) scale")
            ok = False
        elif scale.dtype != "F32":
            bad(BAD_SCALE_DTYPE, layer, f"layer {layer}: weight_scale must be F32, got {scale.dtype}")
            ok = False
        iscale = tensors.get(layer + ".input_scale")
        if iscale is not None and not _is_scalar(iscale.shape):
            bad(NON_SCALAR_SCALE, layer, f"layer {layer}: expected a scalar input_scale, got shape "
                f"{tuple(iscale.shape)}", "non-scalar (per-channel/block) scale")
            ok = False
        elif iscale is not None and iscale.dtype != "F32":
            bad(BAD_SCALE_DTYPE, layer, f"layer {layer}: input_scale must be F32, got {iscale.dtype}")
            ok = False
        bias = tensors.get(layer + ".bias")
        if bias is not None and bias.dtype not in FLOAT_DTYPES:
            bad(QUANTIZED_BIAS, layer, f"layer {layer} has a quantized bias ({_storage(bias.dtype)}); "
                "only an ordinary float bias is supported", "quantized bias")
            out.consumed.add(layer + ".bias")
            ok = False
        if layer + ".bias_scale" in tensors:
            bad(QUANTIZED_BIAS, layer, f"layer {layer} has a quantized bias (bias_scale); "
                "only an ordinary float bias is supported", "quantized bias")
            out.consumed.add(layer + ".bias_scale")
            ok = False
        if ok:
            out.quantized[layer] = spec

    for key, info in tensors.items():
        if key in out.consumed:
            continue
        if key.endswith(MARKER_SUFFIX):
            continue            # parse_manifest reported a malformed one
        if key == "scaled_fp8" or key.endswith(LEGACY_SUFFIXES):
            bad(LEGACY_FORMAT, key, f"{key}: ComfyUI's legacy scaled_fp8 layout (scale_weight) is not supported",
                "legacy scaled_fp8")
            continue
        scale_of = next((key[:-len(s)] for s in SCALE_SUFFIXES if key.endswith(s)), None)
        if scale_of is not None:
            bad(INCONSISTENT_METADATA, scale_of, f"{key} is a quantization scale, but layer {scale_of} has no "
                "quantization metadata")
            continue
        foreign = next((key[:-len(s)] for s in FOREIGN_QUANT_SUFFIXES if key.endswith(s)), None)
        if foreign is not None:
            bad(UNSUPPORTED_FORMAT, foreign, f"layer {foreign} carries {key.rsplit('.', 1)[-1]}, which belongs to "
                "a quantization format that is not supported", key.rsplit(".", 1)[-1])
            continue
        if info.dtype in FP8_DTYPES:
            layer = key[:-len(".weight")] if key.endswith(".weight") else key
            bad(INCONSISTENT_METADATA, layer, f"{key} is stored as {info.dtype} but layer {layer} has no "
                "quantization metadata")
        elif info.dtype in INTEGER_DTYPES or info.dtype in SUBBYTE_DTYPES:
            layer = key.rsplit(".", 1)[0]
            bad(UNSUPPORTED_STORAGE, layer, f"{key} is stored as {_storage(info.dtype)} ({info.dtype}): "
                "integer/packed storage is not supported", _storage(info.dtype))
        elif info.dtype not in FLOAT_DTYPES:
            bad(UNSUPPORTED_STORAGE, key, f"{key} is stored as {info.dtype}, which is not supported", info.dtype)
    return out


def plain_keys(header: SafetensorsHeader, result: Audit, *, prefix: str = "", ignore_prefixes=()) -> list:
    """The stripped names of the tensors that are ordinary module state (not quantization
    bookkeeping, not ignored): the keys a reader must map onto the module one by one."""
    keys = []
    for key in header.tensors:
        if is_ignored(key, ignore_prefixes):
            continue
        name = strip_prefix(key, prefix)
        if name in result.consumed or name.endswith(MARKER_SUFFIX):
            continue
        keys.append(name)
    return keys


# -- ComfyUI's older "scaled_fp8" layout, dequantized (text encoders) ----------------------------------
# A `scaled_fp8` marker tensor (its dtype is the FP8 format) and, per quantized Linear, an FP8
# `<layer>.weight` with a scalar F32 `<layer>.scale_weight` (and `<layer>.scale_input`, the activation
# scale of ComfyUI's FP8 matmul). ComfyUI computes text encoders in full precision: weight * scale_weight,
# the input unscaled; reading such a file dequantized gives that very product.
LEGACY_MARKER = "scaled_fp8"
LEGACY_WEIGHT_SCALE, LEGACY_INPUT_SCALE = LEGACY_SUFFIXES


def is_legacy_scaled(keys) -> bool:
    """The older ComfyUI scaled-FP8 layout: its marker, or a `scale_weight` beside a weight."""
    return any(k == LEGACY_MARKER or k.endswith("." + LEGACY_MARKER) or k.endswith(LEGACY_WEIGHT_SCALE) for k in keys)


def legacy_problems(header: SafetensorsHeader, prefix: str = "") -> list:
    """What a legacy scaled-FP8 component (the keys under `prefix`) holds that its dequantization
    cannot read, each naming the layer: a scale without its FP8 weight, a scale that is not a
    scalar F32, other quantization formats' markers. Header only."""
    tensors = {strip_prefix(k, prefix): v for k, v in header.tensors.items() if k.startswith(prefix)}
    problems = []
    for key, info in sorted(tensors.items()):
        if key.endswith(LEGACY_SUFFIXES):
            layer = key.rsplit(".", 1)[0]
            weight = tensors.get(layer + ".weight")
            if not _is_scalar(info.shape):
                problems.append(Problem(NON_SCALAR_SCALE, layer, f"layer {layer}: {key.rsplit('.', 1)[1]} must be a "
                                        f"scalar, got shape {tuple(info.shape)}"))
            elif info.dtype != "F32":
                problems.append(Problem(BAD_SCALE_DTYPE, layer, f"layer {layer}: {key.rsplit('.', 1)[1]} must be F32, "
                                        f"got {info.dtype}"))
            elif key.endswith(LEGACY_WEIGHT_SCALE) and (weight is None or weight.dtype not in FP8_DTYPES):
                problems.append(Problem(INCONSISTENT_METADATA, layer, f"layer {layer} has a scale_weight but its weight "
                                        f"is {'missing' if weight is None else weight.dtype}, not FP8"))
        elif key.endswith(MARKER_SUFFIX) or key.endswith(FOREIGN_QUANT_SUFFIXES) or key.endswith(SCALE_SUFFIXES):
            layer = key.rsplit(".", 1)[0]
            problems.append(Problem(UNSUPPORTED_FORMAT, layer, f"{key}: another quantization layout's key in a legacy "
                                    "scaled_fp8 file"))
    return problems


def dequantize_legacy(state: dict) -> tuple[dict, list]:
    """`state` (tensors, keys with the component's prefix cut) with every FP8 weight that has a
    `scale_weight` as float32 weight * scale_weight, the scales and the marker dropped; returns
    (state, the dequantized layers). FP8 weights without a scale stay FP8 storage (the reader casts
    them, scale 1, as ComfyUI's default scale). Check `legacy_problems` first."""
    import torch
    out, layers = {}, []
    for key, t in state.items():
        if key == LEGACY_MARKER or key.endswith("." + LEGACY_MARKER) or key.endswith(LEGACY_SUFFIXES):
            continue
        if key.endswith(".weight"):
            scale = state.get(key[:-len(".weight")] + LEGACY_WEIGHT_SCALE)
            if scale is not None:
                t = t.to(torch.float32) * scale.to(torch.float32).reshape(())
                layers.append(key[:-len(".weight")])
        out[key] = t
    return out, layers

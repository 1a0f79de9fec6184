"""Single-file readers for Krea 2 in ComfyUI layout, for the load funnel.

Each reader is `reader(path, *, component, policy) -> torch.nn.Module` with `format_name`:

- `read_krea2_transformer`: the diffusion model, ComfyUI/original Krea 2 keys (optionally under
  `model.diffusion_model.`), scaled FP8 per `_quantization_metadata` (or `comfy_quant` markers).
  Returns a diffusers `Krea2Transformer2DModel`.
- `read_qwen3vl_text_encoder`: the Qwen3-VL-4B text backbone, `model.`-prefixed Qwen3 keys with
  per-layer `comfy_quant` markers (or the file metadata). Returns a transformers `Qwen3VLTextModel`
  (no vision tower, no lm_head: see TEXT_ENCODER_IGNORED).
- `read_qwen_image_vae`: the Qwen Image VAE in original Wan/Qwen key names, converted with this
  project's own mapping (`wan_vae_key_to_diffusers`). Returns a diffusers `AutoencoderKLQwenImage`.

How every reader works:
1. Parse the safetensors header (no tensor data) and the quantization manifest; `quant.audit`
   rejects every unsupported or inconsistent layer, naming the component and the layer.
2. Map every checkpoint key to its library name and derive the module configuration from the
   checkpoint shapes, in code. The real model's constants (KREA2_REFERENCE, QWEN3VL_4B_REFERENCE,
   QWEN_IMAGE_VAE_REFERENCE) are the documented reference: a checkpoint at the reference width must
   match every one of them; a reduced checkpoint (the tiny test model) is accepted when it is
   internally consistent. Nothing is fetched: no from_pretrained, no from_single_file.
3. Build the module on the meta device (accelerate `init_empty_weights`, buffers stay real),
   replace each quantized Linear by a `ScaledFp8Linear`, and account for every key before any data
   is read: a missing key, an unexpected key or a shape mismatch is an error naming the key.
4. Read the tensors and `load_state_dict(strict=True, assign=True)`: FP8 weights stay
   float8_e4m3fn, scales float32, modules the model keeps in float32 (`_keep_in_fp32_modules`)
   float32, every other float tensor `policy.dtype`. Tensors stay on the CPU; the funnel's
   `aitk_post_load` moves the module with `.to(device)`, which keeps every dtype.

The returned module is the funnel's mixed class (`aitk(cls)`) so `aitk_post_load` applies, and
carries `_aitk_checkpoint_report` (format, prefix, quantized-layer count, ignored keys, config).

Key conversion for the transformer calls diffusers'
`convert_krea2_transformer_checkpoint_to_diffusers` one key at a time (only its renaming: values are
reshaped here to the module's shapes). The VAE mapping is our own (formats/wan_vae.py), written after
diffusers' `convert_wan_vae_to_diffusers` (Apache-2.0) but generalised to any depth, and not imported.
"""
import contextlib
import re

import torch
import torch.nn as nn

from toolkit.models.archs.krea2.layouts import (KREA2_ANCHORS, KREA2_PREFIXES, KREA2_REFERENCE,  # noqa: F401
                                               QWEN3VL_4B_REFERENCE, QWEN_IMAGE_VAE_REFERENCE, TEXT_ENCODER_ANCHORS,
                                               TEXT_ENCODER_IGNORED, TEXT_ENCODER_PREFIXES, VAE_ANCHORS, VAE_PREFIXES)
from toolkit.models.formats import quant
from toolkit.models.formats.quant import CheckpointFormatError, Problem
from toolkit.models.formats.safetensors_header import HeaderError, read_header
from toolkit.models.formats.scaled_fp8 import (FP8_DTYPES, ScaledFp8Linear, dequantize_outside_blocks, keep_fp32_names,
                                              storage_dtype)
from toolkit.models.formats.vaes import WAN21_LATENTS_MEAN, WAN21_LATENTS_STD
from toolkit.models.formats.wan_vae import VAE_FAMILIES, wan_vae_key_to_diffusers  # noqa: F401

FORMAT_NAME = "comfy_scaled_fp8"

# --------------------------------------------------------------------------------------------- #
#                                    reference constants                                        #
# --------------------------------------------------------------------------------------------- #

# The real models' reference shapes (KREA2_REFERENCE, QWEN3VL_4B_REFERENCE, QWEN_IMAGE_VAE_REFERENCE) are
# toolkit/models/archs/krea2/layouts.py's, which inspection reads too.
KREA2_LATENT_CHANNELS, KREA2_PATCH = 16, 2

# Qwen3-VL-4B-Instruct's text backbone (the Krea 2 text encoder): what its shapes do not tell.
QWEN3VL_CONSTANTS = dict(rms_norm_eps=1e-6, rope_theta=5_000_000.0, max_position_embeddings=262144,
                         hidden_act="silu", attention_bias=False)
QWEN_PAD_TOKEN_ID = 151643

# Qwen Image VAE (AutoencoderKLQwenImage), from the public diffusers config of Qwen/Qwen-Image: the Wan 2.1
# latent space's statistics (formats/vaes.py holds them with the VAE kinds' known configs).
QWEN_IMAGE_LATENTS_MEAN = WAN21_LATENTS_MEAN
QWEN_IMAGE_LATENTS_STD = WAN21_LATENTS_STD


# --------------------------------------------------------------------------------------------- #
#                                       shared helpers                                          #
# --------------------------------------------------------------------------------------------- #

def _policy(policy):
    if policy is None:
        from toolkit.models.v2.policy import LoadPolicy
        return LoadPolicy()
    return policy


def _mixed(cls):
    """The funnel's mixed class, so the funnel applies aitk_post_load to what a reader returns."""
    try:
        from toolkit.models.v2.mixin import aitk
    except ImportError:          # pragma: no cover - the readers also work standalone
        return cls
    return aitk(cls)


@contextlib.contextmanager
def _empty_weights():
    from accelerate import init_empty_weights
    with init_empty_weights(include_buffers=False):
        yield


def _header(path: str, component: str):
    try:
        return read_header(path)
    except HeaderError as e:
        raise CheckpointFormatError(component, str(e)) from None


def _fail(component: str, kind: str, layer: str, message: str):
    raise CheckpointFormatError(component, [Problem(kind, layer, message)])


def _index_count(keys, pattern: str) -> int:
    rx = re.compile(pattern)
    found = {int(m.group(1)) for k in keys for m in [rx.match(k)] if m}
    if found and found != set(range(max(found) + 1)):
        missing = sorted(set(range(max(found) + 1)) - found)
        raise ValueError(f"block indices are not contiguous (missing {missing[:5]})")
    return len(found)


def _install_scaled_layers(model: nn.Module, layers: dict, component: str, cls_name: str, names: dict):
    """Replace the Linear at each target name by a ScaledFp8Linear (on the meta device).
    `layers`: target name -> (spec, has_bias, has_input_scale, runtime dtype); `names`: target -> original."""
    for target, (spec, has_bias, has_input, bias_dtype) in layers.items():
        parent_name, _, child = target.rpartition(".")
        try:
            parent = model.get_submodule(parent_name) if parent_name else model
            old = getattr(parent, child)
        except AttributeError:
            _fail(component, quant.UNEXPECTED_KEY, names[target],
                  f"layer {names[target]} (-> {target}) does not exist in {cls_name}")
        if not isinstance(old, nn.Linear):
            _fail(component, quant.UNEXPECTED_KEY, names[target],
                  f"layer {names[target]} (-> {target}) is a {type(old).__name__} in {cls_name}, not a Linear: "
                  "only Linear layers can be scaled FP8")
        if has_bias != (old.bias is not None):
            _fail(component, quant.UNEXPECTED_KEY if has_bias else quant.MISSING_KEY, names[target],
                  f"layer {names[target]}: the checkpoint {'has' if has_bias else 'lacks'} a bias the "
                  f"{cls_name} layer {'lacks' if has_bias else 'has'}")
        new = ScaledFp8Linear(old.in_features, old.out_features, old.bias is not None, has_input_scale=has_input,
                              full_precision_matrix_mult=spec.full_precision_matrix_mult, device="meta",
                              bias_dtype=bias_dtype)
        setattr(parent, child, new)


def _account(model: nn.Module, shapes: dict, names: dict, component: str, cls_name: str):
    """Strict key accounting before any data is read. `shapes`: target key -> checkpoint shape
    (after the reshapes the conversion does); `names`: target key -> original key."""
    expected = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    problems = []
    for target in shapes:
        if target not in expected:
            problems.append(Problem(quant.UNEXPECTED_KEY, names[target],
                                    f"unexpected key {names[target]}"
                                    + (f" (-> {target})" if target != names[target] else "")
                                    + f": {cls_name} has no such weight"))
    for target in expected:
        if target not in shapes:
            problems.append(Problem(quant.MISSING_KEY, target, f"missing key: {cls_name} needs {target}, "
                                    "which the checkpoint does not provide"))
    for target, shape in shapes.items():
        want = expected.get(target)
        if want is not None and tuple(shape) != want:
            problems.append(Problem(quant.UNSUPPORTED_SHAPE, names[target],
                                    f"{names[target]} has shape {list(shape)}, {cls_name} expects {list(want)} "
                                    f"for {target}"))
    if problems:
        raise CheckpointFormatError(component, problems)


def _read_tensors(path: str, plan: dict, model: nn.Module, runtime_dtype: torch.dtype) -> dict:
    """Read every planned tensor: plan = target key -> original (full) key. Converts dtypes (see the
    module docstring) and reshapes to the module's shapes."""
    from safetensors import safe_open
    expected = {k: v for k, v in model.state_dict().items()}
    keep = keep_fp32_names(model)
    owners = {}
    for mod_name, sub in model.named_modules():
        for n in list(sub._parameters) + list(sub._buffers):
            owners[f"{mod_name}.{n}" if mod_name else n] = sub
    out = {}
    with safe_open(path, framework="pt", device="cpu") as f:
        for target, source in plan.items():
            t = f.get_tensor(source)
            want = expected[target]
            if tuple(t.shape) != tuple(want.shape):
                t = t.reshape(want.shape)
            dtype = storage_dtype(target, t, runtime_dtype, keep, owners.get(target))
            if t.dtype not in FP8_DTYPES and t.dtype != dtype:
                t = t.to(dtype)
            out[target] = t
    return out


def _finish(model: nn.Module, state: dict, component: str, report: dict) -> nn.Module:
    model.load_state_dict(state, strict=True, assign=True)
    left = [n for n, t in list(model.named_parameters()) + list(model.named_buffers()) if t.is_meta]
    if left:
        raise CheckpointFormatError(component, f"{len(left)} tensors were never loaded (e.g. {', '.join(left[:3])})")
    model.eval()
    model.requires_grad_(False)
    model._aitk_checkpoint_report = report
    return model


def _quant_plan(header, result, prefix: str, key_map) -> tuple[dict, dict, dict, dict]:
    """For the audited FP8 layers, in target (library) names: (layer -> (spec, has_bias,
    has_input_scale) for _install_scaled_layers, key -> shape, key -> original key, key -> file key)
    covering each layer's weight, weight_scale and input_scale. key_map: original key -> target key."""
    layers, shapes, names, plan = {}, {}, {}, {}
    stripped = {quant.strip_prefix(k, prefix) for k in header.tensors}
    for layer, spec in result.quantized.items():
        tw = key_map(layer + ".weight")
        target = tw[:-len(".weight")]
        has_bias = (layer + ".bias") in stripped
        has_input = (layer + ".input_scale") in result.consumed
        layers[target] = (spec, has_bias, has_input)
        for suffix in (".weight", ".weight_scale") + ((".input_scale",) if has_input else ()):
            info = header.tensors[prefix + layer + suffix]
            shapes[target + suffix] = () if suffix != ".weight" else info.shape
            names[target + suffix] = layer + suffix
            plan[target + suffix] = prefix + layer + suffix
    return layers, shapes, names, plan


def _check_reference(component: str, derived: dict, reference: dict, what: str):
    bad = [f"{k} is {derived[k]!r}, expected {v!r}" for k, v in reference.items()
           if k in derived and _norm(derived[k]) != _norm(v)]
    if bad:
        _fail(component, quant.UNSUPPORTED_SHAPE, "", f"checkpoint is not {what}: " + "; ".join(bad))


def _norm(v):
    return list(v) if isinstance(v, (list, tuple)) else v


# --------------------------------------------------------------------------------------------- #
#                                  Krea 2 diffusion model                                       #
# --------------------------------------------------------------------------------------------- #

def krea2_key_to_diffusers(key: str) -> str:
    """Original/ComfyUI Krea 2 key (prefix stripped) -> Krea2Transformer2DModel key, by diffusers'
    own converter (its renaming only)."""
    from diffusers.loaders.single_file_utils import convert_krea2_transformer_checkpoint_to_diffusers
    (new,) = convert_krea2_transformer_checkpoint_to_diffusers({key: torch.empty(0)}).keys()
    return new


def krea2_axes_dims(head_dim: int) -> tuple:
    """The RoPE (t, h, w) split of one head, as ComfyUI/official Krea 2 derive it: (32, 48, 48) for 128."""
    unit = head_dim // 16
    return (head_dim - 12 * unit, 6 * unit, 6 * unit)


def _shape_of(shapes: dict, component: str, what: str):
    """shape(key) for deriving a config from checkpoint shapes; a missing key is a named error."""
    def shape(key):
        if key not in shapes:
            _fail(component, quant.MISSING_KEY, key, f"missing key {key}: cannot derive {what}")
        return shapes[key]
    return shape


def krea2_config_from_shapes(shapes: dict, component: str = "transformer") -> dict:
    """Krea2Transformer2DModel kwargs from diffusers-named checkpoint shapes."""
    shape = _shape_of(shapes, component, "the Krea 2 configuration")
    try:
        num_layers = _index_count(shapes, r"transformer_blocks\.(\d+)\.")
        n_layerwise = _index_count(shapes, r"text_fusion\.layerwise_blocks\.(\d+)\.")
        n_refiner = _index_count(shapes, r"text_fusion\.refiner_blocks\.(\d+)\.")
    except ValueError as e:
        _fail(component, quant.MISSING_KEY, "", str(e))
    hidden, in_channels = shape("img_in.weight")
    head_dim = shape("transformer_blocks.0.attn.norm_q.weight")[0]
    text_dim = shape("txt_in.linear_1.weight")[1]
    text_head_dim = shape("text_fusion.layerwise_blocks.0.attn.norm_q.weight")[0]
    kv_out = shape("transformer_blocks.0.attn.to_k.weight")[0]
    text_kv_out = shape("text_fusion.layerwise_blocks.0.attn.to_k.weight")[0]
    for what, num, den in (("hidden size", hidden, head_dim), ("key/value width", kv_out, head_dim),
                           ("text width", text_dim, text_head_dim), ("text key/value width", text_kv_out,
                                                                      text_head_dim)):
        if den <= 0 or num % den:
            _fail(component, quant.UNSUPPORTED_SHAPE, "", f"{what} {num} is not a multiple of the head size {den}")
    cfg = dict(
        in_channels=in_channels, num_layers=num_layers, attention_head_dim=head_dim,
        num_attention_heads=hidden // head_dim, num_key_value_heads=kv_out // head_dim,
        intermediate_size=shape("transformer_blocks.0.ff.gate.weight")[0],
        timestep_embed_dim=shape("time_embed.linear_1.weight")[1], text_hidden_dim=text_dim,
        num_text_layers=shape("text_fusion.projector.weight")[1],
        text_num_attention_heads=text_dim // text_head_dim, text_num_key_value_heads=text_kv_out // text_head_dim,
        text_intermediate_size=shape("text_fusion.layerwise_blocks.0.ff.gate.weight")[0],
        num_layerwise_text_blocks=n_layerwise, num_refiner_text_blocks=n_refiner,
        axes_dims_rope=krea2_axes_dims(head_dim), rope_theta=KREA2_REFERENCE["rope_theta"],
        norm_eps=KREA2_REFERENCE["norm_eps"],
    )
    if in_channels != KREA2_LATENT_CHANNELS * KREA2_PATCH ** 2:
        _fail(component, quant.UNSUPPORTED_SHAPE, "first",
              f"first.weight takes {in_channels} inputs; Krea 2 packs {KREA2_LATENT_CHANNELS} latent channels "
              f"in {KREA2_PATCH}x{KREA2_PATCH} patches ({KREA2_LATENT_CHANNELS * KREA2_PATCH ** 2})")
    if cfg["num_attention_heads"] % max(cfg["num_key_value_heads"], 1):
        _fail(component, quant.UNSUPPORTED_SHAPE, "", "query heads are not a multiple of key/value heads")
    if hidden == KREA2_REFERENCE["attention_head_dim"] * KREA2_REFERENCE["num_attention_heads"]:
        _check_reference(component, cfg, KREA2_REFERENCE, "Krea 2 (reference width 6144)")
    return cfg


def _audited(path, component, anchors, prefixes, anchor_key, what, ignored=()):
    """The header of a component file, its key prefix, its quantization manifest and their audit,
    plus every key outside the prefix (and not an allowed, ignored key) as unexpected."""
    header = _header(path, component)
    prefix = quant.detect_prefix(header.keys(), anchors, prefixes)
    if prefix is None:
        _fail(component, quant.MISSING_KEY, anchor_key, f"{path} is not {what} (no {anchor_key})")
    manifest, problems = quant.parse_manifest(header, prefix, ignored)
    result = quant.audit(header, manifest, prefix=prefix, ignore_prefixes=ignored)
    result.problems[:0] = problems
    where = f"not under {prefix} and not an ignored key" if ignored else f"outside the {prefix} prefix"
    result.problems += [Problem(quant.UNEXPECTED_KEY, k, f"unexpected key {k} ({where})") for k in header.keys()
                        if prefix and not k.startswith(prefix) and not quant.is_ignored(k, ignored)]
    return header, prefix, manifest, result


def read_krea2_transformer(path: str, *, component: str = "transformer", policy=None) -> nn.Module:
    """A Krea2Transformer2DModel from a ComfyUI/original-layout Krea 2 file (scaled FP8 or plain)."""
    from diffusers import Krea2Transformer2DModel
    policy = _policy(policy)
    header, prefix, manifest, result = _audited(path, component, KREA2_ANCHORS, KREA2_PREFIXES, KREA2_ANCHORS[0],
                                      "a Krea 2 diffusion model in ComfyUI/original layout")
    result.raise_for(component)

    names, shapes, plan = {}, {}, {}
    layers, q_shapes, q_names, q_plan = _quant_plan(header, result, prefix, krea2_key_to_diffusers)
    shapes.update(q_shapes), names.update(q_names), plan.update(q_plan)
    for key in quant.plain_keys(header, result, prefix=prefix):
        target = krea2_key_to_diffusers(key)
        if target in names:
            _fail(component, quant.UNEXPECTED_KEY, key, f"{key} and {names[target]} both map to {target}")
        names[target], plan[target] = key, prefix + key
        shapes[target] = header.tensors[prefix + key].shape
    # the original layout stores the modulation tables flat
    for target in list(shapes):
        if target.startswith("transformer_blocks.") and target.endswith(".scale_shift_table"):
            n = shapes[target][0] if len(shapes[target]) == 1 else None
            if n is not None and n % 6 == 0:
                shapes[target] = (6, n // 6)
        if target == "final_layer.scale_shift_table" and len(shapes[target]) == 1 and shapes[target][0] % 2 == 0:
            shapes[target] = (2, shapes[target][0] // 2)
    config = krea2_config_from_shapes(shapes, component)

    cls = _mixed(Krea2Transformer2DModel)
    with _empty_weights():
        model = cls(**config)
    _install_scaled_layers(model, {t: (*v, policy.dtype) for t, v in layers.items()}, component,
                           "Krea2Transformer2DModel", names)
    _account(model, shapes, names, component, "Krea2Transformer2DModel")
    state = _read_tensors(path, plan, model, policy.dtype)
    report = _report(path, component, prefix, manifest, result, config,
                     config["text_hidden_dim"] == KREA2_REFERENCE["text_hidden_dim"]
                     and config["num_layers"] == KREA2_REFERENCE["num_layers"])
    model = _finish(model, state, component, report)
    # FP8 stays in the repeated blocks; an FP8 embedder or projection is dequantized (scaled_fp8.py)
    report["dequantized_layers"] = dequantize_outside_blocks(model)
    return model


read_krea2_transformer.format_name = FORMAT_NAME


# --------------------------------------------------------------------------------------------- #
#                                  Qwen3-VL text encoder                                        #
# --------------------------------------------------------------------------------------------- #

def qwen3vl_mrope_section(head_dim: int) -> list:
    """The interleaved M-RoPE split of half a head: [24, 20, 20] for head_dim 128 (Qwen3-VL). For
    text (equal t/h/w positions) the split does not change the result."""
    half = head_dim // 2
    unit = (half * 5) // 16
    return [half - 2 * unit, unit, unit]


def qwen3vl_text_config(*, vocab_size: int, hidden_size: int, intermediate_size: int, num_hidden_layers: int,
                        num_attention_heads: int, num_key_value_heads: int, head_dim: int):
    """The Qwen3VLTextConfig of a Qwen3-VL text backbone of these dimensions (constants: Qwen3-VL's)."""
    from transformers import Qwen3VLTextConfig
    c = QWEN3VL_CONSTANTS
    return Qwen3VLTextConfig(
        vocab_size=vocab_size, hidden_size=hidden_size, intermediate_size=intermediate_size,
        num_hidden_layers=num_hidden_layers, num_attention_heads=num_attention_heads,
        num_key_value_heads=num_key_value_heads, head_dim=head_dim, hidden_act=c["hidden_act"],
        max_position_embeddings=c["max_position_embeddings"], rms_norm_eps=c["rms_norm_eps"],
        attention_bias=c["attention_bias"],
        rope_parameters={"rope_type": "default", "rope_theta": c["rope_theta"],
                         "mrope_section": qwen3vl_mrope_section(head_dim), "mrope_interleaved": True},
        pad_token_id=QWEN_PAD_TOKEN_ID if vocab_size > QWEN_PAD_TOKEN_ID else None,
    )


def qwen3vl_dims_from_shapes(shapes: dict, component: str = "text_encoder") -> dict:
    shape = _shape_of(shapes, component, "the Qwen3-VL configuration")
    try:
        layers = _index_count(shapes, r"layers\.(\d+)\.")
    except ValueError as e:
        _fail(component, quant.MISSING_KEY, "", str(e))
    vocab, hidden = shape("embed_tokens.weight")
    head_dim = shape("layers.0.self_attn.q_norm.weight")[0]
    q_out, k_out = shape("layers.0.self_attn.q_proj.weight")[0], shape("layers.0.self_attn.k_proj.weight")[0]
    if head_dim <= 0 or q_out % head_dim or k_out % head_dim:
        _fail(component, quant.UNSUPPORTED_SHAPE, "layers.0.self_attn",
              f"attention widths {q_out}/{k_out} are not multiples of the head size {head_dim}")
    dims = dict(vocab_size=vocab, hidden_size=hidden, intermediate_size=shape("layers.0.mlp.gate_proj.weight")[0],
                num_hidden_layers=layers, num_attention_heads=q_out // head_dim,
                num_key_value_heads=k_out // head_dim, head_dim=head_dim)
    if hidden == QWEN3VL_4B_REFERENCE["hidden_size"]:
        _check_reference(component, dims, QWEN3VL_4B_REFERENCE, "Qwen3-VL-4B")
    return dims


def read_qwen3vl_text_encoder(path: str, *, component: str = "text_encoder", policy=None) -> nn.Module:
    """A Qwen3VLTextModel (text backbone only) from a ComfyUI Qwen3-VL file (scaled FP8 or plain)."""
    from transformers import Qwen3VLTextModel
    policy = _policy(policy)
    header, prefix, manifest, result = _audited(path, component, TEXT_ENCODER_ANCHORS, TEXT_ENCODER_PREFIXES,
                                      "model.embed_tokens.weight", "a Qwen3-VL text encoder in ComfyUI layout",
                                      ignored=TEXT_ENCODER_IGNORED)
    result.raise_for(component)

    def key_map(key):
        return key
    names, shapes, plan = {}, {}, {}
    layers, q_shapes, q_names, q_plan = _quant_plan(header, result, prefix, key_map)
    shapes.update(q_shapes), names.update(q_names), plan.update(q_plan)
    for key in quant.plain_keys(header, result, prefix=prefix, ignore_prefixes=TEXT_ENCODER_IGNORED):
        names[key], plan[key] = key, prefix + key
        shapes[key] = header.tensors[prefix + key].shape
    dims = qwen3vl_dims_from_shapes(shapes, component)
    config = qwen3vl_text_config(**dims)

    cls = _mixed(Qwen3VLTextModel)
    with _empty_weights():
        model = cls(config)
    _install_scaled_layers(model, {t: (*v, policy.dtype) for t, v in layers.items()}, component,
                           "Qwen3VLTextModel", names)
    _account(model, shapes, names, component, "Qwen3VLTextModel")
    state = _read_tensors(path, plan, model, policy.dtype)
    report = _report(path, component, prefix, manifest, result, dims,
                     all(dims[k] == v for k, v in QWEN3VL_4B_REFERENCE.items()))
    return _finish(model, state, component, report)


read_qwen3vl_text_encoder.format_name = FORMAT_NAME


# --------------------------------------------------------------------------------------------- #
#                                     Qwen Image VAE                                            #
# --------------------------------------------------------------------------------------------- #

# The Wan/Qwen key mapping lives in formats/wan_vae.py (torch-free: the detector and the VAE
# kinds of formats/vaes.py use it too); its names stay importable from here.


def wan_vae_structure(shapes: dict, component: str = "vae") -> dict:
    """AutoencoderKLQwenImage kwargs (without latents statistics) from original-key shapes."""
    shape = _shape_of(shapes, component, "the VAE configuration")
    rx = re.compile(r"encoder\.downsamples\.(\d+)\.resample\.")
    resamples = sorted({int(m.group(1)) for k in shapes for m in [rx.match(k)] if m})
    if not resamples:
        _fail(component, quant.MISSING_KEY, "encoder.downsamples",
              "no encoder.downsamples.*.resample keys: not a Wan/Qwen Image VAE")
    nrb = resamples[0]
    levels = len(resamples) + 1
    if resamples != [nrb + i * (nrb + 1) for i in range(len(resamples))] or nrb < 1:
        _fail(component, quant.UNSUPPORTED_SHAPE, "encoder.downsamples",
              f"encoder.downsamples resamplers at {resamples} do not form a regular Wan VAE layout")
    base = shape("encoder.conv1.weight")[0]
    dim_mult = []
    for level in range(levels):
        out = shape(f"encoder.downsamples.{level * (nrb + 1)}.residual.2.weight")[0]
        if out % base:
            _fail(component, quant.UNSUPPORTED_SHAPE, f"encoder.downsamples.{level * (nrb + 1)}",
                  f"level {level} width {out} is not a multiple of the base width {base}")
        dim_mult.append(out // base)
    temporal = [f"encoder.downsamples.{i}.time_conv.weight" in shapes for i in resamples]
    cfg = dict(base_dim=base, z_dim=shape("conv2.weight")[0], dim_mult=dim_mult, num_res_blocks=nrb,
               temperal_downsample=temporal, input_channels=shape("encoder.conv1.weight")[1])
    if cfg["z_dim"] != QWEN_IMAGE_VAE_REFERENCE["z_dim"]:
        _fail(component, quant.UNSUPPORTED_SHAPE, "conv2", f"latent channels {cfg['z_dim']}: the Qwen Image VAE has "
              f"{QWEN_IMAGE_VAE_REFERENCE['z_dim']} (its latent statistics are per channel)")
    if base == QWEN_IMAGE_VAE_REFERENCE["base_dim"]:
        _check_reference(component, cfg, QWEN_IMAGE_VAE_REFERENCE, "the Qwen Image VAE")
    return cfg


def read_qwen_image_vae(path: str, *, component: str = "vae", policy=None) -> nn.Module:
    """An AutoencoderKLQwenImage from a Qwen Image VAE in original Wan/Qwen key names."""
    from diffusers import AutoencoderKLQwenImage
    policy = _policy(policy)
    header, prefix, manifest, result = _audited(path, component, VAE_ANCHORS, VAE_PREFIXES, VAE_ANCHORS[0],
                                      "a Qwen Image VAE in original Wan/Qwen layout")
    if result.quantized:
        result.problems.append(Problem(quant.UNSUPPORTED_FORMAT, sorted(result.quantized)[0],
                                       f"layer {sorted(result.quantized)[0]}: a quantized VAE is not supported"))
    result.raise_for(component)

    original = {k: header.tensors[prefix + k].shape for k in quant.plain_keys(header, result, prefix=prefix)}
    cfg = wan_vae_structure(original, component)
    names, shapes, plan, unmapped = {}, {}, {}, []
    for key, shp in original.items():
        mapped = wan_vae_key_to_diffusers(key, cfg["num_res_blocks"], len(cfg["dim_mult"]))
        if mapped is None:
            unmapped.append(Problem(quant.UNEXPECTED_KEY, key, f"unexpected key {key}: no Qwen Image VAE mapping"))
            continue
        target = mapped[0]
        names[target], plan[target], shapes[target] = key, prefix + key, shp
    if unmapped:
        raise CheckpointFormatError(component, unmapped)

    cls = _mixed(AutoencoderKLQwenImage)
    with _empty_weights():
        model = cls(**cfg, attn_scales=[], dropout=0.0, latents_mean=list(QWEN_IMAGE_LATENTS_MEAN),
                    latents_std=list(QWEN_IMAGE_LATENTS_STD))
    _account(model, shapes, names, component, "AutoencoderKLQwenImage")
    state = _read_tensors(path, plan, model, policy.dtype)
    report = _report(path, component, prefix, manifest, result, cfg,
                     all(_norm(cfg[k]) == _norm(v) for k, v in QWEN_IMAGE_VAE_REFERENCE.items()))
    report["format"] = "original"
    return _finish(model, state, component, report)


read_qwen_image_vae.format_name = FORMAT_NAME


def _report(path, component, prefix, manifest, result, config, matches_reference) -> dict:
    return {
        "format": FORMAT_NAME if result.quantized else "original",
        "component": component, "path": path, "prefix": prefix,
        "quantized_layers": len(result.quantized),
        "full_precision_matrix_mult": sum(1 for s in result.quantized.values() if s.full_precision_matrix_mult),
        "manifest_sources": list(manifest.sources),
        "ignored_keys": list(result.ignored),
        "config": {k: (list(v) if isinstance(v, tuple) else v) for k, v in config.items()},
        "matches_reference": bool(matches_reference),
    }

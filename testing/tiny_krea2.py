"""A tiny random-weight Krea 2, written twice: as a diffusers `Krea2Pipeline` folder (float32) and
in the real ComfyUI layout (scaled FP8), with the same weights.

    make_tiny_krea2(root, seed=0) -> dict      # see its docstring for the keys
    cached_tiny_krea2(root, seed=0) -> dict    # the same, built once under root/seed<N>
    corrupt_variant(src, dst, kind) -> dict    # one rejection case per kind (CORRUPTIONS)
    restyle_variant(src, dst, kind) -> dict    # valid alternatives (RESTYLES): prefix, marker forms, input_scale

Layout under `root`:

    diffusers/                                  Krea2Pipeline.save_pretrained (float32), taps (2, 5, 8)
    comfy/diffusion_models/krea2_turbo_fp8_scaled.safetensors
        original Krea 2 keys (blocks.N.attn.wq, txtfusion.*, first, tmlp, tproj, txtmlp, last), every
        transformer-block and text-fusion-block Linear stored F8_E4M3 with a scalar F32 weight_scale
        (amax / 448), file-level `_quantization_metadata` (attn.gate layers and the text-fusion
        mlp.down layers marked full_precision_matrix_mult), everything else BF16 - the same dtype
        census as the real file (F8 / F32 scales / BF16).
    comfy/text_encoders/qwen3vl_fp8_scaled.safetensors
        `model.`-prefixed Qwen3 keys, q/k/v/o and gate/up/down projections F8_E4M3 + F32 weight_scale
        + a per-layer `comfy_quant` uint8 JSON tensor (mlp.down_proj marked
        full_precision_matrix_mult), embeddings/norms BF16, plus the tiny vision tower under
        `visual.` (a Qwen3-VL file carries one; the reader reports and ignores it).
    comfy/vae/qwen_image_vae.safetensors        original Wan/Qwen VAE keys, F32 (or `vae_dtype`)
    comfy/tokenizer/                            vocab.json, merges.txt, tokenizer_config.json

Dimensions: transformer width 64 (4 heads x 16, 2 KV heads), 2 blocks, SwiGLU 128, text width 32,
3 text layers, text fusion 2 heads; text encoder Qwen3-VL width 32, 8 layers (taps 2, 5, 8 are
every third hidden state from 2, as the engine derives them), 2 heads x 16, 1 KV head; VAE base
width 8 with the real structure ([1, 2, 4, 4], 2 residual blocks, temporal [False, True, True],
z 16, the Qwen Image latent statistics). Every quantized Linear is a multiple of 16 on both sides,
so the `_scaled_mm` gates pass for all of them. The tokenizer is trained in code with the Krea 2
template in its corpus, so the template prefix is exactly 34 tokens and the suffix 5, as in the
real Qwen tokenizer (the pipeline drops that many).

Deterministic: the same seed gives the same weights and byte-identical ComfyUI files. Parameters a
library initialises to a constant (norm scales, modulation tables) get seeded noise, so a
mis-mapped norm or table changes the output instead of hiding behind identical values.
"""
from __future__ import annotations

import json
import os
import pathlib
import re

from toolkit.models.archs.krea2.tiny import (PROMPT_PREFIX, PROMPT_SUFFIX, TAPS, TEXT_DIMS,  # noqa: F401
                                             TRANSFORMER_DIMS, VAE_DIMS, VISION_DIMS)
from toolkit.models.tiny.tokenizers import QWEN_ADDED, QWEN_CHAT_TEMPLATE, QWEN_SPECIAL

DIFFUSION_FILE = "diffusion_models/krea2_turbo_fp8_scaled.safetensors"
TEXT_ENCODER_FILE = "text_encoders/qwen3vl_fp8_scaled.safetensors"
VAE_FILE = "vae/qwen_image_vae.safetensors"
TOKENIZER_DIR = "tokenizer"

_TRANSFORMER_QUANT = re.compile(r"(transformer_blocks|text_fusion\.(layerwise|refiner)_blocks)\.\d+\."
                                r"(attn\.(to_q|to_k|to_v|to_gate|to_out\.0)|ff\.(gate|up|down))\.weight$")
_TEXT_QUANT = re.compile(r"language_model\.layers\.\d+\.(self_attn\.(q|k|v|o)_proj|mlp\.(gate|up|down)_proj)\.weight$")


# --------------------------------------------------------------------------------------------- #
#                                   key maps (diffusers -> original)                            #
# --------------------------------------------------------------------------------------------- #

_KREA2_PREFIX_INV = [("img_in.", "first."), ("time_embed.linear_1.", "tmlp.0."), ("time_embed.linear_2.", "tmlp.2."),
                     ("time_mod_proj.", "tproj.1."), ("txt_in.norm.weight", "txtmlp.0.scale"),
                     ("txt_in.linear_1.", "txtmlp.1."), ("txt_in.linear_2.", "txtmlp.3."),
                     ("text_fusion.", "txtfusion."), ("transformer_blocks.", "blocks."),
                     ("final_layer.linear.", "last.linear."), ("final_layer.norm.weight", "last.norm.scale"),
                     ("final_layer.scale_shift_table", "last.modulation.lin")]
_KREA2_BLOCK_INV = [(".attn.to_q.", ".attn.wq."), (".attn.to_k.", ".attn.wk."), (".attn.to_v.", ".attn.wv."),
                    (".attn.to_out.0.", ".attn.wo."), (".attn.to_gate.", ".attn.gate."),
                    (".attn.norm_q.weight", ".attn.qknorm.qnorm.scale"),
                    (".attn.norm_k.weight", ".attn.qknorm.knorm.scale"), (".ff.", ".mlp."),
                    (".norm1.weight", ".prenorm.scale"), (".norm2.weight", ".postnorm.scale"),
                    (".scale_shift_table", ".mod.lin")]


def krea2_diffusers_to_original(key: str) -> str:
    """Krea2Transformer2DModel key -> original/ComfyUI key (the inverse of diffusers' converter)."""
    for new, old in _KREA2_PREFIX_INV:
        if key.startswith(new):
            key = old + key[len(new):]
            break
    if key.startswith(("blocks.", "txtfusion.")):
        for new, old in _KREA2_BLOCK_INV:
            key = key.replace(new, old)
    return key


_RES_INV = {"norm1.gamma": "residual.0.gamma", "conv1.weight": "residual.2.weight", "conv1.bias": "residual.2.bias",
            "norm2.gamma": "residual.3.gamma", "conv2.weight": "residual.6.weight", "conv2.bias": "residual.6.bias",
            "conv_shortcut.weight": "shortcut.weight", "conv_shortcut.bias": "shortcut.bias"}


def vae_diffusers_to_original(key: str, num_res_blocks: int = 2) -> str:
    """AutoencoderKLQwenImage key -> original Wan/Qwen VAE key."""
    if key.startswith("quant_conv."):
        return "conv1." + key.split(".", 1)[1]
    if key.startswith("post_quant_conv."):
        return "conv2." + key.split(".", 1)[1]
    side, _, rest = key.partition(".")
    if rest.startswith("conv_in."):
        return f"{side}.conv1.{rest.split('.', 1)[1]}"
    if rest == "norm_out.gamma":
        return f"{side}.head.0.gamma"
    if rest.startswith("conv_out."):
        return f"{side}.head.2.{rest.split('.', 1)[1]}"
    m = re.fullmatch(r"mid_block\.resnets\.(\d)\.(.+)", rest)
    if m:
        return f"{side}.middle.{2 * int(m.group(1))}.{_RES_INV[m.group(2)]}"
    m = re.fullmatch(r"mid_block\.attentions\.0\.(.+)", rest)
    if m:
        return f"{side}.middle.1.{m.group(1)}"
    m = re.fullmatch(r"down_blocks\.(\d+)\.(.+)", rest)
    if m:
        inner = _RES_INV.get(m.group(2), m.group(2))
        return f"encoder.downsamples.{m.group(1)}.{inner}"
    m = re.fullmatch(r"up_blocks\.(\d+)\.resnets\.(\d+)\.(.+)", rest)
    if m:
        idx = int(m.group(1)) * (num_res_blocks + 2) + int(m.group(2))
        return f"decoder.upsamples.{idx}.{_RES_INV[m.group(3)]}"
    m = re.fullmatch(r"up_blocks\.(\d+)\.upsamplers\.0\.(.+)", rest)
    if m:
        idx = int(m.group(1)) * (num_res_blocks + 2) + num_res_blocks + 1
        return f"decoder.upsamples.{idx}.{m.group(2)}"
    raise KeyError(f"no original name for VAE key {key}")


# --------------------------------------------------------------------------------------------- #
#                                          builders                                             #
# --------------------------------------------------------------------------------------------- #

def _write_comfy_tokenizer(tok, vocab, merges, folder: pathlib.Path):
    """The three files a ComfyUI qwen25_tokenizer folder has: vocab.json, merges.txt, tokenizer_config.json."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "vocab.json", "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
    with open(folder / "merges.txt", "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n")
        f.writelines(f"{a} {b}\n" for a, b in merges)
    added = {}
    for t in QWEN_SPECIAL + QWEN_ADDED:
        added[str(tok.convert_tokens_to_ids(t))] = {"content": t, "lstrip": False, "normalized": False,
                                                     "rstrip": False, "single_word": False,
                                                     "special": t in QWEN_SPECIAL}
    config = {"add_prefix_space": False, "added_tokens_decoder": added, "bos_token": None,
              "chat_template": QWEN_CHAT_TEMPLATE, "clean_up_tokenization_spaces": False,
              "eos_token": "<|im_end|>", "errors": "replace", "model_max_length": 131072,
              "pad_token": "<|endoftext|>", "split_special_tokens": False, "tokenizer_class": "Qwen2Tokenizer",
              "unk_token": None}
    with open(folder / "tokenizer_config.json", "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2, ensure_ascii=False)


def _build(seed: int):
    """The tiny Krea2Pipeline (toolkit's recipe) and its tokenizer's vocab and merges."""
    from toolkit.models.archs.krea2 import tiny
    from toolkit.models.tiny import build_pipeline
    return build_pipeline("krea2", seed), tiny.tokenizer()


def _transformer_file(transformer, float_dtype, prefix: str = "", every_linear: bool = False):
    """`every_linear`: every Linear weight FP8 (the embedders and projections too), as some real files."""
    import torch

    from toolkit.models.formats.scaled_fp8 import quantize_fp8
    tensors, layers = {}, {}
    linears = {n + ".weight" for n, m in transformer.named_modules() if isinstance(m, torch.nn.Linear)}
    for key, value in transformer.state_dict().items():
        orig = krea2_diffusers_to_original(key)
        value = value.detach()
        if orig.startswith("blocks.") and orig.endswith(".mod.lin"):
            value = value.reshape(-1)
        if _TRANSFORMER_QUANT.search(key) or (every_linear and key in linears):
            layer = orig[:-len(".weight")]
            q, s = quantize_fp8(value)
            tensors[prefix + orig] = q.contiguous()
            tensors[prefix + layer + ".weight_scale"] = s
            spec = {"format": "float8_e4m3fn"}
            if layer.endswith(".attn.gate") or (layer.startswith("txtfusion.") and layer.endswith(".mlp.down")):
                spec["full_precision_matrix_mult"] = True
            layers[prefix + layer] = spec
        else:
            tensors[prefix + orig] = value.to(float_dtype).contiguous()
    metadata = {"_quantization_metadata": json.dumps({"format_version": "1.0", "layers": layers}, sort_keys=True)}
    return tensors, metadata, layers


def _text_encoder_file(text_encoder, float_dtype):

    from toolkit.models.formats.scaled_fp8 import quantize_fp8
    tensors, layers = {}, {}
    for key, value in text_encoder.state_dict().items():
        value = value.detach()
        if key.startswith("language_model."):
            orig = "model." + key[len("language_model."):]
        elif key.startswith("visual."):
            orig = key
        else:
            raise KeyError(f"unexpected Qwen3VLModel key {key}")
        if _TEXT_QUANT.search(key):
            layer = orig[:-len(".weight")]
            q, s = quantize_fp8(value)
            spec = {"format": "float8_e4m3fn"}
            if layer.endswith("mlp.down_proj"):
                spec["full_precision_matrix_mult"] = True
            tensors[orig] = q.contiguous()
            tensors[layer + ".weight_scale"] = s
            tensors[layer + ".comfy_quant"] = _marker(spec)
            layers[layer] = spec
        else:
            tensors[orig] = value.to(float_dtype).contiguous()
    return tensors, {}, layers


def _marker(spec: dict):
    import torch
    return torch.tensor(list(json.dumps(spec, sort_keys=True).encode("utf-8")), dtype=torch.uint8)


def _vae_file(vae, dtype):
    nrb = vae.config.num_res_blocks
    return {vae_diffusers_to_original(k, nrb): v.detach().to(dtype).contiguous() for k, v in vae.state_dict().items()}


def _save(tensors: dict, path: pathlib.Path, metadata: dict | None = None):
    from safetensors.torch import save_file
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file(dict(sorted(tensors.items())), str(path), metadata=metadata or None)


def make_tiny_krea2(root, seed: int = 0, *, float_dtype=None, vae_dtype=None, every_linear: bool = False) -> dict:
    """Write the tiny Krea 2 under `root` (see the module docstring) and return:

    {"root", "pipeline" (the diffusers folder), "diffusion_model", "text_encoder", "vae", "tokenizer"
     (ComfyUI files / folder), "select_layers" (2, 5, 8), "seed",
     "quantized_layers": {"diffusion_model": 48, "text_encoder": 56},
     "full_precision_matrix_mult": {"diffusion_model": 10, "text_encoder": 8},
     "ignored_text_encoder_keys": [the visual.* keys]}

    `float_dtype` (default bfloat16): storage of the non-quantized tensors in the two FP8 files, as
    in the real ones; `vae_dtype` (default float32) the VAE file's; `every_linear`: the diffusion model
    with every Linear FP8, the embedders and projections too.
    """
    import torch
    float_dtype = float_dtype or torch.bfloat16
    vae_dtype = vae_dtype or torch.float32
    root = pathlib.Path(root)
    pipe, (tok, vocab, merges) = _build(seed)
    folder = root / "diffusers"
    pipe.save_pretrained(str(folder), safe_serialization=True)
    comfy_root = root / "comfy"
    t_tensors, t_meta, t_layers = _transformer_file(pipe.transformer, float_dtype, every_linear=every_linear)
    _save(t_tensors, comfy_root / DIFFUSION_FILE, t_meta)
    e_tensors, e_meta, e_layers = _text_encoder_file(pipe.text_encoder, float_dtype)
    _save(e_tensors, comfy_root / TEXT_ENCODER_FILE, e_meta)
    _save(_vae_file(pipe.vae, vae_dtype), comfy_root / VAE_FILE)
    _write_comfy_tokenizer(tok, vocab, merges, comfy_root / TOKENIZER_DIR)
    return {
        "root": str(root), "pipeline": str(folder), "seed": seed, "select_layers": TAPS,
        "diffusion_model": str(comfy_root / DIFFUSION_FILE), "text_encoder": str(comfy_root / TEXT_ENCODER_FILE),
        "vae": str(comfy_root / VAE_FILE), "tokenizer": str(comfy_root / TOKENIZER_DIR),
        "quantized_layers": {"diffusion_model": len(t_layers), "text_encoder": len(e_layers)},
        "full_precision_matrix_mult": {
            "diffusion_model": sum(1 for s in t_layers.values() if s.get("full_precision_matrix_mult")),
            "text_encoder": sum(1 for s in e_layers.values() if s.get("full_precision_matrix_mult"))},
        "ignored_text_encoder_keys": sorted(k for k in e_tensors if k.startswith("visual.")),
    }


_MARKER = ".tiny_krea2.json"


def cached_tiny_krea2(root, seed: int = 0) -> dict:
    """make_tiny_krea2 into `root`/seed<N> once: later calls (other test modules, other processes)
    reuse the finished folder. Built in a temporary sibling and renamed into place when complete."""
    import shutil
    import tempfile
    folder = pathlib.Path(root) / f"seed{seed}"
    marker = folder / _MARKER
    if marker.is_file():
        with open(marker) as f:
            return json.load(f)
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = pathlib.Path(tempfile.mkdtemp(prefix=f".seed{seed}-", dir=folder.parent))
    try:
        info = make_tiny_krea2(tmp, seed)
        text = json.dumps(info, indent=2).replace(str(tmp), str(folder))
        (tmp / _MARKER).write_text(text)
        try:
            os.rename(tmp, folder)
        except OSError:          # another process finished first
            if not marker.is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    with open(marker) as f:
        return json.load(f)


# --------------------------------------------------------------------------------------------- #
#                                 variants for rejection tests                                  #
# --------------------------------------------------------------------------------------------- #

CORRUPTIONS = {
    # kind: (components it applies to, the quant.Problem kind the readers must report)
    "missing_scale": (("transformer", "text_encoder"), "missing_scale"),
    "non_scalar_scale": (("transformer", "text_encoder"), "non_scalar_scale"),
    "nvfp4": (("transformer", "text_encoder"), "unsupported_format"),
    "int8_format": (("transformer", "text_encoder"), "unsupported_format"),
    "mixed_format": (("transformer", "text_encoder"), "unsupported_format"),
    "unknown_option": (("transformer", "text_encoder"), "unsupported_option"),
    "fp8_conv": (("transformer", "text_encoder", "vae"), "fp8_convolution"),
    "quantized_bias": (("transformer", "text_encoder"), "quantized_bias"),
    "int8_storage": (("transformer", "text_encoder"), "unsupported_storage"),
    "int_plain_storage": (("transformer", "text_encoder", "vae"), "unsupported_storage"),
    "fp4_storage": (("transformer", "text_encoder"), "unsupported_storage"),
    "metadata_not_f8": (("transformer", "text_encoder"), "inconsistent_metadata"),
    "f8_without_metadata": (("transformer", "text_encoder", "vae"), "inconsistent_metadata"),
    "scale_without_metadata": (("transformer", "text_encoder"), "inconsistent_metadata"),
    "comfy_quant_disagrees": (("transformer", "text_encoder"), "inconsistent_metadata"),
    "bad_metadata_json": (("transformer", "text_encoder", "vae"), "malformed_metadata"),
    "legacy_scaled_fp8": (("transformer", "text_encoder"), "legacy_format"),
    "unexpected_key": (("transformer", "text_encoder", "vae"), "unexpected_key"),
    "missing_key": (("transformer", "text_encoder", "vae"), "missing_key"),
}
RESTYLES = ("prefix", "metadata_to_markers", "markers_to_metadata", "both_markers", "input_scale", "lm_head")


def _load(src):
    from safetensors import safe_open
    from safetensors.torch import load_file
    with safe_open(str(src), framework="pt") as f:
        metadata = dict(f.metadata() or {})
    return dict(load_file(str(src))), metadata


def _component_of(tensors: dict) -> tuple[str, str]:
    for prefix in ("model.diffusion_model.", ""):
        if prefix + "txtfusion.projector.weight" in tensors:
            return "transformer", prefix
    if "model.embed_tokens.weight" in tensors:
        return "text_encoder", "model."
    if "decoder.conv1.weight" in tensors:
        return "vae", ""
    raise ValueError("not one of the tiny Krea 2 files")


def _manifest(tensors: dict, metadata: dict) -> dict:
    """Full layer name -> spec, from whichever marker form the file uses."""
    if "_quantization_metadata" in metadata:
        return dict(json.loads(metadata["_quantization_metadata"])["layers"])
    return {k[:-len(".comfy_quant")]: json.loads(bytes(v.tolist()).decode())
            for k, v in tensors.items() if k.endswith(".comfy_quant")}


def _set_manifest(tensors: dict, metadata: dict, layers: dict, form: str | None = None):
    """Write `layers` in the file's marker form (or `form`: "metadata" / "markers" / "both")."""
    if form is None:
        form = "metadata" if "_quantization_metadata" in metadata else "markers"
    for k in [k for k in tensors if k.endswith(".comfy_quant")]:
        del tensors[k]
    metadata.pop("_quantization_metadata", None)
    if form in ("metadata", "both"):
        metadata["_quantization_metadata"] = json.dumps({"format_version": "1.0", "layers": layers}, sort_keys=True)
    if form in ("markers", "both"):
        for layer, spec in layers.items():
            tensors[layer + ".comfy_quant"] = _marker(spec)


def corrupt_variant(src, dst, kind: str) -> dict:
    """Write to `dst` a copy of the tiny ComfyUI file `src` broken in one way (`kind` in CORRUPTIONS).
    Returns {"kind", "component", "problem" (the quant.Problem kind expected), "layer" (the layer or
    key the error must name, checkpoint prefix stripped)}."""
    import torch
    tensors, metadata = _load(src)
    component, prefix = _component_of(tensors)
    if kind not in CORRUPTIONS:
        raise ValueError(f"unknown corruption {kind!r}; expected one of {', '.join(CORRUPTIONS)}")
    if component not in CORRUPTIONS[kind][0]:
        raise ValueError(f"corruption {kind!r} does not apply to a {component} file")
    layers = _manifest(tensors, metadata)
    quantized = sorted(layers)
    full = quantized[0] if quantized else None
    layer = full[len(prefix):] if full else None
    plain = sorted(k for k, v in tensors.items() if v.ndim == 2 and k.endswith(".weight") and k[:-7] not in layers
                   and not k.startswith("visual.") and v.dtype != torch.uint8)

    def fp8(shape):
        return torch.zeros(shape).to(torch.float8_e4m3fn)

    if kind == "missing_scale":
        del tensors[full + ".weight_scale"]
    elif kind == "non_scalar_scale":
        w = tensors[full + ".weight"]
        tensors[full + ".weight_scale"] = tensors[full + ".weight_scale"].reshape(1).expand(w.shape[0]).clone()
    elif kind in ("nvfp4", "fp4_storage"):
        w = tensors[full + ".weight"]
        out, inp = w.shape
        tensors[full + ".weight"] = torch.zeros(out, inp // 2, dtype=torch.uint8)         # two FP4 values a byte
        tensors[full + ".weight_scale"] = fp8((out, max(inp // 16, 1)))                   # per-16 block scales
        tensors[full + ".weight_scale_2"] = torch.tensor(1.0)
        if kind == "nvfp4":
            layers[full] = {"format": "nvfp4"}
            _set_manifest(tensors, metadata, layers)
    elif kind == "int8_format":
        w = tensors[full + ".weight"]
        tensors[full + ".weight"] = torch.zeros(w.shape, dtype=torch.int8)
        tensors[full + ".weight_scale"] = torch.ones(w.shape[0], 1)
        layers[full] = {"format": "int8_tensorwise", "convrot": True, "convrot_groupsize": 256}
        _set_manifest(tensors, metadata, layers)
    elif kind == "mixed_format":
        # the mixed INT8/INT4/FP8 checkpoint: its keys still look like Krea 2 / Qwen3-VL
        for name, fmt in zip(quantized[:3], ("int8_tensorwise", "asym_w4a8_int8", "nvfp4")):
            w = tensors[name + ".weight"]
            out, inp = w.shape
            if fmt == "int8_tensorwise":
                tensors[name + ".weight"] = torch.zeros(w.shape, dtype=torch.int8)
                tensors[name + ".weight_scale"] = torch.ones(out, 1)
            elif fmt == "asym_w4a8_int8":
                tensors[name + ".weight"] = torch.zeros(out, inp // 2, dtype=torch.uint8)
                tensors[name + ".weight_scale"] = torch.ones(out, 1)
                tensors[name + ".weight_zero_point"] = torch.zeros(out, 1)
            else:
                tensors[name + ".weight"] = torch.zeros(out, inp // 2, dtype=torch.uint8)
                tensors[name + ".weight_scale"] = fp8((out, max(inp // 16, 1)))
                tensors[name + ".weight_scale_2"] = torch.tensor(1.0)
            layers[name] = {"format": fmt}
        _set_manifest(tensors, metadata, layers)
    elif kind == "unknown_option":
        layers[full] = dict(layers[full], group_size=128)
        _set_manifest(tensors, metadata, layers)
    elif kind == "fp8_conv":
        if component == "vae":
            full = "decoder.head.2"
            layer = full
            w = tensors[full + ".weight"]
            q, s = _quantize(w)
            tensors[full + ".weight"], tensors[full + ".weight_scale"] = q, s
            metadata["_quantization_metadata"] = json.dumps({"layers": {full: {"format": "float8_e4m3fn"}}})
        else:
            w = tensors[full + ".weight"]
            tensors[full + ".weight"] = w.reshape(*w.shape, 1, 1).contiguous()
    elif kind == "quantized_bias":
        w = tensors[full + ".weight"]
        tensors[full + ".bias"] = fp8((w.shape[0],))
    elif kind == "int8_storage":
        tensors[full + ".weight"] = tensors[full + ".weight"].view(torch.int8).clone()
    elif kind == "int_plain_storage":
        full = plain[0] if component != "vae" else "decoder.conv1.weight"
        tensors[full] = torch.zeros(tensors[full].shape, dtype=torch.int8)
        layer = full[len(prefix):].rsplit(".", 1)[0]
    elif kind == "metadata_not_f8":
        w = tensors[full + ".weight"]
        tensors[full + ".weight"] = (w.float() * tensors[full + ".weight_scale"]).to(torch.bfloat16)
    elif kind == "f8_without_metadata":
        if component == "vae":
            full = "decoder.conv1"
            layer = full
            tensors[full + ".weight"] = tensors[full + ".weight"].to(torch.float8_e4m3fn)
        else:
            del layers[full]
            _set_manifest(tensors, metadata, layers)
    elif kind == "scale_without_metadata":
        full = plain[0][:-len(".weight")]
        layer = full[len(prefix):]
        tensors[full + ".weight_scale"] = torch.tensor(1.0)
    elif kind == "comfy_quant_disagrees":
        other = dict(layers)
        other[full] = dict(layers[full], full_precision_matrix_mult=not layers[full].get("full_precision_matrix_mult",
                                                                                          False))
        if "_quantization_metadata" in metadata:      # metadata form: add markers that disagree on one layer
            for name, spec in other.items():
                tensors[name + ".comfy_quant"] = _marker(spec)
        else:                                          # marker form: add file metadata that disagrees
            metadata["_quantization_metadata"] = json.dumps({"layers": other}, sort_keys=True)
    elif kind == "bad_metadata_json":
        metadata["_quantization_metadata"] = "{\"layers\": {not json"
        layer = "_quantization_metadata"
    elif kind == "legacy_scaled_fp8":
        tensors[full + ".scale_weight"] = tensors.pop(full + ".weight_scale")
        tensors[prefix + "scaled_fp8"] = torch.zeros(2, dtype=torch.float8_e4m3fn)
        layer = layer + ".scale_weight"
    elif kind == "unexpected_key":
        name = {"transformer": prefix + "blocks.0.attn.extra.weight",
                "text_encoder": "model.layers.0.self_attn.extra.weight", "vae": "decoder.extra.weight"}[component]
        tensors[name] = torch.zeros(4, 4, dtype=torch.bfloat16)
        layer = name[len(prefix):]
    elif kind == "missing_key":
        name, target = {"transformer": ("blocks.1.prenorm.scale", "transformer_blocks.1.norm1.weight"),
                        "text_encoder": ("layers.1.input_layernorm.weight", "layers.1.input_layernorm.weight"),
                        "vae": ("decoder.middle.1.proj.weight", "decoder.mid_block.attentions.0.proj.weight")
                        }[component]
        del tensors[prefix + name]
        layer = target
    _save(tensors, pathlib.Path(dst), metadata)
    return {"kind": kind, "component": component, "problem": CORRUPTIONS[kind][1], "layer": layer}


def _quantize(w):
    from toolkit.models.formats.scaled_fp8 import quantize_fp8
    return quantize_fp8(w)


def restyle_variant(src, dst, kind: str) -> dict:
    """A valid alternative of a tiny ComfyUI file (`kind` in RESTYLES): "prefix" (keys and metadata
    under model.diffusion_model.), "metadata_to_markers" / "markers_to_metadata" (the other marker
    form), "both_markers" (both forms, agreeing), "input_scale" (a scalar input_scale on every FP8
    layer), "lm_head" (a text encoder with a scaled-FP8 lm_head and its marker, which are ignored)."""
    import torch
    tensors, metadata = _load(src)
    component, prefix = _component_of(tensors)
    layers = _manifest(tensors, metadata)
    if kind == "prefix":
        if component != "transformer" or prefix:
            raise ValueError("prefix applies to an unprefixed diffusion model file")
        tensors = {"model.diffusion_model." + k: v for k, v in tensors.items()}
        _set_manifest(tensors, metadata, {"model.diffusion_model." + k: v for k, v in layers.items()})
    elif kind == "metadata_to_markers":
        _set_manifest(tensors, metadata, layers, "markers")
    elif kind == "markers_to_metadata":
        _set_manifest(tensors, metadata, layers, "metadata")
    elif kind == "both_markers":
        _set_manifest(tensors, metadata, layers, "both")
    elif kind == "input_scale":
        for layer in layers:
            tensors[layer + ".input_scale"] = torch.tensor(8.0 / 448.0)
    elif kind == "lm_head":
        if component != "text_encoder":
            raise ValueError("lm_head applies to a text encoder file")
        # a scaled-FP8 lm_head with its own marker: ignored as a whole, marker included
        q, s = _quantize(tensors["model.embed_tokens.weight"].float())
        tensors["lm_head.weight"], tensors["lm_head.weight_scale"] = q, s
        layers["lm_head"] = {"format": "float8_e4m3fn"}
        _set_manifest(tensors, metadata, layers)
    else:
        raise ValueError(f"unknown restyle {kind!r}; expected one of {', '.join(RESTYLES)}")
    _save(tensors, pathlib.Path(dst), metadata)
    return {"kind": kind, "component": component}


if __name__ == "__main__":      # python -m testing.tiny_krea2 OUT_DIR [SEED]
    import sys
    print(json.dumps(make_tiny_krea2(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 0), indent=2))

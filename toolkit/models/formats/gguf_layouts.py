"""The original (non-diffusers) key layouts GGUF denoisers are published in, and their conversion.

Real GGUF files (city96's and the ones made with his tools) hold the model's *original* checkpoint
keys: Flux in BFL names (`double_blocks.N.img_attn.qkv.weight`), SD3 in MMDiT names
(`joint_blocks.N.x_block.attn.qkv.weight`), Wan in Wan's (`blocks.N.self_attn.q.weight`), Z-Image
in its NextDiT names (`layers.N.attention.qkv.weight`), Qwen-Image in the names diffusers also uses.
Their `general.architecture` is ComfyUI-GGUF's: flux, sd3, wan, lumina2 (Z-Image), qwen_image.

- `to_diffusers(cls_name, checkpoint, shapes)`: original -> diffusers keys for the reader. diffusers'
  own `from_single_file` converter where it is width-independent (SD3, Wan, Z-Image, Qwen-Image);
  for Flux the table below, because diffusers' Flux converter splits a single block's fused
  `linear1` at FLUX.1's fixed width (3072) and so cannot read any other width.
- `to_original(cls_name, state_dict)`: diffusers -> original keys, for the tiny factory's files.

Fused tensors (q|k|v, q|k|v|mlp) are split along rows, which works on quantized bytes too (a GGML
block never crosses a row). Every key must be consumed and every expected key produced: a key left
over is an error naming it.
"""
import re

# diffusers class -> the `general.architecture` its GGUF files carry (ComfyUI-GGUF's names)
GGUF_ARCH = {"FluxTransformer2DModel": "flux", "SD3Transformer2DModel": "sd3", "WanTransformer3DModel": "wan",
             "ZImageTransformer2DModel": "lumina2", "QwenImageTransformer2DModel": "qwen_image"}
PREFIXES = ("model.diffusion_model.", "diffusion_model.")
# a key a class's files always carry, where one `general.architecture` covers several models
# (ComfyUI-GGUF names Lumina-Image-2.0 and Z-Image both lumina2; only Z-Image has pad tokens)
ANCHOR = {"ZImageTransformer2DModel": "x_pad_token"}


class LayoutError(ValueError):
    """A checkpoint whose keys do not fit the layout; the message names the keys."""


# -- fused/renamed tensors: (original key, [diffusers keys], swap scale/shift) per block ------------------
def _lin(o, d):
    return [(f"{o}.weight", [f"{d}.weight"]), (f"{o}.bias", [f"{d}.bias"])]


def _fused(o, ds, bias=True):
    out = [(f"{o}.weight", [f"{d}.weight" for d in ds])]
    return out + ([(f"{o}.bias", [f"{d}.bias" for d in ds])] if bias else [])


def _flux_table(n_double, n_single):
    t = (_lin("time_in.in_layer", "time_text_embed.timestep_embedder.linear_1")
         + _lin("time_in.out_layer", "time_text_embed.timestep_embedder.linear_2")
         + _lin("vector_in.in_layer", "time_text_embed.text_embedder.linear_1")
         + _lin("vector_in.out_layer", "time_text_embed.text_embedder.linear_2")
         + _lin("guidance_in.in_layer", "time_text_embed.guidance_embedder.linear_1")
         + _lin("guidance_in.out_layer", "time_text_embed.guidance_embedder.linear_2")
         + _lin("txt_in", "context_embedder") + _lin("img_in", "x_embedder"))
    for i in range(n_double):
        o, d = f"double_blocks.{i}", f"transformer_blocks.{i}"
        t += _lin(f"{o}.img_mod.lin", f"{d}.norm1.linear") + _lin(f"{o}.txt_mod.lin", f"{d}.norm1_context.linear")
        t += _fused(f"{o}.img_attn.qkv", [f"{d}.attn.to_q", f"{d}.attn.to_k", f"{d}.attn.to_v"])
        t += _fused(f"{o}.txt_attn.qkv", [f"{d}.attn.add_q_proj", f"{d}.attn.add_k_proj", f"{d}.attn.add_v_proj"])
        for side, q, k in (("img", "norm_q", "norm_k"), ("txt", "norm_added_q", "norm_added_k")):
            t += [(f"{o}.{side}_attn.norm.query_norm.scale", [f"{d}.attn.{q}.weight"]),
                  (f"{o}.{side}_attn.norm.key_norm.scale", [f"{d}.attn.{k}.weight"])]
        t += _lin(f"{o}.img_mlp.0", f"{d}.ff.net.0.proj") + _lin(f"{o}.img_mlp.2", f"{d}.ff.net.2")
        t += _lin(f"{o}.txt_mlp.0", f"{d}.ff_context.net.0.proj") + _lin(f"{o}.txt_mlp.2", f"{d}.ff_context.net.2")
        t += _lin(f"{o}.img_attn.proj", f"{d}.attn.to_out.0") + _lin(f"{o}.txt_attn.proj", f"{d}.attn.to_add_out")
    for i in range(n_single):
        o, d = f"single_blocks.{i}", f"single_transformer_blocks.{i}"
        t += _lin(f"{o}.modulation.lin", f"{d}.norm.linear")
        t += _fused(f"{o}.linear1", [f"{d}.attn.to_q", f"{d}.attn.to_k", f"{d}.attn.to_v", f"{d}.proj_mlp"])
        t += [(f"{o}.norm.query_norm.scale", [f"{d}.attn.norm_q.weight"]),
              (f"{o}.norm.key_norm.scale", [f"{d}.attn.norm_k.weight"])]
        t += _lin(f"{o}.linear2", f"{d}.proj_out")
    t += _lin("final_layer.linear", "proj_out")
    return [(o, ds, False) for o, ds in t] + [(f"final_layer.adaLN_modulation.1.{p}", [f"norm_out.linear.{p}"], True)
                                              for p in ("weight", "bias")]


def _sd3_table(n, dual):
    t = [("pos_embed", ["pos_embed.pos_embed"])] + _lin("x_embedder.proj", "pos_embed.proj")
    t += (_lin("t_embedder.mlp.0", "time_text_embed.timestep_embedder.linear_1")
          + _lin("t_embedder.mlp.2", "time_text_embed.timestep_embedder.linear_2")
          + _lin("context_embedder", "context_embedder")
          + _lin("y_embedder.mlp.0", "time_text_embed.text_embedder.linear_1")
          + _lin("y_embedder.mlp.2", "time_text_embed.text_embedder.linear_2"))
    swapped = []
    for i in range(n):
        o, d, last = f"joint_blocks.{i}", f"transformer_blocks.{i}", i == n - 1
        t += _fused(f"{o}.x_block.attn.qkv", [f"{d}.attn.to_q", f"{d}.attn.to_k", f"{d}.attn.to_v"])
        t += _fused(f"{o}.context_block.attn.qkv", [f"{d}.attn.add_q_proj", f"{d}.attn.add_k_proj", f"{d}.attn.add_v_proj"])
        t += [(f"{o}.x_block.attn.ln_q.weight", [f"{d}.attn.norm_q.weight"]),
              (f"{o}.x_block.attn.ln_k.weight", [f"{d}.attn.norm_k.weight"]),
              (f"{o}.context_block.attn.ln_q.weight", [f"{d}.attn.norm_added_q.weight"]),
              (f"{o}.context_block.attn.ln_k.weight", [f"{d}.attn.norm_added_k.weight"])]
        t += _lin(f"{o}.x_block.attn.proj", f"{d}.attn.to_out.0")
        if i in dual:
            t += _fused(f"{o}.x_block.attn2.qkv", [f"{d}.attn2.to_q", f"{d}.attn2.to_k", f"{d}.attn2.to_v"])
            t += [(f"{o}.x_block.attn2.ln_q.weight", [f"{d}.attn2.norm_q.weight"]),
                  (f"{o}.x_block.attn2.ln_k.weight", [f"{d}.attn2.norm_k.weight"])]
            t += _lin(f"{o}.x_block.attn2.proj", f"{d}.attn2.to_out.0")
        t += _lin(f"{o}.x_block.adaLN_modulation.1", f"{d}.norm1.linear")
        t += _lin(f"{o}.x_block.mlp.fc1", f"{d}.ff.net.0.proj") + _lin(f"{o}.x_block.mlp.fc2", f"{d}.ff.net.2")
        ctx = _lin(f"{o}.context_block.adaLN_modulation.1", f"{d}.norm1_context.linear")
        if last:
            swapped += ctx
        else:
            t += ctx + _lin(f"{o}.context_block.attn.proj", f"{d}.attn.to_add_out")
            t += (_lin(f"{o}.context_block.mlp.fc1", f"{d}.ff_context.net.0.proj")
                  + _lin(f"{o}.context_block.mlp.fc2", f"{d}.ff_context.net.2"))
    t += _lin("final_layer.linear", "proj_out")
    swapped += _lin("final_layer.adaLN_modulation.1", "norm_out.linear")
    return [(o, ds, False) for o, ds in t] + [(o, ds, True) for o, ds in swapped]


def _blocks(keys, pattern):
    return 1 + max((int(m[1]) for k in keys if (m := re.match(pattern, k))), default=-1)


def _table(cls_name, keys, original: bool):
    """The fused/renamed table of a Flux or SD3 checkpoint, sized from its keys (original or diffusers)."""
    if cls_name == "FluxTransformer2DModel":
        pats = (r"double_blocks\.(\d+)\.", r"single_blocks\.(\d+)\.") if original else \
            (r"transformer_blocks\.(\d+)\.", r"single_transformer_blocks\.(\d+)\.")
        return _flux_table(_blocks(keys, pats[0]), _blocks(keys, pats[1]))
    pat = r"joint_blocks\.(\d+)\." if original else r"transformer_blocks\.(\d+)\."
    dual_pat = r"joint_blocks\.(\d+)\.x_block\.attn2\." if original else r"transformer_blocks\.(\d+)\.attn2\."
    dual = {int(m[1]) for k in keys if (m := re.match(dual_pat, k))}
    return _sd3_table(_blocks(keys, pat), dual)


def _swap(t):
    import torch
    a, b = t.chunk(2, dim=0)
    return torch.cat([b, a], dim=0)


# -- renaming layouts (Wan, Z-Image): diffusers -> original, the inverse of diffusers' rename dicts -------
_WAN_TO_ORIGINAL = (
    ("condition_embedder.time_embedder.linear_1", "time_embedding.0"),
    ("condition_embedder.time_embedder.linear_2", "time_embedding.2"),
    ("condition_embedder.text_embedder.linear_1", "text_embedding.0"),
    ("condition_embedder.text_embedder.linear_2", "text_embedding.2"),
    ("condition_embedder.time_proj", "time_projection.1"),
    ("attn2", "cross_attn"), ("attn1", "self_attn"),
    (".to_out.0.", ".o."), (".to_q.", ".q."), (".to_k.", ".k."), (".to_v.", ".v."),
    (".add_k_proj.", ".k_img."), (".add_v_proj.", ".v_img."), (".norm_added_k.", ".norm_k_img."),
    ("ffn.net.0.proj", "ffn.0"), ("ffn.net.2", "ffn.2"),
    ("norm2", "norm__swap"), ("norm3", "norm2"), ("norm__swap", "norm3"),
    ("proj_out", "head.head"),
)
_ZIMAGE_TO_ORIGINAL = (
    ("all_final_layer.2-1.", "final_layer."), ("all_x_embedder.2-1.", "x_embedder."),
    (".attention.to_out.0.", ".attention.out."), (".attention.norm_k.", ".attention.k_norm."),
    (".attention.norm_q.", ".attention.q_norm."),
)


def _renamed(key, pairs):
    for a, b in pairs:
        key = key.replace(a, b)
    return key


def to_original(cls_name: str, state_dict: dict) -> dict:
    """A diffusers state dict -> the original layout GGUF files use (a new dict; tensors shared or fused)."""
    import torch

    if cls_name not in GGUF_ARCH:
        raise LayoutError(f"no GGUF layout for {cls_name}")
    sd = dict(state_dict)
    out = {}
    if cls_name in ("FluxTransformer2DModel", "SD3Transformer2DModel"):
        for orig, parts, swap in _table(cls_name, sd, original=False):
            if not all(p in sd for p in parts):
                continue
            t = torch.cat([sd.pop(p) for p in parts], dim=0)
            out[orig] = _swap(t) if swap else t
        if sd:
            raise LayoutError(f"{cls_name}: {len(sd)} keys have no original name (e.g. {', '.join(sorted(sd)[:3])})")
        return out
    if cls_name == "WanTransformer3DModel":
        for k, v in sd.items():
            out["head.modulation" if k == "scale_shift_table" else
                _renamed(k, _WAN_TO_ORIGINAL).replace(".scale_shift_table", ".modulation")] = v
        return out
    if cls_name == "ZImageTransformer2DModel":
        for k in list(sd):
            m = re.match(r"(.*\.attention\.)to_q\.weight$", k)
            if m:
                out[_renamed(m[1], _ZIMAGE_TO_ORIGINAL) + "qkv.weight"] = torch.cat(
                    [sd.pop(m[1] + f"to_{x}.weight") for x in "qkv"], dim=0)
        for k, v in sd.items():
            if not re.search(r"\.attention\.to_[kv]\.weight$", k):
                out[_renamed(k, _ZIMAGE_TO_ORIGINAL)] = v
        return out
    return sd                         # Qwen-Image: the original names are diffusers'


def strip_prefix(keys) -> str:
    """The checkpoint prefix all of `keys` share (ComfyUI's `model.diffusion_model.`), or ""."""
    keys = list(keys)
    for p in PREFIXES:
        if keys and all(k.startswith(p) for k in keys):
            return p
    return ""


def to_diffusers(cls_name: str, checkpoint: dict, shapes: dict, config: dict) -> dict:
    """Original keys -> diffusers keys. `shapes`: the model's own {key: shape} (rows to split fused
    tensors at). Raises LayoutError naming keys left over or missing."""
    from diffusers.loaders.single_file_model import SINGLE_FILE_LOADABLE_CLASSES

    ckpt = dict(checkpoint)
    if cls_name == "FluxTransformer2DModel":
        out = {}
        for orig, parts, swap in _table(cls_name, ckpt, original=True):
            if orig not in ckpt:
                continue
            t = ckpt.pop(orig)
            t = _swap(t) if swap else t
            rows = [shapes[p][0] if p in shapes else -1 for p in parts]
            if -1 in rows or sum(rows) != t.shape[0]:
                raise LayoutError(f"{orig}: {t.shape[0]} rows do not split into {', '.join(parts)}")
            for p, piece in zip(parts, t.split(rows, dim=0)):
                out[p] = piece
    else:
        fn = SINGLE_FILE_LOADABLE_CLASSES[cls_name]["checkpoint_mapping_fn"]
        out = fn(checkpoint=ckpt, config=config)
        if out is ckpt:
            ckpt = {}
        ckpt.pop("norm_final.weight", None)     # Z-Image's unused final norm, which diffusers drops too
    if ckpt:
        raise LayoutError(f"{len(ckpt)} keys were not consumed (e.g. {', '.join(sorted(ckpt)[:3])})")
    missing = sorted(set(shapes) - set(out))
    extra = sorted(set(out) - set(shapes))
    if missing or extra:
        what = [f"missing {', '.join(missing[:3])}"] if missing else []
        what += [f"unexpected {', '.join(extra[:3])}"] if extra else []
        raise LayoutError(f"{len(missing)} missing and {len(extra)} unexpected weights ({'; '.join(what)})")
    return out

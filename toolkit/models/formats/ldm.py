"""The LDM (CompVis/Stability) layouts every SD 1.x, 2.x and SDXL checkpoint uses, for the UNet and the
KL VAE: their config from a file's shapes, diffusers' converters to library names, and the inverses
the tiny factory writes files with.

UNet (`input_blocks.N.M`, `middle_block`, `output_blocks`, `time_embed.0/2`, `out.0/2`, SDXL's
`label_emb.0.0/2`): a shape tells the channels of each level, the resnets per level, which levels
attend and how deep, the text width, linear or conv projections, SDXL's added-condition width. It
does not tell the attention heads, the norm groups or the sample size: those come from the arch's
known configs (`unet_config(view, known)` returns the known config whose shape facts equal the
file's). VAE (`encoder.down.N.block.M`, `mid.attn_1.q` as 1x1 convs, `nin_shortcut`): the same,
with norm groups, scale and shift from the known configs or the arch's facts.

The signature functions are torch-free (the detector calls them on a header); the converters and
inverses import torch.
"""
import re

from toolkit.models.formats.file_view import FileConfig, FileKindError, mismatch

UNET_PREFIX = "model.diffusion_model."     # diffusers' converter finds the UNet under this prefix
VAE_PREFIX = "first_stage_model."

# what a UNet's shapes tell; a known config must equal the file's in each of these
UNET_FACTS = ("in_channels", "out_channels", "block_out_channels", "layers_per_block", "down_block_types",
              "up_block_types", "cross_attention_dim", "transformer_layers_per_block", "use_linear_projection",
              "projection_class_embeddings_input_dim")
VAE_FACTS = ("in_channels", "out_channels", "latent_channels", "block_out_channels", "layers_per_block",
             "use_quant_conv", "use_post_quant_conv")


# -- UNet --------------------------------------------------------------------------------------------
def unet_signature(view) -> dict:
    """The UNet config facts a file's shapes tell (diffusers UNet2DConditionModel names)."""
    if not view.has("input_blocks.0.0.weight"):
        raise FileKindError("no input_blocks.0.0.weight: not an LDM UNet")
    blocks = view.count(r"input_blocks\.(\d+)\.")
    channels, attends, depth = [], [], []
    level_channels, level_res, level_attn, level_depth = None, 0, False, 0
    per_level = []
    for n in range(1, blocks):
        if view.has(f"input_blocks.{n}.0.op.weight"):        # a downsample closes the level
            per_level.append((level_channels, level_res, level_attn, level_depth))
            level_channels, level_res, level_attn, level_depth = None, 0, False, 0
            continue
        level_channels = view.dim(f"input_blocks.{n}.0.out_layers.3.weight")
        level_res += 1
        if view.has(f"input_blocks.{n}.1.proj_in.weight"):
            level_attn = True
            level_depth = view.count(rf"input_blocks\.{n}\.1\.transformer_blocks\.(\d+)\.")
    per_level.append((level_channels, level_res, level_attn, level_depth))
    for c, _res, attn, d in per_level:
        channels.append(c)
        attends.append(attn)
        depth.append(d if attn else 1)
    lpb = {res for _c, res, _a, _d in per_level}
    if len(lpb) != 1:
        raise FileKindError(f"levels have {sorted(lpb)} resnets each: not a UNet layout this loader knows")
    attn_key = next((k for k in view.keys(r".*attn2\.to_k\.weight$")), None)
    proj = next((k for k in view.keys(r"input_blocks\.\d+\.1\.proj_in\.weight$")), None)
    sig = {
        "in_channels": view.dim("input_blocks.0.0.weight", 1), "out_channels": view.dim("out.2.weight"),
        "block_out_channels": channels, "layers_per_block": lpb.pop(),
        "down_block_types": ["CrossAttnDownBlock2D" if a else "DownBlock2D" for a in attends],
        "up_block_types": ["CrossAttnUpBlock2D" if a else "UpBlock2D" for a in reversed(attends)],
        "cross_attention_dim": view.dim(attn_key, 1) if attn_key else None,
        "transformer_layers_per_block": depth if any(d > 1 for d in depth) else 1,
        "use_linear_projection": bool(proj) and len(view.shape(proj)) == 2,
        "projection_class_embeddings_input_dim": view.dim("label_emb.0.0.weight", 1)
        if view.has("label_emb.0.0.weight") else None,
    }
    return sig


def known_config(sig: dict, known: dict, facts: tuple, what: str, variant_of=None) -> FileConfig:
    """The known config (`known`: {name: config}) whose `facts` equal the signature's; else an error
    naming the nearest and what differs. `variant_of(name) -> variant`."""
    for name, config in known.items():
        if all(_norm(config.get(k)) == _norm(sig.get(k)) for k in facts):
            return FileConfig(dict(config), known=name, variant=variant_of(name) if variant_of else None)
    raise FileKindError(f"{what}: its shapes match no known config ({mismatch(sig, known, facts)})")


def _norm(v):
    return list(v) if isinstance(v, tuple) else v


def _depths(config: dict) -> list:
    """Transformer blocks per attending level: a config may say one number for all (the refiner's 4)
    or one per level ([1, 2, 10], the non-attending level's entry unused)."""
    depth = config.get("transformer_layers_per_block", 1)
    types = config.get("down_block_types") or ()
    per = list(depth) if isinstance(depth, (list, tuple)) else [depth] * len(types)
    return [d for d, t in zip(per, types) if t.startswith("CrossAttn")]


def _unet_same(sig: dict, config: dict, key: str) -> bool:
    if key == "transformer_layers_per_block":
        return _depths(sig) == _depths(config)
    return _norm(config.get(key)) == _norm(sig.get(key))


def unet_config(view, known: dict, what: str, variant_of=None) -> FileConfig:
    """The known UNet config whose shape facts equal the file's (transformer depth compared per
    attending level, however each writes it); else an error naming the nearest and what differs."""
    sig = unet_signature(view)
    for name, config in known.items():
        if all(_unet_same(sig, config, k) for k in UNET_FACTS):
            return FileConfig(dict(config), known=name, variant=variant_of(name) if variant_of else None)
    if not known:
        raise FileKindError(f"{what}: no known config")
    best = max(known, key=lambda n: sum(_unet_same(sig, known[n], k) for k in UNET_FACTS))
    diff = [f"{k} {sig.get(k)!r} (not {known[best].get(k)!r})" for k in UNET_FACTS
            if not _unet_same(sig, known[best], k)]
    raise FileKindError(f"{what}: its shapes match no known config (nearest known {best}: {', '.join(diff)})")


# -- prediction type: what a file says, or ComfyUI's test of one bias -----------------------------
V_PRED_MARKER, ZTSNR_MARKER = "v_pred", "ztsnr"     # top-level marker keys (NoobAI and other v-pred fine-tunes)
V_PRED_STD = 0.09            # ComfyUI's threshold: a v-prediction SD 2.x UNet's norm1 bias spreads wider


def _floats(raw: bytes, dtype: str) -> list:
    import struct
    if dtype == "BF16":
        return [struct.unpack("<f", struct.pack("<I", h << 16))[0]
                for (h,) in struct.iter_unpack("<H", raw)]
    fmt = {"F16": "<e", "F32": "<f", "F64": "<d"}.get(dtype)
    if fmt is None:
        raise FileKindError(f"a {dtype} bias: no v-prediction test for it")
    return [v for (v,) in struct.iter_unpack(fmt, raw)]


def looks_v_prediction(view) -> bool:
    """An SD 2.x UNet's prediction type from its file: the `v_pred` marker when present, else
    ComfyUI's heuristic (supported_models.SD20.model_type): the population spread of the first
    transformer block's norm1 bias in the last output block (output_blocks.11 at real size) is above
    0.09 for the 768 v-prediction models. Inpainting UNets (9 input channels) are epsilon."""
    if V_PRED_MARKER in view.all_keys:
        return True
    if view.has("input_blocks.0.0.weight") and view.dim("input_blocks.0.0.weight", 1) != 4:
        return False
    last = view.count(r"output_blocks\.(\d+)\.") - 1
    key = f"output_blocks.{last}.1.transformer_blocks.0.norm1.bias"
    if not view.has(key):
        return False
    values = _floats(view.raw(key), view.dtypes.get(key, "F32"))
    mean = sum(values) / len(values)
    return (sum((v - mean) ** 2 for v in values) / len(values)) ** 0.5 > V_PRED_STD


def convert_unet(state: dict, config: dict) -> dict:
    """diffusers' converter (it finds the UNet under model.diffusion_model.)."""
    from diffusers.loaders.single_file_utils import convert_ldm_unet_checkpoint
    return convert_ldm_unet_checkpoint({UNET_PREFIX + k: v for k, v in state.items()}, config)


_RESNET = (("norm1", "in_layers.0"), ("conv1", "in_layers.2"), ("time_emb_proj", "emb_layers.1"),
           ("norm2", "out_layers.0"), ("conv2", "out_layers.3"), ("conv_shortcut", "skip_connection"))


def unet_to_original(state: dict) -> dict:
    """A diffusers UNet2DConditionModel state dict in the LDM layout (the inverse of convert_unet)."""
    levels = 1 + max(int(m[1]) for k in state if (m := re.match(r"down_blocks\.(\d+)\.", k)))
    per = 1 + max(int(m[1]) for k in state if (m := re.match(r"down_blocks\.0\.resnets\.(\d+)\.", k)))
    attends = [any(k.startswith(f"up_blocks.{i}.attentions.") for k in state) for i in range(levels)]
    out = {}
    for key, t in state.items():
        out[_unet_key(key, per, attends)] = t
    return out


def _unet_key(key: str, per: int, up_attends: list) -> str:
    top = {"time_embedding.linear_1": "time_embed.0", "time_embedding.linear_2": "time_embed.2",
           "conv_in": "input_blocks.0.0", "conv_norm_out": "out.0", "conv_out": "out.2",
           "add_embedding.linear_1": "label_emb.0.0", "add_embedding.linear_2": "label_emb.0.2"}
    for a, b in top.items():
        if key.startswith(a + "."):
            return b + key[len(a):]
    if m := re.match(r"down_blocks\.(\d+)\.(resnets|attentions)\.(\d+)\.(.*)", key):
        i, kind, j, rest = int(m[1]), m[2], int(m[3]), m[4]
        n = 1 + i * (per + 1) + j
        return f"input_blocks.{n}.0.{_resnet(rest)}" if kind == "resnets" else f"input_blocks.{n}.1.{rest}"
    if m := re.match(r"down_blocks\.(\d+)\.downsamplers\.0\.conv\.(.*)", key):
        return f"input_blocks.{(int(m[1]) + 1) * (per + 1)}.0.op.{m[2]}"
    if m := re.match(r"mid_block\.resnets\.(\d+)\.(.*)", key):
        return f"middle_block.{2 * int(m[1])}.{_resnet(m[2])}"
    if m := re.match(r"mid_block\.attentions\.0\.(.*)", key):
        return f"middle_block.1.{m[1]}"
    if m := re.match(r"up_blocks\.(\d+)\.(resnets|attentions)\.(\d+)\.(.*)", key):
        i, kind, j, rest = int(m[1]), m[2], int(m[3]), m[4]
        n = i * (per + 2 - 1) + j
        return f"output_blocks.{n}.0.{_resnet(rest)}" if kind == "resnets" else f"output_blocks.{n}.1.{rest}"
    if m := re.match(r"up_blocks\.(\d+)\.upsamplers\.0\.conv\.(.*)", key):
        i = int(m[1])
        n = i * (per + 1) + per
        return f"output_blocks.{n}.{2 if up_attends[i] else 1}.conv.{m[2]}"
    return key


def _resnet(rest: str) -> str:
    for a, b in _RESNET:
        if rest.startswith(a + "."):
            return b + rest[len(a):]
    return rest


# -- KL VAE ------------------------------------------------------------------------------------------
def vae_signature(view) -> dict:
    if not view.has("encoder.conv_in.weight") or not view.has("decoder.conv_in.weight"):
        raise FileKindError("no encoder.conv_in / decoder.conv_in: not an LDM VAE")
    levels = view.count(r"encoder\.down\.(\d+)\.")
    channels = [view.dim(f"encoder.down.{i}.block.0.conv2.weight") for i in range(levels)]
    return {"in_channels": view.dim("encoder.conv_in.weight", 1), "out_channels": view.dim("decoder.conv_out.weight"),
            "latent_channels": view.dim("decoder.conv_in.weight", 1), "block_out_channels": channels,
            "layers_per_block": view.count(r"encoder\.down\.0\.block\.(\d+)\."),
            "use_quant_conv": view.has("quant_conv.weight"), "use_post_quant_conv": view.has("post_quant_conv.weight")}


def vae_config(view, known: dict, what: str = "the VAE") -> FileConfig:
    return known_config(vae_signature(view), known, VAE_FACTS, what)


def convert_vae(state: dict, config: dict) -> dict:
    """diffusers' converter (the keys without their first_stage_model. / vae. prefix)."""
    from diffusers.loaders.single_file_utils import convert_ldm_vae_checkpoint
    return convert_ldm_vae_checkpoint(dict(state), config)


_VAE_ATTN = (("group_norm", "norm"), ("to_q", "q"), ("to_k", "k"), ("to_v", "v"), ("to_out.0", "proj_out"))


def vae_to_original(state: dict) -> dict:
    """A diffusers AutoencoderKL state dict in the LDM layout (the inverse of convert_vae): decoder
    blocks counted from the bottom, attention projections as 1x1 convolutions."""
    levels = 1 + max(int(m[1]) for k in state if (m := re.match(r"decoder\.up_blocks\.(\d+)\.", k)))
    out = {}
    for key, t in state.items():
        new = key
        if m := re.match(r"(encoder|decoder)\.(down|up)_blocks\.(\d+)\.resnets\.(\d+)\.(.*)", key):
            side, kind, i, j, rest = m[1], m[2], int(m[3]), int(m[4]), m[5]
            i = i if kind == "down" else levels - 1 - i
            new = f"{side}.{kind}.{i}.block.{j}.{rest.replace('conv_shortcut', 'nin_shortcut')}"
        elif m := re.match(r"encoder\.down_blocks\.(\d+)\.downsamplers\.0\.conv\.(.*)", key):
            new = f"encoder.down.{m[1]}.downsample.conv.{m[2]}"
        elif m := re.match(r"decoder\.up_blocks\.(\d+)\.upsamplers\.0\.conv\.(.*)", key):
            new = f"decoder.up.{levels - 1 - int(m[1])}.upsample.conv.{m[2]}"
        elif m := re.match(r"(encoder|decoder)\.mid_block\.resnets\.(\d+)\.(.*)", key):
            new = f"{m[1]}.mid.block_{int(m[2]) + 1}.{m[3]}"
        elif m := re.match(r"(encoder|decoder)\.mid_block\.attentions\.0\.(.*)", key):
            rest = m[2]
            for a, b in _VAE_ATTN:
                if rest.startswith(a + "."):
                    rest = b + rest[len(a):]
                    break
            new = f"{m[1]}.mid.attn_1.{rest}"
            if t.ndim == 2:
                t = t.reshape(*t.shape, 1, 1)
        elif m := re.match(r"(encoder|decoder)\.conv_norm_out\.(.*)", key):
            new = f"{m[1]}.norm_out.{m[2]}"
        out[new] = t
    return out

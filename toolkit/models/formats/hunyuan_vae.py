"""The HunyuanVideo VAE as its files carry it. Torch-free names and config facts (the detector asks); the
converter and inverse touch tensors only to reshape.

- ComfyUI's `hunyuan_video_vae_bf16.safetensors` (Comfy-Org's repackaging): the LDM KL layout of
  formats/ldm.py with 3D convolutions, whose weights sit one level deeper (`conv1.conv.weight`,
  `downsample.conv.conv.weight`, `conv_in.conv.weight`) and whose mid attention projections are 1x1x1
  convolutions (`mid.attn_1.q.weight`, 5-D): what ComfyUI's diffusers_convert.convert_vae_state_dict
  makes of Tencent's checkpoint, and what its `decoder.conv_in.conv.weight` VAE branch loads.
- Tencent's own checkpoint (and kijai's safetensors of it): diffusers' AutoencoderKLHunyuanVideo names
  already (diffusers' conversion script renames nothing), read as they are.
"""
import re

from toolkit.models.formats.file_view import FileKindError

_ATTN = (("norm", "group_norm"), ("q", "to_q"), ("k", "to_k"), ("v", "to_v"), ("proj_out", "to_out.0"))


def is_diffusers_layout(keys) -> bool:
    return any(k.startswith("encoder.down_blocks.") for k in keys)


def key_to_diffusers(key: str, levels: int) -> str:
    """One ComfyUI-layout key -> AutoencoderKLHunyuanVideo's (a key with no mapping comes back as it is)."""
    if m := re.fullmatch(r"(encoder|decoder)\.(down|up)\.(\d+)\.block\.(\d+)\.(.+)", key):
        i = int(m[3]) if m[2] == "down" else levels - 1 - int(m[3])
        return f"{m[1]}.{m[2]}_blocks.{i}.resnets.{m[4]}.{m[5].replace('nin_shortcut', 'conv_shortcut')}"
    if m := re.fullmatch(r"encoder\.down\.(\d+)\.downsample\.(.+)", key):
        return f"encoder.down_blocks.{m[1]}.downsamplers.0.{m[2]}"
    if m := re.fullmatch(r"decoder\.up\.(\d+)\.upsample\.(.+)", key):
        return f"decoder.up_blocks.{levels - 1 - int(m[1])}.upsamplers.0.{m[2]}"
    if m := re.fullmatch(r"(encoder|decoder)\.mid\.block_(\d)\.(.+)", key):
        return f"{m[1]}.mid_block.resnets.{int(m[2]) - 1}.{m[3]}"
    if m := re.fullmatch(r"(encoder|decoder)\.mid\.attn_1\.(\w+)\.(weight|bias)", key):
        name = dict(_ATTN).get(m[2])
        return f"{m[1]}.mid_block.attentions.0.{name}.{m[3]}" if name else key
    if m := re.fullmatch(r"(encoder|decoder)\.norm_out\.(.+)", key):
        return f"{m[1]}.conv_norm_out.{m[2]}"
    return key


def _levels(keys) -> int:
    return 1 + max((int(m[1]) for k in keys if (m := re.match(r"decoder\.up\.(\d+)\.", k))), default=-1)


def convert(state: dict) -> dict:
    """ComfyUI layout -> diffusers names (the attention's 1x1x1 convolutions as Linear weights);
    Tencent's layout is diffusers' already."""
    if is_diffusers_layout(state):
        return dict(state)
    levels = _levels(state)
    out = {}
    for key, t in state.items():
        new = key_to_diffusers(key, levels)
        if ".mid_block.attentions.0.to_" in new and new.endswith(".weight") and t.ndim == 5:
            t = t.reshape(t.shape[0], t.shape[1])
        out[new] = t
    return out


def to_original(state: dict) -> dict:
    """An AutoencoderKLHunyuanVideo state dict in ComfyUI's layout (the tiny factory's): formats/ldm.py's
    inverse, the attention projections as 1x1x1 convolutions."""
    from toolkit.models.formats.ldm import vae_to_original
    out = {}
    for key, t in vae_to_original(state).items():
        if re.search(r"mid\.attn_1\.(q|k|v|proj_out)\.weight$", key) and t.ndim == 4:
            t = t.reshape(*t.shape, 1)
        out[key] = t
    return out


def signature(view) -> dict:
    """What either layout's shapes tell, in AutoencoderKLHunyuanVideo config names."""
    for key in ("encoder.conv_in.conv.weight", "decoder.conv_in.conv.weight", "post_quant_conv.weight"):
        if not view.has(key):
            raise FileKindError(f"no {key}: not a HunyuanVideo VAE")
    if is_diffusers_layout(view.shapes):
        levels = view.count(r"encoder\.down_blocks\.(\d+)\.")
        block, resnet, attn = "encoder.down_blocks.{i}.resnets.0.conv2.conv.weight", r"encoder\.down_blocks\.0\.resnets\.(\d+)\.", \
            "encoder.mid_block.attentions.0.to_q.weight"
    else:
        levels = view.count(r"encoder\.down\.(\d+)\.")
        block, resnet, attn = "encoder.down.{i}.block.0.conv2.conv.weight", r"encoder\.down\.0\.block\.(\d+)\.", \
            "encoder.mid.attn_1.q.weight"
    if not levels or not view.has(block.format(i=0)):
        raise FileKindError(f"no {view.prefix}{block.format(i=0)}: not a HunyuanVideo VAE layout")
    return {"in_channels": view.dim("encoder.conv_in.conv.weight", 1),
            "out_channels": view.dim("decoder.conv_out.conv.weight"),
            "latent_channels": view.dim("decoder.conv_in.conv.weight", 1),
            "block_out_channels": [view.dim(block.format(i=i)) for i in range(levels)],
            "layers_per_block": view.count(resnet), "mid_block_add_attention": view.has(attn)}

"""The Wan VAE's original key layouts and diffusers' names for them, both ways, and the config facts a
file's shapes tell. Torch-free: the detector, /library and the VAE kinds (formats/vaes.py) use it; the
Krea 2 reader (formats/comfy.py) uses the Wan 2.1 mapping.

- Wan 2.1 (Wan-AI's `Wan2.1_VAE`, ComfyUI's `wan_2.1_vae.safetensors`) and the Qwen-Image VAE, which has
  its layout (`qwen_image_vae.safetensors`): flat `encoder.downsamples.N` / `decoder.upsamples.N` lists of
  residual blocks and resamplers -> AutoencoderKLWan / AutoencoderKLQwenImage (same names).
- Wan 2.2 (`Wan2.2_VAE`, ComfyUI's `wan2.2_vae.safetensors`): residual down/up blocks, each a nested
  `downsamples.X.downsamples.Y` / `upsamples.X.upsamples.Y` list whose last entry is the resampler ->
  AutoencoderKLWan(is_residual=True) `down_blocks.X.resnets.Y` / `.downsampler`, `up_blocks.X.upsampler`.
  Written after the mapping of diffusers' scripts/convert_wan_to_diffusers.py (`convert_vae_22`), which
  the installed diffusers has no single-file converter for, against ComfyUI's model of the file
  (comfy/ldm/wan/vae2_2.py: `Down_ResidualBlock.downsamples`, `Up_ResidualBlock.upsamples`).

Shared by both: `conv1` / `conv2` are the quant / post-quant convolutions, `{side}.conv1` the input
convolution, `{side}.middle.0/1/2` the mid resnet / attention / resnet, `{side}.head.0/2` the output
norm / convolution; inside a residual block residual.0/2/3/6 are norm1/conv1/norm2/conv2.
"""
import re

from toolkit.models.formats.file_view import FileKindError

# Our own Wan/Qwen -> diffusers mapping. Families (returned with each key, tested one by one):
#   conv_in            encoder.conv1 / decoder.conv1                -> {enc,dec}.conv_in
#   quant_conv         conv1 (the encoder-side quant projection)    -> quant_conv
#   post_quant_conv    conv2 (the decoder-side quant projection)    -> post_quant_conv
#   mid_resnet         {enc,dec}.middle.0 / .2                      -> mid_block.resnets.0 / .1
#   mid_attention      {enc,dec}.middle.1 (norm, to_qkv, proj)      -> mid_block.attentions.0
#   down_resnet        encoder.downsamples.i (residual blocks)      -> encoder.down_blocks.i
#   down_resample      encoder.downsamples.i (resample / time_conv) -> encoder.down_blocks.i
#   up_resnet          decoder.upsamples.i (residual blocks)        -> decoder.up_blocks.L.resnets.j
#   up_resample        decoder.upsamples.i (resample / time_conv)   -> decoder.up_blocks.L.upsamplers.0
#   head               {enc,dec}.head.0 (norm) / .2 (conv)          -> norm_out / conv_out
# and inside residual blocks: residual.0 -> norm1, residual.2 -> conv1, residual.3 -> norm2,
# residual.6 -> conv2, shortcut -> conv_shortcut.
VAE_FAMILIES = ("conv_in", "quant_conv", "post_quant_conv", "mid_resnet", "mid_attention", "down_resnet",
                "down_resample", "up_resnet", "up_resample", "head")
_RESIDUAL = {"residual.0.gamma": "norm1.gamma", "residual.2.weight": "conv1.weight", "residual.2.bias": "conv1.bias",
             "residual.3.gamma": "norm2.gamma", "residual.6.weight": "conv2.weight", "residual.6.bias": "conv2.bias",
             "shortcut.weight": "conv_shortcut.weight", "shortcut.bias": "conv_shortcut.bias"}
_ATTENTION = ("norm.gamma", "to_qkv.weight", "to_qkv.bias", "proj.weight", "proj.bias")
_RESAMPLE = ("resample.1.weight", "resample.1.bias", "time_conv.weight", "time_conv.bias")
_HEAD = {"head.0.gamma": "norm_out.gamma", "head.2.weight": "conv_out.weight", "head.2.bias": "conv_out.bias"}


def wan_vae_key_to_diffusers(key: str, num_res_blocks: int, num_levels: int) -> tuple[str, str] | None:
    """(diffusers key, family) for one original Wan/Qwen VAE key, or None when it has no mapping.
    `num_res_blocks`/`num_levels` give the decoder's flat `upsamples` index layout: each level holds
    num_res_blocks + 1 residual blocks, then (except the last level) one upsampler."""
    if key in ("conv1.weight", "conv1.bias"):
        return "quant_conv." + key.split(".", 1)[1], "quant_conv"
    if key in ("conv2.weight", "conv2.bias"):
        return "post_quant_conv." + key.split(".", 1)[1], "post_quant_conv"
    side, _, rest = key.partition(".")
    if side not in ("encoder", "decoder"):
        return None
    if rest in ("conv1.weight", "conv1.bias"):
        return f"{side}.conv_in.{rest.split('.', 1)[1]}", "conv_in"
    if rest in _HEAD:
        return f"{side}.{_HEAD[rest]}", "head"
    m = re.fullmatch(r"middle\.(\d+)\.(.+)", rest)
    if m:
        idx, inner = int(m.group(1)), m.group(2)
        if idx in (0, 2) and inner in _RESIDUAL and not inner.startswith("shortcut"):
            return f"{side}.mid_block.resnets.{idx // 2}.{_RESIDUAL[inner]}", "mid_resnet"
        if idx == 1 and inner in _ATTENTION:
            return f"{side}.mid_block.attentions.0.{inner}", "mid_attention"
        return None
    if side == "encoder":
        m = re.fullmatch(r"downsamples\.(\d+)\.(.+)", rest)
        if not m:
            return None
        idx, inner = int(m.group(1)), m.group(2)
        if inner in _RESIDUAL:
            return f"encoder.down_blocks.{idx}.{_RESIDUAL[inner]}", "down_resnet"
        if inner in _RESAMPLE:
            return f"encoder.down_blocks.{idx}.{inner}", "down_resample"
        return None
    m = re.fullmatch(r"upsamples\.(\d+)\.(.+)", rest)
    if not m:
        return None
    idx, inner = int(m.group(1)), m.group(2)
    per_level = num_res_blocks + 2
    level, pos = divmod(idx, per_level)
    if level >= num_levels or (level == num_levels - 1 and pos > num_res_blocks):
        return None
    if pos <= num_res_blocks and inner in _RESIDUAL:
        return f"decoder.up_blocks.{level}.resnets.{pos}.{_RESIDUAL[inner]}", "up_resnet"
    if pos == num_res_blocks + 1 and inner in _RESAMPLE:
        return f"decoder.up_blocks.{level}.upsamplers.0.{inner}", "up_resample"
    return None


_RESIDUAL_BACK = {v: k for k, v in _RESIDUAL.items()}
_HEAD_BACK = {v: k for k, v in _HEAD.items()}


def _shared_to_original(key: str) -> str | None:
    """The names both versions share (quant convs, input convs, mid blocks, heads), else None."""
    for a, b in (("quant_conv.", "conv1."), ("post_quant_conv.", "conv2.")):
        if key.startswith(a):
            return b + key[len(a):]
    side, _, rest = key.partition(".")
    if rest.startswith("conv_in."):
        return f"{side}.conv1.{rest[len('conv_in.'):]}"
    if rest in _HEAD_BACK:
        return f"{side}.{_HEAD_BACK[rest]}"
    if m := re.fullmatch(r"mid_block\.resnets\.(\d)\.(.+)", rest):
        return f"{side}.middle.{2 * int(m[1])}.{_RESIDUAL_BACK[m[2]]}"
    if m := re.fullmatch(r"mid_block\.attentions\.0\.(.+)", rest):
        return f"{side}.middle.1.{m[1]}"
    return None


def _resnets_per_up_block(state) -> int:
    return 1 + max(int(m[1]) for k in state if (m := re.match(r"decoder\.up_blocks\.0\.resnets\.(\d+)\.", k)))


# -- Wan 2.1 / Qwen-Image ------------------------------------------------------------------------------
def wan21_key_to_original(key: str, num_res_blocks: int) -> str:
    """AutoencoderKLWan (2.1) / AutoencoderKLQwenImage key -> the original Wan 2.1 key (the inverse of
    wan_vae_key_to_diffusers)."""
    shared = _shared_to_original(key)
    if shared is not None:
        return shared
    if m := re.fullmatch(r"encoder\.down_blocks\.(\d+)\.(.+)", key):
        return f"encoder.downsamples.{m[1]}.{_RESIDUAL_BACK.get(m[2], m[2])}"
    if m := re.fullmatch(r"decoder\.up_blocks\.(\d+)\.resnets\.(\d+)\.(.+)", key):
        return f"decoder.upsamples.{int(m[1]) * (num_res_blocks + 2) + int(m[2])}.{_RESIDUAL_BACK[m[3]]}"
    if m := re.fullmatch(r"decoder\.up_blocks\.(\d+)\.upsamplers\.0\.(.+)", key):
        return f"decoder.upsamples.{int(m[1]) * (num_res_blocks + 2) + num_res_blocks + 1}.{m[2]}"
    raise KeyError(f"no original Wan 2.1 VAE name for {key}")


def wan21_to_original(state: dict) -> dict:
    """A diffusers Wan 2.1 / Qwen-Image VAE state dict in the original layout (the tiny factory's)."""
    nrb = _resnets_per_up_block(state) - 1
    return {wan21_key_to_original(k, nrb): v for k, v in state.items()}


def convert_wan21(state: dict, config: dict) -> dict:
    """Original Wan 2.1 / Qwen-Image names -> diffusers', at the config's depth; a key with no mapping
    is kept as it is (the reader then names it as unexpected)."""
    nrb, levels = config["num_res_blocks"], len(config["dim_mult"])
    out = {}
    for key, value in state.items():
        mapped = wan_vae_key_to_diffusers(key, nrb, levels)
        out[mapped[0] if mapped else key] = value
    return out


def wan21_signature(view) -> dict:
    """What a Wan 2.1 layout's shapes tell (AutoencoderKLWan names; `in_channels` is AutoencoderKLQwenImage's
    `input_channels`)."""
    if not view.has("decoder.middle.0.residual.0.gamma") or not view.has("encoder.conv1.weight"):
        raise FileKindError("no decoder.middle.0.residual.0.gamma / encoder.conv1.weight: not a Wan VAE")
    resamples = view.indices(r"encoder\.downsamples\.(\d+)\.resample\.")
    if not resamples:
        raise FileKindError("no encoder.downsamples.N.resample: not a Wan 2.1 VAE layout")
    nrb = resamples[0]
    if nrb < 1 or resamples != [nrb + i * (nrb + 1) for i in range(len(resamples))]:
        raise FileKindError(f"encoder.downsamples resamplers at {resamples} are not a Wan 2.1 VAE layout")
    base = view.dim("encoder.conv1.weight")
    mult = [view.dim(f"encoder.downsamples.{level * (nrb + 1)}.residual.2.weight") // base
            for level in range(len(resamples) + 1)]
    dec = view.dim("decoder.conv1.weight") // mult[-1]
    return {"base_dim": base, "decoder_base_dim": None if dec == base else dec, "z_dim": view.dim("conv2.weight"),
            "dim_mult": mult, "num_res_blocks": nrb,
            "temperal_downsample": [view.has(f"encoder.downsamples.{i}.time_conv.weight") for i in resamples],
            "in_channels": view.dim("encoder.conv1.weight", 1), "out_channels": view.dim("decoder.head.2.weight"),
            "is_residual": False}


# -- Wan 2.2 ---------------------------------------------------------------------------------------------
def wan22_key_to_diffusers(key: str) -> str | None:
    """One original Wan 2.2 VAE key -> AutoencoderKLWan(is_residual=True)'s, or None (no mapping)."""
    if key in ("conv1.weight", "conv1.bias"):
        return "quant_conv." + key.split(".", 1)[1]
    if key in ("conv2.weight", "conv2.bias"):
        return "post_quant_conv." + key.split(".", 1)[1]
    side, _, rest = key.partition(".")
    if side not in ("encoder", "decoder"):
        return None
    if rest in ("conv1.weight", "conv1.bias"):
        return f"{side}.conv_in.{rest.split('.', 1)[1]}"
    if rest in _HEAD:
        return f"{side}.{_HEAD[rest]}"
    if m := re.fullmatch(r"middle\.(\d+)\.(.+)", rest):
        idx, inner = int(m[1]), m[2]
        if idx in (0, 2) and inner in _RESIDUAL and not inner.startswith("shortcut"):
            return f"{side}.mid_block.resnets.{idx // 2}.{_RESIDUAL[inner]}"
        return f"{side}.mid_block.attentions.0.{inner}" if idx == 1 and inner in _ATTENTION else None
    kind, blocks, sampler = ("downsamples", "down_blocks", "downsampler") if side == "encoder" else \
        ("upsamples", "up_blocks", "upsampler")
    if m := re.fullmatch(rf"{kind}\.(\d+)\.{kind}\.(\d+)\.(.+)", rest):
        block, entry, inner = m[1], m[2], m[3]
        if inner in _RESIDUAL:
            return f"{side}.{blocks}.{block}.resnets.{entry}.{_RESIDUAL[inner]}"
        if inner in _RESAMPLE:
            return f"{side}.{blocks}.{block}.{sampler}.{inner}"
    return None


def wan22_key_to_original(key: str, num_res_blocks: int) -> str:
    """AutoencoderKLWan(is_residual=True) key -> the original Wan 2.2 key: an encoder block holds
    num_res_blocks residual blocks then its resampler, a decoder block one more residual block."""
    shared = _shared_to_original(key)
    if shared is not None:
        return shared
    if m := re.fullmatch(r"(encoder|decoder)\.(down|up)_blocks\.(\d+)\.resnets\.(\d+)\.(.+)", key):
        return f"{m[1]}.{m[2]}samples.{m[3]}.{m[2]}samples.{m[4]}.{_RESIDUAL_BACK[m[5]]}"
    if m := re.fullmatch(r"(encoder|decoder)\.(down|up)_blocks\.(\d+)\.(down|up)sampler\.(.+)", key):
        entry = num_res_blocks if m[1] == "encoder" else num_res_blocks + 1
        return f"{m[1]}.{m[2]}samples.{m[3]}.{m[2]}samples.{entry}.{m[5]}"
    raise KeyError(f"no original Wan 2.2 VAE name for {key}")


def wan22_to_original(state: dict) -> dict:
    nrb = _resnets_per_up_block(state) - 1
    return {wan22_key_to_original(k, nrb): v for k, v in state.items()}


def convert_wan22(state: dict) -> dict:
    out = {}
    for key, value in state.items():
        out[wan22_key_to_diffusers(key) or key] = value
    return out


def wan22_signature(view) -> dict:
    """What a Wan 2.2 layout's shapes tell (AutoencoderKLWan names)."""
    if not view.has("encoder.downsamples.0.downsamples.0.residual.0.gamma") or not view.has("encoder.conv1.weight"):
        raise FileKindError("no encoder.downsamples.0.downsamples.0.residual.0.gamma: not a Wan 2.2 VAE layout")
    levels = view.count(r"encoder\.downsamples\.(\d+)\.")
    nrb = len(view.indices(r"encoder\.downsamples\.0\.downsamples\.(\d+)\.residual\."))
    base = view.dim("encoder.conv1.weight")
    mult = [view.dim(f"encoder.downsamples.{level}.downsamples.0.residual.2.weight") // base for level in range(levels)]
    pixels = view.dim("encoder.conv1.weight", 1)
    patch = next((p for p in (1, 2, 4) if p * p * 3 == pixels), None)
    dec = view.dim("decoder.conv1.weight") // mult[-1]
    return {"base_dim": base, "decoder_base_dim": None if dec == base else dec,
            "z_dim": view.dim("conv2.weight"), "dim_mult": mult, "num_res_blocks": nrb,
            "temperal_downsample": [view.has(f"encoder.downsamples.{level}.downsamples.{nrb}.time_conv.weight")
                                    for level in range(levels - 1)],
            "in_channels": pixels, "out_channels": view.dim("decoder.head.2.weight"), "patch_size": patch,
            "is_residual": True}

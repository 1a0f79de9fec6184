"""The LTX-Video VAE in its original layout (Lightricks' checkpoints, which ComfyUI loads as they are: the
`vae.` part of `ltx-video-2b-v0.9*.safetensors`), as diffusers' `convert_ltx_vae_checkpoint_to_diffusers`
reads it: the encoder and the decoder are flat lists of blocks, `encoder.down_blocks.N` /
`decoder.up_blocks.N`, each a group of resnets (`res_blocks.M`), a resampler (`conv`) or one
channel-changing resnet; the latents' per-channel statistics are `per_channel_statistics.*`.

diffusers groups them into levels: an encoder level is [resnets, downsampler?, conv_out?] and the last
group is the mid block; the decoder starts with the mid block, then each level is [conv_in?,
upsampler?, resnets]. Walking the groups in that order gives both the inverse (the tiny factory's) and
the config facts a file's shapes tell (torch-free: the detector asks). Versions 0.9.0 and 0.9.1 (the
timestep-conditioned decoder with its `last_time_embedder`) have this layout; 0.9.5 and later have
another encoder, which diffusers' converter recognises by its 2048-wide `encoder.conv_out` and this
layout refuses (no known config).
"""
import re

from toolkit.models.formats.file_view import FileKindError

# top-level names: diffusers -> original
_TOP = (("latents_mean", "per_channel_statistics.mean-of-means"), ("latents_std", "per_channel_statistics.std-of-means"),
        ("decoder.time_embedder.", "decoder.last_time_embedder."), ("decoder.scale_shift_table", "decoder.last_scale_shift_table"))


def convert_ltx(state: dict) -> dict:
    """diffusers' converter (it finds the VAE under `vae.`, the prefix the reader has cut)."""
    from diffusers.loaders.single_file_utils import convert_ltx_vae_checkpoint_to_diffusers
    return convert_ltx_vae_checkpoint_to_diffusers({"vae." + k: v for k, v in state.items()})


def _group_prefixes(keys, side: str) -> list:
    """The diffusers prefix of each original block of `side`, in the original order (its index)."""
    def has(prefix):
        return any(k.startswith(prefix) for k in keys)
    blocks = "down_blocks" if side == "encoder" else "up_blocks"
    levels = 1 + max(int(m[1]) for k in keys if (m := re.match(rf"{side}\.{blocks}\.(\d+)\.", k)))
    out = [] if side == "encoder" else ["decoder.mid_block."]
    for i in range(levels):
        at = f"{side}.{blocks}.{i}."
        parts = ("", "downsamplers.0.", "conv_out.") if side == "encoder" else ("conv_in.", "upsamplers.0.", "")
        out += [at + part for part in parts if (has(at + part + "resnets.") if part == "" else has(at + part))]
    return out + (["encoder.mid_block."] if side == "encoder" else [])


def ltx_to_original(state: dict) -> dict:
    """An AutoencoderKLLTXVideo state dict in the original layout (the inverse of convert_ltx)."""
    table = [(prefix, f"{side}.{blocks}.{n}.") for side, blocks in (("encoder", "down_blocks"), ("decoder", "up_blocks"))
             for n, prefix in enumerate(_group_prefixes(list(state), side))]
    table.sort(key=lambda row: -len(row[0]))            # the most specific prefix first
    out = {}
    for key, t in state.items():
        top = next(((a, b) for a, b in _TOP if key.startswith(a)), None)
        if top is not None:
            out[top[1] + key[len(top[0]):]] = t
            continue
        a, b = next((row for row in table if key.startswith(row[0])), ("", ""))   # conv_in / conv_out: as they are
        rest = re.sub(r"^resnets\.", "res_blocks.", key[len(a):])
        rest = rest.replace("conv_shortcut.conv.", "conv_shortcut.").replace("norm3.", "norm3.norm.")
        out[b + rest] = t
    return out


def _tokens(view, side: str, blocks: str) -> list:
    """Each original block of `side`: ("res", channels, layers, noise) | ("sample", out, in) | ("chan", out)."""
    out = []
    for n in range(view.count(rf"{side}\.{blocks}\.(\d+)\.")):
        at = f"{side}.{blocks}.{n}."
        if view.has(at + "res_blocks.0.conv1.conv.weight"):
            out.append(("res", view.dim(at + "res_blocks.0.conv1.conv.weight"),
                        view.count(rf"{re.escape(at)}res_blocks\.(\d+)\."), view.has(at + "res_blocks.0.per_channel_scale1")))
        elif view.has(at + "conv.weight") or view.has(at + "conv.conv.weight"):
            conv = at + ("conv.weight" if view.has(at + "conv.weight") else "conv.conv.weight")
            out.append(("sample", view.dim(conv), view.dim(conv, 1)))
        elif view.has(at + "conv1.conv.weight"):
            out.append(("chan", view.dim(at + "conv1.conv.weight")))
        else:
            raise FileKindError(f"{view.prefix}{at}: no resnets, resampler or channel resnet: not an LTX-Video VAE")
    return out


def ltx_signature(view) -> dict:
    """What an original-layout LTX-Video VAE's shapes tell, in AutoencoderKLLTXVideo config names."""
    for key in ("encoder.conv_in.conv.weight", "decoder.conv_in.conv.weight", "encoder.conv_out.conv.weight",
                "per_channel_statistics.mean-of-means"):
        if not view.has(key):
            raise FileKindError(f"no {key}: not an LTX-Video VAE")
    bad = FileKindError("its blocks do not form the LTX-Video 0.9.0 / 0.9.1 VAE layout")
    levels = []                                     # encoder: [resnets, downsampler?, channel resnet?] ..., mid
    for tok in _tokens(view, "encoder", "down_blocks"):
        if tok[0] == "res":
            levels.append({"channels": tok[1], "layers": tok[2], "sample": False})
        elif not levels:
            raise bad
        else:
            levels[-1]["sample"] = levels[-1]["sample"] or tok[0] == "sample"
    ups, pending = [], {}                           # decoder: mid, then [channel resnet?, upsampler?, resnets] ...
    tokens = _tokens(view, "decoder", "up_blocks")
    for tok in tokens[1:]:
        if tok[0] == "res":
            ups.append({"channels": tok[1], "layers": tok[2], "noise": tok[3], "sample": pending.get("sample")})
            pending = {}
        else:
            pending[tok[0]] = tok[1:]
    if len(levels) < 2 or not tokens or tokens[0][0] != "res" or not ups or pending or levels[-1]["sample"]:
        raise bad
    mid, levels, dmid = levels[-1], levels[:-1], tokens[0]
    factors = [u["sample"][1] * 8 // u["sample"][0] if u["sample"] else 1 for u in ups]
    pixels = view.dim("encoder.conv_in.conv.weight", 1)
    return {
        "latent_channels": view.dim("decoder.conv_in.conv.weight", 1),
        "patch_size": next((p for p in (1, 2, 4, 8) if 3 * p * p == pixels), None),
        "block_out_channels": [lvl["channels"] for lvl in levels],
        "layers_per_block": [lvl["layers"] for lvl in levels] + [mid["layers"]],
        "spatio_temporal_scaling": [lvl["sample"] for lvl in levels],
        "decoder_block_out_channels": list(reversed([u["channels"] * f for u, f in zip(ups, factors)])),
        "decoder_layers_per_block": list(reversed([dmid[2]] + [u["layers"] for u in ups])),
        "decoder_spatio_temporal_scaling": list(reversed([u["sample"] is not None for u in ups])),
        "decoder_inject_noise": list(reversed([dmid[3]] + [u["noise"] for u in ups])),
        "upsample_factor": list(reversed(factors)),
        "timestep_conditioning": view.has("decoder.last_time_embedder.timestep_embedder.linear_1.weight"),
    }

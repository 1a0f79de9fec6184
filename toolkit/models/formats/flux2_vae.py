"""FLUX.2's VAE in BFL's layout (ComfyUI's `flux2-vae.safetensors`, FLUX.2 dev and klein): the LDM KL
layout at 32 latent channels, with the quantization convolutions inside the encoder and decoder
(`encoder.quant_conv`, `decoder.post_quant_conv`) and the batch-norm statistics of the 2x2-patchified
latents (`bn.running_mean`, `bn.running_var`) that diffusers' AutoencoderKLFlux2 normalizes with.
The rest is diffusers' own LDM VAE converter. Signature torch-free (the detector calls it on a header).
"""
import math

from toolkit.models.formats import ldm
from toolkit.models.formats.file_view import FileConfig, FileKindError
from toolkit.models.formats.ldm import known_config

FACTS = ldm.VAE_FACTS + ("mid_block_add_attention", "patch_size")
_BASE = dict(in_channels=3, out_channels=3, down_block_types=["DownEncoderBlock2D"] * 4,
             up_block_types=["UpDecoderBlock2D"] * 4, act_fn="silu", latent_channels=32, use_quant_conv=True,
             use_post_quant_conv=True, mid_block_add_attention=True, batch_norm_eps=1e-4, batch_norm_momentum=0.1,
             patch_size=[2, 2], decoder_block_out_channels=None)
KNOWN = {
    # diffusers' AutoencoderKLFlux2 defaults: the released FLUX.2 VAE (black-forest-labs/FLUX.2-klein-4B vae/)
    "flux2-vae": dict(_BASE, block_out_channels=[128, 256, 512, 512], layers_per_block=2, norm_num_groups=32,
                      sample_size=1024),
    # toolkit/models/archs/flux2_klein.py's tiny VAE
    "tiny": dict(_BASE, block_out_channels=[8, 8, 16, 16], layers_per_block=1, norm_num_groups=4, sample_size=64),
}
# BFL's key -> diffusers' (the two that moved; the rest is the LDM layout)
_MOVED = (("encoder.quant_conv.", "quant_conv."), ("decoder.post_quant_conv.", "post_quant_conv."))
_BN = ("bn.running_mean", "bn.running_var")


def signature(view) -> dict:
    if not view.has("bn.running_mean") or not view.has("encoder.quant_conv.weight"):
        raise FileKindError("no bn.running_mean / encoder.quant_conv: not the FLUX.2 VAE")
    sig = ldm.vae_signature(view)
    latent = sig["latent_channels"]
    patch = math.isqrt(view.dim("bn.running_mean") // latent) if latent else 0
    return {**sig, "use_quant_conv": True, "use_post_quant_conv": view.has("decoder.post_quant_conv.weight"),
            "mid_block_add_attention": view.has("encoder.mid.attn_1.q.weight"), "patch_size": [patch, patch]}


def config(view) -> FileConfig:
    return known_config(signature(view), KNOWN, FACTS, "the FLUX.2 VAE")


def is_flux2_vae(view) -> bool:
    try:
        config(view)
    except FileKindError:
        return False
    return True


def convert(state: dict, config: dict) -> dict:
    import torch
    state = dict(state)
    kept = {k: state.pop(k) for k in _BN + ("bn.num_batches_tracked",) if k in state}
    for old, new in _MOVED:
        for k in [k for k in state if k.startswith(old)]:
            state[new + k[len(old):]] = state.pop(k)
    out = ldm.convert_vae(state, config)
    out.update(kept)
    out.setdefault("bn.num_batches_tracked", torch.tensor(0))      # a counter BFL's file does not keep
    return out


def to_original(state: dict) -> dict:
    state = dict(state)
    state.pop("bn.num_batches_tracked", None)
    kept = {k: state.pop(k) for k in _BN}
    out = ldm.vae_to_original(state)
    for old, new in _MOVED:
        for k in [k for k in out if k.startswith(new)]:
            out[old + k[len(new):]] = out.pop(k)
    return {**out, **kept}

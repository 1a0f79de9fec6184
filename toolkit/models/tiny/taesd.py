"""Tiny random tiny-autoencoders (TAESD and kin), written as people have them in a `vae_approx/` folder.

    tiny_tae(latent_channels, seed=0) -> AutoencoderTiny
    write_tiny_tae(folder, tae, latent_channels, layout="safetensors", seed=0) -> Path (the decoder)
    python -m toolkit.models.tiny.taesd <vae_approx folder> <tae> <latent_channels> [--layout L] [--seed N]

Layouts: `safetensors` / `pth`: `<tae>_decoder.<ext>` and `<tae>_encoder.<ext>` in the original keys
(madebyollin's files, what ComfyUI reads; toolkit/models/tiny_autoencoder.py converts them); `diffusers`:
an AutoencoderTiny folder `<tae>/` (what the hub repo madebyollin/<tae> holds). Four stages 8 channels
wide: 8x, as the real ones and the tiny models' VAEs; weights scaled up so a decode is a picture, not grey.
"""
from __future__ import annotations

import argparse
from pathlib import Path

LAYOUTS = ("safetensors", "pth", "diffusers")


def tiny_tae(latent_channels: int, seed: int = 0):
    import torch
    from diffusers import AutoencoderTiny

    torch.manual_seed(seed)
    vae = AutoencoderTiny(latent_channels=latent_channels, encoder_block_out_channels=(8, 8, 8, 8),
                          decoder_block_out_channels=(8, 8, 8, 8), num_encoder_blocks=(1, 1, 1, 1),
                          num_decoder_blocks=(1, 1, 1, 1))
    with torch.no_grad():
        for p in vae.parameters():
            p.mul_(1.5)
    return vae.eval()


def write_tae(vae, folder, tae: str, layout: str = "safetensors") -> Path:
    """`vae` into `folder` in `layout`; the decoder's path (or the diffusers folder)."""
    import torch
    from safetensors.torch import save_file

    from toolkit.models.tiny_autoencoder import from_diffusers

    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    if layout == "diffusers":
        vae.save_pretrained(str(folder / tae))
        return folder / tae
    state = vae.state_dict()
    parts = {"decoder": from_diffusers(state),
             "encoder": {k.removeprefix("encoder.layers."): v for k, v in state.items() if k.startswith("encoder.layers.")}}
    for part, weights in parts.items():
        path = folder / f"{tae}_{part}.{layout}"
        if layout == "safetensors":
            save_file({k: v.contiguous() for k, v in weights.items()}, str(path))
        else:
            torch.save(weights, str(path))
    return folder / f"{tae}_decoder.{layout}"


def write_tiny_tae(folder, tae: str, latent_channels: int, layout: str = "safetensors", seed: int = 0) -> Path:
    return write_tae(tiny_tae(latent_channels, seed), folder, tae, layout)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder")
    ap.add_argument("tae")
    ap.add_argument("latent_channels", type=int)
    ap.add_argument("--layout", default="safetensors", choices=LAYOUTS)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    print(write_tiny_tae(args.folder, args.tae, args.latent_channels, args.layout, args.seed))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

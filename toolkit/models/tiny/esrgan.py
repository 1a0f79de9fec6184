"""Tiny random ESRGAN upscale models, written in the key layouts people download (what `spandrel` detects).

    tiny_esrgan_state(scale=2, layout="old", seed=0, num_filters=8, num_blocks=1) -> {key: tensor}
    write_tiny_esrgan(folder, name, scale=2, layout="old", ext="pth", seed=0) -> Path
    python -m toolkit.models.tiny.esrgan <folder> <name> [--scale 2|4] [--layout old|new] [--ext pth|safetensors]

Layouts: `old`: the original ESRGAN repo's RRDBNet (`model.0.weight`, `model.1.sub.N.RDB1.conv1.0.weight`,
`model.3.weight` ... : ESRGAN, 4x-UltraSharp and most community models); `new`: BasicSR's RRDBNet, as
Real-ESRGAN's releases are (`conv_first`, `body.N.rdb1.conv1`, `conv_body`, `conv_up1`, `conv_hr`,
`conv_last`; 4x only here, as BasicSR's 2x unshuffles its input). Growth channels are ESRGAN's 32 (spandrel
reads no other); 8 filters and one RRDB block: about 0.2 M parameters. Convolutions are written one by one
with torch, not by spandrel, so a file spandrel detects is a file of the real layout.
"""
from __future__ import annotations

import argparse
from pathlib import Path

GROWTH = 32


def tiny_esrgan_state(scale: int = 2, layout: str = "old", seed: int = 0, num_filters: int = 8,
                      num_blocks: int = 1) -> dict:
    import torch

    if scale not in (2, 4) or (layout == "new" and scale != 4):
        raise ValueError(f"a tiny ESRGAN is 2x or 4x (the new layout 4x only), not {scale}x {layout}")
    g = torch.Generator().manual_seed(seed)
    nf, gc = num_filters, GROWTH

    def conv(cin, cout):
        bound = (1.0 / (cin * 9)) ** 0.5
        return {"weight": (torch.rand(cout, cin, 3, 3, generator=g) * 2 - 1) * bound,
                "bias": (torch.rand(cout, generator=g) * 2 - 1) * bound * 0.1}

    parts = [("first", conv(3, nf))]
    for b in range(num_blocks):
        for r in (1, 2, 3):
            for j in range(1, 6):
                parts.append((("rdb", b, r, j), conv(nf + (j - 1) * gc, gc if j < 5 else nf)))
    parts.append(("trunk", conv(nf, nf)))
    ups = [("up", i) for i in range(1, {2: 1, 4: 2}[scale] + 1)]
    parts += [(u, conv(nf, nf)) for u in ups]
    last = conv(nf, 3)
    last["bias"] = last["bias"] + 0.5          # mid-grey plus detail: an output that is not clamped flat
    last["weight"] = last["weight"] * 8
    parts += [("hr", conv(nf, nf)), ("last", last)]
    state = {}
    for name, tensors in parts:
        for kind, t in tensors.items():
            state[f"{_key(name, layout, scale, num_blocks)}.{kind}"] = t.contiguous()
    return state


def _key(name, layout: str, scale: int, num_blocks: int) -> str:
    ups = {2: 1, 4: 2}[scale]
    if layout == "new":
        if isinstance(name, tuple) and name[0] == "rdb":
            return f"body.{name[1]}.rdb{name[2]}.conv{name[3]}"
        if isinstance(name, tuple):
            return f"conv_up{name[1]}"
        return {"first": "conv_first", "trunk": "conv_body", "hr": "conv_hr", "last": "conv_last"}[name]
    # old: model.0 conv_first, model.1 the shortcut block (sub.N RRDBs, sub.<blocks> the trunk conv), then per
    # upsampling an Upsample and a conv + LeakyReLU (3 indices each), then HR conv + LeakyReLU, the last conv
    if isinstance(name, tuple) and name[0] == "rdb":
        return f"model.1.sub.{name[1]}.RDB{name[2]}.conv{name[3]}.0"
    if name == "first":
        return "model.0"
    if name == "trunk":
        return f"model.1.sub.{num_blocks}"
    if isinstance(name, tuple):
        return f"model.{3 * name[1]}"
    return f"model.{3 * ups + 2}" if name == "hr" else f"model.{3 * ups + 4}"


def write_tiny_esrgan(folder, name: str, scale: int = 2, layout: str = "old", ext: str = "pth", seed: int = 0,
                      num_blocks: int = 1) -> Path:
    import torch

    state = tiny_esrgan_state(scale, layout, seed, num_blocks=num_blocks)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.{ext}"
    if ext == "safetensors":
        from safetensors.torch import save_file
        save_file(state, str(path))
    else:
        torch.save(state, str(path))
    return path


def main(argv=None):
    ap = argparse.ArgumentParser(description="write a tiny random ESRGAN upscale model")
    ap.add_argument("folder")
    ap.add_argument("name")
    ap.add_argument("--scale", type=int, default=2)
    ap.add_argument("--layout", choices=("old", "new"), default="old")
    ap.add_argument("--ext", choices=("pth", "safetensors"), default="pth")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    print(write_tiny_esrgan(a.folder, a.name, a.scale, a.layout, a.ext, a.seed))


if __name__ == "__main__":
    main()

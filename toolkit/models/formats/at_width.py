"""diffusers' single-file converters at any width. A few split a fused tensor at the real model's
width (HunyuanVideo's single-block linear1 at 3072, Lumina 2's qkv at 2304 + 768 + 768); a file of
another width (the tiny factory's) is split here by its own widths, and diffusers' converter still
names every part (it sees a placeholder of the width it splits at). Everything else is diffusers'.

    split_fused(convert, checkpoint, fused) -> state
    fused: {key: (the file's part sizes, the sizes diffusers splits at)}
"""


def split_fused(convert, checkpoint: dict, fused: dict) -> dict:
    import torch
    ckpt = dict(checkpoint)
    parts = {}
    for key, (sizes, theirs) in fused.items():
        if tuple(sizes) == tuple(theirs):
            continue
        t = ckpt.pop(key)
        names = list(convert({key: t.new_zeros(()).expand(sum(theirs), *t.shape[1:])}))
        if len(names) != len(sizes):
            raise ValueError(f"{key}: the converter makes {len(names)} tensors of it, not {len(sizes)}")
        parts.update(zip(names, torch.split(t, list(sizes), 0)))
    out = convert(ckpt)
    out.update(parts)
    return out


def strip(checkpoint: dict, prefix: str = "model.diffusion_model.") -> dict:
    """The keys without a ComfyUI checkpoint prefix (converters that do not strip it themselves)."""
    return {k.removeprefix(prefix): v for k, v in checkpoint.items()}

"""The original (non-diffusers) key layouts GGUF denoisers are published in, and their conversion.

Real GGUF files (city96's and the ones made with his tools) hold the model's *original* checkpoint
keys: Flux in BFL names (`double_blocks.N.img_attn.qkv.weight`), SD3 in MMDiT names
(`joint_blocks.N.x_block.attn.qkv.weight`), Wan in Wan's (`blocks.N.self_attn.q.weight`), Z-Image
in its NextDiT names (`layers.N.attention.qkv.weight`), Qwen-Image in the names diffusers also uses:
the names ComfyUI's files use. Which denoisers are read, and their `general.architecture`
(ComfyUI-GGUF's names), is each arch row's `gguf` (toolkit/models/arch.py, Gguf).

- `to_diffusers(cls_name, checkpoint, shapes, config)`: original -> diffusers keys for the reader:
  the row's own function where diffusers' converter cannot read every file (Flux's splits a single
  block's fused `linear1` at FLUX.1's fixed width, 3072), else diffusers' own `from_single_file`
  converter (it is width-independent for SD3, Wan, Z-Image, Qwen-Image).
- `to_original(cls_name, state_dict)`: diffusers -> original keys, for the tiny factory's files: the
  denoiser's `single_file` row's `original`, as for its ComfyUI files.

Fused tensors (q|k|v, q|k|v|mlp) are split along rows, which works on quantized bytes too (a GGML
block never crosses a row). Every key must be consumed and every expected key produced: a key left
over is an error naming it.
"""
from toolkit.models.formats.original_layout import LayoutError

PREFIXES = ("model.diffusion_model.", "diffusion_model.")


def readable() -> dict:
    """{diffusers class: (Gguf row, denoiser Component)} for the denoisers of the arch rows that read
    GGUF files, in registry order (rows whose denoiser is one class read its files alike)."""
    from toolkit.models.arch import DENOISER
    from toolkit.models.registry import ARCHS
    out = {}
    for name in ARCHS:
        spec = ARCHS[name]
        for c in spec.components if spec.gguf is not None else ():
            if c.kind == DENOISER:
                out.setdefault(c.cls, (spec.gguf, c))
    return out


def layout(cls_name: str) -> tuple:
    """(Gguf row, denoiser Component) of `cls_name`; LayoutError when no row reads its GGUF files."""
    found = readable().get(cls_name)
    if found is None:
        raise LayoutError(f"no GGUF layout for {cls_name}")
    return found


def to_original(cls_name: str, state_dict: dict) -> dict:
    """A diffusers state dict -> the original layout GGUF files use (a new dict; tensors shared or fused)."""
    from toolkit.models.arch import load_object

    _, denoiser = layout(cls_name)
    sf = denoiser.single_file
    return load_object(sf.original)(dict(state_dict)) if sf is not None and sf.original else dict(state_dict)


def to_diffusers(cls_name: str, checkpoint: dict, shapes: dict, config: dict) -> dict:
    """Original keys -> diffusers keys. `shapes`: the model's own {key: shape} (rows to split fused
    tensors at). Raises LayoutError naming keys left over or missing."""
    from toolkit.models.arch import load_object

    row, _ = layout(cls_name)
    ckpt = dict(checkpoint)
    if row.to_diffusers:
        out = load_object(row.to_diffusers)(ckpt, shapes, config)
    else:
        from diffusers.loaders.single_file_model import SINGLE_FILE_LOADABLE_CLASSES
        out = SINGLE_FILE_LOADABLE_CLASSES[cls_name]["checkpoint_mapping_fn"](checkpoint=ckpt, config=config)
    if out is ckpt:
        ckpt = {}
    for key in row.ignored:
        ckpt.pop(key, None)
    if ckpt:
        raise LayoutError(f"{len(ckpt)} keys were not consumed (e.g. {', '.join(sorted(ckpt)[:3])})")
    missing = sorted(set(shapes) - set(out))
    extra = sorted(set(out) - set(shapes))
    if missing or extra:
        what = [f"missing {', '.join(missing[:3])}"] if missing else []
        what += [f"unexpected {', '.join(extra[:3])}"] if extra else []
        raise LayoutError(f"{len(missing)} missing and {len(extra)} unexpected weights ({'; '.join(what)})")
    return out

"""Diffusers state dict -> an original (BFL/SAI/ComfyUI) key layout, from three tables an arch file
declares: the inverse of diffusers' single-file converters, used by the tiny factory to write files
the way users download them (toolkit/models/tiny/comfy_fp8.py checks each inverse against the converter).

- fused: (layer regex, [part layers], original layer template): the parts' weights/biases are
  concatenated on dim 0 into one original layer (q, k, v -> qkv);
- swapped: regexes of diffusers keys whose two halves swap (diffusers' scale/shift vs the original
  shift/scale order; swapping is its own inverse);
- renames: (regex, replacement), the first that matches renames the key.

`from_original` reads the same tables the other way, for a reader that cannot use diffusers'
converter (a GGUF file's packed rows: toolkit/models/formats/gguf_layouts.py); `read_original` is that
as a row's converter, where diffusers has none that reads the file (or one fixed to the real depth).
"""
import re


class LayoutError(ValueError):
    """A checkpoint whose keys do not fit the layout; the message names the keys."""


def to_original(state: dict, renames=(), fused=(), swapped=()) -> dict:
    import torch

    out = {}
    for key, t in state.items():
        hit = _fused(key, fused)
        if hit is not None:
            head, parts, original, part, tail = hit
            if part == parts[0]:
                out[original + tail] = torch.cat([state[head + p + tail] for p in parts], 0)
            continue
        if any(re.match(rx, key) for rx in swapped):
            t = _swap(t)
        out[_renamed(key, renames)] = t
    return out


def from_original(checkpoint: dict, shapes: dict, renames=(), fused=(), swapped=()) -> dict:
    """The model's own keys (`shapes`: {diffusers key: shape}) from an original-layout `checkpoint`,
    each popped from it under the name `to_original` gives it: a fused layer split on dim 0 at its
    parts' rows (which splits packed GGML rows too: a block never crosses a row), a swapped one
    swapped back. A key the checkpoint lacks is left out, and what it has over stays in it: the
    caller names both."""
    out = {}
    for key in shapes:
        hit = _fused(key, fused)
        if hit is not None:
            head, parts, original, part, tail = hit
            if part != parts[0] or original + tail not in checkpoint:
                continue
            t = checkpoint.pop(original + tail)
            names = [head + p + tail for p in parts]
            rows = [shapes[n][0] if n in shapes else -1 for n in names]
            if -1 in rows or sum(rows) != t.shape[0]:
                raise LayoutError(f"{original + tail}: {t.shape[0]} rows do not split into {', '.join(names)}")
            out.update(zip(names, t.split(rows, dim=0)))
            continue
        name = _renamed(key, renames)
        if name in checkpoint:
            t = checkpoint.pop(name)
            out[key] = _swap(t) if any(re.match(rx, key) for rx in swapped) else t
    return out


def read_original(checkpoint: dict, load_cls, config: dict, renames=(), fused=(), swapped=()) -> dict:
    """An original-layout checkpoint (ComfyUI's `model.diffusion_model.` prefix or none; any depth and
    width) in the names of `load_cls` built from `config` (its shapes, on the meta device); a key the
    checkpoint lacks or has over is a LayoutError naming it."""
    from toolkit.models.formats.at_width import strip
    from toolkit.models.formats.component_file import build_empty

    if isinstance(load_cls, str):
        from toolkit.models.arch import load_class
        load_cls = load_class(load_cls)
    ckpt = strip(checkpoint)
    shapes = {k: tuple(v.shape) for k, v in build_empty(load_cls, config).state_dict().items()}
    out = from_original(ckpt, shapes, renames, fused, swapped)
    if ckpt or set(out) != set(shapes):
        raise LayoutError(f"not a {load_cls.__name__} of this config: missing {sorted(set(shapes) - set(out))[:3]}, "
                          f"unexpected {sorted(ckpt)[:3]}")
    return out


def _renamed(key: str, renames) -> str:
    for rx, new in renames:
        if re.match(rx, key):
            return re.sub(rx, new, key)
    return key


def _swap(t):
    import torch

    a, b = t.chunk(2, 0)
    return torch.cat([b, a], 0)


def _fused(key: str, fused):
    for rx, parts, original in fused:
        m = re.match(rx + "(" + "|".join(re.escape(p) for p in parts) + r")(\.(weight|bias))$", key)
        if m:
            n = m.re.groups           # the last three groups: part, ".weight"/".bias", its name
            return key[:m.start(n - 2)], parts, m.expand(original), m.group(n - 2), m.group(n - 1)
    return None

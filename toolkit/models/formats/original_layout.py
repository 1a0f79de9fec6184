"""Diffusers state dict -> an original (BFL/SAI/ComfyUI) key layout, from three tables an arch file
declares: the inverse of diffusers' single-file converters, used by the tiny factory to write files
the way users download them (toolkit/models/tiny/comfy_fp8.py checks each inverse against the converter).

- fused: (layer regex, [part layers], original layer template): the parts' weights/biases are
  concatenated on dim 0 into one original layer (q, k, v -> qkv);
- swapped: regexes of diffusers keys whose two halves swap (diffusers' scale/shift vs the original
  shift/scale order; swapping is its own inverse);
- renames: (regex, replacement), the first that matches renames the key.
"""
import re

import torch


def to_original(state: dict, renames=(), fused=(), swapped=()) -> dict:
    out = {}
    for key, t in state.items():
        hit = _fused(key, fused)
        if hit is not None:
            head, parts, original, part, tail = hit
            if part == parts[0]:
                out[original + tail] = torch.cat([state[head + p + tail] for p in parts], 0)
            continue
        if any(re.match(rx, key) for rx in swapped):
            a, b = t.chunk(2, 0)
            t = torch.cat([b, a], 0)
        for rx, new in renames:
            if re.match(rx, key):
                key = re.sub(rx, new, key)
                break
        out[key] = t
    return out


def _fused(key: str, fused):
    for rx, parts, original in fused:
        m = re.match(rx + "(" + "|".join(re.escape(p) for p in parts) + r")(\.(weight|bias))$", key)
        if m:
            n = m.re.groups           # the last three groups: part, ".weight"/".bias", its name
            return key[:m.start(n - 2)], parts, m.expand(original), m.group(n - 2), m.group(n - 1)
    return None

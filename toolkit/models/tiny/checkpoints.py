"""A tiny model written as the single files people download, from its diffusers folder:

    write_checkpoint(arch, folder, out_path, roles=None, dtype=None) -> dict
        the all-in-one checkpoint (A1111/Forge `models/Stable-diffusion/`, ComfyUI `checkpoints/`):
        every component whose row says how (`SingleFile`), under its checkpoint prefix (the first of
        its `prefixes`), in its original key layout (`SingleFile.original`)
    write_component(arch, folder, role, out_path, prefix="", dtype=None) -> dict
        one component as a file of its own (ComfyUI `diffusion_models/`, `text_encoders/`, `vae/`)

Before writing, each layout is checked the other way round: the row's converter (diffusers' own,
for the LDM layouts) must give back the diffusers state dict exactly, so the file is one that the
libraries people use read as the same model. `dtype` casts every float tensor (real files are
fp16 or bf16); None keeps the folder's float32.
"""
import os

import torch


def _state(folder: str, subfolder: str) -> dict:
    from safetensors import safe_open
    sub = os.path.join(str(folder), subfolder)
    state = {}
    for name in sorted(f for f in os.listdir(sub) if f.endswith(".safetensors")):
        with safe_open(os.path.join(sub, name), "pt") as f:
            state.update({k: f.get_tensor(k) for k in f.keys()})
    return state


def _config(folder: str, subfolder: str) -> dict:
    import json
    path = os.path.join(str(folder), subfolder, "config.json")
    with open(path) as f:
        return json.load(f)


def original_state(arch: str, folder, role: str) -> dict:
    """`role`'s tensors in its original layout, checked against the row's converter."""
    from toolkit.models.arch import TEXT_ENCODER, load_object
    from toolkit.models.formats.component_file import align, convert
    from toolkit.models.registry import get_arch

    comp = get_arch(arch).component(role)
    sf = comp.single_file
    state = _state(folder, comp.folder)
    original = load_object(sf.original)(dict(state)) if sf.original else dict(state)
    back = align(convert(sf, {k: v.clone() for k, v in original.items()}, _config(folder, comp.folder)), state)
    # a tied weight the converter names twice (T5's shared and encoder.embed_tokens) the folder stores once
    tied = {k for k in set(back) - set(state)
            if any(v.shape == back[k].shape and torch.equal(v, back[k]) for v in state.values())}
    back = {k: v for k, v in back.items() if k not in tied}
    if set(back) != set(state) and comp.kind == TEXT_ENCODER:
        # a folder saved in a transformers layout of its own (Qwen2.5-VL's older names): the module's
        return _text_encoder_state(comp, folder)
    if set(back) != set(state):
        raise ValueError(f"{arch} {role}: the original layout does not convert back: missing "
                         f"{sorted(set(state) - set(back))[:3]}, extra {sorted(set(back) - set(state))[:3]}")
    bad = [k for k in state if not torch.equal(back[k].reshape(state[k].shape), state[k])]
    if bad:
        raise ValueError(f"{arch} {role}: the original layout converts back to other values for {bad[:3]}")
    return original


def _text_encoder_state(comp, folder) -> dict:
    """The folder's text encoder, built by transformers, in its kind's ComfyUI layout (checked both ways)."""
    import transformers

    from toolkit.models.tiny.text_encoder_files import comfy_state
    cls = getattr(transformers, comp.cls.split(":")[-1])
    module = cls.from_pretrained(os.path.join(str(folder), comp.folder), dtype=torch.float32)
    return comfy_state(module, comp.single_file)


def _save(tensors: dict, out_path, dtype, metadata=None) -> dict:
    from safetensors.torch import save_file
    out = {}
    for k, t in tensors.items():
        out[k] = (t.to(dtype) if dtype is not None and t.is_floating_point() else t).contiguous()
    out_path = str(out_path)
    os.makedirs(os.path.dirname(os.path.abspath(out_path)), exist_ok=True)
    tmp = out_path + ".tmp"
    save_file(dict(sorted(out.items())), tmp, metadata=metadata)
    os.replace(tmp, out_path)
    return {"path": out_path, "tensors": len(out), "bytes": os.path.getsize(out_path)}


def write_checkpoint(arch: str, folder, out_path, roles=None, dtype=None, extra: dict | None = None,
                     prefixes: dict | None = None) -> dict:
    """`extra`: more tensors to write as they are (marker keys such as `v_pred`); `prefixes`: role ->
    prefix where a variant's checkpoints put it (the SDXL refiner's OpenCLIP-G is its embedder 0)."""
    from toolkit.models.registry import get_arch
    spec = get_arch(arch)
    tensors = {}
    for comp in spec.components:
        if comp.single_file is None or not comp.single_file.anchors or (roles is not None and comp.role not in roles):
            continue
        prefix = (prefixes or {}).get(comp.role, comp.single_file.prefixes[0])
        tensors.update({prefix + k: v for k, v in original_state(arch, folder, comp.role).items()})
    tensors.update(extra or {})
    return _save(tensors, out_path, dtype)


def write_component(arch: str, folder, role: str, out_path, prefix: str = "", dtype=None) -> dict:
    return _save({prefix + k: v for k, v in original_state(arch, folder, role).items()}, out_path, dtype)

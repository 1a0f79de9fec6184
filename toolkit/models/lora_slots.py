"""LoRAs on a compiled denoiser: fixed adapter slots, hotswapped, so a LoRA switch does not recompile.

The i-th LoRA of a request goes into slot `aitkslot<i>` of the denoiser. A slot is injected once, through
diffusers' `enable_lora_hotswap(target_rank=…)` (its LoRA weights padded to the rank bound, its scalings
made tensors), which changes the module's structure: a recompile, once per slot. Later LoRAs are
hotswapped into the slot (`load_lora_weights(..., hotswap=True)`: weights copied in place), and a scale is
written into the scaling tensors: neither recompiles. A request without LoRAs disables the adapters
(one more compiled variant, reused after).

A LoRA that cannot be hotswapped runs on the ordinary path (toolkit/models/lora_adapters.py) with the call
eager: `check` says why (its rank over engine.compile_lora_rank, or it holds text-encoder weights, which
diffusers does not hotswap). A LoRA that targets other layers than the slot's earlier one is injected into
the slot afresh (a recompile, counted).

Slot names do not start with `aitk_`, so lora_adapters' books never count or delete them.
"""
import os

PREFIX = "aitkslot"


def check(pipeline, role: str, loras, fields, target_rank: int) -> str | None:
    """Why `loras` cannot go into `role`'s slots (the call then runs eager), or None. Malformed files are
    refused by lora_adapters.check_file (a ConfigError naming the field)."""
    from toolkit.models import lora_adapters

    comps = lora_adapters.lora_components(pipeline)
    if role not in comps:
        return f"{type(pipeline).__name__} loads no LoRAs into the {role}"    # the ordinary path refuses them
    checked = comps[role].__dict__.setdefault("_aitk_slot_checks", {})   # file key -> why not (or None)
    for i, ref in enumerate(loras):
        path = os.path.expanduser(ref.path)
        if not os.path.isfile(path):
            return f"no such file: {ref.path}"      # the ordinary path refuses it, naming the field
        key = (lora_adapters.adapter_key(path), target_rank)
        if key not in checked:               # each file read once (a rewritten file is another key)
            checked[key] = _why_not(pipeline, comps, role, path, fields[i], target_rank)
        if checked[key] is not None:
            return checked[key]
    return None


def _why_not(pipeline, comps, role, path, field, target_rank) -> str | None:
    from toolkit.models import lora_adapters

    lora_adapters.check_file(pipeline, comps, path, field)
    state = _state_dict(pipeline, comps, path)
    others = sorted({k.split(".", 1)[0] for k in state} - {role})
    if others:
        return f"{os.path.basename(path)} holds {', '.join(others)} weights (only the {role} is hotswapped)"
    rank = max((min(v.shape) for k, v in state.items() if _is_down(k) and v.ndim >= 2), default=0)
    if rank > target_rank:
        return f"{os.path.basename(path)} has rank {rank}, over engine.compile_lora_rank {target_rank}"
    return None


def apply(pipeline, role: str, loras, target_rank: int, status=None):
    """Put `loras` (LoraRefs) into `role`'s slots, active at their scales; none: the adapters disabled.
    The ordinary adapters (lora_adapters) must have been switched off first."""
    module = getattr(pipeline, role)
    slots = module.__dict__.setdefault("_aitk_slots", {})      # slot -> (file key, {layer: unit scaling})
    from toolkit.models.lora_adapters import adapter_key

    names = []
    for i, ref in enumerate(loras):
        path = os.path.expanduser(ref.path)
        key, slot = adapter_key(path), f"{PREFIX}{i}"
        held = slots.get(slot)
        if held is None or held[0] != key:
            if status is not None:
                status(f"loading LoRA {ref.name or os.path.basename(path)} into compiled slot {i}", "loading")
            _load(pipeline, module, slot, path, target_rank, hotswap=held is not None)
            slots[slot] = (key, _units(module, slot))
        for layer, unit in slots[slot][1]:
            _set_scaling(layer, slot, unit * ref.scale)
        names.append(slot)
    if not names:
        if getattr(module, "peft_config", None):
            module.disable_lora()
        return
    module.enable_lora()
    for layer in _lora_layers(module):
        layer.set_adapter([n for n in names if n in layer.lora_A])


def _load(pipeline, module, slot, path, target_rank, hotswap: bool):
    from toolkit.models.lora_adapters import _delete

    if hotswap:
        try:
            pipeline.load_lora_weights(path, adapter_name=slot, hotswap=True)
            return
        except Exception:        # noqa: BLE001 - other layers than the slot's: injected afresh below
            _delete([module], slot)
    pipeline.enable_lora_hotswap(target_rank=target_rank, check_compiled="ignore")
    try:
        pipeline.load_lora_weights(path, adapter_name=slot)
    except Exception:
        _delete([module], slot)
        raise
    finally:
        for comp in _hotswap_components(pipeline):        # consumed by the load; never left for a later one
            comp._prepare_lora_hotswap_kwargs = None


def _set_scaling(layer, slot, value: float):
    """In place where it is a tensor (what the compiled graph reads, so no recompile)."""
    import torch

    held = layer.scaling[slot]
    if isinstance(held, torch.Tensor):
        held.fill_(value)
    else:
        layer.scaling[slot] = torch.tensor(value)


def _units(module, slot) -> list:
    """(layer, scaling at scale 1) of every layer holding `slot`, read right after it was (re)loaded."""
    return [(layer, float(layer.scaling[slot])) for layer in _lora_layers(module) if slot in layer.scaling]


def _lora_layers(module):
    from peft.tuners.lora import LoraLayer
    return [m for m in module.modules() if isinstance(m, LoraLayer)]


def _hotswap_components(pipeline):
    return [getattr(pipeline, r) for r in getattr(pipeline, "_lora_loadable_modules", ())
            if hasattr(getattr(pipeline, r, None), "_prepare_lora_hotswap_kwargs")]


def _state_dict(pipeline, comps, path) -> dict:
    extra = {"unet_config": comps["unet"].config} if "unet" in comps else {}
    out = type(pipeline).lora_state_dict(path, **extra)
    state = out[0] if isinstance(out, tuple) else out
    return state


def _is_down(key: str) -> bool:
    return any(p in key for p in ("lora_A.", "lora_down.", "lora.down."))

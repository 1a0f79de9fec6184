"""LoRA adapters on a resident pipeline: loaded unmerged through diffusers' own loader, switched per request.

Each LoRA file is injected once as a PEFT adapter named after the file's identity (`aitk_<key>`, key:
12 hex of identity.fingerprint_files, so a rewritten file is a new adapter) and stays injected while
it is active or warm. `apply` sets a request's whole state every time: the modules belong to the
pool and are shared by every holder using them, so nothing a previous request left is trusted.

- no LoRA: every adapter disabled; each wrapped layer runs its base layer alone, bit for bit a fresh load.
- LoRAs: per component, `set_adapters(names, scales)` as the bare pipeline does (same order, same sums).
- fuse (model.lora_fuse): the active adapters merged into the weights for speed. The touched layers'
  weights are copied first and put back, exactly, before any request that differs (PEFT's unmerge
  subtracts the delta again, which is not bit exact). Fusing into stored-quantized weights (quanto,
  scaled FP8) is refused naming model.lora_fuse: unmerged, the adapters run beside them in the
  compute dtype.

A file is checked before anything is injected: it must read as a LoRA through the pipeline class's
own conversion (`lora_state_dict`), and every converted key must name a layer of a component the
pipeline loads LoRAs into (diffusers and PEFT only warn about the rest). A failed load deletes what
it injected. The pool (given explicitly; a holder does not know it) keeps the books and says which
inactive adapters stay warm; without one, inactive adapters are deleted at once.
"""
import hashlib
import os
import re
import time
import weakref

from toolkit.errors import ConfigError
from toolkit.models.formats.safetensors_header import HeaderError, check_file as check_header

# <component>.<layer path>.<PEFT LoRA tensor>: the keys lora_state_dict converts every format to
_KEY = re.compile(r"^(?P<role>[^.]+)\.(?P<layer>.+?)\.(lora_A|lora_B|lora_down|lora_up|lora_magnitude_vector|"
                  r"lora_embedding_A|lora_embedding_B|alpha)(\.|$)")


def adapter_key(path: str) -> str:
    from toolkit.models.v2.identity import fingerprint_files
    return hashlib.sha1(repr(fingerprint_files([path])).encode()).hexdigest()[:12]


def lora_components(pipeline) -> dict:
    """role -> module of every component the pipeline loads LoRAs into."""
    return {role: getattr(pipeline, role) for role in getattr(pipeline, "_lora_loadable_modules", ())
            if getattr(pipeline, role, None) is not None}


def injected(module) -> set:
    return set(getattr(module, "peft_config", None) or ())


def apply(pipeline, loras, *, fuse: bool = False, pool=None, dtype=None, status=None, where: str = "model",
          fields=None):
    """Put `pipeline`'s modules in the state `loras` (LoraRefs) ask for, loading the adapters not
    injected yet. Returns {adapter key: scale} of the active ones."""
    fields = fields or [f"{where}.loras[{i}].path" for i in range(len(loras))]   # the request keys that named them
    comps = lora_components(pipeline)
    wanted = []                                    # (index, ref, key)
    for i, ref in enumerate(loras):
        field = fields[i]
        path = os.path.expanduser(ref.path)
        if not os.path.isfile(path):
            raise ConfigError(field, f"no such file: {ref.path}")
        if not comps:
            raise ConfigError(field, f"{type(pipeline).__name__} takes no LoRAs")
        key = adapter_key(path)
        twin = next((j for j, _r, k in wanted if k == key), None)
        if twin is not None:
            raise ConfigError(field, f"the same file as {fields[twin]} (give it once, with the scale wanted)")
        wanted.append((i, ref, key))
    state = tuple((key, ref.scale) for _i, ref, key in wanted) if fuse and wanted else None
    for module in comps.values():                  # a fuse that is not exactly this request's goes first
        if getattr(module, "_aitk_fused", None) is not None and module._aitk_fused[0] != state:
            _unfuse(module)
    for i, ref, key in wanted:
        _ensure_loaded(pipeline, comps, ref, key, fields[i], pool, dtype, status)
    names = [(f"aitk_{key}", ref.scale) for _i, ref, key in wanted]
    if state is None or any(getattr(m, "_aitk_fused", None) is None for m in _holding(comps, names)):
        _set_state(comps, names)
        if state is not None:
            _fuse(comps, names, state, f"{where}.lora_fuse")
    active = {key: ref.scale for _i, ref, key in wanted}
    _release(comps, active, pool)
    return active


# -- loading ---------------------------------------------------------------------------------------
def _ensure_loaded(pipeline, comps, ref, key, field, pool, dtype, status):
    from toolkit.models.v2.pool import AdapterEntry

    name = f"aitk_{key}"
    entry = pool.adapter(key) if pool is not None else None
    holders = {role for role, m in comps.items() if name in injected(m)}
    if entry is not None and all(comps.get(role) is r() for role, r in entry.modules.items()):
        pool.adapter_hit(entry)                    # injected in these very modules: nothing to load
        return
    if pool is None and holders:
        return
    if entry is not None or holders:               # in some modules but not these (a component reloaded)
        _delete([r() for r in (entry.modules.values() if entry else ())] + [comps[r] for r in holders], name)
    path = os.path.expanduser(ref.path)
    check_file(pipeline, comps, path, field)
    label = ref.name or os.path.basename(path)
    if status is not None:
        status(f"loading LoRA {label}", "loading")
    _compute_dtypes(comps, dtype)
    try:
        pipeline.load_lora_weights(path, adapter_name=name)
    except Exception as e:
        _delete(comps.values(), name)              # nothing half-loaded stays behind
        if _is_oom(e):
            raise
        raise ConfigError(field, f"cannot load {os.path.basename(path)}: {type(e).__name__}: {e}") from None
    holders = {role: m for role, m in comps.items() if name in injected(m)}
    if pool is not None:
        pool.adapter_loaded(AdapterEntry(key, label, sum(_adapter_bytes(m, name) for m in holders.values()),
                                         {role: weakref.ref(m) for role, m in holders.items()}, time.time()))


def check_file(pipeline, comps, path: str, field: str):
    """The file is a well-formed safetensors file (its header), reads as a LoRA through the pipeline's
    own conversion, and every key names a layer of a component that takes LoRAs; else a ConfigError
    naming `field`, the file's basename (and the first unmatched key)."""
    base = os.path.basename(path)
    try:                                           # the format first: the libraries' errors name no file
        check_header(path)
    except HeaderError as e:
        raise ConfigError(field, f"{base} is not a LoRA file {type(pipeline).__name__} reads: {e.reason}") from None
    try:
        # a UNet's config maps kohya's SGM block numbers (SDXL) to diffusers' own, as load_lora_weights does
        extra = {"unet_config": comps["unet"].config} if "unet" in comps else {}
        out = type(pipeline).lora_state_dict(path, **extra)
    except Exception as e:
        raise ConfigError(field, f"{base} is not a LoRA file {type(pipeline).__name__} reads: "
                          f"{type(e).__name__}: {e}") from None
    state = out[0] if isinstance(out, tuple) else out
    if not state:
        raise ConfigError(field, f"{base} holds no LoRA weights")
    unmatched = [k for k in _peft_keys(comps, state) if not _names_a_layer(comps, k)]
    if len(unmatched) == len(state):
        raise ConfigError(field, f"no weights in {base} match {type(pipeline).__name__}'s layers "
                          f"(a LoRA for another arch?): first key {unmatched[0]}")
    if unmatched:
        raise ConfigError(field, f"{len(unmatched)} of {len(state)} keys in {base} match no layer of "
                          f"{type(pipeline).__name__}: first {unmatched[0]}")


def _peft_keys(comps, state) -> list:
    """The keys as diffusers hands them to PEFT. SD's kohya conversion yields the older attention-processor
    names (`…attn1.processor.to_k_lora.down.weight`, a text encoder's `…self_attn.to_k_lora.down.weight`),
    which diffusers' load_lora_into_unet and _load_lora_into_text_encoder rename before injecting; the
    same renames here (keys only), per component, so those files are checked as they will be loaded."""
    from diffusers.utils import convert_state_dict_to_diffusers, convert_state_dict_to_peft, \
        convert_unet_state_dict_to_peft
    from transformers import PreTrainedModel

    by_role = {}
    for k in state:
        by_role.setdefault(k.split(".", 1)[0], {})[k] = None
    out = []
    for role, part in by_role.items():
        try:
            if isinstance(comps.get(role), PreTrainedModel):
                part = convert_state_dict_to_peft(convert_state_dict_to_diffusers(part))
            else:
                part = convert_unet_state_dict_to_peft(part)
        except ValueError:                         # already PEFT names: nothing to rename
            pass
        out += list(part)
    return out


def _names_a_layer(comps, key: str) -> bool:
    m = _KEY.match(key)
    module = comps.get(m["role"]) if m else None
    if module is None:
        return False
    layer = m["layer"]
    if not hasattr(module, "text_model"):         # transformers 5's CLIP has no text_model level; diffusers drops it
        layer = layer.removeprefix("text_model.")
    try:
        module.get_submodule(layer)
    except AttributeError:
        return False
    return True


def _compute_dtypes(comps, dtype):
    """PEFT gives an adapter its base layer's dtype, or the layer's `compute_dtype` when it has one (as
    bitsandbytes layers do). A layer storing FP8 would make the adapter FP8 too (its values rounded on
    load): such layers are told the compute dtype the model runs in."""
    import torch

    compute = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
    for module in comps.values():
        for layer in module.modules():
            weight = getattr(layer, "weight", None)
            if (isinstance(layer, torch.nn.Linear) and isinstance(weight, torch.Tensor)
                    and weight.dtype not in compute and getattr(layer, "compute_dtype", None) is None):
                layer.compute_dtype = dtype or torch.float32


def _adapter_bytes(module, name: str) -> int:
    marker = f".{name}."
    return sum(p.numel() * p.element_size() for n, p in module.named_parameters() if marker in n)


def _delete(modules, name: str):
    from diffusers.utils.peft_utils import delete_adapter_layers

    for module in {id(m): m for m in modules if m is not None}.values():
        if getattr(module, "_aitk_fused", None) is not None and any(k == name[5:] for k, _s in module._aitk_fused[0]):
            _unfuse(module)
        delete_adapter_layers(module, name)
        config = getattr(module, "peft_config", None)
        if isinstance(config, dict):               # diffusers' models keep their own copy of the books
            config.pop(name, None)


def _is_oom(e) -> bool:
    import torch
    return isinstance(e, torch.OutOfMemoryError)


# -- state -----------------------------------------------------------------------------------------
def _holding(comps, names):
    return [m for m in comps.values() if injected(m) & {n for n, _s in names}]


def _set_state(comps, names):
    """Per component: its adapters among `names` active at their scales, in request order; none: disabled."""
    from diffusers import ModelMixin
    from diffusers.loaders.lora_base import disable_lora_for_text_encoder, enable_lora_for_text_encoder, \
        set_adapters_for_text_encoder

    for module in comps.values():
        present = injected(module)
        if not present:
            continue
        mine = [(n, s) for n, s in names if n in present]
        if isinstance(module, ModelMixin):         # diffusers' models and transformers' encoders differ here
            if mine:
                module.enable_lora()
                module.set_adapters([n for n, _s in mine], [s for _n, s in mine])
            else:
                module.disable_lora()
        elif mine:
            enable_lora_for_text_encoder(module)
            set_adapters_for_text_encoder([n for n, _s in mine], module, [s for _n, s in mine])
        else:
            disable_lora_for_text_encoder(module)


def _lora_layers(module, names):
    from peft.tuners.tuners_utils import BaseTunerLayer

    for layer in module.modules():
        if isinstance(layer, BaseTunerLayer):
            mine = [n for n in names if n in getattr(layer, "lora_A", {})]
            if mine:
                yield layer, mine


def _fuse(comps, names, state, field):
    import torch

    plain = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
    adapter_names = [n for n, _s in names]
    layers = {role: list(_lora_layers(module, adapter_names)) for role, module in comps.items()}
    for role, found in layers.items():            # all checked before any weight changes
        for layer, _mine in found:
            base = layer.get_base_layer()
            if type(base.weight.data) is not torch.Tensor or base.weight.dtype not in plain:
                raise ConfigError(field, f"cannot fuse a LoRA into the quantized {role} ({type(base).__name__} "
                                  "weights): leave lora_fuse off, the LoRAs then run unmerged beside them")
    for role, found in layers.items():
        if not found:
            continue
        backup = []
        for layer, mine in found:
            base = layer.get_base_layer()
            backup.append((base, base.weight.data.clone(), None if base.bias is None else base.bias.data.clone()))
            layer.merge(adapter_names=mine)
        comps[role]._aitk_fused = (state, backup, [layer for layer, _m in found])


def _unfuse(module):
    """Put back the weights copied before the fuse: exact, unlike PEFT's unmerge."""
    _state, backup, layers = module._aitk_fused
    for base, weight, bias in backup:
        base.weight.data = weight
        if bias is not None:
            base.bias.data = bias
    for layer in layers:
        layer.merged_adapters.clear()
    module._aitk_fused = None


def _release(comps, active: dict, pool):
    """Mark the books; delete the inactive adapters the pool does not keep warm (all, without a pool)."""
    if pool is None:
        keep = {f"aitk_{k}" for k in active}
        for module in comps.values():
            for name in injected(module) - keep:
                if name.startswith("aitk_"):
                    _delete([module], name)
        return
    pool.set_active_adapters(active)
    for entry in pool.adapters_to_release():
        _delete([r() for r in entry.modules.values()], entry.adapter)

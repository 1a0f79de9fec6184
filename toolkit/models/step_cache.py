"""Step caching (`sample.cache`): diffusers' own cache hooks on the resident denoiser, for one request.

`sample.cache = {type: first_block | mag | taylorseer | faster, <param>: value, ...}`. The table below is
plain data (validation needs no torch); `applied()` builds the diffusers config, registers its hooks on
every denoiser of the call's pipeline and removes exactly the hooks it added afterwards (also on error or
cancel), so the next request runs the untouched model. Which types an arch takes, and the fixed
parameters they need there (module patterns, magnitude ratios), are its row's `step_caches`.
"""
import contextlib
import math

from toolkit.errors import ConfigError, check_keys

# type -> param -> (kind, default, check); kind: "float" | "int" | "bool" | "range" (two numbers) | "floats"
_POS, _NONNEG, _ANY = (lambda v: v > 0, "> 0"), (lambda v: v >= 0, ">= 0"), (lambda v: True, "")
TYPES = {
    # the first block's residual barely changed -> reuse the other blocks' residual from the last step
    "first_block": {"threshold": ("float", 0.05, _POS)},
    # skip blocks while the accumulated magnitude-ratio error stays small; needs per-model ratios
    "mag": {"threshold": ("float", 0.06, _POS), "max_skip_steps": ("int", 3, _POS),
            "retention_ratio": ("float", 0.2, (lambda v: 0 <= v < 1, "in [0, 1)")),
            "mag_ratios": ("floats", None, _ANY)},
    # full compute every `cache_interval` steps, Taylor-extrapolated module outputs in between
    "taylorseer": {"cache_interval": ("int", 5, _POS), "disable_cache_before_step": ("int", 3, _NONNEG),
                   "disable_cache_after_step": ("int", None, _NONNEG), "max_order": ("int", 1, _NONNEG)},
    # attention outputs reused every other step inside a timestep window (attention level only here)
    "faster": {"spatial_attention_block_skip_range": ("int", 2, (lambda v: v >= 2, ">= 2")),
               "spatial_attention_timestep_skip_range": ("range", (-1, 681), _ANY)},
}


def validate(value, spec, where: str = "sample.cache") -> dict | None:
    """`sample.cache` resolved: every parameter filled (arch default, else the table's), or None.
    A bad key names `sample.cache.<key>`; a type the arch does not take names `sample.cache.type`."""
    if value is None:
        return None
    if isinstance(value, str):
        value = {"type": value}
    check_keys(value, {"type"} | {p for t in TYPES.values() for p in t}, where, required=("type",))
    kind = value["type"]
    if kind not in TYPES:
        raise ConfigError(f"{where}.type", f"unknown cache type {kind!r} (known: {', '.join(TYPES)})")
    takes = spec.step_caches
    if kind not in takes:
        raise ConfigError(f"{where}.type", f"arch {spec.name} takes no {kind} cache "
                          f"(it takes: {', '.join(takes) or 'none'})")
    params = TYPES[kind]
    out = {"type": kind}
    for key, raw in value.items():
        if key != "type" and key not in params:
            raise ConfigError(f"{where}.{key}", f"not a parameter of the {kind} cache "
                              f"(its parameters: {', '.join(params)})")
    fixed = takes[kind]
    for key, (ptype, default, (check, rule)) in params.items():
        raw = value.get(key)
        if raw is None:
            out[key] = fixed.get(key, default) if key != "mag_ratios" else None
            continue
        v = _coerce(raw, ptype, f"{where}.{key}")
        if ptype in ("int", "float") and not check(v):
            raise ConfigError(f"{where}.{key}", f"must be {rule}, got {raw!r}")
        out[key] = v
    if kind == "mag" and out["mag_ratios"] is None and not fixed.get("mag_ratios"):
        raise ConfigError(f"{where}.mag_ratios", f"arch {spec.name} ships no magnitude ratios: give mag_ratios")
    if isinstance(out.get("spatial_attention_timestep_skip_range"), tuple):
        out["spatial_attention_timestep_skip_range"] = list(out["spatial_attention_timestep_skip_range"])
    return out


def _coerce(raw, ptype, key):
    if ptype == "bool":
        if not isinstance(raw, bool):
            raise ConfigError(key, f"must be true or false, got {raw!r}")
        return raw
    if ptype in ("range", "floats"):
        if not isinstance(raw, (list, tuple)) or not all(_number(x) for x in raw) or not raw:
            raise ConfigError(key, f"must be a list of numbers, got {raw!r}")
        if ptype == "range" and (len(raw) != 2 or raw[0] >= raw[1]):
            raise ConfigError(key, f"must be [low, high] with low < high, got {raw!r}")
        return [float(x) for x in raw]
    if not _number(raw) or (ptype == "int" and raw != int(raw)):
        raise ConfigError(key, f"must be {'an integer' if ptype == 'int' else 'a number'}, got {raw!r}")
    return int(raw) if ptype == "int" else float(raw)


def _number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


# -- torch side ---------------------------------------------------------------------------------------

def diffusers_config(cache: dict, fixed: dict, *, num_steps: int, scheduler):
    """The diffusers config for a resolved `cache`, with the arch's fixed parameters."""
    import torch
    from diffusers.hooks import FasterCacheConfig, FirstBlockCacheConfig, MagCacheConfig, TaylorSeerCacheConfig

    from toolkit.models.arch import load_object

    kind = cache["type"]
    if kind == "first_block":
        return FirstBlockCacheConfig(threshold=cache["threshold"])
    if kind == "mag":
        ratios = cache["mag_ratios"] or fixed["mag_ratios"]
        ratios = load_object(ratios) if isinstance(ratios, str) else ratios
        return MagCacheConfig(threshold=cache["threshold"], max_skip_steps=cache["max_skip_steps"],
                              retention_ratio=cache["retention_ratio"], num_inference_steps=num_steps,
                              mag_ratios=torch.as_tensor(ratios, dtype=torch.float32))
    if kind == "taylorseer":
        return TaylorSeerCacheConfig(
            cache_interval=cache["cache_interval"], disable_cache_before_step=cache["disable_cache_before_step"],
            disable_cache_after_step=cache["disable_cache_after_step"], max_order=cache["max_order"],
            taylor_factors_dtype=torch.float32, cache_identifiers=fixed.get("cache_identifiers"))
    if kind == "faster":
        def timestep():
            # the scheduler's own timestep (0..1000) of the step being run: pipelines differ in what they pass
            ts, i = scheduler.timesteps, getattr(scheduler, "step_index", None) or 0
            return float(ts[min(i, len(ts) - 1)])
        kw = {k: v for k, v in fixed.items() if k in ("spatial_attention_block_identifiers", "tensor_format")}
        # attention-level only: the denoiser-level hook assumes a batch-concatenated uncond/cond call
        return FasterCacheConfig(
            spatial_attention_block_skip_range=cache["spatial_attention_block_skip_range"],
            spatial_attention_timestep_skip_range=tuple(cache["spatial_attention_timestep_skip_range"]),
            current_timestep_callback=timestep, is_guidance_distilled=True, **kw)
    raise ValueError(kind)


_APPLY = {"first_block": "apply_first_block_cache", "mag": "apply_mag_cache",
          "taylorseer": "apply_taylorseer_cache", "faster": "apply_faster_cache"}
CONTEXT_HOOK = "aitk_cache_context"


@contextlib.contextmanager
def applied(pipe, cache: dict | None, spec, *, num_steps: int):
    """While active, `cache` runs on every denoiser of `pipe`; afterwards each module's hooks are
    what they were before (the ones added are removed, in reverse), whatever happened."""
    if not cache:
        yield
        return
    import diffusers.hooks as dh

    fixed = spec.step_caches[cache["type"]]
    denoisers = [pipe.components[r] for r in spec.denoiser_roles if pipe.components.get(r) is not None]
    added = []
    try:
        for module in denoisers:
            before = _hook_names(module)
            getattr(dh, _APPLY[cache["type"]])(module, diffusers_config(
                cache, fixed, num_steps=num_steps, scheduler=pipe.scheduler))
            dh.HookRegistry.check_if_exists_or_initialize(module).register_hook(_ContextHook(), CONTEXT_HOOK)
            added.append((module, before))
            _invalidate(module)
        yield
    finally:
        for module, before in reversed(added):
            for sub, names in reversed(_hook_names(module).items()):
                for name in reversed(names):
                    if name not in before.get(sub, ()):
                        sub._diffusers_hook.remove_hook(name, recurse=False)
                if sub not in before and not sub._diffusers_hook._hook_order:
                    _drop_registry(sub)
            _invalidate(module)


def _hook_names(module) -> dict:
    """{submodule: [hook names in registration order]} for every diffusers hook registry under `module`."""
    return {sub: list(sub._diffusers_hook._hook_order) for sub in module.modules() if hasattr(sub, "_diffusers_hook")}


def _drop_registry(sub):
    """A registry this request created, now empty: gone, with the class's own forward back."""
    del sub._diffusers_hook
    fwd = sub.__dict__.get("forward")
    if getattr(fwd, "__func__", None) is type(sub).forward:
        del sub.forward


def _invalidate(module):
    registry = getattr(module, "_diffusers_hook", None)
    if registry is not None and hasattr(registry, "invalidate_child_registries_cache"):
        registry.invalidate_child_registries_cache()


class _ContextHook:
    """Gives each denoiser call a cache context when the pipeline sets none (ZImage's does not): the
    hooks keep their per-step state under a context name, and refuse to run without one."""

    def __new__(cls):
        from diffusers.hooks import ModelHook
        from diffusers.hooks.hooks import CacheContext, StateManager, _set_cache_context

        class ContextHook(ModelHook):
            def new_forward(self, module, *args, **kwargs):
                registry = module._diffusers_hook
                managers = [a for r in (registry, *registry._get_child_registries()) for h in r.hooks.values()
                            for a in vars(h).values() if isinstance(a, StateManager)]
                if not managers or any(m._context is not None for m in managers):
                    return self.fn_ref.original_forward(*args, **kwargs)
                _set_cache_context(module, CacheContext("cond"))
                try:
                    return self.fn_ref.original_forward(*args, **kwargs)
                finally:
                    _set_cache_context(module, None)
        return ContextHook()

"""Per-call patches: an attribute of a pipeline, scheduler or module replaced for one pipeline call.

Every such wrap goes through `patched(obj, name, wrapper)`: `wrapper(current)` becomes the instance's
own attribute while the context is active, and on the way out (also on error or cancel) the instance
gets back exactly what it had, only while the attribute is still that patch. A wrap that was laid
over ours and is still there is left in place, and an attribute that lived on the class alone is
deleted from the instance again (the class's method shows through), never copied onto it.

The one place that enters them is BaseModel.generate_single (toolkit/models/base_model.py), in this
order, innermost first: a later patch of the same attribute wraps the earlier ones, so it runs first.

1. the call's scheduler: `pipe.scheduler` is the sampler's (BaseModel.call_scheduler). First, so
   every scheduler wrap below lands on the scheduler that runs.
2. the arch's patches (BaseModel.call_patches; krea2's mu on `scheduler.set_timesteps`): what the
   pipeline computes, right over its own methods.
3. the steps run: `pipe.get_timesteps` notes how many steps an img2img call runs (base_model.py).
4. the step hook: `scheduler.step` reports each step's latents (toolkit/models/step_hook.py; a holder's
   `step_reports` may report otherwise).
5. the conditioning cache: `pipe.encode_prompt` answers from the cache (toolkit/models/v2/cond_cache.py).
6. the stage messages: `pipe.encode_prompt`, `scheduler.set_timesteps` and `vae.decode` say when
   encoding, sampling and decoding start (BaseModel._stage_wraps). Outermost, so "encoding" is said
   on a cache hit too and "sampling" after the arch's set_timesteps ran.
7. the decode tiling: `vae.decode` switches the VAE's own `use_tiling` / `use_slicing` on for the call when
   `sample.vae_tiling` asks, and retries a decode that ran out of memory tiled (toolkit/models/vae_tiling.py).
   Over the stage messages, so an out-of-memory error raised anywhere in the decode is seen.
8. the step cache: diffusers' own named hooks on the denoisers' forward, through its HookRegistry
   (toolkit/models/step_cache.py); no attribute here is shared with the patches above.

A deep copy of a patched object, made during the call, is the object without the call's patches:
LTX-2's pipelines (and SkyReels-V2's, Cosmos 3's) `copy.deepcopy(self.scheduler)` for a second
modality; a copied patch would still be bound to the original (its step, its counter), so the copy
would step the original's schedule and report its latents as the original's steps.
"""
import contextlib
import copy
import functools

_ABSENT = object()
_UNPATCHED = "_aitk_unpatched"      # an instance's own values from before its active patches: {name: value}


@contextlib.contextmanager
def patched(obj, name: str, wrapper):
    """While active, `obj.name` is `wrapper(obj.name)` (yielded), set in the instance's own
    `__dict__`: the owner's `__setattr__` is bypassed (a DiffusionPipeline's would re-register its
    config). Afterwards the instance's previous own value is back (or none, if the attribute came
    from its class), unless another patch has replaced this one meanwhile: that one is left alone."""
    own = vars(obj)
    previous = own.get(name, _ABSENT)
    patch = wrapper(getattr(obj, name))
    own[name] = patch
    first = _note_unpatched(obj, name, previous)
    try:
        yield patch
    finally:
        if own.get(name, _ABSENT) is patch:
            if previous is _ABSENT:
                del own[name]
            else:
                own[name] = previous
        if first:
            _forget_unpatched(own, name)


def _note_unpatched(obj, name: str, previous) -> bool:
    """Keep `name`'s value from before the first of its active patches, for deep copies; True when
    this patch is that first one. A class with its own __deepcopy__ keeps it (copies keep patches)."""
    own = vars(obj)
    book = own.get(_UNPATCHED)
    if book is None:
        if getattr(type(obj), "__deepcopy__", None) is not None:
            return False
        book = own[_UNPATCHED] = {}
        own["__deepcopy__"] = functools.partial(_unpatched_copy, obj)
    if name in book:
        return False
    book[name] = previous
    return True


def _forget_unpatched(own: dict, name: str):
    book = own.get(_UNPATCHED, {})
    book.pop(name, None)
    if not book:
        own.pop(_UNPATCHED, None)
        own.pop("__deepcopy__", None)


def _unpatched_copy(obj, memo):
    """copy.deepcopy(obj) as if no patch were active (what the default deep copy does, over the
    instance's values from before its patches)."""
    book = vars(obj)[_UNPATCHED]
    state = {k: v for k, v in vars(obj).items() if k not in book and k not in (_UNPATCHED, "__deepcopy__")}
    state.update({k: v for k, v in book.items() if v is not _ABSENT})
    cls = type(obj)
    clone = cls.__new__(cls)
    memo[id(obj)] = clone
    state = copy.deepcopy(state, memo)
    if hasattr(clone, "__setstate__"):
        clone.__setstate__(state)
    else:
        clone.__dict__.update(state)
    return clone

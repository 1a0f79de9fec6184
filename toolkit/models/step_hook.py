"""Per-step latents from any diffusers-style pipeline, by wrapping its scheduler's `step`.

The wrap keeps the wrapped method's signature (functools.wraps): several pipelines inspect
`scheduler.step`'s parameters to decide whether to pass eta/generator, and a bare
*args/**kwargs wrapper would silently drop the generator.
"""
import contextlib
import functools
import inspect

from toolkit.models.patches import patched


def _x0(scheduler, out, sample, model_output, step_index):
    """The predicted clean sample, where the scheduler makes it available."""
    pred = getattr(out, "pred_original_sample", None)
    if pred is not None:
        return pred
    sigmas = getattr(scheduler, "sigmas", None)
    if sigmas is not None and _is_flow_matching(scheduler) and step_index is not None:
        sigma = sigmas[step_index].to(sample.device, sample.dtype)
        return sample - sigma * model_output  # flow matching: x0 = x_t - sigma * v
    return None


def _is_flow_matching(scheduler) -> bool:
    cfg = getattr(scheduler, "config", {}) or {}
    return type(scheduler).__name__.startswith("FlowMatch") or bool(cfg.get("use_flow_sigmas"))


def wrap_scheduler_step(scheduler, hook):
    """A context: while active, `hook(step_index, num_steps, timestep, latents, x0)` runs after every
    `scheduler.step` (a patch: toolkit/models/patches.py). With `hook` None this is a no-op: the
    scheduler is untouched."""
    if hook is None:
        return contextlib.nullcontext()
    return patched(scheduler, "step", lambda original: _reporting(scheduler, original, hook))


def _reporting(scheduler, original, hook):
    """`original` (the scheduler's step) followed by `hook` with the step's latents and x0."""
    params = inspect.signature(original).parameters
    counter = {"i": 0}

    @functools.wraps(original)
    def step(*args, **kwargs):
        bound = _bind(params, args, kwargs)
        out = original(*args, **kwargs)
        latents = out[0] if isinstance(out, tuple) else getattr(out, "prev_sample", None)
        if latents is None and hasattr(out, "to_tuple"):
            latents = out.to_tuple()[0]
        sample, model_output = bound.get("sample"), bound.get("model_output")
        x0 = None
        if sample is not None and model_output is not None:
            index_after = getattr(scheduler, "step_index", None)
            x0 = _x0(scheduler, out, sample, model_output, None if index_after is None else index_after - 1)
        timesteps = getattr(scheduler, "timesteps", None)
        num_steps = len(timesteps) if timesteps is not None else counter["i"] + 1
        hook(counter["i"], num_steps, bound.get("timestep"), latents, x0)
        counter["i"] += 1
        return out
    return step


def _bind(params, args, kwargs) -> dict:
    names = [n for n in params if n != "self"]
    bound = dict(zip(names, args))
    bound.update(kwargs)
    return bound

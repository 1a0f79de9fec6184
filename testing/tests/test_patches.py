"""Per-call patches (toolkit/models/patches.py): `patched` puts back exactly what the instance had, and
only while the attribute is still its patch; on tiny models, a pipeline call's wraps compose in the
documented order and leave no instance attribute behind."""
import contextlib

import pytest

from toolkit.config_modules import GenerateImageConfig
from toolkit.models.base_model import get_model_class
from toolkit.models.patches import patched
from toolkit.models.registry import ARCHS
from toolkit.models.v2.cond_cache import ConditioningCache


class Thing:
    def greet(self, who):
        return f"hello {who}"


def shouting(original):
    def greet(who):
        return original(who).upper()
    return greet


def suffixed(suffix):
    def wrap(original):
        def greet(who):
            return original(who) + suffix
        return greet
    return wrap


def test_a_class_method_shows_through_again_after():
    thing = Thing()
    with patched(thing, "greet", shouting) as patch:
        assert thing.greet("you") == "HELLO YOU" and vars(thing)["greet"] is patch
    assert "greet" not in vars(thing), "the class's method is not copied onto the instance"
    assert thing.greet("you") == "hello you"


def test_an_instance_attribute_is_put_back_as_it_was():
    thing = Thing()
    own = thing.greet = lambda who: f"hi {who}"
    with patched(thing, "greet", shouting):
        assert thing.greet("you") == "HI YOU", "the wrapper gets the instance's own attribute"
    assert vars(thing)["greet"] is own


def test_a_plain_value_is_swapped_and_put_back():
    thing = Thing()
    thing.scheduler = resident = object()
    call = object()
    with patched(thing, "scheduler", lambda current: call):
        assert thing.scheduler is call
    assert thing.scheduler is resident


def test_a_later_patch_still_there_is_not_clobbered():
    thing = Thing()
    with contextlib.ExitStack() as outer:
        outer.enter_context(patched(thing, "greet", shouting))
        later = patched(thing, "greet", suffixed("!"))
        theirs = later.__enter__()
    # ours ended first (out of order): the later patch is still the attribute and stays
    assert vars(thing)["greet"] is theirs and thing.greet("you") == "HELLO YOU!"
    later.__exit__(None, None, None)


def test_an_attribute_replaced_meanwhile_is_left_alone():
    thing = Thing()
    with patched(thing, "greet", shouting):
        replaced = thing.greet = lambda who: "replaced"
    assert vars(thing)["greet"] is replaced
    del thing.greet
    with patched(thing, "greet", shouting):
        del thing.greet                         # someone removed it: nothing to put back
    assert "greet" not in vars(thing) and thing.greet("you") == "hello you"


def test_nested_patches_compose_the_later_outermost_and_unwind():
    thing = Thing()
    with patched(thing, "greet", suffixed("!")):
        with patched(thing, "greet", shouting):
            assert thing.greet("you") == "HELLO YOU!", "the later patch runs first, over the earlier"
        assert thing.greet("you") == "hello you!"
    assert "greet" not in vars(thing)


def test_an_error_inside_still_restores():
    thing = Thing()
    thing.greet = own = shouting(Thing().greet)
    with pytest.raises(RuntimeError, match="boom"):
        with patched(thing, "greet", suffixed("?")):
            raise RuntimeError("boom")
    assert vars(thing)["greet"] is own


def test_a_wrapper_that_raises_installs_nothing():
    thing = Thing()

    def broken(original):
        raise ValueError("no")
    with pytest.raises(ValueError):
        with patched(thing, "greet", broken):
            pass
    assert "greet" not in vars(thing)


def test_the_owner_setattr_is_not_called():
    """A DiffusionPipeline's __setattr__ re-registers its config for a module it is given."""
    class Recording(Thing):
        def __setattr__(self, name, value):
            raise AssertionError(f"__setattr__({name!r}) called")
    thing = Recording()
    with patched(thing, "greet", shouting):
        assert thing.greet("x") == "HELLO X"
    assert "greet" not in vars(thing)



def test_a_deep_copy_made_during_a_patch_is_the_unpatched_object():
    """LTX-2's pipelines deep-copy their scheduler for the audio latents: the copy has none of the
    call's patches (nested ones included) and its own state; nothing of the bookkeeping stays after."""
    import copy

    thing = Thing()
    thing.state = [1]
    with patched(thing, "greet", shouting):
        with patched(thing, "greet", suffixed("!")):
            clone = copy.deepcopy(thing)
            assert thing.greet("x") == "HELLO X!"
    assert clone.greet("x") == "hello x" and "greet" not in vars(clone)
    assert clone.state == [1] and clone.state is not thing.state
    assert vars(thing) == {"state": [1]} and vars(clone) == {"state": [1]}
    owned = Thing()
    owned.greet = lambda who: f"hi {who}"          # an instance's own value before the patch comes back in the copy
    with patched(owned, "greet", shouting):
        assert copy.deepcopy(owned).greet("x") == "hi x"


def test_a_scheduler_copied_during_the_step_hook_steps_on_its_own():
    """The step hook's wrap is not carried into a copy: stepping the copy neither reports a step nor
    advances the original's schedule (what LTX-2's audio scheduler did before)."""
    import copy

    import torch
    from diffusers import FlowMatchEulerDiscreteScheduler

    from toolkit.models.step_hook import wrap_scheduler_step

    scheduler = FlowMatchEulerDiscreteScheduler()
    seen = []
    with wrap_scheduler_step(scheduler, lambda i, n, t, lat, x0: seen.append(i)):
        audio = copy.deepcopy(scheduler)
        for s in (scheduler, audio):
            s.set_timesteps(2)
        sample = torch.zeros(1, 4)
        for t in scheduler.timesteps:
            scheduler.step(torch.ones(1, 4), t, sample)
            audio.step(torch.ones(1, 4), t, sample)
    assert seen == [0, 1] and scheduler.step_index == audio.step_index == 2

# -- a pipeline call, on tiny models ----------------------------------------------------------------

PATCHED = {"pipe": ("encode_prompt", "get_timesteps", "scheduler"), "scheduler": ("step", "set_timesteps"),
           "vae": ("decode",)}


def _own(holder) -> dict:
    """The instance attributes a call could have patched, as the holder's objects have them now."""
    pipe = holder.pipeline
    objects = {"pipe": pipe, "scheduler": pipe.scheduler, "vae": pipe.vae}
    return {(k, n): vars(o).get(n) for k, o in objects.items() for n in PATCHED[k]}


def test_stage_messages_wrap_the_conditioning_cache_and_nothing_stays(tiny):
    """Stage messages are outer to the conditioning cache: "encoding" is said on a cache hit too. Every
    wrap of the call (sampler, steps, step hook, cache, stages) is gone after, the resident scheduler back."""
    arch = "zimage"
    holder = get_model_class(arch)({"arch": arch, "name_or_path": tiny(arch), "local_only": True}).load_model()
    holder.cond_cache = ConditioningCache(64 << 20)
    before, resident = _own(holder), holder.pipeline.scheduler
    sample = {**ARCHS[arch].tiny.sample, "prompt": "a fox", "seed": 3, "sampler": "euler"}
    for _ in range(2):
        stages, steps, ran = [], [], []

        def on_step(i, n, t, latents, x0):
            steps.append((i, n))
            ran.append(holder.pipeline.scheduler)
        holder.generate_single(GenerateImageConfig.from_dict(sample, holder.model_config), on_step=on_step,
                               on_status=lambda message, stage: stages.append(stage))
        assert stages == ["encoding", "sampling", "decoding"]
        assert steps and ran[0] is not resident, "the call ran the sampler's scheduler"
        assert _own(holder) == before and holder.pipeline.scheduler is resident
    assert holder.cond_cache.stats()["hits"] >= 1, "the second call was answered from the cache"


def test_the_arch_patch_lands_on_the_call_scheduler(tiny):
    """krea2's mu (its call_patches) wraps the scheduler the call runs, a sampler's too, also when
    generate_single is called directly (the worker's batched path does)."""
    import torch

    from toolkit.models.archs.krea2 import shifted_timesteps

    holder = get_model_class("krea2")({"arch": "krea2", "name_or_path": tiny("krea2"),
                                       "local_only": True}).load_model()
    resident, ran = holder.pipeline.scheduler, []
    gen = GenerateImageConfig.from_dict({**ARCHS["krea2"].tiny.sample, "prompt": "a fox", "num_inference_steps": 4,
                                         "mu": 0.4, "sampler": "euler"}, holder.model_config)
    holder.generate_single(gen, on_step=lambda *a: ran.append(holder.pipeline.scheduler))
    call = ran[0]
    assert call is not resident and "set_timesteps" not in vars(call) and "set_timesteps" not in vars(resident)
    assert torch.allclose(call.sigmas.double(), torch.tensor(shifted_timesteps(4, 0.4), dtype=torch.float64),
                          atol=1e-6)

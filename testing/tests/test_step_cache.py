"""Step caching (`sample.cache`, toolkit/models/step_cache.py) on the resident tiny models.

  - validation: unknown type or parameter, a bad value, or a type the arch does not take is a ConfigError
    naming `sample.cache.<key>`; parameters come back filled, and the file records them;
  - every (arch, type) an arch's row declares skips denoiser work (fewer Linear calls than uncached);
  - afterwards the holder's hooks are what they were, and an uncached run is bit-for-bit the one before
    (also when the request fails mid-way);
  - the step hook still sees every step.
"""
import functools
import os
import tempfile

import numpy as np
import pytest
import torch

from toolkit.config_modules import GenerateImageConfig, ModelConfig
from toolkit.errors import ConfigError
from toolkit.file_settings import public_sample
from toolkit.models import step_cache
from toolkit.models.base_model import get_model_class
from toolkit.models.registry import ARCHS

DECLARED = [(arch, kind) for arch, spec in sorted(ARCHS.items()) for kind in spec.step_caches]
# parameters that make a 12-step tiny run skip for sure (the defaults are tuned for real models)
EAGER = {"first_block": {"threshold": 0.5}, "mag": {"threshold": 0.5}, "taylorseer": {}, "faster": {}}
STEPS = 12


def gen_for(arch, cache=None, **kw):
    sample = dict(ARCHS[arch].tiny.sample, num_inference_steps=STEPS, seed=3, **kw)
    sample.update({name: input_file() for name in ARCHS[arch].needed_inputs})   # an edit-only row's image
    return GenerateImageConfig.from_dict(dict(sample, cache=cache), arch)


@functools.cache
def input_file() -> str:
    from testing.fixtures import input_image
    return input_image(os.path.join(tempfile.mkdtemp(prefix="step-cache-"), "input.png"))


# -- validation ----------------------------------------------------------------------------------------

def test_every_row_names_known_types_and_rows_are_served():
    for spec in ARCHS.values():
        assert set(spec.step_caches) <= set(step_cache.TYPES), spec.name
        assert spec.public()["step_caches"] == list(spec.step_caches)
    assert ARCHS["zimage"].public()["step_caches"] == ["taylorseer"]


@pytest.mark.parametrize("cache, key", [
    ({"type": "tea"}, "sample.cache.type"),
    ({"type": "mag"}, "sample.cache.type"),                      # zimage takes no MagCache
    ({"threshold": 0.1}, "sample.cache.type"),                   # type is required
    ({"type": "taylorseer", "colour": 1}, "sample.cache.colour"),
    ({"type": "taylorseer", "threshold": 0.1}, "sample.cache.threshold"),   # another type's parameter
    ({"type": "taylorseer", "cache_interval": 0}, "sample.cache.cache_interval"),
    ({"type": "taylorseer", "cache_interval": "5"}, "sample.cache.cache_interval"),
    ({"type": "taylorseer", "max_order": 1.5}, "sample.cache.max_order"),
    ([1, 2], "sample.cache"),
])
def test_bad_caches_name_their_key(cache, key):
    with pytest.raises(ConfigError) as e:
        gen_for("zimage", cache)
    assert e.value.key == key


def test_flux_cache_params_are_validated_and_filled():
    with pytest.raises(ConfigError) as e:
        gen_for("flux", {"type": "faster", "spatial_attention_timestep_skip_range": [900, 100]})
    assert e.value.key == "sample.cache.spatial_attention_timestep_skip_range"
    with pytest.raises(ConfigError) as e:
        gen_for("flux", {"type": "first_block", "threshold": -1})
    assert e.value.key == "sample.cache.threshold"
    g = gen_for("flux", "mag")                                   # a bare type name is the shorthand
    assert g.cache == {"type": "mag", "threshold": 0.06, "max_skip_steps": 3, "retention_ratio": 0.2,
                       "mag_ratios": None}
    # round trip: the resolved dict is a valid request again, and the file records it
    again = GenerateImageConfig.from_dict(g.to_dict(), "flux")
    assert again.cache == g.cache
    assert public_sample(g, 1)["cache"] == g.cache
    assert gen_for("flux").cache is None and public_sample(gen_for("flux"), 1)["cache"] is None


def test_cache_is_not_model_identity():
    mc = ModelConfig.from_dict({"arch": "zimage", "name_or_path": "tiny:zimage"})
    assert "cache" not in mc.to_dict()


# -- on the tiny models --------------------------------------------------------------------------------

_HOLDERS = {}


@pytest.fixture
def holder(tiny):
    def get(arch):
        if arch not in _HOLDERS:
            _HOLDERS.clear()            # one resident model at a time keeps memory flat
            mc = ModelConfig.from_dict({"arch": arch, "name_or_path": tiny(arch)})
            _HOLDERS[arch] = get_model_class(arch)(mc).load_model()
        return _HOLDERS[arch]
    yield get


def linear_counter(module):
    """Counts every Linear call under `module` (what a skipped block or attention does not run)."""
    count = [0]
    handles = [m.register_forward_pre_hook(lambda *a: count.__setitem__(0, count[0] + 1))
               for m in module.modules() if isinstance(m, torch.nn.Linear)]
    return count, handles


def hooks_of(module):
    """The hooks on each submodule (an empty registry is the pipeline's own `cache_context` at work)."""
    return {name: list(m._diffusers_hook._hook_order) for name, m in module.named_modules()
            if getattr(m, "_diffusers_hook", None) is not None and m._diffusers_hook._hook_order}


def as_array(out):
    return np.asarray(out.float().numpy() if isinstance(out, torch.Tensor) else out, dtype=np.float64)


@pytest.mark.parametrize("arch, kind", DECLARED)
def test_a_declared_cache_skips_work_then_leaves_the_model_as_it_was(holder, arch, kind):
    h = holder(arch)
    denoiser = h.pipeline.components[h.spec.denoiser_roles[0]]
    before_hooks = hooks_of(denoiser)
    count, handles = linear_counter(denoiser)
    try:
        before = as_array(h.generate_single(gen_for(arch)))
        full = count[0]
        count[0] = 0
        steps = []
        cached = as_array(h.generate_single(gen_for(arch, {"type": kind, **EAGER[kind]}),
                                            on_step=lambda i, n, *_: steps.append((i, n))))
        work = count[0]
        count[0] = 0
        after = as_array(h.generate_single(gen_for(arch)))
        assert count[0] == full
    finally:
        for handle in handles:
            handle.remove()
    assert work < full, f"{arch}/{kind} skipped nothing ({work} of {full} Linear calls)"
    assert np.isfinite(cached).all()
    assert steps == [(i, STEPS) for i in range(STEPS)]          # the step hook sees every step
    assert hooks_of(denoiser) == before_hooks
    assert np.array_equal(after, before)                        # bit for bit the never-cached run


def test_hooks_are_removed_when_the_request_fails(holder):
    h = holder("zimage")
    denoiser = h.pipeline.transformer
    before_hooks = hooks_of(denoiser)
    before = as_array(h.generate_single(gen_for("zimage")))

    def stop(i, *_):
        if i == 5:
            raise KeyboardInterrupt("cancelled mid-way")           # what a cancel is to the holder
    with pytest.raises(KeyboardInterrupt):
        h.generate_single(gen_for("zimage", "taylorseer"), on_step=stop)
    assert hooks_of(denoiser) == before_hooks
    assert np.array_equal(as_array(h.generate_single(gen_for("zimage"))), before)

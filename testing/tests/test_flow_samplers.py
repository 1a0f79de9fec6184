"""The stochastic samplers of flow-matching models (toolkit/samplers.py: "Euler a", "DPM++ 2M SDE",
"DPM++ SDE", "LCM"): Euler ancestral keeps the flow's marginals and is neither plain Euler nor LCM;
each holder run equals the bare diffusers pipeline with that scheduler bit for bit, its step noise
drawn from the call's generator, as Stable Diffusion's pipelines pass theirs; a seed reproduces it."""
import functools

import numpy as np
import pytest
import torch
from diffusers import (DPMSolverMultistepScheduler, DPMSolverSinglestepScheduler, FlowMatchEulerDiscreteScheduler,
                       FlowMatchLCMScheduler)
from PIL import Image

from testing.tests.test_arch_contract import _arch_patches, _bare, _global_rng, _sample
from toolkit import samplers
from toolkit.config_modules import GenerateImageConfig
from toolkit.flow_euler_ancestral import FlowMatchEulerAncestralScheduler
from toolkit.media import save_media
from toolkit.models.base_model import get_model_class
from toolkit.models.registry import ARCHS

_FLOW = {"use_flow_sigmas": True, "prediction_type": "flow_prediction", "solver_order": 2,
         "use_karras_sigmas": False, "algorithm_type": "sde-dpmsolver++"}


def _reference(name: str, config):
    """The scheduler a diffusers user would build for A1111's name, written out here, not from the table."""
    shift = config.get("shift", 1.0)
    return {"euler_a": lambda: FlowMatchEulerAncestralScheduler.from_config(config),
            "lcm": lambda: FlowMatchLCMScheduler.from_config(config),
            "dpm++_2m_sde": lambda: DPMSolverMultistepScheduler.from_config(config, flow_shift=shift, **_FLOW),
            "dpm++_sde": lambda: DPMSolverSinglestepScheduler.from_config(config, flow_shift=shift, **_FLOW),
            # diffusers' own stochastic flow Euler: the same step as LCM's
            "stochastic_sampling": lambda: FlowMatchEulerDiscreteScheduler.from_config(
                config, stochastic_sampling=True)}[name]()


# -- the step --------------------------------------------------------------------------------------

def test_euler_ancestral_keeps_the_flow_marginals():
    """x = (1 - s) x0 + s e with the exact velocity e - x0: after a step, x is (1 - s') x0 + s' e' with e'
    unit noise; e' is part e (sigma_down's share) and part fresh: not Euler's (all e), not LCM's (none)."""
    x0, n = 0.5, 400_000
    e = torch.randn(n, generator=torch.Generator().manual_seed(0))
    corr = {}
    for name, sched in (("euler_a", FlowMatchEulerAncestralScheduler(shift=3.0)),
                        ("euler", FlowMatchEulerDiscreteScheduler(shift=3.0)),
                        ("lcm", FlowMatchLCMScheduler(shift=3.0))):
        sched.set_timesteps(4)
        s, s_next = float(sched.sigmas[1]), float(sched.sigmas[2])
        sched._step_index = 1
        x = (1 - s) * x0 + s * e
        out = sched.step(e - x0, sched.timesteps[1], x, generator=torch.Generator().manual_seed(1)).prev_sample
        noise = (out - (1 - s_next) * x0) / s_next
        assert abs(float(noise.mean())) < 0.01 and abs(float(noise.std()) - 1) < 0.01, name
        corr[name] = float(torch.corrcoef(torch.stack([noise, e]))[0, 1])
    sigma_down = s_next ** 2 / s
    want = sigma_down * (1 - s_next) / (1 - sigma_down) / s_next       # e's share of e'
    assert abs(corr["euler_a"] - want) < 0.01 and 0.1 < want < 0.9
    assert corr["euler"] > 0.999 and abs(corr["lcm"]) < 0.01
    last = FlowMatchEulerAncestralScheduler(shift=3.0)
    last.set_timesteps(2)
    last._step_index = 1                               # to sigma 0: the predicted clean sample, no noise
    x = torch.randn(8)
    v = torch.randn(8)
    assert torch.equal(last.step(v, last.timesteps[1], x).prev_sample, x - last.sigmas[1] * v)


def test_flow_models_offer_euler_a_and_a1111_maps_to_it():
    for arch in ("zimage", "flux", "sd3", "wan21"):
        names = [s.name for s in ARCHS[arch].samplers()]
        assert "euler_a" in names and "lcm" in names, arch
        assert samplers.from_a1111("Euler a", None, ARCHS[arch].samplers()) == "euler_a"
    assert samplers.find(ARCHS["mochi"].scheduler_config, "euler_a") is None     # inverted sigmas: Euler alone
    with pytest.raises(ValueError) as e:     # a name with no flow equivalent: the field, and what is offered
        samplers.from_a1111("DPM++ 2S a", None, ARCHS["zimage"].samplers())
    assert e.value.args[0] == "sampler_name" and "Euler, Euler a, LCM" in e.value.args[1]


# -- the holder against the bare pipeline ------------------------------------------------------------

@pytest.fixture(scope="module")
def holders(tiny):
    kept = {}

    def get(arch):
        if arch not in kept:
            h = get_model_class(arch)({"arch": arch, "name_or_path": tiny(arch), "local_only": True}, device="cpu")
            kept[arch] = (h.load_model(), _bare(tiny(arch)))
            kept[arch][1].set_progress_bar_config(disable=True)
        return kept[arch]
    return get


def _holder_png(holder, arch, tmp_path, name, seed=1234) -> tuple:
    gen = GenerateImageConfig.from_dict(_sample(arch, tmp_path, sampler=name, seed=seed), holder.model_config)
    rec, = holder.generate_images([gen], paths=[str(tmp_path / f"{name}-{seed}.png")])
    with open(rec["path"], "rb") as f:
        return gen, f.read()


def _bare_png(holder, bare, arch, gen, scheduler, tmp_path, tag) -> bytes:
    generator = torch.Generator("cpu").manual_seed(gen.seed)
    scheduler.step = functools.partial(scheduler.step, generator=generator)   # as StableDiffusionPipeline passes it
    resident, bare.scheduler = bare.scheduler, scheduler
    try:
        with _global_rng(ARCHS[arch]), _arch_patches(holder, gen, bare):
            out = bare(**holder.pipeline_kwargs(gen), generator=generator, output_type=ARCHS[arch].output_type)
    finally:
        bare.scheduler = resident
    ref = save_media("image", holder.extract_output(out), str(tmp_path / f"bare-{tag}.png"), ext="png",
                     metadata=holder.file_metadata(gen, gen.seed))
    with open(ref["path"], "rb") as f:
        return f.read()


@pytest.mark.parametrize("arch,name", [("zimage", "euler_a"), ("zimage", "lcm"), ("flux", "euler_a"),
                                       ("flux", "lcm"), ("flux", "dpm++_2m_sde"), ("flux", "dpm++_sde")])
def test_holder_equals_the_bare_pipeline_with_that_scheduler(arch, name, holders, tmp_path):
    holder, bare = holders(arch)
    assert name in [s.name for s in ARCHS[arch].samplers()]
    gen, got = _holder_png(holder, arch, tmp_path, name)
    want = _bare_png(holder, bare, arch, gen, _reference(name, bare.scheduler.config), tmp_path, name)
    assert got == want, f"{arch} {name}: the holder's file differs from the bare pipeline's"
    (tmp_path / "again").mkdir()
    assert _holder_png(holder, arch, tmp_path / "again", name)[1] == got, "the seed does not reproduce it"
    if name == "lcm":      # diffusers' FlowMatchEulerDiscreteScheduler(stochastic_sampling=True) is LCM's step
        assert _bare_png(holder, bare, arch, gen, _reference("stochastic_sampling", bare.scheduler.config),
                         tmp_path, "stochastic") == got


@pytest.mark.parametrize("arch", ["zimage", "flux"])
def test_euler_a_differs_from_euler_lcm_and_another_seed(arch, holders, tmp_path):
    holder, _bare_pipe = holders(arch)

    def pixels(name, seed=1234):
        gen = GenerateImageConfig.from_dict(_sample(arch, tmp_path, sampler=name, seed=seed), holder.model_config)
        rec, = holder.generate_images([gen], paths=[str(tmp_path / f"px-{name}-{seed}.png")])
        with Image.open(rec["path"]) as im:
            return np.asarray(im.convert("RGB"))
    ancestral = pixels("euler_a")
    for other in (pixels("euler"), pixels("lcm"), pixels("euler_a", seed=1235)):
        assert not np.array_equal(ancestral, other)

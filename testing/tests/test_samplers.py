"""Samplers (`sample.sampler`, toolkit/samplers.py): the per-family table, validation, the A1111 name
mapping, and, contract-style, every (arch, sampler) pair the registry offers run on the tiny models:
it runs, writes a file, and the step hook fires once per timestep of the scheduler that ran. The
pairs an arch excludes are run too, without the exclusion, and must fail: the table is restricted
by what works, no more. A row's schedule variants (euler_karras ...: the same class and step, other
sigmas) are checked in their row's run: the pipeline's own set_timesteps calls, replayed on each, give
as many finite sigmas, spaced otherwise (flow: over the row's range, with the times on them), and fail
for a schedule the arch excludes; they run end to end on SDXL and Z-Image below."""
import functools
import json
import os
import types
from dataclasses import replace

import pytest
import torch

from testing.fixtures import input_image
from toolkit import samplers
from toolkit.config_modules import GenerateImageConfig
from toolkit.errors import ConfigError
from toolkit.models.base_model import get_model_class, output_files
from toolkit.models.registry import ARCHS
from testing.tiny_runs import run_message

FILE_EXT = {"image": "png", "video": "mp4", "audio": "wav"}
OFFERED = [(a, s.name) for a in ARCHS for s in ARCHS[a].samplers() if s.schedule == "automatic"]
# every row of the arch's family it does not offer (named in its samplers_excluded, or running as one that is);
# a schedule variant it does not offer is checked in its row's run (below)
EXCLUDED = [(a, s.name) for a in ARCHS for s in samplers.samplers_for(ARCHS[a].scheduler_config)
            if s not in ARCHS[a].samplers() and s.schedule == "automatic"]


def _sample(arch, tmp_path, **over) -> dict:
    spec = ARCHS[arch]
    s = {**spec.tiny.sample, "prompt": "a small test prompt", "seed": 1234, "output_ext": FILE_EXT[spec.modality]}
    for name in spec.needed_inputs:
        s[name] = input_image(tmp_path / f"{name}.png", s.get("width") or 64, s.get("height") or 64)
    s.update(over)
    return s


@pytest.fixture(scope="module")
def holders(tiny):
    """holder(arch): a loaded tiny holder, the last one kept (the parameters come grouped by arch)."""
    kept = {}

    def get(arch):
        if arch not in kept:
            kept.clear()
            h = get_model_class(arch)({"arch": arch, "name_or_path": tiny(arch), "local_only": True}, device="cpu")
            kept[arch] = h.load_model()
        return kept[arch]
    return get


# -- the table -------------------------------------------------------------------------------------

def test_family_follows_from_the_scheduler_config():
    assert samplers.family_of({"_class_name": "FlowMatchEulerDiscreteScheduler"}) == samplers.FLOW
    assert samplers.family_of({"_class_name": "UniPCMultistepScheduler", "use_flow_sigmas": True,
                               "prediction_type": "flow_prediction"}) == samplers.FLOW
    assert samplers.family_of({"_class_name": "PNDMScheduler", "prediction_type": "epsilon"}) == samplers.DIFFUSION
    assert samplers.family_of({"_class_name": "EulerDiscreteScheduler", "prediction_type": "v_prediction"}) \
        == samplers.DIFFUSION
    assert samplers.family_of({"_class_name": "DDIMScheduler", "prediction_type": "sample"}) is None
    assert samplers.family_of({"_class_name": "CosineDPMSolverMultistepScheduler",
                               "prediction_type": "v_prediction"}) is None
    assert samplers.family_of({}) is None


def test_table_rows_are_real_diffusers_schedulers():
    import inspect

    import diffusers
    from diffusers.schedulers.scheduling_utils import KarrasDiffusionSchedulers

    assert samplers.DIFFUSION_CLASSES <= {e.name for e in KarrasDiffusionSchedulers}
    for family, rows in samplers.FAMILIES.items():
        names = [s.name for s in rows]
        assert len(names) == len(set(names)), family
        for s in rows:
            cls = samplers.scheduler_class(s)
            assert issubclass(cls, diffusers.SchedulerMixin), s.name
            params = inspect.signature(cls.__init__).parameters
            assert set(s.overrides) <= set(params), (s.name, set(s.overrides) - set(params))
            assert s.shift_key is None or s.shift_key in params, s.name
            assert s.schedule in samplers.A1111_SCHEDULES
    flow = {s.name for s in samplers.FLOW_SAMPLERS}
    assert {"euler", "euler_a", "heun", "dpm++_2m", "dpm++_2m_sde", "dpm++_sde", "unipc", "lcm"} <= flow
    assert all(s.runs_as is None or s.runs_as in flow for s in samplers.FLOW_SAMPLERS)
    assert {"euler", "euler_a", "ddim", "dpm++_2m", "dpm++_2m_karras", "dpm++_2m_sde", "dpm++_2m_sde_karras",
            "euler_karras", "euler_beta", "unipc", "lms"} <= {s.name for s in samplers.DIFFUSION_SAMPLERS}
    assert {"euler_karras", "euler_beta", "euler_exponential", "euler_a_beta", "lcm_karras"} <= flow
    assert not flow & {"dpm++_2m_karras", "unipc_beta", "heun_karras"}, "flow sigmas these classes would drop"


def test_schedule_variants_are_their_row_with_one_flag_on():
    for family, rows in samplers.FAMILIES.items():
        by = {s.name: s for s in rows}
        for s in rows:
            if s.schedule == "automatic":
                assert not any(s.overrides.get(f) for f in samplers.SCHEDULES.values()), s.name
                continue
            base = by[s.name[:-len(s.schedule) - 1]]
            assert base.schedule == "automatic" and s.schedule in samplers.SCHEDULED_CLASSES[family][base.cls]
            assert (s.cls, s.label, s.noise, s.shift_key, s.module) == \
                (base.cls, base.label, base.noise, base.shift_key, base.module)
            assert s.runs_as == (base.runs_as or base.name)
            assert s.overrides == {**base.overrides, **{f: k == s.schedule for k, f in samplers.SCHEDULES.items()}}


def test_flow_shift_carries_to_the_key_the_new_class_reads():
    euler = {"_class_name": "FlowMatchEulerDiscreteScheduler", "shift": 3.0, "use_dynamic_shifting": False}
    unipc = {"_class_name": "UniPCMultistepScheduler", "use_flow_sigmas": True, "flow_shift": 5.0,
             "prediction_type": "flow_prediction"}
    by = {s.name: s for s in samplers.FLOW_SAMPLERS}
    assert samplers.config_for(by["dpm++_2m"], euler)["flow_shift"] == 3.0
    assert samplers.config_for(by["euler"], unipc) == {"shift": 5.0}
    built = samplers.build(by["unipc"], euler)
    assert type(built).__name__ == "UniPCMultistepScheduler" and built.config.flow_shift == 3.0
    assert built.config.use_flow_sigmas and built.config.prediction_type == "flow_prediction"
    karras = samplers.build(next(s for s in samplers.DIFFUSION_SAMPLERS if s.name == "dpm++_2m_karras"),
                            {"_class_name": "PNDMScheduler", "prediction_type": "v_prediction",
                             "beta_schedule": "scaled_linear", "steps_offset": 1})
    assert karras.config.use_karras_sigmas and karras.config.prediction_type == "v_prediction"
    assert karras.config.beta_schedule == "scaled_linear" and karras.config.steps_offset == 1


def test_a_requests_shift_replaces_the_models_own_where_it_has_a_fixed_one():
    """sample.shift (ComfyUI's ModelSamplingSD3): in the key the class reads, the rest of the config kept;
    refused naming the field where the model has no fixed flow shift, and served by GET /models only there."""
    unipc = {"_class_name": "UniPCMultistepScheduler", "use_flow_sigmas": True, "flow_shift": 3.0,
             "prediction_type": "flow_prediction"}
    by = {s.name: s for s in samplers.FLOW_SAMPLERS}
    assert samplers.config_for(by["euler"], unipc, 8.0) == {"shift": 8.0}
    assert samplers.build(by["dpm++_2m"], unipc, shift=8.0).config.flow_shift == 8.0
    resident = samplers.scheduler_class(by["unipc"]).from_config(unipc)
    own = samplers.with_shift(resident, 8.0)
    assert type(own) is type(resident) and own.config.flow_shift == 8.0 and own.config.use_flow_sigmas
    assert resident.config.flow_shift == 3.0
    assert samplers.shift_refusal(unipc) is None
    assert "not flow matching" in samplers.shift_refusal(ARCHS["sdxl"].scheduler_config)
    dynamic = {**ARCHS["flux"].scheduler_config, "use_dynamic_shifting": True}
    assert "dynamic shifting" in samplers.shift_refusal(dynamic)
    assert GenerateImageConfig.from_dict({"prompt": "x", "shift": 8}, "wan21").shift == 8.0
    for arch in ("sdxl", "flux"):
        with pytest.raises(ConfigError) as e:
            GenerateImageConfig.from_dict({"prompt": "x", "shift": 8}, arch)
        assert e.value.key == "sample.shift"
        assert "shift" not in GenerateImageConfig.fields_for(ARCHS[arch])
    assert GenerateImageConfig.fields_for(ARCHS["wan21"])["shift"]["nullable"]


def test_a_schedule_on_inverted_sigmas_is_sampled_only_by_classes_that_invert_them():
    """Mochi's: the classes that ignore `invert_sigmas` run, but feed the model un-inverted times."""
    inverted = {"_class_name": "FlowMatchEulerDiscreteScheduler", "shift": 1.0, "invert_sigmas": True}
    names = [s.name for s in samplers.samplers_for(inverted)]
    assert names == ["euler", "euler_karras", "euler_exponential", "euler_beta"]
    assert samplers.find(inverted, "unipc") is None
    euler = samplers.build(samplers.find(inverted, "euler"), inverted)
    euler.set_timesteps(sigmas=[1.0, 0.5])
    assert euler.timesteps.tolist() == [0.0, 500.0], "the built class does not invert them"
    karras = samplers.build(samplers.find(inverted, "euler_karras"), inverted)   # respaced, then inverted
    karras.set_timesteps(sigmas=[1.0, 0.75, 0.5, 0.25])
    assert karras.timesteps[0] == 0.0 and karras.timesteps[-1] == 750.0 and karras.sigmas[-1] == 1.0
    assert torch.allclose(karras.timesteps, karras.sigmas[:-1] * 1000) 
    assert not torch.allclose(karras.sigmas[:-1], torch.tensor([0.0, 0.25, 0.5, 0.75]))
    assert len(samplers.samplers_for({**inverted, "invert_sigmas": False})) == len(samplers.FLOW_SAMPLERS)


def _tiny_scheduler_config(tiny, arch) -> dict:
    with open(os.path.join(tiny(arch), "scheduler", "scheduler_config.json")) as f:
        return json.load(f)


def _sigmas(sampler, config, steps=8, **kw):
    built = samplers.build(sampler, config)
    built.set_timesteps(steps, **kw)
    return built.sigmas[:-1].double()          # less the final 0


@pytest.mark.parametrize("arch", ["sdxl", "zimage", "flux"])
def test_each_schedule_respaces_the_sigmas_as_its_flag_says(arch, tiny):
    """Karras (rho 7), exponential (even in log sigma), beta (Beta(0.6, 0.6) quantiles over sigma) between
    the first and last sigma: on a flow model its row's own (the shift, fixed or by `mu`, applies first)."""
    import scipy.stats

    config = _tiny_scheduler_config(tiny, arch)
    kw = {"mu": 0.8} if config.get("use_dynamic_shifting") else {}
    rows = samplers.samplers_for(config)
    by = {s.name: s for s in rows}
    variants = [s for s in rows if s.schedule != "automatic"]
    assert {s.schedule for s in variants} == set(samplers.SCHEDULES)
    assert {"euler_karras", "euler_beta"} <= set(by) and ("dpm++_2m_sde_karras" in by) == (arch == "sdxl")
    for v in variants:
        base = by[v.name[:-len(v.schedule) - 1]]
        built = samplers.build(v, config)
        assert type(built).__name__ == base.cls and built.config[samplers.SCHEDULES[v.schedule]]
        assert sum(bool(built.config[f]) for f in samplers.SCHEDULES.values()) == 1
        own, got = _sigmas(base, config, **kw), _sigmas(v, config, **kw)
        hi, lo = got[0], got[-1]
        i = torch.linspace(0, 1, len(got), dtype=torch.float64)
        want = {"karras": (hi ** (1 / 7) + i * (lo ** (1 / 7) - hi ** (1 / 7))) ** 7,
                "exponential": torch.exp(torch.log(hi) + i * (torch.log(lo) - torch.log(hi))),
                "beta": lo + torch.from_numpy(scipy.stats.beta.ppf(1 - i.numpy(), 0.6, 0.6)) * (hi - lo)}
        assert len(got) == len(own) and torch.allclose(got, want[v.schedule], rtol=1e-3), (v.name, got)
        assert not torch.allclose(got, own, rtol=1e-2), v.name
        if samplers.family_of(config) == samplers.FLOW:
            assert torch.allclose(got[[0, -1]], own[[0, -1]]), (v.name, "not the row's (shifted) range")
            unshifted = {**config, "shift": 1.0, "use_dynamic_shifting": False}
            assert not torch.isclose(_sigmas(v, unshifted)[-1], lo), (v.name, "the shift was dropped")


def test_a_model_config_with_a_schedule_flag_of_its_own_meets_no_second_one():
    """A finetune's DPMSolverMultistep config may ship use_karras_sigmas: the beta row turns it off."""
    config = {"_class_name": "DPMSolverMultistepScheduler", "prediction_type": "epsilon", "use_karras_sigmas": True,
              "beta_schedule": "scaled_linear", "beta_start": 0.00085, "beta_end": 0.012}
    built = samplers.build(samplers.find(config, "dpm++_2m_beta"), config)
    assert built.config.use_beta_sigmas and not built.config.use_karras_sigmas
    built.set_timesteps(4)


@pytest.mark.parametrize("name,schedule,family,want", [
    ("Euler", "Automatic", samplers.DIFFUSION, "euler"), ("Euler a", None, samplers.DIFFUSION, "euler_a"),
    ("DPM++ 2M", "Karras", samplers.DIFFUSION, "dpm++_2m_karras"), ("DPM++ 2M", "automatic", samplers.DIFFUSION,
                                                                    "dpm++_2m"),
    ("DPM++ 2M Karras", None, samplers.DIFFUSION, "dpm++_2m_karras"), ("DDIM", "", samplers.DIFFUSION, "ddim"),
    ("UniPC", None, samplers.DIFFUSION, "unipc"), ("LMS", None, samplers.DIFFUSION, "lms"),
    ("Heun", None, samplers.FLOW, "heun"), ("Euler a", None, samplers.FLOW, "euler_a"),
    ("DPM++ 2M SDE", None, samplers.FLOW, "dpm++_2m_sde"), ("DPM++ SDE", "Automatic", samplers.FLOW, "dpm++_sde"),
    ("LCM", None, samplers.FLOW, "lcm"), ("Euler", None, samplers.FLOW, "euler"), ("unipc", None, samplers.FLOW,
                                                                                    "unipc"),
    ("Default", None, samplers.FLOW, None), ("", "Automatic", samplers.DIFFUSION, None), (None, None, samplers.FLOW,
                                                                                          None),
    ("Euler", "Beta", samplers.FLOW, "euler_beta"), ("Euler", "beta", samplers.DIFFUSION, "euler_beta"),
    ("Euler", "Karras", samplers.DIFFUSION, "euler_karras"), ("Euler a", "Exponential", samplers.FLOW,
                                                              "euler_a_exponential"),
    ("DPM++ 2M SDE", "Karras", samplers.DIFFUSION, "dpm++_2m_sde_karras"),
    ("DPM++ 2M SDE Karras", None, samplers.DIFFUSION, "dpm++_2m_sde_karras"),
    ("LMS", "Beta", samplers.DIFFUSION, "lms_beta"), ("euler_beta", None, samplers.FLOW, "euler_beta"),
])
def test_a1111_names_map_onto_the_table(name, schedule, family, want):
    assert samplers.from_a1111(name, schedule, samplers.FAMILIES[family]) == want


@pytest.mark.parametrize("name,schedule,family,field", [
    ("DPM++ 2S a", None, samplers.FLOW, "sampler_name"), ("DPM++ SDE", None, samplers.DIFFUSION, "sampler_name"),
    ("DDIM", None, samplers.FLOW, "sampler_name"),
    ("Euler a", "Karras", samplers.DIFFUSION, "scheduler"), ("DDIM", "Exponential", samplers.DIFFUSION, "scheduler"),
    ("DPM++ 2M", "Beta", samplers.FLOW, "scheduler"), ("Euler", "Polyexponential", samplers.DIFFUSION, "scheduler"),
    ("Default", "Karras", samplers.DIFFUSION, "scheduler"), ("Default", "Beta", samplers.FLOW, "scheduler"),
])
def test_a1111_names_it_lacks_name_the_field(name, schedule, family, field):
    with pytest.raises(ValueError) as e:
        samplers.from_a1111(name, schedule, samplers.FAMILIES[family])
    assert e.value.args[0] == field


# -- validation (engine process: the arch row, no torch) ------------------------------------------

def test_unknown_sampler_is_refused_naming_the_field_and_listing_the_valid_ones():
    with pytest.raises(ConfigError) as e:
        GenerateImageConfig.from_dict({"sampler": "ddim"}, "zimage")
    assert e.value.key == "sample.sampler" and "its samplers: euler" in e.value.message
    with pytest.raises(ConfigError) as e:
        GenerateImageConfig.from_dict({"sampler": "heun"}, "sd1")
    assert e.value.key == "sample.sampler"
    assert all(n in e.value.message for n in ("euler, euler_karras", "euler_a, ddim", "dpm++_2m_karras", "lms_beta"))
    with pytest.raises(ConfigError) as e:
        GenerateImageConfig.from_dict({"sampler": "euler", "duration": 1.0}, "stable_audio")
    assert e.value.key == "sample.sampler" and "CosineDPMSolverMultistepScheduler" in e.value.message
    with pytest.raises(ConfigError) as e:
        GenerateImageConfig.from_dict({"sampler": 3}, "sd1")
    assert e.value.key == "sample.sampler"
    gen = GenerateImageConfig.from_dict({"sampler": "dpm++_2m_karras"}, "sdxl")
    assert gen.sampler == "dpm++_2m_karras" and gen.to_dict()["sampler"] == "dpm++_2m_karras"
    assert GenerateImageConfig.from_dict({}, "sdxl").sampler is None


@pytest.mark.parametrize("arch", list(ARCHS))
def test_models_row_lists_the_arch_samplers(arch):
    spec = ARCHS[arch]
    row = json.loads(json.dumps(spec.public()))
    assert [s["name"] for s in row["samplers"]] == [s.name for s in spec.samplers()]
    assert set(spec.samplers_excluded) <= {s.name for s in samplers.FAMILIES.get(
        samplers.family_of(spec.scheduler_config), ())} | set(samplers.SCHEDULES), "an exclusion the family lacks"
    for s in row["samplers"]:
        GenerateImageConfig.from_dict({**{name: "x.png" for name in spec.needed_inputs}, **spec.tiny.sample,
                                       "sampler": s["name"]}, arch)


@pytest.mark.parametrize("arch", list(ARCHS))
def test_the_row_family_is_the_loaded_schedulers(arch, tiny):
    """The row declares its repos' scheduler config; the tiny model (the real format) agrees."""
    with open(os.path.join(tiny(arch), "scheduler", "scheduler_config.json")) as f:
        loaded = json.load(f)
    spec = ARCHS[arch]
    assert samplers.family_of(loaded) == samplers.family_of(spec.scheduler_config)
    assert loaded["_class_name"] == spec.scheduler_config["_class_name"]
    assert bool(loaded.get("invert_sigmas")) == bool(spec.scheduler_config.get("invert_sigmas"))


# -- every (arch, sampler) pair, on the tiny models -------------------------------------------------

@pytest.mark.parametrize("arch,name", sorted(OFFERED + [(a, n) for a, n in EXCLUDED]))
def test_every_offered_sampler_runs_and_every_excluded_one_fails(arch, name, holders, tmp_path, monkeypatch):
    spec = ARCHS[arch]
    holder = holders(arch)
    resident = holder.pipeline.scheduler
    timesteps_calls = _spy_set_timesteps(monkeypatch)
    gen = GenerateImageConfig.from_dict(_sample(arch, tmp_path), holder.model_config)
    gen = replace(gen, sampler=name)    # set after validation: excluded names run too, below
    out_path = str(tmp_path / f"out.{gen.output_ext}")
    calls, used = [], []

    def on_step(i, n, t, latents, x0):
        calls.append((i, n))
        used.append(holder.pipeline.scheduler)

    if (arch, name) in EXCLUDED:
        holder.spec = replace(spec, samplers_excluded=())
        try:
            with pytest.raises(Exception) as e:
                holder.generate_images([gen], paths=[out_path], on_step=on_step)
            assert not isinstance(e.value, ConfigError), "excluded for a reason the pipeline never met"
        finally:
            holder.spec = spec
        assert holder.pipeline.scheduler is resident and not os.path.exists(out_path)
        return
    recs = holder.generate_images([gen], paths=[out_path], on_step=on_step)    # a file per image of the output
    assert len(recs) == output_files(spec, gen)
    assert all(os.path.getsize(rec["path"]) == rec["bytes"] > 0 and rec["seed"] == 1234 for rec in recs)
    sampler = samplers.find(spec.scheduler_config, name, spec.samplers_excluded)
    ran = used[0]
    assert type(ran).__name__ == sampler.cls and ran is not resident and all(u is ran for u in used)
    n = len(ran.timesteps)                # the real timesteps of the scheduler used (Heun: 2 per step but one)
    assert calls == [(i, n) for i in range(n)], "the hook fires once per timestep"
    assert holder.pipeline.scheduler is resident
    variants = [v for v in samplers.samplers_for(spec.scheduler_config)
                if v.schedule != "automatic" and v.name == f"{name}_{v.schedule}"]
    assert timesteps_calls or not variants, "the pipeline set no timesteps on the scheduler it was given"
    monkeypatch.undo()                  # the replays' builds are not the pipeline's
    for v in variants:
        if v in spec.samplers():
            _replay_on(v, resident.config, timesteps_calls)
        else:                           # a schedule the arch excludes: the replay meets why
            with pytest.raises(Exception):
                _replay_on(v, resident.config, timesteps_calls)


def _spy_set_timesteps(monkeypatch) -> list:
    """[(args, kwargs, sigmas, timesteps)] of each set_timesteps call the pipeline makes on a built scheduler."""
    seen, build = [], samplers.build

    def spying(sampler, base_config, *rest, **kw):      # build's generator and shift, as given
        scheduler = build(sampler, base_config, *rest, **kw)
        own = type(scheduler).set_timesteps

        @functools.wraps(own)           # the pipelines read its signature (sigmas, timesteps, mu)
        def set_timesteps(self, *args, **kwargs):
            out = own(self, *args, **kwargs)
            seen.append((args, kwargs, getattr(self, "sigmas", None), self.timesteps.clone()))   # DDIM: no sigmas
            return out
        # bound: a pipeline's deepcopy of the scheduler (LTX-2's audio one) sets its own timesteps
        scheduler.set_timesteps = types.MethodType(set_timesteps, scheduler)
        return scheduler
    monkeypatch.setattr(samplers, "build", spying)
    return seen


def _replay_on(variant, config, calls):
    """The row's set_timesteps calls on its schedule variant: as many finite, non-increasing sigmas, spaced
    otherwise; on a flow model over the row's range (the shift kept) with the timesteps on those sigmas."""
    for args, kwargs, sigmas, timesteps in calls:
        built = samplers.build(variant, config)
        built.set_timesteps(*args, **kwargs)
        got = built.sigmas.float()
        assert got.shape == sigmas.shape and torch.isfinite(got).all(), (variant.name, got)
        if len(got) > 3:                # two steps have nothing between the ends to respace
            assert not torch.allclose(got, sigmas.float()), (variant.name, "the flag changed nothing")
        inverted = bool(built.config.get("invert_sigmas"))
        order = got[:-1] if not inverted else -got[:-1]            # the sigmas, then a final 0 (inverted: 1)
        assert (order[1:] <= order[:-1] + 1e-6).all(), (variant.name, got)
        assert built.timesteps.shape == timesteps.shape, variant.name
        if samplers.family_of(config) == samplers.FLOW:
            # the row's range (its shift kept), and the times the model is fed on the respaced sigmas
            assert torch.allclose(got[[0, -2]], sigmas.float()[[0, -2]], rtol=1e-3), variant.name
            train = built.config.num_train_timesteps
            assert torch.allclose(built.timesteps.float(), got[:-1] * train, rtol=1e-3, atol=1e-2), variant.name


def test_a_loaded_scheduler_of_another_family_refuses_the_sampler(holders, tmp_path):
    holder = holders("sd1")
    gen = GenerateImageConfig.from_dict(_sample("sd1", tmp_path), holder.model_config)
    gen = replace(gen, sampler="heun")  # a flow sampler: the row would refuse it; the loaded config does too
    with pytest.raises(ConfigError) as e:
        holder.generate_single(gen)
    assert e.value.key == "sample.sampler" and "PNDMScheduler" in e.value.message


def test_the_models_own_class_reproduces_the_default(holders, tmp_path):
    """`euler` on SDXL (whose scheduler is Euler) is built from the resident config: the same pixels
    (the files differ only in the settings they record: `sampler` is named in one)."""
    import numpy as np
    from PIL import Image

    holder = holders("sdxl")
    out = {}
    for name in (None, "euler", "euler_a"):
        gen = GenerateImageConfig.from_dict(_sample("sdxl", tmp_path, sampler=name), holder.model_config)
        out_path = str(tmp_path / f"{name}.png")
        rec, = holder.generate_images([gen], paths=[out_path])
        with Image.open(rec["path"]) as im:
            out[name] = np.asarray(im.convert("RGB"))
    assert np.array_equal(out["euler"], out[None]) and not np.array_equal(out["euler_a"], out[None])


def test_a_shift_runs_the_models_own_scheduler_or_the_sampler_with_it(holders, tmp_path):
    holder = holders("wan21")
    resident = holder.pipeline.scheduler
    for sampler, cls, key in ((None, type(resident).__name__, "flow_shift"),
                              ("euler", "FlowMatchEulerDiscreteScheduler", "shift")):     # the key each class reads
        gen = GenerateImageConfig.from_dict(_sample("wan21", tmp_path, shift=8.0, sampler=sampler), holder.model_config)
        used = []
        holder.generate_images([gen], paths=[str(tmp_path / "out.mp4")],
                               on_step=lambda *_a: used.append(holder.pipeline.scheduler))
        ran = used[0]
        assert type(ran).__name__ == cls and ran is not resident
        assert ran.config[key] == 8.0
    assert holder.pipeline.scheduler is resident and samplers.flow_shift(resident.config) == 3.0


# -- the schedule variants end to end: SDXL (diffusion) and Z-Image (flow) ---------------------------

SCHEDULED = [(a, s.name) for a in ("sdxl", "zimage") for s in ARCHS[a].samplers() if s.schedule != "automatic"]


@pytest.fixture(scope="module")
def worker_pixels(tiny, tmp_path_factory):
    """pixels(arch, sampler) -> (the image's pixels, its progress steps): a 3-step request through the
    worker's request path (resolve_request, WorkerCore.run), one core for the module."""
    import numpy as np
    from PIL import Image

    from extensions_built_in.inference_engine import messages as m
    from extensions_built_in.inference_engine.worker import WorkerCore

    out, made, folder = [], {}, tmp_path_factory.mktemp("scheduled")
    core = WorkerCore(out.append)

    def pixels(arch, sampler):
        if (arch, sampler) not in made:
            rid = f"{arch}-{sampler}".replace("+", "p")     # a request id takes no "+"
            sample = {**ARCHS[arch].tiny.sample, "prompt": "a small test prompt", "seed": 1234,
                      "num_inference_steps": 3, "sampler": sampler}
            core.run(run_message(rid, {"arch": arch, "name_or_path": tiny(arch)}, sample, folder / f"{rid}.png"))
            done = next(x for x in reversed(out) if isinstance(x, m.Done) and x.request_id == rid)
            assert done.status == "ok", done.error
            steps = [x.header["step"] for x in out if isinstance(x, m.Frame) and x.request_id == rid
                     and x.header["type"] == "progress"]
            with Image.open(done.results[0]["path"]) as im:
                made[arch, sampler] = np.asarray(im.convert("RGB")), steps
        return made[arch, sampler]
    yield pixels
    core.unload_all()


@pytest.mark.parametrize("arch,name", SCHEDULED)
def test_a_schedule_variant_generates_through_the_request_path(arch, name, worker_pixels):
    """It runs its 3 steps, and its middle sigma (the only one between the ends) makes other pixels."""
    import numpy as np

    v = samplers.find(ARCHS[arch].scheduler_config, name)
    image, steps = worker_pixels(arch, name)
    base, _ = worker_pixels(arch, name[:-len(v.schedule) - 1])
    assert steps == [1, 2, 3] and image.shape == base.shape
    assert not np.array_equal(image, base), "the schedule did not reach the scheduler that ran"


# -- the resident scheduler is never changed -------------------------------------------------------

def test_a_sampler_request_leaves_the_pooled_scheduler_as_it_was(tiny, tmp_path):
    from extensions_built_in.inference_engine import messages as m
    from extensions_built_in.inference_engine.worker import WorkerCore
    from toolkit.request import resolve_request

    out = []
    core = WorkerCore(out.append)

    def run(rid, **over) -> m.Done:
        _work = resolve_request({"arch": "sd1", "name_or_path": tiny("sd1")}, _sample("sd1", tmp_path, **over))
        mc, gen = _work.model, _work.sample
        core.run(run_message(rid, mc.to_dict(), gen.to_dict(), str(tmp_path / f"{rid}.png"), None))
        done = next(x for x in reversed(out) if isinstance(x, m.Done) and x.request_id == rid)
        assert done.status == "ok", done.error
        return done

    def read(done):
        with open(done.results[0]["path"], "rb") as f:
            return f.read()

    before = read(run("before"))
    pipe = core.holder.pipeline
    resident, config = pipe.scheduler, dict(pipe.scheduler.config)
    registered, timesteps = pipe.config["scheduler"], resident.timesteps.clone()
    total = [x.header["total"] for x in out if isinstance(x, m.Frame) and x.header["type"] == "progress"]
    other = run("other", sampler="dpm++_2m_karras", num_inference_steps=3)
    steps = [x.header for x in out if isinstance(x, m.Frame) and x.request_id == "other"
             and x.header["type"] == "progress"]
    assert [h["step"] for h in steps] == [1, 2, 3] and {h["total"] for h in steps} == {3}
    assert total and core.holder is not None and core.holder.pipeline is pipe
    assert pipe.scheduler is resident and type(resident).__name__ == "PNDMScheduler"
    assert dict(resident.config) == config and pipe.config["scheduler"] == registered
    assert torch.equal(resident.timesteps, timesteps), "the other sampler's run set the resident's timesteps"
    assert read(other) != before
    assert read(run("after")) == before, "the next request without a sampler differs from the one before"
    assert core.builds == 1
    core.unload_all()


def test_engine_refuses_an_unknown_sampler_with_422_and_models_lists_them(tiny, tmp_path):
    from testing.engine_client import InProcessEngine

    eng = InProcessEngine(str(tmp_path / "engine"), token="t")
    try:
        r = eng.client.post("/generate", json={"model": {"arch": "zimage", "name_or_path": "tiny:zimage"},
                                               "sample": {"prompt": "x", "sampler": "ddim"}})
        assert r.status_code == 422 and r.json()["field"] == "sample.sampler", r.text
        assert "its samplers: euler" in r.json()["detail"]
        rows = {a["name"]: a for a in eng.client.get("/models").json()["archs"]}
        assert [s["name"] for s in rows["sd1"]["samplers"]] == [
            "euler", "euler_karras", "euler_exponential", "euler_beta", "euler_a", "ddim",
            "dpm++_2m", "dpm++_2m_karras", "dpm++_2m_exponential", "dpm++_2m_beta",
            "dpm++_2m_sde", "dpm++_2m_sde_karras", "dpm++_2m_sde_exponential", "dpm++_2m_sde_beta",
            "unipc", "unipc_karras", "unipc_exponential", "unipc_beta", "lms", "lms_karras", "lms_exponential", "lms_beta"]
        assert rows["sd1"]["samplers"][7] == {"name": "dpm++_2m_karras", "label": "DPM++ 2M", "schedule": "karras",
                                              "scheduler": "DPMSolverMultistepScheduler"}
        assert [s["name"] for s in rows["wan21"]["samplers"] if s["schedule"] == "automatic"] == [
            "euler", "euler_a", "heun", "dpm++_2m", "dpm++_2m_sde", "dpm++_sde", "unipc", "lcm"]
        assert [s["name"] for s in rows["zimage"]["samplers"]] == [
            "euler", "euler_karras", "euler_exponential", "euler_beta", "euler_a", "euler_a_karras",
            "euler_a_exponential", "euler_a_beta", "lcm", "lcm_karras", "lcm_exponential", "lcm_beta"]
        assert rows["stable_audio"]["samplers"] == [] and rows["zimage"]["batch"] is True
        assert rows["ace_step"]["batch"] is False
    finally:
        eng.close()

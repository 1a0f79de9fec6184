"""Samplers: the schedulers a request may pick with `sample.sampler`, per family (data).

A model's family follows from its scheduler's config, never from an arch name: flow matching
(a FlowMatch* class, or `use_flow_sigmas` / `prediction_type: flow_prediction`) or discrete-time
diffusion (a DDPM-style scheduler predicting `epsilon` or `v_prediction`). A scheduler of neither
kind (Stable Audio's cosine EDM solver) has no alternatives here: its arch takes no sampler.

The chosen scheduler is built for one call from the resident (pooled) scheduler's config,
`SchedulerClass.from_config(config, **overrides)`, so its training schedule (betas, shift,
dynamic shifting, prediction type) carries over and the pooled scheduler is never changed.

No torch at import: the engine process validates requests and serves `/models` from this table;
`build` imports diffusers when the worker asks for a scheduler.
"""
from dataclasses import dataclass, field, replace

FLOW, DIFFUSION = "flow", "diffusion"


@dataclass(frozen=True)
class Sampler:
    name: str                      # what `sample.sampler` says
    cls: str                       # the diffusers scheduler class
    label: str                     # A1111's sampler_name
    schedule: str = "automatic"    # the spacing of its steps (SCHEDULES; "automatic": the model's own)
    overrides: dict = field(default_factory=dict)   # config keys set on top of the model's scheduler config
    shift_key: str | None = None   # flow: the key this class reads the flow shift from
    inverts: bool = False          # flow: the class honours `invert_sigmas` (see samplers_for)
    noise: bool = False            # its step draws fresh noise: from the call's generator (see build)
    runs_as: str | None = None     # the row whose set_timesteps/step calls it shares: an arch excluding that one
                                   # excludes this one too (the same pipeline call fails both)
    module: str = "diffusers"      # where `cls` lives (diffusers has no flow Euler ancestral)

    def public(self) -> dict:
        return {"name": self.name, "label": self.label, "schedule": self.schedule, "scheduler": self.cls}


# Flow matching. DPM-Solver++ and UniPC run on flow sigmas the way diffusers configures them for
# Sana and Wan (use_flow_sigmas, prediction_type flow_prediction, flow_shift); the model's shift
# (FlowMatch* `shift`, or `flow_shift`) is carried to whichever key the new class reads.
# The stochastic ones are those Forge and ComfyUI offer on flow models under A1111's names: "Euler a" is
# k-diffusion's Euler ancestral for rectified flow (toolkit/flow_euler_ancestral.py), "DPM++ 2M SDE" and
# "DPM++ SDE" are DPM-Solver++'s SDE variants (multistep, and singlestep order 2: diffusers' Brownian-tree
# DPMSolverSDEScheduler has no flow sigmas), "LCM" is diffusers' FlowMatchLCMScheduler (x0, then re-noised
# to the next sigma: what FlowMatchEulerDiscreteScheduler(stochastic_sampling=True) does too).
_FLOW_SIGMAS = {"use_flow_sigmas": True, "prediction_type": "flow_prediction"}
_DPMPP_2 = {"solver_order": 2, "use_karras_sigmas": False}
_FLOW_ROWS = (
    Sampler("euler", "FlowMatchEulerDiscreteScheduler", "Euler", shift_key="shift", inverts=True),
    Sampler("euler_a", "FlowMatchEulerAncestralScheduler", "Euler a", shift_key="shift", noise=True,
            runs_as="euler", module="toolkit.flow_euler_ancestral"),
    Sampler("heun", "FlowMatchHeunDiscreteScheduler", "Heun", shift_key="shift"),
    Sampler("dpm++_2m", "DPMSolverMultistepScheduler", "DPM++ 2M", shift_key="flow_shift",
            overrides={**_FLOW_SIGMAS, "algorithm_type": "dpmsolver++", **_DPMPP_2}),
    Sampler("dpm++_2m_sde", "DPMSolverMultistepScheduler", "DPM++ 2M SDE", shift_key="flow_shift", noise=True,
            runs_as="dpm++_2m", overrides={**_FLOW_SIGMAS, "algorithm_type": "sde-dpmsolver++", **_DPMPP_2}),
    Sampler("dpm++_sde", "DPMSolverSinglestepScheduler", "DPM++ SDE", shift_key="flow_shift", noise=True,
            runs_as="dpm++_2m", overrides={**_FLOW_SIGMAS, "algorithm_type": "sde-dpmsolver++", **_DPMPP_2}),
    Sampler("unipc", "UniPCMultistepScheduler", "UniPC", shift_key="flow_shift", overrides=dict(_FLOW_SIGMAS)),
    Sampler("lcm", "FlowMatchLCMScheduler", "LCM", shift_key="shift", noise=True, runs_as="euler"),
)

# epsilon / v-prediction: the betas, timestep spacing, steps offset and prediction type come from
# the model's config (from_config); A1111's names, as diffusers' docs map them.
_DIFFUSION_ROWS = (
    Sampler("euler", "EulerDiscreteScheduler", "Euler"),
    Sampler("euler_a", "EulerAncestralDiscreteScheduler", "Euler a", noise=True),
    Sampler("ddim", "DDIMScheduler", "DDIM"),
    Sampler("dpm++_2m", "DPMSolverMultistepScheduler", "DPM++ 2M",
            overrides={"algorithm_type": "dpmsolver++", **_DPMPP_2}),
    Sampler("dpm++_2m_sde", "DPMSolverMultistepScheduler", "DPM++ 2M SDE", noise=True, runs_as="dpm++_2m",
            overrides={"algorithm_type": "sde-dpmsolver++", **_DPMPP_2}),
    Sampler("unipc", "UniPCMultistepScheduler", "UniPC"),
    Sampler("lms", "LMSDiscreteScheduler", "LMS"),
)

# The schedule axis: besides the model's own spacing ("automatic"), a class may respace its sigmas
# between the same ends by diffusers' `use_<schedule>_sigmas`, A1111's schedule types of those names:
# Karras (rho 7), Exponential (even in log sigma), Beta (Beta(0.6, 0.6) quantiles over sigma; scipy).
# The ends are the class's: on flow, the first and last sigma after the model's shift (fixed or `mu`);
# on a discrete-time model, Euler and LMS those of the model's timestep spacing, DPM-Solver++ and UniPC
# the whole trained range. Each row of a class listed here gets one row per schedule, named
# `<row>_<schedule>` (dpm++_2m_karras ...), right after it, running as it (an arch excluding the row
# excludes them). Not listed: DPM-Solver++ and UniPC on flow sigmas take the flags but then drop the flow
# sigmas for a discrete-time model's (sigma up to ~157), and Euler ancestral (diffusion), DDIM and flow
# Heun have no such flags.
SCHEDULES = {"karras": "use_karras_sigmas", "exponential": "use_exponential_sigmas", "beta": "use_beta_sigmas"}
_ALL = tuple(SCHEDULES)
SCHEDULED_CLASSES = {
    FLOW: {"FlowMatchEulerDiscreteScheduler": _ALL, "FlowMatchEulerAncestralScheduler": _ALL,
           "FlowMatchLCMScheduler": _ALL},
    DIFFUSION: {"EulerDiscreteScheduler": _ALL, "DPMSolverMultistepScheduler": _ALL,
                "UniPCMultistepScheduler": _ALL, "LMSDiscreteScheduler": _ALL},
}


def _with_schedules(rows, family) -> tuple:
    """`rows`, each followed by its variants of SCHEDULED_CLASSES: one flag on, the others off (a model
    config that turns one on must not meet a second: diffusers refuses two)."""
    out = []
    for s in rows:
        out.append(s)
        for schedule in SCHEDULED_CLASSES[family].get(s.cls, ()):
            flags = {flag: key == schedule for key, flag in SCHEDULES.items()}
            out.append(replace(s, name=f"{s.name}_{schedule}", schedule=schedule,
                               overrides={**s.overrides, **flags}, runs_as=s.runs_as or s.name))
    return tuple(out)


FLOW_SAMPLERS = _with_schedules(_FLOW_ROWS, FLOW)
DIFFUSION_SAMPLERS = _with_schedules(_DIFFUSION_ROWS, DIFFUSION)

FAMILIES = {FLOW: FLOW_SAMPLERS, DIFFUSION: DIFFUSION_SAMPLERS}

# a model's own scheduler class -> the A1111-style name clients see for it (the compat API's "Default"
# sampler, and `Sampler:` in a file made without `sample.sampler`)
SCHEDULER_LABELS = {
    "FlowMatchEulerDiscreteScheduler": "Euler (flow matching)", "FlowMatchHeunDiscreteScheduler": "Heun (flow matching)",
    "FlowMatchLCMScheduler": "LCM (flow matching)", "EulerDiscreteScheduler": "Euler",
    "EulerAncestralDiscreteScheduler": "Euler a", "DDIMScheduler": "DDIM",
    "PNDMScheduler": "PLMS (PNDM)", "UniPCMultistepScheduler": "UniPC", "DPMSolverMultistepScheduler": "DPM++ 2M",
    "DPMSolverSinglestepScheduler": "DPM++ SDE", "LMSDiscreteScheduler": "LMS", "HeunDiscreteScheduler": "Heun",
    "DDPMScheduler": "DDPM", "KDPM2DiscreteScheduler": "DPM2", "KDPM2AncestralDiscreteScheduler": "DPM2 a",
}


# DDPM-style discrete-time schedulers (diffusers' KarrasDiffusionSchedulers but EDM's): their configs
# describe a beta schedule that every entry of DIFFUSION_SAMPLERS reads.
DIFFUSION_CLASSES = frozenset((
    "DDIMScheduler", "DDPMScheduler", "PNDMScheduler", "LMSDiscreteScheduler", "EulerDiscreteScheduler",
    "HeunDiscreteScheduler", "EulerAncestralDiscreteScheduler", "DPMSolverMultistepScheduler",
    "DPMSolverSinglestepScheduler", "KDPM2DiscreteScheduler", "KDPM2AncestralDiscreteScheduler",
    "DEISMultistepScheduler", "UniPCMultistepScheduler", "DPMSolverSDEScheduler"))
PREDICTION_TYPES = ("epsilon", "v_prediction")


def family_of(config) -> str | None:
    """FLOW, DIFFUSION or None, from a scheduler config (`_class_name` and the keys that decide it)."""
    config = config or {}
    cls = config.get("_class_name") or ""
    if (cls.startswith("FlowMatch") or config.get("use_flow_sigmas")
            or config.get("prediction_type") == "flow_prediction"):
        return FLOW
    if cls in DIFFUSION_CLASSES and config.get("prediction_type", "epsilon") in PREDICTION_TYPES:
        return DIFFUSION
    return None


def samplers_for(config, exclude=()) -> tuple:
    """The Sampler rows a model with this scheduler config may use (its family's, minus `exclude`: sampler
    names, and schedules, which exclude every row of that schedule). A flow schedule on inverted sigmas
    (`invert_sigmas`: Mochi's time runs from noise at 0 to data at 1000) is sampled only by a class that
    inverts them too: another would run, feeding the model the wrong times."""
    config = config or {}
    return tuple(s for s in FAMILIES.get(family_of(config), ()) if s.name not in exclude
                 and s.runs_as not in exclude and s.schedule not in exclude
                 and (s.inverts or not config.get("invert_sigmas")))


def find(config, name: str, exclude=()) -> Sampler | None:
    return next((s for s in samplers_for(config, exclude) if s.name == name), None)


def shift_key(config) -> str:
    """The key of a flow-matching config that holds its shift."""
    return "flow_shift" if config.get("use_flow_sigmas") else "shift"


def flow_shift(config) -> float | None:
    """The shift a flow-matching config applies to its sigmas (None when it names none)."""
    value = config.get(shift_key(config))
    return None if value is None else float(value)


def shift_refusal(config) -> str | None:
    """Why a request's own shift (sample.shift) does not apply to a model with this scheduler config; None
    where it does: a flow-matching schedule with a fixed shift."""
    if family_of(config) != FLOW:
        return f"the model's scheduler ({config.get('_class_name', 'unknown')}) is not flow matching: it has no shift"
    if config.get("use_dynamic_shifting"):
        return "the model shifts by the image size (dynamic shifting), not by a fixed shift"
    return None


def config_for(sampler: Sampler, base, shift: float | None = None) -> dict:
    """The overrides that turn the model's scheduler config `base` into `sampler`'s (with `shift`, the
    request's, in place of the model's own)."""
    over = dict(sampler.overrides)
    if sampler.shift_key is not None:
        shift = flow_shift(base) if shift is None else shift
        if shift is not None:
            over[sampler.shift_key] = shift
    return over


def with_shift(scheduler, shift: float):
    """A fresh copy of the model's own scheduler with `shift` in place of its own (the resident one is
    never changed)."""
    return type(scheduler).from_config(scheduler.config, **{shift_key(scheduler.config): shift})


def scheduler_class(sampler: Sampler):
    import importlib

    return getattr(importlib.import_module(sampler.module), sampler.cls)


def build(sampler: Sampler, base_config, generator=None, shift: float | None = None):
    """A fresh scheduler for one call, from the model's scheduler config (never changes that one). A
    stochastic one draws its step noise from the call's `generator`: the flow pipelines call `step`
    without one (the noise would come from torch's global RNG, another image per run and per device);
    Stable Diffusion's pass theirs, the same object, which overrides this binding with itself."""
    import functools

    scheduler = scheduler_class(sampler).from_config(base_config, **config_for(sampler, base_config, shift))
    if sampler.noise and generator is not None:
        scheduler.step = functools.partial(scheduler.step, generator=generator)   # this call's instance only
    return scheduler


# -- A1111 names ----------------------------------------------------------------------------------
A1111_SCHEDULES = {"automatic": "Automatic", "karras": "Karras", "exponential": "Exponential", "beta": "Beta"}
DEFAULT_NAMES = ("", "default", "automatic")     # the model's own scheduler


def from_a1111(sampler_name, scheduler, available) -> str | None:
    """Our sampler name for A1111's (sampler_name, scheduler) among `available` Sampler rows;
    None for the model's own scheduler. Raises ValueError(field, message) for names it lacks.
    Legacy combined names ("DPM++ 2M Karras") split into the two."""
    name = (sampler_name or "").strip()
    schedule = (scheduler or "").strip().lower() or "automatic"
    if name.lower().endswith(" karras"):
        name, schedule = name[:-len(" karras")].strip(), "karras"
    if schedule not in A1111_SCHEDULES:
        raise ValueError("scheduler", f"unknown scheduler {scheduler!r} (this model: "
                         f"{', '.join(a1111_schedules(available))})")
    if name.lower() in DEFAULT_NAMES:
        if schedule != "automatic":
            raise ValueError("scheduler", f"{scheduler!r} needs a sampler_name")
        return None
    labels = [s for s in available if s.label.lower() == name.lower() or s.name == name]
    if not labels:
        raise ValueError("sampler_name", f"unknown sampler {sampler_name!r} for this model (its samplers: "
                         f"{', '.join(a1111_labels(available)) or 'only its own'})")
    hit = next((s for s in labels if s.schedule == schedule), None)
    if hit is None:
        if schedule == "automatic":
            hit = labels[0]
        else:
            raise ValueError("scheduler", f"{sampler_name!r} has no {A1111_SCHEDULES[schedule]} schedule here "
                             f"(with it: {', '.join(s.label for s in available if s.schedule == schedule) or 'none'})")
    return hit.name


def a1111_labels(available) -> list:
    return list(dict.fromkeys(s.label for s in available))


def a1111_schedules(available) -> list:
    return ["Automatic"] + [A1111_SCHEDULES[k] for k in dict.fromkeys(s.schedule for s in available)
                            if k != "automatic"]

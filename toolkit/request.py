"""One request, resolved the same way for the engine (its routes, the compatibility routes and the
cluster's ingress), the Generate job and the one-shot CLI: `resolve_request` is the one place a
request is validated, and the GenerationRequest it makes is what the worker runs as it arrives.

Precedence: request/CLI > [generation] > profile > variant > arch.
"""
import re
from dataclasses import dataclass, field, replace

from toolkit import input_media
from toolkit.config_modules import GenerateImageConfig, ModelConfig
from toolkit.errors import ConfigError, check_values
from toolkit.models.arch import INPUT_KINDS
from toolkit.profiles import EMPTY
from toolkit.settings import Settings, setting

REQUEST_ID = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


@dataclass(frozen=True)
class StreamOptions(Settings):
    """How a request's frames stream back (protocol.py): latents every n steps, previews, detach."""
    latents: str = setting("raw", choices=("raw", "none"), doc="raw: a latent frame every every_n_steps")
    every_n_steps: int = setting(1, min=1)
    max_frames: int = setting(4, min=1, doc="video: the frames a latent frame carries at most")
    preview: str = setting("x0", choices=("x0", "noisy"), doc="x0: the step's prediction of the clean latents")
    detach: bool = setting(False, doc="the request goes on when its HTTP response closes")
    preview_image: str | None = setting(None, choices=(None, "jpeg"), doc="jpeg: a decoded preview image per frame")

    @classmethod
    def from_dict(cls, d, where: str = "stream") -> "StreamOptions":
        if isinstance(d, dict) and d.get("preview_image") == "none":     # "none" is None, as JSON clients write it
            d = {**d, "preview_image": None}
        return super().from_dict(d, where)


@dataclass(frozen=True)
class GenerationRequest:
    """A request as the worker runs it: which model, what to sample (seed fixed, input images
    resolved to files), how it streams, and the file it writes (`output_path`, set by whoever
    queues it: the engine picks a name no other request has). A dynamic batch is a messages.Run
    of several of these; a request alone is a Run of one."""
    model: ModelConfig
    sample: GenerateImageConfig
    stream: StreamOptions = field(default_factory=StreamOptions)
    request_id: str | None = None
    output_path: str | None = None

    def at(self, output_path: str) -> "GenerationRequest":
        return replace(self, output_path=output_path)


class Policy:
    """What a server adds to a request's validation, in three steps; the default adds nothing (the
    Generate job and the CLI run what their own user asked for). The engine's (engine.py
    EnginePolicy): the folders local paths may lie in, LoRA paths relative to its LoRA folder,
    its limits and memory pre-flight, and inputs (images, videos, audio) as its assets."""

    def model(self, model):
        """The request's `model` before it is read (paths resolved, paths outside the roots refused)."""
        return model

    def check(self, mc: ModelConfig, gen: GenerateImageConfig):
        """The resolved request against what this server allows (ConfigError naming the field)."""

    def input(self, value: str, where: str, kind: str = "image") -> str:
        """An input's value (an image, video or audio: `kind`) as the file the worker reads."""
        return value

    def controls(self, gen: GenerateImageConfig, spec) -> tuple:
        """`gen.controls` checked against the arch (toolkit/control_models.check_all), models resolved."""
        from toolkit import control_models
        return control_models.check_all(gen, spec)


NO_POLICY = Policy()


def resolve_request(model, sample, stream=None, *, profiles=EMPTY, dtype: str = "auto", policy: Policy = NO_POLICY,
                    request_id: str | None = None, dry_run: bool = False) -> GenerationRequest:
    """`model` is a ModelConfig dict, `{profile: NAME, ...overrides}`, or a profile name; `sample` the
    sample keys; `stream` the stream options. `dry_run`: what the request would be (the form's
    check, POST /resolve): the seed is left as given, and inputs are only present (any non-empty
    string), neither read nor stored."""
    for value, where in ((model, "model"), (sample, "sample"), (stream, "stream")):
        check_values(value, where)      # before any path, log line or file sees a string
    if request_id is not None and (not isinstance(request_id, str) or not REQUEST_ID.match(request_id)):
        raise ConfigError("request_id", "must be 1-64 characters of letters, digits, '_', '-', '.'")
    mc, profile_defaults = resolve_model(model, profiles=profiles, dtype=dtype, policy=policy)
    if sample is not None and not isinstance(sample, dict):
        raise ConfigError("sample", "must be a mapping")
    gen = GenerateImageConfig.from_dict({**profile_defaults, **(sample or {})}, mc, "sample")
    policy.check(mc, gen)
    if gen.controls:
        gen = replace(gen, controls=policy.controls(gen, mc.spec))
    opts = StreamOptions.from_dict(stream, "stream")
    if not dry_run:
        inputs = {name: policy.input(getattr(gen, name), f"sample.{name}", INPUT_KINDS[name])   # last: a data
                  for name in GenerateImageConfig.INPUTS if getattr(gen, name)}                 # URL is stored
        controls = tuple(replace(c, image=policy.input(c.image, f"sample.controls[{i}].image", "image"))
                         for i, c in enumerate(gen.controls))
        gen = replace(gen, **inputs, controls=controls).seeded()
        input_media.check_fits(gen)
    return GenerationRequest(mc, gen, opts, request_id)


def resolve_model(model, *, profiles=EMPTY, dtype: str = "auto", policy: Policy = NO_POLICY):
    """The model part of resolve_request, alone (a warm load, the cluster's routing): the ModelConfig
    and the sample defaults its profile brings."""
    check_values(model, "model")
    if isinstance(model, str):
        model = {"profile": model}
    model = policy.model(model)
    model, profile_defaults = profiles.resolve_model(model)
    if isinstance(model, dict) and dtype != "auto" and "dtype" not in model:
        model = {**model, "dtype": dtype}
    return ModelConfig.from_dict(model, "model"), profile_defaults

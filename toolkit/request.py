"""One request, resolved the same way for the engine (its routes, the compatibility routes and the
cluster's ingress), the Generate job and the one-shot CLI: `resolve_request` is the one place a
request is validated, and the GenerationRequest it makes is what the worker runs as it arrives.

Precedence: request/CLI > [generation] > profile > variant > arch.
"""
import os
import re
from dataclasses import dataclass, field, replace

from toolkit import attention, hires, input_media
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

    def check_inputs(self, mc: ModelConfig, gen: GenerateImageConfig):
        """The request with its inputs stored (their files read): what depends on them (ConfigError)."""

    def upscaler(self, name: str, where: str) -> str | None:
        """A pixel upscaler's name as what runs it: None for a built-in (Lanczos, Nearest), else its
        model file. Here a path to an existing file (toolkit/upscalers.py); the engine's also finds a
        name in its upscaler folders."""
        from toolkit import upscalers
        return upscalers.resolve(name, where, folders=())

    def model_file(self, value: str, where: str, kind: str) -> str:
        """A model file a sample field names (`kind`: model_trees.IP_ADAPTER, ...) as its path: here a path
        as given; the engine's also a name in its model folders, and only inside engine.model_roots."""
        path = os.path.expanduser(value)
        if not os.path.exists(path):
            raise ConfigError(where, f"no such file: {value}")
        return path

    def folders(self) -> tuple:
        """The model folders whose trees hold the files a request may name (the engine's model_folders)."""
        return ()

    def controls(self, gen: GenerateImageConfig, spec) -> tuple:
        """`gen.controls` checked against the arch (toolkit/control_models.check_all), models resolved."""
        from toolkit import control_models
        return control_models.check_all(gen, spec)


NO_POLICY = Policy()


def resolve_request(model, sample, stream=None, *, profiles=EMPTY, dtype: str = "auto", policy: Policy = NO_POLICY,
                    request_id: str | None = None, dry_run: bool = False,
                    device: str | None = None) -> GenerationRequest:
    """`model` is a ModelConfig dict, `{profile: NAME, ...overrides}`, or a profile name; `sample` the
    sample keys; `stream` the stream options. `dry_run`: what the request would be (the form's
    check, POST /resolve): the seed is left as given, and inputs are only present (any non-empty
    string), neither read nor stored. `device`: where it will run, when known (model.attention's check)."""
    for value, where in ((model, "model"), (sample, "sample"), (stream, "stream")):
        check_values(value, where)      # before any path, log line or file sees a string
    if request_id is not None and (not isinstance(request_id, str) or not REQUEST_ID.match(request_id)):
        raise ConfigError("request_id", "must be 1-64 characters of letters, digits, '_', '-', '.'")
    mc, profile_defaults = resolve_model(model, profiles=profiles, dtype=dtype, policy=policy, device=device)
    if sample is not None and not isinstance(sample, dict):
        raise ConfigError("sample", "must be a mapping")
    gen = GenerateImageConfig.from_dict({**profile_defaults, **(sample or {})}, mc, "sample")
    gen = hires.resolved(gen, mc.spec, mc.variant, policy)      # its upscaler named by the policy
    policy.check(mc, gen)
    if gen.controls:
        gen = replace(gen, controls=policy.controls(gen, mc.spec))
    opts = StreamOptions.from_dict(stream, "stream")
    if gen.ip_adapter:
        gen = replace(gen, ip_adapter=_ip_adapters(gen.ip_adapter, mc.spec, policy, dry_run))
    if not dry_run:
        inputs = {name: policy.input(getattr(gen, name), f"sample.{name}", INPUT_KINDS[name])   # last: a data
                  for name in GenerateImageConfig.INPUTS if getattr(gen, name)}                 # URL is stored
        controls = tuple(replace(c, image=policy.input(c.image, f"sample.controls[{i}].image", "image"))
                         for i, c in enumerate(gen.controls))
        gen = replace(gen, **inputs, controls=controls).seeded()
        input_media.check_fits(gen)
        policy.check_inputs(mc, gen)
    return GenerationRequest(mc, gen, opts, request_id)


def _ip_adapters(refs, spec, policy: Policy, dry_run: bool) -> tuple:
    """`sample.ip_adapter` with each adapter file found and checked against the arch from its header, its
    image encoder found (or the one named checked), and its image an input as init_img is; one image
    encoder serves every adapter of a call (diffusers' pipelines hold one)."""
    from toolkit import ip_adapter_files, model_trees

    out = []
    for i, ref in enumerate(refs):
        where = f"sample.ip_adapter[{i}]"
        path = policy.model_file(ref.model, f"{where}.model", model_trees.IP_ADAPTER)
        info = ip_adapter_files.check(path, spec, f"{where}.model")
        if ref.image_encoder:
            encoder = policy.model_file(ref.image_encoder, f"{where}.image_encoder", model_trees.CLIP_VISION)
            ip_adapter_files.check_encoder(encoder, info, f"{where}.image_encoder")
        elif out and ip_adapter_files.encoder_width(out[0].image_encoder, info["embed"][0]) == info["embed"][1]:
            encoder = out[0].image_encoder            # the call's encoder serves this one too
        else:
            encoder = ip_adapter_files.find_encoder(path, info, policy.folders(), f"{where}.model")
        if out and os.path.realpath(encoder) != os.path.realpath(out[0].image_encoder):
            raise ConfigError(f"{where}.model", f"needs another image encoder ({os.path.basename(encoder)}) than "
                              f"sample.ip_adapter[0] ({os.path.basename(out[0].image_encoder)}): one call runs one")
        image = ref.image if dry_run else policy.input(ref.image, f"{where}.image", "image")
        out.append(replace(ref, model=path, image_encoder=encoder, image=image))
    return tuple(out)


def resolve_model(model, *, profiles=EMPTY, dtype: str = "auto", policy: Policy = NO_POLICY,
                  device: str | None = None):
    """The model part of resolve_request, alone (a warm load, the cluster's routing): the ModelConfig
    and the sample defaults its profile brings. `device`: where it will run (None: not known here, the
    holder checks model.attention where it runs)."""
    check_values(model, "model")
    if isinstance(model, str):
        model = {"profile": model}
    model = policy.model(model)
    model, profile_defaults = profiles.resolve_model(model)
    if isinstance(model, dict) and dtype != "auto" and "dtype" not in model:
        model = {**model, "dtype": dtype}
    mc = ModelConfig.from_dict(model, "model")
    attention.check(mc, device)
    return mc, profile_defaults

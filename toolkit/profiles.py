"""Model profiles: named, local model configurations (docs/configuration.md, "Profiles"), in TOML or YAML.

    default_model = "krea2-turbo"
    [generation]                       # sample defaults for every profile (below a request, above a profile)
    width = 1024
    [model_profiles.krea2-turbo]
    architecture = "krea-2"            # an arch, or another name its row declares (ArchSpec.aliases)
    variant = "turbo"
    diffusion_model = "/models/krea2_turbo_fp8_scaled.safetensors"
    text_encoder = "/models/qwen3vl_4b_fp8_scaled.safetensors"
    vae = "/models/qwen_image_vae.safetensors"
    tokenizer = "/models/qwen25_tokenizer"
    [model_profiles.krea2-turbo.defaults]   # this profile's sample defaults
    steps = 8

A profile is a named model: it becomes a ModelConfig (`model_config()`), local-only by contract.
Sample precedence: request/CLI, then [generation], then the profile (its defaults and variant),
then the arch's fallback.
"""
import os
from dataclasses import dataclass, field

from toolkit.errors import ConfigError, check_keys
from toolkit.models.registry import ARCHS

PROFILE_KEYS = ("architecture", "variant", "checkpoint", "diffusion_model", "text_encoder", "text_encoder_2",
                "text_encoder_3", "vae", "tokenizer", "defaults", "dtype", "quantize", "qtype", "quantize_te",
                "qtype_te", "low_vram", "layer_offloading", "placement", "attention")
COMPONENT_KEYS = ("diffusion_model", "text_encoder", "text_encoder_2", "text_encoder_3", "vae", "tokenizer")


def component_role(arch: str, key: str) -> str:
    """The arch's component a profile key names: `diffusion_model` is its denoiser (transformer or unet)."""
    return ARCHS[arch].denoiser_roles[0] if key == "diffusion_model" else key


def arch_named(name: str) -> str:
    """The arch a profile's `architecture` names: its own name, or an alias its row declares (else
    `name` itself, which then is no arch)."""
    if name in ARCHS:
        return name
    return next((a for a in ARCHS if name in ARCHS[a].aliases), name)
SAMPLE_ALIASES = {"steps": "num_inference_steps", "cfg": "guidance_scale", "cfg_scale": "guidance_scale"}
TOP_KEYS = ("default_model", "generation", "model_profiles")


@dataclass(frozen=True)
class ModelProfile:
    name: str
    architecture: str
    variant: str | None
    checkpoint: str | None = None
    components: dict = field(default_factory=dict)     # role -> local path
    defaults: dict = field(default_factory=dict)       # sample defaults (GenerateImageConfig names)
    model_options: dict = field(default_factory=dict)  # dtype/quantize/... ModelConfig keys

    def model_config(self, **overrides) -> dict:
        """The ModelConfig dict this profile names (request keys may add quantize, dtype, ...).
        Every configured path must exist: a missing one fails here, named, before anything loads."""
        for key in COMPONENT_KEYS:
            path = self.components.get(component_role(self.architecture, key))
            if path and not os.path.exists(path):
                raise ConfigError(f"model_profiles.{self.name}.{key}", f"no such file or folder: {path}")
        if self.checkpoint and not os.path.exists(self.checkpoint):
            raise ConfigError(f"model_profiles.{self.name}.checkpoint", f"no such file or folder: {self.checkpoint}")
        d = {"arch": self.architecture, "profile": self.name, "local_only": True, **self.model_options}
        if self.variant:
            d["variant"] = self.variant
        comps = dict(self.components)
        denoiser = ARCHS[self.architecture].component(component_role(self.architecture, "diffusion_model"))
        if self.checkpoint:
            d["name_or_path"] = self.checkpoint
        elif denoiser.single_file is not None and os.path.isfile(comps.get(denoiser.role) or ""):
            # a denoiser file the row reads (a ComfyUI diffusion_models/ file) names the model, as in a
            # request: its configs from the file, its missing components from its own tree
            d["name_or_path"] = comps.pop(denoiser.role)
        if comps:
            d["components"] = comps
        d.update(overrides)
        return d

    def public(self) -> dict:
        """For listings: name, architecture, variant, defaults; never a path."""
        return {"name": self.name, "architecture": self.architecture, "variant": self.variant,
                "defaults": dict(self.defaults)}


@dataclass(frozen=True)
class Profiles:
    profiles: dict
    default_model: str | None = None
    generation: dict = field(default_factory=dict)
    path: str | None = None

    def get(self, name: str) -> ModelProfile:
        if name not in self.profiles:
            raise ConfigError("model.profile", f"unknown model profile {name!r} "
                              f"(known: {', '.join(sorted(self.profiles)) or 'none'})")
        return self.profiles[name]

    def sample_defaults(self, name: str) -> dict:
        """[generation] over the profile's defaults (the variant and arch fill the rest later)."""
        return {**self.get(name).defaults, **self.generation}

    def resolve_model(self, model: dict, where: str = "model") -> tuple[dict, dict]:
        """`{profile: NAME, ...overrides}` -> (ModelConfig dict, sample defaults); other dicts pass through.
        A resolved config (with `arch`) that came from a profile keeps that profile's sample defaults."""
        if not isinstance(model, dict) or not model.get("profile"):
            return model, {}
        name = model["profile"]
        if model.get("arch"):
            return model, self.sample_defaults(name) if name in self.profiles else {}
        if name not in self.profiles:
            raise ConfigError(f"{where}.profile", f"unknown model profile {name!r} "
                              f"(known: {', '.join(sorted(self.profiles)) or 'none'})")
        prof = self.profiles[name]
        overrides = {k: v for k, v in model.items() if k != "profile"}
        return prof.model_config(**overrides), self.sample_defaults(name)


EMPTY = Profiles({})


def load_profiles(path: str) -> Profiles:
    """Parse and validate a profiles file; errors name the file and the key."""
    if not os.path.isfile(path):
        raise ConfigError("", "no such profiles file", file=path)
    try:
        with open(path, "rb") as f:
            raw = f.read()
        if path.endswith(".toml"):
            import tomllib
            data = tomllib.loads(raw.decode("utf-8"))
        else:
            import yaml
            data = yaml.safe_load(raw) or {}
    except Exception as e:  # tomllib/yaml syntax errors
        raise ConfigError("", f"malformed file: {' '.join(str(e).split())}", file=path) from None
    try:
        return _validate(data, path)
    except ConfigError as e:
        raise ConfigError(e.key, e.message, file=path) from None


def _validate(data: dict, path: str) -> Profiles:
    check_keys(data, TOP_KEYS, "")
    raw_profiles = data.get("model_profiles") or {}
    if not isinstance(raw_profiles, dict):
        raise ConfigError("model_profiles", "must be a table of profiles")
    base = os.path.dirname(os.path.abspath(path))
    profiles = {}
    for name, p in raw_profiles.items():
        where = f"model_profiles.{name}"
        if not isinstance(name, str) or not name.strip():
            raise ConfigError("model_profiles", "a profile name is empty")
        check_keys(p, PROFILE_KEYS, where, required=("architecture",))
        arch = arch_named(p["architecture"])
        if arch not in ARCHS:
            raise ConfigError(f"{where}.architecture", f"unknown architecture {p['architecture']!r} "
                              f"(known: {', '.join(sorted(ARCHS))})")
        spec = ARCHS[arch]
        variant = p.get("variant")
        if spec.variants:
            variant = variant or spec.default_variant
            if variant not in spec.variants:
                raise ConfigError(f"{where}.variant", f"unsupported {arch} variant {variant!r} "
                                  f"(supported: {', '.join(spec.variants)})")
        elif variant:
            raise ConfigError(f"{where}.variant", f"architecture {arch} has no variants")
        comps = {}
        for key in COMPONENT_KEYS:
            value = p.get(key)
            if value is None:
                continue
            if not isinstance(value, str) or not value:
                raise ConfigError(f"{where}.{key}", "must be a path")
            if not any(c.role == component_role(arch, key) for c in spec.components):
                raise ConfigError(f"{where}.{key}", f"{arch} has no {key} (its components: "
                                  f"{', '.join(c.role for c in spec.components)})")
            comps[component_role(arch, key)] = _abs(value, base)
        checkpoint = p.get("checkpoint")
        if checkpoint is not None and (not isinstance(checkpoint, str) or not checkpoint):
            raise ConfigError(f"{where}.checkpoint", "must be a path")
        if not comps and not checkpoint:
            raise ConfigError(where, "has no components: give diffusion_model/text_encoder/vae/tokenizer paths "
                              "or a checkpoint")
        if checkpoint and os.path.isfile(_abs(checkpoint, base)) and \
                not any(c.single_file is not None and c.single_file.anchors for c in spec.components):
            raise ConfigError(f"{where}.checkpoint", f"{arch} has no all-in-one checkpoint layout: give a diffusers "
                              "folder, or separate diffusion_model, text_encoder, vae and tokenizer files")
        defaults = _sample_table(p.get("defaults") or {}, f"{where}.defaults", arch)
        options = {k: p[k] for k in ("dtype", "quantize", "qtype", "quantize_te", "qtype_te", "low_vram",
                                    "layer_offloading", "placement", "attention") if k in p}
        profiles[name] = ModelProfile(name, arch, variant, _abs(checkpoint, base) if checkpoint else None,
                                      comps, defaults, options)
    default = data.get("default_model")
    if default is not None and default not in profiles:
        raise ConfigError("default_model", f"names no profile: {default!r} (known: {', '.join(sorted(profiles))})")
    generation = _sample_table(data.get("generation") or {}, "generation", None)
    return Profiles(profiles, default, generation, path)


def _sample_table(d: dict, where: str, arch: str | None) -> dict:
    from toolkit.config_modules import GenerateImageConfig
    if not isinstance(d, dict):
        raise ConfigError(where, "must be a table")
    out = {SAMPLE_ALIASES.get(k, k): v for k, v in d.items()}
    allowed = set(GenerateImageConfig.COMMON) | ({e for e in ARCHS[arch].sample_extras} if arch else
                                                 {e for a in ARCHS.values() for e in a.sample_extras})
    check_keys(out, allowed, where)
    if arch:   # validate the values with the arch's rules (an input every task needs comes with each request)
        probe = {**{name: name for name in ARCHS[arch].needed_inputs}, **out}
        GenerateImageConfig.from_dict(probe, arch, where)
    return out


def _abs(path: str, base: str) -> str:
    path = os.path.expanduser(path)
    return path if os.path.isabs(path) else os.path.normpath(os.path.join(base, path))

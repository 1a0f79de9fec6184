"""One request's model and sample settings, resolved the same way for the engine, the Generate
job and the one-shot CLI: precedence request/CLI > [generation] > profile > variant > arch."""
from toolkit.config_modules import GenerateImageConfig, ModelConfig
from toolkit.errors import ConfigError, check_values
from toolkit.profiles import EMPTY


def resolve_request(model, sample, profiles=EMPTY, dtype: str = "auto") -> tuple[ModelConfig, GenerateImageConfig]:
    """`model` is a ModelConfig dict, `{profile: NAME, ...overrides}`, or a profile name."""
    check_values(model, "model")        # text that is not Unicode, numbers that are not finite
    check_values(sample, "sample")
    if isinstance(model, str):
        model = {"profile": model}
    model, profile_defaults = profiles.resolve_model(model)
    if isinstance(model, dict) and dtype != "auto" and "dtype" not in model:
        model = {**model, "dtype": dtype}
    mc = ModelConfig.from_dict(model, "model")
    if sample is not None and not isinstance(sample, dict):
        raise ConfigError("sample", "must be a mapping")
    gen = GenerateImageConfig.from_dict({**profile_defaults, **(sample or {})}, mc, "sample")
    return mc, gen

"""A DiT denoiser's config from the file people have, as the DiT arch rows read it: the facts its
shapes and key counts tell (a signature, in the arch file), matched against the arch's known configs
(the hub repos' transformer/config.json, and the tiny factory's), which supply what no shape tells
(heads, rope axes and theta, eps, flags). Torch-free: the detector and /library ask it on a header.

    from_known(sig, known, facts_of, what, variants=, notes=) -> FileConfig

`facts_of(config)` puts a known config in the signature's terms (heads x head_dim = the width a
shape shows); a file whose facts equal no known config's is refused, naming the nearest and what
differs (`sig` keys in that order).
"""
from toolkit.models.formats.file_view import FileConfig, FileKindError, mismatch


def from_known(sig: dict, known: dict, facts_of, what: str, variants: dict | None = None,
               notes: dict | None = None) -> FileConfig:
    facts = {name: facts_of(config) for name, config in known.items()}
    for name, f in facts.items():
        if all(_norm(f.get(k)) == _norm(v) for k, v in sig.items()):
            return FileConfig(dict(known[name]), known=name, variant=(variants or {}).get(name),
                              notes=tuple((notes or {}).get(name, ())))
    raise FileKindError(f"{what}: its shapes match no known config ({mismatch(sig, facts, tuple(sig))})")


def _norm(v):
    return list(v) if isinstance(v, tuple) else v


def known_configs(single_file) -> dict:
    """A DiT row's known configs: `<part>_config`'s module's `<PART>_KNOWN` (every DIT row keeps its configs
    so, the file tests read them alike); {} where the rule keeps none."""
    import importlib

    if single_file is None or not single_file.config:
        return {}
    module, _, fn = single_file.config.rpartition(":")
    return getattr(importlib.import_module(module), fn.removesuffix("_config").upper() + "_KNOWN", {})


def matches_known(config: dict, known: dict) -> bool:
    """A library config (a folder's config.json) is one of the known configs: every key a known one sets."""
    return any(all(_norm(config.get(k)) == _norm(v) for k, v in entry.items()) for entry in known.values())

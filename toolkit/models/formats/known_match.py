"""Matching a file's signature against known configs whose facts are not config keys one to one
(a text encoder's `q_width` is heads x head_dim, `gated` comes from `feed_forward_proj`): each
kind gives `facts_of(config) -> signature dict`, and the known config whose facts equal the file's
is the one. Torch-free.
"""
from toolkit.models.formats.file_view import FileConfig, FileKindError, mismatch


def match_known(sig: dict, known: dict, facts_of, what: str, notes: tuple = ()) -> FileConfig:
    """The FileConfig of the known config (`known`: {name: config}) whose `facts_of` equals `sig`;
    else a FileKindError naming the nearest known config and the facts that differ."""
    facts = {name: facts_of(config) for name, config in known.items()}
    keys = tuple(sig)
    for name, f in facts.items():
        if all(_norm(f.get(k)) == _norm(sig.get(k)) for k in keys):
            return FileConfig(dict(known[name]), known=name, notes=notes)
    raise FileKindError(f"{what}: its shapes match no known config ({mismatch(sig, facts, keys)})")


def _norm(v):
    return list(v) if isinstance(v, tuple) else v

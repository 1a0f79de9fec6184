"""One component's tensors inside a safetensors file, by their header only: what a row's `config`
function derives a library config from (shapes, key counts) and what the detector matches anchors
against. No torch, no tensor data.

    view = View.of(header, prefix="cond_stage_model.transformer.")
    view.shape("text_model.embeddings.token_embedding.weight") -> (49408, 768)
    view.count(r"text_model\\.encoder\\.layers\\.(\\d+)\\.") -> 12

`FileConfig` is what a config function answers: the library config (a diffusers `config.json` or a
transformers config's dict), which known config it is (or "derived" for a reduced model that is
consistent), and the arch variant it implies. `FileKindError` names what was detected and what did
not match.
"""
import re
from dataclasses import dataclass, field


class FileKindError(ValueError):
    """A file whose tensors do not make the component its layout says: the message names what was
    detected and what did not match."""


@dataclass(frozen=True)
class FileConfig:
    config: dict                   # the library class's config (from_config / config_class(**config))
    known: str = "derived"         # the known real config it equals ("sd15"), else "derived"
    variant: str | None = None     # the arch variant the file implies (sdxl "refiner", flux "schnell")
    notes: tuple = ()              # what a person may want to know ("v-prediction: the file says so")


@dataclass(frozen=True)
class View:
    prefix: str
    shapes: dict                   # key (prefix cut) -> shape tuple
    dtypes: dict = field(default_factory=dict)
    metadata: dict = field(default_factory=dict)    # the file's __metadata__
    all_keys: frozenset = frozenset()               # every key of the file (markers outside the prefix)
    header: object = field(default=None, compare=False, repr=False)   # for `raw`: the file's header

    @classmethod
    def of(cls, header, prefix: str = "") -> "View":
        shapes, dtypes = {}, {}
        for name, info in header.tensors.items():
            if name.startswith(prefix):
                shapes[name[len(prefix):]] = tuple(info.shape)
                dtypes[name[len(prefix):]] = info.dtype
        return cls(prefix, shapes, dtypes, dict(header.metadata), frozenset(header.tensors), header)

    def raw(self, key: str, max_bytes: int = 4096) -> bytes:
        """The stored bytes of one small tensor under the prefix (what a shape cannot tell: SD 2.x's
        v-prediction shows in one bias's spread). Refuses large tensors; no torch."""
        from toolkit.models.formats.safetensors_header import read_raw_bytes
        if self.header is None or self.prefix + key not in self.header.tensors:
            raise FileKindError(f"{self.prefix}{key} is missing")
        return read_raw_bytes(self.header, self.prefix + key, max_bytes)

    def has(self, key: str) -> bool:
        return key in self.shapes

    def shape(self, key: str) -> tuple:
        if key not in self.shapes:
            raise FileKindError(f"{self.prefix}{key} is missing")
        return self.shapes[key]

    def dim(self, key: str, axis: int = 0) -> int:
        return int(self.shape(key)[axis])

    def indices(self, pattern: str) -> list:
        """The distinct integers group 1 of `pattern` takes over the keys, sorted."""
        rx = re.compile(pattern)
        return sorted({int(m[1]) for k in self.shapes if (m := rx.match(k))})

    def count(self, pattern: str) -> int:
        found = self.indices(pattern)
        return max(found) + 1 if found else 0

    def keys(self, pattern: str = "") -> list:
        rx = re.compile(pattern)
        return [k for k in self.shapes if rx.match(k)]

    def __len__(self) -> int:
        return len(self.shapes)


def derive(header, single_file, prefix: str) -> FileConfig:
    """A component's FileConfig from the file: its row's config function over the view under `prefix`,
    with the arch's `facts` on top (FileKindError naming what did not match)."""
    from dataclasses import replace

    from toolkit.models.arch import load_object
    if not single_file.config:
        raise FileKindError(f"{single_file.label or single_file.kind or 'this component'} has no config rule: "
                            "its config folder is needed")
    fc = load_object(single_file.config)(View.of(header, prefix))
    return replace(fc, config={**fc.config, **dict(single_file.facts)}) if single_file.facts else fc


def check_known(derived: dict, known: dict, facts: tuple, what: str) -> str | None:
    """The name of the known config whose `facts` (the keys a shape can tell) all equal `derived`'s,
    else None. `known`: {name: config}."""
    for name, config in known.items():
        if all(_same(config.get(k), derived.get(k)) for k in facts):
            return name
    return None


def _same(a, b) -> bool:
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return list(a) == list(b)
    return a == b


def mismatch(derived: dict, known: dict, facts: tuple) -> str:
    """What a derived config has that no known one has, for the error: the nearest known config
    (most facts equal) and the facts that differ."""
    if not known:
        return "no known config"
    best = max(known, key=lambda n: sum(_same(known[n].get(k), derived.get(k)) for k in facts))
    diff = [f"{k} {derived.get(k)!r} (not {known[best].get(k)!r})" for k in facts
            if not _same(known[best].get(k), derived.get(k))]
    return f"nearest known {best}: " + ", ".join(diff)


def sub_header(header, prefix: str):
    """`header` with only the tensors under `prefix` (and, in a ComfyUI quantization manifest, only
    their layers): one component of an all-in-one checkpoint, as if it were a file of its own."""
    import json
    from dataclasses import replace

    from toolkit.models.formats import quant
    tensors = {k: v for k, v in header.tensors.items() if k.startswith(prefix)}
    metadata = dict(header.metadata)
    raw = metadata.get(quant.METADATA_KEY)
    if raw:
        try:
            doc = json.loads(raw)
            layers = doc.get("layers") if isinstance(doc, dict) else None
            if isinstance(layers, dict):
                doc["layers"] = {k: v for k, v in layers.items() if k.startswith(prefix)}
                metadata[quant.METADATA_KEY] = json.dumps(doc)
        except ValueError:
            pass                # the audit names a malformed manifest
    return replace(header, tensors=tensors, metadata=metadata)

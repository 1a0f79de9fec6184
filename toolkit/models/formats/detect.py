"""What a safetensors file is, from its header alone: the one detector every caller asks (the
load funnel, inspection, /library, profiles), fed by the arch rows' `SingleFile` entries.

    detect(header) -> Detection

- An all-in-one checkpoint (A1111/Forge, ComfyUI `checkpoints/`) or a denoiser file: the arch whose
  denoiser's anchors appear (under one of its prefixes), the variant its config implies, and every
  other component of that arch found in the file, with its prefix.
- A component file (ComfyUI `text_encoders/`, `vae/`): its kind ("clip_l", "ldm_kl_vae"), and the
  archs and roles it can fill.
- Neither: nothing matched, and what was looked for.

Where several arch rows' anchors match (the same UNet layout in SD 1.x and 2.x), each one's config
function decides: a file whose shapes equal a known real config of one arch is that arch; else the
first whose derived config is consistent. Where several take it equally (FLUX.1 dev and Kontext,
Wan 2.1 14B and a Wan 2.2 A14B expert have the same shapes), the first is named (one that guesses:
SingleFile.guess) and `alike` lists the others: the request's `model.arch` decides. No torch, no
tensor data.
"""
import os
from dataclasses import dataclass, field

from toolkit.models.formats.file_view import FileConfig, FileKindError, View, derive

_CACHE: dict = {}
_CACHE_MAX = 256


@dataclass(frozen=True)
class Part:
    """One component found in a file: the arch row's SingleFile entry, its prefix, its config."""
    role: str
    single_file: object
    prefix: str
    config: FileConfig | None = None
    error: str | None = None

    def public(self) -> dict:
        sf = self.single_file
        return {"role": self.role, "kind": sf.kind or None, "label": sf.label or None, "prefix": self.prefix,
                "known": self.config.known if self.config else None, "error": self.error}


@dataclass(frozen=True)
class Detection:
    arch: str | None = None
    variant: str | None = None
    parts: dict = field(default_factory=dict)        # role -> Part (the arch's components in the file)
    kinds: tuple = ()                                # a component file: (kind, label, [(arch, role)...])
    problems: tuple = ()                             # why no arch or kind was recognised, or what did not match
    alike: tuple = ()                                # other archs that take the file as well (model.arch decides)

    @property
    def denoiser(self) -> Part | None:
        from toolkit.models.registry import ARCHS
        if self.arch is None:
            return None
        return next((self.parts[r] for r in ARCHS[self.arch].denoiser_roles if r in self.parts), None)

    @property
    def all_in_one(self) -> bool:
        """The denoiser and at least one other component are in the file."""
        return self.denoiser is not None and len(self.parts) > 1

    def public(self) -> dict:
        return {"arch": self.arch, "variant": self.variant, "all_in_one": self.all_in_one,
                "components": {r: p.public() for r, p in self.parts.items()},
                "kinds": [{"kind": k, "label": label, "fits": [{"arch": a, "role": r} for a, r in fits]}
                          for k, label, fits in self.kinds],
                "problems": list(self.problems), "alike": list(self.alike),
                "guessed": (f"{self.arch} (as well: {', '.join(self.alike)}; model.arch decides)"
                            if self.alike else None)}


def detect_file(path: str) -> Detection:
    """detect() of a file's header, cached by (path, inode, size, mtime)."""
    from toolkit.models.formats.safetensors_header import check_file
    st = os.stat(path)
    key = (os.path.realpath(path), st.st_ino, st.st_size, st.st_mtime_ns)
    hit = _CACHE.get(key)
    if hit is None:
        hit = detect(check_file(path))
        if len(_CACHE) >= _CACHE_MAX:
            _CACHE.pop(next(iter(_CACHE)))
        _CACHE[key] = hit
    return hit


def _found(header, sf) -> str | None:
    """The first of `sf.prefixes` under which every anchor appears (and `sf.matches` agrees)."""
    from toolkit.models.arch import load_object
    keys = header.tensors
    for prefix in sf.prefixes:
        if all(prefix + a in keys for a in sf.anchors):
            if sf.matches and not load_object(sf.matches)(View.of(header, prefix)):
                continue
            return prefix
    return None


def _config(header, sf, prefix) -> tuple:
    if not sf.config:
        return None, None
    try:
        return derive(header, sf, prefix), None
    except FileKindError as e:
        return None, str(e)


def detect(header) -> Detection:
    from toolkit.models.registry import ARCHS
    candidates, kinds, problems = [], {}, []
    for name, spec in ARCHS.items():
        parts = {}
        for comp in spec.components:
            sf = comp.single_file
            if sf is None or not sf.anchors:
                continue
            prefix = _found(header, sf)
            if prefix is None:
                continue
            config, error = _config(header, sf, prefix)
            parts[comp.role] = Part(comp.role, sf, prefix, config, error)
        denoiser = next((parts[r] for r in spec.denoiser_roles if r in parts), None)
        if denoiser is not None:
            candidates.append((name, denoiser, parts))
        else:
            for role, part in parts.items():
                if part.error is None:
                    entry = kinds.setdefault(part.single_file.kind or role, [part.single_file.label or role, []])
                    entry[1].append((name, role))
    if candidates:
        # a known real config first, then a consistent derived one, then the first that matched at all;
        # among equals, a row that guesses before one that leaves its files to another arch's (SingleFile.guess)
        def fit(c):
            d = c[1]
            return (d.error is not None, d.config is None or d.config.known == "derived")
        name, denoiser, parts = min(candidates, key=lambda c: (*fit(c), not c[1].single_file.guess))
        if denoiser.error is not None:
            problems.append(f"{ARCHS[name].name} {denoiser.role}: {denoiser.error}")
        alike = tuple(n for n, d, _p in candidates if n != name and d.error is None and d.config is not None
                      and fit((n, d, _p)) == fit((name, denoiser, parts)))
        variant = denoiser.config.variant if denoiser.config else None
        return Detection(name, variant, parts, (), tuple(problems), alike)
    if kinds:
        return Detection(kinds=tuple((k, label, tuple(fits)) for k, (label, fits) in kinds.items()))
    return Detection(problems=("no arch's denoiser or component layout matched its keys",))

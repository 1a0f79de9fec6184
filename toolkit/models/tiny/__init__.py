"""Tiny random-weight models of every arch, written offline in their real on-disk format.

`tiny:<arch>[:<seed>]` as a `name_or_path` names one: built on first use into a cache and reused.
It proves an install works, offline and on any machine; what it draws is noise. Tests use the same
models. Each arch declares its tiny instance in its own file (`ArchSpec.tiny`: the component
dimensions, built with `kit`); this package writes them:

    make_tiny(arch, folder, seed=0, *, overwrite=False) -> Path
    make_shared_pair(arch, folder_a, folder_b, seed_a=0, seed_b=1) -> (Path, Path)
    cached_tiny(arch, seed=0, root=None) -> Path          # $AITK_TINY_CACHE or ~/.cache/aitk/tiny_models
    shared_roles(arch) / own_roles(arch)                   # what a shared pair shares / does not

    python -m toolkit.models.tiny --arch zimage --out DIR [--seed N] | --all --out DIR | --pair ARCH --out DIR

A folder is the pipeline's `save_pretrained` output (safetensors, model_index.json, tokenizers).
It is built in a temporary sibling and renamed into place, with a marker written last, so a crash
never leaves a folder that looks complete; concurrent builders each build and the first rename
wins. The same (arch, seed) always gives byte-identical files: torch is re-seeded before each
component from (seed, role) inside fork_rng, so the caller's RNG is untouched. In a shared pair,
text encoders, tokenizers and VAE draw from model a's seed and b's files are hard links of a's.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import pathlib
import shutil
import tempfile
import threading
import uuid
from typing import Callable, Sequence

PREFIX = "tiny:"
MARKER_NAME = ".tiny_complete"
# Bump when a shared recipe (kit, tokenizers, seeding) changes: folders written by an older
# recipe are then rebuilt instead of reused. An arch's own dims are part of its marker already.
RECIPE_VERSION = 2

# Builds seed torch's global RNG (module constructors draw from it), so builds in one process
# are serialised; separate processes are independent.
_BUILD_LOCK = threading.RLock()


def is_tiny(name_or_path) -> bool:
    return isinstance(name_or_path, str) and name_or_path.startswith(PREFIX)


def resolve_tiny(name_or_path: str, arch: str) -> str:
    """`tiny:<arch>[:<seed>]` -> the cached folder (built now if missing)."""
    name, _, seed = name_or_path[len(PREFIX):].partition(":")
    if name != arch:
        raise ValueError(f"model.name_or_path: {name_or_path!r} names arch {name!r}, but model.arch is {arch!r}")
    if seed and not seed.isdigit():
        raise ValueError(f"model.name_or_path: bad seed in {name_or_path!r}")
    return str(cached_tiny(arch, int(seed or 0)))


def tiny_archs() -> tuple:
    from toolkit.models.registry import ARCHS
    return tuple(a for a in ARCHS if ARCHS[a].tiny is not None)


def _spec(arch: str):
    from toolkit.models.registry import ARCHS
    if arch not in ARCHS or ARCHS[arch].tiny is None:
        raise ValueError(f"unknown tiny arch {arch!r}; expected one of {', '.join(tiny_archs())}")
    return ARCHS[arch]


def sample_settings(arch: str) -> dict:
    """A request (GenerateImageConfig keys) that runs the tiny model of `arch` in about a second."""
    return dict(_spec(arch).tiny.sample)


def own_roles(arch: str) -> tuple:
    """Components with weights that belong to one denoiser checkpoint (they differ in a shared pair)."""
    return tuple(c.role for c in _spec(arch).components if c.own)


def shared_roles(arch: str) -> tuple:
    """Components a shared pair has in common (text encoders, tokenizers, VAE, ...), from the files."""
    from toolkit.models.arch import CONFIG_KINDS
    return tuple(c.role for c in _spec(arch).components if not c.own and c.kind not in CONFIG_KINDS)


def build_pipeline(arch: str, seed: int = 0, shared_seed: int | None = None):
    """The tiny pipeline of `arch` in memory (float32, CPU), as make_tiny writes it."""
    from toolkit.models.arch import load_class
    from toolkit.models.tiny.kit import Build

    spec = _spec(arch)
    _quiet_libraries()
    with _BUILD_LOCK:
        components = spec.tiny.build(Build(spec, int(seed), int(seed if shared_seed is None else shared_seed)))
        return load_class(spec.pipeline)(**components, **spec.tiny.pipeline_kwargs)


# --------------------------------------------------------------------------- #
#                          writing folders atomically                         #
# --------------------------------------------------------------------------- #


def _quiet_libraries():
    """Saving prints a progress bar per shard: noise for a model of a few MB."""
    from diffusers.utils import logging as dlog
    from transformers.utils import logging as tlog
    dlog.disable_progress_bar()
    tlog.disable_progress_bar()


def _library_versions() -> dict[str, str]:
    import diffusers
    import transformers

    return {"diffusers": diffusers.__version__, "transformers": transformers.__version__}


def _read_marker(folder: pathlib.Path) -> dict | None:
    """The marker's content if ``folder`` holds a complete tiny model, else None."""
    if not (folder / "model_index.json").is_file():
        return None
    try:
        info = json.loads((folder / MARKER_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return info if isinstance(info, dict) else {}


def _wanted_marker(arch: str, seed: int, shared_seed: int) -> dict:
    return {
        "arch": arch,
        "seed": int(seed),
        "shared_seed": int(shared_seed),
        "recipe": RECIPE_VERSION,
        "sources": _recipe_digest(arch),
        **_library_versions(),
    }


def _recipe_digest(arch: str) -> str:
    """A digest of the files that define the recipe (the arch's file, the kit): editing them rebuilds."""
    import hashlib
    import importlib

    here = pathlib.Path(__file__).parent
    files = [here / "kit.py", here / "tokenizers.py", pathlib.Path(importlib.import_module(
        _spec(arch).tiny.build.__module__).__file__)]
    h = hashlib.sha256()
    for f in files:
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


def _is_current(folder: pathlib.Path, wanted: dict) -> bool:
    info = _read_marker(folder)
    return info is not None and all(info.get(k) == v for k, v in wanted.items())


def _remove(path: pathlib.Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def _is_empty_dir(path: pathlib.Path) -> bool:
    return path.is_dir() and not path.is_symlink() and not any(path.iterdir())


def _install(tmp: pathlib.Path, folder: pathlib.Path, keep_existing: Callable[[pathlib.Path], bool]) -> bool:
    """Rename ``tmp`` to ``folder``.  Returns False when an existing folder is kept instead.

    rename(2) replaces an empty directory but fails on a non-empty one, so a
    folder that appeared meanwhile (another process) is never half-overwritten:
    ``keep_existing(folder)`` decides whether to keep it (ours is discarded) or
    to move it aside and retry.
    """
    for _ in range(20):
        try:
            os.rename(tmp, folder)
            return True
        except OSError:
            if not os.path.lexists(folder):
                continue  # it vanished meanwhile: retry
            if keep_existing(folder):
                return False
            aside = folder.with_name(f".{folder.name}.old-{uuid.uuid4().hex[:12]}")
            try:
                os.rename(folder, aside)
            except FileNotFoundError:
                continue
            _remove(aside)
    raise RuntimeError(f"could not move {tmp} into place at {folder}")


def _write_model(
    arch: str,
    folder: str | os.PathLike,
    *,
    seed: int,
    shared_seed: int,
    overwrite: bool,
) -> pathlib.Path:
    _spec(arch)
    folder = pathlib.Path(folder).expanduser().absolute()
    wanted = _wanted_marker(arch, seed, shared_seed)

    if not overwrite and os.path.lexists(folder):
        if _is_current(folder, wanted):
            return folder
        # Anything that is neither empty nor one of our own tiny models (marker
        # present) is somebody else's data: refuse rather than delete it.
        if _read_marker(folder) is None and not _is_empty_dir(folder):
            raise FileExistsError(
                f"{folder} exists and is not a tiny model written by toolkit.models.tiny; "
                "pass overwrite=True to replace it"
            )

    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = pathlib.Path(tempfile.mkdtemp(prefix=f".{folder.name}.tmp-", dir=folder.parent))
    try:
        os.chmod(tmp, 0o755)
        with _BUILD_LOCK:
            pipe = build_pipeline(arch, seed, shared_seed)
            pipe.save_pretrained(tmp, safe_serialization=True)
            del pipe
            finish = _spec(arch).tiny.finish
            if finish:
                from toolkit.models.arch import load_object
                load_object(finish)(str(tmp))
        # Some writers create files 0600 (temp-file-then-rename); make the folder
        # readable like any model folder (e.g. a cache shared between users).
        for path in tmp.rglob("*"):
            os.chmod(path, 0o755 if path.is_dir() else 0o644)
        # Last file written: its presence means the folder is complete.
        (tmp / MARKER_NAME).write_text(json.dumps(wanted, indent=2, sort_keys=True) + "\n", encoding="utf-8")

        def keep_existing(existing: pathlib.Path) -> bool:
            if overwrite:
                return False  # replace whatever is there
            if _is_current(existing, wanted):
                return True  # someone else finished the same model meanwhile: keep theirs
            if _read_marker(existing) is None and not _is_empty_dir(existing):
                raise FileExistsError(f"{existing} appeared meanwhile and is not a tiny model; not replacing it")
            return False

        _install(tmp, folder, keep_existing)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return folder


def make_tiny(arch: str, folder: str | os.PathLike, seed: int = 0, *, overwrite: bool = False) -> pathlib.Path:
    """Write a tiny random-weight pipeline of ``arch`` into ``folder``; return the folder.

    Deterministic: the same ``(arch, seed)`` gives byte-identical safetensors.
    If ``folder`` already holds the complete model (``model_index.json`` plus the
    ``.tiny_complete`` marker, written by this recipe for this arch and seed) and
    ``overwrite`` is false, it is returned at once.  A folder holding a
    *different* tiny model (other arch/seed/recipe/library version) is replaced.
    The model is built in a temporary sibling folder and renamed into place, so a
    crash never leaves a half-written folder that looks complete.
    """
    return _write_model(arch, folder, seed=seed, shared_seed=seed, overwrite=overwrite)


def make_shared_pair(
    arch: str,
    folder_a: str | os.PathLike,
    folder_b: str | os.PathLike,
    seed_a: int = 0,
    seed_b: int = 1,
    *,
    arch_b: str | None = None,
    share: dict | None = None,
) -> tuple[pathlib.Path, pathlib.Path]:
    """Two tiny models whose shared components are the same files (hard links), as two real
    models that use one text encoder or VAE are once downloaded.

    Model ``a`` is exactly ``make_tiny(arch, folder_a, seed_a)``. Model ``b`` (``arch_b``, default
    ``arch``) builds its own components (the denoiser side, see ``own_roles``) from ``seed_b`` and
    the rest from ``seed_a``. ``share`` maps a's roles to b's ({"text_encoder_2": "text_encoder"}
    for Flux -> Chroma); by default every role in ``shared_roles(arch)``. A shared component must
    come out byte-identical (the archs build it from the same recipe), else this raises.
    """
    arch_b = arch_b or arch
    if arch_b == arch and int(seed_a) == int(seed_b):
        raise ValueError("make_shared_pair needs two different seeds")
    share = dict(share) if share is not None else {r: r for r in shared_roles(arch)}
    if arch_b != arch and not share:
        raise ValueError("a pair of two archs needs `share`: the roles they have in common")
    a = _write_model(arch, folder_a, seed=seed_a, shared_seed=seed_a, overwrite=False)
    b = _write_model(arch_b, folder_b, seed=seed_b, shared_seed=seed_a, overwrite=False)
    _link_shared(a, b, share)
    return a, b


def _link_shared(a: pathlib.Path, b: pathlib.Path, share: dict) -> None:
    """Make b's shared component files hard links of a's (same files, as when two model folders
    point at one text encoder), falling back to symlinks across filesystems."""
    for role_a, role_b in share.items():
        src_dir, dst_dir = a / role_a, b / role_b
        if not src_dir.is_dir() or not dst_dir.is_dir():
            raise RuntimeError(f"shared component missing: {a.name}/{role_a} or {b.name}/{role_b}")
        for src in sorted(src_dir.iterdir()):
            dst = dst_dir / src.name
            if not src.is_file() or (dst.is_file() and os.path.samefile(src, dst)):
                continue
            if not dst.is_file() or src.read_bytes() != dst.read_bytes():
                raise RuntimeError(f"shared component file differs between the pair: {role_a}/{src.name} "
                                   f"vs {role_b}/{src.name}")
            tmp = dst.with_name(dst.name + ".link")
            try:
                os.link(src, tmp)
            except OSError:
                os.symlink(os.path.abspath(src), tmp)
            os.replace(tmp, dst)


def default_cache_root() -> pathlib.Path:
    root = os.environ.get("AITK_TINY_CACHE") or os.path.join("~", ".cache", "aitk", "tiny_models")
    return pathlib.Path(root).expanduser()


def cached_tiny(arch: str, seed: int = 0, root: str | os.PathLike | None = None) -> pathlib.Path:
    """``make_tiny`` into ``<root>/<arch>-seed<seed>`` (built once, then reused).

    ``root`` defaults to ``$AITK_TINY_CACHE`` or ``~/.cache/aitk/tiny_models``.
    Safe under concurrent callers: each builds in its own temp folder and the
    first rename wins; later ones discard their copy.  A cached folder written
    by another recipe or library version is rebuilt.
    """
    _spec(arch)
    base = pathlib.Path(root).expanduser() if root is not None else default_cache_root()
    return make_tiny(arch, base / f"{arch}-seed{int(seed)}", seed=seed)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m toolkit.models.tiny",
                                     description="Write tiny random-weight models (offline), as `tiny:<arch>` uses.")
    which = parser.add_mutually_exclusive_group(required=True)
    archs = tiny_archs()
    which.add_argument("--arch", choices=archs, help="write one model into --out")
    which.add_argument("--all", action="store_true", help="write every arch into --out/<arch>")
    which.add_argument("--pair", choices=archs, metavar="ARCH", help="write a shared pair into --out/a and --out/b")
    parser.add_argument("--out", required=True, help="output folder")
    parser.add_argument("--seed", type=int, default=0, help="seed (for --pair: seed of a; b uses seed+1)")
    parser.add_argument("--overwrite", action="store_true", help="rebuild even if a complete model is there")
    args = parser.parse_args(argv)

    out = pathlib.Path(args.out)
    if args.arch:
        written = [make_tiny(args.arch, out, args.seed, overwrite=args.overwrite)]
    elif args.all:
        written = [make_tiny(arch, out / arch, args.seed, overwrite=args.overwrite) for arch in archs]
    else:
        if args.overwrite:
            for sub in ("a", "b"):
                if _read_marker(out / sub) is not None:
                    _remove(out / sub)
        written = list(make_shared_pair(args.pair, out / "a", out / "b", args.seed, args.seed + 1))
    for path in written:
        print(path)
    return 0

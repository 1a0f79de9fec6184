"""Which control model a file or folder is, from its header or config.json alone (no torch): what a
request's `sample.controls[i].model` is checked with before it is queued, and what the worker loads.

    find(value, folders) -> the path `value` names: a path, or a file/folder name found in the model
                            folders' controlnet directories (A1111 `models/ControlNet`, ComfyUI `models/controlnet`)
    identify(path) -> [Found]: every (arch, Control row) the model fits, with how it is read
    check(ref, spec, folders, where) -> Found of `spec`'s rows, else a ConfigError naming `where`.model

A diffusers folder says its class (config.json `_class_name`); the row's `fits` tells whose denoiser
takes its config. A single file is matched against the rows' `files` (SingleFile: anchors under a
prefix, the config derived from the shapes), then `fits`.
"""
import json
import os
from dataclasses import dataclass

from toolkit import model_trees
from toolkit.errors import ConfigError
from toolkit.models.arch import load_object


@dataclass(frozen=True)
class Found:
    arch: str
    control: object                # the arch's Control row
    path: str
    config: dict
    single_file: object = None     # the SingleFile row a file was read by (None: a diffusers folder)
    prefix: str | None = None      # the file's key prefix (None: a folder)


def control_dirs(folders) -> list:
    """The controlnet directories of `folders`' trees (a plain folder: none)."""
    return model_trees.kind_dirs(folders, model_trees.CONTROLNET)


def find(value: str, folders=(), where: str = "sample.controls[0].model") -> str:
    """The path `value` names: a path (absolute, or with a folder in it), else a name (with or without its
    extension) under the model folders' controlnet directories, or under their models/ folder as GET /library
    names it (`controlnet/canny.safetensors`)."""
    path = os.path.expanduser(value)
    named = not os.path.isabs(path) and os.sep not in value
    if not named and os.path.exists(path):
        return os.path.abspath(path)
    for folder in control_dirs(folders):
        name = value.replace(os.sep, "/")
        head = os.path.basename(folder) + "/"
        if name.lower().startswith(head.lower()):       # GET /library's name: under the tree's models/ folder
            name = name[len(head):]
        for candidate in (name, name + ".safetensors"):
            full = os.path.join(folder, candidate)
            if os.path.exists(full) and os.path.realpath(full).startswith(os.path.realpath(folder) + os.sep):
                return full
    raise ConfigError(where, f"no control model {value!r} (a path, or a name in the model folders' "
                      "controlnet directories)")


def listing(folders) -> list:
    """[{name, path}] of the files and diffusers folders in the controlnet directories (names as `find`
    takes them), sorted."""
    out = []
    for folder in control_dirs(folders):
        for root, dirs, files in os.walk(folder):
            if os.path.isfile(os.path.join(root, "config.json")) and root != folder:
                out.append({"name": os.path.relpath(root, folder), "path": root})
                dirs[:] = []
                continue
            out += [{"name": os.path.relpath(os.path.join(root, f), folder), "path": os.path.join(root, f)}
                    for f in files if f.endswith(".safetensors")]
    return sorted(out, key=lambda e: e["name"])


def _rows():
    from toolkit.models.registry import ARCHS
    return [(name, c) for name, spec in ARCHS.items() for c in spec.controls]


def identify(path: str) -> list:
    """Every (arch, Control row) whose denoiser takes the model at `path`: [Found] (empty: none)."""
    if os.path.isdir(path):
        config = _folder_config(path)
        cls = config.get("_class_name")
        return [Found(arch, c, path, config) for arch, c in _rows()
                if c.cls == cls and load_object(c.fits)(config)]
    from toolkit.models.formats.file_view import FileKindError, derive
    from toolkit.models.formats.safetensors_header import HeaderError, check_file
    try:
        header = check_file(path)
    except HeaderError as e:
        raise ValueError(e.named()) from None
    out = []
    for arch, c in _rows():
        for sf in c.files:
            for prefix in sf.prefixes:
                if not all(prefix + a in header.tensors for a in sf.anchors):
                    continue
                try:
                    config = derive(header, sf, prefix).config
                except FileKindError:
                    continue
                if load_object(c.fits)(config):
                    out.append(Found(arch, c, path, config, sf, prefix))
                break
    return out


def _unread(path: str) -> str | None:
    if os.path.isdir(path):
        return None
    from toolkit.models.formats.dit_controlnet import unread
    from toolkit.models.formats.safetensors_header import check_file
    return unread(check_file(path).tensors)


def _folder_config(path: str) -> dict:
    try:
        with open(os.path.join(path, "config.json")) as f:
            config = json.load(f)
    except (OSError, ValueError) as e:
        raise ValueError(f"{os.path.basename(path)}: no readable config.json ({type(e).__name__})") from None
    if not isinstance(config, dict):
        raise ValueError(f"{os.path.basename(path)}: config.json is not a mapping")
    return config


def check(ref, spec, where: str, folders=()) -> Found:
    """`ref.model` (a ControlRef's) resolved and checked against arch `spec`: one of its Control rows
    takes it, its mode is one the row has; else a ConfigError naming `where`.model or .mode."""
    if not spec.controls:
        raise ConfigError(where, f"arch {spec.name} takes no control models")
    path = find(ref.model, folders, f"{where}.model")
    try:
        found = identify(path)
    except ValueError as e:
        raise ConfigError(f"{where}.model", str(e)) from None
    mine = [f for f in found if f.arch == spec.name]
    if not mine:
        others = sorted({f"{f.control.label} ({f.arch})" for f in found})
        what = f"is a {', '.join(others)}" if others else f"is {_unread(path) or 'no control model any arch here takes'}"
        raise ConfigError(f"{where}.model", f"{os.path.basename(path)} {what}; arch {spec.name} takes "
                          + ", ".join(c.label for c in spec.controls))
    hit = mine[0]
    return Found(hit.arch, hit.control, path, hit.config, hit.single_file, hit.prefix)


def mode_index(ref, control, where: str):
    """A union model's control type as its index (None for a row without modes)."""
    if not control.modes:
        if ref.mode is not None:
            raise ConfigError(f"{where}.mode", f"a {control.label} has no control types")
        return None
    if ref.mode is None:
        raise ConfigError(f"{where}.mode", f"a {control.label} needs one of: {', '.join(control.modes)}")
    if isinstance(ref.mode, int):
        if 0 <= ref.mode < len(control.modes):
            return ref.mode
    elif ref.mode in control.modes:
        return control.modes.index(ref.mode)
    raise ConfigError(f"{where}.mode", f"unknown control type {ref.mode!r} (known: {', '.join(control.modes)})")


def check_all(gen, spec, folders=(), where: str = "sample.controls") -> tuple:
    """A request's controls checked against arch `spec` and its task (one Control row for all of them: a
    pipeline runs one class), each `model` resolved to its path and `mode` to its index. Returns the refs."""
    from dataclasses import replace

    out, row = [], None
    for i, ref in enumerate(gen.controls):
        at = f"{where}[{i}]"
        found = check(ref, spec, at, folders)
        if found.control.pipeline_for(gen.task) is None:
            raise ConfigError(f"{at}.model", f"a {found.control.label} has no {gen.task} pipeline on arch {spec.name} "
                              f"(its tasks: {', '.join(found.control.pipelines)})")
        if row is not None and found.control is not row:
            raise ConfigError(f"{at}.model", f"a {found.control.label} cannot run beside a {row.label} in one request")
        row = found.control
        if i and not row.several:
            raise ConfigError(f"{at}.model", f"a {row.label}'s pipeline runs one control model at a time")
        if not row.ranges and (ref.start, ref.end) != (0.0, 1.0):
            raise ConfigError(f"{at}.start" if ref.start else f"{at}.end",
                              f"a {row.label}'s pipeline runs it over every step (start 0, end 1)")
        out.append(replace(ref, model=found.path, mode=mode_index(ref, found.control, at)))
    return tuple(out)

"""The model library: every model on this machine, described without loading it (no torch, no
tensor data: model_index.json files, safetensors headers and file sizes), so the engine's HTTP
process can list them (GET /library) and a client can offer them before a request fails.

    scan(folders=(), profiles=None, hub_cache=None) -> {"entries": [Entry…], "archs": [ArchPresence…]}

Where models are looked for:
- the local hub cache (HF_HUB_CACHE / HF_HOME; `hub_cache` overrides): each `models--owner--name`
  repo with a snapshot (refs/main, else the newest);
- `folders` (engine.model_folders): a ComfyUI `models/` tree (checkpoints/, diffusion_models/, unet/,
  text_encoders/, clip/, vae/, loras/), an A1111/Forge `models/` tree (Stable-diffusion/, Lora/,
  LyCORIS/, VAE/, text_encoder/), either given as its `models/` folder or the install above it
  (toolkit/model_trees.py), or plain folders of diffusers folders and single files;
- the engine's profiles (toolkit/profiles.py);
- the model the engine holds loaded, and the tiny models (`tiny:<arch>`): toolkit/library_builtin.py.

An Entry: {name, source: loaded|tiny|hub|folder|profile, path (folder/file; null for a profile), repo (hub only),
kind: pipeline|checkpoint (all-in-one)|single_file (a denoiser alone)|component|lora|vae_approx|upscaler, tree (a folder's:
comfyui|a1111|plain), arch (null when not detected), variant, role (a single file's component role),
format (e.g. "bf16 diffusers", "comfy_scaled_fp8"), dtype, bytes (on disk, each file once), complete,
missing (what makes it incomplete), model (the `model` dict a POST /generate takes for it; null when it
cannot be loaded on its own: a component, a LoRA, a file whose arch is unknown or whose sibling
components are missing)}. A checkpoint or denoiser file also has `parts` (the components in it, each
with the known config it is), `companions` (role -> the file, or tokenizer, it will use from the trees)
and `missing_roles`; a component file has `component_kind`, `label` and `fits` ([{arch, role}]: what
it can be). toolkit/library_files.py says how a file is completed.

Arch detection: a diffusers folder's model_index.json `_class_name` against the registry's pipeline
classes (the repo id, then the component set, settles a class several archs share); a single file by
its safetensors header (formats/detect.py, fed by the arch rows; Krea 2's older layout table too).

ArchPresence, per arch with a public repo (per distinct variant repo): {arch, variant, repo,
default_present (toolkit/local_weights.weights_here), download: "hf download REPO" when absent}.
"""
import json
import os

from toolkit import companions, library_files, model_trees

MAX_DEPTH = 4                      # how deep a plain folder is walked for models
_DTYPES = library_files.DTYPES


# -- registry lookups --------------------------------------------------------------------------------
def _pipeline_archs() -> dict:
    """diffusers pipeline class -> [arch…] (every task's pipeline of every arch)."""
    from toolkit.models.registry import ARCHS
    out: dict = {}
    for name in ARCHS:
        for task in ARCHS[name].tasks:
            out.setdefault(task.pipeline, [])
            if name not in out[task.pipeline]:
                out[task.pipeline].append(name)
    return out


def _arch_of_index(index: dict, repo: str | None, folder: str | None = None) -> tuple:
    """(arch, variant) for a model_index.json, or (None, None). Rows of one pipeline and one set of roles
    (FLUX.1 and Flex.1) are told apart by the folder's denoiser config, where it is one of a row's known
    configs; else the first in registry order."""
    from toolkit.models.registry import ARCHS
    candidates = _pipeline_archs().get(index.get("_class_name"), [])
    if not candidates:
        return None, None
    if repo:
        for name in candidates:
            spec = ARCHS[name]
            for variant in (list(spec.variants) or [None]):
                if spec.default_source(variant) == repo:
                    return name, variant
    present = {k for k, v in index.items() if not k.startswith("_") and isinstance(v, list) and v and v[0]}
    exact = [n for n in candidates if {c.role for c in ARCHS[n].components if not c.optional} == present]
    tied = exact or candidates
    name = next((n for n in tied if len(tied) > 1 and folder and _denoiser_is_known(folder, ARCHS[n])), tied[0])
    return name, ARCHS[name].default_variant


def _denoiser_is_known(folder: str, spec) -> bool:
    from toolkit.models.formats.dit_configs import known_configs, matches_known
    comp = spec.component(spec.denoiser_roles[0])
    try:
        with open(os.path.join(folder, comp.folder, "config.json"), encoding="utf-8") as f:
            config = json.load(f)
    except (OSError, ValueError):
        return False
    return isinstance(config, dict) and matches_known(config, known_configs(comp.single_file))


# -- files -------------------------------------------------------------------------------------------
def _bytes(path: str) -> int:
    """Bytes on disk under `path` (symlinks followed, each real file once)."""
    if os.path.isfile(path):
        return os.path.getsize(path)
    seen, total, walked = set(), 0, set()
    for root, dirs, files in os.walk(path, followlinks=True):
        real_root = os.path.realpath(root)
        if real_root in walked:         # a folder link back up the tree: walked once, not forever
            dirs[:] = []
            continue
        walked.add(real_root)
        for f in files:
            real = os.path.realpath(os.path.join(root, f))
            if real in seen:
                continue
            seen.add(real)
            try:
                total += os.path.getsize(real)
            except OSError:
                pass            # a broken link: counted as missing by the completeness check
    return total


def _read_index(folder: str) -> dict | None:
    try:
        with open(os.path.join(folder, "model_index.json"), encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _weights_dtype(folder: str) -> str | None:
    """The most common float dtype of the safetensors files in `folder` (headers only)."""
    from toolkit.models.formats.safetensors_header import HeaderError, dtype_counts, read_header
    counts: dict = {}
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return None
    for n in names:
        if n.endswith(".safetensors"):
            try:
                for d, c in dtype_counts(read_header(os.path.join(folder, n))).items():
                    counts[d] = counts.get(d, 0) + c
            except (HeaderError, OSError):
                continue
    floats = {d: c for d, c in counts.items() if d in _DTYPES}
    return _DTYPES[max(floats, key=floats.get)] if floats else None


def _missing_components(folder: str, index: dict) -> list:
    """The components model_index.json names that the folder lacks (or whose files are broken links)."""
    missing = []
    for key, value in index.items():
        if key.startswith("_") or not (isinstance(value, list) and value and value[0]):
            continue
        sub = os.path.join(folder, key)
        if not os.path.isdir(sub) or not os.listdir(sub):
            missing.append(key)
            continue
        if any(not os.path.exists(os.path.join(sub, f)) for f in os.listdir(sub)):
            missing.append(key)          # a snapshot link to a blob that is not there
    return missing


def _pipeline_entry(folder: str, index: dict, *, source: str, name: str, repo: str | None = None) -> dict:
    from toolkit.models.registry import ARCHS
    arch, variant = _arch_of_index(index, repo, folder)
    missing = _missing_components(folder, index)
    dtype = None
    if arch:
        denoiser = next((c.folder for c in ARCHS[arch].components if c.role in ARCHS[arch].denoiser_roles), None)
        dtype = _weights_dtype(os.path.join(folder, denoiser)) if denoiser else None
    entry = {"name": name, "source": source, "path": os.path.abspath(folder), "repo": repo, "kind": "pipeline",
             "arch": arch, "variant": variant, "role": None, "pipeline_class": index.get("_class_name"),
             "dtype": dtype, "format": f"{dtype} diffusers" if dtype else "diffusers", "bytes": _bytes(folder),
             "complete": not missing, "missing": missing, "model": None}
    if arch:
        model = {"arch": arch, "name_or_path": repo or os.path.abspath(folder)}
        if variant and ARCHS[arch].variants:
            model["variant"] = variant
        entry["model"] = model
    return entry


# -- hub cache ---------------------------------------------------------------------------------------
def _snapshot(repo_dir: str) -> str | None:
    snaps = os.path.join(repo_dir, "snapshots")
    try:
        with open(os.path.join(repo_dir, "refs", "main"), encoding="utf-8") as f:
            rev = f.read().strip()
        if rev and os.path.isdir(os.path.join(snaps, rev)):
            return os.path.join(snaps, rev)
    except OSError:
        pass
    try:
        revs = [os.path.join(snaps, r) for r in os.listdir(snaps)]
    except OSError:
        return None
    revs = [r for r in revs if os.path.isdir(r)]
    return max(revs, key=os.path.getmtime) if revs else None


WEIGHT_EXTS = (".safetensors", ".bin", ".gguf", ".pt", ".pth", ".ckpt")


def _weightless_components(repo_dir: str, snap: str, index: dict | None) -> list:
    """The components of `index` whose folder holds none of the weight files the snapshot's tree listing
    (`trees/<commit>.json`, written by snapshot_download) names for it: a download cut short between
    files. Files left out on purpose (an allow pattern taking the .safetensors, not the .bin) leave some
    weights, so they do not count. [] without a listing."""
    try:
        with open(os.path.join(repo_dir, "trees", os.path.basename(snap) + ".json"), encoding="utf-8") as f:
            files = json.load(f).get("files") or {}
    except (OSError, ValueError, AttributeError):
        return []
    out = []
    for key, value in (index or {}).items():
        if key.startswith("_") or not (isinstance(value, list) and value and value[0]):
            continue
        listed = [f for f in files if f.startswith(key + "/") and f.endswith(WEIGHT_EXTS)]
        if listed and not any(os.path.exists(os.path.join(snap, *f.split("/"))) for f in listed):
            out.append(key)
    return out


def scan_hub(cache: str) -> list:
    out = []
    try:
        names = sorted(os.listdir(cache))
    except OSError:
        return out
    for d in names:
        if not d.startswith("models--"):
            continue
        repo = d[len("models--"):].replace("--", "/")
        repo_dir = os.path.join(cache, d)
        snap = _snapshot(repo_dir)
        if snap is None:
            continue
        blobs = os.path.join(repo_dir, "blobs")
        partial = sorted(f for f in os.listdir(blobs) if f.endswith(".incomplete")) if os.path.isdir(blobs) else []
        index = _read_index(snap)
        if index is not None:
            e = _pipeline_entry(snap, index, source="hub", name=repo, repo=repo)
        else:
            e = {"name": repo, "source": "hub", "path": os.path.abspath(snap), "repo": repo, "kind": "component",
                 "arch": None, "variant": None, "role": None, "dtype": _weights_dtype(snap), "format": None,
                 "bytes": _bytes(snap), "complete": True, "missing": [], "model": None}
        if partial:
            e["complete"] = False
            e["missing"] = e["missing"] + [f"{len(partial)} unfinished download(s) (.incomplete blobs)"]
            e["bytes"] += sum(os.path.getsize(os.path.join(blobs, f)) for f in partial)
        absent = [c for c in _weightless_components(repo_dir, snap, index) if c not in e["missing"]]
        if absent:
            e.update(complete=False, model=None)
            e["missing"] = e["missing"] + [f"{c}: its weights are not downloaded yet" for c in absent]
        out.append(e)
    return out


# -- folders -----------------------------------------------------------------------------------------
def _gguf_entry(path: str, root: str) -> dict:
    """A GGUF denoiser (toolkit/models/formats/gguf_header.py): arch from its tensor layout, format
    "GGUF Q4_K". Shapes of a known config: its text encoders and VAE are the folders' companion files
    (library_files.complete); else they and its config come from a diffusers folder or repo of the arch
    (`extras_name_or_path`), attached by _attach_extras."""
    from toolkit.models.formats.gguf_header import inspect_gguf
    from toolkit.models.registry import ARCHS
    r = inspect_gguf(path)
    arch = r.get("arch")
    entry = {"name": os.path.relpath(path, root).replace(os.sep, "/"), "source": "folder",
             "path": os.path.abspath(path), "repo": None, "kind": "single_file", "arch": arch,
             "variant": ARCHS[arch].default_variant if arch else None,
             "role": ARCHS[arch].denoiser_roles[0] if arch else None, "dtype": None, "format": r.get("format"),
             "summary": r.get("summary"), "bytes": _bytes(path), "complete": not r.get("error") and bool(arch),
             "missing": [r["error"]] if r.get("error") else ([] if arch else [r.get("summary")]), "model": None}
    entry["_extras"] = entry["complete"]
    part = _gguf_part(path, arch) if entry["complete"] else None
    if part is not None:         # its config from its shapes: completed by companions, as a .safetensors denoiser
        entry.update(parts={entry["role"]: part}, _detected=True)
    return entry


def _gguf_part(path: str, arch: str) -> dict | None:
    """The GGUF denoiser as a part the load reads with the config its shapes give (the arch row's rule
    over the GGUF header: file_sources.py does the same), else None (a config folder gives it)."""
    from toolkit.models.arch import load_object
    from toolkit.models.formats.file_view import FileKindError
    from toolkit.models.formats.gguf_header import GGUFHeaderError, header_view
    from toolkit.models.registry import ARCHS
    sf = ARCHS[arch].component(ARCHS[arch].denoiser_roles[0]).single_file
    if sf is None or not sf.config:
        return None
    try:
        fc = load_object(sf.config)(header_view(path))
    except (FileKindError, GGUFHeaderError):
        return None
    return {"kind": sf.kind, "label": sf.label, "known": fc.known, "error": None}


def _attach_extras(entries: list):
    """A GGUF denoiser the folders' companion files do not complete loads with a diffusers folder or
    repo of its arch for everything else: the first complete one listed, else the arch's default repo
    when it is here; without one, no `model`."""
    from toolkit.local_weights import weights_here
    from toolkit.models.registry import ARCHS
    for e in entries:
        if not e.pop("_extras", False) or e["model"] is not None:
            continue                  # unreadable, or completed by the folders' companion files
        spec = ARCHS[e["arch"]]
        local = next((o for o in entries if o["kind"] == "pipeline" and o["arch"] == e["arch"] and o["complete"]), None)
        extras = (local["repo"] or local["path"]) if local else \
            spec.default_source(e["variant"]) if weights_here(spec, e["variant"]) else None
        if extras is None:
            if "parts" not in e:      # (else the companions' missing roles say it)
                e["missing"] = [f"no diffusers folder or repo of {e['arch']} here for its text encoders and VAE "
                                f"(extras_name_or_path, e.g. {spec.default_source(e['variant'])})"]
            continue
        e.update(complete=True, missing=[], missing_roles=[], model={"arch": e["arch"], "name_or_path": e["path"],
                                                                      "extras_name_or_path": extras})


def _tokenizer_entry(path: str, root: str) -> dict:
    from toolkit.file_report import inspect_tokenizer
    report = inspect_tokenizer(path)
    return {"name": os.path.relpath(path, root).replace(os.sep, "/"), "source": "folder",
            "path": os.path.abspath(path), "repo": None, "kind": "component", "arch": None, "variant": None,
            "role": "tokenizer", "dtype": None, "format": "tokenizer", "bytes": _bytes(path),
            "complete": bool(report.get("complete")), "missing": report.get("missing", []), "model": None}


def _lora_entry(path: str, root: str) -> dict:
    from toolkit import lora_headers
    from toolkit.models.formats.safetensors_header import HeaderError
    entry = {"name": os.path.relpath(path, root).replace(os.sep, "/"), "source": "folder",
             "path": os.path.abspath(path), "repo": None, "kind": "lora", "arch": None, "variant": None,
             "role": None, "dtype": None, "format": None, "bytes": _bytes(path), "complete": True, "missing": [],
             "model": None}
    try:
        d = lora_headers.describe(path)
        entry.update(arch=d["arch"], format=d["format"])
    except (HeaderError, OSError) as e:
        entry.update(complete=False, missing=[str(e)])
    return entry


def _ip_adapter_entry(path: str, root: str, kind: str) -> dict:
    """An IP-Adapter (kind ip_adapter: its layout and context width from its header; `arch`: the archs whose
    row takes it) or an image encoder (kind clip_vision: its projection width) in a tree's folder for them."""
    from toolkit import ip_adapter_files
    from toolkit.models.registry import ARCHS
    entry = {"name": os.path.relpath(path, root).replace(os.sep, "/"), "source": "folder",
             "path": os.path.abspath(path), "repo": None, "kind": kind, "arch": None, "variant": None,
             "role": None, "dtype": None, "format": None, "bytes": _bytes(path), "complete": True, "missing": [],
             "model": None}
    try:
        if kind == model_trees.IP_ADAPTER:
            d = ip_adapter_files.describe(path)
            archs = [a for a, s in sorted(ARCHS.items()) if s.ip_adapter and ip_adapter_files.fits(d, s.ip_adapter)]
            entry.update(arch=archs[0] if archs else None, format=f"{d['layout']} ({d['embed'][0]} {d['embed'][1]})")
        else:
            width = ip_adapter_files.encoder_width(path, "image_embeds")
            if width is None:
                raise ValueError("not a CLIP vision model")
            entry.update(format=f"CLIP vision (projection {width})")
    except Exception as e:      # noqa: BLE001 - listed as incomplete, with why
        entry.update(complete=False, missing=[str(e)])
    return entry


def _walk(folder: str, root: str, tree, kind_hint: str | None, depth: int = 0, seen=None):
    """Entries under a folder of `tree` (model_trees.Tree: a ComfyUI or A1111 tree's top sub-folders say
    the kind): diffusers folders (not descended), tokenizer folders, .safetensors and .gguf files. An entry
    whose real path leaves `root` (a link out of the model folder) is skipped, as a request naming it is
    refused (engine.model_roots); a folder reached twice (a link loop) is walked once."""
    from toolkit.file_report import TOKENIZER_FILES
    top = os.path.realpath(root)
    seen = set() if seen is None else seen
    real = os.path.realpath(folder)
    if real in seen:
        return
    seen.add(real)
    try:
        names = sorted(n for n in os.listdir(folder) if not n.startswith("."))
    except OSError:
        return
    for n in names:
        p = os.path.join(folder, n)
        if not os.path.realpath(p).startswith(top + os.sep):
            continue
        if os.path.isdir(p):
            index = _read_index(p)
            if index is not None:
                yield _pipeline_entry(p, index, source="folder", name=os.path.relpath(p, root).replace(os.sep, "/"))
            elif set(os.listdir(p)) & set(TOKENIZER_FILES + ("tokenizer.json",)):
                yield _tokenizer_entry(p, root)
            elif depth < MAX_DEPTH:
                sub = model_trees.hint(tree, n) if depth == 0 else kind_hint
                yield from _walk(p, root, tree, sub, depth + 1, seen=seen)
        elif kind_hint == model_trees.UPSCALER:
            if n.lower().endswith((".pth", ".pt", ".ckpt", ".safetensors")):
                yield library_files.upscaler_entry(p, root)
        elif kind_hint in (model_trees.IP_ADAPTER, model_trees.CLIP_VISION) and n.lower().endswith((".safetensors", ".bin")):
            yield _ip_adapter_entry(p, root, kind_hint)
        elif n.lower().endswith(".safetensors"):
            yield _lora_entry(p, root) if kind_hint == model_trees.LORA else library_files.file_entry(p, root, kind_hint)
        elif n.lower().endswith(".gguf"):
            yield _gguf_entry(p, root)


def scan_folder(folder: str) -> list:
    """A ComfyUI or A1111/Forge tree (its `models/` folder, or the install above it) or a plain folder."""
    folder = os.path.abspath(os.path.expanduser(folder))
    if not os.path.isdir(folder):
        return []
    tree = model_trees.tree_of(folder)
    entries = list(_walk(tree.models, tree.models, tree, None))
    for e in entries:
        e["tree"] = tree.kind
    return entries


# -- profiles ----------------------------------------------------------------------------------------
def scan_profiles(profiles) -> list:
    out = []
    for name, p in sorted((getattr(profiles, "profiles", None) or {}).items()):
        paths = [x for x in [p.checkpoint, *p.components.values()] if x]
        missing = [x for x in paths if not os.path.exists(x)]
        dtype, fmt = None, None
        denoiser = next((p.components[r] for r in ("transformer", "unet") if r in p.components), None)
        if denoiser and os.path.isfile(denoiser):
            from toolkit.file_report import inspect_file
            fmt = inspect_file(denoiser).get("format")
        elif p.checkpoint and os.path.isdir(p.checkpoint):
            from toolkit.models.registry import ARCHS
            sub = next((c.folder for c in ARCHS[p.architecture].components
                        if c.role in ARCHS[p.architecture].denoiser_roles), None)
            dtype = _weights_dtype(os.path.join(p.checkpoint, sub)) if sub else None
            fmt = f"{dtype} diffusers" if dtype else "diffusers"
        out.append({"name": name, "source": "profile", "path": None, "repo": None,
                    "kind": "pipeline" if p.checkpoint else "single_file", "arch": p.architecture,
                    "variant": p.variant, "role": None, "dtype": dtype, "format": fmt,
                    "bytes": sum(_bytes(x) for x in paths if os.path.exists(x)), "complete": not missing,
                    "missing": [f"no such file or folder: {x}" for x in missing],
                    "model": {"profile": name} if not missing else None})
    return out


# -- defaults ----------------------------------------------------------------------------------------
def arch_presence(hub_entries=()) -> list:
    """Per arch (per distinct variant repo): whether its default weights are here. A cached repo with
    unfinished downloads is not."""
    from toolkit.local_weights import weights_here
    from toolkit.models.registry import ARCHS
    out = []
    for name in sorted(ARCHS):
        spec = ARCHS[name]
        seen = set()
        for variant in (list(spec.variants) or [None]):
            repo = spec.default_source(variant)
            if not repo or repo in seen:
                continue
            seen.add(repo)
            present = weights_here(spec, variant) and not any(
                e["repo"] == repo and not e["complete"] for e in hub_entries)
            row = {"arch": name, "variant": variant, "repo": repo, "default_present": present}
            if not present:
                row["download"] = f"hf download {repo}"
            out.append(row)
    return out


def title(entry: dict) -> str:
    """What a client that picks models by name (A1111's sd_model_checkpoint, sd_vae) calls a folder
    entry: its path under its tree's sub-folder ("ponyXL.safetensors" for Stable-diffusion/ponyXL...)."""
    name = entry["name"]
    return name.split("/", 1)[1] if entry.get("tree") in ("comfyui", "a1111") and "/" in name else name


def scan(folders=(), profiles=None, hub_cache: str | None = None, loaded=None, tiny_root: str | None = None) -> dict:
    """`hub_cache=False`: the model folders (and profiles) alone, no hub cache, tiny models or default repos
    listed. `loaded`: the ModelConfig the engine holds, listed first (source "loaded")."""
    from toolkit import library_builtin
    if hub_cache is None:
        from huggingface_hub import constants
        hub_cache = constants.HF_HUB_CACHE
    entries = scan_hub(hub_cache) if hub_cache is not False else []
    archs = arch_presence(entries) if hub_cache is not False else []
    found = []
    for folder in folders or ():
        for e in scan_folder(folder):
            e["_root"] = folder
            found.append(e)
    library_files.attach_legacy(found)
    entries.extend(found)
    entries.extend(scan_profiles(profiles))
    library_files.complete(entries, companions.component_files(folders or ()))
    for e in found:
        e.pop("_root", None)
    _attach_extras(entries)
    # added after the completion: a tiny model's random weights never complete a real file
    builtin = [library_builtin.loaded_entry(loaded)] if loaded is not None else []
    if hub_cache is not False:
        builtin.extend(library_builtin.tiny_entries(tiny_root))
    return {"entries": builtin + entries, "archs": archs}

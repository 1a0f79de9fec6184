"""The files that complete a model named by one file: a ComfyUI denoiser's text encoders and VAE, a
checkpoint's missing VAE. Found in the model folders people have (toolkit/model_trees.py) by what
each file is (formats/detect.py: a component file's kind, and the (arch, role) pairs it fits), never
by a table per arch; names break ties the way ComfyUI's own file names read ("clip_l", "t5xxl",
"ae", "wan_2.1_vae"). Used by GET /library (what it lists) and by the load (file_sources.py: what a
request naming the denoiser alone takes), so the two agree. No torch: headers only.

    component_files(folders) -> [ComponentFile]       # every component file of the trees
    candidates(arch, role, files, near=None) -> [ComponentFile], best first
    tokenizer_source(vocab, near_paths) -> (folder | None, where) | None
    embedded_tokenizer(vocab, path) -> (path, where) | None    # a vocabulary the encoder file carries
"""
import os
import re
from dataclasses import dataclass

from toolkit import model_trees

MAX_DEPTH = 3


@dataclass(frozen=True)
class ComponentFile:
    path: str                  # absolute
    root: str                  # the tree's models/ folder it was found in
    name: str                  # relative to root ("text_encoders/clip_l.safetensors")
    kind: str                  # the layout's kind ("clip_l", "ldm_kl_vae")
    label: str
    fits: tuple                # ((arch, role), ...) the arch rows that take this kind

    def public(self) -> dict:
        return {"path": self.path, "name": self.name, "kind": self.kind, "label": self.label}


def _files(folder: str, top: str, depth: int = 0):
    try:
        names = sorted(n for n in os.listdir(folder) if not n.startswith("."))
    except OSError:
        return
    for n in names:
        p = os.path.join(folder, n)
        if not os.path.realpath(p).startswith(top + os.sep):
            continue            # a link out of the tree: a request naming it is refused too
        if os.path.isdir(p):
            if depth < MAX_DEPTH:
                yield from _files(p, top, depth + 1)
        elif n.lower().endswith((".safetensors", ".sft")):
            yield p


def describe(path: str, root: str):
    """A ComponentFile for `path` when its header is a component's layout (not a model), else None."""
    from toolkit.models.formats.detect import detect_file
    from toolkit.models.formats.safetensors_header import HeaderError
    try:
        det = detect_file(path)
    except (HeaderError, OSError):
        return None
    if det.arch is not None or not det.kinds:
        return None
    kind, label, _fits = det.kinds[0]
    fits = tuple(f for _k, _l, fs in det.kinds for f in fs)      # every kind's: one layout may be two kinds
    name = os.path.relpath(path, root).replace(os.sep, "/")
    return ComponentFile(os.path.abspath(path), root, name, kind, label, fits)


def component_files(folders) -> list:
    """Every component file in the component sub-folders (text_encoders/, clip/, vae/, VAE/,
    text_encoder/) of the trees at `folders`, each once."""
    out, seen = [], set()
    for folder in folders:
        tree = model_trees.tree_of(folder)
        top = os.path.realpath(tree.models)
        for sub in model_trees.component_dirs(tree.models):
            for path in _files(sub, top):
                real = os.path.realpath(path)
                if real in seen:
                    continue
                seen.add(real)
                cf = describe(path, tree.models)
                if cf is not None:
                    out.append(cf)
    return out


def _words(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def _rank(cf: ComponentFile, arch: str, near_root: str | None):
    from toolkit.models.registry import ARCHS
    stem = _words(os.path.basename(cf.name).rsplit(".", 1)[0])
    others = [a for a in ARCHS if a != arch and len(_words(a)) > 2 and _words(a) in stem and _words(a) not in _words(arch)]
    return (bool(others),                                   # named for another arch (sdxl_vae for sd1)
            _words(arch) not in stem,                       # named for this one (wan21 in wan_2.1_vae)
            not any(w in stem for w in [_words(cf.kind)] + [x for x in cf.kind.split("_") if len(x) > 2]),
            cf.root != near_root,                           # the denoiser's own tree first
            cf.name)


def candidates(arch: str, role: str, files, near: str | None = None) -> list:
    """The component files that fit `role` of `arch`, best first."""
    tree = model_trees.containing_tree(near) if near else None
    near_root = tree.models if tree else None
    fit = [cf for cf in files if (arch, role) in cf.fits]
    return sorted(fit, key=lambda cf: _rank(cf, arch, near_root))


def tokenizer_source(vocab: str, near_paths=()) -> tuple | None:
    """Where the load would find the `vocab` tokenizer offline (toolkit/tokenizers.py's order), without
    building anything: (folder, where), (None, where) when it is built from a pinned package on first
    use, None when it is nowhere."""
    from toolkit import tokenizers
    v = tokenizers.VOCABULARIES.get(vocab)
    if v is None:
        return None
    for near in [None, *near_paths]:
        for root in tokenizers.comfyui_roots(near):
            for rel in v.comfy:
                folder = os.path.join(root, rel)
                if tokenizers._is_tokenizer(folder):
                    return folder, f"ComfyUI {rel}"
    for repo, sub in v.hub:
        folder = tokenizers._hub_folder(repo, sub)
        if folder:
            return folder, f"hub cache {repo}"
    if v.build:
        folder = os.path.join(tokenizers.cache_root(), v.name)
        return (folder if tokenizers._is_tokenizer(folder) else None), "built offline from a pinned package"
    return None


def embedded_tokenizer(vocab: str, path: str) -> tuple | None:
    """(path, where) when the text encoder file at `path` carries the `vocab` tokenizer (ComfyUI's
    umt5_xxl files embed their SentencePiece model), by its header alone; else None."""
    from toolkit import tokenizers
    from toolkit.models.formats.safetensors_header import HeaderError, check_file
    v = tokenizers.VOCABULARIES.get(vocab)
    if v is None or not v.embedded:
        return None
    try:
        header = check_file(path)
    except (HeaderError, OSError):
        return None
    return (path, f"the {v.embedded} in {os.path.basename(path)}") if v.embedded in header.tensors else None

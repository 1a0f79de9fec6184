"""The models some control-map preprocessors run (toolkit/control_maps.py `Preprocessor.model`): where
their files are on this machine and how they load (through the funnel: each is a pool component).

    ANNOTATORS                              # key -> Annotator (data: its transformers classes, its hub repos)
    annotator_dirs(folders) -> [folder]     # torch-free: where annotator folders are looked for
    find(key, folders) -> folder | None     # torch-free: the first folder holding that model
    listing(folders) -> [{key, path, ...}]  # torch-free: every one found (GET /library's `annotators`)
    load(key, folders, device=, status=) -> (model, image_processor)     # in the worker

An annotator is a transformers folder as `save_pretrained` writes it and the hub holds it: config.json
(whose `architectures` names the model class), model.safetensors, preprocessor_config.json. Nothing is
downloaded. They are looked for, in engine.model_folders' order, in:
- a plain model folder's `annotators/` (any folder under it, two levels deep: `annotators/<name>/` or
  `annotators/<owner>/<name>/`);
- an A1111 / Forge install: `extensions/sd-webui-controlnet/annotator/downloads/` (and Forge's built-in
  `models/ControlNetPreprocessor/`), the same two levels deep;
- a ComfyUI install: `custom_nodes/comfyui_controlnet_aux/ckpts/` (it keeps hub repos as `<owner>/<name>/`);
- then the local hub cache, for the repos each row names (`hf download depth-anything/Depth-Anything-V2-Small-hf`).
The extensions' own original-format `.pth` files (depth_anything_vitl14.pth, dpt_hybrid-midas-501f0c75.pt) are
not read: their transformers conversions (the hub's `-hf` repos) are.
"""
import json
import os
from dataclasses import dataclass

from toolkit import model_trees

ROLE = "annotator"           # the pool role prefix: annotator.<key>
FOLDER_DEPTH = 2


@dataclass(frozen=True)
class Annotator:
    key: str
    model_class: str             # transformers class name (config.json's `architectures`)
    processor_class: str         # its image processor
    repos: tuple                 # hub repos holding it, looked up in the local cache only
    label: str = ""


ANNOTATORS = {a.key: a for a in (
    Annotator("depth_anything", "DepthAnythingForDepthEstimation", "DPTImageProcessor",
              ("depth-anything/Depth-Anything-V2-Small-hf", "depth-anything/Depth-Anything-V2-Base-hf",
               "depth-anything/Depth-Anything-V2-Large-hf", "LiheYoung/depth-anything-small-hf",
               "LiheYoung/depth-anything-base-hf", "LiheYoung/depth-anything-large-hf"), "Depth Anything (v1, v2)"),
    Annotator("dpt", "DPTForDepthEstimation", "DPTImageProcessor",
              ("Intel/dpt-hybrid-midas", "Intel/dpt-large"), "MiDaS / DPT depth"),
)}


def annotator_dirs(folders) -> list:
    """The folders annotator models are looked for in, for each of `folders` (engine.model_folders)."""
    out = []
    for folder in folders:
        tree = model_trees.tree_of(folder)
        root = (tree.install or os.path.dirname(tree.models)) if tree.kind != "plain" else tree.models
        candidates = {"plain": [os.path.join(tree.models, "annotators")],
                      "a1111": [os.path.join(root, "extensions", "sd-webui-controlnet", "annotator", "downloads"),
                                os.path.join(tree.models, "ControlNetPreprocessor")],
                      "comfyui": [os.path.join(root, "custom_nodes", "comfyui_controlnet_aux", "ckpts")]}[tree.kind]
        out += [c for c in candidates if os.path.isdir(c) and c not in out]
    return out


def model_class_of(folder: str) -> str | None:
    """The model class a transformers folder's config.json names, when the folder is complete (its
    image processor's config and a weights file beside it)."""
    try:
        with open(os.path.join(folder, "config.json"), encoding="utf-8") as f:
            archs = json.load(f).get("architectures") or []
    except (OSError, ValueError, AttributeError):
        return None
    if not os.path.isfile(os.path.join(folder, "preprocessor_config.json")):
        return None
    if not any(n.endswith(".safetensors") for n in os.listdir(folder)):
        return None
    return archs[0] if archs and isinstance(archs[0], str) else None


def _folders_under(root: str, depth: int = FOLDER_DEPTH):
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return
    for name in names:
        path = os.path.join(root, name)
        if os.path.isdir(path):
            yield path
            if depth > 1:
                yield from _folders_under(path, depth - 1)


def listing(folders, hub_cache: bool = True) -> list:
    """Every annotator folder found: {key, label, path, source: folder|hub, repo}, in lookup order."""
    by_class = {a.model_class: a for a in ANNOTATORS.values()}
    out = []
    for root in annotator_dirs(folders):
        for path in _folders_under(root):
            ann = by_class.get(model_class_of(path))
            if ann is not None:
                out.append({"key": ann.key, "label": ann.label, "path": os.path.abspath(path), "source": "folder",
                            "repo": None})
    if hub_cache:
        for ann in ANNOTATORS.values():
            for repo in ann.repos:
                path = _in_hub_cache(repo)
                if path is not None and model_class_of(path) == ann.model_class:
                    out.append({"key": ann.key, "label": ann.label, "path": path, "source": "hub", "repo": repo})
    return out


def find(key: str, folders) -> str | None:
    """The first folder holding annotator `key`, else None."""
    return next((e["path"] for e in listing(folders) if e["key"] == key), None)


def _in_hub_cache(repo: str) -> str | None:
    from huggingface_hub import try_to_load_from_cache
    try:
        config = try_to_load_from_cache(repo, "config.json")
    except Exception:        # a malformed cache folder: nothing there
        return None
    return os.path.dirname(config) if isinstance(config, str) else None


class AnnotatorMissing(LookupError):
    pass


def load(key: str, folders, *, device: str = "cpu", status=None):
    """(model, image_processor) of annotator `key` from the first folder holding it, each through the funnel
    (`aitk(cls).load`: the pool keys, shares and evicts them as any component). float16 on CUDA, else float32."""
    import torch
    import transformers

    from toolkit.models.v2 import LoadPolicy, aitk

    ann = ANNOTATORS[key]
    path = find(key, folders)
    if path is None:
        raise AnnotatorMissing(
            f"no {ann.label} model here: put its transformers folder (config.json, model.safetensors, "
            f"preprocessor_config.json) under a model folder's annotators/ (e.g. `hf download {ann.repos[0]} "
            f"--local-dir <model folder>/annotators/{ann.repos[0].split('/')[-1]}`)")
    dtype = torch.float16 if str(device).startswith("cuda") else torch.float32
    policy = LoadPolicy(dtype, device)
    model = aitk(getattr(transformers, ann.model_class)).load(path, role=f"{ROLE}.{key}", policy=policy,
                                                            allow_hub=False, status=status)
    processor = aitk(getattr(transformers, ann.processor_class)).load(path, role=f"{ROLE}.{key}.processor",
                                                                    policy=policy, allow_hub=False)
    return model, processor

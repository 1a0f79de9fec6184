"""ComfyUI's file names over the engine's model folders: what a workflow's loaders name (`ckpt_name`,
`unet_name`, `clip_name`, `vae_name`, `lora_name`, ...) and what LoadImage lists, as ComfyUI's
`folder_paths` answers them: names relative to the folder with "/", the first folder holding a name wins.

    files = ComfyFiles(engine.model_folders, input_dir)
    files.names("checkpoints") -> ["sdxl/model.safetensors", ...]
    files.path("loras", "style.safetensors") -> "/.../models/loras/style.safetensors" | None
    files.input_names() / files.input_path("x.png [input]")

Which sub-folders hold a ComfyUI folder's files comes from toolkit/model_trees.py (a ComfyUI tree's
`checkpoints/`, an A1111 / Forge tree's `Stable-diffusion/`, ...). A plain folder (diffusers folders
and single files) has no such names: its files are told apart by their headers (formats/detect.py,
lora_headers.py). Nothing is cached: a file copied in is listed on the next call, as ComfyUI's are.
"""
import os

from toolkit import model_trees

MAX_DEPTH = 4                   # sub-folders below a folder that are listed
MODEL_EXTS = (".safetensors", ".sft", ".gguf")          # what the engine reads as weights
UPSCALER_EXTS = (".pth", ".pt", ".safetensors")         # toolkit/upscalers.py reads these (spandrel)
EMBEDDING_EXTS = (".safetensors", ".pt", ".bin")
IMAGE_EXTS = (".png", ".jpg", ".jpeg", ".webp", ".bmp", ".gif", ".tif", ".tiff")
# ComfyUI's folder names -> the model_trees kind of the sub-folders that hold them; ComfyUI's aliases
ALIASES = {"unet": "diffusion_models", "clip": "text_encoders"}
KINDS = {"checkpoints": model_trees.CHECKPOINT, "diffusion_models": model_trees.DENOISER,
         "text_encoders": model_trees.COMPONENT, "vae": model_trees.COMPONENT, "loras": model_trees.LORA,
         "controlnet": model_trees.CONTROLNET, "upscale_models": model_trees.UPSCALER,
         "vae_approx": model_trees.VAE_APPROX, "clip_vision": model_trees.CLIP_VISION,
         "ipadapter": model_trees.IP_ADAPTER}
FOLDERS = (*KINDS, "embeddings")
VAE_DIR = "vae"                 # the component sub-folder (ComfyUI's vae/, A1111's VAE/) whose files are VAEs


def folder_name(folder: str) -> str | None:
    """ComfyUI's canonical name for `folder` (an alias as ComfyUI takes it), None when it names none."""
    folder = ALIASES.get(folder, folder)
    return folder if folder in FOLDERS else None


class ComfyFiles:
    def __init__(self, model_folders: list[str], input_dir: str):
        self.model_folders = [os.path.abspath(os.path.expanduser(f)) for f in model_folders or ()]
        self.input_dir = os.path.abspath(os.path.expanduser(input_dir))

    # -- model files -----------------------------------------------------------------------------
    def names(self, folder: str) -> list[str]:
        """The names ComfyUI would list for `folder` (checkpoints, diffusion_models / unet,
        text_encoders / clip, vae, loras, controlnet, upscale_models, embeddings, ...), sorted; an
        unknown folder lists nothing."""
        return sorted(self.table(folder))

    def table(self, folder: str) -> dict:
        """{name: absolute path} of `folder`, the first folder holding a name winning."""
        seen = {}
        for name, path in self._entries(folder):
            seen.setdefault(name, path)
        return seen

    def path(self, folder: str, name: str) -> str | None:
        """The absolute path of `name` in `folder` (the first folder holding it), None when it is not
        there or would lead out of the folder (`..`, an absolute name, a link out)."""
        if not isinstance(name, str) or not name or "\0" in name:
            return None
        rel = name.replace("\\", "/")
        if rel.startswith("/") or any(part in ("", ".", "..") for part in rel.split("/")):
            return None
        for name_, path in self._entries(folder):
            if name_ == rel:
                return path
        return None

    def _entries(self, folder: str):
        """(name, absolute path) of every file of `folder`, in the order ComfyUI's lookup tries them."""
        canonical = folder_name(folder) if isinstance(folder, str) else None
        if canonical is None:
            return
        for base in self.model_folders:
            tree = model_trees.tree_of(base)
            if tree.kind == "plain":
                yield from self._plain(tree.models, canonical)
                continue
            for top in self._dirs(tree, canonical):
                yield from _walk(top, _exts(canonical), folders=canonical == "controlnet")

    def _dirs(self, tree, canonical: str) -> list:
        if canonical == "embeddings":       # ComfyUI's models/embeddings, A1111's embeddings/ beside models/
            places = [os.path.join(tree.models, "embeddings")]
            if tree.install:
                places.append(os.path.join(tree.install, "embeddings"))
            return [p for p in places if os.path.isdir(p)]
        dirs = model_trees.kind_dirs([tree.models], KINDS[canonical])
        if canonical == "diffusion_models" and not dirs:
            # Forge keeps its Flux denoisers with the checkpoints (models/Stable-diffusion)
            dirs = model_trees.kind_dirs([tree.models], model_trees.CHECKPOINT)
        if KINDS[canonical] == model_trees.COMPONENT:
            vae = canonical == "vae"
            dirs = [d for d in dirs if (os.path.basename(d).lower() == VAE_DIR) == vae]
        return dirs

    def _plain(self, folder: str, canonical: str):
        """A plain folder's files of `canonical`, told apart by their headers: a model file (an arch's
        denoiser, alone or with its parts) is a checkpoint and a diffusion model, a component file a
        text encoder or a VAE by the roles it fills, a LoRA by its keys."""
        if canonical == "vae_approx":
            yield from _walk(os.path.join(folder, "vae_approx"), MODEL_EXTS)
            return
        if canonical not in ("checkpoints", "diffusion_models", "text_encoders", "vae", "loras"):
            return
        for name, path in _walk(folder, MODEL_EXTS, skip=("vae_approx",)):
            if _plain_kind(path) in _PLAIN[canonical]:
                yield name, path

    # -- ComfyUI's input folder (LoadImage) ------------------------------------------------------
    def input_names(self) -> list[str]:
        """LoadImage's choices: the images under the input folder, "sub/x.png" for a sub-folder's."""
        return sorted(name for name, _p in _walk(self.input_dir, IMAGE_EXTS))

    def input_path(self, name: str) -> str | None:
        """The file LoadImage's `image` names ("x.png", "sub/x.png", ComfyUI's annotated "x.png [input]"),
        None when it is not an image under the input folder ("[output]" and "[temp]" name other folders)."""
        if not isinstance(name, str) or "\0" in name:
            return None
        name = name.strip()
        if name.endswith("]") and " [" in name:
            name, _sep, where = name.rpartition(" [")
            if where[:-1] != "input":
                return None
        rel = name.replace("\\", "/")
        if not rel or rel.startswith("/") or any(part in ("", ".", "..") for part in rel.split("/")):
            return None
        if not rel.lower().endswith(IMAGE_EXTS):
            return None
        full = os.path.join(self.input_dir, *rel.split("/"))
        if not _inside(full, self.input_dir) or not os.path.isfile(full):
            return None
        return full


_PLAIN = {"checkpoints": ("model",), "diffusion_models": ("model",), "text_encoders": ("text_encoder",),
          "vae": ("vae",), "loras": ("lora",)}


def _plain_kind(path: str) -> str | None:
    """model | text_encoder | vae | lora | None, from a file's header."""
    if path.lower().endswith(".gguf"):
        return "model"
    from toolkit.lora_headers import detect_format
    from toolkit.models.formats.detect import detect_file
    from toolkit.models.formats.safetensors_header import HeaderError, check_file
    try:
        det = detect_file(path)
    except (HeaderError, OSError, ValueError):
        return None
    if det.arch is not None:
        return "model"
    roles = {role for _k, _l, fits in det.kinds for _a, role in fits}
    if roles:
        return "vae" if any(r.startswith("vae") for r in roles) else "text_encoder"
    try:
        keys = check_file(path).tensors
    except (HeaderError, OSError, ValueError):
        return None
    return "lora" if detect_format(keys) != "unknown" else None


def _exts(canonical: str) -> tuple:
    return {"upscale_models": UPSCALER_EXTS, "embeddings": EMBEDDING_EXTS}.get(canonical, MODEL_EXTS)


def _inside(path: str, top: str) -> bool:
    real, top = os.path.realpath(path), os.path.realpath(top)
    return real.startswith(top + os.sep)


def _walk(top: str, exts: tuple, *, folders: bool = False, skip=()):
    """(name relative to `top` with "/", absolute path) of the files under `top` ending in `exts`, sorted,
    `MAX_DEPTH` sub-folders deep; hidden entries and links out of `top` are left out. `folders`: a
    diffusers folder (config.json) is one entry, as the ControlNet loader takes one."""
    def walk(folder: str, prefix: str, depth: int):
        try:
            entries = sorted(n for n in os.listdir(folder) if not n.startswith("."))
        except OSError:
            return
        for n in entries:
            full = os.path.join(folder, n)
            if not _inside(full, top):
                continue
            if os.path.isdir(full):
                if depth == 0 and n in skip:
                    continue
                if folders and os.path.isfile(os.path.join(full, "config.json")):
                    yield prefix + n, full
                elif depth < MAX_DEPTH:
                    yield from walk(full, f"{prefix}{n}/", depth + 1)
            elif n.lower().endswith(exts):
                yield prefix + n, full

    if os.path.isdir(top):
        yield from walk(top, "", 0)

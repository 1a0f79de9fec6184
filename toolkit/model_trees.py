"""The model folders people have, and what each of their sub-folders holds. Plain data and os calls.

    tree_of(folder) -> Tree(kind, models)       # "comfyui" | "a1111" | "plain", and the models/ folder
    hint(tree, sub-folder name) -> CHECKPOINT | DENOISER | COMPONENT | LORA | VAE_APPROX | UPSCALER | IP_ADAPTER
                                  | CLIP_VISION | CONTROLNET | None
    kind_dirs(folders, kind) -> [the trees' folders holding files of that kind]
    component_dirs(folder) -> [folders holding text encoder and VAE files]
    vae_approx_dirs(folders) -> [folders holding tiny preview autoencoders (TAESD and kin)]
    upscaler_dirs(folders) -> [folders holding upscale models (ESRGAN/, upscale_models/)]
    containing_tree(path) -> the tree whose models/ folder holds `path`, else None
    download_dir(folder, kind) -> where a downloaded file of that kind goes (toolkit/downloads.py)

- ComfyUI `models/`: checkpoints/ (all-in-one), diffusion_models/ and unet/ (denoisers alone),
  text_encoders/ and clip/, vae/, loras/, vae_approx/ (tiny preview decoders: TAESD, TAEF1), upscale_models/,
  ipadapter/ (IP-Adapters), clip_vision/ (their image encoders), controlnet/.
- A1111 / Forge `models/`: Stable-diffusion/ (checkpoints, and Forge's Flux denoisers), Lora/ and
  LyCORIS/, VAE/, text_encoder/ (Forge), VAE-approx/ (TAESD decoders), ESRGAN/ (RealESRGAN/, SwinIR/, DAT/),
  ControlNet/ (ControlNets, and the ControlNet extension's IP-Adapters).
A configured folder may be the `models/` folder itself or the install above it (ComfyUI/,
stable-diffusion-webui/); anything else is a plain folder of diffusers folders and single files.
"""
import os
from dataclasses import dataclass

CHECKPOINT, DENOISER, COMPONENT, LORA, VAE_APPROX = "checkpoint", "denoiser", "component", "lora", "vae_approx"
UPSCALER = "upscaler"          # upscale models (ESRGAN and kin: toolkit/upscalers.py)
IP_ADAPTER, CLIP_VISION = "ip_adapter", "clip_vision"
CONTROLNET = "controlnet"       # ControlNets (toolkit/control_models.py)
COMFYUI = {"checkpoints": CHECKPOINT, "diffusion_models": DENOISER, "unet": DENOISER, "text_encoders": COMPONENT,
           "clip": COMPONENT, "vae": COMPONENT, "loras": LORA, "vae_approx": VAE_APPROX, "upscale_models": UPSCALER,
           "ipadapter": IP_ADAPTER, "clip_vision": CLIP_VISION, "controlnet": CONTROLNET}
A1111 = {"stable-diffusion": CHECKPOINT, "lora": LORA, "lycoris": LORA, "vae": COMPONENT, "text_encoder": COMPONENT,
         "vae-approx": VAE_APPROX, "esrgan": UPSCALER, "realesrgan": UPSCALER, "swinir": UPSCALER, "dat": UPSCALER,
         "controlnet": CONTROLNET}
PLAIN = {"vae_approx": VAE_APPROX}      # a plain folder's one named sub-folder: tiny preview decoders
TREES = {"comfyui": COMFYUI, "a1111": A1111, "plain": PLAIN}
# where a file of a kind is also looked up by name: A1111's ControlNet extension keeps IP-Adapters beside the
# ControlNets (models/ControlNet; what the folder lists is the ControlNet kind's, by each file's header)
ALSO = {("a1111", IP_ADAPTER): ("controlnet",)}
KIND_FOLDERS = {IP_ADAPTER: ("ComfyUI's models/ipadapter", "A1111's models/ControlNet"),
                CLIP_VISION: ("ComfyUI's models/clip_vision",)}
# the sub-folders that tell a tree apart (`vae/` is in both)
MARKERS = {"comfyui": ("checkpoints", "diffusion_models", "unet", "text_encoders", "clip", "loras", "ipadapter", "clip_vision"),
           "a1111": ("stable-diffusion", "lora", "lycoris", "text_encoder")}


@dataclass(frozen=True)
class Tree:
    kind: str                  # comfyui | a1111 | plain
    models: str                # the folder whose sub-folders hold the files (absolute)

    @property
    def install(self) -> str | None:
        """The install a `models/` folder belongs to (where ComfyUI keeps its tokenizer folders)."""
        if self.kind == "plain" or os.path.basename(self.models).lower() != "models":
            return None
        return os.path.dirname(self.models)


def _subdirs(folder: str) -> dict:
    """lower-cased name -> the sub-folder's real name."""
    try:
        return {n.lower(): n for n in os.listdir(folder) if os.path.isdir(os.path.join(folder, n))}
    except OSError:
        return {}


def _kind(folder: str) -> str | None:
    subs = _subdirs(folder)
    for kind, markers in MARKERS.items():
        if any(m in subs for m in markers):
            return kind
    return None


def tree_of(folder: str) -> Tree:
    folder = os.path.abspath(os.path.expanduser(folder))
    kind = _kind(folder)
    if kind:
        return Tree(kind, folder)
    models = _subdirs(folder).get("models")
    if models and _kind(os.path.join(folder, models)):
        return Tree(_kind(os.path.join(folder, models)), os.path.join(folder, models))
    return Tree("plain", folder)


def hint(tree: Tree, name: str) -> str | None:
    """What a top sub-folder of `tree` holds (None: anything; a plain folder names only vae_approx/)."""
    return TREES.get(tree.kind, {}).get(name.lower())


def component_dirs(folder: str) -> list:
    """The sub-folders of the tree at `folder` that hold component files (text encoders, VAEs)."""
    tree = tree_of(folder)
    table = TREES.get(tree.kind)
    if not table:
        return []
    subs = _subdirs(tree.models)
    return [os.path.join(tree.models, real) for low, real in sorted(subs.items()) if table.get(low) == COMPONENT]


def kind_dirs(folders, kind: str) -> list:
    """The sub-folders of `folders`' trees that hold files of `kind` (a tree's table, and ALSO: ip_adapter is
    ComfyUI's models/ipadapter and A1111's models/ControlNet)."""
    out = []
    for folder in folders or ():
        tree = tree_of(folder)
        table = TREES.get(tree.kind, {})
        also = ALSO.get((tree.kind, kind), ())
        out += [os.path.join(tree.models, real) for low, real in sorted(_subdirs(tree.models).items())
                if table.get(low) == kind or low in also]
    return out


def vae_approx_dirs(folders) -> list:
    """The folders of `folders`' trees that hold tiny preview decoders: ComfyUI's vae_approx/, A1111's
    VAE-approx/, and a plain folder's own vae_approx/ sub-folder."""
    return kind_dirs(folders, VAE_APPROX)


def upscaler_dirs(folders) -> list:
    """The folders of `folders`' trees holding upscale models: A1111's ESRGAN/ (RealESRGAN/, SwinIR/, DAT/),
    ComfyUI's upscale_models/ (a plain folder has none: its files are models to generate with)."""
    return kind_dirs(folders, UPSCALER)


def containing_tree(path: str) -> Tree | None:
    """The ComfyUI or A1111 tree a model file lies in (`<tree>/models/<sub-folder>/.../file`), else None."""
    here = os.path.dirname(os.path.abspath(os.path.expanduser(path)))
    for _ in range(6):
        parent = os.path.dirname(here)
        if parent == here:
            return None
        tree = tree_of(parent)
        if tree.kind != "plain" and tree.models == parent and hint(tree, os.path.basename(here)):
            return tree
        here = parent
    return None


# -- where a downloaded file goes -----------------------------------------------------------------------
# what a person downloads -> the sub-folder of each tree it goes in (a plain folder: the folder itself)
DOWNLOAD_KINDS = ("checkpoint", "diffusion_model", "text_encoder", "vae", "lora")
DOWNLOAD_DIRS = {"comfyui": {"checkpoint": "checkpoints", "diffusion_model": "diffusion_models",
                             "text_encoder": "text_encoders", "vae": "vae", "lora": "loras"},
                 "a1111": {"checkpoint": "Stable-diffusion", "diffusion_model": "Stable-diffusion",
                           "text_encoder": "text_encoder", "vae": "VAE", "lora": "Lora"}}


def download_dir(folder: str, kind: str) -> str:
    """The folder a downloaded file of `kind` goes in: the tree's sub-folder for it (an existing one of
    any case, else the usual name), or `folder` itself when it is a plain folder."""
    tree = tree_of(folder)
    name = DOWNLOAD_DIRS.get(tree.kind, {}).get(kind)
    if name is None:
        return tree.models
    return os.path.join(tree.models, _subdirs(tree.models).get(name.lower(), name))

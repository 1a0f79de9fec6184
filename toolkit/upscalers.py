"""Pixel upscalers: PIL's Lanczos and Nearest, and upscale models (ESRGAN, RealESRGAN, SwinIR, DAT, ... any
architecture `spandrel` detects from a file's keys, as ComfyUI and Forge load them).

    model_files((model_folders, upscaler_folders)) -> {name: path}   # engine.upscaler_folder, the trees' ESRGAN/...
    resolve(name, where, folders) -> None (a built-in) | the model file; ConfigError naming `where`
    load(path, device, dtype, status) -> UpscaleModel, through the funnel: a pool component keyed by its file
    upscale(image, upscaler, width, height, ...) -> a PIL image of that size

An upscale model runs at its own factor (2x, 4x, ...): again while the image is smaller than asked (at most
MAX_PASSES), then Lanczos brings it to the exact size, as A1111's upscalers do. A large input runs in tiles
(`tile` pixels, `overlap` shared by neighbours); each tile keeps its core and half of each overlap, so a
model whose receptive field is under overlap / 2 input pixels gives the untiled result exactly (float
rounding aside); a larger one differs only near the seams.
"""
import os

from toolkit.errors import ConfigError
from toolkit.hires import BUILT_IN, PIXEL_UPSCALERS

EXTS = (".pth", ".pt", ".safetensors", ".ckpt")
ROLE = "upscaler"
MAX_PASSES = 3
MAX_DEPTH = 2


def model_files(folders=()) -> dict:
    """Upscale model name (the file's stem, as A1111 names them) -> path, from `folders`: (model folders,
    upscaler folders): the model folders' trees' ESRGAN/ (RealESRGAN/, SwinIR/, DAT/) or upscale_models/,
    and every file of the upscaler folders (engine.upscaler_folder). A name seen twice keeps its first file."""
    from toolkit import model_trees
    model_folders, upscaler_folders = folders if folders else ((), ())
    out: dict = {}
    for folder in [*upscaler_folders, *model_trees.upscaler_dirs(model_folders)]:
        for path in _walk(folder, 0):
            out.setdefault(os.path.splitext(os.path.basename(path))[0], path)
    return out


def _walk(folder: str, depth: int):
    try:
        names = sorted(n for n in os.listdir(folder) if not n.startswith("."))
    except OSError:
        return
    for n in names:
        p = os.path.join(folder, n)
        if os.path.isdir(p) and depth < MAX_DEPTH:
            yield from _walk(p, depth + 1)
        elif n.lower().endswith(EXTS) and os.path.isfile(p):
            yield os.path.abspath(p)


def names(folders=()) -> list:
    """Every upscaler a request may name: the built-ins, then the models by name."""
    return [*BUILT_IN, *sorted(model_files(folders))]


def resolve(name, where: str, folders=(), roots=None) -> str | None:
    """None for a built-in; else the model file `name` is (a name of `model_files(folders)`, or a path to an
    existing file, inside `roots` when given). ConfigError naming `where` otherwise."""
    if name in BUILT_IN:
        return None
    found = model_files(folders)
    if name in found:
        return found[name]
    path = os.path.abspath(os.path.expanduser(name))
    inside = roots is None or any(path.startswith(os.path.realpath(r) + os.sep) for r in roots)
    if os.path.isfile(path) and path.lower().endswith(EXTS) and inside:
        return path
    known = ", ".join([*BUILT_IN, *sorted(found)])
    raise ConfigError(where, f"unknown upscaler {name!r} (known: {known})")


# -- upscale models: a pool component ---------------------------------------------------------------------
def _module_class():
    import torch

    class UpscaleModel(torch.nn.Module):
        """A spandrel model as a module the funnel places: `forward` is its descriptor's call (padding to
        the architecture's size rule, output clamped to [0, 1])."""

        def __init__(self, descriptor):
            super().__init__()
            self.model = descriptor.model
            self.descriptor = descriptor
            self.scale = int(descriptor.scale)
            self.architecture = descriptor.architecture.name

        def forward(self, image):
            return self.descriptor(image)
    return UpscaleModel


_CLASS = None


def module_class():
    global _CLASS
    if _CLASS is None:
        _CLASS = _module_class()
    return _CLASS


def read_file(path: str, *, component: str = ROLE, policy=None):
    """A Reader (toolkit/models/arch.Reader): the model `spandrel` detects in the file, wrapped."""
    import spandrel

    from toolkit.models.v2.mixin import aitk
    descriptor = spandrel.ModelLoader().load_from_file(path)
    if not isinstance(descriptor, spandrel.ImageModelDescriptor):
        raise ValueError(f"{os.path.basename(path)} is a {type(descriptor).__name__}, not an upscale model")
    if descriptor.input_channels != 3 or descriptor.output_channels != 3:
        raise ValueError(f"{os.path.basename(path)} takes {descriptor.input_channels} channels: not an RGB upscaler")
    return aitk(module_class())(descriptor)


def load(path: str, *, device: str = "cpu", dtype=None, status=None):
    """The upscale model in `path` through the funnel (the pool keys it by the file and keeps it while it is
    used). float32 unless `dtype` is one its architecture supports."""
    import torch

    from toolkit.models.arch import Reader
    from toolkit.models.v2 import LoadPolicy, aitk
    dtype = dtype or torch.float32
    if dtype != torch.float32 and not _supports(path, dtype):
        dtype = torch.float32
    policy = LoadPolicy(dtype, device)
    return aitk(module_class()).load(path, role=ROLE, policy=policy, reader=Reader(f"{__name__}:read_file", "spandrel"),
                                     allow_hub=False, status=status, field="upscaler")


def _supports(path: str, dtype) -> bool:
    import spandrel
    import torch
    try:
        d = spandrel.ModelLoader().load_from_file(path)
    except Exception:  # noqa: BLE001 - the load itself names what is wrong
        return False
    return d.supports_half if dtype == torch.float16 else d.supports_bfloat16


def run_model(model, image, tile: int = 0, overlap: int = 0):
    """`model` over `image` (a PIL image) once: a PIL image `model.scale` times larger, in tiles when the
    image is larger than `tile` (module docstring)."""
    import numpy as np
    import torch
    from PIL import Image

    param = next(model.parameters())
    x = torch.from_numpy(np.asarray(image.convert("RGB"), dtype=np.float32) / 255.0).permute(2, 0, 1)[None]
    x = x.to(param.device, param.dtype)
    with torch.inference_mode():
        y = run_tiled(model, x, model.scale, tile, overlap)
    y = y[0].permute(1, 2, 0).float().clamp(0, 1).mul(255).round().to(torch.uint8).cpu().numpy()
    return Image.fromarray(y)


def run_tiled(fn, x, scale: int, tile: int, overlap: int):
    """fn(x) for a (1, C, H, W) tensor, in tiles of `tile` input pixels overlapping by `overlap`, each tile
    keeping its core and half of each overlap it shares (0 or an image within one tile: one call)."""
    import torch

    _b, _c, h, w = x.shape
    if not tile or (h <= tile and w <= tile):
        return fn(x)
    out = None
    for y0, y1, ky0, ky1 in _spans(h, tile, overlap):
        for x0, x1, kx0, kx1 in _spans(w, tile, overlap):
            part = fn(x[:, :, y0:y1, x0:x1])
            if out is None:
                out = torch.zeros((1, part.shape[1], h * scale, w * scale), dtype=part.dtype, device=part.device)
            out[:, :, ky0 * scale:ky1 * scale, kx0 * scale:kx1 * scale] = \
                part[:, :, (ky0 - y0) * scale:(ky1 - y0) * scale, (kx0 - x0) * scale:(kx1 - x0) * scale]
    return out


def _spans(size: int, tile: int, overlap: int) -> list:
    """(start, end, keep start, keep end) of each tile along one side: tiles of `tile` stepped by
    tile - overlap (the last one flush with the end), each keeping up to the middle of its overlaps."""
    if size <= tile:
        return [(0, size, 0, size)]
    step = tile - overlap
    starts = list(range(0, size - tile, step)) + [size - tile]
    spans = []
    for i, s in enumerate(starts):
        keep0 = 0 if i == 0 else (s + starts[i - 1] + tile) // 2
        keep1 = size if i == len(starts) - 1 else (starts[i + 1] + s + tile) // 2
        spans.append((s, s + tile, keep0, keep1))
    return spans


def upscale(image, upscaler: str, width: int, height: int, *, device: str = "cpu", dtype=None, tile: int = 512,
            overlap: int = 32, status=None):
    """`image` (PIL) at width x height by `upscaler`: a built-in (Lanczos, Nearest), else a model file
    (`resolve`'s answer), run until it reaches the size, then Lanczos to the exact size."""
    from PIL import Image

    if upscaler in PIXEL_UPSCALERS:
        resample = Image.LANCZOS if upscaler == "Lanczos" else Image.NEAREST
        return image.resize((width, height), resample=resample)
    model = load(upscaler, device=device, dtype=dtype, status=status)
    out = image.convert("RGB")
    for _ in range(MAX_PASSES):
        if out.width >= width and out.height >= height:
            break
        if status:
            status(f"upscaling {out.width}x{out.height} with {os.path.basename(upscaler)} ({model.scale}x)", "upscaling")
        out = run_model(model, out, tile, overlap)
    if out.size != (width, height):
        out = out.resize((width, height), resample=Image.LANCZOS)
    return out

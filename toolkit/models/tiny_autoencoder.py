"""Tiny autoencoders (madebyollin's TAESD, TAESDXL, TAESD3, TAEF1) that decode the live preview.

Which one fits a model is a fact of its latent space (`LatentFormat.tae`, toolkit/latent_formats.py).
The files are where people keep them: ComfyUI's `models/vae_approx/`, A1111's `models/VAE-approx/`, or
a `vae_approx/` folder of a plain model folder (toolkit/model_trees.py), in either layout people have:

- the original file, as madebyollin's repo and ComfyUI ship it: `taesd_decoder.safetensors` (or `.pth`),
  beside `taesd_encoder.*`; its keys are the indices of the original `nn.Sequential` (`1.weight`,
  `3.conv.0.weight`: the decoder's index 0 is a parameterless clamp), or those under `taesd_decoder.`;
- diffusers' `AutoencoderTiny`: a folder named for it (`taesd/` with config.json, as the hub repo
  madebyollin/taesd holds), or its weights file alone (`taesd.safetensors`, `decoder.layers.*` keys);
  and that hub repo itself where it is in the local hub cache (`hf download madebyollin/taesd`; looked
  up in the cache only, after the folders: nothing is downloaded).

    find(tae, folders) -> TaeFile | None       # torch-free: where one is
    load(found, device=, dtype=) -> AutoencoderTiny, through the funnel (a pool component)
    decode_rgb(decoder, frame, w, h) -> (h, w, 3) uint8, on the frame's device

A decoder takes the model-space latent the scheduler steps (ComfyUI's previewer feeds it x0 as is) and
returns RGB in [-1, 1] at 8x the latent's size. Only the decoder is read: a preview never encodes.
"""
import json
import logging
import os
from dataclasses import dataclass

from toolkit import model_trees

log = logging.getLogger(__name__)

ROLE = "preview_decoder"            # its role in the pool
HUB_REPO = "madebyollin/{}"         # where each is on the hub, as a diffusers AutoencoderTiny
FILE_EXTS = (".safetensors", ".pth", ".pt")
SETTINGS = ("auto", "projection")   # engine.preview_decoder
PROJECTION = "projection"


@dataclass(frozen=True)
class TaeFile:
    tae: str          # which one (the latent format's name for it: "taesd", "taef1")
    path: str         # a decoder file, or a diffusers AutoencoderTiny folder
    layout: str       # "file" | "diffusers"


def _is_tiny_folder(path: str) -> bool:
    try:
        with open(os.path.join(path, "config.json"), encoding="utf-8") as f:
            return json.load(f).get("_class_name") == "AutoencoderTiny"
    except (OSError, ValueError, AttributeError):
        return False


def _matches(tae: str, name: str) -> str | None:
    """The layout of the entry `name` of a vae_approx folder when it is `tae`'s decoder, else None.
    `taesd_decoder*` as ComfyUI matches it (never taesdxl_decoder), or `taesd.<ext>` / `taesd/`."""
    low = name.lower()
    stem, ext = os.path.splitext(low)
    if ext in FILE_EXTS and (stem.startswith(f"{tae}_decoder") or stem == tae):
        return "file"
    if low == tae:
        return "diffusers"
    return None


def find(tae: str | None, folders) -> TaeFile | None:
    """`tae`'s decoder in the vae_approx folders of `folders` (engine.model_folders, a ComfyUI install's
    included), the first in folder order; a .safetensors file before a folder before a pickle."""
    if not tae:
        return None
    rank = {".safetensors": 0, "": 1}
    for folder in model_trees.vae_approx_dirs(folders):
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            continue
        hits = []
        for name in names:
            layout = _matches(tae, name)
            path = os.path.join(folder, name)
            if layout == "file" and os.path.isfile(path) or layout == "diffusers" and _is_tiny_folder(path):
                hits.append((rank.get(os.path.splitext(name)[1].lower() if layout == "file" else "", 2), name, layout))
        if hits:
            _r, name, layout = min(hits)
            return TaeFile(tae, os.path.abspath(os.path.join(folder, name)), layout)
    return in_hub_cache(tae)


def in_hub_cache(tae: str) -> TaeFile | None:
    """The hub repo of `tae`, when a complete snapshot of it is in the local hub cache (never fetched)."""
    from huggingface_hub import try_to_load_from_cache
    try:
        config = try_to_load_from_cache(HUB_REPO.format(tae), "config.json")
    except Exception:       # a malformed cache folder: no decoder there
        return None
    folder = os.path.dirname(config) if isinstance(config, str) else None
    if folder is None or not _is_tiny_folder(folder) \
            or not os.path.isfile(os.path.join(folder, "diffusion_pytorch_model.safetensors")):
        return None
    return TaeFile(tae, folder, "diffusers")


def known() -> list:
    """Every latent format's tiny autoencoder name, longest first (taesdxl is tried before taesd)."""
    from toolkit import latent_formats
    names = {f.tae for f in vars(latent_formats).values() if isinstance(f, latent_formats.LatentFormat) and f.tae}
    return sorted(names, key=lambda n: (-len(n), n))


def describe(path: str) -> dict:
    """What GET /library says of a vae_approx/ file, torch-free: which autoencoder (by its name, or its
    folder's), `part` (decoder | encoder) and the latent channels a decoder takes (from a safetensors
    header; None for a pickle)."""
    from toolkit.models.formats.safetensors_header import HeaderError, check_file
    base, parent = os.path.basename(path).lower(), os.path.basename(os.path.dirname(path)).lower()
    stem = os.path.splitext(base)[0]
    tae = next((t for t in known() if stem.startswith(f"{t}_") or stem == t or parent == t), None)
    out = {"tae": tae, "part": "encoder" if "_encoder" in stem else "decoder", "latent_channels": None}
    if not base.endswith(".safetensors"):
        return out
    try:
        tensors = check_file(path).tensors
    except (HeaderError, OSError) as e:
        return {**out, "error": str(e)}
    first = next((tensors[k] for k in ("decoder.layers.0.weight", "1.weight", "taesd_decoder.1.weight")
                  if k in tensors), None)
    if out["part"] == "decoder":
        if first is None or len(first.shape) != 4:
            return {**out, "error": "not a tiny autoencoder's decoder (no first convolution)"}
        out["latent_channels"] = int(first.shape[1])
    return out


def decoder_for(fmt, folders, setting: str = "auto") -> TaeFile | None:
    """The file that decodes previews of latents in `fmt` (a LatentFormat or None) under the engine's
    `preview_decoder` setting, else None (the projection)."""
    if setting == PROJECTION or fmt is None:
        return None
    return find(getattr(fmt, "tae", None), folders)


# -- reading ----------------------------------------------------------------------------------------
def _read_state(path: str) -> dict:
    if path.lower().endswith(".safetensors"):
        from safetensors.torch import load_file
        return load_file(path)
    import torch
    state = torch.load(path, map_location="cpu", weights_only=True)
    return state.get("state_dict", state) if isinstance(state, dict) else {}


def to_diffusers(state: dict) -> dict:
    """A decoder state in either file layout -> AutoencoderTiny's `decoder.layers.*` keys. Original keys
    are one index above diffusers' (the original decoder starts with its clamp, diffusers' clamps in
    forward): the conversion diffusers' scripts/convert_tiny_autoencoder_to_diffusers.py does."""
    if any(k.startswith("decoder.layers.") for k in state):
        return {k: v for k, v in state.items() if k.startswith("decoder.layers.")}
    out = {}
    for key, value in state.items():
        key = key.removeprefix("taesd_decoder.")
        index, _, rest = key.partition(".")
        if not index.isdigit() or not rest:
            raise ValueError(f"{key!r} is not a TAESD decoder key")
        out[f"decoder.layers.{int(index) - 1}.{rest}"] = value
    return out


def from_diffusers(state: dict) -> dict:
    """AutoencoderTiny's decoder keys -> the original file's (the inverse of to_diffusers): what a
    `taesd_decoder.safetensors` holds. The tests write their tiny decoders with it."""
    out = {}
    for key, value in state.items():
        if key.startswith("decoder.layers."):
            index, _, rest = key.removeprefix("decoder.layers.").partition(".")
            out[f"{int(index) + 1}.{rest}"] = value
    return out


def config_from_decoder(state: dict) -> dict:
    """AutoencoderTiny's config from a decoder's `decoder.layers.*` shapes: the first conv gives the
    latent channels; each stage is its blocks then a conv (upsampled between stages)."""
    layers = {}
    for key, value in state.items():
        index, _, rest = key.removeprefix("decoder.layers.").partition(".")
        layers.setdefault(int(index), {})[rest] = value
    if not layers or "weight" not in layers.get(0, {}):
        raise ValueError("no first convolution (decoder.layers.0.weight): not a tiny autoencoder's decoder")
    latent_channels = int(layers[0]["weight"].shape[1])
    stages, blocks, channels = [], 0, []
    for index in sorted(layers)[1:]:
        params = layers[index]
        if "conv.0.weight" in params:
            blocks += 1
            width = int(params["conv.0.weight"].shape[0])
        elif "weight" in params:
            if not blocks:
                raise ValueError(f"decoder.layers.{index}: a convolution with no blocks before it")
            stages.append(blocks)
            channels.append(width)
            blocks = 0
    if blocks or len(stages) < 2:
        raise ValueError("the decoder's layers do not end in an output convolution")
    return {"latent_channels": latent_channels, "decoder_block_out_channels": tuple(channels),
            "num_decoder_blocks": tuple(stages), "out_channels": int(layers[max(layers)]["weight"].shape[0])}


def read_file(path: str, *, component: str = ROLE, policy=None):
    """A Reader (toolkit/models/arch.Reader) for a decoder file in either layout: an AutoencoderTiny whose
    encoder is left out (a preview never encodes), its decoder the file's weights."""
    import torch
    from diffusers import AutoencoderTiny

    from toolkit.models.v2.mixin import aitk

    state = to_diffusers(_read_state(path))
    config = config_from_decoder(state)
    with torch.device("meta"):
        module = aitk(AutoencoderTiny)(**config)
    module.encoder = None
    missing, unexpected = module.load_state_dict(state, strict=False, assign=True)
    missing = [k for k in missing if k.startswith("decoder.")]
    if missing or unexpected:
        raise ValueError(f"{len(missing)} missing and {len(unexpected)} unexpected decoder weights "
                         f"(e.g. {', '.join((missing + unexpected)[:3])})")
    return module


_failed: dict = {}        # (path, mtime) -> why it could not be loaded: said once, not retried


def load(found: TaeFile, *, device: str = "cpu", dtype=None, status=None):
    """`found`'s decoder through the funnel (the pool keeps it beside the model that uses it), or None
    when it cannot be read: logged once per file version, and the projection serves."""
    import torch
    from diffusers import AutoencoderTiny

    from toolkit.models.arch import Reader
    from toolkit.models.v2 import LoadPolicy, aitk

    try:
        stamp = (found.path, os.stat(found.path).st_mtime_ns)
    except OSError:
        return None
    if stamp in _failed:
        return None
    policy = LoadPolicy(dtype or torch.float32, device)
    reader = Reader(f"{__name__}:read_file", "taesd") if found.layout == "file" else None
    try:
        decoder = aitk(AutoencoderTiny).load(found.path, role=ROLE, policy=policy, reader=reader, allow_hub=False,
                                             status=status)
    except Exception as e:      # a preview is never worth a failed request
        if isinstance(e, torch.OutOfMemoryError):
            raise
        _failed[stamp] = f"{type(e).__name__}: {e}"
        log.warning("preview decoder %s (%s) not used, previews are projected: %s", found.tae, found.path, _failed[stamp])
        return None
    return decoder


def fits(decoder, channels: int) -> bool:
    return decoder is not None and int(decoder.config.latent_channels) == channels


def decode_rgb(decoder, frame, out_w: int, out_h: int):
    """A (C, H, W) model-space latent -> (out_h, out_w, 3) uint8 on its device: the decoder's picture
    (8x the latent), resized with antialiasing."""
    import torch
    import torch.nn.functional as F

    weight = next(decoder.decoder.parameters())
    with torch.no_grad():
        image = decoder.decode(frame[None].to(device=weight.device, dtype=weight.dtype), return_dict=False)[0]
    rgb = ((image[0].float() + 1) / 2).clamp(0, 1)
    rgb = F.interpolate(rgb[None], size=(out_h, out_w), mode="bilinear", align_corners=False, antialias=True)[0]
    return (torch.nan_to_num(rgb) * 255).round().clamp(0, 255).to(torch.uint8).permute(1, 2, 0).contiguous()

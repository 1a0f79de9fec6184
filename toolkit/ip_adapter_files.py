"""IP-Adapter files as people have them, read from their headers (no weights loaded), and the image
encoder each needs.

- h94/IP-Adapter's `ip-adapter*_sd15` / `ip-adapter*_sdxl` `.safetensors` (`image_proj.*`, `ip_adapter.N.to_k_ip`)
  and `.bin` (a dict {"image_proj": ..., "ip_adapter": ...});
- XLabs' Flux `ip_adapter.safetensors` (`ip_adapter_proj_model.*`, `double_blocks.N.processor.ip_adapter_double_stream_*`).

`describe(path)` -> {layout, context_dim, embed: (kind, width), blocks}: the width of the text context the adapter's
key projections read (which denoiser it was trained on) and what it needs from the image encoder: its
projected `image_embeds` (plain adapters: `proj.weight`) or its penultimate `hidden` states (plus,
`proj_in.weight`), of that width; `blocks`: an XLabs file's double-block count (None for h94's). Image encoders: a transformers folder (h94's `image_encoder/`, with
config.json) or a single file in ComfyUI's models/clip_vision (toolkit/models/formats/clip_vision.py).
Lookup by name: ComfyUI's models/ipadapter, A1111's models/ControlNet (model_trees.IP_ADAPTER).
"""
import json
import os

from toolkit import model_trees
from toolkit.errors import ConfigError

LAYOUTS = {"h94": "h94/IP-Adapter's (image_proj.*, ip_adapter.*)", "xlabs": "XLabs' Flux (double_blocks.*)"}
SUFFIXES = (".safetensors", ".bin")


def _shapes(path: str) -> dict:
    """{key: shape} of an adapter file (a .bin's nested dict flattened to `image_proj.` / `ip_adapter.`)."""
    if path.lower().endswith(".bin"):
        import torch
        state = torch.load(path, map_location="meta", weights_only=True)
        if not isinstance(state, dict):
            raise ValueError("not a dict of tensors")
        out = {}
        for part, tensors in state.items():
            for k, t in (tensors.items() if isinstance(tensors, dict) else [("", tensors)]):
                out[f"{part}.{k}" if k else part] = tuple(getattr(t, "shape", ()))
        return out
    from toolkit.models.formats.safetensors_header import check_file
    return {k: tuple(t.shape) for k, t in check_file(path).tensors.items()}


def describe(path: str) -> dict:
    """The adapter's layout, context width and what it needs from the image encoder; ValueError if the
    file is no IP-Adapter this reads."""
    shapes = _shapes(path)
    k_proj = next((k for k in shapes if k.startswith("ip_adapter.") and k.endswith(".to_k_ip.weight")), None)
    if k_proj is not None:
        layout, context = "h94", shapes[k_proj][1]
        if "image_proj.proj.weight" in shapes:
            embed = ("image_embeds", shapes["image_proj.proj.weight"][1])
        elif "image_proj.proj_in.weight" in shapes:
            embed = ("hidden", shapes["image_proj.proj_in.weight"][1])
        else:
            raise ValueError("an image projection this does not read (FaceID and other variants need their own "
                             "face embeddings)")
    else:
        k_proj = next((k for k in shapes if k.startswith("double_blocks.") and
                       k.endswith("ip_adapter_double_stream_k_proj.weight")), None)
        if k_proj is None or "ip_adapter_proj_model.proj.weight" not in shapes:
            raise ValueError("no IP-Adapter keys (image_proj.* and ip_adapter.*, or XLabs' double_blocks.*)")
        layout, context = "xlabs", shapes[k_proj][1]
        embed = ("image_embeds", shapes["ip_adapter_proj_model.proj.weight"][1])
        blocks = len({k.split(".")[1] for k in shapes if k.endswith("ip_adapter_double_stream_k_proj.weight")})
        return {"layout": layout, "context_dim": context, "embed": embed, "blocks": blocks}
    return {"layout": layout, "context_dim": context, "embed": embed, "blocks": None}


def fits(info: dict, row) -> bool:
    """A described adapter is one for an arch whose row's IPAdapter is `row`: its layout, a context width
    and (XLabs') a double-block count the row's denoisers have."""
    return (info["layout"] == row.layout and (not row.context_dims or info["context_dim"] in row.context_dims)
            and (not row.blocks or info["blocks"] is None or info["blocks"] in row.blocks))


def check(path: str, spec, field: str) -> dict:
    """`path` is an IP-Adapter for `spec` (its row's IPAdapter: the layout and a context width it has),
    else a ConfigError naming `field`."""
    base = os.path.basename(path)
    try:
        info = describe(path)
    except Exception as e:       # noqa: BLE001 - any unreadable file is the same answer
        raise ConfigError(field, f"{base} is not an IP-Adapter file: {e}") from None
    row = spec.ip_adapter
    if not fits(info, row):
        blocks = f", {info['blocks']} double blocks" if info["blocks"] is not None else ""
        takes = f" with {' or '.join(map(str, row.blocks))} double blocks" if row.blocks else ""
        raise ConfigError(field, f"{base} is an IP-Adapter for another model ({LAYOUTS[info['layout']]} layout, "
                          f"{info['context_dim']}-wide context{blocks}); arch {spec.name} takes {LAYOUTS[row.layout]} "
                          f"of width {' or '.join(map(str, row.context_dims))}{takes}")
    return info


# -- finding files --------------------------------------------------------------------------------
def find(value: str, folders, kind: str = model_trees.IP_ADAPTER) -> str | None:
    """A file named `value` (its name, or its path under the sub-folder) in the `kind` sub-folders of
    `folders`' trees; None if there is none."""
    for d in model_trees.kind_dirs(folders, kind):
        for root, _dirs, names in os.walk(d):
            for n in names:
                p = os.path.join(root, n)
                rel = os.path.relpath(p, d).replace(os.sep, "/")
                if value in (n, rel) or os.path.splitext(n)[0] == value:
                    return p
    return None


def encoder_width(source: str, kind: str) -> int | None:
    """The width an image encoder (a transformers folder or a single file) gives as `kind`
    (image_embeds: its projection; hidden: its hidden states); None if it is no CLIP vision encoder."""
    try:
        if os.path.isdir(source):
            with open(os.path.join(source, "config.json")) as f:
                config = json.load(f)
            config = config.get("vision_config", config)
            return config.get("projection_dim" if kind == "image_embeds" else "hidden_size")
        from toolkit.models.formats.clip_vision import config_from_header
        config = config_from_header(source)
        return config["projection_dim" if kind == "image_embeds" else "hidden_size"]
    except (OSError, ValueError, KeyError):
        return None


def find_encoder(path: str, info: dict, folders, field: str) -> str:
    """The image encoder for the adapter at `path`: h94's layout first (`image_encoder/` beside it, or in
    `../models/`: the sdxl `vit-h` adapters use the SD 1.5 folder's ViT-H), then the clip_vision files of
    `folders`' trees; the first whose width is the adapter's. ConfigError naming `field` if none is."""
    kind, width = info["embed"]
    here = os.path.dirname(os.path.abspath(path))
    candidates = [os.path.join(here, "image_encoder"), os.path.join(os.path.dirname(here), "models", "image_encoder")]
    for d in model_trees.kind_dirs(folders, model_trees.CLIP_VISION):
        candidates += sorted(os.path.join(d, n) for n in os.listdir(d) if n.endswith(".safetensors")
                             or os.path.isfile(os.path.join(d, n, "config.json")))
    for c in candidates:
        if os.path.exists(c) and encoder_width(c, kind) == width:
            return c
    raise ConfigError(field, f"no image encoder for {os.path.basename(path)} (a CLIP vision model whose "
                      f"{'projection' if kind == 'image_embeds' else 'hidden size'} is {width}): put it in "
                      "models/clip_vision, or h94's image_encoder/ folder beside the adapter, or name it in "
                      "image_encoder")


def check_encoder(source: str, info: dict, field: str):
    kind, width = info["embed"]
    got = encoder_width(source, kind)
    if got != width:
        raise ConfigError(field, f"{os.path.basename(os.path.normpath(source))} is not the image encoder this adapter "
                          f"needs (a CLIP vision model with {width}-wide {kind}; it has {got})")

"""UNet ControlNets (SD 1.x, SDXL) in the files people download: their config from the shapes, diffusers'
converter, and the inverse the tiny factory writes files with.

Two layouts are in the wild:
- original (lllyasviel's ControlNet 1.0/1.1, what A1111's `models/ControlNet` holds): the LDM UNet's
  encoder half (`input_blocks`, `middle_block`, `time_embed`, SDXL's `label_emb`) plus `zero_convs.N.0`,
  `middle_block_out.0` and the hint encoder `input_hint_block.{0,2,...,14}`, under `control_model.` or bare;
- diffusers names in one file (most SDXL ControlNets ComfyUI users download: `controlnet_cond_embedding.*`,
  `controlnet_down_blocks.N`, `controlnet_mid_block`, `down_blocks.*`).
A shape tells the levels, widths, depths, text width and added-condition width; heads and norm groups come
from the arch's known UNet configs (the ControlNet copies its UNet's). xinsir's SDXL ControlNet Union
(ProMax) is one file in diffusers' names too, with its `task_embedding` and control transformer
(`transformer_layes`); its heads come from the known union configs. Torch-free but the converters.
"""
import re

from toolkit.models.formats import ldm
from toolkit.models.formats.file_view import FileConfig, FileKindError, View

ORIGINAL_ANCHORS = ("input_hint_block.0.weight", "zero_convs.0.0.weight", "middle_block_out.0.weight")
DIFFUSERS_ANCHORS = ("controlnet_cond_embedding.conv_in.weight", "controlnet_down_blocks.0.weight",
                     "controlnet_mid_block.weight")
# the UNet facts a ControlNet's encoder half shows (no output blocks: no out_channels, no up blocks)
FACTS = tuple(f for f in ldm.UNET_FACTS if f not in ("out_channels", "up_block_types"))
# ControlNetModel's config keys a UNet config shares (what ControlNetModel.from_unet copies)
SHARED = ("in_channels", "flip_sin_to_cos", "freq_shift", "down_block_types", "only_cross_attention",
          "block_out_channels", "layers_per_block", "downsample_padding", "mid_block_scale_factor", "act_fn",
          "norm_num_groups", "norm_eps", "cross_attention_dim", "transformer_layers_per_block", "encoder_hid_dim",
          "encoder_hid_dim_type", "attention_head_dim", "num_attention_heads", "use_linear_projection",
          "class_embed_type", "addition_embed_type", "addition_time_embed_dim", "num_class_embeds",
          "upcast_attention", "resnet_time_scale_shift", "projection_class_embeddings_input_dim",
          "addition_embed_type_num_heads")


def _original_name(key: str, per: int, hint: dict) -> str:
    """A diffusers ControlNetModel key in the original layout."""
    if m := re.match(r"controlnet_cond_embedding\.(conv_in|conv_out|blocks\.(\d+))\.(.*)", key):
        index = 0 if m[1] == "conv_in" else hint["out"] if m[1] == "conv_out" else 2 * (int(m[2]) + 1)
        return f"input_hint_block.{index}.{m[3]}"
    if m := re.match(r"controlnet_down_blocks\.(\d+)\.(.*)", key):
        return f"zero_convs.{m[1]}.0.{m[2]}"
    if m := re.match(r"controlnet_mid_block\.(.*)", key):
        return f"middle_block_out.0.{m[1]}"
    return ldm._unet_key(key, per, [])


def to_original(state: dict) -> dict:
    """A diffusers ControlNetModel state dict in the original (A1111) layout: the inverse of `convert`."""
    per = 1 + max(int(m[1]) for k in state if (m := re.match(r"down_blocks\.0\.resnets\.(\d+)\.", k)))
    blocks = 1 + max((int(m[1]) for k in state if (m := re.match(r"controlnet_cond_embedding\.blocks\.(\d+)\.", k))),
                     default=-1)
    hint = {"out": 2 * (blocks + 1)}
    return {_original_name(k, per, hint): v for k, v in state.items()}


def convert(state: dict, config: dict) -> dict:
    """diffusers' converter (original -> diffusers names); a file in diffusers names passes as it is."""
    from diffusers.loaders.single_file_utils import convert_controlnet_checkpoint
    out = convert_controlnet_checkpoint(dict(state), config)
    if "time_embed.0.weight" in state:      # SDXL's added condition, which diffusers' converter leaves behind
        for old, new in (("label_emb.0.0", "add_embedding.linear_1"), ("label_emb.0.2", "add_embedding.linear_2")):
            for part in ("weight", "bias"):
                if f"{old}.{part}" in state:
                    out[f"{new}.{part}"] = state[f"{old}.{part}"]
    return out


def _as_original(view: View) -> View:
    """The view in original names (a diffusers-named file renamed), with the output conv a UNet
    signature reads (a ControlNet has none: its out_channels are no fact of it)."""
    shapes = dict(view.shapes)
    if "controlnet_cond_embedding.conv_in.weight" in shapes:
        shapes = {k: v for k, v in to_original(shapes).items()}
    if "input_blocks.0.0.weight" not in shapes:
        raise FileKindError("no input_blocks.0.0 / conv_in: not a UNet ControlNet")
    shapes["out.2.weight"] = (shapes["input_blocks.0.0.weight"][1],)
    return View(view.prefix, shapes, view.dtypes, view.metadata, view.all_keys, view.header)


def signature(view: View) -> dict:
    return ldm.unet_signature(_as_original(view))


def hint_channels(view: View) -> tuple:
    """(conditioning_channels, conditioning_embedding_out_channels) from the hint encoder's convs."""
    v = _as_original(view)
    convs = v.indices(r"input_hint_block\.(\d+)\.weight")      # conv_in, the blocks' pairs, conv_out
    first = v.shape(f"input_hint_block.{convs[0]}.weight")
    out = [int(first[0])] + [v.dim(f"input_hint_block.{i}.weight") for i in convs[1:-1][1::2]]
    return int(first[1]), out


def config(view: View, known: dict, what: str, union_known: dict | None = None) -> FileConfig:
    """ControlNetModel's config: the known UNet config whose shape facts equal the file's, its shared keys,
    and the hint encoder's channels from the file. With `union_known` ({name: {num_trans_channel,
    num_trans_head}}: the heads a shape cannot tell), ControlNetUnionModel's (xinsir's ProMax in one
    file): its control types, control transformer and projection from the shapes; a union file is
    no plain ControlNet and a plain one no union."""
    if view.has("task_embedding") != (union_known is not None):
        raise FileKindError(f"{what}: " + ("a ControlNet Union (task_embedding), not a plain ControlNet"
                                           if union_known is None else "no task_embedding: not a ControlNet Union"))
    sig = signature(view)
    for name, unet in known.items():
        if all(ldm._unet_same(sig, unet, k) for k in FACTS):
            channels, embedding = hint_channels(view)
            cfg = {k: unet[k] for k in SHARED if k in unet}
            cfg.update(conditioning_channels=channels, conditioning_embedding_out_channels=embedding)
            if union_known is not None:
                cfg.update(_union(view, union_known, what))
            return FileConfig(cfg, known=name)
    raise FileKindError(f"{what}: its shapes match no known UNet ({', '.join(known)}): "
                        + ", ".join(f"{k} {sig.get(k)!r}" for k in FACTS))


def _union(view: View, union_known: dict, what: str) -> dict:
    types, width = view.shape("task_embedding")
    heads = next((u["num_trans_head"] for u in union_known.values() if u["num_trans_channel"] == width), None)
    if heads is None:
        raise FileKindError(f"{what}: its control transformer is {width} wide, no known ControlNet Union's "
                            f"({', '.join(str(u['num_trans_channel']) for u in union_known.values())})")
    return dict(num_control_type=int(types), num_trans_channel=int(width), num_trans_head=heads,
                num_trans_layer=view.count(r"transformer_layes\.(\d+)\."),
                num_proj_channel=view.dim("spatial_ch_projs.weight"))


def unet_fits(cfg: dict, known: dict, added: bool) -> bool:
    """A UNet ControlNet config fits an arch whose known UNets have its text width, with (SDXL) or without
    (SD 1.x) the added time condition."""
    if (cfg.get("addition_embed_type") == "text_time") != added:
        return False
    return cfg.get("cross_attention_dim") in {u.get("cross_attention_dim") for u in known.values()}


UNION_ANCHORS = DIFFUSERS_ANCHORS + ("task_embedding",)


def files(arch_module: str, label: str) -> tuple:
    """The SingleFile rows of an arch's UNet ControlNets, original and diffusers-named, whose config is
    `<arch_module>:control_config`."""
    from toolkit.models.arch import SingleFile
    cfg = f"{arch_module}:control_config"
    return (SingleFile("toolkit.models.formats.controlnet:convert", "toolkit.models.formats.controlnet:to_original",
                       anchors=ORIGINAL_ANCHORS, prefixes=("control_model.", ""), config=cfg,
                       kind="controlnet_original", label=f"{label} (original layout)"),
            SingleFile(None, "", anchors=DIFFUSERS_ANCHORS, prefixes=("",), config=cfg, kind="controlnet_diffusers",
                       label=f"{label} (diffusers names)"))


def union_files(arch_module: str, label: str) -> tuple:
    """The SingleFile row of a UNet ControlNet Union in one file (diffusers' names), whose config is
    `<arch_module>:union_config`."""
    from toolkit.models.arch import SingleFile
    return (SingleFile(None, "", anchors=UNION_ANCHORS, prefixes=("",), config=f"{arch_module}:union_config",
                       kind="controlnet_union_diffusers", label=f"{label} (diffusers names, one file)"),)

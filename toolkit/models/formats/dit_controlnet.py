"""DiT ControlNets as one .safetensors file in diffusers' own names: what people download and drop into
A1111's `models/ControlNet` or ComfyUI's `models/controlnet` (InstantX's and Shakker-Labs' Flux ControlNets
and Unions, InstantX's SD3 and Qwen-Image ControlNets: their repo's `diffusion_pytorch_model.safetensors`
renamed). The keys need no converting; the class's config comes from the shapes and key counts, and
what a shape cannot tell (rope axes, patch size, sample size) from the arch's known transformer config
of the same widths (a ControlNet copies its transformer's). Torch-free.

    flux(view, known) / sd3(view, known) / qwen_image(view, known) -> FileConfig

Each raises FileKindError when the file is another class's (a Flux ControlNet has `x_embedder`, a
Qwen-Image one `img_in`, an SD3 one `pos_embed_input.proj`), so a file of another arch is refused from
its header. Not read: XLabs' Flux ControlNets (BFL names plus `input_hint_block`), for which diffusers
0.42.1 has no converter, and Stability's original-layout SD3.5 ControlNet files.
"""
import math

from toolkit.models.formats.file_view import FileConfig, FileKindError, View

FLUX_ANCHORS = ("x_embedder.weight", "controlnet_x_embedder.weight", "context_embedder.weight")
SD3_ANCHORS = ("pos_embed_input.proj.weight", "controlnet_blocks.0.weight")
QWEN_IMAGE_ANCHORS = ("img_in.weight", "txt_in.weight", "controlnet_x_embedder.weight")
# control files people have that no row reads, by their keys: what a refusal says of them
UNREAD = ((("double_blocks.0.img_attn.qkv.weight", "controlnet_blocks.0.weight", "input_hint_block.0.weight"),
           "an XLabs Flux ControlNet (x-flux's layout), which diffusers 0.42.1 has no converter for: take an "
           "InstantX or Shakker-Labs Flux ControlNet (diffusers' names)"),)


def unread(keys) -> str | None:
    """What a control file no row reads is, when it is one of the UNREAD layouts."""
    return next((what for anchors, what in UNREAD if all(a in keys for a in anchors)), None)


def _base(known: dict, facts: dict, what: str) -> tuple:
    """(name, config) of the first known transformer config whose values equal `facts`."""
    for name, config in known.items():
        if all(config.get(k) == v for k, v in facts.items()):
            return name, config
    raise FileKindError(f"{what}: its widths match no known transformer ({', '.join(known)}): "
                        + ", ".join(f"{k} {v!r}" for k, v in facts.items()))


def _head_dim(view: View, *blocks: str) -> int | None:
    for block in blocks:
        if view.has(f"{block}.0.attn.norm_q.weight"):
            return view.dim(f"{block}.0.attn.norm_q.weight")
    return None


def flux(view: View, known: dict, what: str = "the Flux ControlNet") -> FileConfig:
    """FluxControlNetModel's config (a Union's `num_mode` from its mode embedding)."""
    if not view.has("x_embedder.weight") or view.has("img_in.weight"):
        raise FileKindError("no x_embedder: not a Flux ControlNet in diffusers' names")
    inner, in_channels = view.shape("x_embedder.weight")
    head = _head_dim(view, "transformer_blocks", "single_transformer_blocks")
    if head is None:
        raise FileKindError(f"{what}: no transformer block with a QK norm to tell its head width")
    facts = {"attention_head_dim": head, "num_attention_heads": inner // head,
             "joint_attention_dim": view.dim("context_embedder.weight", 1),
             "pooled_projection_dim": view.dim("time_text_embed.text_embedder.linear_1.weight", 1)}
    name, base = _base(known, facts, what)
    config = dict(patch_size=base.get("patch_size", 1), in_channels=in_channels, **facts,
                  num_layers=view.count(r"transformer_blocks\.(\d+)\."),
                  num_single_layers=view.count(r"single_transformer_blocks\.(\d+)\."),
                  guidance_embeds=view.has("time_text_embed.guidance_embedder.linear_1.weight"),
                  axes_dims_rope=list(base["axes_dims_rope"]),
                  num_mode=view.dim("controlnet_mode_embedder.weight") if view.has("controlnet_mode_embedder.weight")
                  else None,
                  conditioning_embedding_channels=view.dim("input_hint_block.conv_out.weight")
                  if view.has("input_hint_block.conv_out.weight") else None)
    return FileConfig(config, known=name)


def sd3(view: View, known: dict, what: str = "the SD3 ControlNet") -> FileConfig:
    """SD3ControlNetModel's config. A file without a context embedder (Stability's SD3.5 ControlNets) runs
    its blocks on the image alone and keeps the pooled projection (diffusers' configs of those say so)."""
    if not view.has("pos_embed_input.proj.weight"):
        raise FileKindError("no pos_embed_input.proj: not an SD3 ControlNet in diffusers' names")
    inner, in_total, patch, _ = view.shape("pos_embed_input.proj.weight")
    use_pos_embed = view.has("pos_embed.proj.weight")
    head = _head_dim(view, "transformer_blocks")
    facts = {"patch_size": patch}
    if head is not None:
        facts["attention_head_dim"] = head
    name, base = _base(known, facts, what)
    head = head or base["attention_head_dim"]
    context = view.has("context_embedder.weight")
    in_channels = view.dim("pos_embed.proj.weight", 1) if use_pos_embed else base["in_channels"]
    config = dict(sample_size=base["sample_size"], patch_size=patch, in_channels=in_channels,
                  out_channels=base.get("out_channels", in_channels),
                  num_layers=view.count(r"transformer_blocks\.(\d+)\."), attention_head_dim=head,
                  num_attention_heads=inner // head,
                  joint_attention_dim=view.dim("context_embedder.weight", 1) if context else None,
                  caption_projection_dim=view.dim("context_embedder.weight") if context else base["caption_projection_dim"],
                  pooled_projection_dim=view.dim("time_text_embed.text_embedder.linear_1.weight", 1),
                  pos_embed_max_size=math.isqrt(view.dim("pos_embed.pos_embed", 1)) if view.has("pos_embed.pos_embed")
                  else base.get("pos_embed_max_size"),
                  extra_conditioning_channels=in_total - in_channels,
                  dual_attention_layers=view.indices(r"transformer_blocks\.(\d+)\.attn2\."),
                  qk_norm="rms_norm" if view.has("transformer_blocks.0.attn.norm_q.weight") else None,
                  pos_embed_type="sincos" if use_pos_embed else None, use_pos_embed=use_pos_embed,
                  force_zeros_for_pooled_projection=context)
    return FileConfig(config, known=name)


def qwen_image(view: View, known: dict, what: str = "the Qwen-Image ControlNet") -> FileConfig:
    """QwenImageControlNetModel's config (the inpainting one's mask channels from its control embedder)."""
    if not view.has("img_in.weight") or not view.has("controlnet_x_embedder.weight"):
        raise FileKindError("no img_in / controlnet_x_embedder: not a Qwen-Image ControlNet in diffusers' names")
    inner, in_channels = view.shape("img_in.weight")
    head = _head_dim(view, "transformer_blocks")
    if head is None:
        raise FileKindError(f"{what}: no transformer block with a QK norm to tell its head width")
    facts = {"attention_head_dim": head, "num_attention_heads": inner // head,
             "joint_attention_dim": view.dim("txt_in.weight", 1)}
    name, base = _base(known, facts, what)
    config = dict(patch_size=base["patch_size"], in_channels=in_channels, out_channels=base["out_channels"],
                  num_layers=view.count(r"transformer_blocks\.(\d+)\."), **facts,
                  axes_dims_rope=list(base["axes_dims_rope"]),
                  extra_condition_channels=view.dim("controlnet_x_embedder.weight", 1) - in_channels)
    return FileConfig(config, known=name)


def files(module: str, anchors: tuple, label: str, kind: str) -> tuple:
    """The SingleFile row of a DiT ControlNet in diffusers' names, its config `<module>:control_config`."""
    from toolkit.models.arch import SingleFile
    return (SingleFile(None, "", anchors=anchors, prefixes=("",), config=f"{module}:control_config", kind=kind,
                       label=f"{label} (diffusers names, one file)"),)

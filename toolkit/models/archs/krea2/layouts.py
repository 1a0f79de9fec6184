"""Key layouts of the Krea 2 components, their detection from a key set, and the real model's
reference shapes. Pure Python (no torch), so inspection (toolkit/file_report.py, through the arch
row's `file_layouts`) can use it; the readers in toolkit/models/formats/comfy.py use the same constants."""

# the Krea 2 diffusion model in ComfyUI/original names, optionally under a checkpoint prefix
KREA2_PREFIXES = ("model.diffusion_model.", "diffusion_model.", "")
KREA2_ANCHORS = ("txtfusion.projector.weight",)
KREA2_DIFFUSERS_ANCHORS = ("text_fusion.projector.weight",)

# the Qwen3-VL text encoder in ComfyUI names ("model.layers.N..."), or transformers' Qwen3-VL names
TEXT_ENCODER_PREFIXES = ("model.language_model.", "model.")
TEXT_ENCODER_ANCHORS = ("embed_tokens.weight",)
TEXT_ENCODER_TRANSFORMERS_PREFIXES = ("language_model.", "model.language_model.")
# Keys a Qwen3-VL file may carry that the Krea 2 text encoder does not use: the vision tower and the
# language-model head. They are reported as ignored keys and never loaded.
TEXT_ENCODER_IGNORED = ("lm_head.", "visual.", "model.visual.", "model.lm_head.")

# the Qwen Image VAE in original Wan/Qwen names, or diffusers' AutoencoderKLQwenImage names
VAE_PREFIXES = ("first_stage_model.", "vae.", "")
VAE_ANCHORS = ("decoder.conv1.weight",)
VAE_DIFFUSERS_ANCHORS = ("decoder.conv_in.weight",)

# Krea 2 (the official/ComfyUI defaults), in Krea2Transformer2DModel terms:
# features 6144 = 48 heads x 128, 12 KV heads, 28 blocks, MLP multiplier 4 (SwiGLU width
# int(2*6144/3)*4 rounded up to 128 = 16384), timestep width 256, text width 2560 with 12 layers,
# text-fusion 20/20 heads (SwiGLU 6912), patch 2 x 16 latent channels = 64 inputs, RoPE theta 1000.
KREA2_REFERENCE = dict(
    in_channels=64, num_layers=28, attention_head_dim=128, num_attention_heads=48, num_key_value_heads=12,
    intermediate_size=16384, timestep_embed_dim=256, text_hidden_dim=2560, num_text_layers=12,
    text_num_attention_heads=20, text_num_key_value_heads=20, text_intermediate_size=6912,
    num_layerwise_text_blocks=2, num_refiner_text_blocks=2, axes_dims_rope=(32, 48, 48), rope_theta=1000.0,
    norm_eps=1e-5,
)
# Qwen3-VL-4B-Instruct's text backbone (the Krea 2 text encoder).
QWEN3VL_4B_REFERENCE = dict(
    vocab_size=151936, hidden_size=2560, intermediate_size=9728, num_hidden_layers=36, num_attention_heads=32,
    num_key_value_heads=8, head_dim=128,
)
# Qwen Image VAE (AutoencoderKLQwenImage), from the public diffusers config of Qwen/Qwen-Image
QWEN_IMAGE_VAE_REFERENCE = dict(base_dim=96, z_dim=16, dim_mult=[1, 2, 4, 4], num_res_blocks=2,
                                temperal_downsample=[False, True, True], input_channels=3)

KREA2_TRANSFORMER = "krea2_transformer"
QWEN3VL_TEXT_ENCODER = "qwen3vl_text_encoder"
QWEN3_TEXT_ENCODER = "qwen3_text_encoder"          # Qwen3-VL text shapes, but no vision keys to tell it apart
QWEN_IMAGE_VAE = "qwen_image_vae"

LABELS = {KREA2_TRANSFORMER: "Krea 2 diffusion model", QWEN3VL_TEXT_ENCODER: "Qwen3-VL text encoder",
          QWEN3_TEXT_ENCODER: "Qwen3 text encoder (Qwen3-VL text shapes)", QWEN_IMAGE_VAE: "Qwen Image VAE"}


def first_prefix(keys, anchors, candidates):
    keys = keys if isinstance(keys, (set, frozenset, dict)) else set(keys)
    for prefix in candidates:
        if any(prefix + a in keys for a in anchors):
            return prefix
    return None


def detect(keys, shapes: dict | None = None) -> dict | None:
    """{"architecture", "layout" ("original" | "diffusers" | "transformers"), "prefix",
    "ignore_prefixes"} for a checkpoint's key set (shapes: key -> shape, to tell VAEs apart); None
    for a file of none of these layouts."""
    keys = set(keys)
    shapes = shapes or {}
    p = first_prefix(keys, KREA2_ANCHORS, KREA2_PREFIXES)
    if p is not None:
        return {"architecture": KREA2_TRANSFORMER, "layout": "original", "prefix": p, "ignore_prefixes": ()}
    p = first_prefix(keys, KREA2_DIFFUSERS_ANCHORS, ("", "transformer."))
    if p is not None:
        return {"architecture": KREA2_TRANSFORMER, "layout": "diffusers", "prefix": p, "ignore_prefixes": ()}
    has_vision = any(k.startswith(("visual.", "model.visual.")) for k in keys)
    te = QWEN3VL_TEXT_ENCODER if has_vision else QWEN3_TEXT_ENCODER
    p = first_prefix(keys, ("layers.0.self_attn.q_norm.weight",), TEXT_ENCODER_TRANSFORMERS_PREFIXES)
    if p is not None:
        return {"architecture": te, "layout": "transformers", "prefix": p,
                "ignore_prefixes": ("visual.", "model.visual.", "lm_head.")}
    p = first_prefix(keys, ("layers.0.self_attn.q_norm.weight",), ("model.",))
    if p is not None:
        return {"architecture": te, "layout": "original", "prefix": p, "ignore_prefixes": TEXT_ENCODER_IGNORED}
    p = first_prefix(keys, VAE_ANCHORS, VAE_PREFIXES)
    if p is not None and len(shapes.get(p + "decoder.conv1.weight", (0,) * 5)) == 5:
        return {"architecture": QWEN_IMAGE_VAE, "layout": "original", "prefix": p, "ignore_prefixes": ()}
    p = first_prefix(keys, VAE_DIFFUSERS_ANCHORS, ("", "vae."))
    if p is not None and len(shapes.get(p + "decoder.conv_in.weight", ())) == 5 \
            and p + "decoder.up_blocks.0.resnets.0.conv1.weight" in keys:
        return {"architecture": QWEN_IMAGE_VAE, "layout": "diffusers", "prefix": p, "ignore_prefixes": ()}
    return None


def sizes(det: dict, shape, count) -> dict:
    """Width and depth of a detected file (`shape(key)`: its shape or None; `count("blocks.{}.")`:
    how many), and whether they are the real model's (the references above)."""
    arch, layout = det["architecture"], det["layout"]
    if arch == KREA2_TRANSFORMER:
        w = shape("first.weight" if layout == "original" else "img_in.weight")
        blocks = count("blocks.{}." if layout == "original" else "transformer_blocks.{}.")
        width = w[0] if w else None
        ref = KREA2_REFERENCE
        return {"width": width, "blocks": blocks,
                "reference": width == ref["num_attention_heads"] * ref["attention_head_dim"]
                and blocks == ref["num_layers"]}
    if arch in (QWEN3VL_TEXT_ENCODER, QWEN3_TEXT_ENCODER):
        w = shape("embed_tokens.weight")
        layers = count("layers.{}.")
        width = w[1] if w else None
        return {"width": width, "layers": layers, "reference": width == QWEN3VL_4B_REFERENCE["hidden_size"]
                and layers == QWEN3VL_4B_REFERENCE["num_hidden_layers"]}
    if arch == QWEN_IMAGE_VAE:
        w = shape("encoder.conv1.weight" if layout == "original" else "encoder.conv_in.weight")
        base = w[0] if w else None
        return {"base_dim": base, "reference": base == QWEN_IMAGE_VAE_REFERENCE["base_dim"]}
    return {}

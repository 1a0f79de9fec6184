"""Key layouts of the Krea 2 components, and detection from a key set. Pure Python (no torch), so
inspection can use it; the readers in `comfy` use the same constants."""

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

KREA2_TRANSFORMER = "krea2_transformer"
QWEN3VL_TEXT_ENCODER = "qwen3vl_text_encoder"
QWEN3_TEXT_ENCODER = "qwen3_text_encoder"          # Qwen3-VL text shapes, but no vision keys to tell it apart
QWEN_IMAGE_VAE = "qwen_image_vae"
UNKNOWN = "unknown"

LABELS = {KREA2_TRANSFORMER: "Krea 2 diffusion model", QWEN3VL_TEXT_ENCODER: "Qwen3-VL text encoder",
          QWEN3_TEXT_ENCODER: "Qwen3 text encoder (Qwen3-VL text shapes)", QWEN_IMAGE_VAE: "Qwen Image VAE",
          UNKNOWN: "unknown"}


def first_prefix(keys, anchors, candidates):
    keys = keys if isinstance(keys, (set, frozenset, dict)) else set(keys)
    for prefix in candidates:
        if any(prefix + a in keys for a in anchors):
            return prefix
    return None


def detect(keys, shapes: dict | None = None) -> dict:
    """{"architecture", "layout" ("original" | "diffusers" | "transformers"), "prefix",
    "ignore_prefixes"} for a checkpoint's key set (shapes: key -> shape, to tell VAEs apart)."""
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
    return {"architecture": UNKNOWN, "layout": "unknown", "prefix": "", "ignore_prefixes": ()}

"""CLIP text encoders as checkpoints carry them: the transformers layout (`text_model.…`) of SD 1.x's
`cond_stage_model.transformer.`, SDXL's first embedder, ComfyUI's `clip_l.safetensors` and the
`text_encoders.clip_l.` part of its all-in-one files. Config from the shapes (width, depth, vocabulary,
positions, MLP width), the rest (heads, activation, token ids) from the known configs.

The known configs are the real ones (the hub repos' `text_encoder/config.json`) and the tiny factory's
(toolkit/models/tiny/kit.py `clip_text_encoder` over its tiny tokenizer: test_files_people_have checks
they agree), so a tiny checkpoint loads by the same rule as a real one.
"""
from toolkit.models.arch import SingleFile
from toolkit.models.formats.file_view import FileConfig, FileKindError
from toolkit.models.formats.ldm import known_config

CLIP_FACTS = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "max_position_embeddings")
_COMMON = dict(attention_dropout=0.0, dropout=0.0, initializer_factor=1.0, initializer_range=0.02, layer_norm_eps=1e-5)
CLIP_L_KNOWN = {
    # openai/clip-vit-large-patch14's text config, as SD 1.5, SDXL, Flux and SD3 ship it
    "clip-vit-large-patch14": dict(vocab_size=49408, hidden_size=768, intermediate_size=3072, num_hidden_layers=12,
                                   num_attention_heads=12, max_position_embeddings=77, hidden_act="quick_gelu",
                                   projection_dim=768, bos_token_id=0, eos_token_id=2, pad_token_id=1, **_COMMON),
    "tiny": dict(vocab_size=800, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                 max_position_embeddings=77, hidden_act="quick_gelu", projection_dim=32, bos_token_id=798,
                 eos_token_id=799, pad_token_id=799, **_COMMON),
    # toolkit/models/archs/sd3.py's tiny text_encoder
    "tiny-sd3": dict(vocab_size=800, hidden_size=8, intermediate_size=16, num_hidden_layers=2, num_attention_heads=2,
                     max_position_embeddings=77, hidden_act="quick_gelu", projection_dim=8, bos_token_id=798,
                     eos_token_id=799, pad_token_id=799, **_COMMON),
}


# CLIP-G (OpenCLIP ViT-bigG) in the transformers layout, with its projection: SD3's text_encoder_2
# and ComfyUI's `clip_g.safetensors` (SDXL checkpoints carry it in OpenCLIP's: formats/openclip.py)
CLIP_G_FACTS = CLIP_FACTS + ("projection_dim",)
CLIP_G_KNOWN = {
    # stabilityai/stable-diffusion-xl-base-1.0 text_encoder_2/config.json (SD3's text_encoder_2 is the same)
    "clip-vit-bigg-14": dict(vocab_size=49408, hidden_size=1280, intermediate_size=5120, num_hidden_layers=32,
                             num_attention_heads=20, max_position_embeddings=77, hidden_act="gelu", projection_dim=1280,
                             bos_token_id=0, eos_token_id=2, pad_token_id=1, **_COMMON),
    # toolkit/models/archs/sd3.py's tiny text_encoder_2
    "tiny-sd3": dict(vocab_size=800, hidden_size=24, intermediate_size=48, num_hidden_layers=2, num_attention_heads=2,
                     max_position_embeddings=77, hidden_act="quick_gelu", projection_dim=24, bos_token_id=798,
                     eos_token_id=799, pad_token_id=799, **_COMMON),
}


def _strip(key: str) -> str:
    return key.removeprefix("text_model.")


def clip_signature(view) -> dict:
    keys = {_strip(k): k for k in view.shapes}
    if "embeddings.token_embedding.weight" not in keys:
        raise FileKindError("no text_model.embeddings.token_embedding.weight: not a CLIP text encoder")
    vocab, hidden = view.shape(keys["embeddings.token_embedding.weight"])
    return {"vocab_size": vocab, "hidden_size": hidden,
            "intermediate_size": view.dim(keys["encoder.layers.0.mlp.fc1.weight"]),
            "num_hidden_layers": view.count(r"(?:text_model\.)?encoder\.layers\.(\d+)\."),
            "max_position_embeddings": view.dim(keys["embeddings.position_embedding.weight"])}


def clip_l_config(view) -> FileConfig:
    return known_config(clip_signature(view), CLIP_L_KNOWN, CLIP_FACTS, "CLIP-L text encoder")


def is_clip_l(view) -> bool:
    try:
        clip_l_config(view)
    except FileKindError:
        return False
    return True


def clip_g_config(view) -> FileConfig:
    sig = clip_signature(view)
    if view.has("text_projection.weight"):
        sig["projection_dim"] = view.dim("text_projection.weight")
    return known_config(sig, CLIP_G_KNOWN, CLIP_G_FACTS, "CLIP-G text encoder")


def is_clip_g(view) -> bool:
    try:
        clip_g_config(view)
    except FileKindError:
        return False
    return True


def convert_clip(state: dict) -> dict:
    """The transformers names already; what CLIPTextModel has no use for (a file's projection and
    logit scale, older transformers' position_ids buffer) is dropped by the reader's alignment."""
    return {k: v for k, v in state.items() if not k.endswith(("position_ids", "logit_scale"))}


def convert_clip_projected(state: dict, config: dict) -> dict:
    """CLIP-L for a CLIPTextModelWithProjection (SD3's text_encoder). ComfyUI's `clip_l.safetensors`
    often has no `text_projection`; ComfyUI then uses an identity projection (comfy/sd1_clip.py), and so
    does this: the file's own projection where it has one."""
    import torch
    out = convert_clip(state)
    if not any(k.endswith("text_projection.weight") for k in out):
        width = config["hidden_size"]
        out["text_projection.weight"] = torch.eye(config.get("projection_dim", width), width)
    return out


def to_original(state: dict) -> dict:
    """A transformers CLIPTextModel state dict as checkpoints carry it: under `text_model.` (transformers
    5 saves CLIPTextModel without it; every SD checkpoint and ComfyUI file has it)."""
    return {k if k.startswith("text_model.") or k.startswith("text_projection") else "text_model." + k: v
            for k, v in state.items()}


CLIP_L = SingleFile(
    converter="toolkit.models.formats.clip:convert_clip", original="toolkit.models.formats.clip:to_original",
    kind="clip_l", label="CLIP-L text encoder",
    anchors=("text_model.embeddings.token_embedding.weight", "text_model.final_layer_norm.weight"),
    prefixes=("cond_stage_model.transformer.", "conditioner.embedders.0.transformer.",
              "text_encoders.clip_l.transformer.", ""),
    config="toolkit.models.formats.clip:clip_l_config", matches="toolkit.models.formats.clip:is_clip_l")
CLIP_G = SingleFile(
    converter="toolkit.models.formats.clip:convert_clip", original="toolkit.models.formats.clip:to_original",
    kind="clip_g", label="CLIP-G text encoder",
    anchors=("text_model.embeddings.token_embedding.weight", "text_model.final_layer_norm.weight",
             "text_projection.weight"),
    prefixes=("text_encoders.clip_g.transformer.", ""),
    config="toolkit.models.formats.clip:clip_g_config", matches="toolkit.models.formats.clip:is_clip_g")

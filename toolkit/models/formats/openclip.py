"""OpenCLIP text towers as Stability's checkpoints carry them, read as transformers' CLIP classes:
SDXL's second encoder (OpenCLIP ViT-bigG, `conditioner.embedders.1.model.`, the refiner's
`conditioner.embedders.0.model.`) and SD 2.x's (OpenCLIP ViT-H, `cond_stage_model.model.`).

The layout (open_clip's TextTransformer): `token_embedding.weight`, `positional_embedding`,
`transformer.resblocks.N.{ln_1, attn.in_proj_weight/bias (q, k, v fused), attn.out_proj, ln_2,
mlp.c_fc, mlp.c_proj}`, `ln_final`, and `text_projection` as a (width, output) matrix that
multiplies the pooled token (transformers' Linear holds its transpose).

- bigG -> CLIPTextModelWithProjection, every layer: SDXL reads the penultimate hidden states and
  the projected pooled output.
- H -> CLIPTextModel with one layer fewer than the file holds: SD 2.x conditions on the penultimate
  layer, after ln_final, so its diffusers encoder stops there (23 of the file's 24) and has no
  projection; the last layer and the projection in the file are never used.

Config from the shapes (width, depth, vocabulary, positions, MLP width, projection width), the
rest (heads, activation, token ids) from the known configs: the hub repos' `text_encoder*/config.json`
and the tiny factory's. The signature and config functions are torch-free; converters import torch.
"""
import re

from toolkit.models.arch import SingleFile
from toolkit.models.formats.file_view import FileConfig, FileKindError, mismatch

_COMMON = dict(attention_dropout=0.0, dropout=0.0, initializer_factor=1.0, initializer_range=0.02, layer_norm_eps=1e-5,
               max_position_embeddings=77, hidden_act="gelu")
_REAL_IDS = dict(vocab_size=49408, bos_token_id=0, eos_token_id=2, pad_token_id=1)
# the tiny factory's CLIP (toolkit/models/tiny/kit.py clip_text_encoder over its 800-token tokenizer
# padding with "!", its id 33 in that byte-ordered vocabulary), with OpenCLIP's GELU
_TINY = dict(_COMMON, vocab_size=800, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
             projection_dim=32, bos_token_id=798, eos_token_id=799, pad_token_id=33)

OPENCLIP_FACTS = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "max_position_embeddings")
OPENCLIP_G_FACTS = OPENCLIP_FACTS + ("projection_dim",)
OPENCLIP_G_KNOWN = {
    # stabilityai/stable-diffusion-xl-base-1.0 (and -refiner-1.0) text_encoder_2/config.json
    "openclip-vit-bigg-14": dict(_COMMON, **_REAL_IDS, hidden_size=1280, intermediate_size=5120, num_hidden_layers=32,
                                 num_attention_heads=20, projection_dim=1280),
    "tiny": dict(_TINY),
}
OPENCLIP_H_KNOWN = {
    # stabilityai/stable-diffusion-2-1(-base) text_encoder/config.json: 23 of the tower's 24 layers
    "openclip-vit-h-14": dict(_COMMON, **_REAL_IDS, hidden_size=1024, intermediate_size=4096, num_hidden_layers=23,
                              num_attention_heads=16, projection_dim=512),
    "tiny": dict(_TINY),
}
H_UNUSED_LAYERS = 1          # SD 2.x's files hold the tower's last layer, which its encoder never runs


def openclip_signature(view) -> dict:
    """What an OpenCLIP text tower's shapes tell, in transformers' CLIPTextConfig names (the file's
    layer count as num_hidden_layers)."""
    if not view.has("token_embedding.weight") or not view.has("transformer.resblocks.0.attn.in_proj_weight"):
        raise FileKindError("no token_embedding / transformer.resblocks: not an OpenCLIP text tower")
    vocab, width = view.shape("token_embedding.weight")
    sig = {"vocab_size": vocab, "hidden_size": width,
           "intermediate_size": view.dim("transformer.resblocks.0.mlp.c_fc.weight"),
           "num_hidden_layers": view.count(r"transformer\.resblocks\.(\d+)\."),
           "max_position_embeddings": view.dim("positional_embedding")}
    if view.has("text_projection"):
        sig["projection_dim"] = view.dim("text_projection", 1)
    return sig


def _known(sig: dict, known: dict, facts: tuple, what: str) -> FileConfig:
    for name, config in known.items():
        if all(config.get(k) == sig.get(k) for k in facts):
            return FileConfig(dict(config), known=name)
    raise FileKindError(f"{what}: its shapes match no known config ({mismatch(sig, known, facts)})")


def openclip_g_config(view) -> FileConfig:
    return _known(openclip_signature(view), OPENCLIP_G_KNOWN, OPENCLIP_G_FACTS, "OpenCLIP-bigG text encoder")


def openclip_h_config(view) -> FileConfig:
    sig = openclip_signature(view)
    sig["num_hidden_layers"] -= H_UNUSED_LAYERS
    return _known(sig, OPENCLIP_H_KNOWN, OPENCLIP_FACTS, "OpenCLIP-H text encoder")


def _fits(config_fn):
    def fits(view) -> bool:
        try:
            config_fn(view)
        except FileKindError:
            return False
        return True
    return fits


is_openclip_h = _fits(openclip_h_config)


def is_openclip_g(view) -> bool:
    """Any OpenCLIP tower that is not SD 2.x's H: one of no known shape is then refused as bigG,
    naming what differs, instead of going unseen."""
    return not is_openclip_h(view)

_BLOCK = (("ln_1.", "layer_norm1."), ("ln_2.", "layer_norm2."), ("mlp.c_fc.", "mlp.fc1."), ("mlp.c_proj.", "mlp.fc2."),
          ("attn.out_proj.", "self_attn.out_proj."))
_DROPPED = ("logit_scale", "attn_mask")      # open_clip's, no part of the text model


def convert_openclip(state: dict, config: dict, projection: bool = True) -> dict:
    """OpenCLIP -> transformers CLIPTextModel(WithProjection) names (`text_model.` kept; the reader
    aligns it): q, k, v split from in_proj, text_projection transposed into a Linear weight, the
    layers past `num_hidden_layers` left out (SD 2.x's unused last one)."""
    layers, width = config["num_hidden_layers"], config["hidden_size"]
    out = {}
    for key, t in state.items():
        if key in _DROPPED:
            continue
        if key == "token_embedding.weight":
            out["text_model.embeddings.token_embedding.weight"] = t
        elif key == "positional_embedding":
            out["text_model.embeddings.position_embedding.weight"] = t
        elif key.startswith("ln_final."):
            out["text_model.final_layer_norm." + key[len("ln_final."):]] = t
        elif key == "text_projection":
            if projection:
                out["text_projection.weight"] = t.T.contiguous()
        elif m := re.match(r"transformer\.resblocks\.(\d+)\.(.*)", key):
            i, rest = int(m[1]), m[2]
            if i >= layers:
                continue
            head = f"text_model.encoder.layers.{i}."
            if rest in ("attn.in_proj_weight", "attn.in_proj_bias"):
                kind = rest.rsplit("_", 1)[1]
                for n, name in enumerate(("q_proj", "k_proj", "v_proj")):
                    out[f"{head}self_attn.{name}.{kind}"] = t[n * width:(n + 1) * width].clone()
                continue
            for a, b in _BLOCK:
                if rest.startswith(a):
                    rest = b + rest[len(a):]
                    break
            out[head + rest] = t
        else:
            out[key] = t                  # not OpenCLIP's: the reader names it as unexpected
    return out


def convert_openclip_h(state: dict, config: dict) -> dict:
    """SD 2.x's encoder: CLIPTextModel, no projection."""
    return convert_openclip(state, config, projection=False)


def to_openclip(state: dict) -> dict:
    """A transformers CLIPTextModelWithProjection (or CLIPTextModel) state dict in the OpenCLIP
    layout (the inverse of convert_openclip), as SDXL checkpoints carry bigG."""
    state = {k.removeprefix("text_model."): v for k, v in state.items()}
    out = {}
    fused: dict = {}
    for key, t in state.items():
        if key == "embeddings.token_embedding.weight":
            out["token_embedding.weight"] = t
        elif key == "embeddings.position_embedding.weight":
            out["positional_embedding"] = t
        elif key.endswith("position_ids"):
            continue
        elif key.startswith("final_layer_norm."):
            out["ln_final." + key[len("final_layer_norm."):]] = t
        elif key == "text_projection.weight":
            out["text_projection"] = t.T.contiguous()
        elif m := re.match(r"encoder\.layers\.(\d+)\.(.*)", key):
            i, rest = int(m[1]), m[2]
            head = f"transformer.resblocks.{i}."
            if q := re.match(r"self_attn\.(q|k|v)_proj\.(weight|bias)", rest):
                fused.setdefault((head, q[2]), {})[q[1]] = t
                continue
            for a, b in _BLOCK:
                if rest.startswith(b):
                    rest = a + rest[len(b):]
                    break
            out[head + rest] = t
        else:
            raise ValueError(f"{key}: no OpenCLIP name for it")
    import torch
    for (head, kind), parts in fused.items():
        out[f"{head}attn.in_proj_{kind}"] = torch.cat([parts["q"], parts["k"], parts["v"]])
    return out


def to_openclip_h(state: dict) -> dict:
    """SD 2.x's CLIPTextModel as its checkpoints carry the whole tower: the layers the encoder uses,
    then the last one it skips (here a copy of the one before: the file's shape, never read) and a
    square text_projection (likewise unused)."""
    import torch
    out = to_openclip(state)
    last = max(int(m[1]) for k in out if (m := re.match(r"transformer\.resblocks\.(\d+)\.", k)))
    for key in [k for k in out if k.startswith(f"transformer.resblocks.{last}.")]:
        out[key.replace(f"resblocks.{last}.", f"resblocks.{last + 1}.", 1)] = out[key].clone()
    width = out["token_embedding.weight"].shape[1]
    out["text_projection"] = torch.eye(width, dtype=out["token_embedding.weight"].dtype)
    return out


_ANCHORS = ("token_embedding.weight", "positional_embedding", "ln_final.weight",
            "transformer.resblocks.0.attn.in_proj_weight")
OPENCLIP_G = SingleFile(
    converter="toolkit.models.formats.openclip:convert_openclip",
    original="toolkit.models.formats.openclip:to_openclip",
    kind="openclip_g", label="OpenCLIP-bigG text encoder", anchors=_ANCHORS,
    prefixes=("conditioner.embedders.1.model.", "conditioner.embedders.0.model.", ""),
    config="toolkit.models.formats.openclip:openclip_g_config", matches="toolkit.models.formats.openclip:is_openclip_g")
OPENCLIP_H = SingleFile(
    converter="toolkit.models.formats.openclip:convert_openclip_h",
    original="toolkit.models.formats.openclip:to_openclip_h",
    kind="openclip_h", label="OpenCLIP-H text encoder", anchors=_ANCHORS,
    prefixes=("cond_stage_model.model.", ""),
    config="toolkit.models.formats.openclip:openclip_h_config", matches="toolkit.models.formats.openclip:is_openclip_h")

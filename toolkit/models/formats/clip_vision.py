"""CLIP vision encoders as ComfyUI keeps them: one .safetensors in models/clip_vision, in transformers'
CLIPVisionModelWithProjection key names (`vision_model.*`, `visual_projection.weight`) and no config.

The config comes from the shapes: width, patch and image size, layers, MLP width and projection; what
shapes cannot tell is ComfyUI's own clip_vision_config_*.json: 16 heads in every tower it ships
(ViT-L/14, ViT-H/14, ViT-bigG/14), quick_gelu for OpenAI's ViT-L/14 (1024 wide), gelu for the
OpenCLIP ones. The file is then read by transformers' own loader, staged as a one-file folder.
"""
import json
import math
import os
import shutil
import tempfile

from toolkit.models.formats.safetensors_header import check_file

HEADS = 16
ACT_BY_WIDTH = {1024: "quick_gelu"}      # OpenAI ViT-L/14; the OpenCLIP towers use gelu
PREFIXES = ("",)


def _prefix(keys) -> str:
    for p in PREFIXES:
        if f"{p}vision_model.embeddings.patch_embedding.weight" in keys:
            return p
    raise ValueError("no vision_model.embeddings.patch_embedding.weight: not a CLIP vision model")


def config_from_header(path: str) -> dict:
    shapes = {k: tuple(t.shape) for k, t in check_file(path).tensors.items()}
    p = _prefix(shapes)
    hidden, _c, patch, _p = shapes[f"{p}vision_model.embeddings.patch_embedding.weight"]
    positions = shapes[f"{p}vision_model.embeddings.position_embedding.weight"][0]
    layers = 1 + max(int(k[len(f"{p}vision_model.encoder.layers."):].split(".")[0]) for k in shapes
                     if k.startswith(f"{p}vision_model.encoder.layers."))
    if f"{p}visual_projection.weight" not in shapes:
        raise ValueError("no visual_projection.weight: a CLIP vision model without its projection")
    return {"model_type": "clip_vision_model", "architectures": ["CLIPVisionModelWithProjection"],
            "hidden_size": hidden, "patch_size": patch, "image_size": patch * math.isqrt(positions - 1),
            "num_hidden_layers": layers, "num_attention_heads": HEADS if hidden % HEADS == 0 else 1,
            "intermediate_size": shapes[f"{p}vision_model.encoder.layers.0.mlp.fc1.weight"][0],
            "projection_dim": shapes[f"{p}visual_projection.weight"][0],
            "hidden_act": ACT_BY_WIDTH.get(hidden, "gelu"), "layer_norm_eps": 1e-5, "num_channels": 3}


def read_clip_vision(path: str, component: str = "image_encoder", policy=None):
    """The file as a CLIPVisionModelWithProjection (transformers' loader over a staged folder)."""
    from transformers import CLIPVisionModelWithProjection

    config = config_from_header(path)
    stage = tempfile.mkdtemp(prefix="aitk_clip_vision_")
    try:
        with open(os.path.join(stage, "config.json"), "w") as f:
            json.dump(config, f)
        os.symlink(os.path.abspath(path), os.path.join(stage, "model.safetensors"))
        kw = {"dtype": policy.dtype} if policy is not None else {}
        return CLIPVisionModelWithProjection.from_pretrained(stage, local_files_only=True, **kw)
    finally:
        shutil.rmtree(stage, ignore_errors=True)


read_clip_vision.format_name = "comfyui-clip-vision"

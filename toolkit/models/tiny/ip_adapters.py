"""Tiny random IP-Adapters for the tiny models, with their tiny CLIP vision image encoder, in the layouts
people have them.

    write_tiny_ip_adapters(root, {arch: model_folder}, seed=0) -> {name: path}

Under `root`:
- h94/IP-Adapter's repo layout: `models/image_encoder/` (config.json + model.safetensors, the encoder),
  the adapter where the arch row's IPAdapter.file says (SD 1.5: `models/ip-adapter_sd15.safetensors`; SDXL:
  `sdxl_models/ip-adapter_sdxl_vit-h.safetensors`, as h94's vit-h SDXL adapters over the models/ image
  encoder), and a `.bin` beside it (the same weights as the torch dict {"image_proj", "ip_adapter"} h94 also ships);
- XLabs-AI/flux-ip-adapter's for Flux: `ip_adapter.safetensors` (the file FluxIPAdapterMixin.load_ip_adapter
  reads: `ip_adapter_proj_model.proj.*` / `.norm.*`, and `double_blocks.N.processor.ip_adapter_double_stream_k_proj`
  / `_v_proj` `.weight` + `.bias` for each of the transformer's N double blocks), over the same encoder (XLabs'
  adapter runs on openai/clip-vit-large-patch14, a CLIP vision model as any);
- ComfyUI's: `ComfyUI/models/ipadapter/<same names>` and `ComfyUI/models/clip_vision/tiny_clip_vision.safetensors`
  (the encoder's one file, transformers' key names, no config).
Keys as h94 writes them: `image_proj.proj.weight` (4 tokens x the UNet's cross-attention width, by the
encoder's projection width), `image_proj.norm.*`, and `ip_adapter.<k>.to_k_ip.weight` / `to_v_ip.weight`
for the k-th attention processor of the UNet that is a cross attention (k = 1, 3, 5, ...: diffusers'
numbering). Weights are large enough to change an output visibly.
"""
from __future__ import annotations

import os
import pathlib
import shutil

ENCODER = dict(hidden_size=32, intermediate_size=64, projection_dim=16, num_hidden_layers=2, num_attention_heads=16,
               image_size=32, patch_size=8, hidden_act="gelu", layer_norm_eps=1e-5)


def adapter_file(arch: str) -> str:
    """Where the arch's adapter lies in its publisher's repo layout (its row's IPAdapter.file)."""
    from toolkit.models.registry import get_arch
    return get_arch(arch).ip_adapter.file
TOKENS = 4


def _encoder(seed: int):
    from transformers import CLIPVisionConfig, CLIPVisionModelWithProjection

    from toolkit.models.tiny.kit import seeded_rng
    with seeded_rng(seed, "ip_image_encoder"):
        return CLIPVisionModelWithProjection(CLIPVisionConfig(**ENCODER)).eval()


def unet_tensors(unet_config: dict, embed_dim: int, seed: int, name: str) -> dict:
    """An h94 adapter's tensors for a UNet of `unet_config` over `embed_dim`-wide image embeds."""
    import torch
    from diffusers import UNet2DConditionModel

    from toolkit.models.tiny.kit import seeded_rng
    with torch.device("meta"):
        unet = UNet2DConditionModel.from_config(unet_config)
    blocks, cross = unet.config.block_out_channels, unet.config.cross_attention_dim
    out = {}
    with seeded_rng(seed, name):
        out["image_proj.proj.weight"] = torch.randn(TOKENS * cross, embed_dim) * 0.5
        out["image_proj.proj.bias"] = torch.randn(TOKENS * cross) * 0.1
        out["image_proj.norm.weight"] = 1 + torch.randn(cross) * 0.1
        out["image_proj.norm.bias"] = torch.randn(cross) * 0.1
        key = 1
        for proc in unet.attn_processors:
            if proc.endswith("attn1.processor"):
                continue
            if proc.startswith("mid_block"):
                hidden = blocks[-1]
            elif proc.startswith("up_blocks"):
                hidden = list(reversed(blocks))[int(proc[len("up_blocks.")])]
            else:
                hidden = blocks[int(proc[len("down_blocks.")])]
            for kv in ("to_k_ip", "to_v_ip"):
                out[f"ip_adapter.{key}.{kv}.weight"] = torch.randn(hidden, cross) * 0.5
            key += 2
    return out


def xlabs_tensors(transformer_config: dict, embed_dim: int, seed: int, name: str) -> dict:
    """An XLabs Flux adapter's tensors for a Flux transformer of `transformer_config` over `embed_dim`-wide
    image embeds: 4 image tokens of the joint attention width, a k and v projection per double block
    (joint width -> the transformer's inner width, with bias, as XLabs trains them)."""
    import torch

    from toolkit.models.tiny.kit import seeded_rng
    joint = transformer_config["joint_attention_dim"]
    inner = transformer_config["num_attention_heads"] * transformer_config["attention_head_dim"]
    out = {}
    with seeded_rng(seed, name):
        out["ip_adapter_proj_model.proj.weight"] = torch.randn(TOKENS * joint, embed_dim) * 0.5
        out["ip_adapter_proj_model.proj.bias"] = torch.randn(TOKENS * joint) * 0.1
        out["ip_adapter_proj_model.norm.weight"] = 1 + torch.randn(joint) * 0.1
        out["ip_adapter_proj_model.norm.bias"] = torch.randn(joint) * 0.1
        for n in range(transformer_config["num_layers"]):
            for kv in ("k", "v"):
                key = f"double_blocks.{n}.processor.ip_adapter_double_stream_{kv}_proj"
                out[f"{key}.weight"] = torch.randn(inner, joint) * 0.5
                out[f"{key}.bias"] = torch.randn(inner) * 0.1
    return out


def _tensors(layout: str, folder: str, seed: int, name: str) -> dict:
    """The adapter's tensors in `layout` (h94 over a UNet, XLabs over a Flux transformer)."""
    import json

    with open(os.path.join(folder, "unet" if layout == "h94" else "transformer", "config.json")) as f:
        config = json.load(f)
    make = unet_tensors if layout == "h94" else xlabs_tensors
    return make(config, ENCODER["projection_dim"], seed, name)


def write_tiny_ip_adapters(root, models: dict, seed: int = 0) -> dict:
    """The tiny encoder and an adapter per arch of `models` ({arch: tiny model folder}) under `root`."""
    import torch
    from safetensors.torch import save_file

    from toolkit.models.registry import get_arch
    root = pathlib.Path(root)
    encoder_dir = root / "models" / "image_encoder"
    encoder = _encoder(seed)
    encoder.save_pretrained(encoder_dir, safe_serialization=True)
    comfy = root / "ComfyUI" / "models"
    (comfy / "clip_vision").mkdir(parents=True, exist_ok=True)
    (comfy / "ipadapter").mkdir(parents=True, exist_ok=True)
    shutil.copy(encoder_dir / "model.safetensors", comfy / "clip_vision" / "tiny_clip_vision.safetensors")
    out = {"image_encoder": str(encoder_dir), "clip_vision": str(comfy / "clip_vision" / "tiny_clip_vision.safetensors")}
    for arch, folder in models.items():
        layout = get_arch(arch).ip_adapter.layout
        tensors = _tensors(layout, folder, seed, f"ip_adapter_{arch}")
        path = root / adapter_file(arch)
        path.parent.mkdir(parents=True, exist_ok=True)
        save_file(tensors, str(path))
        out[arch] = str(path)
        shutil.copy(path, comfy / "ipadapter" / path.name)
        if layout != "h94":
            continue                # XLabs ships its one .safetensors; h94 a .bin beside it too
        torch.save({part: {k[len(part) + 1:]: v for k, v in tensors.items() if k.startswith(part + ".")}
                    for part in ("image_proj", "ip_adapter")}, str(path.with_suffix(".bin")))
    return out

"""Tiny random annotator models (toolkit/annotators.py), in the transformers folder layout the hub repos have
(config.json, model.safetensors, preprocessor_config.json), for tests and offline installs.

    write_tiny_annotator(key, folder, seed=0) -> Path      # key: depth_anything | dpt
    python -m toolkit.models.tiny.annotators <key> <folder> [--seed N]

Depth Anything: a 4-layer DINOv2 backbone 16 wide, patch 14, its processor at 56 px keeping the aspect ratio
(a multiple of 14), as the real ones at 518. DPT: a 4-layer ViT 16 wide, patch 8, at 32x32 (the real dpt-large:
384x384, no aspect ratio kept).
"""
from __future__ import annotations

import argparse
from pathlib import Path

KEYS = ("depth_anything", "dpt")


def tiny_annotator(key: str, seed: int = 0):
    """(model, image_processor) with random weights drawn from `seed`."""
    import torch
    from transformers import (DepthAnythingConfig, DepthAnythingForDepthEstimation, Dinov2Config, DPTConfig,
                              DPTForDepthEstimation, DPTImageProcessor)

    with torch.random.fork_rng():
        torch.manual_seed(seed)
        if key == "depth_anything":
            backbone = Dinov2Config(hidden_size=16, num_hidden_layers=4, num_attention_heads=2, intermediate_size=32,
                                    image_size=28, patch_size=14, out_indices=[1, 2, 3, 4], reshape_hidden_states=False,
                                    apply_layernorm=True)
            model = DepthAnythingForDepthEstimation(DepthAnythingConfig(
                backbone_config=backbone, reassemble_hidden_size=16, neck_hidden_sizes=[8, 8, 8, 8],
                fusion_hidden_size=8, head_hidden_size=8, patch_size=14))
            processor = DPTImageProcessor(size={"height": 56, "width": 56}, keep_aspect_ratio=True, ensure_multiple_of=14,
                                          resample=3, image_mean=[0.485, 0.456, 0.406], image_std=[0.229, 0.224, 0.225])
        elif key == "dpt":
            model = DPTForDepthEstimation(DPTConfig(
                hidden_size=16, num_hidden_layers=4, num_attention_heads=2, intermediate_size=32, image_size=32,
                patch_size=8, backbone_out_indices=[0, 1, 2, 3], neck_hidden_sizes=[8, 8, 8, 8], fusion_hidden_size=8,
                head_in_index=-1, readout_type="project"))
            processor = DPTImageProcessor(size={"height": 32, "width": 32}, keep_aspect_ratio=False,
                                          image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5])
        else:
            raise ValueError(f"no tiny annotator {key!r} (known: {', '.join(KEYS)})")
    return model.eval(), processor


def write_tiny_annotator(key: str, folder, seed: int = 0) -> Path:
    """The tiny `key` annotator saved into `folder` (created) as the hub repos hold it."""
    model, processor = tiny_annotator(key, seed)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    processor.save_pretrained(folder)
    return folder


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("key", choices=KEYS)
    ap.add_argument("folder")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    print(write_tiny_annotator(args.key, args.folder, args.seed))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

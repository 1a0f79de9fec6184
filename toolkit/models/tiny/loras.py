"""Tiny random LoRA files for the tiny models, in the layouts people download them in.

    write_tiny_lora(arch, model_folder, out_file, fmt="peft", seed=0, rank=4, text_encoder=False) -> Path
    python -m toolkit.models.tiny.loras <arch> <out_file> [--format peft|kohya|comfyui] [--seed N]
                                        [--model-folder F] [--rank R] [--text-encoder]

Formats (`ArchSpec.lora.formats` lists the ones an arch takes):
- peft: diffusers/PEFT keys, `<role>.<module>.lora_A.weight` / `.lora_B.weight` (what diffusers'
  `save_lora_weights` and ai-toolkit write);
- kohya: `lora_unet_<module with underscores>.lora_down.weight` / `.lora_up.weight` / `.alpha`, text
  encoders under `lora_te_` / `lora_te1_` / `lora_te2_`, and kohya's `ss_*` metadata (output name,
  tag frequency, network dim and alpha, base model);
- comfyui: `diffusion_model.<original checkpoint module>` with the arch's down/up key names.

Which layers a LoRA trains and what each format calls them is the arch's data
(`ArchSpec.lora.modules`). The shapes come from the model's safetensors headers, and the weights from
numpy seeded by (seed, format), so no model is instantiated, torch is not needed, and the same
arguments always write the same bytes. The weights are large enough to change an output visibly.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
from typing import Sequence

from toolkit.models.formats.safetensors_header import read_header
from toolkit.models.tiny.kit import component_seed

KOHYA_DOWN_UP = ("lora_down", "lora_up")
PEFT_DOWN_UP = ("lora_A", "lora_B")
# kohya's text-encoder LoRAs train the attention projections
TEXT_ENCODER_LAYERS = r"self_attn\.(q_proj|k_proj|v_proj|out_proj)$"


def linears(component_folder: str | os.PathLike) -> dict:
    """{module name: (in_features, out_features)} of a component's Linear layers, from its headers."""
    out = {}
    for path in sorted(pathlib.Path(component_folder).glob("*.safetensors")):
        for name, info in read_header(str(path)).tensors.items():
            if name.endswith(".weight") and info.ndim == 2:
                out[name[:-len(".weight")]] = (info.shape[1], info.shape[0])
    if not out:
        raise FileNotFoundError(f"{component_folder}: no safetensors weights")
    return out


def _spec(arch: str, fmt: str):
    from toolkit.models.registry import get_arch

    spec = get_arch(arch)
    formats = spec.lora.formats if spec.lora else ()
    if fmt not in formats:
        raise ValueError(f"arch {arch} takes LoRA files in {', '.join(formats) or 'no format'}, not {fmt!r}")
    return spec


def lora_tensors(arch: str, model_folder, fmt: str = "peft", seed: int = 0, rank: int = 4,
                 text_encoder: bool = False) -> dict:
    """{key: numpy array} of a random LoRA for the tiny model in `model_folder`, keyed as `fmt` keys it."""
    import numpy as np

    spec = _spec(arch, fmt)
    lora, folder = spec.lora, pathlib.Path(model_folder)
    role = spec.denoiser_roles[0]
    rng = np.random.default_rng(component_seed(seed, f"lora.{fmt}"))
    alpha = rank / 2 if fmt in lora.alpha else None     # != rank, so a reader that ignores alpha is caught

    def pair(key_stem: str, down_up: tuple, n_in: int, n_out: int, out: dict):
        out[f"{key_stem}.{down_up[0]}.weight"] = (rng.standard_normal((rank, n_in)) / np.sqrt(n_in)).astype(np.float32)
        out[f"{key_stem}.{down_up[1]}.weight"] = (rng.standard_normal((n_out, rank)) / np.sqrt(rank)).astype(np.float32)
        if alpha is not None:
            # kohya writes alpha in the save dtype: F16 here, so readers decode more than F32
            out[f"{key_stem}.alpha"] = np.asarray(alpha, dtype=np.float16 if fmt == "kohya" else np.float32)

    tensors: dict = {}
    for name, n_in, n_out in lora.module_names(fmt, linears(folder / role)):
        if fmt == "peft":
            pair(f"{role}.{name}", PEFT_DOWN_UP, n_in, n_out, tensors)
        elif fmt == "kohya":
            pair("lora_unet_" + name.replace(".", "_"), KOHYA_DOWN_UP, n_in, n_out, tensors)
        else:
            pair(f"diffusion_model.{name}", lora.comfy_keys, n_in, n_out, tensors)
    if text_encoder:
        if fmt == "comfyui" or not lora.text_encoders:
            raise ValueError(f"arch {arch}: no {fmt} text-encoder LoRA layout")
        from toolkit.models.arch import pick_linears
        for prefix, te_role in lora.text_encoders.items():
            for name, n_in, n_out in pick_linears(linears(folder / te_role), TEXT_ENCODER_LAYERS):
                if fmt == "peft":
                    pair(f"{te_role}.{name}", PEFT_DOWN_UP, n_in, n_out, tensors)
                else:   # kohya names CLIP as the original model does, under text_model
                    full = name if name.startswith("text_model.") else f"text_model.{name}"
                    pair(f"{prefix}_" + full.replace(".", "_"), KOHYA_DOWN_UP, n_in, n_out, tensors)
    return tensors


def lora_metadata(arch: str, fmt: str, out_name: str, rank: int, alpha) -> dict:
    """The metadata trainers write: kohya's `ss_*` keys, a modelspec title/architecture for ComfyUI files."""
    meta = {"format": "pt"}
    if fmt == "kohya":
        trigger = f"{out_name}_style"
        # the trigger word is in every caption; other tags in some (what lora_headers reads back)
        tags = {"1_" + trigger: {trigger: 12, "photo": 7, "red": 2}}
        meta.update(ss_output_name=out_name, ss_tag_frequency=json.dumps(tags), ss_network_dim=str(rank),
                    ss_network_alpha=str(alpha), ss_network_module="networks.lora", ss_base_model_version=f"tiny_{arch}")
    elif fmt == "comfyui":
        meta.update({"modelspec.architecture": f"tiny-{arch}/lora", "modelspec.title": out_name})
    return meta


def write_tiny_lora(arch: str, model_folder, out_file, fmt: str = "peft", seed: int = 0, rank: int = 4,
                    text_encoder: bool = False) -> pathlib.Path:
    """Write a random LoRA for the tiny model of `arch` in `model_folder` to `out_file` (.safetensors)."""
    from safetensors.numpy import save_file

    spec = _spec(arch, fmt)
    tensors = lora_tensors(arch, model_folder, fmt, seed, rank, text_encoder)
    out = pathlib.Path(out_file)
    out.parent.mkdir(parents=True, exist_ok=True)
    alpha = rank / 2 if fmt in spec.lora.alpha else rank
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    save_file(tensors, str(tmp), metadata=lora_metadata(arch, fmt, out.stem, rank, alpha))
    os.replace(tmp, out)        # a reader never sees a half-written file
    return out


def main(argv: Sequence[str] | None = None) -> int:
    from toolkit.models.arch import LORA_FORMATS
    from toolkit.models.tiny import cached_tiny

    parser = argparse.ArgumentParser(prog="python -m toolkit.models.tiny.loras",
                                     description="Write a tiny random LoRA for a tiny model (offline).")
    parser.add_argument("arch")
    parser.add_argument("out_file")
    parser.add_argument("--format", default="peft", choices=LORA_FORMATS)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rank", type=int, default=4)
    parser.add_argument("--text-encoder", action="store_true", help="train the text encoders too (peft, kohya)")
    parser.add_argument("--model-folder", help="the tiny model (default: the cached tiny:<arch> build)")
    args = parser.parse_args(argv)
    try:
        folder = args.model_folder or cached_tiny(args.arch)
        path = write_tiny_lora(args.arch, folder, args.out_file, args.format, args.seed, args.rank, args.text_encoder)
    except (ValueError, KeyError, FileNotFoundError) as e:
        parser.exit(2, f"error: {e}\n")
    print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

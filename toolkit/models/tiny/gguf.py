"""Tiny GGUF denoisers, written the way real ones are (city96's ComfyUI-GGUF tools + llama-quantize).

    make_tiny_gguf(arch, folder, qtypes=QUANT_TYPES, seed=0) -> {"folder": Path, "files": {qtype: Path}}
    write_gguf(transformer, path, qtype) -> Path
    python -m toolkit.models.tiny.gguf --arch flux --out DIR [--qtype Q4_K ...]

`folder` is the arch's tiny pipeline (its text encoders, VAE, tokenizers, scheduler: what
`extras_name_or_path` names) with a *wider* float32 transformer: real GGUF types quantize rows in
blocks of 32 (Q8_0, Q4_0) or 256 values (K-quants), so the tiny denoiser's inner width is 256 (the
arch row's `gguf.tiny`). That float32 transformer is the reference the GGUF files are measured against.

Each file: the transformer's state dict in the model's original key layout
(toolkit/models/formats/gguf_layouts.py), `general.architecture` (ComfyUI-GGUF's name, the row's),
`general.file_type` and `general.quantization_version`, tensors as real files have them: 1-D tensors
and tensors of at most 1024 values in F32; 2-D+ weights in the requested type when their rows fit
its block, else F16 (what convert.py falls back to); tensors of more than 4 dimensions (Wan's
patch embedding) in F32 with their 5-D shape, as ComfyUI-GGUF's fix_5d_tensors.py adds them back.
"""
from __future__ import annotations

import argparse
import os
import pathlib

from toolkit.models.formats.gguf_quants import BLOCK, QUANT_TYPES, quantize

SMALL = 1024                 # convert.py's QUANTIZATION_THRESHOLD: tensors this small stay F32
MAX_DIMS = 4
FILE_TYPES = {"F16": 1, "Q4_0": 2, "Q8_0": 7, "Q4_K": 15, "Q5_K": 17, "Q6_K": 18}   # gguf.LlamaFileType (_M)


def tensor_type(name: str, shape: tuple, qtype: str, hiprec: tuple = ()) -> str:
    """The GGML type a real conversion gives this tensor (`hiprec`: the architecture's F32 keys)."""
    n = 1
    for s in shape:
        n *= s
    if len(shape) == 1 or len(shape) > MAX_DIMS or n <= SMALL or any(k in name for k in hiprec):
        return "F32"
    if qtype in ("F16", "F32"):
        return qtype
    return qtype if shape[-1] % BLOCK[qtype] == 0 else "F16"


def write_gguf(transformer, path, qtype: str) -> pathlib.Path:
    """Write `transformer` (a diffusers model) as a GGUF file of `qtype` in its original key layout."""
    import gguf
    import numpy as np

    from toolkit.models.formats.gguf_layouts import layout, to_original

    cls_name = type(transformer).__name__
    row, _ = layout(cls_name)
    sd = {k: v.detach().float().cpu() for k, v in transformer.state_dict().items()}
    original = to_original(cls_name, sd)
    path = pathlib.Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    writer = gguf.GGUFWriter(path=None, arch=row.architecture)
    writer.add_quantization_version(gguf.GGML_QUANT_VERSION)
    writer.add_file_type(FILE_TYPES.get(qtype, 1))
    for name in sorted(original):
        data = original[name].numpy().astype(np.float32)
        ttype = tensor_type(name, data.shape, qtype, row.hiprec)
        writer.add_tensor(name, quantize(data, ttype), raw_dtype=gguf.GGMLQuantizationType[ttype])
    writer.write_header_to_file(path=str(tmp))
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    os.replace(tmp, path)
    return path


def wide_transformer(transformer, seed: int = 0):
    """The tiny transformer's class at its GGUF row's widths, with every weight drawn (no
    zero-initialised output layer or modulation), so quantization error shows in the output."""
    import torch

    from toolkit.models.formats.gguf_layouts import layout

    cls = type(transformer)
    config = {k: v for k, v in transformer.config.items() if not k.startswith("_")}
    config.update(layout(cls.__name__)[0].tiny)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = cls.from_config(config).eval()
        with torch.no_grad():
            for name, p in model.named_parameters():
                fan_in = p.shape[1] if p.ndim > 1 else 1
                p.copy_(torch.randn_like(p) / fan_in ** 0.5 if p.ndim > 1 else 1 + 0.1 * torch.randn_like(p)
                        if "norm" in name else 0.1 * torch.randn_like(p))
    return model


def make_tiny_gguf(arch: str, folder, qtypes=QUANT_TYPES, seed: int = 0) -> dict:
    """The arch's tiny pipeline with a wide float32 transformer in `folder`, and one GGUF file of its
    transformer per type in `folder/gguf/` (named as real ones are: <arch>-tiny-<TYPE>.gguf). Reused
    when every file is there; the GGUF files are written last, each atomically."""
    from toolkit.models.formats.gguf_layouts import readable
    from toolkit.models.tiny import build_pipeline

    folder = pathlib.Path(folder).expanduser().absolute()
    files = {q: folder / "gguf" / f"{arch}-tiny-{q}.gguf" for q in qtypes}
    if not ((folder / "model_index.json").is_file() and all(f.is_file() for f in files.values())):
        pipe = build_pipeline(arch, seed)
        if type(pipe.transformer).__name__ not in readable():
            raise ValueError(f"{arch}: no GGUF layout for {type(pipe.transformer).__name__}")
        pipe.transformer = wide_transformer(pipe.transformer, seed)
        pipe.register_modules(transformer=pipe.transformer)
        pipe.save_pretrained(folder, safe_serialization=True)
        (folder / "gguf").mkdir(exist_ok=True)
        for q, f in files.items():
            write_gguf(pipe.transformer, f, q)
    return {"folder": folder, "files": files}


def main(argv=None) -> int:
    from toolkit.models.tiny import tiny_archs

    p = argparse.ArgumentParser(prog="python -m toolkit.models.tiny.gguf",
                                description="Write a tiny pipeline and GGUF files of its transformer (offline).")
    p.add_argument("--arch", required=True, choices=tiny_archs())
    p.add_argument("--out", required=True)
    p.add_argument("--qtype", action="append", choices=QUANT_TYPES, help="repeatable; default: every type")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    made = make_tiny_gguf(args.arch, args.out, tuple(args.qtype or QUANT_TYPES), args.seed)
    print(made["folder"])
    for f in made["files"].values():
        print(f)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

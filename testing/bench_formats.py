"""Weight formats at real width: resident bytes, load time and per-step time against bf16.

    .venv/bin/python testing/bench_load.py --formats [--double 1 --single 1 --tokens 256 --repeat 3]

The model is a FLUX.1-width block stack (3072 wide, 24 heads x 128, random weights; `--double`
double-stream and `--single` single-stream blocks), written once per format and loaded back through
the funnel as a user's file would be. A "step" is one transformer forward at `--tokens` image
tokens and 64 text tokens, bf16 activations. FORMAT_ROWS is the table: a row is (name, write(model
folder, work dir) -> path, load(path, model folder) -> module, prepare(module)); other formats
(GGUF) add rows.
"""
import os
import statistics
import time

import torch

BF16 = torch.bfloat16


def build_folder(work: str, double: int, single: int) -> str:
    """A diffusers folder (transformer/ only) of a FLUX.1-width stack in bf16."""
    from diffusers import FluxTransformer2DModel
    folder = os.path.join(work, "flux_stack")
    torch.manual_seed(0)
    model = FluxTransformer2DModel(num_layers=double, num_single_layers=single, guidance_embeds=True).to(BF16)
    model.save_pretrained(os.path.join(folder, "transformer"))
    return folder


def _funnel():
    from diffusers import FluxTransformer2DModel
    from toolkit.models.v2 import aitk
    return aitk(FluxTransformer2DModel)


def _policy():
    from toolkit.models.v2 import LoadPolicy
    return LoadPolicy(dtype=BF16)


def write_bf16(folder, work):
    return folder


def load_bf16(path, folder):
    return _funnel().load(path, role="transformer", subfolder="transformer", policy=_policy())


def write_fp8(folder, work):
    from toolkit.models.tiny.comfy_fp8 import write_comfy_fp8
    path = os.path.join(work, "flux_stack_fp8_scaled.safetensors")
    if not os.path.exists(path):
        write_comfy_fp8("flux", folder, path)
    return path


def load_fp8(path, folder):
    from toolkit.models.registry import get_arch
    row = next(c for c in get_arch("flux").components if c.role == "transformer").single_file
    return _funnel().load(path, role="transformer", subfolder="transformer", config_source=folder,
                          converter=row.converter, policy=_policy())


def scaled_mm(module):
    from toolkit.models.formats.scaled_fp8 import enable_scaled_mm
    enable_scaled_mm(module, dtype=BF16)


FORMAT_ROWS = [
    ("bf16 (diffusers folder)", write_bf16, load_bf16, None),
    ("ComfyUI scaled FP8, dequantized per call", write_fp8, load_fp8, None),
    ("ComfyUI scaled FP8, _scaled_mm (CPU)", write_fp8, load_fp8, scaled_mm),
]


def resident_bytes(module) -> int:
    return sum(t.numel() * t.element_size() for t in list(module.parameters()) + list(module.buffers()))


def disk_bytes(path) -> int:
    if os.path.isfile(path):
        return os.path.getsize(path)
    return sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(path) for f in fs)


def step_inputs(model, tokens: int, text: int = 64):
    g = torch.Generator().manual_seed(1)
    c = model.config
    side = int(tokens ** 0.5)
    axis = torch.arange(side).float()
    img_ids = torch.stack(torch.meshgrid(torch.zeros(1), axis, axis, indexing="ij"), -1).reshape(-1, 3)
    return dict(hidden_states=torch.randn(1, side * side, c.in_channels, generator=g).to(BF16),
                encoder_hidden_states=torch.randn(1, text, c.joint_attention_dim, generator=g).to(BF16),
                pooled_projections=torch.randn(1, c.pooled_projection_dim, generator=g).to(BF16),
                timestep=torch.tensor([0.5], dtype=BF16), guidance=torch.tensor([3.5], dtype=BF16),
                img_ids=img_ids, txt_ids=torch.zeros(text, 3), return_dict=False)


def run(work: str, double: int = 1, single: int = 1, tokens: int = 256, repeat: int = 3, rows=None) -> list:
    """One result dict per format row."""
    folder = build_folder(work, double, single)
    results, reference = [], None
    for name, write, load, prepare in rows or FORMAT_ROWS:
        path = write(folder, work)
        t0 = time.perf_counter()
        module = load(path, folder)
        load_s = time.perf_counter() - t0
        if prepare:
            prepare(module)
        inputs = step_inputs(module, tokens)
        with torch.no_grad():
            out = module(**inputs)[0].float()
            times = []
            for _ in range(repeat):
                t0 = time.perf_counter()
                module(**inputs)
                times.append(time.perf_counter() - t0)
        reference = out if reference is None else reference
        results.append({"format": name, "disk_bytes": disk_bytes(path), "resident_bytes": resident_bytes(module),
                        "load_s": load_s, "step_s": statistics.median(times),
                        "rel_error_vs_first": float((out - reference).norm() / reference.norm())})
        del module
    base = results[0]["step_s"]
    for r in results:
        r["step_vs_bf16"] = r["step_s"] / base
    return results


def table(results: list) -> str:
    lines = ["| format | disk | resident | load | step | step vs bf16 | output vs bf16 |",
             "|---|---|---|---|---|---|---|"]
    for r in results:
        lines.append(f"| {r['format']} | {r['disk_bytes'] / 1e9:.2f} GB | {r['resident_bytes'] / 1e9:.2f} GB | "
                     f"{r['load_s']:.2f} s | {r['step_s']:.2f} s | {r['step_vs_bf16']:.2f}x | "
                     f"{r['rel_error_vs_first']:.4f} |")
    return "\n".join(lines)

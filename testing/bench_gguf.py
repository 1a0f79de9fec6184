"""GGUF against bf16 at real width: resident bytes, load time and per-step time of a Flux transformer
with FLUX.1's width (3072, 24 heads of 128) and a few blocks of random weights, on this machine.

    .venv/bin/python testing/bench_gguf.py [--double 0 --single 1] [--tokens 256] [--repeat 3]

Every row is loaded through the funnel (`aitk(FluxTransformer2DModel).load`): the bf16 row from a
diffusers folder, each GGUF row from a file the tiny factory's writer made of the same weights
(compute dtype bf16). Per-step time is one transformer forward over `--tokens` image tokens and 64
text tokens. Prints a table and writes testing/.bench/bench_gguf.json. `gguf_rows()` is what a
`bench_load.py --formats` table can include.
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

from toolkit.models.formats.gguf_quants import QUANT_TYPES  # noqa: E402


def resident_bytes(module) -> int:
    return sum(t.numel() * t.element_size() for t in list(module.parameters()) + list(module.buffers()))


def _model(double, single):
    from diffusers import FluxTransformer2DModel
    torch.manual_seed(0)
    m = FluxTransformer2DModel(num_layers=double, num_single_layers=single, guidance_embeds=True).to(torch.bfloat16)
    with torch.no_grad():
        for p in m.parameters():
            p.normal_(0, p.shape[1] ** -0.5 if p.ndim > 1 else 0.02)
    return m.eval()


def _inputs(tokens):
    g = torch.Generator().manual_seed(1)
    side = int(tokens ** 0.5)
    axes = (torch.zeros(1), torch.arange(side, dtype=torch.float32), torch.arange(side, dtype=torch.float32))
    img_ids = torch.stack(torch.meshgrid(*axes, indexing="ij"), -1).reshape(-1, 3)
    return dict(hidden_states=torch.randn(1, side * side, 64, generator=g).bfloat16(),
                encoder_hidden_states=torch.randn(1, 64, 4096, generator=g).bfloat16(),
                pooled_projections=torch.randn(1, 768, generator=g).bfloat16(),
                timestep=torch.tensor([0.5]).bfloat16(), guidance=torch.tensor([3.5]).bfloat16(),
                img_ids=img_ids, txt_ids=torch.zeros(64, 3))


def _step_seconds(model, inputs, repeat):
    with torch.no_grad():
        model(**inputs)                       # warm-up
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            model(**inputs)
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def gguf_rows(double=0, single=1, tokens=256, repeat=3, qtypes=QUANT_TYPES, workdir=None) -> list:
    """[{format, file_bytes, resident_bytes, load_s, step_s}] for bf16 and each GGUF type."""
    from diffusers import FluxTransformer2DModel

    from toolkit.models.tiny.gguf import write_gguf
    from toolkit.models.v2 import LoadPolicy, aitk

    work = workdir or tempfile.mkdtemp(prefix="bench_gguf_")
    folder = os.path.join(work, "flux")
    files = {q: os.path.join(work, f"flux-{q}.gguf") for q in qtypes}
    if not all(os.path.isfile(f) for f in files.values()):
        model = _model(double, single)
        model.save_pretrained(os.path.join(folder, "transformer"))
        for q in qtypes:
            write_gguf(model, files[q], q)
        del model
    inputs = _inputs(tokens)
    cls, policy = aitk(FluxTransformer2DModel), LoadPolicy(torch.bfloat16, "cpu")
    rows = []
    for fmt, source in [("bf16", folder)] + [(f"GGUF {q}", files[q]) for q in qtypes]:
        t0 = time.perf_counter()
        m = cls.load(source, role="transformer", subfolder="transformer", policy=policy, config_source=folder)
        load_s = time.perf_counter() - t0
        weights = os.path.join(folder, "transformer") if fmt == "bf16" else source
        disk = sum(os.path.getsize(os.path.join(weights, f)) for f in os.listdir(weights)
                   if f.endswith(".safetensors")) if os.path.isdir(weights) else os.path.getsize(weights)
        rows.append({"format": fmt, "file_bytes": disk, "resident_bytes": resident_bytes(m), "load_s": load_s,
                     "step_s": _step_seconds(m, inputs, repeat)})
        del m
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--double", type=int, default=0, help="double-stream blocks (each ~340M parameters)")
    ap.add_argument("--single", type=int, default=1, help="single-stream blocks (each ~142M parameters)")
    ap.add_argument("--tokens", type=int, default=256, help="image tokens per step (a square number)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--workdir", help="where the files go (reused when complete; default: a new temp folder)")
    ap.add_argument("--out", default=os.path.join(ROOT, "testing", ".bench", "bench_gguf.json"))
    args = ap.parse_args(argv)
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    rows = gguf_rows(args.double, args.single, args.tokens, args.repeat, workdir=args.workdir)
    base = rows[0]
    print(f"Flux width 3072, {args.double} double + {args.single} single blocks, {args.tokens} image tokens, CPU")
    print(f"{'format':<10} {'file MB':>9} {'resident MB':>12} {'vs bf16':>8} {'load s':>7} {'step s':>7} {'vs bf16':>8}")
    for r in rows:
        print(f"{r['format']:<10} {r['file_bytes'] / 1e6:>9.1f} {r['resident_bytes'] / 1e6:>12.1f} "
              f"{r['resident_bytes'] / base['resident_bytes']:>8.2f} {r['load_s']:>7.2f} {r['step_s']:>7.3f} "
              f"{r['step_s'] / base['step_s']:>8.2f}")
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump({"args": vars(args), "rows": rows}, f, indent=2)


if __name__ == "__main__":
    main()

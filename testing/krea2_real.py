"""Opt-in real-checkpoint check for Krea 2 (not part of the test run; needs the real files and,
for a sensible time, a CUDA GPU):

    python testing/krea2_real.py --diffusion-model /models/krea2_turbo_fp8_scaled.safetensors \\
        --text-encoder /models/qwen3vl_4b_fp8_scaled.safetensors --vae /models/qwen_image_vae.safetensors \\
        --tokenizer /models/qwen25_tokenizer [--device cuda] [-o krea2_real.png]

Generates one 1024x1024 turbo image (8 steps, CFG 0, mu 1.15, seed 42) through the same holder
path as the engine, offline, and prints time, peak CUDA memory and pixel statistics (a flat or
NaN image fails). The weights are under Krea's own community license, not this code's.
"""
import argparse
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from toolkit.offline import go_offline  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for name in ("diffusion-model", "text-encoder", "vae", "tokenizer"):
        ap.add_argument(f"--{name}", required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--variant", default="turbo", choices=("turbo", "raw"))
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("-o", "--output", default="krea2_real.png")
    ap.add_argument("--scaled-mm", action="store_true", help="use torch._scaled_mm where its parity check passes")
    args = ap.parse_args(argv)
    go_offline()

    import numpy as np
    import torch
    from PIL import Image

    from toolkit.models.base_model import get_model_class
    from toolkit.request import resolve_request

    model = {"arch": "krea2", "variant": args.variant, "local_only": True,
             "components": {"transformer": args.diffusion_model, "text_encoder": args.text_encoder,
                            "vae": args.vae, "tokenizer": args.tokenizer}}
    _work = resolve_request(model, {"prompt": "a fox walking through fresh snow, golden hour, 35mm photo",
                                      "width": 1024, "height": 1024, "seed": args.seed})
    mc, gen = _work.model, _work.sample
    if args.variant == "turbo":
        assert (gen.num_inference_steps, gen.guidance_scale, gen.extras["mu"]) == (8, 0.0, 1.15)
    if args.device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    holder = get_model_class("krea2")(mc, device=args.device, status_hook=lambda m, s: print(f"[{s}] {m}", flush=True))
    holder.load_model()
    if args.scaled_mm:
        from toolkit.models.formats.scaled_fp8 import enable_scaled_mm
        print(f"scaled_mm layers: {enable_scaled_mm(holder.pipeline.transformer)}")
    load_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    out_path = args.output
    record, = holder.generate_images([gen], paths=[out_path])
    gen_s = time.perf_counter() - t1
    pixels = np.asarray(Image.open(record["path"]).convert("RGB"), dtype=np.float32)
    report = {"load_s": load_s, "generate_s": gen_s, "output": record["path"], "size": list(pixels.shape[:2]),
              "pixel_mean": float(pixels.mean()), "pixel_std": float(pixels.std()),
              "peak_cuda_bytes": torch.cuda.max_memory_allocated() if args.device.startswith("cuda") else None}
    print(json.dumps(report, indent=2))
    ok = pixels.shape[:2] == (1024, 1024) and np.isfinite(pixels).all() and pixels.std() > 5
    print("OK" if ok else "FAILED: degenerate image")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""Device figures, measured on whatever GPU this finds (one JSON line per figure on stdout):

  1. the bare diffusers pipeline vs the engine's holder streaming latents every step, at 1024x1024,
     batch 1 and 4, on a Z-Image transformer widened to a real width (random weights; the text
     encoder and VAE are the tiny ones): the holder with today's synchronous copy (`to_frame`) and
     with the side-stream copier (toolkit/models/latent_copy.py);
  2. one Krea 2 width linear (6144 -> 6144, 4096 tokens: a 1024x1024 image) as bf16 matmul, as
     scaled-FP8 with per-call dequant (ScaledFp8Linear's reference path) and with `torch._scaled_mm`.

Without a GPU it says so and exits 0. Meant to finish in a few minutes on an H200:
    python testing/device_check.py [--dim 3840 --layers 6 --steps 8]
"""
import argparse
import json
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def emit(**figure):
    print(json.dumps(figure), flush=True)


def timed(fn, repeat: int, sync) -> list:
    """Seconds per call, after one warm-up call."""
    fn()
    sync()
    out = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        sync()
        out.append(time.perf_counter() - t)
    return out


def pipeline_vs_holder(args, torch):
    from diffusers import ZImagePipeline

    from testing.bench_engine import widened_model
    from toolkit.config_modules import GenerateImageConfig, ModelConfig
    from toolkit.models import latent_copy, latents
    from toolkit.models.base_model import get_model_class
    from toolkit.models.tiny import cached_tiny

    t0 = time.perf_counter()
    folder = widened_model(str(cached_tiny("zimage", 0)), args.dim, args.layers)
    emit(figure="widened_model", dim=args.dim, layers=args.layers, seconds=round(time.perf_counter() - t0, 1))
    sync = torch.cuda.synchronize
    size, steps = args.size, args.steps
    mc = ModelConfig.from_dict({"arch": "zimage", "name_or_path": folder, "dtype": "bf16"})
    holder = get_model_class("zimage")(mc, device="cuda").load_model()
    bare = ZImagePipeline(**holder.pipeline.components)       # the same modules, called as diffusers would
    bare.set_progress_bar_config(disable=True)
    spec = holder.spec.latents
    for batch in args.batches:
        common = dict(prompt="a fox in the snow", width=size, height=size, num_inference_steps=steps,
                      guidance_scale=0.0)

        def run_bare():
            bare(**common, num_images_per_prompt=batch, generator=torch.Generator("cpu").manual_seed(1))

        gen = GenerateImageConfig.from_dict(dict(common, seed=1, batch_size=batch), mc)
        sink = []

        def sync_step(i, n, t, lat, x0):
            frame, _ = latents.to_frame(lat, spec, height=size, width=size)
            sink.append(latents.payload_bytes(frame))

        def run_sync():
            holder.generate_single(gen, on_step=sync_step)

        def run_async():
            stream = latent_copy.FrameStream(lambda meta, f: sink.append(latents.payload_bytes(f)),
                                             latent_copy.copier_for("cuda"))

            def step(i, n, t, lat, x0):
                frame, _ = latents.frame_on_device(lat, spec, height=size, width=size)
                stream.push(i, frame)
                if i + 1 == n:
                    stream.flush()
            holder.generate_single(gen, on_step=step)

        for name, fn in (("bare_pipeline", run_bare), ("holder_latents_sync", run_sync),
                         ("holder_latents_async", run_async)):
            sink.clear()
            secs = timed(fn, args.repeat, sync)
            emit(figure="pipeline_vs_holder", path=name, size=size, batch=batch, steps=steps, dim=args.dim,
                 layers=args.layers, seconds_median=round(statistics.median(secs), 4),
                 ms_per_step=round(1000 * statistics.median(secs) / steps, 2), frames=len(sink) // (args.repeat + 1),
                 peak_gib=round(torch.cuda.max_memory_allocated() / 2**30, 2))
    del holder, bare
    torch.cuda.empty_cache()


def fp8_matmul(args, torch):
    import torch.nn.functional as F

    from toolkit.models.formats.scaled_fp8 import ScaledFp8Linear

    width, tokens = args.fp8_width, args.fp8_tokens
    torch.manual_seed(0)
    linear = torch.nn.Linear(width, width, bias=True, device="cuda", dtype=torch.bfloat16)
    fp8 = ScaledFp8Linear.from_linear(linear).to("cuda")
    x = torch.randn(tokens, width, device="cuda", dtype=torch.bfloat16)
    ok = fp8.set_scaled_mm(True, device=torch.device("cuda"), dtype=torch.bfloat16)
    paths = {"bf16": lambda: F.linear(x, linear.weight, linear.bias), "fp8_dequant": lambda: fp8._forward_dequant(x)}
    if ok:
        paths["fp8_scaled_mm"] = lambda: fp8._forward_scaled_mm(x)
    else:
        emit(figure="fp8_matmul", path="fp8_scaled_mm", skipped=fp8.scaled_mm_blocker(torch.device("cuda"),
                                                                                       torch.bfloat16))
    flops = 2 * tokens * width * width
    with torch.inference_mode():
        for name, fn in paths.items():
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            for _ in range(3):
                fn()
            start.record()
            for _ in range(args.fp8_iters):
                fn()
            end.record()
            end.synchronize()
            ms = start.elapsed_time(end) / args.fp8_iters
            emit(figure="fp8_matmul", path=name, width=width, tokens=tokens, ms=round(ms, 4),
                 tflops=round(flops / ms / 1e9, 1))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dim", type=int, default=3840, help="widened Z-Image transformer width (the real one's)")
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 4])
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--fp8-width", type=int, default=6144, help="Krea 2's feature width")
    ap.add_argument("--fp8-tokens", type=int, default=4096, help="a 1024x1024 image's tokens")
    ap.add_argument("--fp8-iters", type=int, default=50)
    ap.add_argument("--skip-pipeline", action="store_true")
    args = ap.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        emit(figure="device", cuda=False, skipped="no CUDA device: nothing measured")
        return 0
    emit(figure="device", cuda=True, name=torch.cuda.get_device_name(0),
         capability=list(torch.cuda.get_device_capability(0)), torch=torch.__version__)
    fp8_matmul(args, torch)
    if not args.skip_pipeline:
        pipeline_vs_holder(args, torch)
    return 0


if __name__ == "__main__":
    sys.exit(main())

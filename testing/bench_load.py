"""Load and generation overhead of the funnel and holders against bare diffusers, side by side.

    .venv/bin/python testing/bench_load.py [--repeat 5] [--big-gb 1.0] [--size 512 --steps 20]
    .venv/bin/python testing/bench_load.py --formats [--double 1 --single 1 --tokens 256]   (bench_formats.py)
    .venv/bin/python testing/bench_load.py --checkpoints [--models sd15,sdxl] [--arch sdxl --dtype float16]
        load times (bench_checkpoints.py), then bytes read switching two checkpoints that share their VAE
        (bench_switch.py)

Prints a table and writes testing/.bench/bench_load.json. Targets (from the issue):
funnel folder load <= 1.1x from_pretrained; ~1 GB component >= 0.8x raw safetensors read;
holder generation <= 1.02x the bare pipeline, hook unset and set.
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


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def interleaved(a, b, repeat):
    """Median seconds of a and b, run alternately so drift hits both alike."""
    ta, tb = [], []
    for _ in range(repeat):
        ta.append(timed(a)[0])
        tb.append(timed(b)[0])
    return statistics.median(ta), statistics.median(tb)


def touch(tensors):
    """Read one element per 4 KiB page of every tensor, so lazily mapped weights are really read."""
    total = 0.0
    for t in tensors:
        flat = t.reshape(-1)
        total += float(flat[:: max(1, 4096 // flat.element_size())].float().sum())
    return total


def evict(path):
    """Drop the file's pages from the page cache (no privileges needed), for a cold read."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def big_component(folder, gb):
    """A ZImageTransformer2DModel of about `gb` GB in float32, random weights, saved in diffusers format."""
    from diffusers import ZImageTransformer2DModel
    dim = 1024
    per_layer = 12 * dim * dim * 4 / 1e9
    layers = max(1, round(gb / per_layer))
    with torch.device("meta"):
        model = ZImageTransformer2DModel(all_patch_size=(2,), all_f_patch_size=(1,), in_channels=16, dim=dim,
                                         n_layers=layers, n_refiner_layers=1, n_heads=8, n_kv_heads=8,
                                         cap_feat_dim=64, axes_dims=[32, 48, 48], axes_lens=[1024, 512, 512])
    model.to_empty(device="cpu")
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.02, generator=g)
    model.save_pretrained(os.path.join(folder, "transformer"))
    path = os.path.join(folder, "transformer", "diffusion_pytorch_model.safetensors")
    return path, os.path.getsize(path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--big-gb", type=float, default=1.0)
    ap.add_argument("--size", type=int, default=512)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--out", default=os.path.join(ROOT, "testing", ".bench", "bench_load.json"))
    ap.add_argument("--formats", action="store_true", help="weight formats at real width (testing/bench_formats.py)")
    ap.add_argument("--double", type=int, default=1, help="--formats: double-stream blocks")
    ap.add_argument("--single", type=int, default=1, help="--formats: single-stream blocks")
    ap.add_argument("--tokens", type=int, default=256, help="--formats: image tokens per step")
    ap.add_argument("--checkpoints", action="store_true",
                    help="all-in-one checkpoints at real dimensions vs diffusers (testing/bench_checkpoints.py)")
    ap.add_argument("--models", default="sd15,sdxl", help="--checkpoints: sd15, sdxl (SDXL is 6.9 GB in fp16)")
    ap.add_argument("--work", default=None, help="--checkpoints: where the files are written (a temporary folder)")
    from testing import bench_switch
    bench_switch.add_arguments(ap)
    args = ap.parse_args()
    if args.formats:
        return formats(args)
    if args.checkpoints:
        from testing import bench_checkpoints
        bench_checkpoints.main(args, args.out.replace("bench_load.json", "bench_checkpoints.json"))
        return checkpoint_switch(args)

    from diffusers import DiffusionPipeline, ZImageTransformer2DModel
    from safetensors.torch import load_file

    from toolkit.models.tiny import cached_tiny
    from toolkit.config_modules import GenerateImageConfig
    from toolkit.models.base_model import get_model_class
    from toolkit.models.v2 import aitk

    results = {"torch": torch.__version__, "threads": torch.get_num_threads()}
    folder = str(cached_tiny("zimage"))

    # 1. whole model folder: every component through the funnel vs DiffusionPipeline.from_pretrained
    holder_cls = get_model_class("zimage")
    funnel_s, bare_s = interleaved(
        lambda: holder_cls({"arch": "zimage", "name_or_path": folder}).load_model(),
        lambda: DiffusionPipeline.from_pretrained(folder, local_files_only=True, dtype=torch.float32),
        args.repeat)
    results["folder_load"] = {"funnel_s": funnel_s, "from_pretrained_s": bare_s, "ratio": funnel_s / bare_s,
                              "target": "<= 1.1"}

    # 2. one ~1 GB component: funnel vs a raw safetensors read of the same file (page cache warm for both)
    with tempfile.TemporaryDirectory() as tmp:
        path, nbytes = big_component(tmp, args.big_gb)
        load_file(path)
        # both sides mmap the file: time until every page of every weight has been read
        def funnel():
            return touch(aitk(ZImageTransformer2DModel).load(tmp, role="transformer",
                                                              subfolder="transformer").state_dict().values())

        def raw():
            return touch(load_file(path).values())

        def cold(fn):
            def run():
                evict(path)
                return fn()
            return run
        def library():
            return touch(ZImageTransformer2DModel.from_pretrained(tmp, subfolder="transformer").state_dict().values())
        funnel_s, raw_s = interleaved(funnel, raw, max(3, args.repeat // 2))
        lib_s, _ = interleaved(library, raw, max(3, args.repeat // 2))
        cfunnel_s, craw_s = interleaved(cold(funnel), cold(raw), 3)
        results["big_component"] = {"bytes": nbytes, "target": ">= 0.8",
                                    "warm": {"funnel_s": funnel_s, "raw_read_s": raw_s,
                                             "funnel_GBps": nbytes / funnel_s / 1e9, "raw_GBps": nbytes / raw_s / 1e9,
                                             "throughput_ratio": raw_s / funnel_s,
                                             "diffusers_from_pretrained_s": lib_s},
                                    "cold": {"funnel_s": cfunnel_s, "raw_read_s": craw_s,
                                             "funnel_GBps": nbytes / cfunnel_s / 1e9, "raw_GBps": nbytes / craw_s / 1e9,
                                             "throughput_ratio": craw_s / cfunnel_s}}

    # 3. generation: holder (hook unset / set) vs the bare pipeline call, same folder, seed and settings
    holder = holder_cls({"arch": "zimage", "name_or_path": folder}).load_model()
    bare = DiffusionPipeline.from_pretrained(folder, local_files_only=True, dtype=torch.float32)
    bare.set_progress_bar_config(disable=True)
    gen = GenerateImageConfig.from_dict({"prompt": "a fox", "width": args.size, "height": args.size,
                                         "num_inference_steps": args.steps, "guidance_scale": 0.0, "seed": 1},
                                        "zimage")

    def run_bare():
        bare(prompt=gen.prompt, negative_prompt="", width=gen.width, height=gen.height,
             num_inference_steps=gen.num_inference_steps, guidance_scale=gen.guidance_scale,
             generator=torch.Generator("cpu").manual_seed(1), output_type="pil")

    sink = []
    hook = {"on_step": None}

    def run_holder():
        holder.generate_single(gen, on_step=hook["on_step"])

    run_bare(), run_holder()  # warm-up
    unset_s, bare_s = interleaved(run_holder, run_bare, args.repeat)
    hook["on_step"] = lambda i, n, t, lat, x0: sink.append(i)
    set_s, bare2_s = interleaved(run_holder, run_bare, args.repeat)
    results["generation"] = {"size": args.size, "steps": args.steps,
                             "bare_s": bare_s, "holder_hook_unset_s": unset_s, "ratio_unset": unset_s / bare_s,
                             "bare_s_2": bare2_s, "holder_hook_set_s": set_s, "ratio_set": set_s / bare2_s,
                             "target": "<= 1.02"}

    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(results, f, indent=2)
    fl, bc, g = results["folder_load"], results["big_component"], results["generation"]
    print(f"folder load      funnel {fl['funnel_s']*1e3:8.1f} ms  from_pretrained {fl['from_pretrained_s']*1e3:8.1f} ms"
          f"  ratio {fl['ratio']:.3f} (target <= 1.1)")
    for mode in ("warm", "cold"):
        m = bc[mode]
        print(f"{bc['bytes']/1e9:.2f} GB {mode}  funnel {m['funnel_GBps']:6.2f} GB/s  raw safetensors "
              f"{m['raw_GBps']:6.2f} GB/s  ratio {m['throughput_ratio']:.3f} (target >= 0.8)"
              + (f"  [diffusers' own from_pretrained: {bc['bytes'] / m['diffusers_from_pretrained_s'] / 1e9:.2f} GB/s]"
                 if "diffusers_from_pretrained_s" in m else ""))
    print(f"generate {g['size']}^2x{g['steps']}  bare {g['bare_s']:.3f} s  holder {g['holder_hook_unset_s']:.3f} s "
          f"(ratio {g['ratio_unset']:.3f})  hook set {g['holder_hook_set_s']:.3f} s vs {g['bare_s_2']:.3f} s "
          f"(ratio {g['ratio_set']:.3f}) (target <= 1.02)")
    print(f"wrote {args.out}")


def checkpoint_switch(args):
    """--checkpoints, its switching half: bytes read going Pony -> Illustrious (testing/bench_switch.py)."""
    from testing import bench_switch
    bench_switch.write(args, bench_switch.run(args))


def formats(args):
    from testing import bench_formats
    with tempfile.TemporaryDirectory() as work:
        results = bench_formats.run(work, args.double, args.single, args.tokens, max(1, min(args.repeat, 3)))
    out = args.out.replace("bench_load.json", "bench_formats.json")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump({"torch": torch.__version__, "threads": torch.get_num_threads(), "double": args.double,
                   "single": args.single, "tokens": args.tokens, "rows": results}, f, indent=2)
    print(bench_formats.table(results))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()

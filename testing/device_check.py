"""Device figures, measured on whatever GPU this finds (one JSON line per figure on stdout):

  1. the bare diffusers pipeline vs the engine's holder streaming latents every step, at 1024x1024,
     batch 1 and 4, on a Z-Image transformer widened to a real width (random weights; the text
     encoder and VAE are the tiny ones): the holder with today's synchronous copy (`to_frame`) and
     with the side-stream copier (toolkit/models/latent_copy.py);
  2. one Krea 2 width linear (6144 -> 6144, 4096 tokens: a 1024x1024 image) as bf16 matmul, as
     scaled-FP8 with per-call dequant (ScaledFp8Linear's reference path) and with `torch._scaled_mm`.

  3. `--placement` (issue 25): a FLUX.1 [dev]-shaped model of random weights (the real dims: 19 double and 38
     single blocks at width 3072, a T5-XXL-shaped and a CLIP-L-shaped encoder, FLUX's VAE; written once under
     testing/.bench/), 1024x1024, 20 steps, with torch.cuda.set_per_process_memory_fraction capping the card
     to 12, 16 and 24 GB and to the whole card. Per cap: the plan auto chose (toolkit/placement.py, from the
     capped free memory), s/step, peak memory; beside it diffusers' own enable_model_cpu_offload,
     enable_sequential_cpu_offload and the transformer's enable_group_offload (block level, a CUDA stream) on
     the same weights; the engine's holder against the bare pipeline call at 1024x1024 on the whole card; the
     async latent copy's cost per step; FP8 `_scaled_mm` against bf16 at FLUX's width. Writes
     testing/.bench/device_check_placement.json and .md. `--dry-run` runs the same code on the CPU with the
     tiny FLUX and simulated caps (what a session without a GPU can check).

  4. `--compile` (issue 27): testing/bench_compile.py's table on the card in bf16 at real sizes: the SD 1.5 UNet
     at 512, 768 and 1024 pixels, FLUX.1-width blocks (--compile-flux-layers double, twice as many single) at
     4096, 3072 and 6144 image tokens; eager vs compiled, compile seconds (first start / restart), recompiles
     across the sizes and across LoRA switches. Writes testing/.bench/device_check_compile.json and .md.

Without a GPU it says so and exits 0. Meant to finish in a few minutes on an H200:
    python testing/device_check.py [--dim 3840 --layers 6 --steps 8]
    python testing/device_check.py --placement [--caps 12 16 24 0 --steps 20 --baseline-steps 4]
    python testing/device_check.py --compile [--compile-flux-layers 4]
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


# -- placement (issue 25) ---------------------------------------------------------------------------------
FLUX_TRANSFORMER = dict(patch_size=1, in_channels=64, num_layers=19, num_single_layers=38, attention_head_dim=128,
                        num_attention_heads=24, joint_attention_dim=4096, pooled_projection_dim=768,
                        guidance_embeds=True, axes_dims_rope=(16, 56, 56))
T5_XXL = dict(d_model=4096, d_ff=10240, d_kv=64, num_heads=64, num_layers=24, vocab_size=32128,
              feed_forward_proj="gated-gelu", relative_attention_num_buckets=32, relative_attention_max_distance=128,
              is_encoder_decoder=False, use_cache=False, tie_word_embeddings=False)
CLIP_L = dict(hidden_size=768, intermediate_size=3072, num_hidden_layers=12, num_attention_heads=12,
              max_position_embeddings=77, vocab_size=49408, projection_dim=768, hidden_act="quick_gelu")
FLUX_VAE = dict(block_out_channels=[128, 256, 512, 512], layers_per_block=2, latent_channels=16, norm_num_groups=32,
                down_block_types=["DownEncoderBlock2D"] * 4, up_block_types=["UpDecoderBlock2D"] * 4,
                scaling_factor=0.3611, shift_factor=0.1159, use_quant_conv=False, use_post_quant_conv=False)


def flux_shaped(torch, blocks: tuple) -> str:
    """The tiny FLUX folder with FLUX.1 [dev]-shaped random components (bf16), written once: its tokenizers and
    scheduler are the tiny ones (ids below their small vocabularies index the real-sized embeddings)."""
    import shutil

    from diffusers import AutoencoderKL, FluxTransformer2DModel
    from transformers import CLIPTextConfig, CLIPTextModel, T5Config, T5EncoderModel

    from toolkit.models.tiny import cached_tiny

    double, single = blocks
    out = os.path.join(ROOT, "testing", ".bench", f"flux-shaped-{double}x{single}")
    if os.path.isfile(os.path.join(out, ".complete")):
        return out
    shutil.rmtree(out, ignore_errors=True)
    tiny = str(cached_tiny("flux", 0))
    os.makedirs(out)
    for name in ("tokenizer", "tokenizer_2", "scheduler", "model_index.json"):
        os.symlink(os.path.join(tiny, name), os.path.join(out, name))
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)

    def save(module, name):
        with torch.no_grad():
            for p in module.parameters():
                p.normal_(0, (p.shape[1] ** -0.5) if p.ndim > 1 else 0.02)
        module.to(torch.bfloat16).save_pretrained(os.path.join(out, name))
        del module
        if device == "cuda":
            torch.cuda.empty_cache()
    with torch.device(device):
        save(FluxTransformer2DModel(**{**FLUX_TRANSFORMER, "num_layers": double, "num_single_layers": single}),
             "transformer")
        save(T5EncoderModel(T5Config(**T5_XXL)), "text_encoder_2")
        save(CLIPTextModel(CLIPTextConfig(**CLIP_L)), "text_encoder")
        save(AutoencoderKL(**FLUX_VAE), "vae")
    open(os.path.join(out, ".complete"), "w").close()
    return out


class CappedDevice:
    """The real CUDA device under set_per_process_memory_fraction, as the planner reads it (the duck type of
    v2/residency.SimulatedDevice): mem_get_info answers the cap less what torch holds; moves are real."""

    def __init__(self, torch, cap: int):
        self.torch, self.total, self.moved, self.peak, self.host_total = torch, cap, 0, 0, None

    def mem_get_info(self):
        return max(0, self.total - self.torch.cuda.memory_reserved()), self.total

    def use(self, delta: int):
        pass

    def host_available(self):
        return None


def placement_check(args, torch):
    """Figure 3 (module docstring). Each run's figures are one JSON line and a row of the markdown table."""
    import gc

    from toolkit.config_modules import GenerateImageConfig, ModelConfig
    from toolkit.models import latent_copy, latents
    from toolkit.models.base_model import get_model_class
    from toolkit.models.tiny import cached_tiny
    from toolkit.models.v2.pool import ComponentPool
    from toolkit.models.v2.planning import plan_for
    from toolkit.models.v2.residency import SimulatedDevice

    cuda = not args.dry_run
    if cuda:
        t0 = time.perf_counter()
        folder = flux_shaped(torch, (args.double, args.single))
        emit(figure="flux_shaped", double=args.double, single=args.single, seconds=round(time.perf_counter() - t0, 1))
        total = torch.cuda.get_device_properties(0).total_memory
        sync = torch.cuda.synchronize
    else:
        folder, total, sync = str(cached_tiny("flux", 0)), 64 << 20, (lambda: None)
    device = "cuda" if cuda else "cpu"
    unit = 1 << 30 if cuda else 1 << 20          # caps in GB on a GPU, MiB of a simulated device on the CPU
    size = args.size if cuda else 64
    mc = ModelConfig.from_dict({"arch": "flux", "name_or_path": folder, "dtype": "bf16" if cuda else "float32"})
    gen = GenerateImageConfig.from_dict({"prompt": "a lighthouse at dusk", "width": size, "height": size,
                                         "num_inference_steps": args.steps, "seed": 1}, mc)
    rows, pool = [], ComponentPool()

    def capped(cap_units: float):
        cap = int(cap_units * unit) if cap_units else total
        if cuda:
            torch.cuda.set_per_process_memory_fraction(min(1.0, cap / total))
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
        return cap

    def timed_steps(call) -> tuple:
        marks = []

        def on_step(*_a):
            sync()
            marks.append(time.perf_counter())
        t = time.perf_counter()
        call(on_step)
        sync()
        wall = time.perf_counter() - t
        steps = [b - a for a, b in zip(marks, marks[1:])]
        return (statistics.median(steps) if steps else wall), wall

    def peak_gib():
        return round(torch.cuda.max_memory_allocated() / 2**30, 2) if cuda else None

    for cap_units in sorted(args.caps, key=lambda c: c or 1e9):       # smallest first: the pool re-places upward
        cap = capped(cap_units)
        memory = CappedDevice(torch, cap) if cuda else SimulatedDevice(cap, lambda: pool.bytes_at("device"))
        label = f"{cap_units:g} {'GB' if cuda else 'MiB'}" if cap_units else "whole card"
        row = {"cap": label, "path": "engine auto"}
        try:
            plan = plan_for(mc, gen, estimate=get_model_class("flux").estimate_stage_bytes, device=device, pool=pool,
                            memory=memory, reserve=(1 << 30) if cuda else 0)
            holder = get_model_class("flux")(mc, device=device, memory=memory, plan=plan)
            with pool.building():
                holder.load_model()
            pool.release_unused()
            row["plan"] = holder.plan.summary()
            row["rung"] = holder.plan.rung
            holder.generate_single(gen)                                  # warm-up
            if cuda:
                torch.cuda.reset_peak_memory_stats()
            s_step, wall = timed_steps(lambda on_step: holder.generate_single(gen, on_step=on_step))
            row.update(s_per_step=round(s_step, 4), seconds=round(wall, 2), peak_gib=peak_gib())
            if not cap_units:       # the whole card: the engine's holder against the bare pipeline, and latents
                row_bare = dict(cap=label, path="bare FluxPipeline (same modules)")
                from diffusers import FluxPipeline
                bare = FluxPipeline(**holder.pipeline.components)
                bare.set_progress_bar_config(disable=True)
                s_bare, wall_bare = timed_steps(lambda on_step: bare(
                    prompt=gen.prompt, width=size, height=size, num_inference_steps=args.steps,
                    generator=torch.Generator("cpu").manual_seed(1),
                    callback_on_step_end=lambda p, i, t, kw: (on_step(), kw)[1]))
                row_bare.update(s_per_step=round(s_bare, 4), seconds=round(wall_bare, 2), peak_gib=peak_gib())
                spec = holder.spec.latents
                stream = latent_copy.FrameStream(lambda meta, f: None, latent_copy.copier_for(device))

                def with_latents(on_step):
                    def step(i, n, t, lat, x0):
                        frame, _ = latents.frame_on_device(lat, spec, height=size, width=size)
                        stream.push({"step": i}, frame)
                        on_step()
                    holder.generate_single(gen, on_step=step)
                    stream.flush()
                s_lat, _ = timed_steps(with_latents)
                row["latent_copy_ms_per_step"] = round(1000 * (s_lat - s_step), 2)
                del bare
                rows.append(row)
                emit(figure="placement", **row)
                row = row_bare
            holder.unload()
            del holder
        except Exception as e:       # an out of memory on a cap is a figure too
            row["error"] = f"{type(e).__name__}: {str(e)[:160]}"
        rows.append(row)
        emit(figure="placement", **row)
        gc.collect()
        if cap_units in args.baseline_caps and cuda:
            rows += diffusers_baselines(args, torch, folder, gen, size, label, timed_steps, peak_gib)
    pool.unload_all()
    if cuda:
        torch.cuda.set_per_process_memory_fraction(1.0)
        args.fp8_width, args.fp8_tokens = 3072, (size // 16) ** 2 + 512     # FLUX's width and tokens
        fp8_matmul(args, torch)
    write_tables(rows, args)
    return rows


def diffusers_baselines(args, torch, folder, gen, size, label, timed_steps, peak_gib) -> list:
    """diffusers' own offloading on the same weights under the same cap, `--baseline-steps` steps each."""
    import gc

    from diffusers import FluxPipeline

    rows = []
    for name in args.baselines:
        row = {"cap": label, "path": f"diffusers {name}"}
        try:
            pipe = FluxPipeline.from_pretrained(folder, torch_dtype=torch.bfloat16, local_files_only=True)
            pipe.set_progress_bar_config(disable=True)
            if name == "enable_model_cpu_offload":
                pipe.enable_model_cpu_offload()
            elif name == "enable_sequential_cpu_offload":
                pipe.enable_sequential_cpu_offload()
            elif name == "enable_group_offload":
                pipe.transformer.enable_group_offload(onload_device=torch.device("cuda"), offload_type="block_level",
                                                      num_blocks_per_group=1, use_stream=True)
                for other in ("text_encoder", "text_encoder_2", "vae"):
                    getattr(pipe, other).to("cuda")
            torch.cuda.reset_peak_memory_stats()
            s_step, wall = timed_steps(lambda on_step: pipe(
                prompt=gen.prompt, width=size, height=size, num_inference_steps=args.baseline_steps,
                generator=torch.Generator("cpu").manual_seed(1),
                callback_on_step_end=lambda p, i, t, kw: (on_step(), kw)[1]))
            row.update(s_per_step=round(s_step, 4), seconds=round(wall, 2), steps=args.baseline_steps,
                       peak_gib=peak_gib())
            del pipe
        except Exception as e:
            row["error"] = f"{type(e).__name__}: {str(e)[:160]}"
        gc.collect()
        torch.cuda.empty_cache()
        rows.append(row)
        emit(figure="placement", **row)
    return rows


def write_tables(rows: list, args):
    out = os.path.join(ROOT, "testing", ".bench")
    os.makedirs(out, exist_ok=True)
    name = "device_check_placement" + ("_dry_run" if args.dry_run else "")
    with open(os.path.join(out, name + ".json"), "w") as f:
        json.dump(rows, f, indent=1)
    lines = ["| cap | path | plan | s/step | peak GiB | note |", "|---|---|---|---|---|---|"]
    for r in rows:
        note = r.get("error") or (f"latent copy {r['latent_copy_ms_per_step']} ms/step"
                                  if "latent_copy_ms_per_step" in r else "")
        lines.append(f"| {r['cap']} | {r['path']} | {r.get('plan', '')} | {r.get('s_per_step', '')} | "
                     f"{r.get('peak_gib', '')} | {note} |")
    with open(os.path.join(out, name + ".md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines), flush=True)


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
    ap.add_argument("--placement", action="store_true", help="figure 3 only: placement under capped memory")
    ap.add_argument("--dry-run", action="store_true", help="--placement on the CPU: the tiny FLUX, simulated caps")
    ap.add_argument("--caps", type=float, nargs="+", default=[12, 16, 24, 0],
                    help="GB per run (0: the whole card); MiB of a simulated device with --dry-run")
    ap.add_argument("--double", type=int, default=19, help="FLUX double blocks (19: FLUX.1's)")
    ap.add_argument("--single", type=int, default=38, help="FLUX single blocks (38: FLUX.1's)")
    ap.add_argument("--baselines", nargs="*", default=["enable_model_cpu_offload", "enable_sequential_cpu_offload",
                                                       "enable_group_offload"])
    ap.add_argument("--baseline-caps", type=float, nargs="*", default=[12, 24])
    ap.add_argument("--baseline-steps", type=int, default=4)
    ap.add_argument("--compile", action="store_true", help="figure 4 only: compiled vs eager at real sizes")
    ap.add_argument("--compile-flux-layers", type=int, default=4)
    args = ap.parse_args(argv)
    import torch

    if args.placement and args.dry_run:
        args.caps = [c for c in args.caps if c <= 8] or [4.5, 5, 0]     # MiB of a simulated 64 MiB device
        args.steps = min(args.steps, 3)
        placement_check(args, torch)
        return 0
    if not torch.cuda.is_available():
        emit(figure="device", cuda=False, skipped="no CUDA device: nothing measured")
        return 0
    emit(figure="device", cuda=True, name=torch.cuda.get_device_name(0),
         capability=list(torch.cuda.get_device_capability(0)), torch=torch.__version__)
    if args.placement:
        placement_check(args, torch)
        return 0
    if args.compile:
        from testing import bench_compile
        ns = argparse.Namespace(quick=False, flux_layers=args.compile_flux_layers)
        res = bench_compile.run(ns, device="cuda", dtype="bfloat16", engine=False,
                                sizes={"sd15_unet": (512, 768, 1024), "flux_blocks": (4096, 3072, 6144)})
        bench_compile.write(res, os.path.join(ROOT, "testing", ".bench", "device_check_compile.json"))
        return 0
    fp8_matmul(args, torch)
    if not args.skip_pipeline:
        pipeline_vs_holder(args, torch)
    return 0


if __name__ == "__main__":
    sys.exit(main())

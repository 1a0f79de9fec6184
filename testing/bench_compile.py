"""Compiled against eager, side by side (`python testing/bench_engine.py --compile [--quick]`).

1. Denoisers at real widths (random weights), each in a fresh process with an empty inductor cache, compiled
   the engine's way (toolkit/models/compiled.ensure: regional, counted):
   - `sd15_unet`: UNet2DConditionModel with SD 1.5's config, 512x512 (64x64 latents), then 448 and 576;
   - `flux_blocks`: FluxTransformer2DModel at FLUX.1's width (24 heads x 128, joint dim 4096), 1 double and
     2 single blocks (--flux-layers), 1024 image tokens (512x512), then 768 and 1280 tokens.
   Per model: eager and compiled seconds per forward (batch 1, interleaved, medians; eager is the same module
   under torch's force_eager stance), compile seconds of the first call, recompiles across the 3 sizes, and
   2 LoRAs of rank 16 and 32 hotswapped into one slot padded to rank 64 (recompiles across their switches).
   Then the same first call in a second fresh process on the now-filled cache: the restart's compile seconds.
2. The engine against the bare diffusers call with everything on (tiny zimage at 256x256, 8 steps): 4 clients
   at once with one prompt, engine.compile on, the conditioning cache and batching (max_batch 4), against 4
   bare pipeline calls in a row; and the engine with all three off.
Writes testing/.bench/bench_compile.json and prints a table (README's).
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

MODELS = {"sd15_unet": (512, 448, 576), "flux_blocks": (1024, 768, 1280)}


def _build(name: str, flux_layers: int, device: str = "cpu", dtype=None):
    import torch
    from diffusers import FluxTransformer2DModel, UNet2DConditionModel

    torch.manual_seed(0)
    with torch.device(device):       # built where it runs: a real-width model's init on the CPU takes minutes
        model = _construct(name, flux_layers, UNet2DConditionModel, FluxTransformer2DModel)
    return model.to(dtype=dtype or torch.float32).eval()


def _construct(name, flux_layers, UNet2DConditionModel, FluxTransformer2DModel):
    if name == "sd15_unet":
        model = UNet2DConditionModel(sample_size=64, cross_attention_dim=768, attention_head_dim=8,
                                     block_out_channels=(320, 640, 1280, 1280), layers_per_block=2)
    else:
        model = FluxTransformer2DModel(num_layers=flux_layers, num_single_layers=2 * flux_layers,
                                       attention_head_dim=128, num_attention_heads=24, joint_attention_dim=4096,
                                       pooled_projection_dim=768, in_channels=64, guidance_embeds=True)
    return model


def _inputs(name: str, size: int, device: str = "cpu", dtype=None):
    import torch

    g = torch.Generator().manual_seed(size)
    if name == "sd15_unet":
        side = size // 8
        out = dict(sample=torch.randn(1, 4, side, side, generator=g), timestep=torch.tensor([500]),
                   encoder_hidden_states=torch.randn(1, 77, 768, generator=g))
    else:
        side = int(size ** 0.5)
        ids = torch.stack(torch.meshgrid(torch.arange(side), torch.arange(size // side), indexing="ij"),
                          -1).reshape(-1, 2)
        out = dict(hidden_states=torch.randn(1, ids.shape[0], 64, generator=g),
                   encoder_hidden_states=torch.randn(1, 256, 4096, generator=g),
                   pooled_projections=torch.randn(1, 768, generator=g), timestep=torch.tensor([0.5]),
                   img_ids=torch.cat([torch.zeros(ids.shape[0], 1), ids.float()], 1), txt_ids=torch.zeros(256, 3),
                   guidance=torch.tensor([3.5]))
    return {k: v.to(device, dtype=dtype or torch.float32) if v.is_floating_point() else v.to(device)
            for k, v in out.items()}


def _lora(model, rank: int, seed: int) -> dict:
    """A PEFT-keyed LoRA on every attention projection of the repeated blocks."""
    import torch

    g = torch.Generator().manual_seed(seed)
    out = {}
    for name, mod in model.named_modules():
        if isinstance(mod, torch.nn.Linear) and name.split(".")[-1] in ("to_q", "to_k", "to_v"):
            w = mod.weight
            out[f"{name}.lora_A.weight"] = (torch.randn(rank, mod.in_features, generator=g) * 0.01).to(w.device, w.dtype)
            out[f"{name}.lora_B.weight"] = (torch.randn(mod.out_features, rank, generator=g) * 0.01).to(w.device, w.dtype)
    return out


def one_model(name: str, reps: int, flux_layers: int, restart_only: bool, device: str = "cpu",
              dtype: str = "float32", sizes=None) -> dict:
    """Run in a fresh process (`--one`): the figures of one denoiser."""
    import torch

    from toolkit.models import compiled

    dt = getattr(torch, dtype)
    model = _build(name, flux_layers, device, dt)
    sizes = tuple(sizes or MODELS[name])
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)

    def timed(size, eager=False):
        args = _inputs(name, size, device, dt)
        with torch.no_grad(), (compiled.eager() if eager else compiled.running([model._aitk_compile])):
            sync()
            t0 = time.perf_counter()
            model(**args)
            sync()
            return time.perf_counter() - t0

    model.enable_lora_hotswap(target_rank=64)      # the slot is there before the compile (lora_slots.py)
    model.load_lora_adapter(_lora(model, 16, 1), adapter_name="slot", prefix=None)
    model.disable_lora()
    compiled.ensure(model)
    if restart_only:            # the same graphs as the first start's first call
        first = timed(sizes[0])
        return {"first_call_s": first, **compiled.stats()}
    res = {"model": name, "sizes": list(sizes), "params": sum(p.numel() for p in model.parameters())}
    res["first_call_s"] = timed(sizes[0])
    res["compile_s"] = compiled.stats()["seconds"]
    res["compiles"] = compiled.stats()["compiles"]
    pairs = [(timed(sizes[0], eager=True), timed(sizes[0])) for _ in range(reps)]
    res["eager_s"], res["compiled_s"] = statistics.median(e for e, _c in pairs), statistics.median(c for _e, c in pairs)
    res["speedup"] = res["eager_s"] / res["compiled_s"]
    before = compiled.stats()["recompiles"]
    res["other_sizes"] = {}
    for size in sizes[1:]:
        first = timed(size)
        res["other_sizes"][size] = {"first_s": first, "eager_s": timed(size, eager=True), "compiled_s": timed(size)}
    res["size_recompiles"] = compiled.stats()["recompiles"] - before
    before = compiled.stats()["recompiles"]
    model.enable_lora()
    timed(sizes[0])                                              # the slot's variant (adapters enabled)
    settled = compiled.stats()["recompiles"]
    switch = []
    for i, rank in enumerate((32, 16, 32)):
        t0 = time.perf_counter()
        model.load_lora_adapter(_lora(model, rank, 2 + i), adapter_name="slot", prefix=None, hotswap=True)
        swap_s = time.perf_counter() - t0
        switch.append({"rank": rank, "swap_s": swap_s, "call_s": timed(sizes[0])})
    res["lora"] = {"variant_recompiles": settled - before, "switch_recompiles": compiled.stats()["recompiles"] - settled,
                   "switches": switch}
    res["stats"] = compiled.stats()
    return res


def _subprocess(name, reps, flux_layers, cache, restart_only=False, device="cpu", dtype="float32", sizes=None) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--one", name, "--reps", str(reps),
           "--flux-layers", str(flux_layers), "--device", device, "--dtype", dtype] + (
        ["--restart-only"] if restart_only else []) + (["--sizes", *map(str, sizes)] if sizes else [])
    out = subprocess.run(cmd, cwd=ROOT, env={**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache},
                         capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"{name}: {out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def engine_vs_bare(reps: int) -> dict:
    """4 images of one prompt: the bare pipeline 4 times in a row, against the engine with 4 clients at once."""
    import torch
    from diffusers import DiffusionPipeline

    from testing.engine_client import InProcessEngine
    from toolkit.models.tiny import cached_tiny

    folder = str(cached_tiny("zimage", 0, root=os.environ.get("AITK_TINY_CACHE",
                                                              os.path.join(ROOT, "testing", ".bench", "tiny"))))
    sample = {"prompt": "a lighthouse on a cliff at dusk", "width": 256, "height": 256, "num_inference_steps": 8}
    bare = DiffusionPipeline.from_pretrained(folder, local_files_only=True, dtype=torch.float32)
    bare.set_progress_bar_config(disable=True)

    def bare_four():
        t0 = time.perf_counter()
        for i in range(4):
            bare(**sample, generator=torch.Generator("cpu").manual_seed(i)).images[0].save(io_sink(), "PNG")
        return time.perf_counter() - t0

    def engine_four(eng):
        errors, threads = [], []

        def client(i):
            frames = eng.client.stream({"model": {"arch": "zimage", "name_or_path": folder},
                                        "sample": {**sample, "seed": i}, "stream": {"latents": "none"}})
            if frames[-1][0].get("status") != "ok":
                errors.append(frames[-1][0])
        t0 = time.perf_counter()
        for i in range(4):
            threads.append(threading.Thread(target=client, args=(i,)))
            threads[-1].start()
        for t in threads:
            t.join()
        if errors:
            raise RuntimeError(errors)
        return time.perf_counter() - t0

    out = {}
    tmp = tempfile.mkdtemp(prefix="bench_compile_")
    on = InProcessEngine(os.path.join(tmp, "on"), compile="on", max_batch=4, cond_cache_mb=256,
                         compile_cache_dir=os.path.join(tmp, "inductor"))
    off = InProcessEngine(os.path.join(tmp, "off"), compile="off", max_batch=1, cond_cache_mb=0)
    try:
        engine_four(on)                                # its compile, its first load
        engine_four(off)
        bare_four()
        rows = [(bare_four(), engine_four(on), engine_four(off)) for _ in range(reps)]
        out["bare_s"] = statistics.median(r[0] for r in rows)
        out["engine_all_on_s"] = statistics.median(r[1] for r in rows)
        out["engine_all_off_s"] = statistics.median(r[2] for r in rows)
        out["all_on_vs_bare"] = out["engine_all_on_s"] / out["bare_s"]
        out["all_off_vs_bare"] = out["engine_all_off_s"] / out["bare_s"]
        out["compile"] = on.engine.health()["compile"]
    finally:
        on.close()
        off.close()
    return out


def io_sink():
    import io
    return io.BytesIO()


def run(args, device: str = "cpu", dtype: str = "float32", sizes: dict | None = None, engine: bool = True) -> dict:
    """Every denoiser (then, on the CPU, the engine against bare). `sizes`: model -> its 3 sizes (the GPU
    check's real ones: FLUX.1's 1024x1024 is 4096 tokens)."""
    reps = 2 if args.quick else 3
    res = {"cpus": os.cpu_count(), "device": device, "dtype": dtype, "denoisers": {}}
    for name in MODELS:
        cache = tempfile.mkdtemp(prefix=f"inductor_{name}_")
        size = (sizes or {}).get(name)
        first = _subprocess(name, reps, args.flux_layers, cache, device=device, dtype=dtype, sizes=size)
        restart = _subprocess(name, reps, args.flux_layers, cache, restart_only=True, device=device, dtype=dtype,
                              sizes=size)
        first["restart"] = restart
        res["denoisers"][name] = first
        print(json.dumps({name: first}), flush=True)
    res["engine"] = engine_vs_bare(reps) if engine else None
    return res


def write(res: dict, out: str):
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump(res, f, indent=2)
    lines = [f"| denoiser ({res.get('device', 'cpu')}, {res.get('dtype', 'float32')}, batch 1) | eager s/forward | compiled | speedup | compile s (first start / restart) "
             "| recompiles: 3 sizes / 2 LoRAs switched |", "|---|---|---|---|---|---|"]
    for name, d in res["denoisers"].items():
        lines.append(f"| {name} @ {d['sizes'][0]} | {d['eager_s']:.3f} | {d['compiled_s']:.3f} | {d['speedup']:.2f}x "
                     f"| {d['compile_s']:.1f} / {d['restart']['seconds']:.1f} (cache hits {d['restart']['cache_hits']}) "
                     f"| {d['size_recompiles']} / {d['lora']['switch_recompiles']} |")
        for size, s in d["other_sizes"].items():
            lines.append(f"| {name} @ {size} | {s['eager_s']:.3f} | {s['compiled_s']:.3f} | "
                         f"{s['eager_s'] / s['compiled_s']:.2f}x | | |")
    e = res["engine"]
    if e is None:
        table = "\n".join(lines)
        with open(out.replace(".json", ".md"), "w") as f:
            f.write(table + "\n")
        print(table)
        return
    lines += ["", "| 4 images, one prompt (tiny zimage 256x256, 8 steps) | seconds | vs bare |", "|---|---|---|",
              f"| bare diffusers, 4 calls | {e['bare_s']:.3f} | 1.00 |",
              f"| engine, 4 clients: compile + conditioning cache + batching | {e['engine_all_on_s']:.3f} | "
              f"{e['all_on_vs_bare']:.2f} |",
              f"| engine, 4 clients: all three off | {e['engine_all_off_s']:.3f} | {e['all_off_vs_bare']:.2f} |"]
    table = "\n".join(lines)
    with open(out.replace(".json", ".md"), "w") as f:
        f.write(table + "\n")
    print(table)


def main():
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("--one", choices=list(MODELS))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--flux-layers", type=int, default=1)
    ap.add_argument("--restart-only", action="store_true")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--sizes", type=int, nargs=3)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one_model(args.one, args.reps, args.flux_layers, args.restart_only, args.device, args.dtype,
                                   args.sizes)))
        return
    write(run(args), os.path.join(ROOT, "testing", ".bench", "bench_compile.json"))


if __name__ == "__main__":
    main()

"""Hires fix in one request against the same work as two requests (`python testing/bench_engine.py --hires`).

One: POST /generate with sample.hires (the base pass, the upscale, the img2img pass, on the resident model).
Two: what a client without hires does: a txt2img request, its PNG downloaded, then an img2img request at the
upscaled size with that PNG as init_img (uploaded as a data URL). Same model, seed, steps and sizes; the pixel
upscaler is Lanczos in both (the two-request client resizes with PIL Lanczos, as the engine does).

Per mode: seconds (the client's wall clock, medians of interleaved runs), bytes the pool loaded (0 once warm:
both reuse the resident model), bytes over HTTP (request bodies and the images downloaded), and requests.
A tiny model by default (`--model` names a diffusers folder or single file and `--arch` its arch on a machine
with real weights).
"""
import base64
import io
import json
import os
import statistics
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(args) -> dict:
    from PIL import Image

    from testing.engine_client import InProcessEngine
    from toolkit.models.tiny import cached_tiny

    arch = getattr(args, "arch", None) or "sd1"
    folder = getattr(args, "model", None) or str(cached_tiny(arch, 0, root=os.environ.get(
        "AITK_TINY_CACHE", os.path.join(ROOT, "testing", ".bench", "tiny"))))
    size, steps, scale, denoise = args.hires_size, args.hires_steps, 2.0, 0.5
    big = int(size * scale)
    tmp = os.path.join(ROOT, "testing", ".bench", "hires_engine")
    eng = InProcessEngine(tmp, device=args.device) if getattr(args, "device", None) else InProcessEngine(tmp)
    model = {"arch": arch, "name_or_path": folder}
    base = {"prompt": "a lighthouse on a cliff at dusk", "width": size, "height": size, "num_inference_steps": steps,
            "seed": 3, "output_ext": "png"}
    http = {"bytes": 0}

    def loaded() -> int:
        return int(eng.engine.worker_state.pool.get("loaded_bytes", 0)) if eng.engine.worker_state else 0

    def generate(sample) -> bytes:
        body = {"model": model, "sample": sample}
        http["bytes"] += len(json.dumps(body))
        frames = eng.client.stream(body, path="/generate")
        end = frames[-1][0]
        if end.get("status") != "ok":
            raise RuntimeError(end)
        res = next(h for h, _ in frames if h["type"] == "result")
        data = eng.client.get(res["url"]).content
        http["bytes"] += len(data)
        return data

    def one():
        generate({**base, "hires": {"scale": scale, "upscaler": "Lanczos", "denoise": denoise}})

    def two():
        first = generate(base)
        image = Image.open(io.BytesIO(first)).convert("RGB").resize((big, big), resample=Image.LANCZOS)
        buf = io.BytesIO()
        image.save(buf, "PNG")
        url = "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()
        generate({**base, "width": big, "height": big, "init_img": url, "strength": denoise})

    modes = {"one_request": (one, 1), "two_requests": (two, 2)}
    out = {"arch": arch, "model": os.path.basename(folder), "base": f"{size}x{size}", "hires": f"{big}x{big}",
           "steps": steps, "denoise": denoise, "repeat": args.repeat}
    try:
        cold0 = loaded()
        t0 = time.perf_counter()
        one()                                 # the first request loads the model: said apart
        out["cold_one_request_s"] = time.perf_counter() - t0
        out["cold_loaded_bytes"] = loaded() - cold0
        times = {k: [] for k in modes}
        loads = {k: 0 for k in modes}
        sent = {k: 0 for k in modes}
        for _ in range(args.repeat):          # interleaved: drift hits both alike
            for name, (fn, _n) in modes.items():
                before, http["bytes"] = loaded(), 0
                t = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - t)
                loads[name] += loaded() - before
                sent[name] += http["bytes"]
        for name, (_fn, n) in modes.items():
            out[name] = {"seconds": statistics.median(times[name]), "min_s": min(times[name]), "runs_s": times[name],
                         "loaded_bytes": loads[name] // args.repeat, "http_bytes": sent[name] // args.repeat,
                         "requests": n}
        out["ratio"] = out["one_request"]["seconds"] / out["two_requests"]["seconds"]
    finally:
        eng.close()
    return out


def write(res: dict, out: str):
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump(res, f, indent=2)
    print(f"hires fix, {res['arch']} ({res['model']}), {res['base']} -> {res['hires']}, {res['steps']} steps, "
          f"denoise {res['denoise']}, medians of {res['repeat']}; first (cold) request {res['cold_one_request_s']:.2f} s, "
          f"{res['cold_loaded_bytes'] / 2**20:.1f} MiB loaded")
    print(f"{'mode':<14} {'seconds':>9} {'loaded':>10} {'over HTTP':>11} requests")
    for name in ("one_request", "two_requests"):
        r = res[name]
        print(f"{name:<14} {r['seconds']:>9.3f} {r['loaded_bytes'] / 2**20:>8.1f}Mi {r['http_bytes'] / 1024:>9.1f}Ki "
              f"{r['requests']:>8}")
    print(f"one / two: {res['ratio']:.3f}; wrote {out}")

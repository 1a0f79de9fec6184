"""What ComfyUI's API adds to a request: the tiny SDXL checkpoint of testing/comfy_tree.py through its
sdxl_txt2img workflow (64x64), on an in-process engine (thread worker) behind real uvicorn servers.

    .venv/bin/python testing/bench_comfy.py [--repeat 5] [--steps 8]

Interleaved, `--repeat` runs of each:
- native: Engine.submit of the very request the workflow analyses to (comfy_graph.analyse), with the stream
  options the API asks for (JPEG previews, no latents), submit to done;
- comfy: POST /prompt (the workflow, a new seed each run) to its `executing: null` on /ws, followed with
  websocket-client as ComfyUI's websockets_api_example.py does (previews on, as the API sends them);
- prompt: POST /prompt's answer alone (the graph checked, analysed and dry-run resolved, the job queued).
Fastest and median of each; writes testing/.bench/bench_comfy.json and prints them.
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from testing.comfy_tree import workflow, write_tree  # noqa: E402
from toolkit.models.tiny import cached_tiny  # noqa: E402

TOKEN = "bench-comfy-token"
OUT = os.path.join(ROOT, "testing", ".bench", "bench_comfy.json")


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--steps", type=int, default=8)
    args = parser.parse_args(argv)

    import websocket
    from extensions_built_in.inference_engine.compat import comfy_graph, compat_routes, serve_comfy_on_port
    from extensions_built_in.inference_engine.compat.comfy_prompts import STREAM
    from extensions_built_in.inference_engine.engine import Engine

    work = tempfile.mkdtemp(prefix="bench_comfy_")
    tiny_root = os.environ.get("AITK_TINY_CACHE") or os.path.join(work, "tiny")
    tree = write_tree(work, lambda arch, seed=0: str(cached_tiny(arch, seed, root=tiny_root)))
    engine = Engine(output_folder=f"{work}/outputs", assets_folder=f"{work}/assets", worker="thread", comfyui_path=tree)
    engine.start_worker()
    route = compat_routes(engine=engine)
    comfy = serve_comfy_on_port(engine, TOKEN, route, 0)
    threading.Thread(target=engine.run_forever, daemon=True).start()
    address = f"127.0.0.1:{comfy.port}"
    prompt = workflow("sdxl_txt2img")
    prompt["3"]["inputs"]["steps"] = args.steps
    job = comfy_graph.analyse(prompt, route.comfy.files, lambda m, s: engine.resolve(m, s, dry_run=True))[0]
    client_id = str(uuid.uuid4())
    ws = websocket.WebSocket()
    ws.connect(f"ws://{address}/ws?clientId={client_id}", header=[f"Authorization: Bearer {TOKEN}"])

    def native(seed):
        t0 = time.perf_counter()
        req = engine.submit(job.model, {**job.sample, "seed": seed}, STREAM)
        req.done_event.wait()
        assert req.status == "ok", req.error
        return time.perf_counter() - t0

    def via_comfy(seed):
        prompt["3"]["inputs"]["seed"] = seed
        body = json.dumps({"prompt": prompt, "client_id": client_id}).encode()
        t0 = time.perf_counter()
        r = urllib.request.Request(f"http://{address}/prompt", data=body, headers={"Authorization": f"Bearer {TOKEN}"})
        prompt_id = json.loads(urllib.request.urlopen(r).read())["prompt_id"]
        answered = time.perf_counter() - t0
        while True:
            out = ws.recv()
            if isinstance(out, str):
                m = json.loads(out)
                if m["type"] == "executing" and m["data"]["node"] is None and m["data"]["prompt_id"] == prompt_id:
                    return time.perf_counter() - t0, answered

    native(0)                    # the load, once
    times = {"native": [], "comfy": [], "prompt": []}
    for i in range(args.repeat):
        times["native"].append(native(i + 1))
        total, answered = via_comfy(i + 1)
        times["comfy"].append(total)
        times["prompt"].append(answered)
    ws.close()
    engine.stop()
    comfy.stop()
    result = {k: {"min_s": round(min(v), 4), "median_s": round(statistics.median(v), 4)} for k, v in times.items()}
    result["comfy_minus_native_min_s"] = round(min(times["comfy"]) - min(times["native"]), 4)
    result.update(steps=args.steps, repeat=args.repeat, size="64x64", model="tiny sdxl checkpoint (comfy_tree)")
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump(result, f, indent=1)
    for k in ("native", "comfy", "prompt"):
        print(f"{k:7s} min {result[k]['min_s'] * 1000:8.1f} ms   median {result[k]['median_s'] * 1000:8.1f} ms")
    print(f"ComfyUI's API adds {result['comfy_minus_native_min_s'] * 1000:.1f} ms (fastest runs); written to {OUT}")


if __name__ == "__main__":
    main()

"""ComfyUI workflow analysis benchmark: each workflow of testing/workflows analysed into engine requests
over the tiny ComfyUI install (testing/comfy_tree.py), alone and with the engine's dry-run resolve, and
GET /object_info's table with the install's files; milliseconds per call (medians of `--rounds`).

    python testing/bench_comfy_graph.py [--rounds 50]

Writes testing/.bench/bench_comfy_graph.json."""
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
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

WORKFLOWS = ("sdxl_txt2img", "flux_txt2img", "sdxl_img2img", "sdxl_lora", "sdxl_hires")


def timed(fn, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return round(statistics.median(times), 3)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=50)
    ap.add_argument("--out", default=os.path.join(ROOT, "testing", ".bench", "bench_comfy_graph.json"))
    args = ap.parse_args(argv)
    from extensions_built_in.inference_engine.compat.comfy_files import ComfyFiles
    from extensions_built_in.inference_engine.compat.comfy_graph import analyse
    from extensions_built_in.inference_engine.compat.comfy_nodes import object_info
    from extensions_built_in.inference_engine.engine import Engine
    from testing.comfy_tree import workflow, write_tree
    from toolkit.models.tiny import cached_tiny

    base = tempfile.mkdtemp(prefix="bench_comfy_")
    root = write_tree(base, lambda arch: str(cached_tiny(arch)))
    engine = Engine(output_folder=os.path.join(base, "out"), assets_folder=os.path.join(root, "input"),
                    worker="thread", model_roots=[root], model_folders=[root])
    files = ComfyFiles(engine.model_folders, os.path.join(root, "input"))

    def resolve(model, sample):
        engine.resolve(model, sample, dry_run=True)
    res = {"rounds": args.rounds, "ms": {}}
    for name in WORKFLOWS:
        prompt = workflow(name)
        analyse(prompt, files, resolve)            # headers read once (detect_file's cache), as a server's are
        res["ms"][name] = {"analyse": timed(lambda: analyse(prompt, files), args.rounds),
                           "analyse_and_resolve": timed(lambda: analyse(prompt, files, resolve), args.rounds)}
        print(f"{name:14s} analyse {res['ms'][name]['analyse']:7.3f} ms   with the engine's resolve "
              f"{res['ms'][name]['analyse_and_resolve']:7.3f} ms")
    res["ms"]["object_info"] = timed(lambda: object_info(files), args.rounds)
    print(f"object_info    {res['ms']['object_info']:7.3f} ms")
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(res, f, indent=2)
    return res


if __name__ == "__main__":
    main()

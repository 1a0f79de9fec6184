"""`bench_engine.py --control`: adding a ControlNet to a resident model against loading a ControlNet pipeline
from scratch, on the tiny SD 1.x model and a tiny ControlNet (CPU).

- add: the model resident in the worker's pool; a request names a ControlNet not read yet: only the control is
  loaded (bytes: what the pool read);
- warm: the same ControlNet again (a pool hit: nothing read);
- scratch: diffusers' `StableDiffusionControlNetPipeline.from_pretrained` with its ControlNet, as a script
  without a resident model would (bytes: every weight file).
Medians of `--repeat` interleaved rounds; the pool entry of the control is dropped before each `add`.
"""
import os
import shutil
import statistics
import time

ARCH = "sd1"


def _bytes(folder: str) -> int:
    return sum(os.path.getsize(os.path.join(r, f)) for r, _d, fs in os.walk(folder) for f in fs
               if f.endswith(".safetensors"))


def control_bench(args, root: str) -> dict:
    import dataclasses

    import torch
    from diffusers import ControlNetModel, StableDiffusionControlNetPipeline

    from extensions_built_in.inference_engine.worker import WorkerCore
    from testing.fixtures import input_image
    from toolkit.config_modules import GenerateImageConfig, ModelConfig
    from toolkit.control_models import check_all
    from toolkit.models.tiny import cached_tiny
    from toolkit.models.tiny.controlnets import write_tiny_controlnet
    from toolkit.models.v2.mixin import thread_load_interceptor

    folder = str(cached_tiny(ARCH, 0))
    tmp = os.path.join(root, "testing", ".bench", "controls")
    shutil.rmtree(tmp, ignore_errors=True)
    net = str(write_tiny_controlnet(ARCH, folder, os.path.join(tmp, "cn"), "folder"))
    image = input_image(os.path.join(tmp, "control.png"))
    core = WorkerCore(lambda msg: None, keep_resident_gb=1)
    mc = ModelConfig.from_dict({"arch": ARCH, "name_or_path": folder})
    holder = core._ensure_holder(mc, None)
    gen = GenerateImageConfig.from_dict({"prompt": "a fox", "width": 64, "height": 64, "num_inference_steps": 2,
                                         "controls": [{"model": net, "image": image}]}, ARCH)
    gen = dataclasses.replace(gen, controls=check_all(gen, holder.spec))

    def add():
        before = core.pool.loaded_bytes
        holder._controls = None
        t0 = time.perf_counter()
        with thread_load_interceptor(core.pool):
            holder.ensure_controls(gen)
        return time.perf_counter() - t0, core.pool.loaded_bytes - before

    def scratch():
        t0 = time.perf_counter()
        cn = ControlNetModel.from_pretrained(net, local_files_only=True)
        pipe = StableDiffusionControlNetPipeline.from_pretrained(
            folder, controlnet=cn, local_files_only=True, dtype=torch.float32, safety_checker=None,
            feature_extractor=None, requires_safety_checker=False)
        pipe.set_progress_bar_config(disable=True)
        return time.perf_counter() - t0

    times = {"add": [], "warm": [], "scratch": []}
    added = []
    loads0 = core.pool.loads
    for _i in range(args.repeat):
        core.pool._drop(core.pool.holds("controlnet"))
        seconds, read = add()
        times["add"].append(seconds)
        added.append(read)
        times["warm"].append(add()[0])
        times["scratch"].append(scratch())
    return {"arch": ARCH, "threads": torch.get_num_threads(), "repeat": args.repeat,
            "seconds": {k: statistics.median(v) for k, v in times.items()},
            "bytes": {"add": statistics.median(added), "warm": 0, "scratch": _bytes(folder) + _bytes(net),
                      "controlnet_file": _bytes(net)},
            "component_loads_while_adding": core.pool.loads - loads0, "rounds": args.repeat}


def write_control(res: dict, out: str):
    import json

    s, b = res["seconds"], res["bytes"]
    rows = [("add a ControlNet to the resident model", f"{s['add'] * 1e3:.1f} ms, {b['add'] / 2**20:.2f} MiB read"),
            ("the same ControlNet again (pool hit)", f"{s['warm'] * 1e3:.1f} ms, 0 MiB read"),
            ("ControlNet pipeline from scratch (diffusers)", f"{s['scratch'] * 1e3:.1f} ms, "
             f"{b['scratch'] / 2**20:.2f} MiB read"),
            ("scratch / add", f"{s['scratch'] / s['add']:.1f}x time, {b['scratch'] / max(b['add'], 1):.1f}x bytes"),
            ("component loads over the rounds (one control per round)", str(res["component_loads_while_adding"]))]
    res["table"] = [{"figure": f, "value": v} for f, v in rows]
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump(res, f, indent=2, default=str)
    w = max(len(f) for f, _v in rows)
    print(f"{res['arch']} tiny, CPU, torch {res['threads']} threads, medians of {res['repeat']} rounds")
    for f, v in rows:
        print(f"{f:<{w}}  {v}")
    print(f"wrote {out}")

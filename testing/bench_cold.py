"""Cold start: process start to the first image (`bench_engine.py --cold`), on an SD 1.5-shaped folder of random
weights at the real dimensions (testing/sd15_real_dims.py, fp16 on disk, float32 compute on the CPU).

One function per runner, each starting its own process and returning a JSON-able dict of times measured on
CLOCK_MONOTONIC (system-wide on Linux: a child's time.monotonic() stamps compare with the parent's):

  engine_cold      `python run.py config.json` (an InferenceEngine job); engine.json polled for, a POST
                   /generate sent the moment it appears; Popen -> the first image's `end` frame as the client
                   sees it. Then the peak RSS (VmHWM) of the HTTP process and its worker, and a second request
                   of the same size on the now warm engine (first/warm).
  bare_cold        a bare diffusers script in its own process (StableDiffusionPipeline.from_pretrained,
                   EulerDiscreteScheduler, one call, the PNG saved); Popen -> the PNG written (the script's
                   own stamp; its exit is not counted).
  generate_cold    the one-shot Generate job (`python run.py generate.yaml`); Popen -> its `wrote <path>`.

`run(args)` interleaves the three per case (the order rotated each repeat) and takes medians;
`write(res, path)` writes bench_cold.json and prints the table; `doc_section(res)` renders the markdown
section of docs/benchmarks.md and `write_doc(res)` puts it there (in place of the previous one):

    .venv/bin/python testing/bench_engine.py --cold [--repeat 3] [--quick] [--write-doc]
    .venv/bin/python testing/bench_cold.py [--json testing/.bench/bench_cold.json]   # the doc from the last JSON

The folder is read once before the runs, so every runner finds it in the page cache: the figures are the
processes' cold start (imports, reading and converting the weights, the first call), not the disk's.
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

BENCH = os.path.join(ROOT, "testing", ".bench")
WORK = os.path.join(BENCH, "cold")
JSON_PATH = os.path.join(BENCH, "bench_cold.json")
DOC = os.path.join(ROOT, "docs", "benchmarks.md")
DOC_HEADING = "## Cold start: process start to the first image"
DOC_AFTER = "## The engine against bare diffusers"

PROMPT = "a fox in the snow"
GUIDANCE = 7.0
SEED = 7
SAMPLER = "euler"
CASES = [(64, 2), (256, 10)]       # fixed costs dominate; then a call long enough to weigh
RUNNERS = ("bare", "engine", "generate")
COMPUTE_STAGES = ("encode", "sample", "decode", "save")
ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}

# The bare script: what a user of diffusers writes for one image. Stamps go to stdout as they happen.
BARE_SCRIPT = r"""
import sys, time
def stamp(name):
    print(f"STAMP {name} {time.monotonic():.6f}", flush=True)
stamp("start")
import torch
from diffusers import StableDiffusionPipeline, EulerDiscreteScheduler
stamp("import")
folder, out, size, steps, seed, guidance, prompt = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), \
    int(sys.argv[5]), float(sys.argv[6]), sys.argv[7]
pipe = StableDiffusionPipeline.from_pretrained(folder, torch_dtype=torch.float32, local_files_only=True)
pipe.scheduler = EulerDiscreteScheduler.from_config(pipe.scheduler.config)
pipe.set_progress_bar_config(disable=True)
stamp("load")
image = pipe(prompt, width=size, height=size, num_inference_steps=steps, guidance_scale=guidance,
             generator=torch.Generator("cpu").manual_seed(seed)).images[0]
stamp("call")
image.save(out)
stamp("save")
print(f"SAVED {out}", flush=True)
"""


def med(values):
    return statistics.median(values) if values else float("nan")


def warm_page_cache(folder: str) -> dict:
    """Read every file of the folder once (the runners then find it in the page cache alike)."""
    t0, total = time.monotonic(), 0
    for dirpath, _dirs, files in os.walk(folder):
        for name in files:
            with open(os.path.join(dirpath, name), "rb") as f:
                while chunk := f.read(64 << 20):
                    total += len(chunk)
    return {"bytes": total, "seconds": time.monotonic() - t0}


def vm_hwm(pid: int) -> int | None:
    """Peak resident set (VmHWM) of a live process, in bytes."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def _fresh(path: str) -> str:
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return path


def _reap(proc) -> int | None:
    """Wait for a child and return its peak RSS in bytes (wait4's ru_maxrss: that child and what it waited
    for), so a process that has already exited still reports one."""
    _pid, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_maxrss * 1024


def _read_lines(proc, t0: float, until: str, log: list, timeout: float = 900):
    """Read the child's merged stdout/stderr line by line (stamped as it arrives) until a line starting with
    `until`; the line and the monotonic time it was read."""
    deadline = time.monotonic() + timeout
    for line in proc.stdout:
        now = time.monotonic()
        line = line.rstrip("\n")
        log.append((round(now - t0, 4), line))
        if line.startswith(until):
            return line, now
        if now > deadline:
            break
    proc.wait()
    tail = "\n".join(text for _t, text in log[-40:])
    raise RuntimeError(f"no `{until}` line (exit {proc.returncode}):\n{tail}")


# -- the runners ----------------------------------------------------------------------------------------------
def bare_cold(folder: str, size: int, steps: int) -> dict:
    out_dir = _fresh(os.path.join(WORK, "bare"))
    out = os.path.join(out_dir, f"bare_{size}.png")
    args = [sys.executable, "-c", BARE_SCRIPT, folder, out, str(size), str(steps), str(SEED), str(GUIDANCE), PROMPT]
    log = []
    t0 = time.monotonic()
    proc = subprocess.Popen(args, cwd=ROOT, env={**os.environ, **ENV}, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, bufsize=1)
    _line, seen = _read_lines(proc, t0, "SAVED ", log)
    stamps = {}
    for _t, text in log:
        if text.startswith("STAMP "):
            _s, name, value = text.split()
            stamps[name] = float(value) - t0
    for _ in proc.stdout:      # drain to EOF (the interpreter's exit is not timed)
        pass
    proc.stdout.close()
    rss = _reap(proc)
    return {"first_image_s": stamps["save"], "seen_s": seen - t0, "stamps_s": stamps, "peak_rss": rss,
            "path": out, "exit": proc.returncode}


def engine_cold(folder: str, size: int, steps: int) -> dict:
    from testing.engine_client import EngineClient, EngineProcess

    job = _fresh(os.path.join(WORK, "engine_job"))
    parent = os.path.dirname(folder)
    body = {"model": {"arch": "sd1", "name_or_path": folder},
            "sample": {"prompt": PROMPT, "width": size, "height": size, "num_inference_steps": steps,
                       "guidance_scale": GUIDANCE, "seed": SEED, "sampler": SAMPLER},
            "stream": {"latents": "none"}}
    t0 = time.monotonic()
    ep = EngineProcess(job, name="bench_cold", env=ENV,
                       engine_extra={"model_roots": [parent], "dtype": "float32"})
    try:
        while not os.path.isfile(ep.engine_json):     # the request goes out the moment engine.json is there
            if ep.proc.poll() is not None:
                raise RuntimeError(f"engine exited with {ep.proc.returncode}: {ep.read_log()[-3000:]}")
            if time.monotonic() - t0 > 300:
                raise TimeoutError(f"no engine.json: {ep.read_log()[-3000:]}")
            time.sleep(0.005)
        t_json = time.monotonic()
        with open(ep.engine_json) as f:
            ep.info = json.load(f)
        ep.client = EngineClient(f"http://{ep.info['host']}:{ep.info['port']}", ep.info["token"], timeout=900)
        frames = []

        def on_frame(h, _p):
            frames.append((round(time.monotonic() - t0, 4), h))
        ep.client.stream(body, on_frame=on_frame)
        t_end = time.monotonic()
        rss = engine_rss(ep.proc.pid)
        end = frames[-1][1]
        if end.get("type") != "end" or end.get("status") != "ok":
            errs = [h.get("message") for _t, h in frames if h["type"] == "error"]
            raise RuntimeError(f"engine request failed: {end} {errs}")
        result = next(h for _t, h in frames if h["type"] == "result")
        # a request of the same size on the now warm engine: another prompt and seed (the same prompt's
        # conditioning would come from the cache, which is not work a first request skips)
        warm_body = {**body, "sample": {**body["sample"], "prompt": PROMPT + ", at dusk", "seed": SEED + 1}}
        t1 = time.monotonic()
        warm_frames = ep.client.stream(warm_body)
        warm_s = time.monotonic() - t1
        if warm_frames[-1][0].get("status") != "ok":
            raise RuntimeError(f"warm request failed: {warm_frames[-1][0]}")
    finally:
        code = ep.stop()
    return {"first_image_s": t_end - t0, "engine_json_s": t_json - t0, "request_s": t_end - t_json,
            "warm_s": warm_s, "first_over_warm": (t_end - t0) / warm_s,
            "status_frames": [{"t_s": t, **{k: v for k, v in h.items() if k != "request_id"}}
                              for t, h in frames if h["type"] == "status"],
            "stages": end.get("stages"), "warm_stages": warm_frames[-1][0].get("stages"), "end_frame": {k: v for k, v in end.items() if k != "request_id"},
            "peak_rss": rss, "path": result.get("path"), "exit": code}


def engine_rss(pid: int) -> dict:
    """VmHWM of the engine's HTTP process and of each process under it (the generation worker)."""
    import psutil

    out = {"http": vm_hwm(pid), "children": {}}
    try:
        for child in psutil.Process(pid).children(recursive=True):
            cmd = " ".join(child.cmdline()[-2:])[-60:]
            out["children"][f"{child.pid} {cmd}"] = vm_hwm(child.pid)
    except psutil.Error:
        pass
    worker = max((v or 0 for v in out["children"].values()), default=0)
    out["worker"] = worker
    out["total"] = (out["http"] or 0) + sum(v or 0 for v in out["children"].values())
    return out


def generate_cold(folder: str, size: int, steps: int) -> dict:
    import yaml

    job = _fresh(os.path.join(WORK, "generate"))
    cfg = {"job": "extension", "config": {"name": "bench_cold_generate", "process": [{
        "type": "Generate", "device": "cpu", "output_folder": os.path.join(job, "out"),
        "model": {"arch": "sd1", "name_or_path": folder, "dtype": "float32"},
        "sample": {"width": size, "height": size, "num_inference_steps": steps, "guidance_scale": GUIDANCE,
                   "seed": SEED, "sampler": SAMPLER},
        "prompts": [PROMPT]}]}}
    path = os.path.join(job, "generate.yaml")
    with open(path, "w") as f:
        yaml.safe_dump(cfg, f)
    log = []
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, os.path.join(ROOT, "run.py"), path], cwd=ROOT,
                            env={**os.environ, **ENV}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, bufsize=1)
    line, seen = _read_lines(proc, t0, "wrote ", log)
    for _ in proc.stdout:
        pass
    proc.stdout.close()
    rss = _reap(proc)
    return {"first_image_s": seen - t0, "status_lines": [[t, text] for t, text in log if text.startswith("[")],
            "peak_rss": rss, "path": line.split()[1], "exit": proc.returncode}


RUN = {"bare": bare_cold, "engine": engine_cold, "generate": generate_cold}


def same_pixels(paths: dict) -> dict:
    """Whether each runner's image equals the bare script's, pixel for pixel."""
    import numpy as np
    from PIL import Image

    def load(p):
        with Image.open(p) as im:
            return np.asarray(im.convert("RGB"))
    ref = load(paths["bare"])
    return {k: bool(np.array_equal(load(p), ref)) for k, p in paths.items() if k != "bare" and p}


# -- the run ---------------------------------------------------------------------------------------------------
def run_case(folder: str, size: int, steps: int, repeat: int) -> dict:
    runs = {k: [] for k in RUNNERS}
    pixels = None
    for r in range(repeat):
        order = RUNNERS[r % 3:] + RUNNERS[:r % 3]       # rotated: no runner always goes first
        paths = {}
        for name in order:
            res = RUN[name](folder, size, steps)
            res["order"] = order.index(name)
            runs[name].append(res)
            paths[name] = res["path"]
            print(f"  {size}x{size} {steps} steps, {name:<8} {res['first_image_s']:7.2f} s"
                  + (f"  (warm {res['warm_s']:.2f} s)" if name == "engine" else ""), flush=True)
        pixels = same_pixels(paths)
    m = {k: med([x["first_image_s"] for x in runs[k]]) for k in RUNNERS}
    warm = med([x["warm_s"] for x in runs["engine"]])
    # the same work in both requests (encode, sample, decode, save): what the first request does that later ones
    # skip, with the worker's start and the load taken out
    compute = [_compute(x["stages"]) / _compute(x["warm_stages"]) for x in runs["engine"]
               if _compute(x.get("stages")) and _compute(x.get("warm_stages"))]
    return {"size": size, "steps": steps, "repeat": repeat, "runs": runs,
            "median_s": m, "engine_warm_median_s": warm,
            "engine_over_bare": m["engine"] / m["bare"], "generate_over_bare": m["generate"] / m["bare"],
            "engine_first_over_warm": m["engine"] / warm,
            "engine_first_compute_over_warm": med(compute),
            "median_peak_rss": {"bare": med([x["peak_rss"] for x in runs["bare"]]),
                                "engine_http": med([x["peak_rss"]["http"] for x in runs["engine"]]),
                                "engine_worker": med([x["peak_rss"]["worker"] for x in runs["engine"]]),
                                "generate": med([x["peak_rss"] for x in runs["generate"]])},
            "same_pixels_as_bare": pixels}


def _compute(stages: dict | None) -> float:
    return sum((stages or {}).get(k, 0.0) for k in COMPUTE_STAGES)


def _commit() -> str:
    """The code measured: HEAD, and whether the tree had changes."""
    git = ["git", "-C", ROOT]
    head = subprocess.run(git + ["rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(git + ["status", "--porcelain", "--untracked-files=no"], capture_output=True,
                           text=True).stdout.strip()
    return head + ("+changes" if dirty else "")


def run(args) -> dict:
    import torch
    from testing import sd15_real_dims

    folder = os.path.realpath(sd15_real_dims.make())
    cases = CASES[:1] if args.quick else CASES
    repeat = 1 if args.quick else args.repeat
    t_start = time.monotonic()
    res = {"folder": folder, "prompt": PROMPT, "guidance_scale": GUIDANCE, "seed": SEED, "sampler": SAMPLER,
           "dtype": "float32", "torch": torch.__version__, "threads": torch.get_num_threads(), "cpus": os.cpu_count(),
           "python": sys.version.split()[0], "loadavg_start": os.getloadavg(),
           "commit": _commit(), "date": time.strftime("%Y-%m-%d"),
           "page_cache_warmup": warm_page_cache(folder), "cases": []}
    for size, steps in cases:
        res["cases"].append(run_case(folder, size, steps, repeat))
    res["loadavg_end"] = os.getloadavg()
    res["wall_s"] = time.monotonic() - t_start
    return res


# -- output ----------------------------------------------------------------------------------------------------
def _yes(v) -> str:
    return "?" if v is None else ("yes" if v else "no")


def _mib(b) -> str:
    return "-" if not b else f"{b / 2**20:.0f}"


def _first_by_stage(events) -> dict:
    """(t, stage) pairs -> each stage's first time, in the order they came."""
    out = {}
    for t, stage in events:
        out.setdefault(stage, t)
    return out


def _median_of(dicts: list) -> dict:
    """Key-wise medians over the runs, keys in the first run's order."""
    keys = list(dict.fromkeys(k for d in dicts for k in d))
    return {k: med([d[k] for d in dicts if k in d]) for k in keys}


def _milestones(case: dict) -> dict:
    """Per runner, the median seconds from Popen of each milestone it reports: the bare script's stamps, the
    engine's engine.json and the first status frame of each stage, the Generate job's first `[stage]` line."""
    b, e, g = (case["runs"][k] for k in RUNNERS)
    engine = [{"engine.json": x["engine_json_s"],
               **_first_by_stage((f["t_s"], f.get("stage", "?")) for f in x["status_frames"]),
               "end": x["first_image_s"]} for x in e]
    generate = [{**_first_by_stage((t, text[1:text.index("]")]) for t, text in x["status_lines"]),
                 "wrote": x["first_image_s"]} for x in g]
    return {"bare": _median_of([{k: x["stamps_s"][k] for k in ("import", "load", "call", "save")} for x in b]),
            "engine": _median_of(engine), "generate": _median_of(generate)}


def table(res: dict) -> str:
    """The markdown tables: medians and ratios per case, then the milestones and peak RSS."""
    rep = res["cases"][0]["repeat"] if res["cases"] else 0
    lines = ["| size, steps | bare diffusers (s) | engine (s) | engine / bare | Generate job (s) | Generate / bare "
             "| engine warm request (s) | engine first / warm | first request's encode..save / warm's |",
             "|---|---|---|---|---|---|---|---|---|"]
    for c in res["cases"]:
        m = c["median_s"]
        lines.append(f"| {c['size']}x{c['size']}, {c['steps']} | {m['bare']:.2f} | {m['engine']:.2f} | "
                     f"{c['engine_over_bare']:.2f} | {m['generate']:.2f} | {c['generate_over_bare']:.2f} | "
                     f"{c['engine_warm_median_s']:.2f} | {c['engine_first_over_warm']:.1f} | "
                     f"{c.get('engine_first_compute_over_warm', float('nan')):.2f} |")
    lines += ["", "Milestones, seconds from Popen (medians), and peak RSS:", "",
              "| size, steps | runner | milestones | peak RSS (MiB) |", "|---|---|---|---|"]
    for c in res["cases"]:
        ms, rss = _milestones(c), c["median_peak_rss"]
        stages = [x["stages"] for x in c["runs"]["engine"] if x.get("stages")]
        for name in RUNNERS:
            text = ", ".join(f"{k} {v:.2f}" for k, v in ms[name].items())
            if name == "engine" and stages:
                text += "; stages " + ", ".join(f"{k} {v:.2f}" if isinstance(v, (int, float)) else f"{k} {v}"
                                                for k, v in stages[-1].items())
            mem = (f"{_mib(rss['engine_http'])} HTTP + {_mib(rss['engine_worker'])} worker" if name == "engine"
                   else _mib(rss[name]))
            lines.append(f"| {c['size']}x{c['size']}, {c['steps']} | {name} | {text} | {mem} |")
    pixels = "; ".join(f"{c['size']}x{c['size']}: engine {_yes(c['same_pixels_as_bare'].get('engine'))}, Generate "
                       f"{_yes(c['same_pixels_as_bare'].get('generate'))}" for c in res["cases"])
    lines += ["", f"{rep} run(s) per runner per case, interleaved, at commit {res.get('commit', '?')} "
              f"({res.get('date', '?')}); torch {res['torch']}, {res['threads']} threads, {res['cpus']} CPUs, load "
              f"average {res['loadavg_start'][0]:.2f} -> {res['loadavg_end'][0]:.2f}. The same pixels as the bare "
              f"script's PNG: {pixels}."]
    return "\n".join(lines) + "\n"


def doc_section(res: dict) -> str:
    return f"""{DOC_HEADING}

`testing/bench_cold.py` (`bench_engine.py --cold`): what a user waits for from launching a process to holding the
first image, on an SD 1.5-shaped folder at the real dimensions (`testing/sd15_real_dims.py`: random weights, the
UNet 860M, CLIP-L and the KL VAE, fp16 safetensors as the hub ships them) on the CPU, float32 compute, "{PROMPT}",
Euler, guidance {GUIDANCE:g}, a fixed seed, in three processes side by side:

```
.venv/bin/python testing/bench_engine.py --cold [--repeat 3] [--quick] [--write-doc]
.venv/bin/python testing/bench_cold.py        # this section again from testing/.bench/bench_cold.json
```

- engine: `python run.py config.json` (an InferenceEngine job, `engine.model_roots` the folder's parent); a
  POST /generate sent the moment engine.json appears; Popen -> the first image's `end` frame as the client sees
  it. Then a second request of the same size (another prompt and seed) on the now warm engine: first / warm,
  and the first request's encode, sample, decode and save seconds over the warm one's (from the `end` frames'
  stages: the work only a first request does). The peak RSS (VmHWM) of the HTTP process and of its worker is
  read right after the first image.
- bare diffusers: a script in its own process (`StableDiffusionPipeline.from_pretrained(folder,
  torch_dtype=torch.float32)`, `EulerDiscreteScheduler.from_config`, one call, `image.save`); Popen -> the PNG
  written (the script's own monotonic stamp: the interpreter's exit is not counted).
- Generate job: `python run.py generate.yaml` (`type: Generate`); Popen -> its `wrote <path>` line.

The folder is read once first, so all three find it in the page cache: these are the processes' fixed costs
(imports, reading and converting the weights, the first call), not the disk's. Peak RSS of the bare script and
the Generate job is the exited process's (wait4). 64x64 with 2 steps is nearly all fixed cost; 256x256 with 10
steps adds a call long enough to weigh.

Where the engine's seconds go: its HTTP server is up in about 0.6 s and takes the request at once; the worker
it spawned first is importing torch and diffusers meanwhile (the `worker` stage: the request's wait for it);
the load reads the pool's components; then the call. Both the engine and the Generate job compute faster
than the bare script because their process keeps the C heap's freed blocks for the next step
(`toolkit/host_heap.py`): glibc's defaults fault every large block in again on each UNet step.

{table(res)}"""


def write_doc(res: dict, path: str = DOC):
    """Replace the section (or add it after the engine-against-bare section), leaving the rest as it is."""
    with open(path) as f:
        text = f.read()
    section = doc_section(res)
    if DOC_HEADING in text:
        start = text.index(DOC_HEADING)
        nxt = text.find("\n## ", start + len(DOC_HEADING))
        text = text[:start] + section + ("\n" + text[nxt + 1:] if nxt >= 0 else "")
    else:
        after = text.index(DOC_AFTER)
        nxt = text.find("\n## ", after + len(DOC_AFTER))
        text = text[:nxt + 1] + section + "\n" + text[nxt + 1:]
    with open(path, "w") as f:
        f.write(text)
    print(f"wrote {path}")


def write(res: dict, path: str = JSON_PATH):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(res, f, indent=2, default=str)
    print(table(res))
    if res["loadavg_start"][0] > 1.0:     # at the start: the end's is this bench's own (2 busy threads)
        print("WARNING: other work was loading this machine (load average at the start); timings are unreliable")
    print(f"wrote {path}")


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description="docs/benchmarks.md's cold-start section from bench_cold.json")
    ap.add_argument("--json", default=JSON_PATH)
    a = ap.parse_args()
    with open(a.json) as f:
        write_doc(json.load(f))

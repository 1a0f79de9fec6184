"""What the engine adds to a bare diffusers call, and where it goes: tiny zimage on this CPU, 20 steps, the
same seed, at 64x64 and 512x512, side by side in one run.

    .venv/bin/python testing/bench_overhead.py [--repeat 7] [--sizes 64,512]

Per size, interleaved, `--repeat` runs of each:
- bare: `DiffusionPipeline.from_pretrained(<the tiny folder>)(...)` in this process, a PIL image out (no file);
- engine: POST /generate to a real engine (`run.py`'s process: testing/engine_client.EngineProcess; its worker
  process), seconds from the POST to the end frame; once with a latent frame every step (what the UI asks),
  once with none.
The engine's extra time, split:
- PNG: the file (encode, fsync, rename) timed inside the engine from its own frames, `saving` status to
  `result` frame; beside it toolkit.media.save_media on the bare image in this process (the same writer and
  metadata size);
- latent frames: engine(a latent every step) - engine(none): the float16 copy, its bytes over the worker's
  pipe and the HTTP stream; beside it, in this process, the copy alone (latents.frame_on_device, the host
  copy, payload_bytes and the pickled Frame, times the steps) and those Frames sent down a pipe to a reader
  (what the worker's sampling thread pays for them);
- the rest: engine - bare - PNG - latent frames (HTTP, the queue, the pipe, status and progress frames).
The split is taken from the fastest run of each kind (the shared machine's other load only adds time); the
medians are shown beside it.
Then whether the file is on the next request's path: two requests posted together (engine.max_batch 1, so
they run one after the other), on the engine as it is (engine.write_behind: the file written while the next
request samples) and on a second one with write_behind false (the file before the next Run): the time from
the first's `saving` frame to the second's first worker frame (`encoding`; below zero: the second started
before the first's file), and the pair's time, the first POST to the second's end.

Writes testing/.bench/bench_overhead.json; prints the table.
"""
import argparse
import json
import os
import pickle
import shutil
import statistics
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402

from testing.engine_client import EngineProcess  # noqa: E402
from toolkit.models.tiny import cached_tiny  # noqa: E402

ARCH = "zimage"
PROMPT = "a fox in the snow"
GUIDANCE = 4.0
SEED = 7
STEPS = 20
OUT = os.path.join(ROOT, "testing", ".bench", "bench_overhead.json")


def med(values):
    return statistics.median(values)


class Overhead:
    def __init__(self, folder: str, write_behind: bool = True, bare: bool = True):
        self.folder = folder
        job = os.path.join(ROOT, "testing", ".bench", f"overhead_job_{'behind' if write_behind else 'inline'}")
        shutil.rmtree(job, ignore_errors=True)
        self.ep = EngineProcess(job, name="bench_overhead", engine_extra={"max_batch": 1,
                                                                          "write_behind": write_behind}).wait_ready()
        self.client = self.ep.client
        self.bare = None
        if bare:
            from diffusers import DiffusionPipeline
            self.bare = DiffusionPipeline.from_pretrained(folder, local_files_only=True, dtype=torch.float32)
            self.bare.set_progress_bar_config(disable=True)

    def close(self):
        self.ep.stop()

    def body(self, size, latents="raw", seed=SEED):
        return {"model": {"arch": ARCH, "name_or_path": self.folder},
                "sample": {"prompt": PROMPT, "width": size, "height": size, "num_inference_steps": STEPS,
                           "guidance_scale": GUIDANCE, "seed": seed},
                "stream": {"latents": latents, "every_n_steps": 1}}

    def request(self, body):
        """(seconds POST -> end frame, {event: seconds from the POST}, frames)."""
        t0 = time.perf_counter()
        marks = {}

        def on_frame(h, _p):
            now = time.perf_counter() - t0
            key = h.get("stage") if h["type"] == "status" else h["type"]
            marks.setdefault(key, now)
        frames = self.client.stream(body, on_frame=on_frame)
        end = frames[-1][0]
        if end.get("type") != "end" or end.get("status") != "ok":
            raise RuntimeError(f"engine request failed: {end} {[h.get('message') for h, _ in frames]}")
        return time.perf_counter() - t0, marks, frames

    def bare_call(self, size, latents_out=None):
        kwargs = {}
        if latents_out is not None:
            def keep(_pipe, _i, _t, tensors):
                latents_out.append(tensors["latents"].detach().clone())
                return {}
            kwargs = {"callback_on_step_end": keep, "callback_on_step_end_tensor_inputs": ["latents"]}
        t0 = time.perf_counter()
        out = self.bare(prompt=PROMPT, negative_prompt="", width=size, height=size, num_inference_steps=STEPS,
                        guidance_scale=GUIDANCE, generator=torch.Generator("cpu").manual_seed(SEED),
                        output_type="pil", **kwargs)
        return time.perf_counter() - t0, out.images[0]

    # -- in this process: the writer and the latent copy alone ------------------------------------
    def png_alone(self, image, repeat):
        """save_media on the bare image with metadata of the engine's size (the file's record)."""
        from toolkit.media import save_media
        meta = {"parameters": "x" * 400, "aitk": json.dumps({"model": {"arch": ARCH}, "sample": {"p": "x" * 600}})}
        folder = tempfile.mkdtemp(prefix="bench_png_")
        times = []
        try:
            for i in range(repeat):
                t0 = time.perf_counter()
                save_media("image", image, os.path.join(folder, f"{i}.png"), ext="png", metadata=meta)
                times.append(time.perf_counter() - t0)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        return med(times)

    def latent_copy_alone(self, latents, size, repeat):
        """A request's latent frames as the worker's sampling thread makes them, once per step: frame_on_device
        (float16), the host copy, payload_bytes and the pickled Frame; then the same Frames sent down a pipe to a
        process that only reads them (the worker's emit: conn.send on the sampling thread)."""
        import multiprocessing as mp

        from extensions_built_in.inference_engine import messages as m
        from toolkit.models import latents as latent_frames
        from toolkit.models.registry import get_arch
        spec = get_arch(ARCH).latents
        times, sends, frames = [], [], []
        for _ in range(repeat):
            frames = []
            t0 = time.perf_counter()
            for i, x in enumerate(latents):
                frame, layout = latent_frames.frame_on_device(x, spec, height=size, width=size)
                frame = frame.to("cpu").contiguous()
                msg = m.Frame("r", {"type": "latent", "step": i + 1, "total": len(latents), "layout": layout,
                                    "shape": list(frame.shape), "dtype": "float16"}, latent_frames.payload_bytes(frame))
                pickle.dumps(msg)
                frames.append(msg)
            times.append(time.perf_counter() - t0)
        ours, theirs = mp.Pipe()
        reader = mp.get_context("fork").Process(target=_drain, args=(theirs,), daemon=True)
        reader.start()
        try:
            for _ in range(repeat):
                t0 = time.perf_counter()
                for msg in frames:
                    ours.send(msg)
                sends.append(time.perf_counter() - t0)
            ours.send(None)
            reader.join(30)
        finally:
            if reader.is_alive():
                reader.kill()
        return med(times), med(sends), sum(len(f.payload) for f in frames)

    # -- one size ---------------------------------------------------------------------------------
    def size(self, size, repeat):
        raw, none = self.body(size), self.body(size, latents="none")
        self.request(raw), self.request(none)                   # load and warm
        latents = []
        self.bare_call(size, latents)
        eng, eng_none, bare, png_in, inside = [], [], [], [], []
        image = None
        for _ in range(repeat):
            t, marks, frames = self.request(raw)
            eng.append(t)
            png_in.append(marks["result"] - marks["saving"])
            inside.append(frames[0][0]["request_id"])
            eng_none.append(self.request(none)[0])
            tb, image = self.bare_call(size)
            bare.append(tb)
        finished = {r["request_id"]: r for r in self.client.get("/queue").json()["finished"]}
        inside = [finished[i]["finished_at"] - finished[i]["started_at"] for i in inside if i in finished]
        copy_s, send_s, latent_bytes = self.latent_copy_alone(latents, size, repeat)
        res = {"size": size, "steps": STEPS, "bare_s": med(bare), "engine_s": med(eng), "engine_no_latents_s": med(eng_none),
               "engine_inside_s": med(inside), "png_in_engine_s": med(png_in),
               "png_alone_s": self.png_alone(image, repeat), "latent_frames_s": med(eng) - med(eng_none),
               "latent_copy_alone_s": copy_s, "latent_send_alone_s": send_s, "latent_bytes": latent_bytes,
               "engine_runs_s": eng, "engine_no_latents_runs_s": eng_none, "bare_runs_s": bare}
        res["added_s"] = res["engine_s"] - res["bare_s"]
        # the split from the fastest run of each: the shared machine's other load only ever adds time
        res.update(fastest_bare_s=min(bare), fastest_engine_s=min(eng), fastest_added_s=min(eng) - min(bare),
                   fastest_latent_frames_s=min(eng) - min(eng_none))
        res["fastest_rest_s"] = res["fastest_added_s"] - res["png_in_engine_s"] - res["fastest_latent_frames_s"]
        return res

    def next_request_gap(self, size, repeat):
        """Two requests posted together: from the first one's `saving` frame to the second one's `encoding`."""
        self.request(self.body(size))                             # warm at this size
        gaps, png, pairs = [], [], []
        for k in range(repeat):
            first, second = self.body(size, seed=SEED + 2 * k), self.body(size, seed=SEED + 2 * k + 1)
            out = {}

            def run(name, body):
                out[name] = self.request(body)
            t0 = time.perf_counter()
            a = threading.Thread(target=run, args=("a", first))
            a.start()
            while "a" not in out and not self.client.health().get("busy"):
                time.sleep(0.001)
            t_b = time.perf_counter()
            b = threading.Thread(target=run, args=("b", second))
            b.start()
            a.join(), b.join()
            (_ta, ma, _fa), (tb, mb, _fb) = out["a"], out["b"]
            saving, next_start = t0 + ma["saving"], t_b + mb["encoding"]
            gaps.append(next_start - saving)
            png.append(ma["result"] - ma["saving"])
            pairs.append(t_b + tb - t0)
        return {"saving_to_next_start_s": med(gaps), "saving_to_next_start_runs_s": gaps, "png_of_first_s": med(png),
                "pair_s": min(pairs), "pair_runs_s": pairs}


def _drain(conn):
    """A pipe's reader that only takes what comes, until None."""
    while conn.recv() is not None:
        pass


def table(res) -> list:
    rows = [("", *(f"{r['size']}x{r['size']}" for r in res["sizes"]))]

    def ms(key):
        return [f"{r[key] * 1e3:.1f} ms" for r in res["sizes"]]

    def share(key):
        return [f"{r[key] * 1e3:.1f} ms ({r[key] / r['bare_s'] * 100:.1f}%)" for r in res["sizes"]]
    rows += [("bare diffusers call (median)", *ms("bare_s")),
             ("engine request, a latent every step (median)", *ms("engine_s")),
             ("engine request, no latents (median)", *ms("engine_no_latents_s")),
             ("engine inside, started -> finished (median)", *ms("engine_inside_s")),
             ("added by the engine (medians; % of bare)", *share("added_s")),
             ("added by the engine (fastest runs; % of bare)", *share("fastest_added_s")),
             ("  PNG file in the engine (saving -> result, median)", *share("png_in_engine_s")),
             ("  latent frames (fastest every step - fastest none)", *share("fastest_latent_frames_s")),
             ("  the rest (HTTP, queue, pipe, status frames)", *share("fastest_rest_s")),
             ("PNG file alone (save_media, this process)", *ms("png_alone_s")),
             ("latent copy alone (fp16, host, bytes, pickle; x20)", *ms("latent_copy_alone_s")),
             ("latent frames down a pipe alone (conn.send; x20)", *ms("latent_send_alone_s"))]
    for mode in ("inline", "behind"):
        gap = [f"{g[mode]['saving_to_next_start_s'] * 1e3:.1f} ms" for g in res["pairs"]]
        pair = [f"{g[mode]['pair_s'] * 1e3:.1f} ms" for g in res["pairs"]]
        rows += [(f"write_behind {'off' if mode == 'inline' else 'on'}: first's saving -> second's encoding", *gap),
                 (f"write_behind {'off' if mode == 'inline' else 'on'}: two queued requests, POST -> second's end "
                  "(fastest)", *pair)]
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=7, help="interleaved runs per figure (medians)")
    ap.add_argument("--sizes", default="64,512", help="image sides (comma-separated)")
    ap.add_argument("--out", default=OUT)
    args = ap.parse_args()
    res = {"torch": torch.__version__, "cpus": os.cpu_count(), "threads": torch.get_num_threads(),
           "loadavg_start": os.getloadavg(), "arch": ARCH, "steps": STEPS, "sizes": []}
    folder = str(cached_tiny(ARCH, 0))
    res["pairs"] = []
    bench = Overhead(folder)
    inline = Overhead(folder, write_behind=False, bare=False)
    try:
        for size in (int(s) for s in args.sizes.split(",")):
            res["sizes"].append(bench.size(size, args.repeat))
            # alternate the two engines, so the machine's load drifts over both alike
            pair = {"inline": [], "behind": []}
            for _ in range(args.repeat):
                for mode, eng in (("inline", inline), ("behind", bench)):
                    pair[mode].append(eng.next_request_gap(size, 1))
            res["pairs"].append({mode: {"saving_to_next_start_s": med([g["saving_to_next_start_s"] for g in runs]),
                                        "pair_s": min(g["pair_s"] for g in runs), "runs": runs}
                                 for mode, runs in pair.items()})
            print(f"{size}x{size} done", flush=True)
    finally:
        bench.close()
        inline.close()
    res["loadavg_end"] = os.getloadavg()
    rows = table(res)
    res["table"] = [list(r) for r in rows]
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(res, f, indent=2, default=str)
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))))
    print(f"tiny {ARCH}, {STEPS} steps, torch {res['torch']}, {res['cpus']} CPUs; load avg "
          f"{res['loadavg_start'][0]:.2f} -> {res['loadavg_end'][0]:.2f}; wrote {args.out}")


if __name__ == "__main__":
    main()

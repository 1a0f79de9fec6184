"""The video writers side by side: seconds to write a clip, its bytes, and how far the decoded frames are
from the written ones (mean absolute error, 0-255), per format of media.VIDEO_EXTS.

    .venv/bin/python testing/bench_video_writers.py [--width 832 --height 480 --frames 33 --repeat 3]

The clip is moving gradients with a little noise (a generated video's kind of content: smooth, not
noise). Seconds are the median of `--repeat` writes (one encoder thread each, as the writers run).
Writes testing/.bench/bench_video_writers.json.
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


def clip(frames: int, height: int, width: int) -> np.ndarray:
    rng = np.random.default_rng(0)
    y, x = np.mgrid[0:height, 0:width]
    out = [np.stack([(x + t * 7) % 256, (y + t * 3) % 256, (x + y) // 4 % 256], -1)
           + rng.normal(0, 4, (height, width, 3)) for t in range(frames)]
    return np.clip(np.stack(out), 0, 255).astype(np.uint8)


def decoded(path: str) -> np.ndarray:
    import av

    if path.endswith(".webp"):
        from PIL import Image, ImageSequence
        with Image.open(path) as im:
            return np.stack([np.asarray(f.convert("RGB")) for f in ImageSequence.Iterator(im)])
    with av.open(path) as c:
        return np.stack([f.to_ndarray(format="rgb24") for f in c.decode(video=0)])


def run(args) -> dict:
    from toolkit.media import VIDEO_EXTS, save_video

    frames = clip(args.frames, args.height, args.width)
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        for ext in VIDEO_EXTS:
            times = []
            for i in range(args.repeat):
                start = time.perf_counter()
                rec = save_video(frames, os.path.join(tmp, f"v{i}.{ext}"), fps=16)
                times.append(time.perf_counter() - start)
            got = decoded(rec["path"])[:, :args.height, :args.width]
            rows[ext] = {"seconds": round(statistics.median(times), 3), "bytes": rec["bytes"],
                         "mean_abs_error": round(float(np.abs(got.astype(int) - frames).mean()), 3),
                         "frames_decoded": len(got)}
            print(f"{ext:5s} {rows[ext]['seconds']:7.3f} s  {rec['bytes']:9d} bytes  "
                  f"error {rows[ext]['mean_abs_error']:.3f}  frames {len(got)}", flush=True)
    return {"clip": {"width": args.width, "height": args.height, "frames": args.frames}, "formats": rows}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--width", type=int, default=832)
    ap.add_argument("--height", type=int, default=480)
    ap.add_argument("--frames", type=int, default=33)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default=os.path.join(ROOT, "testing", ".bench", "bench_video_writers.json"))
    args = ap.parse_args()
    res = run(args)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(res, f, indent=2)


if __name__ == "__main__":
    main()

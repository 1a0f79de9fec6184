"""Sweep the inference engine on tiny random-weight models, offline.

    .venv/bin/python testing/test_inference_engine.py --arch zimage          # one arch, full frame sequence
    .venv/bin/python testing/test_inference_engine.py --swap zimage,zimage2,zimage
    .venv/bin/python testing/test_inference_engine.py --swap zimage,sd1,zimage
    .venv/bin/python testing/test_inference_engine.py --cancel
    .venv/bin/python testing/test_inference_engine.py --all                  # every arch, one subprocess each

Each mode starts an engine in this process (engine loop on a thread, HTTP on its own, as
testing/engine_client.InProcessEngine does) and talks to it over HTTP. Exit code 0 on pass, 1 on
failure; the last line printed says PASS or FAIL and why. The checks live in importable functions
(`run_arch`, `run_swap`, `run_cancel`, `run_all`) that return a dict with `ok` and `error`, so
testing/tests/test_sweep.py calls them in-process.

Model names (for --swap):
    <arch>      the tiny model of that arch, seed 0 (cached_tiny(arch): the same folder `tiny:<arch>` names)
    <arch>:b    the second model of make_shared_pair(arch, <arch>, ...): seed 1 for its own (denoiser-side)
                components, the same text encoder(s), tokenizer(s) and VAE files as <arch> (hard links);
                <arch>2 is accepted too when no arch has that name
    krea2-turbo / krea2-raw   the tiny Krea 2 in ComfyUI scaled-FP8 files: turbo is seed 0's diffusion
                model, raw seed 1's, both with seed 0's text encoder, VAE and tokenizer files (a
                turbo -> raw -> turbo swap must reload only the diffusion model)
Two archs of CROSS_PAIRS next to each other in a sequence (wan21,wan22_5b) are built as a linked
pair: the components they really share (the UMT5 encoder) are the same files, so the pool must
reuse them and load only the rest.
A name repeated back to back (e.g. zimage,zimage) is an identical request, which must load nothing;
one such repeat of the last model is always appended to a swap sequence.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from toolkit.models.tiny import (cached_tiny, default_cache_root, make_shared_pair, own_roles,  # noqa: E402
                                 sample_settings, shared_roles)

DEFAULT_OUT = os.path.join(ROOT, "testing", ".engine_test_outputs")
CONFIG_ONLY_ROLES = {"scheduler"}        # no weights: may load per model folder without being a failure

# Archs whose real checkpoints share components (a's role -> b's role); the sweep links the tiny
# files of such a pair the way one download serves both models.
CROSS_PAIRS = {
    ("wan21", "wan22_5b"): {"text_encoder": "text_encoder", "tokenizer": "tokenizer"},
    ("wan21", "wan22_a14b"): {"text_encoder": "text_encoder", "tokenizer": "tokenizer", "vae": "vae"},
    ("wan21", "wan21_i2v"): {"text_encoder": "text_encoder", "tokenizer": "tokenizer", "vae": "vae"},
    ("wan21", "wan_vace"): {"text_encoder": "text_encoder", "tokenizer": "tokenizer", "vae": "vae"},
    ("wan22_a14b", "wan22_a14b_i2v"): {"text_encoder": "text_encoder", "tokenizer": "tokenizer", "vae": "vae"},
    ("qwen_image", "qwen_image_edit"): {"text_encoder": "text_encoder", "tokenizer": "tokenizer", "vae": "vae"},
    ("flux", "chroma"): {"text_encoder_2": "text_encoder", "tokenizer_2": "tokenizer", "vae": "vae"},
    ("flux", "flux_kontext"): {r: r for r in ("text_encoder", "text_encoder_2", "tokenizer", "tokenizer_2", "vae")},
    ("sd1", "sd2"): {"vae": "vae"},             # SD 2.x ships SD 1.x's VAE
    ("flux", "pixart"): {"text_encoder_2": "text_encoder", "tokenizer_2": "tokenizer"},   # both T5-v1.1-XXL
    # CogVideoX-5b-I2V ships -5b's T5 and VAE
    ("cogvideox", "cogvideox_i2v"): {"text_encoder": "text_encoder", "tokenizer": "tokenizer", "vae": "vae"},
    # Z-Image Omni runs Z-Image's Qwen3 and VAE (its own transformer and SigLIP2)
    ("zimage", "zimage_omni"): {"text_encoder": "text_encoder", "tokenizer": "tokenizer", "vae": "vae"},
    ("sdxl", "omnigen"): {"vae": "vae"},        # OmniGen v1 ships the SDXL VAE
    ("bria_fibo", "bria_fibo_edit"): {"text_encoder": "text_encoder", "tokenizer": "tokenizer", "vae": "vae"},
    ("wan22_5b", "bria_fibo"): {"vae": "vae"},  # FIBO decodes with the Wan 2.2 VAE
    ("flux2_klein", "ernie_image"): {"vae": "vae"},     # ERNIE-Image decodes with the Flux.2 VAE
    ("flux", "prx"): {"vae": "vae"},            # PRX ships FLUX.1-dev's VAE
    ("prx", "prx_dcae"): {"text_encoder": "text_encoder", "tokenizer": "tokenizer"},    # both T5Gemma-2B-2B-UL2's
    ("qwen_image", "nucleus_image"): {"vae": "vae"},     # Nucleus-Image ships the Qwen Image VAE
    # Qwen-Image-Layered ships Qwen-Image's Qwen2.5-VL and tokenizer; its VAE is an RGBA one of its own
    ("qwen_image", "qwen_image_layered"): {"text_encoder": "text_encoder", "tokenizer": "tokenizer"},
    # LongCat-Image's Qwen2.5-VL-7B-Instruct and its tokenizer are Qwen-Image's; its VAE is FLUX.1's
    ("qwen_image", "longcat_image"): {"text_encoder": "text_encoder", "tokenizer": "tokenizer"},
    ("flux", "longcat_image"): {"vae": "vae"},
    ("flux", "ovis_image"): {"vae": "vae"},                  # Ovis-Image's VAE is FLUX.1's
    ("longcat_image", "longcat_image_edit"): {r: r for r in ("text_encoder", "tokenizer", "text_processor", "vae")},
    # every Kandinsky 5 model ships the same Qwen2.5-VL (its processor as tokenizer) and CLIP-L; the video ones
    # HunyuanVideo's VAE, the image ones FLUX.1's; Flux's CLIP-L is the same openai/clip-vit-large-patch14
    ("kandinsky5", "kandinsky5_i2v"): {r: r for r in ("text_encoder", "text_encoder_2", "tokenizer", "tokenizer_2",
                                                      "vae")},
    ("kandinsky5", "kandinsky5_image"): {r: r for r in ("text_encoder", "text_encoder_2", "tokenizer", "tokenizer_2")},
    ("kandinsky5_image", "kandinsky5_edit"): {r: r for r in ("text_encoder", "text_encoder_2", "tokenizer",
                                                             "tokenizer_2", "vae")},
    ("hunyuan_video", "kandinsky5"): {"vae": "vae"},
    ("flux", "kandinsky5_image"): {"text_encoder": "text_encoder_2", "tokenizer": "tokenizer_2", "vae": "vae"},
    ("wan21", "cosmos2_5"): {"vae": "vae"},         # Cosmos Predict 2 and 2.5 ship the Wan 2.1 VAE
    ("cosmos2_5", "cosmos2"): {"vae": "vae"},
    # SkyReels V2 ships Wan 2.1's UMT5-XXL and VAE
    ("wan21", "skyreels_v2"): {"text_encoder": "text_encoder", "tokenizer": "tokenizer", "vae": "vae"},
    ("skyreels_v2", "skyreels_v2_df"): {"text_encoder": "text_encoder", "tokenizer": "tokenizer", "vae": "vae"},
    ("wan21_i2v", "skyreels_v2_i2v"): {r: r for r in ("text_encoder", "tokenizer", "vae", "image_encoder",
                                                     "image_processor")},
    # ChronoEdit ships Wan 2.1 I2V's UMT5-XXL, VAE and CLIP ViT-H
    ("wan21_i2v", "chronoedit"): {r: r for r in ("text_encoder", "tokenizer", "vae", "image_encoder", "image_processor")},
    # SANA-Video: Sana's Gemma2 2B and Wan 2.1's VAE
    ("sana", "sana_video"): {"text_encoder": "text_encoder", "tokenizer": "tokenizer"},
    ("wan21", "sana_video"): {"vae": "vae"},
    # HiDream-I1's T5-XXL and VAE are FLUX.1's (its CLIPs are Long-CLIP, with 248 positions: its own)
    ("flux", "hidream"): {"text_encoder_2": "text_encoder_3", "tokenizer_2": "tokenizer_3", "vae": "vae"},
    ("flux2_klein", "flux2"): {"vae": "vae"},       # one FLUX.2 VAE
    ("sdxl", "auraflow"): {"vae": "vae"},          # AuraFlow ships SDXL's VAE
    ("flux", "flex1"): {r: r for r in ("text_encoder", "text_encoder_2", "tokenizer", "tokenizer_2", "vae")},
    # HunyuanVideo 1.5's i2v repos ship the t2v ones' Qwen2.5-VL text model, Glyph-ByT5 and VAE
    ("hunyuan_video15", "hunyuan_video15_i2v"): {r: r for r in ("text_encoder", "text_encoder_2", "tokenizer",
                                                               "tokenizer_2", "vae")},
    # HunyuanImage 2.1 runs Qwen-Image's Qwen2.5-VL-7B and HunyuanVideo 1.5's Glyph-ByT5
    ("qwen_image", "hunyuan_image"): {"text_encoder": "text_encoder", "tokenizer": "tokenizer"},
    ("hunyuan_video15", "hunyuan_image"): {"text_encoder_2": "text_encoder_2", "tokenizer_2": "tokenizer_2"},
    ("flux", "mochi"): {"text_encoder_2": "text_encoder", "tokenizer_2": "tokenizer"},   # both T5-v1.1-XXL
}


class CheckFailed(AssertionError):
    """A contract check that did not hold; the message is the one-line reason."""


def check(cond, message: str):
    if not cond:
        raise CheckFailed(message)


# --------------------------------------------------------------------------- models and requests


def _registered_archs() -> tuple:
    from toolkit.models.registry import ARCHS as REGISTRY
    return tuple(REGISTRY)


SWEEP_ARCHS = _registered_archs()        # every registered arch


def _root(root):
    import pathlib
    return default_cache_root() if root is None else pathlib.Path(root)


def _krea2_comfy(variant: str, root=None) -> dict:
    """A krea2 model config over the tiny ComfyUI-format files (see the module docstring)."""
    from testing.tiny_krea2 import cached_tiny_krea2
    base = _root(root) / "krea2-comfy"
    shared = cached_tiny_krea2(base, 0)
    own = shared if variant == "turbo" else cached_tiny_krea2(base, 1)
    return {"arch": "krea2", "variant": variant, "local_only": True,
            "components": {"transformer": own["diffusion_model"], "text_encoder": shared["text_encoder"],
                           "vae": shared["vae"], "tokenizer": shared["tokenizer"]}}


COMFY_MODELS = {"krea2-turbo": ("krea2", "turbo"), "krea2-raw": ("krea2", "raw")}
# what --all swaps after the per-arch runs: every cross-arch pair, same-arch pairs (SD3 against an
# SD3.5-style model on the same encoders), and the Krea 2 variants from ComfyUI files
PAIR_SEQUENCES = [f"{a},{b},{a}" for a, b in CROSS_PAIRS] + ["sd3,sd3:b,sd3", "zimage,zimage:b,zimage",
                                                             "krea2-turbo,krea2-raw,krea2-turbo"]
PAIR_SHARED = {("krea2-turbo", "krea2-raw"): ("text_encoder", "tokenizer", "vae")}


def parse_name(name: str) -> tuple[str, str]:
    """(arch, "a" | "b") for `<arch>`, `<arch>:b` (or `<arch>2`)."""
    base, _, which = name.partition(":")
    which = which or "a"
    if base not in SWEEP_ARCHS and base.endswith("2") and base[:-1] in SWEEP_ARCHS and not _:
        base, which = base[:-1], "b"
    if base not in SWEEP_ARCHS or which not in ("a", "b"):
        raise ValueError(f"unknown model name {name!r}: use <arch> or <arch>:b with arch in {', '.join(SWEEP_ARCHS)}")
    return base, which


def model_folder(name: str, root=None) -> tuple[str, str | dict]:
    """(arch, folder) for a sweep model name: `<arch>` (seed 0) or `<arch>:b` (its shared pair); for
    the ComfyUI-file names, (arch, model config)."""
    if name in COMFY_MODELS:
        arch, variant = COMFY_MODELS[name]
        return arch, _krea2_comfy(variant, root)
    arch, which = parse_name(name)
    a = cached_tiny(arch, 0, root=root)
    if which == "a":
        return arch, str(a)
    _a, b = make_shared_pair(arch, a, a.parent / f"{arch}-seed1-shared0", seed_a=0, seed_b=1)
    return arch, str(b)


def cross_pair(arch_a: str, arch_b: str, root=None) -> tuple[str, str]:
    """The linked tiny models of two archs in CROSS_PAIRS (folders, in the order asked)."""
    key = (arch_a, arch_b) if (arch_a, arch_b) in CROSS_PAIRS else (arch_b, arch_a)
    base = _root(root) / "pairs" / f"{key[0]}+{key[1]}"
    a, b = make_shared_pair(key[0], base / key[0], base / key[1], 0, 0, arch_b=key[1], share=CROSS_PAIRS[key])
    return (str(a), str(b)) if key == (arch_a, arch_b) else (str(b), str(a))


def resolve_models(names, root=None) -> list:
    """[(name, arch, folder or model config)] for a swap sequence: plain names by model_folder, and the
    archs of a CROSS_PAIRS pair in the sequence as that linked pair."""
    out = [(n, *model_folder(n, root)) for n in names]
    plain = {n for n in names if n in SWEEP_ARCHS}
    for x, y in zip(names, names[1:]):
        if x in plain and y in plain and ((x, y) in CROSS_PAIRS or (y, x) in CROSS_PAIRS):
            fx, fy = cross_pair(x, y, root)
            out = [(n, a, fx if n == x else fy if n == y else f) for n, a, f in out]
    return out


def shared_between(prev: tuple, cur: tuple) -> set:
    """Roles of `cur` (name, arch, folder) that must be pool hits right after `prev`."""
    (pn, pa, _pf), (cn, ca, _cf) = prev, cur
    if pn == cn:
        return set()
    if (pn, cn) in PAIR_SHARED or (cn, pn) in PAIR_SHARED:
        return set(PAIR_SHARED.get((pn, cn)) or PAIR_SHARED[(cn, pn)])
    if pa == ca and pn not in COMFY_MODELS and cn not in COMFY_MODELS:
        return set(shared_roles(ca))
    if (pa, ca) in CROSS_PAIRS:
        return set(CROSS_PAIRS[(pa, ca)].values())
    if (ca, pa) in CROSS_PAIRS:
        return set(CROSS_PAIRS[(ca, pa)])
    return set()


def sample_for(arch: str, **over) -> dict:
    """The arch's tiny sample settings (engine terms), with a prompt and a seed."""
    s = sample_settings(arch)
    s.update(prompt="a tiny test prompt", seed=42)
    s.update(over)
    return s


def with_inputs(client, arch: str, sample: dict, folder: str) -> dict:
    """`sample` plus the input images an arch needs (uploaded through POST /assets, as clients do)."""
    from toolkit.models.registry import get_arch
    missing = [name for name in get_arch(arch).needed_inputs if not sample.get(name)]
    if not missing:
        return sample
    from testing.fixtures import input_image
    out = dict(sample)
    for name in missing:
        path = input_image(os.path.join(folder, f"{name}.png"), sample.get("width") or 64, sample.get("height") or 64)
        with open(path, "rb") as f:
            r = client.post("/assets", params={"name": f"{name}.png"}, content=f.read())
        check(r.status_code == 200, f"POST /assets answered {r.status_code}: {r.text[:200]}")
        out[name] = r.json()["path"]
    return out


def modality_of(arch: str) -> str:
    from toolkit.models.registry import get_arch
    return get_arch(arch).modality


def start_engine(folder: str, **engine_kw):
    from testing.engine_client import InProcessEngine
    engine_dir = os.path.join(folder, "engine")
    shutil.rmtree(engine_dir, ignore_errors=True)
    os.makedirs(engine_dir, exist_ok=True)
    return InProcessEngine(engine_dir, **engine_kw)


class Timed:
    """Collects (header, payload, t) with t in seconds since the request was sent."""

    def __init__(self, on_frame=None):
        self.t0 = None
        self.frames = []
        self.on_frame = on_frame

    def __call__(self, header, payload):
        self.frames.append((header, payload, time.perf_counter() - self.t0))
        if self.on_frame is not None:
            return self.on_frame(header, payload)
        return None

    def run(self, client, body):
        self.t0 = time.perf_counter()
        client.stream(body, on_frame=self)
        self.total = time.perf_counter() - self.t0
        return self.frames


# --------------------------------------------------------------------------- frame checks


def decode_latent(header: dict, payload: bytes):
    import numpy as np
    check(header.get("dtype") == "float16", f"latent dtype {header.get('dtype')!r}, expected 'float16'")
    shape = header.get("shape")
    check(isinstance(shape, list) and shape and all(isinstance(d, int) and d > 0 for d in shape),
          f"latent shape {shape!r} is not a list of positive ints")
    n = math.prod(shape)
    check(len(payload) == 2 * n, f"latent payload is {len(payload)} bytes; shape {shape} float16 needs {2 * n}")
    arr = np.frombuffer(payload, dtype="<f2").reshape(shape)
    check(bool(np.isfinite(arr).all()), f"latent at step {header.get('step')} has non-finite values")
    return arr


def check_latent(header: dict, payload: bytes, arch: str, sample: dict):
    """The frame matches the arch's `Latents` row: layout, channels, and the size the request implies."""
    from toolkit.models.registry import get_arch
    spec = get_arch(arch)
    lat = spec.latents
    layout = lat.frame_layout
    check(header.get("layout") == layout, f"latent layout {header.get('layout')!r}, expected {layout} "
          f"(arch latents.layout {lat.layout})")
    arr = decode_latent(header, payload)
    check(arr.ndim == len(layout), f"latent shape {list(arr.shape)} has {arr.ndim} dims, layout {layout} needs "
          f"{len(layout)}")
    batch = sample.get("batch_size", 1)
    check(arr.shape[0] == batch, f"latent batch is {arr.shape[0]}, expected {batch} (sample.batch_size: every item)")
    channels = arr.shape[2] if layout == "BLC" else arr.shape[1]
    check(channels == lat.channels, f"latent has {channels} channels, the registry says {lat.channels}")
    if spec.modality in ("image", "video"):
        h, w = arr.shape[-2], arr.shape[-1]
        want = (sample["height"] // lat.spatial, sample["width"] // lat.spatial)
        check((h, w) == want, f"latent H, W = {(h, w)}, expected {want} for {sample['width']}x{sample['height']} "
              f"(spatial {lat.spatial}; packed tokens must arrive unpacked)")
    if spec.modality == "video":
        frames = arr.shape[2]
        latent_frames = lat.latent_frames(sample["num_frames"])
        check(1 <= frames <= min(4, latent_frames),
              f"latent F = {frames}, expected 1..{min(4, latent_frames)} (max_frames 4, {latent_frames} latent frames)")
    if spec.modality == "audio" and lat.per_second:
        length = arr.shape[1]
        want = sample["duration"] * lat.per_second
        check(abs(length - want) <= max(2, 0.1 * want), f"audio latent length {length}, expected ~{want:g} "
              f"({sample['duration']} s at {lat.per_second}/s)")
    return list(arr.shape)


def check_result_file(header: dict, arch: str, sample: dict, client=None) -> dict:
    """The file exists, matches the header and decodes as the arch's modality."""
    modality = modality_of(arch)
    path = header.get("path")
    check(header.get("kind") == modality, f"result kind {header.get('kind')!r}, expected {modality!r}")
    check(isinstance(path, str) and os.path.isfile(path), f"result file {path!r} does not exist")
    size = os.path.getsize(path)
    check(size > 0 and size == header.get("bytes"), f"result file is {size} bytes, header says {header.get('bytes')}")
    ext = header.get("ext")
    check(path.endswith("." + str(ext)), f"result path {path!r} does not end with .{ext}")
    info = {"ext": ext, "bytes": size}
    if modality == "image":
        from PIL import Image
        with Image.open(path) as im:
            im.load()
            info["size"] = list(im.size)
        check(tuple(info["size"]) == (sample["width"], sample["height"]),
              f"image is {info['size']}, expected {[sample['width'], sample['height']]}")
    elif modality == "video":
        import av
        with av.open(path) as c:
            frames = [f for f in c.decode(video=0)]
        check(frames, f"video {path} decodes to no frames")
        info.update(frames=len(frames), size=[frames[0].width, frames[0].height])
        check(tuple(info["size"]) == (sample["width"], sample["height"]),
              f"video frames are {info['size']}, expected {[sample['width'], sample['height']]}")
        if sample.get("num_frames"):
            check(len(frames) == sample["num_frames"], f"video has {len(frames)} frames, expected "
                  f"{sample['num_frames']}")
    elif modality == "audio":
        if ext == "wav":
            import wave
            with wave.open(path, "rb") as w:
                rate, n, ch = w.getframerate(), w.getnframes(), w.getnchannels()
        else:
            import av
            with av.open(path) as c:
                n, rate, ch = 0, None, None
                for fr in c.decode(audio=0):
                    n += fr.samples
                    rate, ch = fr.sample_rate, len(fr.layout.channels)
        check(n > 0 and rate, f"audio {path} decodes to no samples")
        info.update(sample_rate=rate, samples=n, channels=ch, seconds=n / rate)
        want = sample.get("duration")
        if want:
            check(abs(n / rate - want) <= 0.1 * want + 0.05, f"audio lasts {n / rate:.3f} s, expected ~{want} s")
    if client is not None:
        r = client.get(header["url"])
        check(r.status_code == 200, f"GET {header['url']} answered {r.status_code}")
        with open(path, "rb") as f:
            check(r.content == f.read(), f"GET {header['url']} returned other bytes than {path}")
    return info


def check_sequence(frames, arch: str, sample: dict, client=None) -> dict:
    """start -> >=1 progress -> >=1 latent -> result -> end(ok); returns counts, timings and checks' info."""
    types = [h["type"] for h, _p, _t in frames]
    counts = {t: types.count(t) for t in ("start", "status", "progress", "latent", "result", "error", "end")}
    summary = {"frames": counts, "sequence": _squash(types)}
    check(frames, "the stream produced no frames")
    rid = frames[0][0].get("request_id")
    check(all(h.get("request_id") == rid for h, _p, _t in frames), "frames carry different request_ids")
    errors = [h for h, _p, _t in frames if h["type"] == "error"]
    check(not errors, f"error frame: {errors[0].get('message') if errors else ''}")
    check(types[0] == "start", f"first frame is {types[0]!r}, expected 'start'")
    check(counts["start"] == 1, f"{counts['start']} start frames")
    check(types[-1] == "end" and counts["end"] == 1,
          f"stream must end with exactly one end frame: {summary['sequence']}")
    end = frames[-1][0]
    check(end.get("status") == "ok", f"end status {end.get('status')!r}, expected 'ok'")
    check(counts["progress"] >= 1, "no progress frame")
    check(counts["latent"] >= 1, "no latent frame")
    check(counts["result"] >= 1, "no result frame")
    first = {t: types.index(t) for t in counts if t in types}
    last = {t: len(types) - 1 - types[::-1].index(t) for t in counts if t in types}
    check(first["progress"] < first["latent"], "the first latent came before the first progress frame")
    check(last["latent"] < first["result"], "a latent frame came after the result")
    check(last["result"] < last["end"], "the result came after the end")

    start = frames[0][0]
    modality = modality_of(arch)
    check(start.get("modality") == modality, f"start modality {start.get('modality')!r}, expected {modality!r}")
    from toolkit.models.registry import get_arch
    want_layout = get_arch(arch).latents.frame_layout
    check((start.get("preview") or {}).get("layout") == want_layout,
          f"start preview.layout {(start.get('preview') or {}).get('layout')!r}, expected {want_layout}")

    steps = [h["step"] for h, _p, _t in frames if h["type"] == "progress"]
    totals = {h["total"] for h, _p, _t in frames if h["type"] == "progress"}
    check(steps == sorted(steps) and len(set(steps)) == len(steps) and steps[0] >= 1,
          f"progress steps are not strictly increasing from 1: {steps}")
    check(len(totals) == 1 and steps[-1] == next(iter(totals)),
          f"progress totals {sorted(totals)} / last step {steps[-1]} disagree")
    summary["steps"] = steps[-1]

    shapes = []
    for h, p, _t in frames:
        if h["type"] == "latent":
            shapes.append(check_latent(h, p, arch, sample))
    summary["latent_shape"] = shapes[-1]

    results = [h for h, _p, _t in frames if h["type"] == "result"]
    summary["result"] = check_result_file(results[0], arch, sample, client)
    summary["result_path"] = results[0]["path"]

    def at(t):
        return round(next(tt for h, _p, tt in frames if h["type"] == t), 4) if t in types else None
    loaded = next((tt for h, _p, tt in frames if h["type"] == "status" and h.get("stage") == "loaded"), None)
    summary["timings"] = {"first_frame_s": round(frames[0][2], 4), "first_progress_s": at("progress"),
                          "first_latent_s": at("latent"), "result_s": at("result"), "end_s": round(frames[-1][2], 4),
                          "load_s": round(loaded - frames[0][2], 4) if loaded is not None else None,
                          "sample_s": round(at("result") - (loaded if loaded is not None else frames[0][2]), 4)}
    return summary


def _squash(types) -> str:
    """'start status*3 progress latent ...' -> a compact readable sequence."""
    out = []
    for t in types:
        if out and out[-1][0] == t:
            out[-1][1] += 1
        else:
            out.append([t, 1])
    return " ".join(t if n == 1 else f"{t}*{n}" for t, n in out)


def _outcome(name: str, fn) -> dict:
    """Run fn(ctx) -> dict; a CheckFailed or any exception becomes ok=False with a one-line error.
    What fn put into `ctx` before failing is kept in the result (partial steps, timings)."""
    t0 = time.perf_counter()
    ctx: dict = {}
    res = {"name": name, "ok": False, "error": None}
    try:
        res.update(fn(ctx))
        res["ok"] = True
    except CheckFailed as e:
        res["error"] = str(e)
    except Exception as e:  # the engine or the harness broke: report it as a failure, with where
        tb = traceback.extract_tb(e.__traceback__)[-1]
        res["error"] = f"{type(e).__name__}: {e} (at {os.path.basename(tb.filename)}:{tb.lineno})"
    for k, v in ctx.items():
        res.setdefault(k, v)
    res["seconds"] = round(time.perf_counter() - t0, 3)
    return res


# --------------------------------------------------------------------------- --arch


def run_arch(arch: str, out: str | None = None, root=None) -> dict:
    """One request on the tiny model of `arch`: the whole frame sequence and the file it writes."""
    out = out or os.path.join(DEFAULT_OUT, arch)

    def body(ctx):
        _, folder = model_folder(arch, root)
        eng = start_engine(out)
        try:
            sample = with_inputs(eng.client, arch, sample_for(arch), out)
            req = {"model": {"arch": arch, "name_or_path": folder}, "sample": sample}
            rec = Timed()
            frames = rec.run(eng.client, req)
            types = [h["type"] for h, _p, _t in frames]
            ctx.update(arch=arch, sequence=_squash(types), request_s=round(rec.total, 4))
            summary = check_sequence(frames, arch, sample, eng.client)
            summary["timings"]["request_s"] = round(rec.total, 4)
            q = eng.client.get("/queue").json()
            done = [r for r in q["finished"] if r["request_id"] == frames[0][0]["request_id"]]
            check(done and done[0]["status"] == "ok", f"/queue does not list the request as ok: {done}")
            # warm (fast path): the same request again
            before = _pool(eng.client)
            rec2 = Timed()
            frames2 = rec2.run(eng.client, req)
            after = _pool(eng.client)
            check(frames2[-1][0].get("type") == "end" and frames2[-1][0].get("status") == "ok",
                  f"warm rerun ended with {frames2[-1][0]}")
            check(after["loads"] == before["loads"] and after["misses"] == before["misses"],
                  f"the identical warm rerun made {after['loads'] - before['loads']} loads")
            summary["timings"]["warm_request_s"] = round(rec2.total, 4)
            summary["timings"]["warm_first_frame_s"] = round(frames2[0][2], 4)
            summary.update(arch=arch, modality=modality_of(arch), sample=sample)
            return summary
        finally:
            eng.close()
    return _outcome(f"arch {arch}", body)


# --------------------------------------------------------------------------- --swap


def _roles(entry: dict) -> list:
    """The roles a pool entry served in its latest build (one file may serve two: SD3's CLIP tokenizers)."""
    return entry.get("roles") or [entry["role"]]


def _pool(client) -> dict:
    return client.health()["pool"]


def _pool_diff(before: dict, after: dict) -> dict:
    bk = {e["key"]: e for e in before["entries"]}
    ak = {e["key"]: e for e in after["entries"]}
    return {
        "loaded": [e for k, e in ak.items() if k not in bk],
        "hit": [e for k, e in ak.items() if k in bk and e.get("hits", 0) > bk[k].get("hits", 0)],
        "released": [e for k, e in bk.items() if k not in ak],
        "d": {c: after[c] - before[c] for c in ("hits", "misses", "loads", "evictions")},
    }


def run_swap(names, out: str | None = None, root=None) -> dict:
    """Requests for `names` in order on one engine (default pool: keep nothing unused). After each,
    from /health's pool stats before and after:
      - an identical request (same model back to back) makes no load and no miss;
      - after a model it shares components with (its pair mate <arch>:b, a CROSS_PAIRS arch, the
        other Krea 2 variant) exactly the shared components are pool hits and nothing shared loads
        again (weightless config components such as the scheduler may load);
      - nothing with weights is reused unless the two models really share it, and a pair never
        shares a denoiser;
      - the resident denoisers are exactly the current model's; the previous model's own entries
        are gone.
    A repeat of the last request is always appended."""
    if isinstance(names, str):
        names = [n.strip() for n in names.split(",") if n.strip()]
    names = list(names)
    out = out or os.path.join(DEFAULT_OUT, "swap")

    def body(ctx):
        check(len(names) >= 1, "--swap needs at least one model name")
        models = resolve_models(names, root)
        seq = models + [models[-1]]
        eng = start_engine(out)
        steps, notes = ctx.setdefault("steps", []), ctx.setdefault("notes", [])
        owner = {}                       # pool key -> (model name, arch) of the request that first loaded it
        try:
            prev = None
            for i, (name, arch, folder) in enumerate(seq):
                from toolkit.models.registry import get_arch
                spec = get_arch(arch)
                own = set(own_roles(arch))
                sample = with_inputs(eng.client, arch, sample_for(arch), out)
                before = _pool(eng.client)
                rec = Timed()
                model = folder if isinstance(folder, dict) else {"arch": arch, "name_or_path": folder}
                frames = rec.run(eng.client, {"model": model, "sample": {k: v for k, v in sample.items()
                                                                          if k != "guidance_scale" or arch != "krea2"}})
                after = _pool(eng.client)
                end = frames[-1][0] if frames else {}
                errs = [h.get("message") for h, _p, _t in frames if h["type"] == "error"]
                d = _pool_diff(before, after)
                for e in d["loaded"]:
                    owner.setdefault(e["key"], (name, arch))
                loaded = sorted(r for e in d["loaded"] for r in _roles(e))
                hit = sorted(r for e in d["hit"] for r in _roles(e))
                step = {"i": i + 1, "model": name, "arch": arch, "seconds": round(rec.total, 4),
                        "loaded": loaded, "hit": hit, "released": sorted(e["role"] for e in d["released"]),
                        "delta": d["d"], "entries": len(after["entries"]), "resident_bytes": after["resident_bytes"],
                        "resident": sorted(f"{e['role']}({owner.get(e['key'], ('?',))[0]})" for e in after["entries"])}
                steps.append(step)
                where = f"request {i + 1} ({name} after {prev[0] if prev else 'nothing'})"
                check(end.get("status") == "ok", f"{where} ended {end.get('status')!r}: {errs}")
                check(d["d"]["loads"] == len(d["loaded"]),
                      f"{where}: pool `loads` went up by {d['d']['loads']} but {len(d['loaded'])} new entries appeared")
                # (a fresh entry can have hits too: one file serving two roles, as SD3's two CLIP tokenizers)
                before_hits = {e["key"]: e.get("hits", 0) for e in before["entries"]}
                check(d["d"]["hits"] == sum(e["hits"] - before_hits.get(e["key"], 0) for e in after["entries"]),
                      f"{where}: pool `hits` (+{d['d']['hits']}) does not match the entries' hit counts")

                same = prev is not None and prev == (name, arch, folder)
                shared = shared_between(prev, (name, arch, folder)) if prev is not None and not same else set()
                if same:
                    check(d["d"]["loads"] == 0 and d["d"]["misses"] == 0,
                          f"{where}: identical request made {d['d']['loads']} loads / {d['d']['misses']} misses "
                          f"(roles {loaded}), expected 0")
                # no wrong sharing: a weighted hit from another model must be a component the two share
                for e in d["hit"]:
                    o_name, o_arch = owner.get(e["key"], (None, None))
                    if o_name == name or e["bytes"] == 0:
                        if o_name != name:
                            notes.append(f"{where}: weightless {e['role']} ({e['class']}) of {o_name} reused "
                                         f"(identical content)")
                        continue
                    check(not set(_roles(e)) & own, f"{where}: reused {o_name}'s {e['role']}: two models never "
                          f"share a denoiser")
                    check(set(_roles(e)) <= shared or o_arch == arch, f"{where}: reused {e['role']} ({e['class']}, "
                          f"{e['bytes']} bytes) loaded for {o_name} ({o_arch}): the models do not share it")
                # after a model it shares components with: exactly those are hits, the rest loads
                if shared:
                    wrongly = sorted(set(loaded) & shared)
                    check(not wrongly, f"{where}: loaded {', '.join(wrongly)} again instead of reusing "
                          f"{prev[0]}'s from the pool (they share {', '.join(sorted(shared))}); "
                          f"loaded {loaded}, hits {hit}")
                    missing = sorted(shared - set(hit))
                    check(not missing, f"{where}: shared {', '.join(missing)} not pool hits (hits {hit})")
                    if prev[1] == arch:
                        extra = sorted(set(loaded) - own - CONFIG_ONLY_ROLES)
                        check(not extra, f"{where}: loaded {extra} beyond the model's own components")
                    if set(loaded) & CONFIG_ONLY_ROLES:
                        notes.append(f"{where}: config-only {sorted(set(loaded) & CONFIG_ONLY_ROLES)} loaded again")
                # the resident denoisers are this model's
                mine = {e["key"] for e in d["loaded"] + d["hit"]} | (set(steps[-2]["_keys"]) if same else set())
                den = sorted(r for e in after["entries"] if e["key"] in mine for r in _roles(e)
                             if r in spec.denoiser_roles)
                check(den == sorted(spec.denoiser_roles),
                      f"{where}: resident denoisers {den}, expected {sorted(spec.denoiser_roles)}")
                foreign = [e for e in after["entries"] if e["key"] not in mine and e["bytes"] > 0]
                check(not foreign, f"{where}: {', '.join(e['role'] + ' of ' + owner.get(e['key'], ('?',))[0] for e in foreign)} "
                      f"still resident though this model does not use it")
                step["_keys"] = sorted(mine) if not same else steps[-2]["_keys"]
                # weightless entries the last build did not use (kept: they count 0 bytes)
                kept = [e for e in after["entries"] if e["key"] not in mine and e["bytes"] == 0]
                if kept:
                    notes.append(f"{where}: {len(kept)} unused weightless entries stay resident "
                                 f"({', '.join(sorted(e['role'] + '/' + e['class'] for e in kept))})")
                prev = (name, arch, folder)
            for st in steps:
                st.pop("_keys", None)
            return {"names": names, "pool": {k: after[k] for k in ("hits", "misses", "loads", "evictions")}}
        finally:
            for st in steps:
                st.pop("_keys", None)
            eng.close()
    return _outcome("swap " + ",".join(names), body)


# --------------------------------------------------------------------------- --cancel


def run_cancel(out: str | None = None, root=None, arch: str = "zimage", steps: int = 50,
               cancel_at: int = 2) -> dict:
    """A long request cancelled when progress step `cancel_at` arrives must end error(cancelled) then
    end(cancelled), write no file, and leave the engine so that the same request afterwards is
    byte-identical to the uncancelled run made before it."""
    out = out or os.path.join(DEFAULT_OUT, "cancel")

    def body(ctx):
        from testing.engine_client import EngineClient
        _, folder = model_folder(arch, root)
        model = {"arch": arch, "name_or_path": folder}
        eng = start_engine(out)
        side = EngineClient(eng.url, eng.client.token)
        try:
            sample = with_inputs(eng.client, arch, sample_for(arch, num_inference_steps=steps, seed=1234), out)
            ref = Timed().run(eng.client, {"model": model, "sample": sample})
            ref_res = [h for h, _p, _t in ref if h["type"] == "result"]
            check(ref[-1][0].get("status") == "ok" and ref_res, f"uncancelled run ended {ref[-1][0]}")
            with open(ref_res[0]["path"], "rb") as f:
                ref_bytes = f.read()

            state = {"answer": None, "sent_at": None}

            def on_frame(h, _p):
                if h["type"] == "progress" and h["step"] == cancel_at and state["answer"] is None:
                    state["sent_at"] = h["step"]
                    r = side.post(f"/cancel/{h['request_id']}")
                    state["answer"] = (r.status_code, r.json())
                return None
            rec = Timed(on_frame)
            frames = rec.run(eng.client, {"model": model, "sample": sample, "request_id": "cancel-me"})
            types = [h["type"] for h, _p, _t in frames]
            check(state["answer"] is not None, f"progress step {cancel_at} never arrived: {_squash(types)}")
            check(state["answer"][0] == 200, f"POST /cancel answered {state['answer']}")
            check(types and types[-1] == "end" and types.count("end") == 1,
                  f"cancelled stream does not end with one end frame: {_squash(types)}")
            check(len(types) >= 2 and types[-2] == "error", f"cancelled stream: no error frame before end: "
                  f"{_squash(types)}")
            err, end = frames[-2][0], frames[-1][0]
            check(err.get("cancelled") is True, f"error frame has cancelled={err.get('cancelled')!r}: {err}")
            check(end.get("status") == "cancelled", f"end status {end.get('status')!r}, expected 'cancelled'")
            check("result" not in types, "a cancelled request produced a result")
            last_step = max(h["step"] for h, _p, _t in frames if h["type"] == "progress")
            check(last_step < steps, f"the request ran all {steps} steps despite the cancel")
            q = eng.client.get("/queue").json()
            st = [r["status"] for r in q["finished"] if r["request_id"] == "cancel-me"]
            check(st == ["cancelled"], f"/queue lists the cancelled request as {st}")
            leftovers = [n for n in os.listdir(eng.engine.output_folder) if n.startswith(("cancel-me", ".cancel-me"))]
            check(not leftovers, f"the cancelled request left files: {leftovers}")

            before = _pool(eng.client)
            rerun = Timed().run(eng.client, {"model": model, "sample": sample})
            after = _pool(eng.client)
            res = [h for h, _p, _t in rerun if h["type"] == "result"]
            check(rerun[-1][0].get("status") == "ok" and res, f"the rerun after the cancel ended {rerun[-1][0]}")
            with open(res[0]["path"], "rb") as f:
                rerun_bytes = f.read()
            check(after["loads"] == before["loads"], "the rerun after a cancel reloaded components")
            check(rerun_bytes == ref_bytes, f"the rerun after the cancel differs from the uncancelled run "
                  f"({len(rerun_bytes)} vs {len(ref_bytes)} bytes, {res[0]['path']} vs {ref_res[0]['path']})")
            return {"cancel_sent_at_step": state["sent_at"], "last_progress_step": last_step, "total_steps": steps,
                    "cancel_answer": state["answer"][1], "cancelled_sequence": _squash(types),
                    "cancel_to_end_s": round(frames[-1][2] - next(t for h, _p, t in frames if h["type"] == "progress"
                                                                  and h["step"] == cancel_at), 4),
                    "identical_bytes": len(ref_bytes)}
        finally:
            side.close()
            eng.close()
    return _outcome("cancel", body)


# --------------------------------------------------------------------------- --all


def _subprocess(args: list, timeout: float) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), *args, "--json"]
    try:
        p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
        row = _last_json(p.stdout) or {"ok": False, "error": f"exit {p.returncode}, no JSON: "
                                                             f"{(p.stderr or p.stdout)[-500:]}"}
        if row.get("ok") and p.returncode != 0:
            row.update(ok=False, error=f"reported ok but exited {p.returncode}")
    except subprocess.TimeoutExpired:
        row = {"ok": False, "error": f"timed out after {timeout} s"}
    return row


def run_all(out: str | None = None, archs=SWEEP_ARCHS, pairs=None, timeout: float = 600) -> dict:
    """One subprocess per arch (`--arch X --json`), then one per swap pair (`--swap A,B,A --json`);
    writes report.md and report.json into `out`."""
    out = out or DEFAULT_OUT
    os.makedirs(out, exist_ok=True)
    pairs = PAIR_SEQUENCES if pairs is None else pairs
    rows, swaps = [], []
    for arch in archs:
        t0 = time.perf_counter()
        row = _subprocess(["--arch", arch, "--out", os.path.join(out, arch)], timeout)
        row.update(arch=arch, wall_s=round(time.perf_counter() - t0, 2))
        rows.append(row)
        print(f"{'PASS' if row['ok'] else 'FAIL'} {arch} ({row['wall_s']} s)" +
              ("" if row["ok"] else f": {row['error']}"), flush=True)
    for names in pairs:
        t0 = time.perf_counter()
        row = _subprocess(["--swap", names, "--out", os.path.join(out, "swap-" + names.replace(",", "_"))], timeout)
        row.update(sequence=names, wall_s=round(time.perf_counter() - t0, 2))
        swaps.append(row)
        print(f"{'PASS' if row['ok'] else 'FAIL'} swap {names} ({row['wall_s']} s)" +
              ("" if row["ok"] else f": {row['error']}"), flush=True)
    report = {"ok": all(r["ok"] for r in rows + swaps), "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
              "results": rows, "swaps": swaps}
    with open(os.path.join(out, "report.json"), "w") as f:
        json.dump(report, f, indent=2)
    lines = ["# Inference engine sweep", "", f"{report['created']}: "
             f"{sum(r['ok'] for r in rows)}/{len(rows)} archs and {sum(r['ok'] for r in swaps)}/{len(swaps)} "
             "swap pairs pass (tiny random-weight models, CPU)", "",
             "| arch | modality | load s | sample s | frames (progress / latent) | file | pass | error |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        t, fr, res = r.get("timings", {}), r.get("frames", {}), r.get("result", {})
        file = f"{res.get('ext', '')} {res.get('bytes', '')} B" if res else ""
        lines.append(f"| {r['arch']} | {r.get('modality', modality_of(r['arch']))} | {t.get('load_s', '')} | "
                     f"{t.get('sample_s', '')} | {fr.get('progress', '')} / {fr.get('latent', '')} | {file} | "
                     f"{'pass' if r['ok'] else 'FAIL'} | {(r.get('error') or '').replace('|', '/')} |")
    lines += ["", "## Swap pairs", "", "Each request after the first: what loaded and what the pool reused.", "",
              "| sequence | request | loaded | pool hits | pass | error |", "|---|---|---|---|---|---|"]
    for r in swaps:
        steps = r.get("steps") or [{}]
        for i, st in enumerate(steps):
            lines.append(f"| {r['sequence'] if i == 0 else ''} | {st.get('model', '')} | "
                         f"{', '.join(st.get('loaded', [])) or '-'} | {', '.join(st.get('hit', [])) or '-'} | "
                         f"{('pass' if r['ok'] else 'FAIL') if i == 0 else ''} | "
                         f"{(r.get('error') or '').replace('|', '/') if i == 0 else ''} |")
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    failed = [r["arch"] for r in rows if not r["ok"]] + [r["sequence"] for r in swaps if not r["ok"]]
    return {"name": "all", "ok": not failed, "error": f"failed: {', '.join(failed)}" if failed else None,
            "report": os.path.join(out, "report.md"), "results": rows, "swaps": swaps}


def _last_json(stdout: str):
    for line in reversed(stdout.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                return None
    return None


# --------------------------------------------------------------------------- CLI


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="testing/test_inference_engine.py", description=__doc__.split("\n\n")[0],
                                 epilog=__doc__[__doc__.index("Model names"):],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--arch", choices=SWEEP_ARCHS, help="one request on the tiny model of ARCH; checks every frame")
    mode.add_argument("--swap", metavar="A,B,A", help="requests for these models in order on one engine; checks "
                      "the component pool after each (see model names below)")
    mode.add_argument("--cancel", action="store_true", help="cancel a 50-step zimage request at step 2; the "
                      "rerun must be byte-identical to an uncancelled run")
    mode.add_argument("--all", action="store_true", help="--arch for every arch, then --swap for every pair "
                      "(PAIR_SEQUENCES), one subprocess each; writes report.md and report.json into --out")
    mode.add_argument("--pairs", action="store_true", help="only the swap pairs of --all")
    ap.add_argument("--out", help=f"output folder (default {os.path.relpath(DEFAULT_OUT, ROOT)}/<arch|swap|cancel>, "
                    "or the folder itself for --all)")
    ap.add_argument("--json", action="store_true", help="print the result as one JSON line (last line)")
    args = ap.parse_args(argv)

    if args.arch:
        res = run_arch(args.arch, args.out)
    elif args.swap:
        res = run_swap(args.swap, args.out)
    elif args.cancel:
        res = run_cancel(args.out)
    elif args.pairs:
        res = run_all(args.out, archs=())
    else:
        res = run_all(args.out)

    if args.json:
        print(json.dumps(res, default=str))
    elif not (args.all or args.pairs):
        print(json.dumps({k: v for k, v in res.items() if k not in ("ok", "error")}, indent=1, default=str))
    line = f"PASS {res['name']}" if res["ok"] else f"FAIL {res['name']}: {res['error']}"
    print(line, file=sys.stderr if args.json else sys.stdout)   # with --json the JSON stays stdout's last line
    return 0 if res["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())

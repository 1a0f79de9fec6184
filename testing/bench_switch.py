"""Bytes read when switching between two all-in-one checkpoints that share their VAE (a Pony ->
Illustrious switch), and what the content hash that lets them share costs. The second half of
`testing/bench_load.py --checkpoints`; alone:

    .venv/bin/python testing/bench_switch.py [--arch sdxl|sd1] [--dtype float16] [--rounds 2]

The two checkpoints are written at the arch's real dimensions (each component's known real config, the
first its own config rule recognises), in the original layout, over sparse files: every tensor zero
except the first MiB of each UNet and text encoder tensor region of the second checkpoint, so the two
differ there and carry one VAE byte for byte. Each is loaded as a request names it (an all-in-one file,
configs from the file) through one ComponentPool; the pool's counters say what each switch read.
Writes testing/.bench/bench_switch.json.
"""
import argparse
import json
import math
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
os.environ.setdefault("HF_HUB_OFFLINE", "1")

DIFFERS = 1 << 20               # bytes of random data at the start of each differing part


def known_real(comp):
    """The first known real config of `comp` that its own config rule gives back for a file of those
    shapes: (name, config). Found among the *_KNOWN tables of the rule's module."""
    import importlib

    from diffusers.utils import logging as dlog

    from toolkit.models.formats.file_view import FileKindError, View
    dlog.set_verbosity_error()          # the other tables' configs, tried on this class, are noise
    module = importlib.import_module(comp.single_file.config.rpartition(":")[0])
    for table in [v for k, v in vars(module).items() if k.endswith("KNOWN") and isinstance(v, dict)]:
        for name, config in table.items():
            if name.startswith("tiny") or not isinstance(config, dict):
                continue
            try:
                shapes = original_shapes(comp, config)
                fc = _rule(comp)(View("", shapes))
            except (FileKindError, TypeError, ValueError, KeyError, AttributeError):
                continue
            if fc.known == name:
                return name, config
    raise SystemExit(f"{comp.role}: no known real config its rule recognises")


def _rule(comp):
    from toolkit.models.arch import load_object
    return load_object(comp.single_file.config)


def original_shapes(comp, config) -> dict:
    """{original key: shape} of the component at `config` (built on the meta device, the row's inverse)."""
    import torch
    from accelerate import init_empty_weights

    from toolkit.models.arch import load_object
    cls = load_object(comp.cls)
    with init_empty_weights():
        model = cls.from_config(config) if hasattr(cls, "from_config") else cls(cls.config_class(**config))
    state = model.state_dict()
    if comp.single_file.original:
        state = load_object(comp.single_file.original)(state)
    return {k: tuple(t.shape) if isinstance(t, torch.Tensor) else tuple(t) for k, t in state.items()}


def write_sparse(path, parts: dict, differ: tuple, dtype: str = "F16"):
    """A safetensors file of `parts` ({prefix: {key: shape}}) over zeros, random bytes at the start of the
    parts whose prefix is in `differ`."""
    from testing.sparse_files import write_sparse as write
    flat = {prefix + k: shape for prefix, shapes in parts.items() for k, shape in shapes.items()}
    start, offsets = write(path, flat, dtype)
    with open(path, "r+b") as f:
        for prefix in differ:       # finite fp16 values (a random byte pattern may be NaN): small integers
            f.seek(start + offsets[prefix + next(iter(parts[prefix]))])
            f.write(bytes(b % 32 for b in os.urandom(DIFFERS)))
    return sum(2 * math.prod(shape) for shape in flat.values())


def run(args) -> dict:
    from toolkit.config_modules import ModelConfig
    from toolkit.models.base_model import get_model_class
    from toolkit.models.registry import get_arch
    from toolkit.models.v2 import content_hash
    from toolkit.models.v2.pool import ComponentPool

    spec = get_arch(args.arch)
    comps = [c for c in spec.components if c.single_file is not None and c.single_file.anchors and c.single_file.config]
    parts, known = {}, {}
    for c in comps:
        known[c.role], config = known_real(c)
        parts[c.single_file.prefixes[0]] = original_shapes(c, config)
    vae_prefix = next(c.single_file.prefixes[0] for c in comps if c.kind == "vae")
    out = {"arch": args.arch, "dtype": args.dtype, "known": known}
    with tempfile.TemporaryDirectory(dir=args.switch_work) as work:
        os.environ[content_hash.CACHE_ENV] = os.path.join(work, "hashes.json")
        content_hash.forget_process_cache()
        a, b = os.path.join(work, "pony.safetensors"), os.path.join(work, "illustrious.safetensors")
        size = write_sparse(a, parts, ())
        write_sparse(b, parts, tuple(p for p in parts if p != vae_prefix))
        out["checkpoint_bytes"] = size
        # the hash: every part of one checkpoint, cold (nothing cached), then from the cache file
        t0 = time.perf_counter()
        for prefix in parts:
            content_hash.part_digest(a, prefix)
        cold = time.perf_counter() - t0
        content_hash.forget_process_cache()
        t0 = time.perf_counter()
        for prefix in parts:
            content_hash.part_digest(a, prefix)
        out["hash"] = {"bytes": size, "cold_s": cold, "gb_per_s": size / cold / 1e9,
                       "cached_s": time.perf_counter() - t0, "threads": min(8, os.cpu_count() or 1)}
        pool = ComponentPool()
        switches = []
        for name, path in [("pony", a), ("illustrious", b)] * args.rounds:
            mc = ModelConfig.from_dict({"name_or_path": path, "dtype": args.dtype, "local_only": True})
            holder = get_model_class(mc.arch)(mc)
            t0 = time.perf_counter()
            with pool.building():
                holder.load_model()
            pool.release_unused()
            build = dict(pool.stats()["last_build"], seconds=time.perf_counter() - t0, to=name)
            switches.append(build)
            print(f"-> {name:12s} read {build['loaded_bytes'] / 1e9:6.2f} GB ({', '.join(build['loaded'])}), "
                  f"kept {build['reused_bytes'] / 1e9:6.2f} GB ({', '.join(build['reused'])}) in {build['seconds']:.1f} s",
                  flush=True)
            del holder
        out["switches"] = switches
    later = switches[1:]
    whole = switches[0]["loaded_bytes"]
    out["summary"] = {"first_load_bytes": whole,
                      "switch_bytes": max(s["loaded_bytes"] for s in later) if later else None,
                      "switch_share": (max(s["loaded_bytes"] for s in later) / whole) if later and whole else None}
    print(f"{args.arch} ({', '.join(f'{r} {k}' for r, k in known.items())}): a switch reads "
          f"{out['summary']['switch_bytes'] / 1e9:.2f} of {whole / 1e9:.2f} GB "
          f"({100 * out['summary']['switch_share']:.0f}%; ComfyUI and A1111 read all of it); "
          f"hashing a checkpoint: {out['hash']['cold_s']:.1f} s cold ({out['hash']['gb_per_s']:.2f} GB/s), "
          f"{out['hash']['cached_s'] * 1000:.1f} ms cached")
    return out


def main(argv=None):
    ap = argparse.ArgumentParser()
    add_arguments(ap)
    args = ap.parse_args(argv)
    write(args, run(args))


def add_arguments(ap):
    ap.add_argument("--arch", default="sdxl", help="an arch whose all-in-one checkpoints the detector reads")
    ap.add_argument("--dtype", default="float16")
    ap.add_argument("--rounds", type=int, default=2, help="pony -> illustrious rounds")
    ap.add_argument("--switch-work", default=None, help="where the two sparse checkpoints are written")
    ap.add_argument("--switch-out", default=os.path.join(ROOT, "testing", ".bench", "bench_switch.json"))


def write(args, out):
    os.makedirs(os.path.dirname(args.switch_out), exist_ok=True)
    with open(args.switch_out, "w") as f:
        json.dump(out, f, indent=2)
    print(f"wrote {args.switch_out}")


if __name__ == "__main__":
    main()

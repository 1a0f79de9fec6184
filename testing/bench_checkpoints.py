"""All-in-one checkpoint load time at real dimensions, random weights (fp16), side by side:

    .venv/bin/python testing/bench_load.py --checkpoints [--models sd15,sdxl] [--repeat 1] [--work DIR]

Per model (SD 1.5-shaped, SDXL-shaped): a diffusers folder written from the arch row's known real
configs (random fp16 weights, tokenizers built offline) and the all-in-one checkpoint of the same
weights in the original layouts; then, page cache warm, interleaved:
- ours: the holder reading the checkpoint (arch, configs and tokenizers from the file and the row);
- diffusers' `from_single_file(ckpt, config=<that folder>)` (a local config, nothing downloaded);
- diffusers' `from_pretrained(<that folder>)`.
Every load is in fp16 on the CPU. Prints a table and writes testing/.bench/bench_checkpoints.json.

Sizes: SD 1.5 is 2.1 GB in fp16, SDXL 6.9 GB; a load holds one model at a time (about its size in
memory, plus one component while converting). On a machine with less than ~16 GB free run
`--models sd15` only. (The bytes a switch between two SDXL checkpoints sharing their VAE loads belong to
the pool's content identity, benchmarked with it.)
"""
import gc
import json
import os
import shutil
import statistics
import time

import torch

REAL = {"sd15": "sd1", "sdxl": "sdxl"}      # model -> arch


def real_configs(model: str) -> dict:
    """{role: the known real config} of each weighted component, from the arch rows' tables."""
    from toolkit.models.archs import sd1, sdxl
    from toolkit.models.formats.clip import CLIP_L_KNOWN
    from toolkit.models.formats.openclip import OPENCLIP_G_KNOWN
    clip_l = CLIP_L_KNOWN["clip-vit-large-patch14"]
    if model == "sd15":
        return {"unet": sd1.UNET_KNOWN["sd15"], "vae": sd1.VAE_KNOWN["sd-vae"], "text_encoder": clip_l}
    return {"unet": sdxl.UNET_KNOWN["sdxl-base"], "vae": sdxl.VAE_KNOWN["sdxl-vae"], "text_encoder": clip_l,
            "text_encoder_2": OPENCLIP_G_KNOWN["openclip-vit-bigg-14"]}


def _random_state(cls, config: dict, seed: int) -> dict:
    from toolkit.models.formats.component_file import build_empty
    g = torch.Generator().manual_seed(seed)
    state = {}
    for k, t in build_empty(cls, config).state_dict().items():
        if t.is_floating_point():
            state[k] = (torch.randn(t.shape, generator=g, dtype=torch.float32) * 0.02).to(torch.float16)
        else:
            state[k] = torch.zeros(t.shape, dtype=t.dtype)
    return state


def write_folder(model: str, folder: str) -> str:
    """A diffusers folder of `model` at its real configs, random fp16 weights."""
    from safetensors.torch import save_file

    from toolkit.models.arch import SCHEDULER, TOKENIZER
    from toolkit.models.formats.component_file import write_config
    from toolkit.models.registry import get_arch
    from toolkit.tokenizers import find_tokenizer
    arch, configs = REAL[model], real_configs(model)
    spec = get_arch(arch)
    index = {"_class_name": spec.pipeline, "_diffusers_version": __import__("diffusers").__version__}
    for n, comp in enumerate(spec.components):
        sub = os.path.join(folder, comp.folder)
        os.makedirs(sub, exist_ok=True)
        if comp.kind == TOKENIZER:
            shutil.copytree(find_tokenizer(comp.vocab, role=comp.role), sub, dirs_exist_ok=True)
            index[comp.role] = ["transformers", "CLIPTokenizer"]
        elif comp.kind == SCHEDULER:
            config = spec.scheduler_for_files()
            with open(os.path.join(sub, "scheduler_config.json"), "w") as f:
                json.dump(config, f)
            index[comp.role] = ["diffusers", config["_class_name"]]
        else:
            cls = comp.load_class()
            config = dict(configs[comp.role])
            write_config(cls, config, sub)
            library = "transformers" if cls.__module__.startswith("transformers") else "diffusers"
            name = "model.safetensors" if library == "transformers" else "diffusion_pytorch_model.safetensors"
            save_file(_random_state(cls, config, n), os.path.join(sub, name))
            index[comp.role] = [library, cls.__name__]
            gc.collect()
    for k in spec.pipeline_init_kwargs:
        index.setdefault(k, [None, None])
    with open(os.path.join(folder, "model_index.json"), "w") as f:
        json.dump(index, f)
    return folder


def write_checkpoint(model: str, folder: str, path: str) -> str:
    """The all-in-one file of the folder's weights, each component in its original layout under its
    checkpoint prefix (the tiny factory's inverses; one component converted at a time)."""
    from safetensors import safe_open
    from safetensors.torch import save_file

    from toolkit.models.arch import load_object
    from toolkit.models.registry import get_arch
    arch = REAL[model]
    tensors = {}
    for comp in get_arch(arch).components:
        sf = comp.single_file
        if sf is None or not sf.anchors:
            continue
        sub = os.path.join(folder, comp.folder)
        state = {}
        for name in (f for f in os.listdir(sub) if f.endswith(".safetensors")):
            with safe_open(os.path.join(sub, name), "pt") as f:
                state.update({k: f.get_tensor(k) for k in f.keys()})
        tensors.update({sf.prefixes[0] + k: v.contiguous() for k, v in load_object(sf.original)(state).items()})
    save_file(tensors, path)
    return path


def _warm(path: str):
    """Read every page once, so each load below meets a warm page cache alike."""
    paths = [os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs] if os.path.isdir(path) else [path]
    for p in paths:
        with open(p, "rb") as f:
            while f.read(1 << 24):
                pass


def _timed(fn) -> float:
    t0 = time.perf_counter()
    out = fn()
    seconds = time.perf_counter() - t0
    del out
    gc.collect()
    return seconds


def loaders(model: str, folder: str, ckpt: str) -> dict:
    from toolkit.models.arch import load_class
    from toolkit.models.base_model import get_model_class
    from toolkit.models.registry import get_arch
    arch = REAL[model]
    spec = get_arch(arch)
    pipe = load_class(spec.pipeline)
    extra = dict(spec.pipeline_init_kwargs)

    def ours():
        return get_model_class(arch)({"name_or_path": ckpt, "dtype": "fp16", "local_only": True}).load_model()

    def single_file():
        return pipe.from_single_file(ckpt, config=folder, torch_dtype=torch.float16, local_files_only=True, **extra)

    def folder_load():
        return pipe.from_pretrained(folder, torch_dtype=torch.float16, local_files_only=True, **extra)
    return {"ours_checkpoint_s": ours, "diffusers_single_file_s": single_file, "diffusers_folder_s": folder_load}


def run(work: str, models, repeat: int = 1) -> list:
    rows = []
    for model in models:
        folder = write_folder(model, os.path.join(work, f"{model}-folder"))
        ckpt = write_checkpoint(model, folder, os.path.join(work, f"{model}.safetensors"))
        _warm(folder)
        _warm(ckpt)
        fns = loaders(model, folder, ckpt)
        times = {k: [] for k in fns}
        for _ in range(repeat):
            for k, fn in fns.items():
                times[k].append(_timed(fn))
        row = {"model": model, "checkpoint_bytes": os.path.getsize(ckpt), "repeat": repeat,
               **{k: statistics.median(v) for k, v in times.items()}}
        row["ours_vs_single_file"] = row["ours_checkpoint_s"] / row["diffusers_single_file_s"]
        row["ours_vs_folder"] = row["ours_checkpoint_s"] / row["diffusers_folder_s"]
        rows.append(row)
        shutil.rmtree(folder, ignore_errors=True)
        os.remove(ckpt)
    return rows


def table(rows) -> str:
    lines = [f"{'model':6} {'GB':>5} {'ours (ckpt)':>12} {'from_single_file':>17} {'folder':>8} "
             f"{'ours/single':>12} {'ours/folder':>12}"]
    for r in rows:
        lines.append(f"{r['model']:6} {r['checkpoint_bytes'] / 1e9:5.2f} {r['ours_checkpoint_s']:11.2f}s "
                     f"{r['diffusers_single_file_s']:16.2f}s {r['diffusers_folder_s']:7.2f}s "
                     f"{r['ours_vs_single_file']:12.2f} {r['ours_vs_folder']:12.2f}")
    return "\n".join(lines)


def main(args, out: str):
    import tempfile
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = set(models) - set(REAL)
    if unknown:
        raise SystemExit(f"--models: unknown {sorted(unknown)} (known: {', '.join(REAL)})")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    with tempfile.TemporaryDirectory(dir=args.work) as work:
        rows = run(work, models, max(1, min(args.repeat, 3)))       # each load reads gigabytes
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump({"torch": torch.__version__, "threads": torch.get_num_threads(), "dtype": "fp16", "rows": rows},
                  f, indent=2)
    print(table(rows))
    print(f"wrote {out}")

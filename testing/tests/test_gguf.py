"""GGUF denoisers (toolkit/models/formats/gguf*.py): the tiny factory's files, in the original key layouts
real files use, load through the funnel (diffusers' GGUF layers, weights kept packed) and generate within
each type's bound of the float32 model; the quantization is part of the pool identity; bad files are
refused naming the file; inspection and the library describe them without torch."""
import os
import shutil

import numpy as np
import pytest
import torch

from toolkit.config_modules import GenerateImageConfig
from toolkit.models.base_model import get_model_class
from toolkit.models.formats.gguf_quants import QUANT_TYPES
from toolkit.models.tiny import sample_settings
from toolkit.models.tiny.gguf import make_tiny_gguf, wide_transformer

ARCHS = ("flux", "sd3", "wan21", "zimage", "qwen_image", "wan_vace", "ltx2")
# relative error bounds (latent, image) per type: 1.5x the worst of the five archs measured (docs/weight_formats.md table;
# the runs are seeded, so this margin only absorbs other CPUs' float rounding)
BOUNDS = {"Q8_0": (0.025, 0.017), "Q6_K": (0.06, 0.035), "Q5_K": (0.13, 0.08), "Q4_K": (0.31, 0.22),
          "Q4_0": (0.36, 0.2)}


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    root = tmp_path_factory.mktemp("gguf")
    return {a: make_tiny_gguf(a, root / a) for a in ARCHS}


def _run(arch, model):
    holder = get_model_class(arch)({"local_only": True, "arch": arch, **model}, device="cpu").load_model()
    gen = GenerateImageConfig.from_dict({**sample_settings(arch), "prompt": "a fox", "seed": 3}, holder.model_config)
    lats = []
    out = holder.generate_single(gen, on_step=lambda i, n, t, lat, x0: lats.append(lat.detach().float().clone()))
    img = out
    return lats[-1], _pixels(img), holder


def _pixels(out):
    """An image, a list of them (a batch) or a video's frames as one float array."""
    if isinstance(out, (list, tuple)):
        return np.stack([_pixels(o) for o in out])
    return np.asarray(out.convert("RGB") if hasattr(out, "convert") else out, dtype=np.float64)


def _rel(a, b):
    return float(np.linalg.norm(np.asarray(a, np.float64) - np.asarray(b, np.float64)) / np.linalg.norm(b))


@pytest.mark.parametrize("arch", ARCHS)
def test_layouts_round_trip_and_match_diffusers_converters(arch, tiny):
    from diffusers.loaders.single_file_model import SINGLE_FILE_LOADABLE_CLASSES

    from toolkit.models.formats.gguf_layouts import to_diffusers, to_original
    from toolkit.models.tiny import build_pipeline

    t = wide_transformer(build_pipeline(arch).transformer)
    name = type(t).__name__
    sd = {k: v.clone() for k, v in t.state_dict().items()}
    original = to_original(name, sd)
    assert (set(original) == set(sd)) == (name == "QwenImageTransformer2DModel"), "original names, not diffusers'"
    back = to_diffusers(name, original, {k: tuple(v.shape) for k, v in sd.items()}, dict(t.config))
    assert set(back) == set(sd) and all(torch.equal(back[k], sd[k]) for k in sd)
    if name != "FluxTransformer2DModel":   # diffusers' Flux converter splits at FLUX.1's width only
        conv = SINGLE_FILE_LOADABLE_CLASSES[name]["checkpoint_mapping_fn"](checkpoint=dict(original), config=t.config)
        conv.pop("norm_final.weight", None)
        assert set(conv) == set(sd) and all(torch.equal(conv[k], sd[k]) for k in sd)


def test_rows_of_one_denoiser_class_read_its_gguf_files_alike():
    """The reader knows the denoiser's class, not the arch: every row whose denoiser is that class
    declares the same `gguf` row (or none does)."""
    from toolkit.models.arch import DENOISER
    from toolkit.models.formats.gguf_layouts import readable
    from toolkit.models.registry import ARCHS as ROWS
    by_class = {}
    for a in ROWS:
        for c in ROWS[a].components:
            if c.kind == DENOISER:
                by_class.setdefault(c.cls, []).append(ROWS[a].gguf)
    assert all(all(g == rows[0] for g in rows) for rows in by_class.values()), by_class
    assert {c for c, rows in by_class.items() if rows[0] is not None} == set(readable())
    assert {ROWS[a].component("transformer").cls for a in ARCHS} == set(readable())


def test_flux_layout_matches_diffusers_at_real_width():
    """At FLUX.1's width diffusers' own converter and ours give the same keys and shapes (meta tensors)."""
    from diffusers import FluxTransformer2DModel
    from diffusers.loaders.single_file_model import SINGLE_FILE_LOADABLE_CLASSES

    from toolkit.models.formats.gguf_layouts import to_diffusers, to_original
    with torch.device("meta"):
        t = FluxTransformer2DModel(num_layers=1, num_single_layers=1)
    shapes = {k: tuple(v.shape) for k, v in t.state_dict().items()}
    original = to_original("FluxTransformer2DModel", t.state_dict())
    assert "double_blocks.0.img_attn.qkv.weight" in original and "single_blocks.0.linear1.weight" in original
    ours = to_diffusers("FluxTransformer2DModel", original, shapes, dict(t.config))
    theirs = SINGLE_FILE_LOADABLE_CLASSES["FluxTransformer2DModel"]["checkpoint_mapping_fn"](checkpoint=dict(original))
    assert {k: tuple(v.shape) for k, v in ours.items()} == {k: tuple(v.shape) for k, v in theirs.items()} == shapes


def test_k_quant_encoders_round_trip_through_gguf_dequantizers():
    import gguf

    from toolkit.models.formats.gguf_quants import quantize
    x = np.random.default_rng(0).standard_normal((4, 512)).astype(np.float32)
    errs = {}
    for q in QUANT_TYPES:
        packed = quantize(x, q)
        assert packed.shape == (4, 512 // gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[q]][0]
                                * gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[q]][1])
        errs[q] = _rel(gguf.quants.dequantize(packed, gguf.GGMLQuantizationType[q]), x)
    assert errs["Q8_0"] < errs["Q6_K"] < errs["Q5_K"] < errs["Q4_K"] < 0.1, errs


def test_files_carry_the_real_layout_and_types(made):
    from toolkit.models.formats.gguf_header import describe, field_str, inspect_gguf, open_reader
    info = describe(str(made["flux"]["files"]["Q4_K"]))
    # the rows of its class (FLUX.1 and Flex.1 read one layout); which one a file is, its shapes say
    assert info["gguf_architecture"] == "flux" and "flux" in info["archs"] and info["qtype"] == "Q4_K"
    assert inspect_gguf(str(made["flux"]["files"]["Q4_K"]))["arch"] == "flux"
    assert set(info["tensor_types"]) == {"F32", "F16", "Q4_K"}, "1-D in F32; rows that are not 256-multiples F16"
    reader = open_reader(str(made["flux"]["files"]["Q8_0"]))
    names = {t.name for t in reader.tensors}
    assert {"double_blocks.0.img_attn.qkv.weight", "single_blocks.0.linear1.weight", "img_in.weight"} <= names
    assert field_str(reader, "general.architecture") == "flux"
    wan = open_reader(str(made["wan21"]["files"]["Q8_0"]))
    patch = next(t for t in wan.tensors if t.name == "patch_embedding.weight")
    assert len(patch.shape) == 5 and patch.tensor_type.name == "F32", "5-D tensors as fix_5d_tensors.py adds them"
    z = describe(str(made["zimage"]["files"]["Q8_0"]))
    assert (z["gguf_architecture"], z["archs"]) == ("lumina2", ["zimage", "zimage_omni"])


def test_a_lumina2_file_without_z_image_keys_is_not_taken_for_z_image(tmp_path):
    import gguf

    from toolkit.file_report import inspect_file
    w = gguf.GGUFWriter(path=None, arch="lumina2")
    w.add_tensor("cap_embedder.1.weight", np.zeros((8, 8), np.float32))
    w.write_header_to_file(path=str(tmp_path / "lumina.gguf"))
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    r = inspect_file(str(tmp_path / "lumina.gguf"))
    assert r["archs"] == [] and r["summary"].startswith("lumina2 model (no arch reads it), GGUF F32")


@pytest.mark.parametrize("arch", ARCHS)
def test_every_type_generates_within_its_bound_of_the_float32_model(arch, made):
    folder = str(made[arch]["folder"])
    ref_lat, ref_img, _ = _run(arch, {"name_or_path": folder})
    seen = {}
    for q, path in made[arch]["files"].items():
        lat, img, holder = _run(arch, {"name_or_path": str(path), "extras_name_or_path": folder})
        tr = holder.loaded["transformer"]
        assert tr._aitk_identity.fmt == f"gguf-{q}" and tr._aitk_gguf["qtype"] == q
        packed = [p for p in tr.parameters() if getattr(p, "quant_type", None) is not None]
        assert packed and all(p.dtype == torch.uint8 for p in packed), "weights stay packed while resident"
        seen[q] = (_rel(lat, ref_lat), _rel(img, ref_img))
        assert seen[q][0] <= BOUNDS[q][0] and seen[q][1] <= BOUNDS[q][1], (arch, q, seen[q])
    print(arch, {q: f"{a:.4f}/{b:.4f}" for q, (a, b) in seen.items()})
    assert seen["Q8_0"][0] < seen["Q6_K"][0] < seen["Q5_K"][0] < seen["Q4_K"][0], "fewer bits, more error"


def test_quant_type_is_part_of_the_pool_identity(made, tmp_path):
    from diffusers import FluxTransformer2DModel

    from toolkit.models.v2 import LoadPolicy, aitk

    files, folder = made["flux"]["files"], str(made["flux"]["folder"])
    cls = aitk(FluxTransformer2DModel)
    kw = dict(role="transformer", subfolder="transformer", policy=LoadPolicy(torch.float32, "cpu"), config_source=folder)
    q8, q4 = cls.identify(str(files["Q8_0"]), **kw), cls.identify(str(files["Q4_K"]), **kw)
    assert q8.key != q4.key and (q8.fmt, q4.fmt) == ("gguf-Q8_0", "gguf-Q4_K")
    assert cls.identify(str(files["Q8_0"]), **kw).key == q8.key, "the same file twice is one component"
    link = tmp_path / "same.gguf"
    os.link(files["Q8_0"], link)
    assert cls.identify(str(link), **kw).key == q8.key, "another path to the same file is a hit too"


def test_engine_pool_hits_the_same_file_and_misses_another_quant(made, tmp_path):
    """Through a real in-process engine: Q8_0 twice is one component; Q4_K is a second transformer,
    loaded alone (the text encoders, tokenizers and VAE of the extras folder are pool hits)."""
    import threading

    from extensions_built_in.inference_engine.engine import Engine

    files, folder = made["flux"]["files"], str(made["flux"]["folder"])
    eng = Engine(output_folder=str(tmp_path / "out"), worker="thread")
    eng.start_worker()
    loop = threading.Thread(target=eng.run_forever, daemon=True)
    loop.start()
    pools = []
    try:
        sample = {**sample_settings("flux"), "prompt": "a fox", "seed": 1}
        for q in ("Q8_0", "Q8_0", "Q4_K"):
            req = eng.submit({"arch": "flux", "name_or_path": str(files[q]), "extras_name_or_path": folder,
                              "local_only": True}, sample)
            assert req.done_event.wait(120) and req.status == "ok", (q, req.status)
            pools.append(eng.health()["pool"])
    finally:
        eng.stop()
        loop.join(30)
    def transformer(pool):
        return [e["key"] for e in pool["entries"] if e["class"] == "FluxTransformer2DModel"]
    assert transformer(pools[0]) == transformer(pools[1]), "the same file again is the same component"
    assert pools[1]["misses"] == pools[0]["misses"], "the same file again loads nothing"
    assert transformer(pools[2]) != transformer(pools[0]), "two quantizations of one model are two components"
    assert pools[2]["misses"] == pools[1]["misses"] + 1, "another quant: only the transformer is read"
    assert pools[2]["hits"] >= pools[1]["hits"] + 6, "text encoders, tokenizers, VAE, scheduler: hits"


def test_bad_files_are_refused_naming_the_file(made, tmp_path):
    import gguf

    from toolkit.models.formats.gguf_header import GGUFHeaderError, describe
    from toolkit.models.v2.mixin import ComponentLoadError
    folder = str(made["flux"]["folder"])
    good = made["flux"]["files"]["Q8_0"]
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    with pytest.raises(GGUFHeaderError, match="cut.gguf"):
        describe(str(cut))
    with pytest.raises(ComponentLoadError, match=r"transformer: .*cut\.gguf"):
        _run("flux", {"name_or_path": str(cut), "extras_name_or_path": folder})

    # a tensor in a type diffusers cannot dequantize (IQ2_XXS: 256-value blocks of 66 bytes)
    odd = tmp_path / "odd.gguf"
    reader = gguf.GGUFReader(str(good))
    w = gguf.GGUFWriter(path=None, arch="flux")
    for t in reader.tensors:
        if t.name == "double_blocks.0.img_mlp.2.weight":
            rows = np.zeros((t.data.shape[0], 1024 // 256 * 66), np.uint8)
            w.add_tensor(t.name, rows, raw_dtype=gguf.GGMLQuantizationType.IQ2_XXS)
        else:
            w.add_tensor(t.name, t.data, raw_dtype=t.tensor_type)
    w.write_header_to_file(path=str(odd))
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with pytest.raises(ComponentLoadError, match=r"odd\.gguf.*double_blocks\.0\.img_mlp\.2\.weight.*IQ2_XXS"):
        _run("flux", {"name_or_path": str(odd), "extras_name_or_path": folder})

    # a key the layout does not consume
    extra = tmp_path / "extra.gguf"
    w = gguf.GGUFWriter(path=None, arch="flux")
    for t in reader.tensors:
        w.add_tensor(t.name, t.data, raw_dtype=t.tensor_type)
    w.add_tensor("double_blocks.0.stray.weight", np.zeros((4, 4), np.float32))
    w.write_header_to_file(path=str(extra))
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with pytest.raises(ComponentLoadError, match=r"extra\.gguf.*not consumed.*double_blocks\.0\.stray\.weight"):
        _run("flux", {"name_or_path": str(extra), "extras_name_or_path": folder})

    with pytest.raises(ComponentLoadError, match=r"sd3-tiny-Q8_0\.gguf: a sd3 GGUF file, not a FluxTransformer2DModel"):
        _run("flux", {"name_or_path": str(made["sd3"]["files"]["Q8_0"]), "extras_name_or_path": folder})

    with pytest.raises(ComponentLoadError, match="has no subfolder 'scheduler'"):   # extras that are not the arch's
        get_model_class("flux")({"arch": "flux", "name_or_path": str(good), "extras_name_or_path": str(tmp_path),
                                 "local_only": True}, device="cpu").load_model()


def test_inspect_and_library_describe_gguf_files_without_torch(made, tmp_path):
    import subprocess
    import sys
    root = tmp_path / "models"
    (root / "diffusion_models").mkdir(parents=True)
    shutil.copy(made["flux"]["files"]["Q4_K"], root / "diffusion_models" / "flux1-tiny-Q4_K.gguf")
    code = ("import json, sys; from toolkit.file_report import inspect_file; from toolkit.library import scan_folder;"
            f"r = inspect_file({str(root / 'diffusion_models' / 'flux1-tiny-Q4_K.gguf')!r});"
            f"e = scan_folder({str(root)!r});"
            "print(json.dumps([r['summary'], e[0]['arch'], e[0]['format'], e[0]['role'], 'torch' in sys.modules]))")
    root_dir = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root_dir,
                         env={**os.environ, "PYTHONPATH": root_dir})
    assert out.returncode == 0, out.stderr
    import json
    summary, arch, fmt, role, torch_loaded = json.loads(out.stdout.strip().splitlines()[-1])
    assert summary.startswith("flux transformer, GGUF Q4_K, ") and summary.endswith(" MB")
    assert (arch, fmt, role, torch_loaded) == ("flux", "GGUF Q4_K", "transformer", False)

    from toolkit.library import scan
    (root / "pipes").mkdir()
    shutil.copytree(made["flux"]["folder"], root / "pipes" / "flux-tiny", ignore=shutil.ignore_patterns("gguf"))
    entries = scan(folders=[str(root)], hub_cache=str(tmp_path / "nohub"))["entries"]
    g = next(e for e in entries if (e.get("path") or "").endswith(".gguf"))     # (tiny: entries have no path)
    assert g["model"] == {"arch": "flux", "name_or_path": g["path"],
                          "extras_name_or_path": str(root / "pipes" / "flux-tiny")}


def test_a_profile_names_a_gguf_denoiser_beside_a_diffusers_checkpoint(made, tmp_path):
    """A profile's `diffusion_model` (components.transformer) is the GGUF file, its `checkpoint` the diffusers
    folder: the transformer's config and every other component come from that folder."""
    from toolkit.profiles import load_profiles
    folder, q5 = made["flux"]["folder"], made["flux"]["files"]["Q5_K"]
    (tmp_path / "p.toml").write_text(f'[model_profiles.flux-q5]\narchitecture = "flux"\ncheckpoint = "{folder}"\n'
                                     f'diffusion_model = "{q5}"\n')
    model = load_profiles(str(tmp_path / "p.toml")).get("flux-q5").model_config()
    holder = get_model_class("flux")(model, device="cpu").load_model()
    assert holder.loaded["transformer"]._aitk_identity.fmt == "gguf-Q5_K"
    assert holder.loaded["vae"]._aitk_identity.source == str(folder)

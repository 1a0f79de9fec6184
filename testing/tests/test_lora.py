"""LoRAs as unmerged adapters switched on a resident model (toolkit/models/lora_adapters.py): the output of a
request equals diffusers' own pipeline with the same adapters set; switching loads no component and
only new adapter files; no LoRA is bit for bit a fresh load; a fuse is undone exactly; bad files are
refused naming the field and leave the engine serving; quantized and scaled-FP8 models take them."""
import dataclasses

import numpy as np
import pytest
import torch

from extensions_built_in.inference_engine.worker import WorkerCore
from testing.fixtures import input_image, make_tiny_lora
from toolkit.config_modules import GenerateImageConfig, LoraRef, ModelConfig
from toolkit.errors import ConfigError
from toolkit.models.base_model import get_model_class

SEED = 3


@pytest.fixture(scope="module")
def files(tiny, tmp_path_factory):
    """Two zimage LoRAs and one sd1 LoRA (another arch's)."""
    root = tmp_path_factory.mktemp("loras")
    return {"a": str(make_tiny_lora("zimage", tiny("zimage"), root / "a.safetensors", seed=1)),
            "b": str(make_tiny_lora("zimage", tiny("zimage"), root / "b.safetensors", seed=2)),
            "sd1": str(make_tiny_lora("sd1", tiny("sd1"), root / "sd1.safetensors", seed=1))}


def _gen(arch="zimage", **kw):
    return GenerateImageConfig.from_dict({"prompt": "a fox", "width": 64, "height": 64, "num_inference_steps": 2,
                                          "seed": SEED, **kw}, arch)


def _mc(folder, loras=(), arch="zimage", **kw):
    return ModelConfig.from_dict({"arch": arch, "name_or_path": folder, "loras": list(loras), **kw})


def _image(holder, arch="zimage", **kw):
    return np.asarray(holder.generate_single(_gen(arch, **kw)))


def _rel(a, b):
    """Relative error of image `a` against `b`, both mapped to [-1, 1]."""
    a = np.asarray(a, dtype=np.float64) / 127.5 - 1
    b = np.asarray(b, dtype=np.float64) / 127.5 - 1
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def _fresh(folder, arch="zimage", **kw):
    return get_model_class(arch)({"arch": arch, "name_or_path": folder, **kw}).load_model()


@pytest.fixture(scope="module")
def plain(tiny):
    """The image of a fresh zimage load with no LoRA."""
    return _image(_fresh(tiny("zimage")))


# -- fidelity ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("arch", ["zimage", "sd1"])
def test_two_loras_equal_the_bare_pipeline_with_set_adapters(arch, tiny, tmp_path):
    from diffusers import DiffusionPipeline

    folder = tiny(arch)
    a = str(make_tiny_lora(arch, folder, tmp_path / "a.safetensors", seed=1))
    b = str(make_tiny_lora(arch, folder, tmp_path / "b.safetensors", seed=2))
    eng = WorkerCore(lambda msg: None)
    holder = eng._ensure_holder(_mc(folder, [{"path": a, "scale": 0.8}, {"path": b, "scale": 0.5}], arch), None)
    got = _image(holder, arch)
    bare = DiffusionPipeline.from_pretrained(folder, local_files_only=True, dtype=torch.float32)
    bare.set_progress_bar_config(disable=True)
    bare.load_lora_weights(a, adapter_name="a")
    bare.load_lora_weights(b, adapter_name="b")
    bare.set_adapters(["a", "b"], [0.8, 0.5])
    kw = holder.pipeline_kwargs(_gen(arch))
    ref = bare(**kw, generator=torch.Generator("cpu").manual_seed(SEED), output_type="pil").images[0]
    assert np.array_equal(got, np.asarray(ref))
    bare.disable_lora()
    base = bare(**kw, generator=torch.Generator("cpu").manual_seed(SEED), output_type="pil").images[0]
    assert not np.array_equal(got, np.asarray(base))          # the LoRAs do change the picture


MIXED = [a for a in ("sd1", "sdxl", "flux", "zimage", "wan21", "wan21_i2v", "qwen_image", "krea2")]


@pytest.mark.parametrize("arch", MIXED)
def test_mixed_formats_equal_the_bare_pipeline(arch, tiny, tmp_path):
    """One LoRA in each format the arch takes (PEFT, kohya with its text-encoder part, ComfyUI), in one
    request: the engine's output equals diffusers' own pipeline loading the same files and setting the
    same scales, bit for bit."""
    from diffusers import DiffusionPipeline

    from toolkit.models.registry import ARCHS
    from toolkit.models.tiny.loras import write_tiny_lora

    folder, row = tiny(arch), ARCHS[arch].lora
    files = [str(write_tiny_lora(arch, folder, tmp_path / f"{fmt}.safetensors", fmt=fmt, seed=i + 1,
                                 text_encoder=bool(row.text_encoders) and fmt != "comfyui"))
             for i, fmt in enumerate(row.formats)]
    scales = [0.8, -0.5, 0.6][:len(files)]
    video = {"num_frames": 5} if ARCHS[arch].modality == "video" else {}
    video.update({name: input_image(tmp_path / f"{name}.png") for name in ARCHS[arch].needed_inputs})
    eng = WorkerCore(lambda msg: None)
    holder = eng._ensure_holder(_mc(folder, [{"path": f, "scale": s} for f, s in zip(files, scales)], arch), None)
    assert eng.pool.adapter_loads == len(files)
    gen = _gen(arch, **video)
    got = np.asarray(holder.generate_single(gen))
    bare = DiffusionPipeline.from_pretrained(folder, local_files_only=True, dtype=torch.float32)
    bare.set_progress_bar_config(disable=True)
    for i, f in enumerate(files):
        bare.load_lora_weights(f, adapter_name=f"l{i}")
    bare.set_adapters([f"l{i}" for i in range(len(files))], scales)
    kw = holder.pipeline_kwargs(gen)
    run = lambda: np.asarray(holder.extract_output(bare(**kw, generator=torch.Generator("cpu").manual_seed(SEED),
                                                        output_type=holder.output_type)))
    assert np.array_equal(got, run())
    bare.disable_lora()
    assert not np.array_equal(got, run())


# -- switching on the resident model -------------------------------------------------------------------
def test_switching_loads_no_component_and_only_new_adapters(tiny, files, plain):
    folder = tiny("zimage")
    eng = WorkerCore(lambda msg: None, keep_resident_gb=1)      # a budget: inactive adapters stay warm
    p = eng.pool
    A, B = [{"path": files["a"], "scale": 0.8}], [{"path": files["b"], "scale": 0.5}]
    first_a = _image(eng._ensure_holder(_mc(folder, A), None))
    loads, misses, builds = p.loads, p.misses, eng.builds
    assert p.adapter_loads == 1 and p.adapter_hits == 0
    out_b = _image(eng._ensure_holder(_mc(folder, B), None))
    assert p.adapter_loads == 2 and not np.array_equal(out_b, first_a)
    stats = p.stats()
    assert {(e["name"], e["active"], e["scale"]) for e in stats["adapters"]} == {
        ("a.safetensors", False, None), ("b.safetensors", True, 0.5)}
    for e in stats["adapters"]:
        assert set(e) == {"key", "name", "bytes", "hits", "active", "scale", "last_used"}
        assert len(e["key"]) == 12 and int(e["key"], 16) >= 0 and e["bytes"] > 0 and isinstance(e["last_used"], float)
    none = _image(eng._ensure_holder(_mc(folder), None))
    assert np.array_equal(none, plain)                        # no LoRA: bit for bit a fresh load
    assert not any(e["active"] for e in p.stats()["adapters"])
    again = _image(eng._ensure_holder(_mc(folder, A), None))
    assert np.array_equal(again, first_a) and p.adapter_loads == 2 and p.adapter_hits == 1
    scaled = _image(eng._ensure_holder(_mc(folder, [{"path": files["a"], "scale": 0.3}]), None))
    assert p.adapter_loads == 2 and not np.array_equal(scaled, first_a)   # a scale change loads nothing
    assert (p.loads, p.misses, eng.builds) == (loads, misses, builds)    # the base components never reload
    assert [e["scale"] for e in p.stats()["adapters"] if e["active"]] == [0.3]
    # the shorthand is the same adapter
    eng._ensure_holder(ModelConfig.from_dict({"arch": "zimage", "name_or_path": folder, "lora_path": files["a"],
                                              "lora_scale": 0.8}), None)
    assert p.adapter_loads == 2 and np.array_equal(_image(eng.holder), first_a)


def test_without_a_budget_no_inactive_adapter_stays(tiny, files):
    """keep_resident_bytes 0 (as for components in release_unused): only the current set stays injected."""
    folder = tiny("zimage")
    eng = WorkerCore(lambda msg: None)
    eng._ensure_holder(_mc(folder, [{"path": files["a"]}]), None)
    eng._ensure_holder(_mc(folder, [{"path": files["b"]}]), None)
    assert [e["name"] for e in eng.pool.stats()["adapters"]] == ["b.safetensors"]
    assert len(eng.holder.pipeline.transformer.peft_config) == 1
    eng._ensure_holder(_mc(folder, [{"path": files["a"]}]), None)
    assert eng.pool.adapter_loads == 3
    eng._ensure_holder(_mc(folder), None)
    assert eng.pool.stats()["adapters"] == [] and not getattr(eng.holder.pipeline.transformer, "peft_config", None)


def test_load_route_applies_loras(tiny, files):
    sent = []
    eng = WorkerCore(sent.append)
    eng.load(ModelConfig.from_dict({"arch": "zimage", "name_or_path": tiny("zimage"),
                                    "loras": [{"path": files["a"], "name": "style"}]}))
    assert [(e["name"], e["active"]) for e in eng.pool.stats()["adapters"]] == [("style", True)]
    assert eng.state().active.loras[0].name == "style"
    assert any("loading LoRA style" in getattr(msg, "text", "") or "loading LoRA style" in str(msg) for msg in sent)


# -- fuse ----------------------------------------------------------------------------------------------
def _base_weights(module) -> dict:
    """The module's own weights, by their names in a fresh load (PEFT's wrappers and adapters left out)."""
    return {k.replace(".base_layer", ""): v for k, v in module.state_dict().items() if ".lora_" not in k}


def test_fuse_is_undone_exactly(tiny, files, plain):
    folder = tiny("zimage")
    eng = WorkerCore(lambda msg: None, keep_resident_gb=1)
    unmerged = _image(eng._ensure_holder(_mc(folder, [{"path": files["a"], "scale": 0.8}]), None))
    fused = _image(eng._ensure_holder(_mc(folder, [{"path": files["a"], "scale": 0.8}], lora_fuse=True), None))
    assert _rel(fused, unmerged) < 0.01      # measured 0 at this size: merging reorders float32 sums only
    again = _image(eng._ensure_holder(_mc(folder, [{"path": files["a"], "scale": 0.8}], lora_fuse=True), None))
    assert np.array_equal(again, fused)      # the same fused request: nothing undone or redone
    eng._ensure_holder(_mc(folder), None)
    fresh = _fresh(folder).pipeline.transformer
    got = _base_weights(eng.holder.pipeline.transformer)
    want = fresh.state_dict()
    assert got.keys() == want.keys() and all(torch.equal(got[k], want[k]) for k in want)
    assert np.array_equal(_image(eng.holder), plain)
    b = _image(eng._ensure_holder(_mc(folder, [{"path": files["b"], "scale": 0.5}], lora_fuse=True), None))
    b_unmerged = _image(eng._ensure_holder(_mc(folder, [{"path": files["b"], "scale": 0.5}]), None))
    assert _rel(b, b_unmerged) < 0.01 and eng.pool.adapter_loads == 2


# -- bad files -----------------------------------------------------------------------------------------
def _rewrite(src, dst, change):
    from safetensors import safe_open
    from safetensors.torch import save_file

    with safe_open(src, "pt") as f:
        tensors, meta = {k: f.get_tensor(k) for k in f.keys()}, f.metadata()
    change(tensors)
    save_file(tensors, str(dst), metadata=meta)
    return str(dst)


def _key_count(path) -> int:
    from safetensors import safe_open

    with safe_open(path, "pt") as f:
        return len(list(f.keys()))


def test_bad_files_name_the_field_and_leave_the_engine_serving(tiny, files, plain, tmp_path):
    folder = tiny("zimage")
    not_st = tmp_path / "text.safetensors"
    not_st.write_text("not a safetensors file")
    data = open(files["a"], "rb").read()
    truncated = tmp_path / "cut.safetensors"
    truncated.write_bytes(data[: len(data) // 2])
    first = "transformer.layers.0.attention.to_q.lora_A.weight"
    extra = _rewrite(files["a"], tmp_path / "extra.safetensors", lambda t: t.update({
        "transformer.layers.7.attention.to_q.lora_A.weight": t[first].clone(),
        "transformer.layers.7.attention.to_q.lora_B.weight": t[first.replace("lora_A", "lora_B")].clone()}))
    wrong_shape = _rewrite(files["a"], tmp_path / "shape.safetensors",
                           lambda t: t.update({first: torch.zeros(t[first].shape[0], t[first].shape[1] + 1)}))
    cases = [(str(not_st), "is not a LoRA file"), (str(truncated), "is not a LoRA file"),
             (files["sd1"], "no weights in sd1.safetensors match"),
             (extra, f"2 of {_key_count(extra)} keys in extra.safetensors match no layer of ZImagePipeline: first "
                     "transformer.layers.7.attention.to_q.lora_A.weight"),
             (wrong_shape, "cannot load shape.safetensors")]
    eng = WorkerCore(lambda msg: None)
    for path, message in cases:
        with pytest.raises(ConfigError) as e:
            eng._ensure_holder(_mc(folder, [{"path": files["b"]}, {"path": path}]), None)
        assert e.value.key == "model.loras[1].path" and message in e.value.message, e.value
        assert not getattr(eng.holder.pipeline.transformer, "peft_config", None) or \
            all(n.startswith("aitk_") for n in eng.holder.pipeline.transformer.peft_config)
        assert all(e["active"] is False for e in eng.pool.stats()["adapters"])
        assert np.array_equal(_image(eng._ensure_holder(_mc(folder), None)), plain)   # still serving, clean
    assert eng.builds == 1


def test_config_errors_name_the_field(tiny, files, tmp_path):
    folder = tiny("zimage")
    for loras, key in [([{"path": files["a"], "weight": 1}], "model.loras[0].weight"),
                       ([{"path": files["a"]}, {"path": files["b"], "scale": "high"}], "model.loras[1].scale"),
                       ([{"path": files["a"]}, {"path": str(tmp_path / "none.safetensors")}], "model.loras[1].path"),
                       ([{"scale": 1.0}], "model.loras[0].path"), ([files["a"]], "model.loras[0]"),
                       ({"path": files["a"]}, "model.loras")]:
        with pytest.raises(ConfigError) as e:
            ModelConfig.from_dict({"arch": "zimage", "name_or_path": folder, "loras": loras})
        assert e.value.key == key, e.value
    with pytest.raises(ConfigError, match="model.lora_path.*no such file"):
        ModelConfig.from_dict({"arch": "zimage", "lora_path": str(tmp_path / "none.safetensors")})
    with pytest.raises(ConfigError, match="model.lora_fuse"):
        ModelConfig.from_dict({"arch": "zimage", "lora_fuse": "yes"})
    with pytest.raises(ConfigError) as e:
        WorkerCore(lambda msg: None)._ensure_holder(_mc(folder, [{"path": files["a"]}, {"path": files["a"]}]), None)
    assert e.value.key == "model.loras[1].path" and "same file" in e.value.message


def test_shorthand_is_the_first_lora_and_round_trips(tiny, files):
    mc = ModelConfig.from_dict({"arch": "zimage", "name_or_path": tiny("zimage"), "lora_path": files["a"],
                                "lora_scale": 0.7, "loras": [{"path": files["b"], "scale": 0.5, "name": "b"}]})
    assert mc.loras == (LoraRef(files["a"], 0.7), LoraRef(files["b"], 0.5, "b")) and mc.lora_path == files["a"]
    assert ModelConfig.from_dict(mc.to_dict()) == mc
    base = mc.without_loras()
    assert base.loras == () and base.lora_path is None and not base.lora_fuse
    assert base == dataclasses.replace(mc, loras=(), lora_path=None, lora_scale=1.0)


def test_file_settings_record_loras_without_paths(tiny, files):
    from toolkit.file_settings import file_metadata, settings_from_metadata

    mc = ModelConfig.from_dict({"arch": "zimage", "name_or_path": tiny("zimage"),
                                "loras": [{"path": files["a"], "scale": 0.8}], "lora_fuse": True})
    meta = file_metadata(mc, _gen())
    assert all(files["a"] not in text for text in meta.values())
    back = settings_from_metadata({"format": "png", **meta})
    assert back["model"]["loras"] == [{"path": "a.safetensors", "scale": 0.8, "name": None}]
    assert back["model"]["lora_fuse"] is True and any(w.startswith("model.loras[0].path") for w in back["warnings"])


# -- quantized models ----------------------------------------------------------------------------------
# Measured at this size (seed 3, two steps), relative error of the quantized model with the LoRA against
# the float32 model with it: qfloat8 0.043, qint8 0.0087 (the quantized base weights are the whole
# difference: the adapters run in float32 beside them); the LoRA's own effect is ~0.15.
QUANT_TOLERANCE = {"qfloat8": 0.08, "qint8": 0.02}


@pytest.mark.parametrize("qtype", sorted(QUANT_TOLERANCE))
def test_lora_on_a_quanto_quantized_transformer(qtype, tiny, files):
    folder = tiny("zimage")
    lora = [{"path": files["a"]}]
    ref = _image(_fresh(folder, loras=lora))
    eng = WorkerCore(lambda msg: None)
    got = _image(eng._ensure_holder(_mc(folder, lora, quantize=True, qtype=qtype), None))
    base = _image(eng._ensure_holder(_mc(folder, quantize=True, qtype=qtype), None))
    assert _rel(got, ref) < QUANT_TOLERANCE[qtype]
    assert _rel(got, base) > 0.1                               # the adapter is there
    with pytest.raises(ConfigError) as e:
        eng._ensure_holder(_mc(folder, lora, quantize=True, qtype=qtype, lora_fuse=True), None)
    assert e.value.key == "model.lora_fuse" and "quantized transformer" in e.value.message
    assert np.array_equal(_image(eng._ensure_holder(_mc(folder, quantize=True, qtype=qtype), None)), base)


# Krea 2 from ComfyUI scaled-FP8 files: each FP8 Linear is wrapped by PEFT, the adapter in float32 beside it.
# Measured: 0.049 against the float32 diffusers folder with the same LoRA (the FP8 base alone: 0.056,
# test_krea2.py allows 0.06); the LoRA's effect is ~0.44.
KREA2_TOLERANCE = 0.08


def test_lora_on_krea2_scaled_fp8(tmp_path_factory):
    from peft.tuners.lora import LoraLayer

    from testing.tiny_krea2 import cached_tiny_krea2
    from toolkit.models.formats.scaled_fp8 import ScaledFp8Linear

    k = cached_tiny_krea2(tmp_path_factory.mktemp("krea2"), 0)
    lora = str(make_tiny_lora("krea2", k["pipeline"], tmp_path_factory.mktemp("kl") / "k.safetensors", seed=1))
    comfy = {"arch": "krea2", "variant": "turbo", "local_only": True,
             "components": {"transformer": k["diffusion_model"], "text_encoder": k["text_encoder"],
                            "vae": k["vae"], "tokenizer": k["tokenizer"]}}
    eng = WorkerCore(lambda msg: None)
    base = _image(eng._ensure_holder(ModelConfig.from_dict(comfy), None), "krea2")
    got = _image(eng._ensure_holder(ModelConfig.from_dict({**comfy, "loras": [{"path": lora}]}), None), "krea2")
    wrapped = [m for m in eng.holder.pipeline.transformer.modules() if isinstance(m, LoraLayer)]
    assert wrapped and all(isinstance(m.get_base_layer(), ScaledFp8Linear) for m in wrapped)
    assert all(p.dtype == torch.float32 for m in wrapped for p in m.lora_A.parameters())
    ref = _image(_fresh(k["pipeline"], "krea2", variant="turbo", loras=[{"path": lora}]), "krea2")
    assert _rel(got, ref) < KREA2_TOLERANCE and _rel(got, base) > 0.2
    with pytest.raises(ConfigError, match="model.lora_fuse.*ScaledFp8Linear"):
        eng._ensure_holder(ModelConfig.from_dict({**comfy, "loras": [{"path": lora}], "lora_fuse": True}), None)
    assert np.array_equal(_image(eng._ensure_holder(ModelConfig.from_dict(comfy), None), "krea2"), base)

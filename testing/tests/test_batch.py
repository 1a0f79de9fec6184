"""Batches (`sample.batch_size`): N outputs in one pipeline pass, a CPU generator per item (seed + i),
each its own file, result frame and seed. Item i equals a batch-of-1 run with seed + i within one
level of the written format (8-bit pixels, 16-bit PCM): batched matmuls round float32 low bits
differently, nothing more. Every arch whose pipeline batches is run (contract style); the others
refuse batch_size > 1 with a 422."""
from dataclasses import replace
import os

import numpy as np
import pytest
import torch

from testing.fixtures import input_image
from toolkit.config_modules import GenerateImageConfig, ModelConfig
from toolkit.errors import ConfigError
from toolkit.models.base_model import batch_paths, get_model_class
from toolkit.models.registry import ARCHS

FILE_EXT = {"image": "png", "video": "mp4", "audio": "wav"}
BATCHED = [a for a in ARCHS if ARCHS[a].batch_arg]
SINGLE = [a for a in ARCHS if not ARCHS[a].batch_arg]
N = 3


def _sample(arch, tmp_path, **over) -> dict:
    spec = ARCHS[arch]
    s = {**spec.tiny.sample, "prompt": "a small test prompt", "seed": 1234, "output_ext": FILE_EXT[spec.modality]}
    for name in spec.needed_inputs:
        s[name] = input_image(tmp_path / f"{name}.png", s.get("width") or 64, s.get("height") or 64)
    s.update(over)
    return s


def _levels(item, modality) -> np.ndarray:
    """An output in the integer levels its file stores: 8-bit pixels, 16-bit PCM samples."""
    if modality == "image":
        return np.asarray(item.convert("RGB"), dtype=np.int64)
    if modality == "video":
        return np.round(np.clip(np.asarray(item, dtype=np.float64), 0, 1) * 255).astype(np.int64)
    x = item.float().numpy() if isinstance(item, torch.Tensor) else np.asarray(item)
    return np.round(np.clip(x, -1, 1) * 32767).astype(np.int64)


def _holder(tiny, arch):
    h = get_model_class(arch)({"arch": arch, "name_or_path": tiny(arch), "local_only": True}, device="cpu")
    return h.load_model()


@pytest.mark.parametrize("arch", BATCHED)
def test_item_i_of_a_batch_is_the_batch_of_one_with_seed_plus_i(arch, tiny, tmp_path):
    spec = ARCHS[arch]
    holder = _holder(tiny, arch)
    gen = GenerateImageConfig.from_dict(_sample(arch, tmp_path, batch_size=N), holder.model_config)
    steps = []
    batch = holder.generate_single(gen, on_step=lambda i, n, t, lat, x0: steps.append((i, n, lat.shape[0])))
    assert isinstance(batch, list) and len(batch) == N
    n = steps[-1][1]
    assert steps == [(i, n, N) for i in range(n)], "one pass: the hook fires once per timestep, latents of N items"
    singles = [holder.generate_single(GenerateImageConfig.from_dict(_sample(arch, tmp_path, seed=1234 + i),
                                                                    holder.model_config)) for i in range(N)]
    for i, (b, s) in enumerate(zip(batch, singles)):
        got, want = _levels(b, spec.modality), _levels(s, spec.modality)
        assert got.shape == want.shape
        assert np.abs(got - want).max() <= 1, f"item {i} differs from seed {1234 + i} alone by more than a level"
    assert np.abs(_levels(singles[0], spec.modality) - _levels(singles[1], spec.modality)).max() > 1, \
        "seeds 1234 and 1235 made the same output: the test could not tell items apart"


@pytest.mark.parametrize("arch", ["zimage", "wan21", "stable_audio"])
def test_a_batch_writes_one_file_and_record_per_item(arch, tiny, tmp_path):
    holder = _holder(tiny, arch)
    gen = GenerateImageConfig.from_dict(_sample(arch, tmp_path, batch_size=2, seed=77), holder.model_config)
    out_path = str(tmp_path / f"req.{gen.output_ext}")
    records = holder.generate_images([gen], paths=[out_path])
    assert [r["path"] for r in records] == batch_paths(out_path, 2) == \
        [str(tmp_path / f"req-{i}.{gen.output_ext}") for i in range(2)]
    assert [r["seed"] for r in records] == [77, 78] and not os.path.exists(out_path)
    assert all(os.path.getsize(r["path"]) == r["bytes"] > 0 for r in records)
    with open(records[0]["path"], "rb") as f0, open(records[1]["path"], "rb") as f1:
        assert f0.read() != f1.read()


def test_a_cancel_between_items_keeps_no_file_of_the_batch(tiny, tmp_path):
    holder = _holder(tiny, "zimage")
    gen = GenerateImageConfig.from_dict(_sample("zimage", tmp_path, batch_size=2), holder.model_config)
    out_path = str(tmp_path / "req.png")
    asked = []

    class Stop(Exception):
        pass

    def cancel():      # asked after sampling, then before each file is moved into place: stop at item 1's
        asked.append(1)
        if len(asked) == 3:
            raise Stop()
    with pytest.raises(Stop):
        holder.generate_images([gen], paths=[out_path], cancel=cancel)
    assert len(asked) == 3 and not [n for n in os.listdir(tmp_path) if n.startswith("req")], os.listdir(tmp_path)


@pytest.mark.parametrize("arch", SINGLE)
def test_archs_whose_pipeline_makes_one_refuse_a_batch(arch):
    spec = ARCHS[arch]
    sample = {**{name: "x.png" for name in spec.needed_inputs}, **spec.tiny.sample}     # an i2v-only arch's image
    with pytest.raises(ConfigError) as e:
        GenerateImageConfig.from_dict({**sample, "batch_size": 2}, arch)
    assert e.value.key == "sample.batch_size" and "batch_size must be 1" in e.value.message
    GenerateImageConfig.from_dict({**sample, "batch_size": 1}, arch)


def test_batch_size_must_be_a_positive_integer():
    for bad in (0, -1, 1.5, "2", True):
        with pytest.raises(ConfigError) as e:
            GenerateImageConfig.from_dict({"batch_size": bad}, "zimage")
        assert e.value.key == "sample.batch_size", bad
    assert GenerateImageConfig.from_dict({"batch_size": 4}, "zimage").to_dict()["batch_size"] == 4


def test_memory_preflight_counts_the_batch():
    from extensions_built_in.inference_engine.admission import check_memory
    from toolkit.models.base_model import BaseModel

    mc = ModelConfig.from_dict({"arch": "sdxl", "name_or_path": "x/y"})
    # the whole decode's floor (vae_tiling auto would count a tiled decode's, test_vae_tiling)
    gen = GenerateImageConfig.from_dict({"vae_tiling": "off"}, mc)
    one = BaseModel.estimate_activation_bytes(mc, gen, device="cuda", batch=1)
    assert BaseModel.estimate_activation_bytes(mc, gen, device="cuda", batch=4) == 4 * one
    memory = {"device": "cuda", "total": 2 * one}
    check_memory(mc, gen, memory)
    gen = replace(gen, batch_size=2)
    check_memory(mc, gen, memory)
    gen = replace(gen, batch_size=3)
    with pytest.raises(ConfigError) as e:
        check_memory(mc, gen, memory)
    assert e.value.key == "sample.batch_size" and "in a batch of 3" in e.value.message
    big = GenerateImageConfig.from_dict({"width": 8192, "height": 8192, "batch_size": 2, "vae_tiling": "off"}, mc)
    with pytest.raises(ConfigError) as e:
        check_memory(mc, big, memory)
    assert e.value.key == "sample.width", "one alone does not fit: the size is what is too large"


# -- the engine ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def eng(tiny, tmp_path_factory):
    from testing.engine_client import InProcessEngine
    e = InProcessEngine(str(tmp_path_factory.mktemp("batch")), token="t")
    e.tiny = tiny
    yield e
    e.close()


def _body(eng, rid, arch="zimage", **sample):
    return {"model": {"arch": arch, "name_or_path": eng.tiny(arch)}, "request_id": rid,
            "sample": {"prompt": "a fox", "width": 64, "height": 64, "num_inference_steps": 3, "seed": 5, **sample}}


def test_engine_streams_a_batch_in_one_pass(eng):
    frames = eng.client.stream(_body(eng, "b1", batch_size=2))
    types = [h["type"] for h, _ in frames]
    assert types.count("progress") == 3 and types.count("latent") == 3 and types.count("result") == 2
    latents = [(h, p) for h, p in frames if h["type"] == "latent"]
    h, payload = latents[-1]
    arr = np.frombuffer(payload, dtype="<f2").reshape(h["shape"])
    assert arr.shape == (2, 16, 8, 8) and not np.array_equal(arr[0], arr[1])     # both items, distinct
    results = [h for h, _ in frames if h["type"] == "result"]
    assert [(r["relpath"], r["seed"], r["index"]) for r in results] == [("b1-0.png", 5, 0), ("b1-1.png", 6, 1)]
    for r in results:
        got = eng.client.get(r["url"])
        assert got.status_code == 200 and len(got.content) == r["bytes"]
    assert frames[0][0]["sample"]["batch_size"] == 2 and frames[-1][0]["status"] == "ok"


def test_batch_names_never_overwrite_a_file(eng):
    folder = eng.engine.output_folder
    with open(os.path.join(folder, "b2-1.png"), "wb") as f:
        f.write(b"keep me")
    frames = eng.client.stream(_body(eng, "b2", batch_size=2))
    names = [h["relpath"] for h, _ in frames if h["type"] == "result"]
    assert len(names) == 2 and "b2-1.png" not in names and len(set(names)) == 2
    with open(os.path.join(folder, "b2-1.png"), "rb") as f:
        assert f.read() == b"keep me"


def test_engine_refuses_a_batch_the_arch_cannot_make(eng):
    r = eng.client.post("/generate", json={"model": {"arch": "ace_step", "name_or_path": "tiny:ace_step"},
                                           "sample": {"prompt": "x", "duration": 1.0, "batch_size": 2}})
    assert r.status_code == 422 and r.json()["field"] == "sample.batch_size", r.text
    r = eng.client.post("/generate", json=_body(eng, "b3", batch_size=17))
    assert r.status_code == 422 and r.json()["field"] == "sample.batch_size" and "max_batch (16)" in r.text

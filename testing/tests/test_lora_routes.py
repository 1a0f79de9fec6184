"""engine.lora_folder on the wire: GET /loras (header-only listing, arch filter), relative LoRA paths
of a request resolved under the folder and refused when they leave it (model.lora_path and
model.loras[i].path, named like that), and on the A1111 routes `<lora:name:weight>` in a prompt and
/sdapi/v1/loras.

The prompt-syntax tests check both the request the compat layer builds (its model dict with `loras`,
the prompt without the tags) and the picture: a tag generates with its LoRA, loading only the adapter."""
import asyncio
import shutil

import httpx
import pytest

from extensions_built_in.inference_engine.compat.a1111 import A1111
from testing.engine_client import InProcessEngine
from testing.tests.test_compat import TOKEN as COMPAT_TOKEN, Served, sillytavern_body
from toolkit.errors import ConfigError
from toolkit.models.tiny.loras import write_tiny_lora

TOKEN = "lora-token-123"


def lora_folder(root, tiny):
    """style/a (sd1, kohya), b (sd1, peft), flux/c (flux, ComfyUI), broken (a truncated header)."""
    folder = root / "loras"
    write_tiny_lora("sd1", tiny("sd1"), folder / "style" / "a.safetensors", fmt="kohya")
    write_tiny_lora("sd1", tiny("sd1"), folder / "b.safetensors", seed=1)
    write_tiny_lora("flux", tiny("flux"), folder / "flux" / "c.safetensors", fmt="comfyui")
    (folder / "broken.safetensors").write_bytes(b"\x10\x00")
    return folder


@pytest.fixture(scope="module")
def served(tiny, tmp_path_factory):
    root = tmp_path_factory.mktemp("lora_routes")
    folder = lora_folder(root, tiny)
    outside = root / "elsewhere"
    outside.mkdir()
    shutil.copy(folder / "b.safetensors", outside / "b.safetensors")
    eng = InProcessEngine(str(root), token=TOKEN, lora_folder=str(folder),
                          model_roots=[str(root / "outputs"), tiny("sd1")])
    eng.folder, eng.outside = folder, outside
    yield eng
    eng.close()


def _get(served, path, **kw):
    return httpx.get(served.url + path, headers={"X-Engine-Token": TOKEN}, timeout=60, **kw)


def test_get_loras_lists_the_folder_from_headers(served):
    r = _get(served, "/loras")
    assert r.status_code == 200
    body = r.json()
    assert body["folder"] == str(served.folder)
    by_name = {d["name"]: d for d in body["loras"]}
    assert set(by_name) == {"style/a", "b", "flux/c", "broken"}
    assert (by_name["style/a"]["format"], by_name["style/a"]["arch"], by_name["style/a"]["trigger_words"]) == (
        "kohya", "sd1", ["a_style"])
    assert (by_name["flux/c"]["format"], by_name["flux/c"]["arch"]) == ("comfyui", "flux")
    assert by_name["b"]["path"] == "b.safetensors" and by_name["b"]["rank"] == 4
    assert "error" in by_name["broken"] and "format" not in by_name["broken"]


def test_get_loras_by_arch_keeps_unclaimed_files(served):
    names = {d["name"] for d in _get(served, "/loras", params={"arch": "sd1"}).json()["loras"]}
    assert names == {"style/a", "b", "broken"}
    assert {d["name"] for d in _get(served, "/loras", params={"arch": "flux"}).json()["loras"]} == {"flux/c", "broken"}
    r = _get(served, "/loras", params={"arch": "nope"})
    assert r.status_code == 422 and r.json()["field"] == "arch"
    assert httpx.get(served.url + "/loras", timeout=30).status_code == 401


def test_relative_lora_paths_resolve_under_the_folder(served, tiny):
    engine = served.engine
    model = {"arch": "sd1", "name_or_path": tiny("sd1"), "lora_path": "style/a.safetensors",
             "loras": [{"path": "b.safetensors", "scale": 0.5}, {"path": str(served.folder / "flux" / "c.safetensors")}]}
    from extensions_built_in.inference_engine import lora_folder as lf
    out = lf.resolve_paths(model, engine.lora_folder)
    assert out["lora_path"] == str(served.folder / "style" / "a.safetensors")
    assert out["loras"][0] == {"path": str(served.folder / "b.safetensors"), "scale": 0.5}
    assert out["loras"][1]["path"] == str(served.folder / "flux" / "c.safetensors")
    assert model["lora_path"] == "style/a.safetensors"          # the request's own dict is left alone
    engine.check_paths(out)                                     # the folder is a model root


@pytest.mark.parametrize("model,key,why", [
    ({"lora_path": "../elsewhere/b.safetensors"}, "model.lora_path", "leaves the LoRA folder"),
    ({"loras": [{"path": "b.safetensors"}, {"path": "style/../../x.safetensors"}]}, "model.loras[1].path",
     "leaves the LoRA folder"),
    ({"loras": [{"path": "OUTSIDE"}]}, "model.loras[0].path", "engine.model_roots"),
    ({"lora_path": "OUTSIDE"}, "model.lora_path", "engine.model_roots"),
])
def test_paths_that_leave_the_folder_or_the_roots_are_refused(served, tiny, model, key, why):
    model = {"arch": "sd1", "name_or_path": tiny("sd1"), **model}
    outside = str(served.outside / "b.safetensors")
    if model.get("lora_path") == "OUTSIDE":
        model["lora_path"] = outside
    if model.get("loras") and model["loras"][0]["path"] == "OUTSIDE":
        model["loras"][0]["path"] = outside
    with pytest.raises(ConfigError) as e:
        served.engine.submit(model, {"prompt": "x"})
    assert e.value.key == key and why in e.value.message


def test_a_relative_lora_path_generates(served, tiny):
    r = served.client.post("/generate", json={
        "model": {"arch": "sd1", "name_or_path": tiny("sd1"), "lora_path": "b.safetensors"},
        "sample": {"prompt": "a fox", "width": 64, "height": 64, "num_inference_steps": 2}, "wait": True})
    assert r.status_code == 200 and r.json()["status"] == "ok", r.text


@pytest.mark.parametrize("model,key,why", [
    ({"loras": [{"path": "b.safetensors"}, {"path": "broken.safetensors"}]}, "model.loras[1].path",
     "broken.safetensors: too short to be a safetensors file"),
    ({"loras": [{"path": "flux/c.safetensors"}]}, "model.loras[0].path", "c.safetensors is a LoRA for flux"),
    ({"lora_path": "flux/c.safetensors", "loras": [{"path": "b.safetensors"}]}, "model.lora_path", "for flux"),
    ({"lora_path": "b.safetensors", "loras": [{"path": "TEXT"}]}, "model.loras[0].path", "not a safetensors file"),
    ({"loras": [{"path": "CUT"}]}, "model.loras[0].path", "lies outside the file"),
])
def test_bad_lora_files_are_a_422_before_queueing(served, tiny, model, key, why):
    """Unreadable, truncated and other archs' files are refused from their headers, naming the key the
    request used, and the engine goes on serving."""
    text, cut = served.folder / "notes.safetensors", served.folder / "cut.safetensors"
    text.write_text("these are my LoRA notes, not a LoRA")
    data = (served.folder / "b.safetensors").read_bytes()
    cut.write_bytes(data[: len(data) - 100])
    for entry in model.get("loras", []):
        entry["path"] = {"TEXT": text.name, "CUT": cut.name}.get(entry["path"], entry["path"])
    try:
        r = served.client.post("/generate", json={
            "model": {"arch": "sd1", "name_or_path": tiny("sd1"), **model},
            "sample": {"prompt": "a fox", "width": 64, "height": 64, "num_inference_steps": 2}, "wait": True})
    finally:
        text.unlink()
        cut.unlink()
    assert r.status_code == 422, r.text
    assert r.json()["field"] == key and why in r.json()["detail"], r.text
    assert str(served.folder) not in r.text                    # the error names the file, not where it lies
    ok = served.client.post("/generate", json={
        "model": {"arch": "sd1", "name_or_path": tiny("sd1"), "loras": [{"path": "b.safetensors"}]},
        "sample": {"prompt": "a fox", "width": 64, "height": 64, "num_inference_steps": 2}, "wait": True})
    assert ok.status_code == 200 and ok.json()["status"] == "ok", ok.text


# -- A1111 -------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def compat(tiny, tmp_path_factory):
    root = tmp_path_factory.mktemp("lora_compat")
    s = Served(root, tiny, lora_folder=str(lora_folder(root, tiny)))
    yield s
    s.close()


def test_prompt_tags_become_model_loras(compat):
    api = A1111(compat.route.session)
    body = sillytavern_body(prompt="a fox <lora:a:0.8>, snow <lora:b> <LORA:style/a:0.2:1.0>",
                            override_settings={"sd_model_checkpoint": "tiny-sd1"})
    call = asyncio.run(api._call(body))
    assert call.model["arch"] == "sd1"
    assert call.model["loras"] == [{"path": "style/a.safetensors", "scale": pytest.approx(1.0)},
                                   {"path": "b.safetensors", "scale": 1.0}]
    assert call.sample["prompt"] == "a fox , snow"
    assert call.prompt == body["prompt"]          # the infotext keeps what the client sent
    plain = asyncio.run(api._call(sillytavern_body(override_settings={"sd_model_checkpoint": "tiny-sd1"})))
    assert "loras" not in plain.model


def test_a_prompt_tag_generates_with_its_lora(compat):
    import base64
    import io

    import numpy as np
    from PIL import Image

    def pixels(prompt):
        r = compat.http.post("/sdapi/v1/txt2img", json=sillytavern_body(
            prompt=prompt, steps=2, override_settings={"sd_model_checkpoint": "tiny-sd1"}))
        assert r.status_code == 200, r.text
        return np.asarray(Image.open(io.BytesIO(base64.b64decode(r.json()["images"][0]))).convert("RGB"))

    plain = pixels("a fox")
    pool = compat.engine.health()["pool"]
    tagged = pixels("a fox <lora:b:0.8>")
    after = compat.engine.health()["pool"]
    assert not np.array_equal(tagged, plain)
    # the resident sd1 served it: no component loaded, one adapter did, and it is the active one
    assert (after["loads"], after["adapter_loads"]) == (pool["loads"], pool["adapter_loads"] + 1)
    assert [(a["name"], a["scale"]) for a in after["adapters"] if a["active"]] == [("b.safetensors", 0.8)]
    assert np.array_equal(pixels("a fox"), plain)  # the tag's LoRA is gone with the tag


@pytest.mark.parametrize("prompt,why", [("a <lora:nope:1>", "no LoRA named 'nope'"),
                                        ("a <lora:b:heavy>", "must be a number")])
def test_a_bad_prompt_tag_is_a_422_naming_prompt(compat, prompt, why):
    r = compat.http.post("/sdapi/v1/txt2img", json=sillytavern_body(prompt=prompt))
    assert r.status_code == 422
    detail = r.json()["detail"][0]
    assert detail["loc"] == ["body", "prompt"] and why in detail["msg"]


def test_sdapi_loras_lists_the_folder(compat):
    r = compat.http.get("/sdapi/v1/loras")
    assert r.status_code == 200
    by_name = {d["name"]: d for d in r.json()}
    assert set(by_name) == {"style/a", "b", "flux/c", "broken"}
    a = by_name["style/a"]
    assert a["alias"] == "a" and a["path"].endswith("/style/a.safetensors")
    assert a["metadata"]["ss_network_dim"] == "4" and by_name["b"]["alias"] == "b"
    assert compat.http.post("/sdapi/v1/refresh-loras").status_code == 200
    assert httpx.get(compat.url + "/sdapi/v1/loras", timeout=30).status_code == 401
    assert COMPAT_TOKEN


# -- engine.lora_folder in the InferenceEngine config -----------------------------------------------

def test_engine_lora_folder_config(tmp_path):
    from types import SimpleNamespace

    from extensions_built_in.inference_engine.InferenceEngine import InferenceEngine

    def make(**engine):
        return InferenceEngine(0, SimpleNamespace(name="loras"),
                               {"type": "InferenceEngine", "engine": {"job_folder": str(tmp_path / "job"), **engine}})
    (tmp_path / "loras").mkdir()
    assert make().settings.lora_folder is None
    assert make(lora_folder=str(tmp_path / "loras")).settings.lora_folder == str(tmp_path / "loras")
    for bad in (str(tmp_path / "missing"), 5):
        with pytest.raises(ConfigError) as e:
            make(lora_folder=bad)
        assert e.value.key == "engine.lora_folder"

"""FLUX.1 Canny/Depth [dev] (arch flux_control): the checkpoint is the model, its control map `ctrl_img`.
Over HTTP on the tiny instance (a FLUX.1 transformer with 128 input channels): the output equals diffusers'
FluxControlPipeline with `control_image` by hand, bit for bit on CPU float32; the folder is told from its
model_index.json (a single file from its 128 input channels: test_files_denoisers.py); a request without the map, or with ControlNets, is a 422 naming the field."""
import base64
import io

import numpy as np
import pytest
import torch
from PIL import Image

from testing.engine_client import InProcessEngine
from testing.fixtures import input_image

TOKEN = "flux-control-token"
SAMPLE = {"prompt": "a red fox", "width": 64, "height": 64, "num_inference_steps": 2, "seed": 7,
          "guidance_scale": 30.0}


@pytest.fixture(scope="module")
def eng(tiny, tmp_path_factory):
    root = tmp_path_factory.mktemp("flux_control")
    e = InProcessEngine(str(root / "engine"), token=TOKEN, model_roots=[str(root), tiny("flux_control")])
    input_image(root / "canny.png", 80, 48)
    e.map = root / "canny.png"       # another size than the request's: the pipeline resizes
    yield e
    e.close()


def _data_url(path) -> str:
    with open(path, "rb") as f:
        return "data:image/png;base64," + base64.b64encode(f.read()).decode()


def _generate(eng, model, sample) -> np.ndarray:
    r = eng.client.post("/generate", json={"model": model, "sample": sample, "wait": True})
    assert r.status_code == 200 and r.json()["status"] == "ok", r.text
    with Image.open(io.BytesIO(eng.client.get(r.json()["results"][0]["url"]).content)) as im:
        return np.asarray(im.convert("RGB"))


def test_the_checkpoint_with_its_map_equals_flux_control_pipeline(eng, tiny):
    from diffusers import FluxControlPipeline

    folder = tiny("flux_control")
    got = _generate(eng, {"arch": "flux_control", "name_or_path": folder}, {**SAMPLE, "ctrl_img": _data_url(eng.map)})
    pipe = FluxControlPipeline.from_pretrained(folder, local_files_only=True, dtype=torch.float32)
    pipe.set_progress_bar_config(disable=True)
    out = pipe(prompt=SAMPLE["prompt"], control_image=Image.open(eng.map).convert("RGB"), width=64, height=64,
               num_inference_steps=2, guidance_scale=30.0, generator=torch.Generator("cpu").manual_seed(SAMPLE["seed"]))
    assert np.array_equal(got, np.asarray(out.images[0].convert("RGB")))
    other = eng.map.parent / "flipped.png"       # another map, another picture: the map reaches the transformer
    Image.open(eng.map).transpose(Image.FLIP_LEFT_RIGHT).save(other)
    assert not np.array_equal(got, _generate(eng, {"arch": "flux_control", "name_or_path": folder},
                                             {**SAMPLE, "ctrl_img": _data_url(other)}))


def test_the_folder_is_told_from_its_pipeline(tiny, tmp_path):
    """A repo folder (model_index.json: FluxControlPipeline) is a flux_control model, not FLUX.1 [dev]."""
    from toolkit.library import scan_folder

    import os
    import shutil

    folder = tmp_path / "FLUX.1-Canny-dev"
    shutil.copytree(tiny("flux_control"), folder)
    entry = next(e for e in scan_folder(str(tmp_path)) if os.path.realpath(e["path"]) == os.path.realpath(folder))
    assert entry["arch"] == "flux_control", entry


@pytest.mark.parametrize("sample,field,why", [
    ({}, "sample.ctrl_img", ""),
    ({"ctrl_img": "MAP", "controls": [{"model": "x.safetensors", "image": "MAP"}]}, "sample.controls", "no control models"),
])
def test_refusals_name_the_field(eng, tiny, sample, field, why):
    sample = {k: (_data_url(eng.map) if v == "MAP" else v) for k, v in sample.items()}
    if "controls" in sample:
        sample["controls"] = [{**c, "image": _data_url(eng.map)} for c in sample["controls"]]
    r = eng.client.post("/generate", json={"model": {"arch": "flux_control", "name_or_path": tiny("flux_control")},
                                           "sample": {**SAMPLE, **sample}, "wait": True})
    assert r.status_code == 422 and field in r.text and why in r.text, r.text


def test_the_variants_take_their_model_cards_defaults():
    from toolkit.config_modules import GenerateImageConfig, ModelConfig

    canny = GenerateImageConfig.from_dict({"ctrl_img": "x.png"}, ModelConfig.from_dict(
        {"arch": "flux_control", "name_or_path": "x/y", "variant": "canny"}))
    depth = GenerateImageConfig.from_dict({"ctrl_img": "x.png"}, ModelConfig.from_dict(
        {"arch": "flux_control", "name_or_path": "x/y", "variant": "depth"}))
    assert (canny.num_inference_steps, canny.guidance_scale, canny.task) == (50, 30.0, "edit")
    assert (depth.num_inference_steps, depth.guidance_scale) == (30, 10.0)

"""The ControlNet extension's API on the A1111 routes: `alwayson_scripts.controlnet.args` units (as the
extension's API examples send them) become `sample.controls`; `/controlnet/model_list` lists the A1111
tree's models/ControlNet; unknown models and modules are a 422 naming the unit's field."""
import base64
import io

import numpy as np
import pytest
from PIL import Image

from testing.fixtures import input_image
from testing.tests.test_compat import Served, sillytavern_body
from toolkit.models.tiny.controlnets import write_tiny_controlnet


@pytest.fixture(scope="module")
def compat(tiny, tmp_path_factory):
    root = tmp_path_factory.mktemp("cn_compat")
    cn = root / "webui" / "models" / "ControlNet"
    (root / "webui" / "models" / "Stable-diffusion").mkdir(parents=True)
    write_tiny_controlnet("sd1", tiny("sd1"), cn / "control_tiny_sd15.safetensors", "original")
    write_tiny_controlnet("sdxl", tiny("sdxl"), cn / "control_tiny_sdxl.safetensors", "file")
    s = Served(root, tiny, model_folders=[str(root / "webui")])
    with open(input_image(root / "control.png"), "rb") as f:
        s.image = base64.b64encode(f.read()).decode()
    yield s
    s.close()


def unit(compat, **over) -> dict:
    """A unit as the extension's API example (its wiki's txt2img example) writes it."""
    return {"enabled": True, "input_image": compat.image, "module": "none", "model": "control_tiny_sd15 [a1b2c3d4]",
            "weight": 0.8, "resize_mode": "Crop and Resize", "lowvram": False, "processor_res": -1,
            "threshold_a": -1, "threshold_b": -1, "guidance_start": 0.0, "guidance_end": 1.0,
            "control_mode": "Balanced", "pixel_perfect": False, **over}


def txt2img(compat, units=None, **over):
    body = sillytavern_body(steps=2, override_settings={"sd_model_checkpoint": "tiny-sd1"}, **over)
    if units is not None:
        body["alwayson_scripts"] = {"controlnet": {"args": units}}
    return compat.http.post("/sdapi/v1/txt2img", json=body)


def pixels(r) -> np.ndarray:
    assert r.status_code == 200, r.text
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(r.json()["images"][0]))).convert("RGB"))


def test_model_list_names_the_controlnet_folder(compat):
    r = compat.http.get("/controlnet/model_list")
    assert r.status_code == 200
    assert r.json() == {"model_list": ["control_tiny_sd15", "control_tiny_sdxl"]}


def test_a_unit_runs_its_controlnet_loading_only_it(compat):
    plain = pixels(txt2img(compat, []))
    before = compat.engine.health()["pool"]
    controlled = pixels(txt2img(compat, [unit(compat)]))
    after = compat.engine.health()["pool"]
    assert not np.array_equal(plain, controlled)
    assert after["loads"] - before["loads"] == 1            # the controlnet alone
    disabled = pixels(txt2img(compat, [unit(compat, enabled=False), unit(compat, model="None")]))
    assert np.array_equal(disabled, plain)
    # the same unit by the image key of newer versions, resize by number: the same picture
    again = pixels(txt2img(compat, [unit(compat, input_image=None, image=compat.image, resize_mode=1)]))
    assert np.array_equal(again, controlled)


def test_a_unit_s_module_makes_its_map(compat):
    """The extension's module names and labels run our preprocessors; a slider past its range is held to it, as
    the extension takes any value (a threshold of 10**6 runs at canny's maximum)."""
    plain = pixels(txt2img(compat, [unit(compat)]))
    canny = pixels(txt2img(compat, [unit(compat, module="canny", processor_res=64, threshold_a=64, threshold_b=64)]))
    inverted = pixels(txt2img(compat, [unit(compat, module="invert (from white bg & black line)")]))
    assert not np.array_equal(plain, canny) and not np.array_equal(plain, inverted)
    big = pixels(txt2img(compat, [unit(compat, module="canny", processor_res=64, threshold_a=64, threshold_b=10 ** 6)]))
    assert big.shape == canny.shape


@pytest.mark.parametrize("over,field", [
    ({"model": "control_nope [00000000]"}, "alwayson_scripts.controlnet.args[0].model"),
    ({"model": "control_tiny_sdxl"}, "alwayson_scripts.controlnet.args[0].model"),     # another arch's
    ({"module": "nope"}, "alwayson_scripts.controlnet.args[0].module"),
    ({"input_image": None}, "alwayson_scripts.controlnet.args[0].image"),
    ({"input_image": "not base64!"}, "alwayson_scripts.controlnet.args[0].input_image"),
    ({"weight": -2}, "alwayson_scripts.controlnet.args[0].weight"),
    ({"guidance_start": 0.9, "guidance_end": 0.1}, "alwayson_scripts.controlnet.args[0].guidance_end"),
    ({"resize_mode": 7}, "alwayson_scripts.controlnet.args[0].resize_mode"),
])
def test_bad_units_are_a_422_naming_the_field(compat, over, field):
    r = txt2img(compat, [unit(compat, **over)])
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["msg"].startswith(field + ":"), r.json()

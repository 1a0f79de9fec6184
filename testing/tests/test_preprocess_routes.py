"""POST /preprocess and the sd-webui-controlnet routes (/controlnet/module_list, /controlnet/detect) over HTTP,
against a real engine (thread worker) whose model folder holds the tiny Depth Anything; the maps equal the
library's own (toolkit/control_maps.make_map, itself tested against opencv and transformers), the bad values
are 422s naming the field, and the engine's HTTP process stays torch-free (run.py)."""
import base64
import io

import numpy as np
import pytest
from PIL import Image

from extensions_built_in.inference_engine.compat import compat_routes
from testing.engine_client import InProcessEngine
from toolkit.control_maps import make_map

TOKEN = "test-token-123"


def picture(w=96, h=64) -> Image.Image:
    rng = np.random.RandomState(1)
    a = np.zeros((h, w, 3), np.uint8)
    a[:, : w // 2] = (220, 40, 40)
    a[h // 3:, w // 3:] = (20, 200, 240)
    return Image.fromarray(np.clip(a.astype(int) + rng.randint(-6, 7, a.shape), 0, 255).astype(np.uint8))


def png_bytes(im) -> bytes:
    buf = io.BytesIO()
    im.save(buf, format="PNG")
    return buf.getvalue()


def data_url(im) -> str:
    return "data:image/png;base64," + base64.b64encode(png_bytes(im)).decode()


def decoded(raw: bytes) -> np.ndarray:
    assert raw[:8] == b"\x89PNG\r\n\x1a\n"
    return np.asarray(Image.open(io.BytesIO(raw)).convert("RGB"))


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """A model folder holding the tiny Depth Anything only (no DPT: depth_midas has no model here)."""
    from toolkit.models.tiny.annotators import write_tiny_annotator
    root = tmp_path_factory.mktemp("models")
    write_tiny_annotator("depth_anything", root / "annotators" / "depth-anything-small-hf")
    return root


@pytest.fixture(scope="module")
def srv(models, tmp_path_factory):
    import huggingface_hub.constants
    hub = pytest.MonkeyPatch()          # an empty hub cache: what is found is the model folder's
    hub.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path_factory.mktemp("hub")))
    s = InProcessEngine(str(tmp_path_factory.mktemp("engine")), token=TOKEN, extra_routes=[compat_routes()],
                        model_folders=[str(models)])
    yield s
    s.close()
    hub.undo()


def loader(models):
    from toolkit import annotators
    return lambda key: annotators.load(key, [str(models)])


def test_preprocess_returns_the_map_as_png_or_a_data_url(srv):
    im = picture()
    r = srv.client.post("/preprocess", json={"image": data_url(im), "preprocessor": "canny", "processor_res": 128,
                                             "threshold_a": 60, "threshold_b": 120})
    assert r.status_code == 200 and r.headers["content-type"] == "image/png"
    want = np.asarray(make_map("canny", im, resolution=128, threshold_a=60, threshold_b=120))
    np.testing.assert_array_equal(decoded(r.content), want)
    r = srv.client.post("/preprocess", json={"image": base64.b64encode(png_bytes(im)).decode(),
                                             "preprocessor": "invert", "format": "json"})
    body = r.json()
    assert r.status_code == 200 and (body["width"], body["height"]) == im.size and body["preprocessor"] == "invert"
    assert body["image"].startswith("data:image/png;base64,")
    np.testing.assert_array_equal(decoded(base64.b64decode(body["image"].split(",", 1)[1])), 255 - np.asarray(im))


def test_preprocess_takes_an_uploaded_asset(srv):
    im = picture(64, 64)
    stored = srv.client.post("/assets", params={"name": "ctrl.png"}, content=png_bytes(im)).json()["path"]
    r = srv.client.post("/preprocess", json={"image": stored, "preprocessor": "threshold", "threshold_a": 100,
                                             "processor_res": 64})
    assert r.status_code == 200
    np.testing.assert_array_equal(decoded(r.content), np.asarray(make_map("threshold", im, resolution=64,
                                                                          threshold_a=100)))


def test_a_model_based_map_is_made_in_the_worker_from_the_pool(srv, models):
    im = picture(128, 64)
    r = srv.client.post("/preprocess", json={"image": data_url(im), "preprocessor": "depth_anything",
                                             "processor_res": 64})
    assert r.status_code == 200, r.text
    want = np.asarray(make_map("depth_anything", im, resolution=64, load_model=loader(models)))
    np.testing.assert_array_equal(decoded(r.content), want)
    pool = srv.client.get("/health").json()
    roles = {e["role"] for e in pool["pool"]["entries"]} if "pool" in pool else set()
    assert "annotator.depth_anything" in roles, pool.get("pool")
    # again: nothing read again (a pool hit)
    before = srv.engine.worker_state.pool["loads"]
    assert srv.client.post("/preprocess", json={"image": data_url(im), "preprocessor": "depth_anything",
                                                "processor_res": 64}).status_code == 200
    assert srv.engine.worker_state.pool["loads"] == before


@pytest.mark.parametrize("body,field", [
    ({"preprocessor": "cany"}, "preprocessor"),
    ({"preprocessor": "canny", "threshold_a": 0}, "threshold_a"),
    ({"preprocessor": "canny", "threshold_b": 999}, "threshold_b"),
    ({"preprocessor": "canny", "processor_res": 16}, "processor_res"),
    ({"preprocessor": "depth_midas"}, "preprocessor"),                  # its model (DPT) is not here
    ({"preprocessor": "canny", "image": "data:image/png;base64,AAAA"}, "image"),
    ({"preprocessor": "canny", "image": "not an image, nor an asset"}, "image"),
    ({"preprocessor": "canny", "size": 3}, "size"),
    ({"preprocessor": "canny", "format": "gif"}, "format"),
])
def test_bad_values_are_422s_naming_the_field_and_the_engine_serves_on(srv, body, field):
    body = {"image": data_url(picture()), **body}
    r = srv.client.post("/preprocess", json=body)
    assert r.status_code == 422 and r.json()["field"] == field, r.text
    assert srv.client.post("/preprocess", json={"image": data_url(picture()), "preprocessor": "none"}).status_code == 200


def test_the_preprocessor_table_is_served(srv):
    body = srv.client.get("/preprocessors").json()
    rows = {p["name"]: p for p in body["preprocessors"]}
    assert rows["canny"]["params"]["threshold_a"]["default"] == 100 and rows["canny"]["model_free"]
    assert rows["depth_anything"]["available"] and not rows["depth_midas"]["available"]
    assert [a["key"] for a in body["annotators"]] == ["depth_anything"]
    library = srv.client.get("/library").json()["annotators"]
    assert [(a["key"], a["source"]) for a in library] == [("depth_anything", "folder")]


# -- the sd-webui-controlnet routes ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def webui(srv):
    import webuiapi
    api = webuiapi.WebUIApi(host="127.0.0.1", port=srv.server.port)
    api.set_auth("webui", TOKEN)
    return api


def test_module_list_in_the_extensions_shape(srv, webui):
    modules = webui.controlnet_module_list()
    assert modules[0] == "none" and {"canny", "depth_anything", "depth", "threshold", "tile_resample",
                                     "blur_gaussian", "scribble_xdog", "invert", "lineart_standard"} <= set(modules)
    body = srv.client.get("/controlnet/module_list").json()
    assert body["module_detail"]["canny"] == {"model_free": True, "sliders": [
        {"name": "Resolution", "value": 512, "min": 64, "max": 2048, "step": 8},
        {"name": "Low Threshold", "value": 100, "min": 1, "max": 255, "step": 1.0},
        {"name": "High Threshold", "value": 200, "min": 1, "max": 255, "step": 1.0}]}
    assert body["module_detail"]["depth_anything"]["model_free"] is False
    aliases = srv.client.get("/controlnet/module_list", params={"alias_names": "true"}).json()["module_list"]
    assert "invert (from white bg & black line)" in aliases and "depth_midas" in aliases and "depth" not in aliases


def test_detect_with_the_webuiapi_client_and_the_extensions_payload(srv, webui, models):
    im = picture(128, 64)
    result = webui.controlnet_detect([im], module="canny", processor_res=64, threshold_a=64, threshold_b=128)
    np.testing.assert_array_equal(np.asarray(result.images[0].convert("RGB")),
                                  np.asarray(make_map("canny", im, resolution=64, threshold_a=64, threshold_b=128)))
    assert result.info == "Success"
    # the extension's own payload (its API docs): controlnet_input_images, -1 for the defaults
    b64 = base64.b64encode(png_bytes(im)).decode()
    r = srv.client.post("/controlnet/detect", json={"controlnet_module": "depth_anything_v2",
                                                    "controlnet_input_images": [b64, b64],
                                                    "controlnet_processor_res": 64, "controlnet_threshold_a": -1,
                                                    "controlnet_threshold_b": -1})
    assert r.status_code == 200 and r.json()["info"] == "Success" and len(r.json()["images"]) == 2, r.text
    want = np.asarray(make_map("depth_anything", im, resolution=64, load_model=loader(models)))
    np.testing.assert_array_equal(decoded(base64.b64decode(r.json()["images"][1])), want)
    # webuiapi's default thresholds (64) past a slider's range are held to it, as the extension takes them
    r = srv.client.post("/controlnet/detect", json={"controlnet_module": "recolor_luminance",
                                                    "controlnet_input_images": [b64], "controlnet_threshold_a": 64})
    np.testing.assert_array_equal(decoded(base64.b64decode(r.json()["images"][0])),
                                  np.asarray(make_map("grayscale", im, threshold_a=2.0)))


@pytest.mark.parametrize("body,field", [
    ({"controlnet_module": "openpose_full"}, "controlnet_module"),
    ({"controlnet_module": "canny", "controlnet_input_images": []}, "controlnet_input_images"),
    ({"controlnet_module": "canny", "controlnet_input_images": ["%%%"]}, "controlnet_input_images.0"),
    ({"controlnet_module": "depth", "controlnet_input_images": None}, "controlnet_input_images"),
    ({"controlnet_module": "depth"}, "controlnet_module"),           # DPT is not here
    ({"controlnet_module": "canny", "controlnet_threshold_a": "high"}, "controlnet_threshold_a"),
])
def test_detect_refuses_with_a_422_naming_the_field(srv, body, field):
    body = {"controlnet_input_images": [base64.b64encode(png_bytes(picture())).decode()], **body}
    r = srv.client.post("/controlnet/detect", json=body)
    assert r.status_code == 422, r.text
    detail = r.json()["detail"][0]
    assert ".".join(map(str, detail["loc"][1:])) == field and detail["msg"].startswith(field), detail


def test_the_http_process_stays_torch_free_while_maps_are_made(models, tmp_path):
    """run.py's engine: a model-free map (made in the HTTP process), a depth map (in the worker) and a
    /controlnet/detect; torch's library is never mapped into the HTTP process."""
    from testing.engine_client import EngineProcess
    proc = EngineProcess(str(tmp_path / "job"), engine_extra={"model_folders": [str(models)]})
    try:
        proc.wait_ready()
        im = data_url(picture())
        for name in ("canny", "lineart", "depth_anything"):
            r = proc.client.post("/preprocess", json={"image": im, "preprocessor": name, "processor_res": 64})
            assert r.status_code == 200, r.text
        r = proc.client.post("/controlnet/detect", json={"controlnet_module": "scribble_xdog",
                                                         "controlnet_input_images": [im.split(",", 1)[1]]})
        assert r.status_code == 200, r.text
        with open(f"/proc/{proc.info['pid']}/maps") as f:
            assert "libtorch" not in f.read(), "the engine's HTTP process has imported torch"
    finally:
        assert proc.stop() == 0


def test_maps_are_made_while_a_request_runs(srv, tiny, models):
    """A request holds its first step (faults.hold_step) with another queued behind it: a model-free map answers
    at once (the HTTP process makes it); a depth map waits its turn for the worker, ahead of the queued request,
    and is made once the held one ends; both requests still finish."""
    import threading
    faults = srv.engine.faults
    faults.reset(hold_step=1)
    gen = lambda rid: {"model": {"arch": "zimage", "name_or_path": tiny("zimage")}, "request_id": rid,
                       "sample": {"prompt": "a", "width": 64, "height": 64, "num_inference_steps": 2},
                       "stream": {"detach": True}}
    answers = {}
    try:
        srv.client.stream(gen("pp-hold"), on_frame=lambda h, p: h["type"] == "progress")
        srv.client.stream(gen("pp-next"), on_frame=lambda h, p: True)
        im = picture(128, 64)
        r = srv.client.post("/preprocess", json={"image": data_url(im), "preprocessor": "canny"})
        assert r.status_code == 200 and srv.engine.get("pp-hold").status == "running"
        depth = threading.Thread(target=lambda: answers.update(r=srv.client.post(
            "/preprocess", json={"image": data_url(im), "preprocessor": "depth_anything", "processor_res": 64})))
        depth.start()
        with srv.engine._cv:            # the map waits its turn for the worker
            assert srv.engine._cv.wait_for(lambda: len(srv.engine._calls) == 1, timeout=60)
    finally:
        faults.hold_step = 0
        srv.client.post("/cancel/pp-hold")
    depth.join(120)
    assert answers["r"].status_code == 200, answers["r"].text
    np.testing.assert_array_equal(decoded(answers["r"].content),
                                  np.asarray(make_map("depth_anything", im, resolution=64, load_model=loader(models))))
    nxt = srv.engine.get("pp-next")
    assert nxt.done_event.wait(120) and nxt.status == "ok", nxt.error
    assert srv.engine.get("pp-hold").status == "cancelled"

"""The compatibility API (A1111 / stable-diffusion.cpp `/sdapi/v1`, OpenAI `/v1/images`), driven
with the request shapes real clients send: the `openai` package itself, and SillyTavern's
SD WebUI payload with all its extra fields and Basic auth."""
import base64
import io
import json
import threading
import time

import httpx
import numpy as np
import pytest
from PIL import Image

from extensions_built_in.inference_engine.compat import compat_routes, serve_compat_on_port
from toolkit.profiles import load_profiles

TOKEN = "compat-token-123"
ZIMAGE_REPO = "Tongyi-MAI/Z-Image-Turbo"


def fake_hub_cache(root, repo_id: str, folder: str):
    """A local hub cache holding `repo_id` as its `main` snapshot: the files of `folder`."""
    repo = root / f"models--{repo_id.replace('/', '--')}"
    (repo / "refs").mkdir(parents=True)
    (repo / "snapshots").mkdir()
    (repo / "refs" / "main").write_text("0" * 40)
    (repo / "snapshots" / ("0" * 40)).symlink_to(folder, target_is_directory=True)


class Served:
    """A real engine (thread worker) with profiles made of tiny models, and a local hub cache that
    holds zimage's default repo only: what the compat routes can offer is what can load here."""

    def __init__(self, folder, tiny, more_profiles: str = "", **engine_kw):
        from extensions_built_in.inference_engine.engine import Engine
        from extensions_built_in.inference_engine.server import ServerThread, bind_socket, create_app
        (folder / "wan").mkdir()
        (folder / "gone").mkdir()
        (folder / "profiles.toml").write_text(
            f'[model_profiles.tiny-turbo]\narchitecture = "zimage"\ncheckpoint = "{tiny("zimage")}"\n'
            f'[model_profiles.tiny-sd1]\narchitecture = "sd1"\ncheckpoint = "{tiny("sd1")}"\n'
            f'[model_profiles.tiny-wan]\narchitecture = "wan21"\ncheckpoint = "{folder / "wan"}"\n'
            f'[model_profiles.gone]\narchitecture = "zimage"\ncheckpoint = "{folder / "gone"}"\n' + more_profiles)
        profiles = load_profiles(str(folder / "profiles.toml"))
        (folder / "gone").rmdir()                    # a profile whose files went away: it cannot load
        self.hub = pytest.MonkeyPatch()
        import huggingface_hub.constants
        (folder / "hub").mkdir()
        fake_hub_cache(folder / "hub", ZIMAGE_REPO, tiny("zimage"))
        self.hub.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(folder / "hub"))
        self.engine = Engine(output_folder=f"{folder}/outputs", assets_folder=f"{folder}/assets", worker="thread",
                             profiles=profiles, **engine_kw)
        self.engine.default_model = "tiny-turbo"    # what a call that names no model gets (warm_load sets it)
        self.engine.start_worker()
        self.route = compat_routes(engine=self.engine)
        self.server = ServerThread(create_app(self.engine, TOKEN, extra_routes=[self.route]), bind_socket(0)).start()
        self.loop = threading.Thread(target=self.engine.run_forever, daemon=True, name="engine-loop")
        self.loop.start()
        self.url = f"http://127.0.0.1:{self.server.port}"
        self.http = httpx.Client(base_url=self.url, auth=("sillytavern", TOKEN), timeout=120)   # Basic auth

    def close(self):
        self.engine.stop()
        self.loop.join(30)
        self.server.stop()
        self.http.close()
        self.hub.undo()


@pytest.fixture(scope="module")
def srv(tiny, tmp_path_factory):
    s = Served(tmp_path_factory.mktemp("compat"), tiny)
    yield s
    s.close()


def png(b64: str) -> Image.Image:
    raw = base64.b64decode(b64)
    assert raw[:8] == b"\x89PNG\r\n\x1a\n"
    return Image.open(io.BytesIO(raw))


def sillytavern_body(**over) -> dict:
    """What SillyTavern's SD WebUI source POSTs to /sdapi/v1/txt2img (its url/auth included)."""
    body = {
        "url": "http://127.0.0.1:7860", "auth": f"sillytavern:{TOKEN}",
        "prompt": "best quality, absurdres, aesthetic, a red fox in the snow",
        "negative_prompt": "lowres, bad anatomy, bad hands, text, error, cropped, worst quality",
        "sampler_name": "Euler", "scheduler": "Automatic", "steps": 4, "cfg_scale": 7, "width": 64, "height": 64,
        "restore_faces": False, "enable_hr": False, "hr_upscaler": "Latent", "hr_scale": 2.0,
        "hr_additional_modules": [], "denoising_strength": 0.7, "hr_second_pass_steps": 0, "seed": 1234,
        "override_settings": {"CLIP_stop_at_last_layers": 1, "sd_model_checkpoint": "tiny-turbo"},
        "override_settings_restore_afterwards": True, "clip_skip": 1, "save_images": True, "send_images": True,
        "do_not_save_grid": False, "do_not_save_samples": False, "alwayson_scripts": {}, "n_iter": 1,
        "batch_size": 1, "styles": [], "subseed": -1, "subseed_strength": 0, "s_churn": 0.0, "s_min_uncond": 0.0,
        "s_noise": 1.0, "s_tmax": None, "s_tmin": 0.0, "tiling": False, "eta": 0,
    }
    body.update(over)
    return body


# -- OpenAI ------------------------------------------------------------------------------------------

def openai_client(srv, api_key=TOKEN):
    from openai import OpenAI
    return OpenAI(base_url=f"{srv.url}/v1", api_key=api_key, max_retries=0, timeout=120)


def test_openai_images_generate_b64(srv):
    r = openai_client(srv).images.generate(model="tiny-turbo", prompt="a lighthouse at dusk", n=1, size="64x64",
                                           response_format="b64_json")
    assert isinstance(r.created, int) and len(r.data) == 1
    assert png(r.data[0].b64_json).size == (64, 64)


def test_openai_url_format_arch_name_and_models(srv):
    # an arch name: its default repo, from the local hub cache
    r = openai_client(srv).images.generate(model="zimage", prompt="two cats", n=2, size="64x64",
                                           response_format="url", quality="hd", style="vivid")
    assert len(r.data) == 2 and all(d.url.startswith(srv.url + "/outputs/") for d in r.data)
    last = srv.engine.queue_snapshot()["finished"][0]      # n = 2: one request, both images in one pass
    assert [res["url"] for res in last["results"]] == [d.url[len(srv.url):] for d in r.data]
    for d in r.data:
        got = httpx.get(d.url, headers={"Authorization": f"Bearer {TOKEN}"})
        assert got.status_code == 200 and Image.open(io.BytesIO(got.content)).size == (64, 64)
    ids = [m.id for m in openai_client(srv).models.list()]
    # profiles, then archs whose weights are here; not the video profile, the profile whose files went
    # away, or the archs whose repos are not in the local hub cache
    assert ids == ["tiny-sd1", "tiny-turbo", "zimage"]
    assert openai_client(srv).models.retrieve("tiny-sd1").id == "tiny-sd1"
    r = httpx.get(srv.url + "/v1/models/sd1", headers={"Authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 404 and r.json()["error"]["code"] == "model_not_found"


def test_openai_errors_in_openai_shape(srv):
    import openai
    client = openai_client(srv)
    cases = [(dict(model="tiny-turbo", prompt="x", size="huge"), "size"),
             (dict(model="dall-e-9", prompt="x", size="64x64"), "model"),
             (dict(model="wan21", prompt="x", size="64x64"), "model"),       # not in the hub cache
             (dict(model="tiny-wan", prompt="x", size="64x64"), "model"),    # a video model
             (dict(model="tiny-turbo", prompt="x", size="60x64"), "size"),    # not a multiple of 16
             (dict(model="tiny-turbo", prompt="x", n=11, size="64x64"), "n")]
    for kwargs, param in cases:
        with pytest.raises(openai.BadRequestError) as e:
            client.images.generate(**kwargs)
        err = e.value.response.json()["error"]
        assert e.value.status_code == 400 and err["param"] == param and err["type"] == "invalid_request_error", err
        assert param in err["message"]
    with pytest.raises(openai.AuthenticationError):
        openai_client(srv, api_key="wrong-token").images.generate(model="tiny-turbo", prompt="x", size="64x64")
    r = httpx.get(srv.url + "/v1/models")
    assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key"


def test_a_model_that_cannot_load_here_is_refused_before_anything_unloads(srv):
    """A name the listings leave out is a 4xx naming the model field, answered before a request is
    queued, so the model the engine holds stays loaded."""
    r = srv.http.post("/sdapi/v1/txt2img", json=sillytavern_body(steps=1))
    assert r.status_code == 200, r.text
    active = srv.engine.health()["active"]
    finished = [f["request_id"] for f in srv.engine.queue_snapshot()["finished"]]
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    for name, why in (("sd1", "local hub cache"), ("flux", "local hub cache"), ("krea2", "no public weights"),
                      ("gone", "no such file or folder")):
        r = httpx.post(srv.url + "/v1/images/generations", headers=bearer,
                       json={"model": name, "prompt": "x", "size": "64x64"})
        err = r.json()["error"]
        assert r.status_code == 400 and err["param"] == "model", r.text
        assert name in err["message"] and why in err["message"], err
        r = srv.http.post("/sdapi/v1/txt2img", json=sillytavern_body(override_settings={"sd_model_checkpoint": name}))
        assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "override_settings",
                                                                          "sd_model_checkpoint"], r.text
    assert srv.engine.health()["active"] == active and active["profile"] == "tiny-turbo"
    assert [f["request_id"] for f in srv.engine.queue_snapshot()["finished"]] == finished


def test_weights_here_needs_every_component_of_the_cached_snapshot(tiny, tmp_path, monkeypatch):
    """A partial snapshot (an interrupted download) is not offered; a complete one, or a local folder, is."""
    import shutil

    import huggingface_hub.constants
    from toolkit.local_weights import weights_here
    from toolkit.models.registry import ARCHS
    spec = ARCHS["zimage"]
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    assert not weights_here(spec)                                    # no cache at all
    partial = tmp_path / "partial"
    shutil.copytree(tiny("zimage"), partial, symlinks=True)
    shutil.rmtree(partial / "vae")
    fake_hub_cache(tmp_path / "hub", ZIMAGE_REPO, str(partial))
    assert not weights_here(spec)
    shutil.copytree(tiny("zimage") + "/vae", partial / "vae")
    assert weights_here(spec)
    monkeypatch.setattr(type(spec), "default_source", lambda self, variant=None: tiny("zimage"))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "empty"))
    assert weights_here(spec)                                        # a local folder


# -- A1111 -------------------------------------------------------------------------------------------

def test_a1111_sillytavern_payload_batch_seeds(srv):
    r = srv.http.post("/sdapi/v1/txt2img", json=sillytavern_body(batch_size=2))
    assert r.status_code == 200, r.text
    j = r.json()
    assert set(j) == {"images", "parameters", "info"} and isinstance(j["info"], str)
    images = [np.asarray(png(b).convert("RGB")) for b in j["images"]]
    assert len(images) == 2 and all(im.shape == (64, 64, 3) for im in images)
    assert not np.array_equal(images[0], images[1])
    info = json.loads(j["info"])
    assert info["seed"] == 1234 and info["all_seeds"] == [1234, 1235]
    assert (info["width"], info["height"], info["steps"], info["sd_model_name"]) == (64, 64, 4, "tiny-turbo")
    assert info["infotexts"][1].endswith("Seed: 1235, Size: 64x64, Model: tiny-turbo, Version: aitk-engine")
    assert "auth" not in j["parameters"] and j["parameters"]["batch_size"] == 2 and TOKEN not in r.text
    assert len(info["request_ids"]) == 1, "a batch_size of 2 is one request, one pipeline pass"
    # the second image really is seed 1235: the same request alone reproduces it (within one level:
    # batched matmuls round float32 low bits differently)
    again = srv.http.post("/sdapi/v1/txt2img", json=sillytavern_body(seed=1235)).json()
    alone = np.asarray(png(again["images"][0]).convert("RGB")).astype(int)
    assert np.abs(alone - images[1].astype(int)).max() <= 1


def test_a1111_random_seed_and_defaults(srv):
    body = {"prompt": "a house", "steps": 2, "width": 64, "height": 48, "seed": -1, "batch_size": 2}
    j = srv.http.post("/sdapi/v1/txt2img", json=body).json()
    info = json.loads(j["info"])
    s = info["seed"]
    assert 0 <= s < 2**31 and info["all_seeds"] == [s, s + 1]
    assert [png(b).size for b in j["images"]] == [(64, 48)] * 2
    j = srv.http.post("/sdapi/v1/txt2img", json={**body, "batch_size": 1, "send_images": False}).json()
    assert j["images"] == []


@pytest.mark.parametrize("over,field", [
    ({"width": -64}, "width"), ({"height": 1000}, "height"), ({"steps": 0}, "steps"), ({"cfg_scale": -1}, "cfg_scale"),
    ({"seed": -5}, "seed"), ({"seed": "abc"}, "seed"), ({"batch_size": 0}, "batch_size"), ({"n_iter": 99}, "n_iter"),
    ({"prompt": 5}, "prompt"), ({"sampler_name": "DPM++ 2S a"}, "sampler_name"), ({"sampler_name": 5}, "sampler_name"),
    ({"sampler_name": "Default", "scheduler": "Karras"}, "scheduler"), ({"scheduler": "SGM Uniform"}, "scheduler"),
    ({"scheduler": "Polyexponential"}, "scheduler"),
    ({"override_settings": {"sd_model_checkpoint": "nope"}}, "override_settings.sd_model_checkpoint"),
    ({"override_settings": {"sd_model_checkpoint": "wan21"}}, "override_settings.sd_model_checkpoint"),
    ({"override_settings": {"sd_model_checkpoint": "tiny-wan"}}, "override_settings.sd_model_checkpoint"),
    ({"override_settings": {"sd_model_checkpoint": "sd1"}}, "override_settings.sd_model_checkpoint"),
])
def test_a1111_bad_values_name_the_field(srv, over, field):
    r = srv.http.post("/sdapi/v1/txt2img", json=sillytavern_body(**over))
    assert r.status_code == 422, r.text
    detail = r.json()["detail"][0]
    assert detail["loc"] == ["body", *field.split(".")] and detail["msg"].startswith(field + ":"), detail


def test_a1111_auth(srv):
    url = srv.url + "/sdapi/v1/sd-models"
    for kw in ({}, {"auth": ("user", "wrong-token")}, {"headers": {"Authorization": "Basic !!notbase64"}},
               {"headers": {"Authorization": "Bearer nope"}}, {"auth": (TOKEN, "")}):
        r = httpx.get(url, **kw)
        assert r.status_code == 401 and r.headers["WWW-Authenticate"].startswith("Basic"), kw
    for kw in ({"auth": ("anyone", TOKEN)}, {"auth": ("", TOKEN)}, {"headers": {"Authorization": f"Bearer {TOKEN}"}},
               {"headers": {"X-Engine-Token": TOKEN}}):
        assert httpx.get(url, **kw).status_code == 200, kw
    r = httpx.post(srv.url + "/sdapi/v1/txt2img", json=sillytavern_body())
    assert r.status_code == 401


def test_a1111_models_options_round_trip(srv, tiny_root):
    models = srv.http.get("/sdapi/v1/sd-models")
    assert [m["title"] for m in models.json()] == ["tiny-sd1", "tiny-turbo", "zimage"]
    assert set(models.json()[0]) == {"title", "model_name", "hash", "sha256", "filename", "config"}
    assert "/" not in models.text and str(tiny_root) not in models.text
    try:
        assert srv.http.post("/sdapi/v1/options", json={"sd_model_checkpoint": "tiny-sd1",
                                                        "CLIP_stop_at_last_layers": 2}).status_code == 200
        opts = srv.http.get("/sdapi/v1/options").json()
        assert opts["sd_model_checkpoint"] == "tiny-sd1" and opts["CLIP_stop_at_last_layers"] == 2
        r = srv.http.post("/sdapi/v1/options", json={"sd_model_checkpoint": "nope"})
        assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "sd_model_checkpoint"]
        assert srv.http.get("/sdapi/v1/options").json()["sd_model_checkpoint"] == "tiny-sd1"
        # a later call that names no model uses it
        body = sillytavern_body(steps=2, override_settings={"CLIP_stop_at_last_layers": 1})
        j = srv.http.post("/sdapi/v1/txt2img", json=body).json()
        assert json.loads(j["info"])["sd_model_name"] == "tiny-sd1" and png(j["images"][0]).size == (64, 64)
        assert srv.http.get("/sdapi/v1/samplers").json()[0]["aliases"][0] == "PNDMScheduler"
        # an epsilon model: the diffusion table, A1111's names; "DPM++ 2M" + "Karras" is dpm++_2m_karras
        listed = {s["name"]: s for s in srv.http.get("/sdapi/v1/samplers").json()}
        assert list(listed) == ["Default", "Euler", "Euler a", "DDIM", "DPM++ 2M", "DPM++ 2M SDE", "UniPC", "LMS"]
        assert listed["DPM++ 2M"]["options"]["schedules"] == ["Automatic", "Karras", "Exponential", "Beta"]
        assert listed["Euler a"]["options"]["schedules"] == ["Automatic"]
        assert [s["label"] for s in srv.http.get("/sdapi/v1/schedulers").json()] == ["Automatic", "Karras",
                                                                                     "Exponential", "Beta"]
        for name, schedule, want in (("DPM++ 2M", "Karras", "dpm++_2m_karras"), ("DPM++ 2M Karras", None,
                                                                                  "dpm++_2m_karras"),
                                     ("DPM++ 2M SDE", "Karras", "dpm++_2m_sde_karras"), ("Euler", "Beta", "euler_beta"),
                                     ("Euler a", "Automatic", "euler_a"), ("Default", None, None)):
            j = srv.http.post("/sdapi/v1/txt2img", json={**body, "steps": 2, "sampler_name": name,
                                                          "scheduler": schedule}).json()
            info = json.loads(j["info"])
            assert srv.engine.get(info["request_ids"][0]).sample.sampler == want, name
            if want:
                assert info["sampler_name"] == name.replace(" Karras", "")
                assert f"Schedule type: {schedule or 'Karras'}" in info["infotexts"][0]
    finally:   # a title with its A1111 hash suffix is accepted too
        assert srv.http.post("/sdapi/v1/options", json={"sd_model_checkpoint": "tiny-turbo [0123abcd]"}).status_code == 200
    assert srv.http.get("/sdapi/v1/options").json()["sd_model_checkpoint"] == "tiny-turbo"


def test_a1111_samplers_and_settings_lists(srv):
    srv.http.post("/sdapi/v1/txt2img", json=sillytavern_body(steps=1))
    samplers = srv.http.get("/sdapi/v1/samplers").json()
    assert all(set(s) == {"name", "aliases", "options"} for s in samplers)
    # Z-Image: its own scheduler, then what its family's table leaves it (its pipeline runs the Euler class's
    # set_timesteps only: Euler, Euler ancestral and LCM)
    assert [s["name"] for s in samplers] == ["Default", "Euler", "Euler a", "LCM"]
    assert samplers[0]["aliases"][:2] == ["FlowMatchEulerDiscreteScheduler", "default"]
    assert samplers[1]["aliases"] == ["euler", "euler_karras", "euler_exponential", "euler_beta"]
    assert samplers[1]["options"]["schedules"] == ["Automatic", "Karras", "Exponential", "Beta"]
    assert [s["label"] for s in srv.http.get("/sdapi/v1/schedulers").json()] == ["Automatic", "Karras",
                                                                                 "Exponential", "Beta"]
    for path in ("/sdapi/v1/upscalers", "/sdapi/v1/latent-upscale-modes", "/sdapi/v1/sd-vae", "/sdapi/v1/schedulers"):
        r = srv.http.get(path)
        assert r.status_code == 200 and isinstance(r.json(), list), path


def test_a1111_progress_preview_and_interrupt(srv):
    idle = srv.http.get("/sdapi/v1/progress").json()
    assert idle["progress"] == 0 and idle["state"]["job_count"] == 0 and idle["current_image"] is None
    out = {}

    def run():
        out["r"] = srv.http.post("/sdapi/v1/txt2img", json=sillytavern_body(steps=1000, seed=7, n_iter=2))

    t = threading.Thread(target=run)
    t.start()
    try:
        seen = None
        deadline = time.time() + 20
        while time.time() < deadline:
            p = srv.http.get("/sdapi/v1/progress").json()
            if p["state"]["sampling_step"] >= 2 and p["current_image"]:
                seen = p
                break
            time.sleep(0.02)
        assert seen is not None, "no progress with a preview while generating"
        assert 0 < seen["progress"] < 0.5 and seen["state"]["sampling_steps"] == 1000        # image 1 of 2
        assert seen["state"]["job_count"] == 2 and seen["state"]["job_no"] == 0 and seen["eta_relative"] > 0
        assert png(seen["current_image"]).size == (64, 64)                                   # 8x8 latent, x8
        assert srv.http.get("/sdapi/v1/progress", params={"skip_current_image": True}).json()["current_image"] is None
        t0 = time.time()
        assert srv.http.post("/sdapi/v1/interrupt").status_code == 200
    finally:
        if t.is_alive() and "t0" not in locals():
            srv.http.post("/sdapi/v1/interrupt")
        t.join(30)
    assert not t.is_alive() and time.time() - t0 < 10
    r = out["r"]
    assert r.status_code == 200, r.text
    info = json.loads(r.json()["info"])
    assert r.json()["images"] == [] and info["interrupted"] is True     # the whole batch stopped
    p = srv.http.get("/sdapi/v1/progress").json()
    assert p["progress"] == 0 and p["state"]["job_count"] == 0


def test_compat_port_serves_only_compat_routes(srv):
    extra = serve_compat_on_port(srv.engine, TOKEN, srv.route, 0)
    try:
        base = f"http://127.0.0.1:{extra.port}"
        auth = ("st", TOKEN)
        assert httpx.get(base + "/sdapi/v1/sd-models", auth=auth).status_code == 200
        assert httpx.get(base + "/sdapi/v1/options", auth=auth).json()["sd_model_checkpoint"] == \
            srv.http.get("/sdapi/v1/options").json()["sd_model_checkpoint"]          # one shared state
        assert httpx.get(base + "/sdapi/v1/sd-models").status_code == 401
        for path in ("/models", "/queue", "/health"):
            assert httpx.get(base + path, auth=auth).status_code == 404, path
        r = openai_client(srv).with_options(base_url=base + "/v1").images.generate(
            model="tiny-turbo", prompt="x", size="64x64", response_format="url")
        assert httpx.get(r.data[0].url, auth=auth).status_code == 200
        assert httpx.get(r.data[0].url).status_code == 401
    finally:
        extra.stop()


def test_a_client_that_goes_away_cancels_its_requests(srv):
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(srv.url + "/sdapi/v1/txt2img", json=sillytavern_body(steps=1000, n_iter=2),
                   auth=("st", TOKEN), timeout=1.0)
    deadline = time.time() + 10
    while time.time() < deadline and srv.engine.busy():
        time.sleep(0.05)
    assert not srv.engine.busy()
    last = srv.engine.queue_snapshot()["finished"][:2]
    assert [f["status"] for f in last] == ["cancelled", "cancelled"] and all(f["step"] < 1000 for f in last)

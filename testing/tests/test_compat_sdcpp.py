"""stable-diffusion.cpp's native asynchronous API (`/sdcpp/v1/*`), driven with the request bodies its
examples/server/api.md documents (sizes, steps and frames shrunk for tiny models), against a real engine
on loopback: jobs are submitted (202), polled to completion through the route, and their results decoded
(base64 PNG/JPEG images, an animated WebP video); a queued job is cancelled; bad fields are a 400 naming
the field in sd.cpp's error shape; capabilities lists the models by mode; every route wants the token."""
import base64
import copy
import io
import threading
import time
from types import SimpleNamespace

import av
import httpx
import pytest
from PIL import Image

from extensions_built_in.inference_engine.compat import serve_compat_on_port
from extensions_built_in.inference_engine.compat.sdcpp import Job, Jobs
from testing.tests.test_compat import TOKEN, Served
from toolkit.models.tiny.loras import write_tiny_lora

POLL_SECONDS = 120          # the most one job is polled for (a bound, never a synchronisation)
JOB_KEYS = {"id", "kind", "status", "created", "started", "completed", "queue_position", "result", "error", "progress"}

# api.md's img_gen request body, as documented (width, height and sample_steps shrunk)
IMG_GEN_BODY = {
    "prompt": "a cat sitting on a chair", "negative_prompt": "", "clip_skip": -1, "width": 64, "height": 64,
    "strength": 0.75, "seed": -1, "batch_count": 1, "auto_resize_ref_image": True, "increase_ref_index": False,
    "control_strength": 0.9, "ip_adapter_strength": 1.0, "embed_image_metadata": True,
    "init_image": None, "ref_images": [], "mask_image": None, "control_image": None, "ip_adapter_image": None,
    "sample_params": {
        "scheduler": "discrete", "sample_method": "euler_a", "sample_steps": 2, "eta": 1.0, "shifted_timestep": 0,
        "custom_sigmas": [], "flow_shift": 0.0,
        "guidance": {"txt_cfg": 7.0, "img_cfg": 7.0, "distilled_guidance": 3.5,
                     "slg": {"layers": [7, 8, 9], "layer_start": 0.01, "layer_end": 0.2, "scale": 0.0}}},
    "lora": [],
    "hires": {"enabled": False, "upscaler": "Latent", "scale": 2.0, "target_width": 0, "target_height": 0, "steps": 0,
              "denoising_strength": 0.7, "custom_sigmas": [], "upscale_tile_size": 128},
    "vae_tiling_params": {"enabled": False, "temporal_tiling": False, "tile_size_x": 0, "tile_size_y": 0,
                          "target_overlap": 0.5, "rel_size_x": 0.0, "rel_size_y": 0.0, "extra_tiling_args": ""},
    "cache_mode": "disabled", "cache_option": "", "scm_mask": "", "scm_policy_dynamic": True,
    "output_format": "png", "output_compression": 100,
}
_GUIDANCE = {"txt_cfg": 7.0, "img_cfg": 7.0, "distilled_guidance": 3.5,
             "slg": {"layers": [7, 8, 9], "layer_start": 0.01, "layer_end": 0.2, "scale": 0.0}}
# api.md's vid_gen request body, as documented (width, height, video_frames and sample_steps shrunk)
VID_GEN_BODY = {
    "prompt": "a cat walking through a rainy alley", "negative_prompt": "", "clip_skip": -1, "width": 32, "height": 32,
    "strength": 0.75, "seed": -1, "video_frames": 5, "fps": 16, "moe_boundary": 0.875, "vace_strength": 1.0,
    "init_image": None, "end_image": None, "control_frames": [],
    "sample_params": {"scheduler": "discrete", "sample_method": "euler", "sample_steps": 2, "eta": 1.0,
                      "shifted_timestep": 0, "custom_sigmas": [], "flow_shift": 0.0, "guidance": _GUIDANCE},
    "high_noise_sample_params": {"scheduler": "discrete", "sample_method": "euler", "sample_steps": -1, "eta": 1.0,
                                 "shifted_timestep": 0, "flow_shift": 0.0, "guidance": _GUIDANCE},
    "lora": [],
    "vae_tiling_params": {"enabled": False, "temporal_tiling": False, "tile_size_x": 0, "tile_size_y": 0,
                          "target_overlap": 0.5, "rel_size_x": 0.0, "rel_size_y": 0.0, "extra_tiling_args": ""},
    "cache_mode": "disabled", "cache_option": "", "scm_mask": "", "scm_policy_dynamic": True,
    "output_format": "webm", "output_compression": 100,
}


@pytest.fixture(scope="module")
def srv(tiny, tmp_path_factory):
    folder = tmp_path_factory.mktemp("compat_sdcpp")
    write_tiny_lora("zimage", tiny("zimage"), folder / "loras" / "style.safetensors")
    more = f'[model_profiles.tiny-wan21]\narchitecture = "wan21"\ncheckpoint = "{tiny("wan21")}"\n'
    s = Served(folder, tiny, more, lora_folder=str(folder / "loras"))
    yield s
    s.close()


def body(base: dict, **over) -> dict:
    out = copy.deepcopy(base)
    out.update(over)
    return out


def submit(srv, path: str, b: dict) -> dict:
    r = srv.http.post(path, json=b)
    assert r.status_code == 202, r.text
    job = r.json()
    assert set(job) == {"id", "kind", "status", "created", "poll_url"} and job["status"] == "queued"
    assert job["poll_url"] == f"/sdcpp/v1/jobs/{job['id']}"
    return job


def poll(srv, job_id: str, until=("completed", "failed", "cancelled"), http=None, step: int = 0) -> dict:
    """GET the job until its status is one of `until` and its progress at `step` (a bounded loop on the route)."""
    http = http or srv.http
    deadline = time.monotonic() + POLL_SECONDS
    while True:
        r = http.get(f"/sdcpp/v1/jobs/{job_id}")
        assert r.status_code == 200, r.text
        job = r.json()
        assert set(job) == JOB_KEYS, job
        if job["status"] in until and job["progress"]["step"] >= step:
            return job
        assert time.monotonic() < deadline, f"job {job_id} still {job['status']}"
        time.sleep(0.02)


def decoded(b64: str) -> Image.Image:
    return Image.open(io.BytesIO(base64.b64decode(b64)))


def feed_entry(srv, request_id: str) -> dict:
    return next(e for e in srv.engine.results.read(0, 1000)["entries"] if e["request_id"] == request_id)


def test_img_gen_documented_body_runs_to_completion(srv):
    job = submit(srv, "/sdcpp/v1/img_gen", IMG_GEN_BODY)
    assert job["kind"] == "img_gen" and isinstance(job["created"], int)
    done = poll(srv, job["id"])
    assert done["status"] == "completed" and done["error"] is None, done
    assert done["queue_position"] == 0 and done["completed"] >= done["started"] >= done["created"]
    assert done["result"]["output_format"] == "png" and [i["index"] for i in done["result"]["images"]] == [0]
    im = decoded(done["result"]["images"][0]["b64_json"])
    assert im.format == "PNG" and im.size == (64, 64)
    assert done["progress"] == {"step": 2, "steps": 2}
    req = srv.engine.queue_snapshot()["finished"][0]
    assert req["prompt"] == "a cat sitting on a chair" and req["steps"] == 2
    assert feed_entry(srv, req["request_id"])["api"] == "sdcpp"       # the UI's history shows the source
    assert srv.engine.get(req["request_id"]).sample.sampler == "euler_a"


def test_img_gen_batch_count_lora_and_jpeg(srv):
    b = body(IMG_GEN_BODY, seed=5, batch_count=2, output_format="jpeg",
             lora=[{"path": "style.safetensors", "multiplier": 0.8, "is_high_noise": False}])
    done = poll(srv, submit(srv, "/sdcpp/v1/img_gen", b)["id"])
    assert done["status"] == "completed", done
    images = done["result"]["images"]
    assert [i["index"] for i in images] == [0, 1] and done["result"]["output_format"] == "jpeg"
    assert all(decoded(i["b64_json"]).format == "JPEG" for i in images)
    req = srv.engine.get(srv.engine.queue_snapshot()["finished"][0]["request_id"])
    assert req.sample.batch_size == 2 and req.sample.seed == 5
    assert [(lora.path.rsplit("/", 1)[-1], lora.scale) for lora in req.model.loras] == [("style.safetensors", 0.8)]


def test_vid_gen_documented_body(srv):
    # the body as documented (webm, sd.cpp's default) runs to a VP9 WebM of its frames
    job = submit(srv, "/sdcpp/v1/vid_gen", body(VID_GEN_BODY, model="tiny-wan21"))
    done = poll(srv, job["id"])
    assert done["status"] == "completed", done
    result = done["result"]
    assert result["output_format"] == "webm" and result["mime_type"] == "video/webm" and result["fps"] == 16
    assert result["frame_count"] == 5
    with av.open(io.BytesIO(base64.b64decode(result["b64_json"]))) as c:
        stream = c.streams.video[0]
        frames = [f.to_ndarray(format="rgb24") for f in c.decode(stream)]
        assert stream.codec_context.name == "vp9" and c.format.name.startswith("matroska")
    assert len(frames) == 5 and frames[0].shape == (32, 32, 3)
    # sd.cpp's avi is not written here: a 400 naming the field and what is served
    r = srv.http.post("/sdcpp/v1/vid_gen", json=body(VID_GEN_BODY, model="tiny-wan21", output_format="avi"))
    assert r.status_code == 400 and r.json()["field"] == "output_format", r.text
    assert "no writer" in r.json()["error"] and "webm, webp, mp4" in r.json()["error"]
    job = submit(srv, "/sdcpp/v1/vid_gen", body(VID_GEN_BODY, model="tiny-wan21", output_format="webp"))
    assert job["kind"] == "vid_gen"
    done = poll(srv, job["id"])
    assert done["status"] == "completed", done
    result = done["result"]
    assert set(result) == {"output_format", "mime_type", "fps", "frame_count", "b64_json"}
    assert result["output_format"] == "webp" and result["mime_type"] == "image/webp" and result["fps"] == 16
    video = decoded(result["b64_json"])
    assert video.format == "WEBP" and video.size == (32, 32) and video.n_frames == result["frame_count"] == 5
    # an image job naming none while a video model is loaded: the default model (an image one) makes it
    done = poll(srv, submit(srv, "/sdcpp/v1/img_gen", IMG_GEN_BODY)["id"])
    assert done["status"] == "completed", done
    assert srv.engine.active_config.profile == "tiny-turbo"


@pytest.mark.parametrize("path,model", [("/sdcpp/v1/vid_gen", "tiny-turbo"), ("/sdcpp/v1/img_gen", "tiny-wan21")])
def test_a_job_for_the_other_modality_names_model(srv, path, model):
    base = VID_GEN_BODY if "vid" in path else IMG_GEN_BODY
    r = srv.http.post(path, json=body(base, model=model))
    assert r.status_code == 400, r.text
    err = r.json()
    assert err["field"] == "model" and err["error"].startswith("model:") and model in err["error"], err


_SP = IMG_GEN_BODY["sample_params"]


@pytest.mark.parametrize("over,field", [
    ({"width": "64"}, "width"),
    ({"seed": -5}, "seed"),
    ({"batch_count": 0}, "batch_count"),
    ({"clip_skip": 2}, "clip_skip"),
    ({"embed_image_metadata": False}, "embed_image_metadata"),
    ({"sample_params": {**_SP, "sample_method": "ipndm"}}, "sample_params.sample_method"),
    ({"sample_params": {**_SP, "scheduler": "ays"}}, "sample_params.scheduler"),
    ({"sample_params": {**_SP, "sample_steps": 100000}}, "sample_params.sample_steps"),
    ({"sample_params": {**_SP, "custom_sigmas": [1.0, 0.0]}}, "sample_params.custom_sigmas"),
    ({"sample_params": {**_SP, "guidance": {**_SP["guidance"], "slg": {"scale": 2.5}}}},
     "sample_params.guidance.slg.scale"),
    ({"sample_params": {**_SP, "guidance": {"txt_cfg": "7"}}}, "sample_params.guidance.txt_cfg"),
    ({"lora": [{"path": "nope.safetensors"}]}, "lora[0].path"),
    ({"lora": [{"path": "style.safetensors", "is_high_noise": True}]}, "lora[0].is_high_noise"),
    ({"lora": "style"}, "lora"),
    ({"cache_mode": "easycache"}, "cache_mode"),
    ({"output_format": "gif"}, "output_format"),
    ({"control_image": "aGVsbG8="}, "control_image"),
    ({"init_image": "not base64!"}, "init_image"),
    ({"mask_image": "aGVsbG8="}, "mask_image"),
    ({"ref_images": ["aGVsbG8="]}, "ref_images"),           # tiny-turbo has no edit task
    ({"hires": {"enabled": True, "scale": 99}}, "hires.scale"),
    ({"model": "nope"}, "model"),
])
def test_bad_fields_are_a_400_naming_the_field(srv, over, field):
    r = srv.http.post("/sdcpp/v1/img_gen", json=body(IMG_GEN_BODY, **{"model": "tiny-turbo", **over}))
    assert r.status_code == 400, r.text
    err = r.json()
    assert set(err) == {"error", "field"} and err["field"] == field and err["error"].startswith(field + ":"), err


def test_bad_json_and_bad_video_fields(srv):
    r = srv.http.post("/sdcpp/v1/img_gen", content=b"{", headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and r.json()["field"] == "body", r.text
    for over, field in (({"video_frames": 0}, "video_frames"), ({"end_image": "aGVsbG8="}, "end_image"),
                        ({"control_frames": ["aGVsbG8="]}, "control_frames"),
                        ({"init_image": "aGVsbG8="}, "init_image"),            # wan21 has no i2v task
                        ({"high_noise_sample_params": {"sample_method": "tcd"}},
                         "high_noise_sample_params.sample_method")):
        b = body(VID_GEN_BODY, model="tiny-wan21", **over)
        r = srv.http.post("/sdcpp/v1/vid_gen", json=b)
        assert r.status_code == 400 and r.json()["field"] == field, (over, r.text)


def test_cancel_a_queued_job_and_a_running_one(srv):
    long = body(IMG_GEN_BODY, model="tiny-turbo", sample_params={**_SP, "sample_steps": 1000})
    running = submit(srv, "/sdcpp/v1/img_gen", long)
    queued = submit(srv, "/sdcpp/v1/img_gen", body(IMG_GEN_BODY, model="tiny-turbo"))
    try:
        poll(srv, running["id"], until=("generating",), step=1)
        waiting = srv.http.get(f"/sdcpp/v1/jobs/{queued['id']}").json()
        assert waiting["status"] == "queued" and waiting["queue_position"] == 1 and waiting["started"] is None
        r = srv.http.post(f"/sdcpp/v1/jobs/{queued['id']}/cancel")
        assert r.status_code == 200, r.text
        j = r.json()
        assert j["status"] == "cancelled" and j["started"] is None and isinstance(j["completed"], int)
        assert j["error"] == {"code": "cancelled", "message": "job cancelled by client"} and j["result"] is None
    finally:
        r = srv.http.post(f"/sdcpp/v1/jobs/{running['id']}/cancel")
    assert r.status_code == 200 and r.json()["status"] == "cancelled", r.text
    assert 0 < r.json()["progress"]["step"] < 1000
    # an ended job is answered as it is
    again = srv.http.post(f"/sdcpp/v1/jobs/{queued['id']}/cancel")
    assert again.status_code == 200 and again.json()["status"] == "cancelled"
    for method, path in (("GET", "/sdcpp/v1/jobs/job_nope"), ("POST", "/sdcpp/v1/jobs/job_nope/cancel")):
        r = srv.http.request(method, path)
        assert r.status_code == 404 and r.json() == {"error": "job not found", "field": "id"}, r.text


def test_capabilities_lists_the_models_by_mode(srv):
    caps = srv.http.get("/sdcpp/v1/capabilities").json()
    sdcpp_keys = {"model", "current_mode", "supported_modes", "defaults", "output_formats", "features",
                  "defaults_by_mode", "output_formats_by_mode", "features_by_mode", "samplers", "schedulers",
                  "loras", "upscalers", "limits"}
    assert set(caps) == sdcpp_keys | {"models"}
    modes = {m["name"]: m["mode"] for m in caps["models"]}
    # the fixture's profiles (tiny-wan's folder is empty: it fails at its load, not before), and zimage's cached repo
    assert modes == {"tiny-sd1": "img_gen", "tiny-turbo": "img_gen", "zimage": "img_gen", "tiny-wan": "vid_gen",
                     "tiny-wan21": "vid_gen"}
    assert caps["supported_modes"] == ["img_gen", "vid_gen"] and set(caps["model"]) == {"name", "stem", "path"}
    assert caps["model"]["name"] == "tiny-turbo" and caps["current_mode"] == "img_gen"      # the loaded one
    assert caps["defaults"] == caps["defaults_by_mode"][caps["current_mode"]]
    assert caps["output_formats_by_mode"] == {"img_gen": ["png", "jpeg", "webp"], "vid_gen": ["webm", "webp", "mp4"]}
    assert caps["loras"] == [{"name": "style", "path": "style.safetensors"}]
    assert {"None", "Lanczos", "Latent"} <= {u["name"] for u in caps["upscalers"]}
    assert {"video_frames", "fps", "high_noise_sample_params"} <= set(caps["defaults_by_mode"]["vid_gen"])
    assert {"batch_count", "hires"} <= set(caps["defaults_by_mode"]["img_gen"])
    assert caps["features_by_mode"]["img_gen"]["cancel_queued"] and caps["features_by_mode"]["vid_gen"]["lora"]
    assert "euler" in caps["samplers"] and "discrete" in caps["schedulers"]
    assert set(caps["limits"]) >= {"min_width", "max_width", "min_height", "max_height", "max_batch_count",
                                   "max_queue_size"}


ROUTES = [("POST", "/sdcpp/v1/img_gen"), ("POST", "/sdcpp/v1/vid_gen"), ("GET", "/sdcpp/v1/jobs/job_x"),
          ("POST", "/sdcpp/v1/jobs/job_x/cancel"), ("GET", "/sdcpp/v1/capabilities")]


@pytest.mark.parametrize("method,path", ROUTES)
def test_every_route_wants_the_token(srv, method, path):
    for kw in ({}, {"auth": ("user", "wrong-token")}, {"headers": {"Authorization": "Bearer nope"}},
               {"headers": {"X-Engine-Token": "nope"}}):
        r = httpx.request(method, srv.url + path, content=b"{", **kw)
        assert r.status_code == 401 and r.json()["field"] == "authorization", (kw, r.text)
    for kw in ({"auth": ("anyone", TOKEN)}, {"headers": {"Authorization": f"Bearer {TOKEN}"}},
               {"headers": {"X-Engine-Token": TOKEN}}):
        r = httpx.request(method, srv.url + path, content=b"{", **kw)
        assert r.status_code != 401, (kw, r.text)


def test_the_compat_port_shares_the_jobs(srv):
    extra = serve_compat_on_port(srv.engine, TOKEN, srv.route, 0)
    try:
        other = httpx.Client(base_url=f"http://127.0.0.1:{extra.port}", headers={"Authorization": f"Bearer {TOKEN}"},
                             timeout=120)
        assert other.get("/sdcpp/v1/capabilities").status_code == 200
        assert httpx.get(f"http://127.0.0.1:{extra.port}/sdcpp/v1/capabilities").status_code == 401
        job = submit(srv, "/sdcpp/v1/img_gen", body(IMG_GEN_BODY, model="tiny-turbo"))
        assert poll(srv, job["id"], http=other)["status"] == "completed"
        other.close()
    finally:
        extra.stop()


def test_the_job_table_is_bounded_and_answers_410_for_what_left():
    from extensions_built_in.inference_engine.compat.common import CompatError
    table, forgotten = Jobs(kept=2), []
    done = threading.Event()
    done.set()
    ended = lambda: SimpleNamespace(done_event=done)        # noqa: E731
    running = Job("job_run", "img_gen", [SimpleNamespace(done_event=threading.Event())], 0, "png")
    table.add(running)
    for i in range(4):
        table.add(Job(f"job_{i}", "img_gen", [ended()], 0, "png"))
    table.prune(forgotten.extend)
    assert list(table.jobs) == ["job_run", "job_2", "job_3"] and len(forgotten) == 4
    for job_id, status in (("job_0", 410), ("job_1", 410), ("job_other", 404)):
        with pytest.raises(CompatError) as e:
            table.get(job_id)
        assert e.value.status == status and e.value.body["field"] == "id"
    assert table.get("job_run") is running


def test_sd_cpp_sampler_names_map_onto_the_models_samplers():
    from extensions_built_in.inference_engine.compat.common import CompatError
    from extensions_built_in.inference_engine.compat.sdcpp_body import sampler_of
    from toolkit.models.registry import ARCHS
    sd1, zimage = ARCHS["sd1"], ARCHS["zimage"]
    for params, spec, want in (({"sample_method": "dpm++2m", "scheduler": "karras"}, sd1, "dpm++_2m_karras"),
                               ({"sample_method": "dpm++2m", "scheduler": "normal"}, sd1, "dpm++_2m"),
                               ({"sample_method": "euler_a", "scheduler": "discrete"}, zimage, "euler_a"),
                               ({"sample_method": "euler", "scheduler": "karras"}, zimage, "euler_karras"),
                               ({"sample_method": "lms", "scheduler": "exponential"}, sd1, "lms_exponential"),
                               ({"sample_method": "default"}, zimage, None), ({}, sd1, None)):
        assert sampler_of(params, "sample_params", spec) == want, params
    for params, spec, field in (({"sample_method": "euler_a", "scheduler": "karras"}, sd1, "sample_params.scheduler"),
                                ({"sample_method": "euler", "scheduler": "ays"}, sd1, "sample_params.scheduler"),
                                ({"sample_method": "heun"}, sd1, "sample_params.sample_method"),
                                ({"scheduler": "karras"}, sd1, "sample_params.scheduler")):
        with pytest.raises(CompatError) as e:
            sampler_of(params, "sample_params", spec)
        assert e.value.body["field"] == field, params


def test_flow_shift_is_the_request_shift(srv):
    """sample_params.flow_shift (0: the model's own) is sample.shift: Wan at 8 runs with it; a model with no
    fixed flow shift (SD 1.5) is a 400 naming flow_shift."""
    params = {**VID_GEN_BODY["sample_params"], "flow_shift": 8.0}
    done = poll(srv, submit(srv, "/sdcpp/v1/vid_gen", body(VID_GEN_BODY, model="tiny-wan21", output_format="webp",
                                                            sample_params=params))["id"])
    assert done["status"] == "completed", done
    finished = srv.engine.queue_snapshot()["finished"][0]["request_id"]
    assert srv.engine.get(finished).sample.shift == 8.0
    for model, shift, field in (("tiny-sd1", 3.0, "sample_params.flow_shift"),
                                ("tiny-wan21", -1.0, "sample_params.flow_shift")):
        path = "/sdcpp/v1/vid_gen" if "wan" in model else "/sdcpp/v1/img_gen"
        base = VID_GEN_BODY if "wan" in model else IMG_GEN_BODY
        r = srv.http.post(path, json=body(base, model=model, output_format="webp" if "wan" in model else "png",
                                          sample_params={**base["sample_params"], "flow_shift": shift}))
        assert r.status_code == 400 and r.json()["field"] == field, r.text

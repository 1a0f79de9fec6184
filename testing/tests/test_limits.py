"""engine.limits and the memory pre-flight: what a hostile (or careless) client asks is refused
before anything is queued, with a 422 naming the field and the limit (a 503 for a full queue, a
413 for the assets folder's total), and the engine keeps serving. The reproductions are the ones
from the issue, through the real HTTP server."""
import json
import os
import threading
from types import SimpleNamespace

import pytest

from extensions_built_in.inference_engine import protocol
from extensions_built_in.inference_engine import worker as worker_module
from extensions_built_in.inference_engine.compat import compat_routes
from extensions_built_in.inference_engine.engine import Engine, QueueFull, Subscriber
from extensions_built_in.inference_engine.admission import AssetBudget, Limits
from extensions_built_in.inference_engine.worker import Faults
from testing.engine_client import EngineClient, InProcessEngine
from toolkit.config_modules import GenerateImageConfig, ModelConfig
from toolkit.errors import ConfigError
from toolkit.models.base_model import get_model_class
from toolkit.models.registry import ARCHS

TOKEN = "limits-token-123"
SD1_16K = {"model": {"arch": "sd1", "name_or_path": "tiny:sd1"},
           "sample": {"prompt": "x", "width": 16384, "height": 16384, "num_inference_steps": 2, "seed": 1}}
GB = 10 ** 9


@pytest.fixture(scope="module")
def eng(tiny, tmp_path_factory):
    """Default limits."""
    e = InProcessEngine(str(tmp_path_factory.mktemp("limits")), token=TOKEN)
    e.tiny = tiny
    yield e
    e.close()


def body(_eng, arch="zimage", **sample):
    """`tiny:<arch>`: a refused request never builds its model."""
    return {"model": {"arch": arch, "name_or_path": f"tiny:{arch}"},
            "sample": {"prompt": "a fox", "width": 64, "height": 64, "num_inference_steps": 2, "seed": 1, **sample}}


def refused(r, status, field, *words):
    assert r.status_code == status, (r.status_code, r.text[:500])
    j = r.json()
    if field is not None:
        assert j["field"] == field, j
    for w in words:
        assert w in r.text, (w, r.text[:500])
    return j


def keeps_serving(eng):
    r = eng.client.post("/generate", json={**body(eng), "wait": True})
    assert r.status_code == 200 and r.json()["status"] == "ok", r.text


# -- the reproductions, with the default limits -----------------------------------------------------

def test_sd1_16384_square_is_refused_before_queueing(eng):
    r = eng.client.post("/generate", json=SD1_16K)
    refused(r, 422, "sample.width", "16384x16384", "engine.limits.max_pixels (16777216)")
    assert eng.engine.queue_length() == 0 and eng.client.get("/queue").json()["queued"] == []
    keeps_serving(eng)


def test_zimage_16384_square_is_refused_not_an_index_error(eng):
    b = body(eng, width=16384, height=16384)      # past Z-Image's 8192 px RoPE reach (its arch row's max_side)
    refused(eng.client.post("/generate", json=b), 422, "sample.width", "8192")
    b = body(eng, arch="flux", width=16384, height=16384)     # a size its RoPE reaches: engine.limits bound it
    refused(eng.client.post("/generate", json=b), 422, "sample.width", "engine.limits.max_pixels")
    keeps_serving(eng)


def test_100000_steps_are_refused(eng):
    r = eng.client.post("/generate", json=body(eng, num_inference_steps=100000))
    refused(r, 422, "sample.num_inference_steps", "100000", "engine.limits.max_steps (1000)")
    keeps_serving(eng)


@pytest.mark.parametrize("field,text", [("prompt", "x" * (1 << 20)), ("prompt", "狐" * 180000),
                                        ("negative_prompt", "x" * (1 << 20))])
def test_huge_prompts_are_422_not_queued_500s(eng, field, text):
    r = eng.client.post("/generate", json=body(eng, **{field: text}))
    refused(r, 422, f"sample.{field}", "bytes (UTF-8)", "engine.limits.max_prompt_bytes (16384)")
    q = eng.client.get("/queue")
    assert len(q.content) < 64 << 10 and "狐狐" not in q.text
    keeps_serving(eng)


def test_too_many_frames_are_refused(eng):
    r = eng.client.post("/generate", json=body(eng, "wan21", num_frames=1001, fps=8))
    refused(r, 422, "sample.num_frames", "1001", "engine.limits.max_frames (257)")
    keeps_serving(eng)


def test_limits_do_not_refuse_ordinary_requests():
    """Every arch's own defaults (and the tiny samples the suite runs) pass the default limits."""
    from extensions_built_in.inference_engine.admission import check_request
    for arch, spec in ARCHS.items():
        mc = ModelConfig.from_dict({"arch": arch, "name_or_path": "x"})
        d = spec.sample_defaults(mc.variant)
        gen = GenerateImageConfig(prompt="a fox " * 200, negative_prompt="blurry " * 200, width=d["width"],
                                  height=d["height"], num_frames=d["num_frames"],
                                  num_inference_steps=d["num_inference_steps"], duration=d["duration"])
        check_request(Limits(), mc, gen)


# -- configured limits over HTTP, the compatibility routes included ---------------------------------

class Served:
    """Engine + HTTP (with the compat routes) in-process, with the given limits."""

    def __init__(self, folder, **engine_kw):
        from extensions_built_in.inference_engine.server import ServerThread, bind_socket, create_app
        self.engine = Engine(output_folder=os.path.join(folder, "outputs"),
                             assets_folder=os.path.join(folder, "assets"), worker="thread", faults=Faults(), **engine_kw)
        self.engine.start_worker()
        app = create_app(self.engine, TOKEN, extra_routes=[compat_routes(engine=self.engine)])
        self.server = ServerThread(app, bind_socket(0)).start()
        self.loop = threading.Thread(target=self.engine.run_forever, daemon=True, name="engine-loop")
        self.loop.start()
        self.client = EngineClient(f"http://127.0.0.1:{self.server.port}", TOKEN)

    def close(self):
        self.engine.stop()
        self.loop.join(30)
        self.server.stop()
        self.client.close()


SMALL = {"max_pixels": 64 * 64, "max_frames": 5, "max_steps": 3, "max_batch": 2, "max_prompt_bytes": 10,
         "max_queued": 1, "max_asset_bytes": 1000}


@pytest.fixture(scope="module")
def small(tiny, tmp_path_factory):
    from toolkit.profiles import load_profiles
    folder = tmp_path_factory.mktemp("small")
    (folder / "profiles.toml").write_text(   # a model the compatibility routes can load (no hub here)
        f'[model_profiles.tiny-z]\narchitecture = "zimage"\ncheckpoint = "{tiny("zimage")}"\n'
        '[model_profiles.tiny-z.defaults]\nsteps = 2\nwidth = 64\nheight = 64\n')
    s = Served(str(folder), limits=SMALL, profiles=load_profiles(str(folder / "profiles.toml")))
    s.tiny = tiny
    yield s
    s.close()


@pytest.mark.parametrize("arch,sample,field,limit", [
    ("zimage", {"width": 128}, "sample.width", "engine.limits.max_pixels (4096)"),
    ("zimage", {"num_inference_steps": 4}, "sample.num_inference_steps", "engine.limits.max_steps (3)"),
    ("zimage", {"prompt": "12345678901"}, "sample.prompt", "engine.limits.max_prompt_bytes (10)"),
    ("zimage", {"negative_prompt": "狐狐狐狐"}, "sample.negative_prompt", "engine.limits.max_prompt_bytes (10)"),
    ("wan21", {"num_frames": 9, "fps": 8}, "sample.num_frames", "engine.limits.max_frames (5)"),
    ("zimage", {"batch_size": 3}, "sample.batch_size", "engine.limits.max_batch (2)"),
])
def test_configured_limits_refuse_with_the_field(small, arch, sample, field, limit):
    refused(small.client.post("/generate", json=body(small, arch, **sample)), 422, field, limit)
    assert small.engine.queue_length() == 0
    keeps_serving(small)


def test_models_serves_the_batch_bound_the_ui_uses(small):
    """GET /models says, per arch, the most images one request may ask for: the engine's configured
    engine.limits.max_batch where the arch batches, 1 where it does not (the UI keeps no copy)."""
    archs = {a["name"]: a for a in small.client.get("/models").json()["archs"]}
    assert archs["zimage"]["batch"] and archs["zimage"]["max_batch"] == SMALL["max_batch"]
    assert all(a["max_batch"] == (SMALL["max_batch"] if a["batch"] else 1) for a in archs.values())
    assert any(not a["batch"] for a in archs.values())


def test_compat_fan_out_over_max_batch(small):
    oa = small.client.post("/v1/images/generations", json={"model": "tiny-z", "prompt": "x", "n": 3, "size": "64x64"})
    assert oa.status_code == 400, oa.text
    err = oa.json()["error"]
    assert err["param"] == "n" and "engine.limits.max_batch (2)" in err["message"]
    for counts in ({"batch_size": 3}, {"batch_size": 2, "n_iter": 2}):
        a = small.client.post("/sdapi/v1/txt2img", json={"prompt": "x", "width": 64, "height": 64, **counts,
                                                          "override_settings": {"sd_model_checkpoint": "tiny-z"}})
        assert a.status_code == 422, a.text
        detail = a.json()["detail"][0]
        assert detail["loc"] == ["body", "batch_size"] and "engine.limits.max_batch (2)" in detail["msg"]
    assert small.engine.queue_length() == 0 and small.engine.running_request() is None
    keeps_serving(small)


def _when_step(req, step) -> threading.Event:
    """Set once progress `step` of `req` is published."""
    seen = threading.Event()

    def deliver(frame, _latent):
        header = json.loads(frame[4:4 + int.from_bytes(frame[:4], "little")])
        if header["type"] == "progress" and header["step"] >= step:
            seen.set()
    for frame in req.attach(Subscriber(deliver)):
        deliver(frame, False)
    return seen


def test_a_full_queue_is_a_503_naming_the_limit(small):
    small.engine.faults.reset(hold_step=1)                    # the first request holds step 1 until cancelled
    running = small.engine.submit(*_parts(small), request_id="q-running")
    assert _when_step(running, 1).wait(60)
    waiting = small.engine.submit(*_parts(small), request_id="q-waiting")   # the one queue place
    r = small.client.post("/generate", json=body(small))
    refused(r, 503, None, "queue is full", "engine.limits.max_queued")
    with pytest.raises(QueueFull):
        small.engine.submit(*_parts(small))
    a = small.client.post("/sdapi/v1/txt2img", json={"prompt": "x", "width": 64, "height": 64, "steps": 2,
                                                      "override_settings": {"sd_model_checkpoint": "tiny-z"}})
    assert a.status_code == 503 and "engine.limits.max_queued" in a.text, a.text
    small.engine.cancel("q-waiting")
    small.engine.cancel("q-running")
    assert running.done_event.wait(60) and waiting.done_event.wait(60)
    assert (running.status, waiting.status) == ("cancelled", "cancelled")
    keeps_serving(small)


def _parts(s):
    b = body(s)
    return b["model"], b["sample"]


def test_assets_folder_total_is_a_413_naming_the_limit(small):
    c = small.client
    first = c.post("/assets", params={"name": "a.png"}, content=b"a" * 600)
    assert first.status_code == 200, first.text
    over = c.post("/assets", params={"name": "b.png"}, content=b"b" * 600)
    assert over.status_code == 413 and "engine.limits.max_asset_bytes (1000)" in over.text, over.text
    assert sorted(os.listdir(small.engine.assets_folder)) == [first.json()["path"]]   # nothing half-kept
    assert c.post("/assets", params={"name": "c.png"}, content=b"c" * 300).status_code == 200
    for name in os.listdir(small.engine.assets_folder):       # files removed by hand free their room
        os.remove(os.path.join(small.engine.assets_folder, name))
    assert c.post("/assets", params={"name": "d.png"}, content=b"d" * 600).status_code == 200
    keeps_serving(small)


def test_uploads_in_flight_count_toward_the_total(tmp_path):
    budget = AssetBudget(str(tmp_path), 1000)
    with budget.upload() as one:
        assert one.take(600)
        with budget.upload() as two:
            assert not two.take(600) and "engine.limits.max_asset_bytes (1000)" in two.refusal
            assert two.take(400)
        assert budget.used() == 600                           # `two` left without storing: freed
    assert budget.used() == 0
    with budget.upload() as three:
        assert three.take(1000)
        three.stored()
    assert budget.used() == 1000


# -- engine.limits in the InferenceEngine config ---------------------------------------------------

def _inference_engine(tmp_path, limits):
    from extensions_built_in.inference_engine.InferenceEngine import InferenceEngine
    engine = {"job_folder": str(tmp_path)}
    if limits is not ...:
        engine["limits"] = limits
    return InferenceEngine(0, SimpleNamespace(name="limits"), {"type": "InferenceEngine", "engine": engine})


def test_engine_limits_config_sets_and_defaults(tmp_path):
    assert _inference_engine(tmp_path, ...).settings.limits == Limits()
    ie = _inference_engine(tmp_path, {"max_steps": 50, "max_queued": 8})
    assert ie.settings.limits == Limits(max_steps=50, max_queued=8) == ie.make_engine().limits
    assert Engine(output_folder=str(tmp_path / "o"), worker="thread", limits={"max_batch": 4}).limits.max_batch == 4


@pytest.mark.parametrize("limits,key", [
    ({"max_steps": 0}, "engine.limits.max_steps"),
    ({"max_pixels": "big"}, "engine.limits.max_pixels"),
    ({"max_queued": True}, "engine.limits.max_queued"),
    ({"max_frames": 2.5}, "engine.limits.max_frames"),
    ({"max_prompt_bytes": 1 << 20}, "engine.limits.max_prompt_bytes"),
    ({"bogus": 1}, "engine.limits.bogus"),
    (5, "engine.limits"),
])
def test_bad_engine_limits_name_the_key(tmp_path, limits, key):
    with pytest.raises(ConfigError) as e:
        _inference_engine(tmp_path, limits)
    assert e.value.key == key, e.value


def test_bad_engine_limits_stop_run_py(tmp_path):
    import subprocess
    import sys
    from testing.engine_client import ROOT
    cfg = tmp_path / "e.yaml"
    cfg.write_text("job: extension\nconfig:\n  name: e\n  process:\n    - type: InferenceEngine\n"
                   "      engine: {limits: {max_steps: -1}}\n")
    p = subprocess.run([sys.executable, os.path.join(ROOT, "run.py"), str(cfg)], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode != 0 and "engine.limits.max_steps" in p.stderr, p.stderr[-2000:]


# -- the memory pre-flight --------------------------------------------------------------------------

def _estimate(arch, device="cuda", **sample):
    mc = ModelConfig.from_dict({"arch": arch, "name_or_path": "x"})
    return get_model_class(arch).estimate_activation_bytes(mc, GenerateImageConfig(**sample), device=device)


def test_estimate_refuses_16384_sd1_on_24_gb_and_fits_defaults():
    assert _estimate("sd1", width=16384, height=16384) > 24 * GB
    assert _estimate("sd1", "cpu", width=16384, height=16384) > _estimate("sd1", width=16384, height=16384)
    for arch, spec in ARCHS.items():                  # each arch's own default request fits a 24 GB card
        d = spec.sample_defaults()
        assert _estimate(arch, width=d["width"], height=d["height"], num_frames=d["num_frames"],
                         duration=d["duration"] or 30.0) < 24 * GB, arch


def test_estimate_accepts_the_suites_tiny_requests():
    for arch, spec in ARCHS.items():
        s = spec.tiny.sample
        need = _estimate(arch, "cpu", width=s.get("width", 0), height=s.get("height", 0),
                         num_frames=s.get("num_frames", 1), duration=s.get("duration", 0.0))
        # HiDream's pipeline rescales every request to about 1 MP, so its tiny runs at 1024x1024
        bound = 2 << 30 if s.get("width", 0) * s.get("height", 0) >= 1024 * 1024 else 64 << 20
        assert need < bound, (arch, need)


@pytest.mark.parametrize("arch", ["sd1", "zimage", "flux", "sana", "wan21", "ltx", "hunyuan_video", "ace_step"])
def test_estimate_is_monotonic_in_size_and_frames(arch):
    video = ARCHS[arch].modality == "video"
    sizes = [(64, 64), (64, 128), (256, 256), (512, 768), (1024, 1024), (2048, 2048)]
    last = -1
    for w, h in sizes:
        e = _estimate(arch, width=w, height=h, num_frames=9 if video else 1, duration=10.0)
        assert e >= last
        last = e
    if video:
        by_frames = [_estimate(arch, width=256, height=256, num_frames=f) for f in (1, 5, 9, 33, 81, 129)]
        assert by_frames == sorted(by_frames) and by_frames[-1] > by_frames[0]
    elif ARCHS[arch].modality == "image":
        assert _estimate(arch, width=2048, height=2048) > _estimate(arch, width=64, height=64)
    else:
        by_duration = [_estimate(arch, duration=d) for d in (1.0, 10.0, 60.0)]
        assert by_duration == sorted(by_duration) and by_duration[-1] > by_duration[0]


def _fake_device(monkeypatch, total, device="cuda"):
    monkeypatch.setattr(worker_module, "memory_info", lambda _d, _simulated=None: {"device": device, "used": 0,
                                                                                 "total": total})


def test_preflight_refuses_16384_sd1_on_a_24_gb_device(monkeypatch, tmp_path):
    """Its whole decode (130 GiB at least) is what does not fit: with sample.vae_tiling off. Under auto (or on)
    the decode may tile, and the floor is the denoiser's 10 GiB (test_vae_tiling.py)."""
    _fake_device(monkeypatch, 24 * GB)
    eng = Engine(output_folder=str(tmp_path / "o"), worker="thread", limits={"max_pixels": 16384 * 16384})
    eng.start_worker()
    try:
        with pytest.raises(ConfigError) as e:
            eng.submit(SD1_16K["model"], {**SD1_16K["sample"], "vae_tiling": "off"})
        assert e.value.key == "sample.width"
        assert "16384x16384 needs at least" in e.value.message and "22.4 GiB" in e.value.message
        assert eng.queue_length() == 0
        # a small request on the same device is accepted
        req = eng.submit({"arch": "sd1", "name_or_path": "tiny:sd1"}, {"width": 64, "height": 64,
                                                                       "num_inference_steps": 2})
        assert req.status == "queued"
    finally:
        eng.stop()
        eng.shutdown_worker()


def test_preflight_over_http_and_the_engine_keeps_serving(monkeypatch, tmp_path, tiny):
    """A fake 16 MiB device: 64x64 fits, 256x256 does not (a 422 naming the size, then a run)."""
    _fake_device(monkeypatch, 16 << 20, device="cpu")
    s = InProcessEngine(str(tmp_path), token=TOKEN)
    s.tiny = tiny
    try:
        r = s.client.post("/generate", json=body(s, width=256, height=256))
        refused(r, 422, "sample.width", "256x256 needs at least", "the cpu device's 16.0 MiB in total")
        keeps_serving(s)
    finally:
        s.close()


def test_preflight_runs_again_when_submit_had_no_device_total(monkeypatch, tmp_path):
    eng = Engine(output_folder=str(tmp_path / "o"), worker="thread")
    req = eng.submit({"arch": "zimage", "name_or_path": "tiny:zimage"}, {"width": 64, "height": 64})
    assert req.status == "queued"                  # no worker has reported a total yet
    _fake_device(monkeypatch, 1 << 20, device="cpu")
    loop = threading.Thread(target=eng.run_forever, daemon=True)
    loop.start()
    try:
        assert req.done_event.wait(60)
        assert req.status == "error" and "sample.width" in req.error and "needs at least" in req.error
    finally:
        eng.stop()
        loop.join(30)


def test_a_start_frame_too_large_to_stream_is_never_queued(monkeypatch, tmp_path):
    """The protocol's header limit is checked before queueing (the limits keep far below it)."""
    monkeypatch.setattr(protocol, "MAX_HEADER", 4096)
    eng = Engine(output_folder=str(tmp_path / "o"), worker="thread", limits={"max_prompt_bytes": 8000})
    with pytest.raises(ConfigError) as e:
        eng.submit({"arch": "zimage", "name_or_path": "tiny:zimage"}, {"prompt": "x" * 6000}, request_id="big")
    assert e.value.key == "sample" and "too large to stream" in e.value.message
    assert eng.queue_length() == 0 and eng.get("big") is None


def test_a_pixel_space_denoiser_is_counted_by_its_tokens():
    """PRX Pixel steps the image itself in 16x16-pixel tokens: its floor at 2048x2048 is that of 128x128
    tokens of activations, not of four million positions (which refused what fits a 24 GB card)."""
    pixel = [a for a, spec in ARCHS.items() if spec.denoiser_patch > 1]
    assert pixel
    for arch in pixel:
        assert _estimate(arch, width=2048, height=2048) < 4 * GB
        assert _estimate(arch, width=2048, height=2048) > _estimate(arch, width=512, height=512)


VIDEO_ARCHS = tuple(a for a in ARCHS if ARCHS[a].modality == "video")


@pytest.mark.parametrize("arch", VIDEO_ARCHS)
def test_a_video_floor_never_exceeds_what_a_tiny_run_holds(arch, tiny, monkeypatch, tmp_path):
    """The frame terms of the memory floor (the decoded clip, the latents over its latent frames) are
    the model's whatever its widths: with the widths taken out (one denoiser feature per position, no
    decoder features), the floor of each video arch's tiny request is at most what its run holds at its
    peak, so the pre-flight never refuses a clip for frames it will not hold."""
    import torch

    from testing.fixtures import input_image
    from testing.peak_memory import PeakLive
    from toolkit.models.base_model import BaseModel
    from toolkit.models.tiny import sample_settings

    holder = get_model_class(arch)({"arch": arch, "name_or_path": tiny(arch), "local_only": True}).load_model()
    sample = sample_settings(arch)
    for name in ARCHS[arch].needed_inputs:       # an image-to-video-only arch's first frame
        sample[name] = input_image(tmp_path / f"{name}.png", sample["width"], sample["height"])
    gen = GenerateImageConfig.from_dict({**sample, "prompt": "waves on a shore", "seed": 3}, holder.model_config)
    monkeypatch.setattr(BaseModel, "DENOISER_FEATURES", 1)
    monkeypatch.setattr(BaseModel, "decode_features", classmethod(lambda cls, spec: 0))
    floor = BaseModel.estimate_activation_bytes(holder.model_config, gen, device="cpu")
    with torch.no_grad(), PeakLive() as meter:
        holder.generate_single(gen)
    clip = gen.num_frames * gen.width * gen.height * 3 * 4
    assert clip <= floor <= meter.peak, (arch, floor, meter.peak)

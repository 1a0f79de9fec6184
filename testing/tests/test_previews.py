"""Preview images for every client: the engine's `preview` frames (stream.preview_image), A1111's
/sdapi/v1/progress `current_image` while a request runs, and OpenAI's streamed image calls
(`image_generation.partial_image` events, then `image_generation.completed`) through the real `openai`
client. Every wait is on an event (a gate in the step loop, a request's frames), never on time."""
import base64
import io
import threading

import numpy as np
import pytest
from PIL import Image

from extensions_built_in.inference_engine.engine import Subscriber
from toolkit.request import StreamOptions
from extensions_built_in.inference_engine.protocol import FrameReader
from extensions_built_in.inference_engine.worker import Faults
from testing.tests.test_batching import _wait, engine  # noqa: F401 (the in-process engine fixture)
from testing.tests.test_compat import TOKEN, Served
from toolkit.errors import ConfigError


def _model(tiny, arch="zimage"):
    return {"arch": arch, "name_or_path": tiny(arch), "local_only": True}


def _sample(**over):
    return {"prompt": "a fox", "width": 96, "height": 64, "num_inference_steps": 5, "seed": 5, **over}


class Gate(Faults):
    """Holds the sampling after step `at` until `go` is set (the test acts meanwhile)."""

    def __init__(self, at=2):
        super().__init__()
        self.at, self.steps = at, 0
        self.reached, self.go = threading.Event(), threading.Event()

    def on_step(self, check_cancel):
        self.steps += 1
        if self.steps == self.at:
            self.reached.set()
            while not self.go.wait(0.05):
                check_cancel()


def _frames(req):
    got = []
    req.attach(Subscriber(lambda frame, _newest: got.extend(FrameReader().feed(frame))))
    return got


def _jpeg(payload) -> Image.Image:
    assert payload[:3] == b"\xff\xd8\xff"
    im = Image.open(io.BytesIO(payload))
    im.load()
    return im


def test_stream_preview_image_is_checked():
    assert StreamOptions.from_dict(None).preview_image is None
    assert StreamOptions.from_dict({"preview_image": "jpeg"}).preview_image == "jpeg"
    assert StreamOptions.from_dict({"preview_image": "none"}).preview_image is None
    for bad in ("png", True, 1):
        with pytest.raises(ConfigError) as e:
            StreamOptions.from_dict({"preview_image": bad})
        assert e.value.key == "stream.preview_image"


def test_preview_frames_per_every_n_steps_and_none_unasked(engine, tiny):
    eng = engine(max_batch=1)
    model = _model(tiny)
    asked = eng.submit(model, _sample(), {"preview_image": "jpeg", "every_n_steps": 2, "latents": "none"}, "p1")
    plain = eng.submit(model, _sample(), None, "p2")
    got, other = _frames(asked), _frames(plain)
    engine.start(eng)
    _wait([asked, plain])
    assert asked.status == plain.status == "ok"
    previews = [(h, p) for h, p in got if h["type"] == "preview"]
    assert [h["step"] for h, _ in previews] == [2, 4, 5], "every 2nd step and the last"
    assert not [h for h, _ in got if h["type"] == "latent"], "latents: none still gives previews"
    for h, p in previews:
        im = _jpeg(p)
        assert h["format"] == "jpeg" and h["total"] == 5 and im.size == (h["width"], h["height"]) == (96, 64)
    assert np.asarray(_jpeg(previews[-1][1])).std() > 0, "a picture, not a flat fill"
    types = [h["type"] for h, _ in other]
    assert "preview" not in types and types.count("latent") == 5, "none when not asked"
    assert asked.latest_preview is not None and plain.latest_preview is None


def test_large_pictures_get_small_previews_of_the_same_aspect():
    import torch

    from toolkit.models.preview_image import preview_size, project_rgb
    from toolkit.latent_formats import FLUX
    assert preview_size(1024, 576) == (256, 144) and preview_size(64, 96) == (64, 96)
    rgb = project_rgb(torch.randn(16, 72, 128), FLUX, 256, 144)
    assert rgb.shape == (144, 256, 3) and rgb.dtype == torch.uint8
    grey = project_rgb(torch.randn(2, 8, 8), None, 64, 64)      # no table: the first channels, normalised
    assert grey.shape == (64, 64, 3) and int(grey.max()) > 200 and int(grey.min()) < 50


def test_video_and_packed_latents_make_previews(engine, tiny):
    eng = engine(max_batch=1)
    video = eng.submit(_model(tiny, "wan21"), {"prompt": "a fox", "width": 64, "height": 48, "num_frames": 5,
                                               "fps": 8, "num_inference_steps": 2, "seed": 1, "output_ext": "webp"},
                       {"preview_image": "jpeg"}, "v1")
    flux = eng.submit(_model(tiny, "flux"), _sample(num_inference_steps=2), {"preview_image": "jpeg"}, "f1")
    frames = {r.request_id: _frames(r) for r in (video, flux)}
    engine.start(eng)
    _wait([video, flux])
    for r, size in ((video, (64, 48)), (flux, (96, 64))):
        previews = [(h, p) for h, p in frames[r.request_id] if h["type"] == "preview"]
        assert r.status == "ok" and [h["step"] for h, _ in previews] == [1, 2], r.request_id
        assert _jpeg(previews[-1][1]).size == size


def test_batched_members_preview_their_own_rows(engine, tiny):
    model = _model(tiny)
    opts = {"preview_image": "jpeg", "latents": "none"}
    eng = engine(max_batch=4)
    a = eng.submit(model, _sample(seed=1, num_inference_steps=3), opts, "ba")
    b = eng.submit(model, _sample(seed=2, prompt="an owl", num_inference_steps=3), None, "bb")
    c = eng.submit(model, _sample(seed=3, prompt="a cat", num_inference_steps=3), opts, "bc")
    frames = {r.request_id: _frames(r) for r in (a, b, c)}
    infos = []
    eng.on_info = lambda info, step=None: infos.append(info)
    engine.start(eng)
    _wait([a, b, c])
    assert any("a batch of 3" in i for i in infos)
    last = {}
    for r in (a, c):
        previews = [(h, p) for h, p in frames[r.request_id] if h["type"] == "preview"]
        assert [h["step"] for h, _ in previews] == [1, 2, 3], r.request_id
        last[r.request_id] = np.asarray(_jpeg(previews[-1][1])).astype(int)
    assert not [h for h, _ in frames["bb"] if h["type"] == "preview"]
    solo = engine(max_batch=1)
    one = solo.submit(model, _sample(seed=3, prompt="a cat", num_inference_steps=3), opts, "solo")
    got = _frames(one)
    engine.start(solo)
    _wait([one])
    mine = np.asarray(_jpeg([p for h, p in got if h["type"] == "preview"][-1])).astype(int)
    assert np.abs(mine - last["bc"]).mean() < np.abs(mine - last["ba"]).mean(), "member c's rows, not a's"
    assert np.abs(mine - last["bc"]).mean() < 3


# -- the compatibility routes -------------------------------------------------------------------------

@pytest.fixture
def gated(tiny, tmp_path):
    gate = Gate(at=2)
    s = Served(tmp_path, tiny, faults=gate)
    s.gate = gate
    yield s
    gate.go.set()
    s.close()


def _running_preview(srv):
    """Wait (on the request's own frames) until the running request has published a preview."""
    req = srv.engine.running_request()
    seen = threading.Event()

    def look(frame, _newest=False):
        if FrameReader().feed(frame)[0][0]["type"] == "preview":
            seen.set()
    for frame in req.attach(Subscriber(look)):     # the replay holds the newest preview already sent
        look(frame)
    assert seen.wait(60)
    return req


def test_a1111_progress_current_image_from_the_preview_mid_run(gated):
    srv, out = gated, {}
    t = threading.Thread(target=lambda: out.setdefault("r", srv.http.post("/sdapi/v1/txt2img", json={
        "prompt": "a fox", "steps": 4, "width": 96, "height": 64, "seed": 3})))
    t.start()
    try:
        assert srv.gate.reached.wait(120)
        req = _running_preview(srv)
        assert req.stream.preview_image == "jpeg" and req.stream.latents == "none", "compat asks for previews"
        p = srv.http.get("/sdapi/v1/progress").json()
        assert p["state"]["sampling_step"] >= 1 and p["current_image"]
        raw = base64.b64decode(p["current_image"])
        assert raw[:8] == b"\x89PNG\r\n\x1a\n", "A1111's default samples_format: a bare base64 PNG"
        assert Image.open(io.BytesIO(raw)).size == (96, 64)
        assert srv.http.get("/sdapi/v1/progress", params={"skip_current_image": True}).json()["current_image"] is None
        assert srv.http.post("/sdapi/v1/options", json={"samples_format": "jpg"}).status_code == 200
        jpg = base64.b64decode(srv.http.get("/sdapi/v1/progress").json()["current_image"])
        assert jpg[:3] == b"\xff\xd8\xff", "samples_format jpg: the JPEG as it came"
    finally:
        srv.gate.go.set()
        t.join(120)
    assert out["r"].status_code == 200 and len(out["r"].json()["images"]) == 1


@pytest.fixture(scope="module")
def srv(tiny, tmp_path_factory):
    s = Served(tmp_path_factory.mktemp("previews"), tiny)
    yield s
    s.close()


def _pixels(b64: str) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(b64))).convert("RGB"))


def test_openai_streamed_generation_partials_then_the_same_final_image(srv):
    from openai import OpenAI

    client = OpenAI(api_key=TOKEN, base_url=f"{srv.url}/v1")
    extra = {"seed": 11, "num_inference_steps": 6}
    plain = client.images.generate(model="tiny-turbo", prompt="a red fox", size="96x64", extra_body=extra)
    events = list(client.images.generate(model="tiny-turbo", prompt="a red fox", size="96x64", stream=True,
                                         partial_images=2, extra_body=extra))
    assert [e.type for e in events] == ["image_generation.partial_image"] * 2 + ["image_generation.completed"]
    assert [e.partial_image_index for e in events[:2]] == [0, 1]
    for e in events[:2]:
        assert e.output_format == "jpeg" and e.size == "96x64"
        assert Image.open(io.BytesIO(base64.b64decode(e.b64_json))).size == (96, 64)
    done = events[-1]
    assert done.output_format == "png" and done.size == "96x64" and done.usage.total_tokens == 0
    assert np.array_equal(_pixels(done.b64_json), _pixels(plain.data[0].b64_json)), "streaming changes nothing"
    only = list(client.images.generate(model="tiny-turbo", prompt="a red fox", size="96x64", stream=True,
                                       extra_body=extra))
    assert [e.type for e in only] == ["image_generation.completed"], "partial_images 0: the completed event only"


def test_openai_stream_refusals_and_edits(srv):
    import openai
    from openai import OpenAI

    client = OpenAI(api_key=TOKEN, base_url=f"{srv.url}/v1")
    with pytest.raises(openai.BadRequestError) as e:
        list(client.images.generate(model="tiny-turbo", prompt="x", stream=True, partial_images=4))
    assert e.value.body["param"] == "partial_images"
    buf = io.BytesIO()
    Image.new("RGB", (64, 64), (200, 40, 40)).save(buf, format="PNG")
    events = list(client.images.edit(model="tiny-turbo", image=("in.png", buf.getvalue(), "image/png"),
                                     prompt="a red fox", size="64x64", stream=True, partial_images=1,
                                     extra_body={"seed": 2, "num_inference_steps": 4}))
    assert [e.type for e in events] == ["image_edit.partial_image", "image_edit.completed"]
    assert _pixels(events[-1].b64_json).shape == (64, 64, 3)

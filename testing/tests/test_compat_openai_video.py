"""OpenAI's videos API (`/v1/videos`), driven by the real `openai` SDK (`videos.create`, `retrieve`,
`create_and_poll`, `download_content`, `list`, `delete`) against a real engine and server with tiny video
models (LTX-Video: text-to-video and image-to-video in one arch; Wan 2.1: text-to-video only). The bytes
downloaded are decoded (PyAV) and checked against what was asked; refusals are a 400 in OpenAI's shape
naming the field; every route is a 401 without the token."""
import base64
import io
import os

import av
import httpx
import pytest
from PIL import Image

from testing.tests.test_compat import TOKEN, Served, openai_client
from testing.tests.test_compat_images import encode, picture

pytestmark = pytest.mark.filterwarnings("ignore:The Sora API:DeprecationWarning")     # the SDK's own notice
TINY_VIDEO = "width = 64\nheight = 64\nsteps = 2\nfps = 8\nnum_frames = 9\n"


@pytest.fixture(scope="module")
def srv(tiny, tmp_path_factory):
    more = (f'[model_profiles.tiny-ltx]\narchitecture = "ltx"\ncheckpoint = "{tiny("ltx")}"\n'
            f'[model_profiles.tiny-ltx.defaults]\n{TINY_VIDEO}'
            f'[model_profiles.tiny-wan21]\narchitecture = "wan21"\ncheckpoint = "{tiny("wan21")}"\n'
            f'[model_profiles.tiny-wan21.defaults]\n{TINY_VIDEO}')
    s = Served(tmp_path_factory.mktemp("compat_video"), tiny, more, limits={"max_frames": 65})
    yield s
    s.close()


@pytest.fixture(scope="module")
def client(srv):
    return openai_client(srv)


def request_of(srv, video) -> object:
    return srv.engine.get(video.id.removeprefix("video_"))


def finished(srv, video, client):
    """The video once its engine request ended (waited on the request's event), as the SDK retrieves it."""
    assert request_of(srv, video).done_event.wait(120)
    return client.videos.retrieve(video.id)


def decoded(data: bytes) -> tuple[list, float]:
    """(frames as PIL images, the stream's frame rate) of a video file's bytes."""
    with av.open(io.BytesIO(data)) as c:
        stream = c.streams.video[0]
        return [f.to_image() for f in c.decode(stream)], float(stream.average_rate)


def test_create_retrieve_download_list_delete(srv, client):
    video = client.videos.create(model="tiny-ltx", prompt="a lighthouse at dusk", seconds="2", size="96x64")
    assert (video.object, video.model, video.seconds, video.size, video.progress) == (
        "video", "tiny-ltx", "2", "96x64", 0)
    assert video.status in ("queued", "in_progress")            # the engine may have taken it already
    assert video.id.startswith("video_") and video.prompt == "a lighthouse at dusk" and video.completed_at is None
    req = request_of(srv, video)
    assert (req.api, req.sample.num_frames, req.sample.fps, req.sample.task) == ("openai", 17, 8, "txt2img")
    done = finished(srv, video, client)
    assert (done.status, done.progress, done.error) == ("completed", 100, None)
    assert done.completed_at >= done.created_at and done.id == video.id
    # the MP4: 2 s at the model's 8 fps, two strides of LTX's 8 frames and the first
    content = client.videos.download_content(video.id)
    assert content.response.headers["content-type"] == "video/mp4"
    frames, rate = decoded(content.read())
    assert len(frames) == 17 and frames[0].size == (96, 64) and rate == 8
    thumb = Image.open(io.BytesIO(client.videos.download_content(video.id, variant="thumbnail").read()))
    assert (thumb.format, thumb.size) == ("WEBP", (96, 64))
    sheet = Image.open(io.BytesIO(client.videos.download_content(video.id, variant="spritesheet").read()))
    assert (sheet.format, sheet.size) == ("JPEG", (96 * 8, 64))
    # listed (newest first by default; asc and the SDK's pages of one follow the cursor)
    other = client.videos.create(model="tiny-ltx", prompt="a fox")
    finished(srv, other, client)
    assert other.seconds == "1" and other.size == "64x64"                # the profile's 9 frames at 8 fps
    ids = [v.id for v in client.videos.list()]
    assert ids[:2] == [other.id, video.id]
    assert [v.id for v in client.videos.list(order="asc")][-2:] == [video.id, other.id]
    page = client.videos.list(limit=1)
    assert [v.id for v in page.data] == [other.id] and page.has_more
    assert [v.id for v in client.videos.list(limit=1)][:2] == [other.id, video.id]   # auto-paging: every page
    # deleted: gone from retrieve, content and the list, and its file removed
    path = req.results[0]["path"]
    assert os.path.isfile(path)
    gone = client.videos.delete(video.id)
    assert (gone.id, gone.deleted, gone.object) == (video.id, True, "video.deleted")
    assert not os.path.exists(path)
    import openai
    for call in (lambda: client.videos.retrieve(video.id), lambda: client.videos.download_content(video.id),
                 lambda: client.videos.delete(video.id)):
        with pytest.raises(openai.NotFoundError) as e:
            call()
        assert e.value.response.json()["error"]["code"] == "video_not_found"
    assert video.id not in [v.id for v in client.videos.list()]


def test_input_reference_is_the_first_frame_of_an_i2v(srv, client):
    """An uploaded image (what the SDK sends as a file) and `{image_url: data URL}` (the SDK's reference
    object, sent as form fields) both make the arch's i2v task with that image; create_and_poll follows."""
    image = encode(picture(64, 64))
    video = client.videos.create_and_poll(model="tiny-ltx", prompt="waves", input_reference=("first.png", image,
                                          "image/png"), poll_interval_ms=20)
    assert video.status == "completed"
    req = request_of(srv, video)
    assert req.sample.task == "i2v" and open(req.sample.init_img, "rb").read() == image
    frames, _rate = decoded(client.videos.download_content(video.id).read())
    assert len(frames) == 9 and frames[0].size == (64, 64)
    url = "data:image/png;base64," + base64.b64encode(image).decode("ascii")
    # the SDK's create() asserts a file at `input_reference` (3.63.0): the reference object goes as extra_body,
    # which it flattens into the form as input_reference[image_url]
    video = client.videos.create(model="tiny-ltx", prompt="waves", extra_body={"input_reference": {"image_url": url}})
    req = request_of(srv, video)
    assert req.sample.task == "i2v" and open(req.sample.init_img, "rb").read() == image
    assert finished(srv, video, client).status == "completed"
    # as JSON too (a client that posts the body as JSON)
    r = httpx.post(srv.url + "/v1/videos", headers={"Authorization": f"Bearer {TOKEN}"},
                   json={"model": "tiny-ltx", "prompt": "waves", "input_reference": {"image_url": url}})
    assert r.status_code == 200 and r.json()["object"] == "video", r.text
    req = srv.engine.get(r.json()["id"].removeprefix("video_"))
    assert req.sample.task == "i2v" and req.done_event.wait(120) and req.status == "ok"


def _refused(call) -> dict:
    import openai
    with pytest.raises(openai.BadRequestError) as e:
        call()
    err = e.value.response.json()["error"]
    assert e.value.status_code == 400 and err["type"] == "invalid_request_error", err
    return err


@pytest.mark.parametrize("kwargs,param", [
    (dict(model="tiny-turbo"), "model"),                    # an image model
    (dict(model="sora-2"), "model"),                        # no such model here
    (dict(model="gone"), "model"),                          # a profile whose files went away
    (dict(model="tiny-ltx", size="huge"), "size"),
    (dict(model="tiny-ltx", size="80x64"), "size"),         # not a multiple of LTX's 32
    (dict(model="tiny-ltx", seconds="0"), "seconds"),
    (dict(model="tiny-ltx", seconds="soon"), "seconds"),
    (dict(model="tiny-ltx", seconds="1e9"), "seconds"),
    (dict(model="tiny-ltx", seconds="12"), "seconds"),      # 97 frames: over engine.limits.max_frames (65)
    (dict(model="tiny-ltx", extra_body={"num_inference_steps": "many"}), "num_inference_steps"),
    (dict(model="tiny-wan21", input_reference=("a.png", encode(picture()), "image/png")), "input_reference"),
    (dict(model="tiny-ltx", input_reference=("a.png", b"not an image", "image/png")), "input_reference"),
    (dict(model="tiny-ltx", extra_body={"input_reference": {"file_id": "file-123"}}), "input_reference"),
    (dict(model="tiny-ltx", extra_body={"input_reference": {"image_url": "https://example.com/a.png"}}),
     "input_reference"),
])
def test_refusals_are_a_400_naming_the_field(srv, client, kwargs, param):
    queued = srv.engine.results.last_seq, len(srv.engine.queue_snapshot()["queued"])
    err = _refused(lambda: client.videos.create(prompt="x", **kwargs))
    assert err["param"] == param and param in err["message"], err
    assert (srv.engine.results.last_seq, len(srv.engine.queue_snapshot()["queued"])) == queued   # nothing queued


def test_no_model_named_is_the_loaded_one_only_when_it_makes_videos(srv, client):
    finished(srv, client.videos.create(model="tiny-ltx", prompt="x"), client)
    video = client.videos.create(prompt="x")                            # the loaded one: tiny-ltx
    assert video.model == "tiny-ltx" and finished(srv, video, client).status == "completed"
    client.images.generate(model="tiny-turbo", prompt="x", size="64x64")      # now an image model is loaded
    err = _refused(lambda: client.videos.create(prompt="x"))
    assert err["param"] == "model" and "tiny-ltx" in err["message"] and "image model" in err["message"], err


def test_a_failed_job_and_a_deleted_queued_job(srv, client):
    """A request the engine cancels is `failed` with its error; deleting one that waits or runs cancels it."""
    long = dict(model="tiny-ltx", prompt="slow", extra_body={"num_inference_steps": 1000})
    running, waiting = client.videos.create(**long), client.videos.create(**long)
    srv.engine.cancel(running.id.removeprefix("video_"))
    failed = finished(srv, running, client)
    assert failed.status == "failed" and failed.error.code == "cancelled" and failed.error.message
    import openai
    with pytest.raises(openai.ConflictError) as e:
        client.videos.download_content(running.id)
    assert e.value.response.json()["error"]["code"] == "video_not_ready"
    assert client.videos.delete(waiting.id).deleted
    req = request_of(srv, waiting)
    assert req.done_event.wait(60) and req.status == "cancelled"
    with pytest.raises(openai.NotFoundError):
        client.videos.retrieve(waiting.id)


def test_a_job_the_engine_forgot_is_read_from_the_results_feed(srv, client, monkeypatch):
    """After the engine drops a finished request (or restarts), the feed answers the same video object."""
    video = finished(srv, client.videos.create(model="tiny-ltx", prompt="kept"), client)
    monkeypatch.setattr(srv.engine, "get", lambda _rid: None)
    assert client.videos.retrieve(video.id) == video
    assert client.videos.download_content(video.id).read()[4:8] == b"ftyp"
    assert video.id in [v.id for v in client.videos.list()]


def test_bad_ids_variants_and_list_parameters(srv):
    h = {"Authorization": f"Bearer {TOKEN}"}
    for path in ("/v1/videos/nope", "/v1/videos/video_0000000000000000", "/v1/videos/nope/content"):
        r = httpx.get(srv.url + path, headers=h)
        assert r.status_code == 404 and r.json()["error"]["param"] == "video_id", r.text
    r = httpx.get(srv.url + "/v1/videos/nope/content", params={"variant": "gif"}, headers=h)
    assert r.status_code == 400 and r.json()["error"]["param"] == "variant", r.text
    for query, param in (({"limit": "0"}, "limit"), ({"limit": "x"}, "limit"), ({"order": "up"}, "order"),
                         ({"after": "video_none"}, "after")):
        r = httpx.get(srv.url + "/v1/videos", params=query, headers=h)
        assert r.status_code == 400 and r.json()["error"]["param"] == param, r.text
    r = httpx.post(srv.url + "/v1/videos", headers=h, content=b"prompt=x")      # neither a form nor JSON
    assert r.status_code == 400 and r.json()["error"]["param"] == "body", r.text


ROUTES = [("POST", "/v1/videos"), ("GET", "/v1/videos"), ("GET", "/v1/videos/video_x"),
          ("DELETE", "/v1/videos/video_x"), ("GET", "/v1/videos/video_x/content")]


@pytest.mark.parametrize("method,path", ROUTES)
@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong-token"}])
def test_every_route_is_401_without_the_token(srv, method, path, headers):
    r = httpx.request(method, srv.url + path, headers=headers, json={"prompt": "x"} if method == "POST" else None)
    assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key", r.text


def test_the_sdk_with_a_wrong_key_is_an_authentication_error(srv):
    import openai
    with pytest.raises(openai.AuthenticationError):
        openai_client(srv, api_key="wrong").videos.list()


def test_the_compat_port_shares_the_jobs(srv, client):
    """engine.compat_port serves the same routes over the same Session: a video made on one port is read,
    listed and downloaded on the other."""
    from extensions_built_in.inference_engine.compat import serve_compat_on_port
    extra = serve_compat_on_port(srv.engine, TOKEN, srv.route, 0)
    try:
        other = client.with_options(base_url=f"http://127.0.0.1:{extra.port}/v1")
        video = other.videos.create(model="tiny-ltx", prompt="both ports")
        assert finished(srv, video, client).status == "completed"
        assert other.videos.retrieve(video.id) == client.videos.retrieve(video.id)
        assert [v.id for v in other.videos.list()] == [v.id for v in client.videos.list()]
        assert other.videos.download_content(video.id).read() == client.videos.download_content(video.id).read()
    finally:
        extra.stop()

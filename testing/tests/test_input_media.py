"""Input videos and audio (toolkit/input_media.py): what the engine accepts before queueing (a header
probe, bounds, the first frame decoded) and what the worker hands a pipeline (frames at the request's
size, audio at the model's rate). Files are written both by our own writers (toolkit/media.py) and the
other way round, as users have them: other codecs and containers written by PyAV/FFmpeg directly."""
import av
import numpy as np
import pytest

from toolkit import images, input_media
from toolkit.errors import ConfigError
from toolkit.media import save_audio, save_video


def _frames(n=9, w=48, h=32):
    t = np.arange(n)[:, None, None, None]
    y, x = np.mgrid[0:h, 0:w]
    rgb = np.stack([x * 255 // (w - 1), y * 255 // (h - 1), np.zeros_like(x)], -1)[None] + t * 10
    return np.clip(rgb, 0, 255).astype(np.uint8)


def _tone(seconds=0.5, rate=24000, channels=2):
    t = np.arange(int(seconds * rate)) / rate
    return np.stack([np.sin(2 * np.pi * (220 + 110 * c) * t) * 0.5 for c in range(channels)])


def _write_with_pyav(path, fmt, codec, frames, rate=8):
    """A video as another tool writes it (not our save_video): another codec and container."""
    with av.open(str(path), "w", format=fmt) as c:
        s = c.add_stream(codec, rate=rate)
        s.width, s.height, s.pix_fmt = frames.shape[2], frames.shape[1], "yuv420p"
        for i, f in enumerate(frames):
            vf = av.VideoFrame.from_ndarray(f, format="rgb24")
            vf.pts = i
            c.mux(s.encode(vf))
        c.mux(s.encode())
    return str(path)


# -- videos ---------------------------------------------------------------------------------------
def test_video_info_of_our_mp4_and_of_other_containers(tmp_path):
    frames = _frames()
    ours = save_video(frames, tmp_path / "ours.mp4", fps=8)["path"]
    assert input_media.video_info(ours, "f") == (48, 32, 9)
    theirs = _write_with_pyav(tmp_path / "theirs.avi", "avi", "mpeg4", frames)
    assert input_media.video_info(theirs, "f") == (48, 32, 9)
    webm = _write_with_pyav(tmp_path / "theirs.webm", "webm", "libvpx-vp9", frames)
    assert input_media.video_info(webm, "f") == (48, 32, 9)


def test_load_video_takes_the_first_frames_at_the_request_size(tmp_path):
    path = save_video(_frames(12, 48, 32), tmp_path / "v.mp4", fps=8, lossless=True)["path"]
    out = input_media.load_video(path, 32, 32, 9, "crop")
    assert len(out) == 9 and all(f.size == (32, 32) and f.mode == "RGB" for f in out)
    first = np.asarray(input_media.load_video(path, 48, 32, 1)[0]).astype(int)
    assert np.abs(first - _frames(1)[0]).mean() < 8        # lossless x264 in yuv420p: chroma subsampled
    mask = input_media.load_video(path, 64, 64, 2, "fill", mask=True)
    assert mask[0].mode == "L" and np.asarray(mask[0])[0].min() == 255     # padded white: generated
    with pytest.raises(ValueError, match="12 frames decode, 13"):
        input_media.load_video(path, 48, 32, 13)


@pytest.mark.parametrize("make, message", [
    (lambda p: p.write_bytes(b"not a video at all" * 100) and str(p), "is not a video file"),
    (lambda p: save_audio(_tone(), p.with_suffix(".wav"), 24000)["path"], "holds no video stream"),
])
def test_not_a_video_is_refused_naming_the_field(tmp_path, make, message):
    path = make(tmp_path / "bad.mp4")
    with pytest.raises(ConfigError, match=message) as e:
        input_media.check_input(path, "sample.init_video", "video")
    assert e.value.key == "sample.init_video"


def test_truncated_video_is_refused(tmp_path):
    whole = save_video(_frames(), tmp_path / "v.mp4", fps=8)["path"]
    data = open(whole, "rb").read()
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(data[: len(data) // 3])
    with pytest.raises(ConfigError) as e:
        input_media.check_input(str(cut), "sample.init_video", "video")
    assert e.value.key == "sample.init_video"


def test_video_bounds(tmp_path, monkeypatch):
    path = save_video(_frames(9), tmp_path / "v.mp4", fps=8)["path"]
    monkeypatch.setattr(input_media, "MAX_INPUT_FRAMES", 8)
    with pytest.raises(ConfigError, match="over 8 frames"):
        input_media.check_input(path, "sample.init_video", "video")
    monkeypatch.setattr(input_media, "MAX_INPUT_FRAMES", 2048)
    monkeypatch.setattr(images, "MAX_INPUT_PIXELS", 48 * 32 - 1)
    with pytest.raises(ConfigError, match="48x32 frames"):
        input_media.check_input(path, "sample.init_video", "video")


def test_check_fits_needs_the_frames_the_request_makes(tmp_path):
    class Gen:
        init_video = save_video(_frames(9), tmp_path / "v.mp4", fps=8)["path"]
        mask_video = None
        num_frames = 9
    input_media.check_fits(Gen)
    Gen.num_frames = 17
    with pytest.raises(ConfigError, match="has 9 frames; the request makes 17") as e:
        input_media.check_fits(Gen)
    assert e.value.key == "sample.init_video"


# -- audio ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("ext", ["wav", "flac", "mp3"])
def test_audio_info_and_load(tmp_path, ext):
    path = save_audio(_tone(0.5, 24000, 1), tmp_path / f"a.{ext}", 24000)["path"]
    rate, seconds = input_media.check_input(path, "sample.init_audio", "audio")
    assert rate == 24000 and seconds == pytest.approx(0.5, abs=0.08)     # mp3 pads its frames
    audio = input_media.load_audio(path, 44100, 2)
    assert audio.dtype.is_floating_point and audio.shape[:2] == (1, 2)
    assert audio.shape[2] == pytest.approx(0.5 * 44100, abs=0.08 * 44100)
    assert np.allclose(audio[0, 0].numpy(), audio[0, 1].numpy())        # mono made stereo
    assert input_media.load_audio(path, 44100, 2, seconds=0.25).shape[2] == round(0.25 * 44100)


def test_audio_written_the_other_way_round(tmp_path):
    """An Ogg/Opus file as other tools write it (48 kHz, stereo), read at the model's rate."""
    path = str(tmp_path / "theirs.ogg")
    tone = _tone(0.4, 48000, 2).astype(np.float32)
    with av.open(path, "w", format="ogg") as c:
        s = c.add_stream("libopus", rate=48000)
        s.layout = "stereo"
        frame = av.AudioFrame.from_ndarray(tone, format="fltp", layout="stereo")
        frame.sample_rate, frame.pts = 48000, 0
        c.mux(s.encode(frame))
        c.mux(s.encode())
    rate, seconds = input_media.check_input(path, "sample.init_audio", "audio")
    assert rate == 48000 and seconds == pytest.approx(0.4, abs=0.05)
    assert input_media.load_audio(path, 16000, 1).shape[1] == 1


def test_bad_audio_is_refused(tmp_path, monkeypatch):
    video_only = save_video(_frames(), tmp_path / "v.mp4", fps=8)["path"]
    with pytest.raises(ConfigError, match="holds no audio stream"):
        input_media.check_input(video_only, "sample.init_audio", "audio")
    junk = tmp_path / "junk.wav"
    junk.write_bytes(b"RIFF" + b"\x00" * 40)
    with pytest.raises(ConfigError):
        input_media.check_input(str(junk), "sample.init_audio", "audio")
    long = save_audio(_tone(2.0, 8000, 1), tmp_path / "long.wav", 8000)["path"]
    monkeypatch.setattr(input_media, "MAX_INPUT_SECONDS", 1.0)
    with pytest.raises(ConfigError, match="over 1 s") as e:
        input_media.check_input(long, "sample.init_audio", "audio")
    assert e.value.key == "sample.init_audio"


def test_an_mp4_carries_a_soundtrack(tmp_path):
    """LTX-2's output: the video and its audio in one mp4 (an AAC track), the record says so, and the
    soundtrack reads back as an input audio."""
    tone = _tone(9 / 8, 24000, 2)
    rec = save_video(_frames(), tmp_path / "av.mp4", fps=8, audio=tone, sample_rate=24000)
    assert rec["audio"] is True and rec["sample_rate"] == 24000 and rec["channels"] == 2
    with av.open(rec["path"]) as c:
        assert [s.type for s in c.streams] == ["video", "audio"] and c.streams.audio[0].codec_context.name == "aac"
    rate, seconds = input_media.audio_info(rec["path"], "f")
    assert rate == 24000 and seconds == pytest.approx(9 / 8, abs=0.1)
    assert save_video(_frames(), tmp_path / "silent.mp4", fps=8)["audio"] is False
    with pytest.raises(ValueError, match="no sound track"):
        save_video(_frames(), tmp_path / "av.webp", fps=8, audio=tone, sample_rate=24000)


def test_data_urls_of_each_kind():
    import base64

    body = base64.b64encode(b"abc").decode()
    assert images.decode_data_url(f"data:video/mp4;base64,{body}", "f", "video") == (b"abc", "mp4")
    assert images.decode_data_url(f"data:audio/mpeg;base64,{body}", "f", "audio") == (b"abc", "mp3")
    with pytest.raises(ConfigError, match="data:audio/"):
        images.decode_data_url(f"data:image/png;base64,{body}", "sample.init_audio", "audio")


# -- the engine over HTTP: audio and video inputs as assets ---------------------------------------
TOKEN = "test-token-media"


@pytest.fixture(scope="module")
def eng(tiny, tmp_path_factory):
    from testing.engine_client import InProcessEngine

    e = InProcessEngine(str(tmp_path_factory.mktemp("engine_media")), token=TOKEN)
    e.tiny = tiny
    yield e
    e.close()


def _body(eng, arch, **sample):
    from toolkit.models.registry import ARCHS

    return {"model": {"arch": arch, "name_or_path": eng.tiny(arch)},
            "sample": {**ARCHS[arch].tiny.sample, "prompt": "a test", "seed": 7, **sample}}


def _upload(eng, name: str, data: bytes) -> str:
    r = eng.client.post("/assets", params={"name": name}, content=data)
    assert r.status_code == 200, r.text
    return r.json()["path"]


def _result(frames) -> tuple[dict, dict]:
    types = [h["type"] for h, _ in frames]
    assert types[0] == "start" and types[-1] == "end" and frames[-1][0]["status"] == "ok", frames[-2][0]
    return frames[0][0], next(h for h, _ in frames if h["type"] == "result")


def _decoded_audio(data: bytes):
    import io

    with av.open(io.BytesIO(data)) as c:
        return np.concatenate([f.to_ndarray() for f in c.decode(c.streams.audio[0])], axis=1)


def test_audio_tasks_from_an_upload_and_a_data_url(eng, tmp_path):
    """stable_audio3's a2a from an uploaded wav (another rate, mono) and its audio_inpaint from a data URL:
    the start frame says the task, and each file differs from text-to-audio's and from each other."""
    import base64

    from testing.fixtures import input_audio

    wav = open(input_audio(tmp_path / "in.wav", 1.5, 22050), "rb").read()
    asset = _upload(eng, "loop.wav", wav)
    start, a2a = _result(eng.client.stream(_body(eng, "stable_audio3", init_audio=asset, strength=0.7)))
    assert (start["sample"]["task"], start["sample"]["strength"]) == ("a2a", 0.7)
    url = "data:audio/wav;base64," + base64.b64encode(wav).decode()
    start, inp = _result(eng.client.stream(_body(eng, "stable_audio3", init_audio=url, mask_start=0.25, mask_end=0.5)))
    assert start["sample"]["task"] == "audio_inpaint" and start["sample"]["strength"] is None
    _s, t2a = _result(eng.client.stream(_body(eng, "stable_audio3")))
    outs = [_decoded_audio(eng.client.get(r["url"]).content) for r in (a2a, inp, t2a)]
    assert all(o.shape == outs[0].shape for o in outs)
    assert not np.array_equal(outs[0], outs[2]) and not np.array_equal(outs[1], outs[2])
    assert not np.array_equal(outs[0], outs[1])


def test_a_video_input_over_http(eng, tmp_path):
    """wan_vace's v2v from an uploaded video (another codec and size, longer than the request)."""
    from testing.fixtures import input_video

    asset = _upload(eng, "control.mp4", open(input_video(tmp_path / "c.mp4", 80, 56, 12), "rb").read())
    start, res = _result(eng.client.stream(_body(eng, "wan_vace", init_video=asset)))
    assert start["sample"]["task"] == "v2v" and res["num_frames"] == 9 and res["audio"] is False


def test_bad_audio_and_video_inputs_are_422_naming_the_field(eng, tmp_path):
    from testing.fixtures import input_audio, input_image, input_video

    png = _upload(eng, "still.png", open(input_image(tmp_path / "s.png"), "rb").read())
    wav = _upload(eng, "a.wav", open(input_audio(tmp_path / "a.wav", 1.0), "rb").read())
    short = _upload(eng, "short.mp4", open(input_video(tmp_path / "short.mp4", 64, 64, 5), "rb").read())
    junk = _upload(eng, "junk.mp4", b"\x00\x00\x00\x18ftypisom" + b"\x00" * 200)
    cases = [
        (_body(eng, "stable_audio3", init_audio=png), "sample.init_audio", "audio"),
        (_body(eng, "stable_audio3", init_audio=wav, task="audio_inpaint"), "sample.mask_start", "mask_end"),
        (_body(eng, "stable_audio3", init_audio=wav, mask_start=0.5, mask_end=0.25), "sample.mask_end", "not after"),
        (_body(eng, "stable_audio3", mask_start=0.5, mask_end=0.75), "sample.mask_start", "audio_inpaint"),
        (_body(eng, "stable_audio3", init_audio="data:image/png;base64,AAAA"), "sample.init_audio", "data:audio/"),
        (_body(eng, "wan_vace", init_video=short), "sample.init_video", "has 5 frames; the request makes 9"),
        (_body(eng, "wan_vace", init_video=junk), "sample.init_video", "video"),
        (_body(eng, "wan_vace", init_video=wav), "sample.init_video", "no video stream"),
        (_body(eng, "wan21", init_video=short), "sample.init_video", "v2v"),
        (_body(eng, "sd1", init_audio=wav), "sample.init_audio", "a2a"),
    ]
    for payload, field, words in cases:
        r = eng.client.post("/generate", json=payload)
        assert r.status_code == 422 and r.json()["field"] == field and words in r.json()["detail"], (field, r.text)
    assert eng.client.get("/health").status_code == 200

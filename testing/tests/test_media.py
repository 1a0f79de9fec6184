import os
import wave

import av
import numpy as np
import pytest
import torch
from PIL import Image

from toolkit import media
from toolkit.media import save_audio, save_image, save_media, save_video, to_uint8_frames

RNG = np.random.default_rng(0)


def _frames(n, h, w):
    return RNG.random((n, h, w, 3), dtype=np.float32)


def _expected_u8(x):
    # The documented (diffusers) conversion.
    return (np.clip(x, 0, 1) * 255).round().astype(np.uint8)


def _expected_i16(x):
    return np.round(np.clip(x, -1, 1) * 32767).astype(np.int16)


def _no_temp_files(directory):
    return [p.name for p in directory.iterdir() if p.name.endswith(".tmp")] == []


# ----------------------------------------------------------------------------- conversion


def test_to_uint8_frames_float_rounding_and_clipping():
    x = np.array([-0.5, 0.0, 0.5 / 255, 1.5 / 255, 0.5, 0.999, 1.0, 2.0], dtype=np.float32)
    img = np.broadcast_to(x[None, :, None], (2, 8, 3))
    out = to_uint8_frames(img)
    assert out.dtype == np.uint8 and out.shape == (2, 8, 3)
    np.testing.assert_array_equal(out, _expected_u8(img))
    assert out[0, :, 0].tolist() == [0, 0, 0, 2, 128, 255, 255, 255]  # round-half-even, then clip


def test_to_uint8_frames_layouts():
    video = _frames(3, 5, 7)  # FHWC
    want = _expected_u8(video)
    t = torch.from_numpy(video)
    np.testing.assert_array_equal(to_uint8_frames(video), want)
    np.testing.assert_array_equal(to_uint8_frames(video[None]), want)  # 1FHWC
    np.testing.assert_array_equal(to_uint8_frames(t.permute(0, 3, 1, 2)), want)  # FCHW
    np.testing.assert_array_equal(to_uint8_frames(t.permute(3, 0, 1, 2)[None]), want)  # BCFHW
    np.testing.assert_array_equal(to_uint8_frames(t[0].permute(2, 0, 1)), want[0])  # CHW
    pils = [Image.fromarray(f) for f in want]
    np.testing.assert_array_equal(to_uint8_frames(pils), want)
    np.testing.assert_array_equal(to_uint8_frames(pils[0]), want[0])
    # Gray and RGBA become RGB.
    assert to_uint8_frames(np.zeros((4, 6), np.float32)).shape == (4, 6, 3)
    rgba = Image.fromarray(np.dstack([want[0], np.full((5, 7), 9, np.uint8)]), "RGBA")
    np.testing.assert_array_equal(to_uint8_frames(rgba), want[0])
    # unless alpha is asked for and there is one
    np.testing.assert_array_equal(to_uint8_frames(rgba, alpha=True), np.asarray(rgba))
    np.testing.assert_array_equal(to_uint8_frames(pils[0], alpha=True), want[0])


@pytest.mark.parametrize("ext,mode", [("png", "RGBA"), ("webp", "RGBA"), ("jpg", "RGB")])
def test_an_rgba_image_keeps_its_alpha_where_the_format_has_one(tmp_path, ext, mode):
    """An RGBA VAE's image (Qwen-Image 2.1, Qwen-Image-Layered's layers): png and webp keep the alpha
    channel (png bit for bit; lossless webp the alpha, and the colour where it is not 0), jpg has none."""
    pixels = np.dstack([_expected_u8(_frames(1, 9, 11))[0], np.arange(99, dtype=np.uint8).reshape(9, 11)])
    info = save_image(Image.fromarray(pixels, "RGBA"), tmp_path / f"out.{ext}", quality=100)
    with Image.open(info["path"]) as back:
        assert back.mode == mode
        back = np.asarray(back)
    if ext == "png":
        np.testing.assert_array_equal(back, pixels)
    elif ext == "webp":
        seen = pixels[..., 3] > 0
        np.testing.assert_array_equal(back[..., 3], pixels[..., 3])
        np.testing.assert_array_equal(back[seen], pixels[seen])


def test_to_uint8_frames_rejects_batches():
    with pytest.raises(ValueError, match="B=1"):
        to_uint8_frames(torch.zeros(2, 3, 4, 8, 8))


# ----------------------------------------------------------------------------- images


def test_png_round_trip_is_pixel_exact(tmp_path):
    img = _frames(1, 21, 37)[0]
    info = save_image(img, tmp_path / "a" / "b" / "out.png")  # parents are created
    assert info == {"path": str(tmp_path / "a" / "b" / "out.png"), "kind": "image", "ext": "png",
                    "bytes": os.path.getsize(info["path"]), "width": 37, "height": 21}
    np.testing.assert_array_equal(np.asarray(Image.open(info["path"]).convert("RGB")), _expected_u8(img))


@pytest.mark.parametrize("ext,fmt", [("jpg", "JPEG"), ("webp", "WEBP")])
def test_lossy_images_decode_with_right_size(tmp_path, ext, fmt):
    info = save_image(torch.rand(3, 21, 37), tmp_path / f"out.{ext}", quality=80)
    with Image.open(info["path"]) as im:
        assert im.format == fmt and im.size == (37, 21)
    assert (info["width"], info["height"], info["ext"]) == (37, 21, ext)


def test_webp_quality_100_is_lossless(tmp_path):
    img = (RNG.random((16, 16, 3)) * 255).astype(np.uint8)
    info = save_image(img, tmp_path / "out.webp", quality=100)
    np.testing.assert_array_equal(np.asarray(Image.open(info["path"]).convert("RGB")), img)


def test_suffix_follows_ext(tmp_path):
    info = save_image(_frames(1, 8, 8)[0], tmp_path / "out.png", ext="jpg")
    assert info["path"] == str(tmp_path / "out.jpg") and info["ext"] == "jpg"
    assert not (tmp_path / "out.png").exists()
    assert Image.open(info["path"]).format == "JPEG"
    # .jpeg is an accepted spelling of jpg and is kept.
    assert save_image(_frames(1, 8, 8)[0], tmp_path / "x.jpeg")["path"] == str(tmp_path / "x.jpeg")


# ----------------------------------------------------------------------------- videos


def test_mp4_frames_fps_codec_and_padded_size(tmp_path):
    info = save_video(_frames(9, 33, 47), tmp_path / "v.mp4", fps=24)  # odd size -> padded
    assert (info["width"], info["height"], info["num_frames"]) == (48, 34, 9)
    assert info["fps"] == 24.0 and info["duration"] == pytest.approx(9 / 24)
    with av.open(info["path"]) as c:
        s = c.streams.video[0]
        assert s.codec_context.name == "h264"
        assert s.frames == 9 and s.average_rate == 24
        assert (s.width, s.height) == (48, 34)
        assert sum(1 for _ in c.decode(s)) == 9


def test_mp4_ntsc_rate_is_exact(tmp_path):
    info = save_video(_frames(3, 16, 16), tmp_path / "v.mp4", fps=30000 / 1001)
    with av.open(info["path"]) as c:
        assert c.streams.video[0].average_rate * 1001 == 30000


def test_mp4_is_deterministic(tmp_path):
    frames = _frames(12, 32, 48)
    a = save_video(frames, tmp_path / "a.mp4", fps=8)
    b = save_video(frames, tmp_path / "b.mp4", fps=8)
    assert open(a["path"], "rb").read() == open(b["path"], "rb").read()


_ENCODE = """
import hashlib, sys, numpy as np
from toolkit.media import save_video
rng = np.random.default_rng(3)
y, x = np.mgrid[0:64, 0:64]
frames = np.stack([np.clip(np.stack([(x * 4 + t * 9) % 256, (y * 4 + t * 5) % 256, ((x + y) * 2) % 256], -1)
                           + rng.normal(0, 20, (64, 64, 3)), 0, 255).astype(np.uint8) for t in range(9)])
rec = save_video(frames, sys.argv[1], fps=8)
print(hashlib.sha256(open(rec["path"], "rb").read()).hexdigest())
"""


@pytest.mark.parametrize("ext", ["mp4", "webm"])
def test_video_bytes_do_not_depend_on_memory_contents(tmp_path, ext):
    """A small noisy clip (which x264's mb-tree encoded differently when the allocator handed it other
    garbage) gives one file whatever MALLOC_PERTURB_ fills fresh memory with."""
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    digests = set()
    for perturb in (0, 1, 7, 42, 99, 200):
        p = subprocess.run([sys.executable, "-c", _ENCODE, str(tmp_path / f"v{perturb}.{ext}")], cwd=root,
                           env={**os.environ, "MALLOC_PERTURB_": str(perturb)}, capture_output=True, text=True,
                           timeout=120)
        assert p.returncode == 0, p.stderr[-2000:]
        digests.add(p.stdout.strip())
    assert len(digests) == 1, digests


def _smooth_frames(n, h, w):
    """Moving gradients: content a lossy codec keeps close (noise it would not)."""
    y, x = np.mgrid[0:h, 0:w]
    return np.stack([np.stack([(x * 4 + t * 9) % 256, (y * 4 + t * 5) % 256, (x + y) * 2 % 256], -1)
                     for t in range(n)]).astype(np.uint8)


def test_webm_frames_codec_close_pixels_and_padded_size(tmp_path):
    frames = _smooth_frames(9, 33, 47)
    info = save_video(frames, tmp_path / "v.webm", fps=24)  # odd size -> padded, as mp4
    assert (info["ext"], info["width"], info["height"], info["num_frames"]) == ("webm", 48, 34, 9)
    assert info["fps"] == 24.0 and info["audio"] is False and info["path"].endswith("v.webm")
    with av.open(info["path"]) as c:
        assert c.format.name.split(",")[0] in ("matroska", "webm")
        s = c.streams.video[0]
        assert s.codec_context.name == "vp9" and s.average_rate == 24
        assert (s.codec_context.width, s.codec_context.height) == (48, 34)
    got = _decoded(info["path"])
    assert got.shape == (9, 34, 48, 3)
    error = np.abs(got[:, :33, :47].astype(int) - frames).mean()
    assert error < 4, error                               # crf 18 on 4:2:0: close, not exact


def _decoded(path):
    with av.open(path) as c:
        return np.stack([f.to_ndarray(format="rgb24") for f in c.decode(video=0)])


def test_webm_lossless_is_closer_than_its_crf(tmp_path):
    frames = _expected_u8(_frames(3, 16, 16))            # noise: what a lossy crf smooths away
    lossless = _decoded(save_video(frames, tmp_path / "l.webm", fps=8, lossless=True)["path"])
    lossy = _decoded(save_video(frames, tmp_path / "c.webm", fps=8)["path"])
    # lossless VP9 of yuv420p: only the RGB <-> 4:2:0 conversion differs
    assert np.abs(lossless.astype(int) - frames).mean() < np.abs(lossy.astype(int) - frames).mean()


@pytest.mark.parametrize("audio", [False, True])
def test_webm_is_deterministic(tmp_path, audio):
    frames = _frames(12, 32, 48)
    kw = {"audio": RNG.uniform(-1, 1, (2, 4000)), "sample_rate": 16000} if audio else {}
    a = save_video(frames, tmp_path / "a.webm", fps=8, metadata={"aitk": "{}"}, **kw)
    b = save_video(frames, tmp_path / "b.webm", fps=8, metadata={"aitk": "{}"}, **kw)
    assert open(a["path"], "rb").read() == open(b["path"], "rb").read()


@pytest.mark.parametrize("rate", [24000, 22050])
def test_webm_soundtrack_is_opus_at_48k(tmp_path, rate):
    """Opus decodes at 48 kHz whatever went in: LTX-2's 24 kHz, or a rate Opus does not take, is resampled."""
    stored = 48000
    t = np.arange(rate // 2) / rate                     # half a second of 440 Hz, stereo
    audio = np.stack([0.5 * np.sin(2 * np.pi * 440 * t), 0.25 * np.sin(2 * np.pi * 440 * t)])
    info = save_video(_smooth_frames(4, 16, 16), tmp_path / "s.webm", fps=8, audio=audio, sample_rate=rate)
    assert info["audio"] is True and info["sample_rate"] == stored and info["channels"] == 2
    with av.open(info["path"]) as c:
        assert [s.codec_context.name for s in c.streams] == ["vp9", "opus"]
        a = c.streams.audio[0]
        assert a.rate == stored and a.codec_context.channels == 2
        got = np.concatenate([f.to_ndarray() for f in c.decode(a)], axis=1)
    assert abs(got.shape[1] - stored // 2) <= stored // 50          # its length, to a frame or two of Opus
    rms = np.sqrt((got ** 2).mean(axis=1))
    np.testing.assert_allclose(rms, [0.5 / np.sqrt(2), 0.25 / np.sqrt(2)], rtol=0.1)


def test_webp_video_has_no_sound(tmp_path):
    with pytest.raises(ValueError, match="webp video has no sound track: write mp4 or webm"):
        save_video(_frames(2, 8, 8), tmp_path / "v.webp", fps=8, audio=np.zeros((1, 800)), sample_rate=8000)
    assert list(tmp_path.iterdir()) == []


def test_animated_webp_lossless(tmp_path):
    frames = (RNG.random((5, 15, 17, 3)) * 255).astype(np.uint8)  # distinct frames (libwebp merges repeats)
    info = save_video(frames, tmp_path / "v.webp", fps=10, lossless=True)
    assert (info["width"], info["height"], info["num_frames"]) == (17, 15, 5)
    with Image.open(info["path"]) as im:
        assert im.n_frames == 5 and im.info["loop"] == 0
        for i in range(5):
            im.seek(i)
            np.testing.assert_array_equal(np.asarray(im.convert("RGB")), frames[i])
            assert im.info["duration"] == 100


# ----------------------------------------------------------------------------- audio


def test_wav_exact(tmp_path):
    audio = RNG.uniform(-1.3, 1.3, (2, 4410)).astype(np.float32)  # includes out-of-range samples
    info = save_audio(audio, tmp_path / "a.wav", sample_rate=22050)
    assert info["channels"] == 2 and info["num_samples"] == 4410 and info["duration"] == 0.2
    with wave.open(info["path"]) as w:
        assert (w.getnchannels(), w.getsampwidth(), w.getframerate(), w.getnframes()) == (2, 2, 22050, 4410)
        data = np.frombuffer(w.readframes(4410), "<i2").reshape(-1, 2).T
    np.testing.assert_array_equal(data, _expected_i16(audio.astype(np.float64)))


@pytest.mark.parametrize("shape,channels", [((100,), 1), ((1, 2, 100), 2), ((3, 100), 3)])
def test_audio_shapes(tmp_path, shape, channels):
    info = save_audio(torch.zeros(shape), tmp_path / "a.wav", 8000)
    assert info["channels"] == channels and info["num_samples"] == 100


def _decode_audio(path):
    with av.open(path) as c:
        s = c.streams.audio[0]
        frames = [f.to_ndarray() for f in c.decode(s)]
        return s.codec_context.name, s.rate, s.channels, frames


def test_flac_is_lossless_16bit(tmp_path):
    audio = RNG.uniform(-1, 1, (2, 16000))
    info = save_audio(audio, tmp_path / "a.flac", 16000)
    codec, rate, channels, frames = _decode_audio(info["path"])
    assert (codec, rate, channels) == ("flac", 16000, 2)
    decoded = np.concatenate(frames, axis=1).reshape(-1, 2).T  # packed s16 -> (C, T)
    np.testing.assert_array_equal(decoded, _expected_i16(audio))


def test_mp3_duration(tmp_path):
    t = np.arange(24000) / 24000
    info = save_audio(0.5 * np.sin(2 * np.pi * 440 * t), tmp_path / "a.mp3", 24000, bitrate=64000)
    codec, rate, channels, frames = _decode_audio(info["path"])
    assert codec.startswith("mp3") and rate == 24000 and channels == 1
    assert sum(f.shape[-1] for f in frames) / rate == pytest.approx(1.0, abs=0.06)


def test_mp3_rejects_unsupported_rate(tmp_path):
    with pytest.raises(ValueError, match="sample rate 22000"):
        save_audio(np.zeros(100), tmp_path / "a.mp3", 22000)
    assert list(tmp_path.iterdir()) == []


# ----------------------------------------------------------------------------- atomicity


class _ContainerFailingOnFlush:
    """Wraps a real PyAV output container; the final (flush) mux raises, after data was written."""

    def __init__(self, real):
        self._real, self._calls = real, 0

    def __getattr__(self, name):
        return getattr(self._real, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._real.close()

    def mux(self, packets):
        self._real.mux(packets)
        self._calls += 1
        if self._calls == 4:
            raise RuntimeError("encoder exploded")


def _break_mp4(monkeypatch):
    real_open = av.open
    monkeypatch.setattr(av, "open", lambda *a, **k: _ContainerFailingOnFlush(real_open(*a, **k)))


def _break_wav(monkeypatch):
    real = wave.Wave_write.writeframes

    def writeframes(self, data):
        real(self, data[: len(data) // 2])  # a partial file really exists on disk
        raise OSError("disk on fire")

    monkeypatch.setattr(wave.Wave_write, "writeframes", writeframes)


def _break_png(monkeypatch):
    def save(self, fp, *a, **k):
        with open(fp, "wb") as f:
            f.write(b"\x89PNG half")
        raise OSError("disk on fire")

    monkeypatch.setattr(Image.Image, "save", save)


@pytest.mark.parametrize("name,breaker,write", [
    ("v.mp4", _break_mp4, lambda p: save_video(_frames(3, 16, 16), p, fps=8)),
    ("a.wav", _break_wav, lambda p: save_audio(np.zeros((2, 1000)), p, 8000)),
    ("i.png", _break_png, lambda p: save_image(_frames(1, 8, 8)[0], p)),
])
def test_failed_write_leaves_no_temp_and_keeps_existing_file(tmp_path, monkeypatch, name, breaker, write):
    final = tmp_path / name
    final.write_bytes(b"previous good file")
    breaker(monkeypatch)
    with pytest.raises((RuntimeError, OSError), match="exploded|on fire"):
        write(final)
    assert final.read_bytes() == b"previous good file"
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]


def test_atomic_path_success_and_failure(tmp_path):
    final = tmp_path / "sub" / "x.bin"
    with media.atomic_path(final) as tmp:
        assert tmp.parent == final.parent and tmp.name.startswith(".x.bin.") and tmp.suffix == ".tmp"
        tmp.write_bytes(b"new")
        assert not final.exists()
    assert final.read_bytes() == b"new" and _no_temp_files(final.parent)
    with pytest.raises(KeyError):
        with media.atomic_path(final) as tmp:
            tmp.write_bytes(b"partial")
            raise KeyError("boom")
    assert final.read_bytes() == b"new" and _no_temp_files(final.parent)


# ----------------------------------------------------------------------------- validation / dispatch


@pytest.mark.parametrize("call", [
    lambda p: save_image(np.zeros((4, 4, 3)), p / "x.gif"),
    lambda p: save_video(np.zeros((2, 4, 4, 3)), p / "x.gif", fps=8),
    lambda p: save_audio(np.zeros(10), p / "x.ogg", 8000),
    lambda p: save_media("image", np.zeros((4, 4, 3)), p / "x.png", ext="gif"),
])
def test_bad_ext_raises_naming_it(tmp_path, call):
    with pytest.raises(ValueError, match=r"'(gif|ogg)'.*allowed"):
        call(tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_webp_is_image_or_video_by_kind_but_mp4_is_not_an_image(tmp_path):
    with pytest.raises(ValueError, match="'mp4'.*png, jpg, webp"):
        save_image(np.zeros((4, 4, 3)), tmp_path / "x.mp4")


def test_save_media_dispatch(tmp_path):
    assert save_media("image", _frames(1, 8, 8)[0], tmp_path / "i", ext="png")["kind"] == "image"
    v = save_media("video", _frames(2, 8, 8), tmp_path / "v", ext="mp4", fps=4, crf=30)
    assert v["kind"] == "video" and v["path"].endswith("v.mp4")
    # a soundtrack's sample rate reaches the video writer (the holders' media_kwargs pass it so)
    sv = save_media("video", _frames(2, 8, 8), tmp_path / "sv.mp4", ext="mp4", fps=4, audio=np.zeros((2, 800)),
                    sample_rate=8000)
    assert sv["audio"] is True and sv["sample_rate"] == 8000 and sv["channels"] == 2
    a = save_media("audio", np.zeros(800), tmp_path / "a.flac", ext="flac", sample_rate=8000)
    assert a["kind"] == "audio" and a["duration"] == 0.1
    with pytest.raises(ValueError, match="fps"):
        save_media("video", _frames(2, 8, 8), tmp_path / "v.mp4", ext="mp4")
    with pytest.raises(ValueError, match="kind"):
        save_media("text", "hi", tmp_path / "t.txt", ext="txt")


# ----------------------------------------------------------------------------- reading metadata: hostile files
# Every container read_metadata walks can repeat its text or its blocks: each is held to MAX_TEXT_ITEMS
# texts, MAX_TEXT_BYTES of text and MAX_BLOCKS blocks per file (test_hostile_files.py: PNG, the routes).

import struct  # noqa: E402

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from toolkit.media import MAX_BLOCKS, MAX_TEXT_BYTES, MAX_TEXT_ITEMS, MetadataError, read_metadata  # noqa: E402

TOO_MANY = MAX_TEXT_ITEMS + 1


def _jpeg(*segments: bytes) -> bytes:
    return b"\xff\xd8" + b"".join(segments) + b"\xff\xd9"


def _com(text: bytes) -> bytes:
    return b"\xff\xfe" + struct.pack(">H", len(text) + 2) + text


def _riff(form: bytes, *chunks: bytes) -> bytes:
    body = form + b"".join(chunks)
    return b"RIFF" + struct.pack("<I", len(body)) + body


def _rchunk(kind: bytes, body: bytes) -> bytes:
    return kind + struct.pack("<I", len(body)) + body + b"\x00" * (len(body) & 1)


def _box(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", 8 + len(body)) + kind + body


def _flac_comments(entries: list, count: int | None = None) -> bytes:
    body = struct.pack("<I", 0) + struct.pack("<I", len(entries) if count is None else count)
    body += b"".join(struct.pack("<I", len(e)) + e for e in entries)
    return b"fLaC" + bytes([0x80 | 4]) + len(body).to_bytes(3, "big") + body


def _id3(*frames: bytes) -> bytes:
    body = b"".join(frames)
    return b"ID3\x04\x00\x00" + media._syncsafe(len(body)) + body


def _comm(text: bytes) -> bytes:
    body = b"\x03XXX\x00" + text
    return b"COMM" + media._syncsafe(len(body)) + b"\x00\x00" + body


def _el(eid: int, body: bytes, size: bytes | None = None) -> bytes:
    """An EBML element: its id, its size (8 bytes, or `size` as given), its body."""
    return eid.to_bytes((eid.bit_length() + 7) // 8, "big") + (size or b"\x01" + len(body).to_bytes(7, "big")) + body


def _webm(*segment: bytes, doctype: bytes = b"webm") -> bytes:
    return _el(0x1A45DFA3, _el(0x4282, doctype)) + _el(0x18538067, b"".join(segment))


def _tags(*simple_tags: bytes, track: bool = False) -> bytes:
    """Tags holding one Tag (for the whole file, or for track 1) of `simple_tags`."""
    return _el(0x1254C367, _el(0x7373, _el(0x63C0, _el(0x63C5, b"\x01") if track else b"") + b"".join(simple_tags)))


def _simple(name: bytes, value: bytes) -> bytes:
    return _el(0x67C8, _el(0x45A3, name) + _el(0x4487, value))


@pytest.mark.parametrize("name,make", [
    ("webm COMMENT tags", lambda n: _webm(_tags(*[_simple(b"COMMENT", b"x%d" % i) for i in range(n)]))),
    ("jpeg COM segments", lambda n: _jpeg(*[_com(b"x%d" % i) for i in range(n)])),
    ("wav ICMT chunks", lambda n: _riff(b"WAVE", _rchunk(b"LIST", b"INFO" + b"".join(
        _rchunk(b"ICMT", b"x%d" % i) for i in range(n))))),
    ("flac comments", lambda n: _flac_comments([b"COMMENT=x%d" % i for i in range(n)])),
    ("mp3 COMM frames", lambda n: _id3(*[_comm(b"x%d" % i) for i in range(n)])),
])
def test_a_file_repeating_its_text_is_refused(name, make):
    with pytest.raises(MetadataError, match=f"more than {MAX_TEXT_ITEMS} text chunks"):
        read_metadata(make(TOO_MANY))
    # at the limit every one is read, the last winning (as Pillow's info and ffmpeg's tags have it)
    assert read_metadata(make(MAX_TEXT_ITEMS))["items"]["comment"] == f"x{MAX_TEXT_ITEMS - 1}"


def test_a_webp_repeating_its_xmp_is_refused():
    with pytest.raises(MetadataError, match="text chunks"):
        read_metadata(_riff(b"WEBP", *[_rchunk(b"XMP ", b"<x/>")] * TOO_MANY))


@pytest.mark.parametrize("name,data", [
    ("jpeg fill bytes", b"\xff\xd8" + b"\xff" * (MAX_BLOCKS + 8) + b"\xd9"),
    ("mp4 boxes", _box(b"ftyp", b"isom\x00\x00\x02\x00") + _box(b"moov", _box(b"free", b"") * (MAX_BLOCKS + 8))),
    ("webm elements", _webm(_el(0xEC, b"") * (MAX_BLOCKS + 8))),
    ("wav chunks", _riff(b"WAVE", _rchunk(b"junk", b"") * (MAX_BLOCKS + 8))),
    ("flac comment entries", _flac_comments([b""] * (MAX_BLOCKS + 8))),
    ("mp3 frames", _id3(*[b"TXXX" + media._syncsafe(0) + b"\x00\x00"] * (MAX_BLOCKS + 8))),
])
def test_a_file_of_countless_blocks_is_refused(name, data):
    with pytest.raises(MetadataError, match=f"more than {MAX_BLOCKS} chunks"):
        read_metadata(data)


@pytest.mark.parametrize("name,make", [
    ("webp XMP", lambda text: _riff(b"WEBP", _rchunk(b"XMP ", text))),
    ("webm COMMENT", lambda text: _webm(_tags(_simple(b"COMMENT", text)))),
    ("wav ICMT", lambda text: _riff(b"WAVE", _rchunk(b"LIST", b"INFO" + _rchunk(b"ICMT", text)))),
    ("flac DESCRIPTION", lambda text: _flac_comments([b"DESCRIPTION=" + text])),
    ("mp3 COMM", lambda text: _id3(_comm(text))),
])
def test_a_file_of_more_text_than_a_file_may_hold_is_refused(name, make):
    with pytest.raises(MetadataError, match=f"more than {MAX_TEXT_BYTES} bytes of text"):
        read_metadata(make(b"{" + b"x" * MAX_TEXT_BYTES))
    read_metadata(make(b"{" + b"x" * 1000))                      # within the bound: read


def test_webm_metadata_round_trip_as_ffmpeg_reads_it(tmp_path):
    meta = {"parameters": "a fox", "aitk": '{"version": 1, "sample": {"prompt": "a f\u00f6x"}}'}
    info = save_video(_frames(2, 16, 16), tmp_path / "v.webm", fps=8, metadata=meta, audio=np.zeros((1, 800)),
                      sample_rate=8000)
    data = open(info["path"], "rb").read()
    got = read_metadata(data)
    assert got["format"] == "webm" and got["aitk"] == meta["aitk"] and got["parameters"] is None   # the JSON only
    with av.open(info["path"]) as c:
        assert c.metadata["COMMENT"] == meta["aitk"]               # ffmpeg's Matroska tag names are upper case
    assert media.sniff_format(data) == "webm"


def test_webm_reading_takes_the_file_s_comment_not_a_track_s():
    got = read_metadata(_webm(_tags(_simple(b"COMMENT", b"{track}"), track=True),
                              _tags(_simple(b"ENCODER", b"x"), _simple(b"comment", b"{file}"))))
    assert got["aitk"] == "{file}" and got["items"] == {"comment": "{file}"}
    assert read_metadata(_webm())["aitk"] is None                   # no tags: nothing, not an error


def test_a_matroska_file_is_not_read_as_webm():
    with pytest.raises(MetadataError, match="not a .*WebM"):
        read_metadata(_webm(_tags(_simple(b"COMMENT", b"{}")), doctype=b"matroska"))


def test_a_cut_webm_gives_its_comment_or_a_metadata_error(tmp_path):
    """Cut inside the comment: refused (a part would be another answer); cut in the frames after the
    header's tags: the comment is whole."""
    data = _written("webm", tmp_path)
    at = data.index(b'{"version"')
    with pytest.raises(MetadataError, match="cut short"):
        read_metadata(data[:at + 5])
    assert read_metadata(data[:-10])["aitk"].startswith('{"version"')
    for n in range(0, at + 5, 3):                                   # every cut up to there: no crash
        try:
            read_metadata(data[:n])
        except MetadataError:
            pass


@pytest.mark.parametrize("name,data,expected", [
    # a live stream's segment runs to the end of the file
    ("unknown-size segment", _el(0x1A45DFA3, _el(0x4282, b"webm")) + _el(0x18538067, _tags(_simple(b"COMMENT", b"{}")),
                                                                       size=b"\xff"), "{}"),
    # what follows a cluster of unknown size is not reached (its blocks are not walked)
    ("unknown-size cluster first", _webm(_el(0x1F43B675, b"\x00" * 8, size=b"\xff"), _tags(_simple(b"COMMENT", b"{}"))),
     None),
    ("a petabyte tag", _webm(_el(0x1254C367, b"", size=b"\x01\x7f" + b"\xff" * 6)), None),
    ("a zero byte where an id goes", _webm(b"\x00" * 16), MetadataError),
    ("a 5-byte id", _webm(b"\x08" + b"\x00" * 8), MetadataError),
])
def test_odd_webm_structures_read_or_refuse(name, data, expected):
    if expected is MetadataError:
        with pytest.raises(MetadataError, match="broken webm"):
            read_metadata(data)
    else:
        assert read_metadata(data)["aitk"] == expected


def test_a_huge_vorbis_comment_count_is_a_broken_file_not_a_long_loop():
    with pytest.raises(MetadataError, match="broken flac"):
        read_metadata(_flac_comments([b"COMMENT=x"], count=2**32 - 1))


_WRITTEN: dict = {}


def _written(ext: str, tmp_dir) -> bytes:
    """A real file of `ext` with both texts, as the engine writes it (made once)."""
    if ext not in _WRITTEN:
        meta = {"parameters": "a fox\nSteps: 2, Sampler: Euler, CFG scale: 1, Seed: 3, Size: 8x8",
                "aitk": '{"version": 1, "model": {"arch": "zimage"}, "sample": {"prompt": "a fox"}}'}
        path = tmp_dir / f"f.{ext}"
        if ext in ("png", "jpg", "webp"):
            save_image(_frames(1, 8, 8)[0], path, metadata=meta)
        elif ext in ("mp4", "webm"):
            save_video(_frames(2, 16, 16), path, fps=8, metadata=meta)
        else:
            save_audio(np.zeros(2205), path, 22050, metadata=meta)
        _WRITTEN[ext] = path.read_bytes()
    return _WRITTEN[ext]


_edit = st.tuples(st.sampled_from(["flip", "insert", "delete", "big"]), st.integers(0, 10**6), st.integers(0, 255))


@settings(derandomize=True, max_examples=300, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.sampled_from(["png", "jpg", "webp", "mp4", "webm", "wav", "flac", "mp3"]),
       st.lists(_edit, min_size=1, max_size=4))
def test_any_damaged_file_gives_bounded_text_or_a_metadata_error(tmp_path, ext, edits):
    data = bytearray(_written(ext, tmp_path))
    for op, at, byte in edits:
        at %= len(data)
        if op == "flip":
            data[at] ^= byte or 1
        elif op == "insert":
            data[at:at] = bytes([byte])
        elif op == "delete":
            del data[at]
        else:                                             # a length field's top byte set: claims of gigabytes
            data[at] = 0xFF
    try:
        meta = read_metadata(bytes(data))
    except MetadataError:
        return
    texts = [meta["parameters"] or "", meta["aitk"] or "", *meta["items"].values()]
    assert all(len(t) <= MAX_TEXT_BYTES for t in texts) and len(meta["items"]) <= MAX_TEXT_ITEMS
    for text in texts:
        text.encode("utf-8")                              # no lone surrogate

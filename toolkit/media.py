"""Writers for generated media (images, videos, audio), and the reader of what they embed.

Every writer goes through :func:`atomic_path`, so a crash or exception mid-write
never leaves a half-written file at the final path (readers either see the old
file or the complete new one). Metadata is written into the same temp file before
the rename, so a file is never seen without it.

``metadata=`` (every writer): how the file was made, ``{"parameters": A1111 text, "aitk": JSON text}``
(either may be missing; toolkit/file_settings.py builds both). Where each goes:

    png        tEXt/iTXt chunks `parameters` and `aitk` (what A1111 writes; Pillow's add_text)
    jpg, webp  EXIF UserComment = `parameters` ("UNICODE\0" + UTF-16BE, as A1111 writes it with piexif),
               XMP <aitk:settings> = `aitk`; in JPEG each goes only where it fits its 64 KiB segment
    mp4        container tag `comment` = `aitk` (the ©cmt atom); a soundtrack (LTX-2's) as an AAC stream
    webm       container tag `comment` = `aitk` (a file-level Tags/Tag/SimpleTag COMMENT); VP9 video, a
               soundtrack as an Opus stream
    wav        LIST/INFO ICMT chunk = `aitk`
    flac       Vorbis comment (ffmpeg's `comment`, written as DESCRIPTION=) = `aitk`
    mp3        ID3v2.4 COMM frame = `aitk`

:func:`read_metadata` reads them back from a file's bytes by parsing the containers
directly (no pixel or audio decoding, no ffmpeg): safe for untrusted uploads.
"""

from __future__ import annotations

import contextlib
import contextvars
import html
import os
import secrets
import struct
import sys
import wave
import zlib
from fractions import Fraction
from pathlib import Path
from typing import Iterator

import numpy as np
from PIL import Image

IMAGE_EXTS = ("png", "jpg", "webp")
VIDEO_EXTS = ("mp4", "webm", "webp")
AUDIO_EXTS = ("wav", "flac", "mp3")
OUTPUT_EXTS = {"image": IMAGE_EXTS, "video": VIDEO_EXTS, "audio": AUDIO_EXTS}    # by modality
# what each written format is served as: not left to the mimetypes module, whose table depends on the
# machine (/etc/mime.types; Python's own has no .flac)
MIME_TYPES = {"png": "image/png", "jpg": "image/jpeg", "webp": "image/webp", "mp4": "video/mp4",
              "webm": "video/webm", "wav": "audio/wav", "flac": "audio/flac", "mp3": "audio/mpeg"}

_EXT_ALIASES = {"jpeg": "jpg"}

PARAMETERS_KEY = "parameters"     # the A1111 text (A1111's PNG chunk name)
SETTINGS_KEY = "aitk"             # our JSON
XMP_NS = "https://github.com/ostris/ai-toolkit/ns/settings/1.0/"
JPEG_MAX_SEGMENT = 65533          # bytes after a JPEG marker's length field (Pillow's MAX_BYTES_IN_MARKER)
XMP_HEADER = b"http://ns.adobe.com/xap/1.0/\x00"


# ----------------------------------------------------------------------------- atomic writes


_COMMIT_GUARD: contextvars.ContextVar = contextvars.ContextVar("aitk_commit_guard", default=None)


@contextlib.contextmanager
def commit_guard(check):
    """While active, `check()` runs right before atomic_path moves a finished file into place; if it
    raises, the file is discarded (a cancel that lands while a file is encoded)."""
    token = _COMMIT_GUARD.set(check)
    try:
        yield
    finally:
        _COMMIT_GUARD.reset(token)


@contextlib.contextmanager
def atomic_path(final_path) -> Iterator[Path]:
    """Yield a temp path next to ``final_path``; on success fsync it and move it into place.

    On any exception the temp file is removed and ``final_path`` is left untouched.
    """
    final = Path(final_path)
    final.parent.mkdir(parents=True, exist_ok=True)
    # Same directory so os.replace is an atomic rename (no cross-device copy).
    # O_EXCL guarantees the name is ours; 0o666 lets the umask decide permissions
    # like a normal open() would (mkstemp would force 0600).
    while True:
        tmp = final.with_name(f".{final.name}.{secrets.token_hex(6)}.tmp")
        try:
            os.close(os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
            break
        except FileExistsError:
            continue
    try:
        yield tmp
        # Writers (Pillow, PyAV, wave) close their own handles; fsync via a fresh fd
        # flushes the file's data to disk before the rename makes it visible.
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        guard = _COMMIT_GUARD.get()
        if guard is not None:
            guard()
        os.replace(tmp, final)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    _fsync_dir(final.parent)


def _fsync_dir(directory: Path) -> None:
    # Persist the rename itself; not supported on every platform (e.g. Windows).
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _norm_ext(ext: str) -> str:
    ext = ext.lower().lstrip(".")
    return _EXT_ALIASES.get(ext, ext)


def mime_type(path) -> str | None:
    """The content type a file is served as: its format's (MIME_TYPES), else the mimetypes module's guess."""
    ext = _norm_ext(Path(path).suffix)
    if ext in MIME_TYPES:
        return MIME_TYPES[ext]
    import mimetypes

    return mimetypes.guess_type(str(path))[0]


def _resolve(path, ext, allowed: tuple[str, ...]) -> tuple[Path, str]:
    """Pick the extension (explicit or from the suffix), validate it, make the suffix match."""
    path = Path(path)
    ext = _norm_ext(ext if ext is not None else path.suffix)
    if ext not in allowed:
        raise ValueError(f"unsupported extension {ext!r}; allowed: {', '.join(allowed)}")
    if _norm_ext(path.suffix) != ext:  # ".jpeg" is kept for jpg; anything else is replaced
        path = path.with_suffix("." + ext)
    return path, ext


# ----------------------------------------------------------------------------- conversion


def _is_tensor(x) -> bool:
    # Avoid importing torch here: if it isn't loaded, x can't be a tensor.
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def _to_rgb(arr: np.ndarray) -> np.ndarray:
    """Channel-last array -> 3 channels (gray repeated, alpha dropped)."""
    channels = arr.shape[-1]
    if channels == 3:
        return arr
    if channels == 1:
        return np.repeat(arr, 3, axis=-1)
    if channels == 4:
        return arr[..., :3]
    raise ValueError(f"expected 1, 3 or 4 channels, got shape {arr.shape}")


def to_uint8_frames(x, *, alpha: bool = False) -> np.ndarray:
    """Convert an image or video to uint8 RGB: HWC for one image, FHWC for several frames. With
    `alpha`, an alpha channel the input has is kept (RGBA; an RGBA VAE's images, Qwen-Image 2.1's).

    Accepts a PIL image, a list of PIL images, float numpy arrays in [0, 1] (HW, HWC,
    FHWC, or 1FHWC), uint8 numpy arrays (same layouts), and torch tensors in [0, 1]
    (CHW, FCHW, or BCFHW with B=1, the layout video VAEs decode to).
    """
    if isinstance(x, Image.Image):
        return np.asarray(x.convert("RGBA" if alpha and "A" in x.getbands() else "RGB"))
    if isinstance(x, (list, tuple)):
        if not x:
            raise ValueError("no frames")
        return np.stack([to_uint8_frames(f, alpha=alpha) for f in x])

    if _is_tensor(x):
        t = x.detach().cpu()
        if t.ndim == 5:
            if t.shape[0] != 1:
                raise ValueError(f"batched video tensor must have B=1, got shape {tuple(t.shape)}")
            t = t[0].permute(1, 0, 2, 3)  # CFHW -> FCHW
        if t.ndim == 4:
            t = t.permute(0, 2, 3, 1)  # FCHW -> FHWC
        elif t.ndim == 3:
            t = t.permute(1, 2, 0)  # CHW -> HWC
        else:
            raise ValueError(f"unsupported tensor shape {tuple(t.shape)}")
        # Same as diffusers' pt_to_numpy: upcast to float32 before leaving torch.
        arr = t.float().numpy() if t.is_floating_point() else t.numpy()
    else:
        arr = np.asarray(x)
        if arr.ndim == 2:
            arr = arr[..., None]
        if arr.ndim == 5:  # diffusers video output_type="np": (B, F, H, W, C)
            if arr.shape[0] != 1:
                raise ValueError(f"batched video array must have B=1, got shape {arr.shape}")
            arr = arr[0]
        if arr.ndim not in (3, 4):
            raise ValueError(f"unsupported array shape {arr.shape}")

    if np.issubdtype(arr.dtype, np.floating):
        # Exactly diffusers' numpy_to_pil conversion (round, not truncate).
        arr = (np.clip(arr, 0, 1) * 255).round().astype(np.uint8)
    elif arr.dtype != np.uint8:
        raise ValueError(f"expected float in [0, 1] or uint8 pixels, got dtype {arr.dtype}")
    return np.ascontiguousarray(arr if alpha and arr.shape[-1] == 4 else _to_rgb(arr))


def _to_audio(audio) -> np.ndarray:
    """Audio -> float64 (C, T) clipped to [-1, 1]."""
    if _is_tensor(audio):
        audio = audio.detach().cpu().float().numpy()
    arr = np.asarray(audio, dtype=np.float64)
    if arr.ndim == 3 and arr.shape[0] == 1:
        arr = arr[0]
    elif arr.ndim == 1:
        arr = arr[None]
    if arr.ndim != 2:
        raise ValueError(f"audio must be (T,), (C, T) or (1, C, T); got shape {arr.shape}")
    if arr.shape[0] > 8:  # almost certainly a (T, C) array passed by mistake
        raise ValueError(f"audio must be channels-first (C, T); got shape {arr.shape}")
    return np.clip(arr, -1.0, 1.0)


def _to_int16(audio: np.ndarray) -> np.ndarray:
    return np.round(audio * 32767).astype(np.int16)


# ----------------------------------------------------------------------------- images


def save_image(image, path, ext=None, *, quality=95, metadata=None) -> dict:
    """Write one image as png (lossless), jpg (``quality``) or webp (lossless iff quality == 100),
    with ``metadata`` (module docstring) embedded. An image with alpha keeps it in png and webp."""
    path, ext = _resolve(path, ext, IMAGE_EXTS)
    metadata = _check_metadata(metadata)
    arr = to_uint8_frames(image, alpha=ext != "jpg")
    if arr.ndim == 4:
        if arr.shape[0] != 1:
            raise ValueError(f"save_image got {arr.shape[0]} frames; use save_video")
        arr = arr[0]
    img = Image.fromarray(arr, "RGBA" if arr.shape[-1] == 4 else "RGB")
    if ext == "png":
        opts = {"format": "PNG", **_png_metadata(metadata)}
    elif ext == "jpg":
        opts = {"format": "JPEG", "quality": quality, **_exif_xmp(metadata, JPEG_MAX_SEGMENT)}
    else:
        opts = {"format": "WEBP", **({"lossless": True} if quality == 100 else {"quality": quality}),
                **_exif_xmp(metadata, None)}
    with atomic_path(path) as tmp:
        img.save(tmp, **opts)  # format is explicit because the temp name ends in .tmp
    return {"path": str(path), "kind": "image", "ext": ext, "bytes": path.stat().st_size,
            "width": img.width, "height": img.height}


# ----------------------------------------------------------------------------- videos


# (video codec, soundtrack codec, the soundtrack's stored rate) of the formats PyAV writes; a rate of
# None keeps the soundtrack's own. Opus always decodes at 48 kHz, whatever rate went in, so it is stored so.
AV_CODECS = {"mp4": ("libx264", "aac", None), "webm": ("libvpx-vp9", "libopus", 48000)}
VP9_SPEED = 4         # libvpx's cpu-used: 4 of 0 (slowest) to 8; 1, its default, is 1.3x slower for no visible gain


def _video_options(ext: str, crf: int, lossless: bool) -> dict:
    if ext == "mp4":
        # crf 0 is x264's lossless mode (in YUV 4:2:0, so chroma is still subsampled). mb-tree reads
        # uninitialised memory on some small clips, so the same frames could encode to other bytes on
        # each run (seen on 64x64 video); without it the output is a function of the frames alone.
        return {"crf": "0" if lossless else str(crf), "x264-params": "mbtree=0"}
    # VP9's constant quality: crf with no bitrate target (b 0), on its 0-63 scale (18 is about as fine as
    # x264's 18); lossless is its own mode (libvpx refuses a crf with it). Row threading off, as the one
    # thread below is.
    quality = {"lossless": "1"} if lossless else {"crf": str(crf)}
    return {**quality, "b": "0", "deadline": "good", "cpu-used": str(VP9_SPEED), "row-mt": "0"}


def _write_av_video(frames: np.ndarray, tmp: Path, ext: str, fps: float, crf: int, lossless: bool, metadata: dict,
                    audio: np.ndarray | None = None, sample_rate: int | None = None) -> None:
    """H.264 in mp4 or VP9 in WebM, each with its soundtrack codec (AV_CODECS)."""
    import av

    video_codec, sound_codec, sound_rate = AV_CODECS[ext]
    # Fraction keeps NTSC-style rates exact (29.97002997 -> 30000/1001).
    rate = Fraction(fps).limit_denominator(1001)
    # Matroska's segment and track UIDs are random unless the muxer is told to be bit-exact
    options = {"fflags": "+bitexact"} if ext == "webm" else {}
    with av.open(str(tmp), "w", format=ext, options=options) as container:
        if metadata.get(SETTINGS_KEY):
            container.metadata["comment"] = metadata[SETTINGS_KEY]     # written with the header
        stream = container.add_stream(video_codec, rate=rate)
        stream.width, stream.height = frames.shape[2], frames.shape[1]
        stream.pix_fmt = "yuv420p"
        stream.options = _video_options(ext, crf, lossless)
        # Frame/slice threading makes the encoder's output depend on scheduling; one thread is deterministic.
        stream.codec_context.thread_count = 1
        sound = (_sound_stream(container, sound_codec, audio, sample_rate, sound_rate or sample_rate)
                 if audio is not None else None)
        for i, arr in enumerate(frames):
            frame = av.VideoFrame.from_ndarray(arr, format="rgb24")
            frame.pts = i
            container.mux(stream.encode(frame))
        container.mux(stream.encode())  # flush
        if sound is not None:
            sound_stream, sound_frame = sound
            # PyAV re-chunks it into the codec's frame size (resampled to the stream's rate)
            container.mux(sound_stream.encode(sound_frame))
            container.mux(sound_stream.encode())


def _sound_stream(container, codec_name: str, audio: np.ndarray, sample_rate: int, stored_rate: int):
    """(stream, frame): a `codec_name` stream at `stored_rate` in `container` for float audio (C, T) at
    `sample_rate`, and the one frame holding it."""
    import av

    layout = {1: "mono", 2: "stereo"}.get(audio.shape[0], f"{audio.shape[0]}c")
    stream = container.add_stream(codec_name, rate=int(stored_rate))
    stream.layout = layout
    stream.bit_rate = 192000
    stream.codec_context.thread_count = 1
    frame = av.AudioFrame.from_ndarray(audio.astype(np.float32), format="fltp", layout=layout)
    frame.sample_rate = int(sample_rate)
    frame.pts = 0
    return stream, frame


def _write_webp_anim(frames: np.ndarray, tmp: Path, fps: float, lossless: bool, metadata: dict) -> None:
    images = [Image.fromarray(f, "RGB") for f in frames]
    images[0].save(tmp, format="WEBP", save_all=True, append_images=images[1:],
                   duration=1000 / fps, loop=0, lossless=lossless, **_exif_xmp(metadata, None))


def save_video(frames, path, fps: float, ext=None, *, crf=18, lossless=False, metadata=None, audio=None,
               sample_rate=None) -> dict:
    """Write frames as H.264 mp4 (PyAV/libx264), VP9 WebM (PyAV/libvpx-vp9; ``crf`` on its 0-63 scale)
    or animated webp (Pillow), with ``metadata``; ``audio`` (float in [-1, 1], as save_audio takes it)
    at ``sample_rate`` goes in as an AAC (mp4) or Opus (webm) track (webp has no sound). The same frames
    give the same bytes.

    mp4 and webm are yuv420p, which needs even dimensions, so odd width/height are padded by one
    edge-replicated row/column; the reported width/height are the padded ones. The reported
    sample_rate is the stored one (webm's Opus: always 48 kHz, resampled).
    """
    path, ext = _resolve(path, ext, VIDEO_EXTS)
    if audio is not None:
        if ext not in AV_CODECS:                          # the formats with a soundtrack codec
            raise ValueError(f"{ext} video has no sound track: write {' or '.join(AV_CODECS)} for a video with audio")
        if not sample_rate or sample_rate <= 0:
            raise ValueError(f"a soundtrack needs a positive sample_rate, got {sample_rate!r}")
        audio = _to_audio(audio)
    metadata = _check_metadata(metadata)
    if not fps or fps <= 0:
        raise ValueError(f"fps must be positive, got {fps!r}")
    frames = to_uint8_frames(frames)
    if frames.ndim == 3:
        frames = frames[None]
    if ext in AV_CODECS:
        h, w = frames.shape[1:3]
        frames = np.pad(frames, ((0, 0), (0, h % 2), (0, w % 2), (0, 0)), mode="edge")
    with atomic_path(path) as tmp:
        if ext in AV_CODECS:
            _write_av_video(frames, tmp, ext, fps, crf, lossless, metadata, audio, sample_rate)
        else:
            _write_webp_anim(frames, tmp, fps, lossless, metadata)
    n = len(frames)
    record = {"path": str(path), "kind": "video", "ext": ext, "bytes": path.stat().st_size,
              "width": frames.shape[2], "height": frames.shape[1], "num_frames": n,
              "fps": float(fps), "duration": n / fps, "audio": audio is not None}
    if audio is not None:
        record.update(sample_rate=int(AV_CODECS[ext][2] or sample_rate), channels=audio.shape[0])
    return record


# ----------------------------------------------------------------------------- audio


def _write_wav(audio: np.ndarray, tmp: Path, sample_rate: int) -> None:
    with wave.open(str(tmp), "wb") as w:
        w.setnchannels(audio.shape[0])
        w.setsampwidth(2)
        w.setframerate(sample_rate)
        w.writeframes(_to_int16(audio).T.astype("<i2").tobytes())  # interleaved, little-endian


def _write_av_audio(audio: np.ndarray, tmp: Path, sample_rate: int, ext: str, bitrate: int, metadata: dict) -> None:
    import av

    codec_name = "flac" if ext == "flac" else "libmp3lame"
    codec = av.codec.Codec(codec_name, "w")
    if codec.audio_rates and sample_rate not in codec.audio_rates:
        raise ValueError(f"{ext} does not support sample rate {sample_rate}; "
                         f"supported: {sorted(codec.audio_rates)}")
    channels = audio.shape[0]
    layout = {1: "mono", 2: "stereo"}.get(channels, f"{channels}c")
    if ext == "flac":
        # Packed s16: the same samples the wav writer stores.
        frame = av.AudioFrame.from_ndarray(_to_int16(audio).T.reshape(1, -1), format="s16", layout=layout)
    else:
        frame = av.AudioFrame.from_ndarray(audio.astype(np.float32), format="fltp", layout=layout)
    frame.sample_rate = sample_rate
    frame.pts = 0
    settings = metadata.get(SETTINGS_KEY)
    # mp3: ffmpeg would write `comment` as an ID3 TXXX frame, which players do not show as the comment;
    # its own ID3 tag is left out and a real COMM frame is put in front of the audio below
    options = {"id3v2_version": "0"} if ext == "mp3" and settings else {}
    with av.open(str(tmp), "w", format=ext, options=options) as container:
        if ext == "flac" and settings:
            container.metadata["comment"] = settings
        stream = container.add_stream(codec_name, rate=sample_rate)
        stream.layout = layout
        stream.format = frame.format.name
        if ext == "mp3":
            stream.bit_rate = bitrate
        # PyAV re-chunks the single big frame into the encoder's frame size.
        container.mux(stream.encode(frame))
        container.mux(stream.encode())  # flush
    if ext == "mp3" and settings:
        _prepend_id3_comment(tmp, settings)


def save_audio(audio, path, sample_rate: int, ext=None, *, bitrate=192000, metadata=None) -> dict:
    """Write audio as 16-bit PCM wav (stdlib ``wave``), flac (s16) or mp3 (libmp3lame, ``bitrate``).

    ``audio`` is float in [-1, 1] (clipped), shaped (C, T), (T,) or (1, C, T).
    PCM samples are ``round(clip(x) * 32767)`` as int16.
    """
    path, ext = _resolve(path, ext, AUDIO_EXTS)
    metadata = _check_metadata(metadata)
    if not sample_rate or sample_rate <= 0:
        raise ValueError(f"sample_rate must be positive, got {sample_rate!r}")
    sample_rate = int(sample_rate)
    audio = _to_audio(audio)
    with atomic_path(path) as tmp:
        if ext == "wav":
            _write_wav(audio, tmp, sample_rate)
            if metadata.get(SETTINGS_KEY):
                _append_riff_comment(tmp, metadata[SETTINGS_KEY])
        else:
            _write_av_audio(audio, tmp, sample_rate, ext, bitrate, metadata)
    channels, n = audio.shape
    return {"path": str(path), "kind": "audio", "ext": ext, "bytes": path.stat().st_size,
            "sample_rate": sample_rate, "channels": channels, "num_samples": n,
            "duration": n / sample_rate}


# ----------------------------------------------------------------------------- dispatch


def save_media(kind: str, data, path, *, ext=None, fps=None, sample_rate=None, **kw) -> dict:
    """Dispatch to save_image / save_video / save_audio by ``kind``."""
    if kind == "image":
        return save_image(data, path, ext, **kw)
    if kind == "video":
        if fps is None:
            raise ValueError("save_media(kind='video') needs fps")
        return save_video(data, path, fps, ext, sample_rate=sample_rate, **kw)     # a soundtrack's rate
    if kind == "audio":
        if sample_rate is None:
            raise ValueError("save_media(kind='audio') needs sample_rate")
        return save_audio(data, path, sample_rate, ext, **kw)
    raise ValueError(f"unknown media kind {kind!r}; expected image, video or audio")


# ----------------------------------------------------------------------------- metadata: writing


def _check_metadata(metadata) -> dict:
    """``{"parameters": str, "aitk": str}`` (keys optional); None means none."""
    if metadata is None:
        return {}
    if not isinstance(metadata, dict) or set(metadata) - {PARAMETERS_KEY, SETTINGS_KEY}:
        raise ValueError(f"metadata must be a dict with keys {PARAMETERS_KEY!r} and/or {SETTINGS_KEY!r}")
    for key, value in metadata.items():
        if value is not None and not isinstance(value, str):
            raise ValueError(f"metadata[{key!r}] must be text, got {type(value).__name__}")
    return {k: v for k, v in metadata.items() if v}


def _png_metadata(metadata: dict) -> dict:
    """Pillow's `pnginfo=`: one text chunk per key, `parameters` first. Pillow's add_text writes tEXt
    when the text is Latin-1 and iTXt (UTF-8) otherwise: A1111's own save_image_with_geninfo does the same."""
    if not metadata:
        return {}
    from PIL.PngImagePlugin import PngInfo

    info = PngInfo()
    for key in (PARAMETERS_KEY, SETTINGS_KEY):
        if metadata.get(key):
            info.add_text(key, metadata[key])
    return {"pnginfo": info}


def _exif_xmp(metadata: dict, limit: int | None) -> dict:
    """Pillow's `exif=` / `xmp=` for JPEG and WebP. `limit`: the most bytes one JPEG segment holds
    (None: WebP's RIFF chunks have no such limit); a block over it is left out rather than failing
    the file (only a prompt of tens of KiB gets there)."""
    out = {}
    if metadata.get(PARAMETERS_KEY):
        exif = b"Exif\x00\x00" + _exif_user_comment(metadata[PARAMETERS_KEY])
        if limit is None or len(exif) <= limit:
            out["exif"] = exif
    if metadata.get(SETTINGS_KEY):
        xmp = _xmp_packet(metadata[SETTINGS_KEY])
        if limit is None or len(xmp) + len(XMP_HEADER) <= limit:
            out["xmp"] = xmp
    return out


def _exif_user_comment(text: str) -> bytes:
    """A big-endian TIFF block holding one tag, Exif IFD UserComment (0x9286, UNDEFINED) =
    b"UNICODE\\0" + UTF-16BE text: byte for byte the value A1111 writes (piexif's
    UserComment.dump(text, encoding="unicode")) and reads back, in a big-endian TIFF as piexif
    writes, so readers that decode UNICODE by the TIFF's byte order (ExifTool) agree."""
    comment = b"UNICODE\x00" + text.encode("utf-16-be")
    ifd0 = 8                                         # header: b"MM", 42, offset of IFD0
    exif_ifd = ifd0 + 2 + 12 + 4                     # IFD0: one entry (the Exif IFD pointer), next = 0
    value = exif_ifd + 2 + 12 + 4                    # Exif IFD: one entry (UserComment), next = 0
    return (b"MM" + struct.pack(">HI", 42, ifd0)
            + struct.pack(">HHHII", 1, 0x8769, 4, 1, exif_ifd) + struct.pack(">I", 0)
            + struct.pack(">HHHII", 1, 0x9286, 7, len(comment), value) + struct.pack(">I", 0)
            + comment)


def _xmp_packet(settings: str) -> bytes:
    """An XMP packet holding the JSON as <aitk:settings> (XML-escaped)."""
    return ('<?xpacket begin="\ufeff" id="W5M0MpCehiHzreSzNTczkc9d"?>'
            '<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">'
            f'<rdf:Description rdf:about="" xmlns:aitk="{XMP_NS}">'
            f'<aitk:settings>{html.escape(settings, quote=False)}</aitk:settings>'
            '</rdf:Description></rdf:RDF></x:xmpmeta><?xpacket end="w"?>').encode("utf-8")


def _append_riff_comment(tmp: Path, text: str) -> None:
    """Append a LIST/INFO chunk with ICMT (the comment, NUL-terminated, padded to even) after the
    wav's data chunk and fix the RIFF size: readers (ffmpeg's `comment`, Python's wave) skip it."""
    value = text.encode("utf-8") + b"\x00"
    icmt = b"ICMT" + struct.pack("<I", len(value)) + value + (b"\x00" if len(value) % 2 else b"")
    chunk = b"LIST" + struct.pack("<I", 4 + len(icmt)) + b"INFO" + icmt
    with open(tmp, "r+b") as f:
        f.seek(0, os.SEEK_END)
        if f.tell() % 2:                  # chunks start at even offsets
            f.write(b"\x00")
        f.write(chunk)
        size = f.tell() - 8
        f.seek(4)
        f.write(struct.pack("<I", size))


def _syncsafe(n: int) -> bytes:
    return bytes(((n >> 21) & 0x7F, (n >> 14) & 0x7F, (n >> 7) & 0x7F, n & 0x7F))


def _prepend_id3_comment(tmp: Path, text: str) -> None:
    """Put an ID3v2.4 tag with one COMM frame (UTF-8, language "XXX" (unknown), empty description:
    the comment players show; ffmpeg reads it as `comment`) in front of the mp3's frames."""
    body = b"\x03" + b"XXX" + b"\x00" + text.encode("utf-8")
    frame = b"COMM" + _syncsafe(len(body)) + b"\x00\x00" + body
    tag = b"ID3\x04\x00\x00" + _syncsafe(len(frame)) + frame
    with open(tmp, "rb") as f:
        audio = f.read()
    with open(tmp, "wb") as f:
        f.write(tag + audio)


# ----------------------------------------------------------------------------- metadata: reading


# What one file's read may take, whatever its bytes say (an upload is untrusted input). Over any of them
# the file is refused (MetadataError) rather than read in part: a part would be a different answer.
MAX_TEXT_BYTES = 4 << 20   # all its text (chunks, tags, comments), as stored or as inflated: a zip bomb, or
                           # a pile of chunks, stops here. Our JSON is a few KiB and A1111's text rarely
                           # tens; a large ComfyUI workflow (hundreds of KiB) fits with room
MAX_TEXT_ITEMS = 64        # text chunks / tags / comments (A1111 writes 1, ComfyUI 2, this engine 2)
MAX_BLOCKS = 1 << 17       # chunks, boxes, segments and tag entries walked (a 64 MiB PNG cut into 8 KiB
                           # IDATs, libpng's size, has 8 Ki): bounds the time a crafted file's walk takes
READ_FORMATS = "PNG, JPEG, WebP, MP4, WebM, WAV, FLAC or MP3"
XMP_OPEN, XMP_CLOSE = "<aitk:settings>", "</aitk:settings>"


class MetadataError(ValueError):
    """The bytes are not a file of a known format, or its structure is broken, or past a limit above."""


class _Budget:
    """The limits above, counted over one read_metadata call."""

    def __init__(self, fmt: str):
        self.fmt, self.blocks, self.items, self.bytes = fmt, 0, 0, 0

    def block(self):
        self.blocks += 1
        if self.blocks > MAX_BLOCKS:
            raise MetadataError(f"a {self.fmt} file of more than {MAX_BLOCKS} chunks, boxes or tags: not read")

    def take(self, raw: bytes, item: bool = True) -> bytes:
        """`raw`, counted as text the file holds (`item`: one more text chunk or tag; a key is not)."""
        self.items += item
        if self.items > MAX_TEXT_ITEMS:
            raise MetadataError(f"a {self.fmt} file with more than {MAX_TEXT_ITEMS} text chunks or tags: not read")
        self.bytes += len(raw)
        if self.bytes > MAX_TEXT_BYTES:
            raise MetadataError(f"a {self.fmt} file with more than {MAX_TEXT_BYTES} bytes of text: not read")
        return raw

    def text(self, raw: bytes, codec: str, item: bool = True) -> str:
        """`raw` counted and decoded. Every decoder here replaces what it cannot read with U+FFFD (none
        of these codecs yields a lone surrogate), so any text read can go into a JSON answer."""
        return self.take(raw, item).decode(codec, errors="replace")

    def inflate(self, data: bytes) -> bytes:
        """A zlib stream, inflated no further than the text this file may still hold (the caller counts
        what comes out)."""
        room = MAX_TEXT_BYTES - self.bytes
        out = zlib.decompressobj().decompress(data, room + 1)
        if len(out) > room:
            raise MetadataError(f"a {self.fmt} text chunk inflates past the {MAX_TEXT_BYTES} bytes of text "
                                "a file may hold")
        return out


def sniff_format(data: bytes) -> str | None:
    """The format of a file's bytes by its signature: png, jpg, webp, mp4, webm, wav, flac, mp3, or None."""
    if data[:8] == b"\x89PNG\r\n\x1a\n":
        return "png"
    if data[:3] == b"\xff\xd8\xff":
        return "jpg"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "webp"
    if data[:4] == b"RIFF" and data[8:12] == b"WAVE":
        return "wav"
    if data[4:8] == b"ftyp":
        return "mp4"
    if data[:4] == EBML_MAGIC and _ebml_doctype(data) == b"webm":
        return "webm"
    if data[:4] == b"fLaC":
        return "flac"
    if data[:3] == b"ID3" or (len(data) > 1 and data[0] == 0xFF and data[1] & 0xE0 == 0xE0):
        return "mp3"
    return None


def read_metadata(data: bytes) -> dict:
    """What a file (its bytes) says about how it was made: ``{"format", "parameters", "aitk", "items"}``;
    `parameters` (A1111 text) and `aitk` (our JSON text) are None when absent, `items` holds the
    other text the file carries (PNG text chunks, `exif comment`, `comment`), as A1111's
    read_info_from_image lists them. MetadataError for an unknown format, a broken structure, or a file
    past MAX_TEXT_BYTES / MAX_TEXT_ITEMS / MAX_BLOCKS (so each text, and `items` together, are at most
    MAX_TEXT_BYTES characters)."""
    data = bytes(data)
    fmt = sniff_format(data)
    if fmt is None:
        raise MetadataError(f"not a {READ_FORMATS} file")
    out = {"format": fmt, PARAMETERS_KEY: None, SETTINGS_KEY: None, "items": {}}
    try:
        _READERS[fmt](data, out, _Budget(fmt))
    except (struct.error, IndexError, zlib.error) as e:
        raise MetadataError(f"a broken {fmt} file: {type(e).__name__}: {e}") from None
    return out


def _read_png(data: bytes, out: dict, budget: _Budget):
    pos, items = 8, {}
    while pos + 8 <= len(data):
        budget.block()
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        at, pos = pos + 8, pos + 12 + length
        if at + length > len(data):
            raise MetadataError(f"a broken png file: chunk {kind!r} is cut short")
        if kind == b"IEND":
            break
        if kind not in (b"tEXt", b"zTXt", b"iTXt"):
            continue
        key, _, rest = data[at:at + length].partition(b"\x00")
        if kind == b"tEXt":
            text = budget.text(rest, "latin-1")
        elif kind == b"zTXt":
            text = budget.text(budget.inflate(rest[1:]), "latin-1")
        else:
            compressed, rest = rest[0], rest[2:]
            _lang, _, rest = rest.partition(b"\x00")
            _translated, _, rest = rest.partition(b"\x00")
            text = budget.text(budget.inflate(rest) if compressed else rest, "utf-8")
        items[budget.text(key, "latin-1", item=False)] = text          # a later chunk wins, as in Pillow's info
    _take(out, items)


def _read_jpeg(data: bytes, out: dict, budget: _Budget):
    pos, items = 2, {}
    while pos + 4 <= len(data):
        budget.block()
        if data[pos] != 0xFF:
            raise MetadataError(f"a broken jpg file: no marker at byte {pos}")
        marker = data[pos + 1]
        if marker == 0xFF:                            # fill byte
            pos += 1
            continue
        if marker in (0x01, *range(0xD0, 0xD8)):      # no length
            pos += 2
            continue
        if marker in (0xD9, 0xDA):                    # end, or the image data starts: metadata comes before
            break
        length = struct.unpack(">H", data[pos + 2:pos + 4])[0]
        body = data[pos + 4:pos + 2 + length]         # at most 64 KiB
        pos += 2 + length
        if marker == 0xE1 and body.startswith(b"Exif\x00\x00"):
            _exif_items(body[6:], items, budget)
        elif marker == 0xE1 and body.startswith(XMP_HEADER):
            _xmp_items(body[len(XMP_HEADER):], items, budget)
        elif marker == 0xFE:
            items["comment"] = budget.text(body, "utf-8")
    _take(out, items)


def _riff_chunks(data: bytes, budget: _Budget):
    """(kind, body start, body length) of a RIFF file's top-level chunks (bodies are not copied: one is the
    audio or the picture)."""
    pos, end = 12, min(len(data), 8 + struct.unpack("<I", data[4:8])[0])
    while pos + 8 <= end:
        budget.block()
        kind, length = struct.unpack("<4sI", data[pos:pos + 8])
        yield kind, pos + 8, length
        pos += 8 + length + (length & 1)


def _read_webp(data: bytes, out: dict, budget: _Budget):
    items = {}
    for kind, at, length in _riff_chunks(data, budget):
        if kind == b"EXIF":
            body = data[at:at + length]
            _exif_items(body[6:] if body.startswith(b"Exif\x00\x00") else body, items, budget)
        elif kind == b"XMP ":
            _xmp_items(data[at:at + length], items, budget)
    _take(out, items)


def _exif_items(tiff: bytes, items: dict, budget: _Budget):
    """The Exif IFD's UserComment of a TIFF block, as `exif comment` (A1111's item name)."""
    order = {b"II": "<", b"MM": ">"}.get(tiff[:2])
    if order is None:
        return

    def entries(offset):
        count = struct.unpack(order + "H", tiff[offset:offset + 2])[0]
        for i in range(count):
            budget.block()
            yield struct.unpack(order + "HHII", tiff[offset + 2 + 12 * i:offset + 14 + 12 * i])

    ifd0 = struct.unpack(order + "I", tiff[4:8])[0]
    exif_ifd = next((value for tag, _t, _n, value in entries(ifd0) if tag == 0x8769), None)
    if exif_ifd is None:
        return
    for tag, typ, count, value in entries(exif_ifd):
        if tag == 0x9286 and typ in (1, 2, 7):       # UNDEFINED by the standard; some writers say BYTE or ASCII
            raw = (tiff[value:value + count] if count > 4
                   else struct.pack(order + "I", value)[:count])
            text = _user_comment(budget.take(raw), order)
            if text:
                items["exif comment"] = text


def _user_comment(raw: bytes, order: str) -> str:
    """EXIF UserComment: an 8-byte character code, then the text. UNICODE is UTF-16; A1111 (piexif)
    writes it big-endian whatever the TIFF's order, some writers little-endian in an "II" TIFF:
    the decoding with more plain ASCII wins. Undecodable bytes become U+FFFD (as in _Budget.text)."""
    prefix, body = raw[:8], raw[8:]
    if prefix == b"UNICODE\x00":
        if len(body) % 2:
            body = body[:-1]
        candidates = [body.decode("utf-16-be", errors="replace")]
        if order == "<":
            candidates.append(body.decode("utf-16-le", errors="replace"))
        text = max(candidates, key=lambda t: sum(32 <= ord(c) < 127 or c in "\n\r\t" for c in t))
    elif prefix == b"ASCII\x00\x00\x00":
        text = body.decode("latin-1")
    elif prefix == b"JIS\x00\x00\x00\x00\x00":
        text = body.decode("shift_jis", errors="replace")
    else:
        text = raw.decode("utf-8", errors="replace")
    return text.rstrip("\x00")


def _xmp_items(xmp: bytes, items: dict, budget: _Budget):
    """<aitk:settings>, found with str.find: a non-greedy regex search is quadratic on a packet of
    unclosed open tags (each start scans to the end)."""
    text = budget.text(xmp, "utf-8")
    start = text.find(XMP_OPEN)
    end = text.find(XMP_CLOSE, start + len(XMP_OPEN)) if start >= 0 else -1
    if end >= 0:
        items[SETTINGS_KEY] = html.unescape(text[start + len(XMP_OPEN):end])


def _boxes(data: bytes, start: int, end: int, budget: _Budget):
    """(type, body start, body end) of the ISO-BMFF boxes in data[start:end]."""
    pos = start
    while pos + 8 <= end:
        budget.block()
        size, kind = struct.unpack(">I4s", data[pos:pos + 8])
        head = 8
        if size == 1:
            size, head = struct.unpack(">Q", data[pos + 8:pos + 16])[0], 16
        elif size == 0:
            size = end - pos
        if size < head:
            raise MetadataError(f"a broken mp4 file: box {kind!r} of {size} bytes")
        yield kind, pos + head, min(pos + size, end)
        pos += size


def _read_mp4(data: bytes, out: dict, budget: _Budget):
    """moov/udta/meta/ilst/©cmt/data: the tag ffmpeg writes for `comment` in an mp4."""
    def child(kind, start, end):
        return next(((s, e) for k, s, e in _boxes(data, start, end, budget) if k == kind), None)

    items = {}
    path = child(b"moov", 0, len(data))
    for kind in (b"udta", b"meta", b"ilst", b"\xa9cmt", b"data"):
        if path is None:
            break
        start, end = path
        if kind == b"ilst" and data[start:start + 4] == b"\x00\x00\x00\x00":
            start += 4                                   # an ISO meta is a full box: version and flags first
        path = child(kind, start, end)
    if path is not None:
        start, end = path
        items["comment"] = budget.text(data[start + 8:end], "utf-8")     # type, locale, then UTF-8
    _take(out, items, comment_is_settings=True)


# Matroska element ids (https://www.matroska.org/technical/elements.html), WebM's subset
EBML_MAGIC = b"\x1a\x45\xdf\xa3"       # the EBML header element's id: every WebM/Matroska file starts with it
_EBML_DOCTYPE, _SEGMENT, _TAGS, _TAG, _TARGETS = 0x4282, 0x18538067, 0x1254C367, 0x7373, 0x63C0
_SIMPLE_TAG, _TAG_NAME, _TAG_STRING = 0x67C8, 0x45A3, 0x4487
_TARGET_UIDS = (0x63C5, 0x63C9, 0x63C4, 0x63C6)   # TagTrackUID, TagEditionUID, TagChapterUID, TagAttachmentUID


def _vint(data: bytes, pos: int, keep_marker: bool) -> tuple[int, int, bool]:
    """(value, end, all ones) of the EBML variable-size integer at `pos`: an element id keeps its length
    marker (ids are written so), a size drops it; a size of all ones is "unknown" (a live stream's)."""
    first = data[pos]
    n = 9 - first.bit_length()                      # the leading zeros say the length: 1 to 8 bytes
    if first == 0 or (keep_marker and n > 4):
        raise MetadataError(f"a broken webm file: no element {'id' if keep_marker else 'size'} at byte {pos}")
    raw = data[pos:pos + n]
    if len(raw) < n:
        raise MetadataError(f"a broken webm file: cut short at byte {pos}")
    value = int.from_bytes(raw, "big")
    if keep_marker:
        return value, pos + n, False
    value &= (1 << 7 * n) - 1
    return value, pos + n, value == (1 << 7 * n) - 1


def _ebml(data: bytes, start: int, end: int, budget: _Budget):
    """(id, body start, body end, whole) of the EBML elements in data[start:end]: an element running past
    `end` (a file cut short) or of unknown size ends there, with `whole` False."""
    pos = start
    while pos < end:
        budget.block()
        eid, at, _ = _vint(data, pos, keep_marker=True)
        size, at, unknown = _vint(data, at, keep_marker=False)
        stop = end if unknown else at + size
        yield eid, at, min(stop, end), stop <= end and not unknown
        pos = stop


def _ebml_doctype(data: bytes) -> bytes | None:
    """The DocType of the EBML header data starts with (b"webm", b"matroska"), None where there is none."""
    budget = _Budget("webm")
    try:
        _id, at, stop, _whole = next(_ebml(data, 0, len(data), budget))
        return next((data[a:b] for i, a, b, _w in _ebml(data, at, stop, budget) if i == _EBML_DOCTYPE), None)
    except (MetadataError, IndexError, StopIteration):
        return None


def _read_webm(data: bytes, out: dict, budget: _Budget):
    """Segment/Tags/Tag/SimpleTag COMMENT of a tag for the whole file (Targets naming no track, edition,
    chapter or attachment): what ffmpeg writes for `comment` in a WebM. Clusters (the frames) are stepped
    over by their sizes, not read."""
    items = {}

    def children(kind, start, end):
        return ((a, b, whole) for i, a, b, whole in _ebml(data, start, end, budget) if i == kind)

    for seg_start, seg_end, _ in children(_SEGMENT, 0, len(data)):
        for tags_start, tags_end, _ in children(_TAGS, seg_start, seg_end):
            for tag_start, tag_end, _ in children(_TAG, tags_start, tags_end):
                targets = [(a, b) for a, b, _ in children(_TARGETS, tag_start, tag_end)]
                if any(i in _TARGET_UIDS for a, b in targets for i, *_ in _ebml(data, a, b, budget)):
                    continue                                  # a track's (ffmpeg's DURATION, ENCODER) or another part's
                for st_start, st_end, _ in children(_SIMPLE_TAG, tag_start, tag_end):
                    name, value = None, None
                    for i, a, b, whole in _ebml(data, st_start, st_end, budget):
                        if i in (_TAG_NAME, _TAG_STRING) and not whole:
                            raise MetadataError("a broken webm file: a tag's text is cut short")
                        if i == _TAG_NAME:
                            name = budget.take(data[a:b], item=False)
                        elif i == _TAG_STRING:
                            value = (a, b)                    # copied only if it is the comment
                    if value is not None and name is not None and name.upper() == b"COMMENT":
                        items["comment"] = budget.text(data[value[0]:value[1]], "utf-8")
    _take(out, items, comment_is_settings=True)


def _read_wav(data: bytes, out: dict, budget: _Budget):
    items = {}
    for kind, at, length in _riff_chunks(data, budget):
        body = data[at:at + length] if kind == b"LIST" else b""
        if body[:4] == b"INFO":
            sub = 4
            while sub + 8 <= len(body):
                budget.block()
                name, n = struct.unpack("<4sI", body[sub:sub + 8])
                if name == b"ICMT":
                    items["comment"] = budget.text(body[sub + 8:sub + 8 + n].rstrip(b"\x00"), "utf-8")
                sub += 8 + n + (n & 1)
    _take(out, items, comment_is_settings=True)


def _read_flac(data: bytes, out: dict, budget: _Budget):
    pos, items = 4, {}
    while pos + 4 <= len(data):
        budget.block()
        head = data[pos]
        length = int.from_bytes(data[pos + 1:pos + 4], "big")
        at = pos + 4
        pos += 4 + length
        if head & 0x7F == 4:                              # VORBIS_COMMENT (little-endian lengths)
            body = data[at:at + length]
            n = struct.unpack("<I", body[:4])[0]
            at = 4 + n
            count = struct.unpack("<I", body[at:at + 4])[0]
            at += 4
            for _ in range(count):
                budget.block()
                n = struct.unpack("<I", body[at:at + 4])[0]
                key, _, value = body[at + 4:at + 4 + n].partition(b"=")
                at += 4 + n
                if key.upper() in (b"DESCRIPTION", b"COMMENT"):   # ffmpeg writes `comment` as DESCRIPTION
                    items["comment"] = budget.text(value, "utf-8")
        if head & 0x80:                                   # the last metadata block
            break
    _take(out, items, comment_is_settings=True)


def _read_mp3(data: bytes, out: dict, budget: _Budget):
    items = {}
    if data[:3] == b"ID3":
        version, flags = data[3], data[5]
        size = _unsyncsafe(data[6:10])
        pos, end = 10, min(len(data), 10 + size)
        if flags & 0x40:                                  # an extended header
            pos += _unsyncsafe(data[10:14]) if version == 4 else 4 + struct.unpack(">I", data[10:14])[0]
        while pos + 10 <= end and data[pos] != 0:
            budget.block()
            kind = data[pos:pos + 4]
            n = _unsyncsafe(data[pos + 4:pos + 8]) if version == 4 else struct.unpack(">I", data[pos + 4:pos + 8])[0]
            body = data[pos + 10:pos + 10 + n]
            pos += 10 + n
            if kind == b"COMM" and len(body) > 4:
                enc, text = body[0], body[4:]
                codec, nul = {0: ("latin-1", b"\x00"), 1: ("utf-16", b"\x00\x00"),
                              2: ("utf-16-be", b"\x00\x00"), 3: ("utf-8", b"\x00")}.get(enc, ("latin-1", b"\x00"))
                at = 0
                while True:                               # the description ends at an aligned terminator
                    at = text.find(nul, at)
                    if at < 0 or len(nul) == 1 or at % 2 == 0:
                        break
                    at += 1
                description = text[:at] if at >= 0 else b""
                value = text[at + len(nul):] if at >= 0 else text
                if not description:
                    items["comment"] = budget.text(value, codec).rstrip("\x00")
    _take(out, items, comment_is_settings=True)


def _unsyncsafe(b: bytes) -> int:
    return (b[0] << 21) | (b[1] << 14) | (b[2] << 7) | b[3]


def _take(out: dict, items: dict, comment_is_settings: bool = False):
    """Sort what a reader found into parameters / aitk / the rest, as A1111's read_info_from_image does
    for images: the `parameters` chunk, or the EXIF UserComment over it, is the A1111 text. Video and
    audio keep our JSON in their comment: it is taken when it looks like a JSON object (whether it is
    our settings is file_settings' to decide)."""
    items = dict(items)
    out[PARAMETERS_KEY] = items.pop(PARAMETERS_KEY, None)
    if "exif comment" in items:
        out[PARAMETERS_KEY] = items["exif comment"]
    out[SETTINGS_KEY] = items.pop(SETTINGS_KEY, None)
    if comment_is_settings and out[SETTINGS_KEY] is None and items.get("comment", "").lstrip().startswith("{"):
        out[SETTINGS_KEY] = items["comment"]
    out["items"] = items


_READERS = {"png": _read_png, "jpg": _read_jpeg, "webp": _read_webp, "mp4": _read_mp4, "webm": _read_webm,
            "wav": _read_wav, "flac": _read_flac, "mp3": _read_mp3}

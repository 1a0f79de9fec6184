"""Writers for generated media (images, videos, audio).

Every writer goes through :func:`atomic_path`, so a crash or exception mid-write
never leaves a half-written file at the final path (readers either see the old
file or the complete new one).
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import secrets
import sys
import wave
from fractions import Fraction
from pathlib import Path
from typing import Iterator

import numpy as np
from PIL import Image

IMAGE_EXTS = ("png", "jpg", "webp")
VIDEO_EXTS = ("mp4", "webp")
AUDIO_EXTS = ("wav", "flac", "mp3")

_EXT_ALIASES = {"jpeg": "jpg"}


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


def to_uint8_frames(x) -> np.ndarray:
    """Convert an image or video to uint8 RGB: HWC for one image, FHWC for several frames.

    Accepts a PIL image, a list of PIL images, float numpy arrays in [0, 1] (HW, HWC,
    FHWC, or 1FHWC), uint8 numpy arrays (same layouts), and torch tensors in [0, 1]
    (CHW, FCHW, or BCFHW with B=1, the layout video VAEs decode to).
    """
    if isinstance(x, Image.Image):
        return np.asarray(x.convert("RGB"))
    if isinstance(x, (list, tuple)):
        if not x:
            raise ValueError("no frames")
        return np.stack([to_uint8_frames(f) for f in x])

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
    return np.ascontiguousarray(_to_rgb(arr))


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


def save_image(image, path, ext=None, *, quality=95) -> dict:
    """Write one image as png (lossless), jpg (``quality``) or webp (lossless iff quality == 100)."""
    path, ext = _resolve(path, ext, IMAGE_EXTS)
    arr = to_uint8_frames(image)
    if arr.ndim == 4:
        if arr.shape[0] != 1:
            raise ValueError(f"save_image got {arr.shape[0]} frames; use save_video")
        arr = arr[0]
    img = Image.fromarray(arr, "RGB")
    if ext == "png":
        opts = {"format": "PNG"}
    elif ext == "jpg":
        opts = {"format": "JPEG", "quality": quality}
    else:
        opts = {"format": "WEBP", **({"lossless": True} if quality == 100 else {"quality": quality})}
    with atomic_path(path) as tmp:
        img.save(tmp, **opts)  # format is explicit because the temp name ends in .tmp
    return {"path": str(path), "kind": "image", "ext": ext, "bytes": path.stat().st_size,
            "width": img.width, "height": img.height}


# ----------------------------------------------------------------------------- videos


def _write_mp4(frames: np.ndarray, tmp: Path, fps: float, crf: int, lossless: bool) -> None:
    import av

    # Fraction keeps NTSC-style rates exact (29.97002997 -> 30000/1001).
    rate = Fraction(fps).limit_denominator(1001)
    with av.open(str(tmp), "w", format="mp4") as container:
        stream = container.add_stream("libx264", rate=rate)
        stream.width, stream.height = frames.shape[2], frames.shape[1]
        stream.pix_fmt = "yuv420p"
        # crf 0 is x264's lossless mode (in YUV 4:2:0, so chroma is still subsampled). mb-tree reads
        # uninitialised memory on some small clips, so the same frames could encode to other bytes on
        # each run (seen on 64x64 video); without it the output is a function of the frames alone.
        stream.options = {"crf": "0" if lossless else str(crf), "x264-params": "mbtree=0"}
        # Frame/slice threading makes x264 output depend on scheduling; one thread is deterministic.
        stream.codec_context.thread_count = 1
        for i, arr in enumerate(frames):
            frame = av.VideoFrame.from_ndarray(arr, format="rgb24")
            frame.pts = i
            container.mux(stream.encode(frame))
        container.mux(stream.encode())  # flush


def _write_webp_anim(frames: np.ndarray, tmp: Path, fps: float, lossless: bool) -> None:
    images = [Image.fromarray(f, "RGB") for f in frames]
    images[0].save(tmp, format="WEBP", save_all=True, append_images=images[1:],
                   duration=1000 / fps, loop=0, lossless=lossless)


def save_video(frames, path, fps: float, ext=None, *, crf=18, lossless=False) -> dict:
    """Write frames as H.264 mp4 (PyAV/libx264) or animated webp (Pillow).

    mp4 needs even dimensions for yuv420p, so odd width/height are padded by one
    edge-replicated row/column; the reported width/height are the padded ones.
    """
    path, ext = _resolve(path, ext, VIDEO_EXTS)
    if not fps or fps <= 0:
        raise ValueError(f"fps must be positive, got {fps!r}")
    frames = to_uint8_frames(frames)
    if frames.ndim == 3:
        frames = frames[None]
    if ext == "mp4":
        h, w = frames.shape[1:3]
        frames = np.pad(frames, ((0, 0), (0, h % 2), (0, w % 2), (0, 0)), mode="edge")
    with atomic_path(path) as tmp:
        if ext == "mp4":
            _write_mp4(frames, tmp, fps, crf, lossless)
        else:
            _write_webp_anim(frames, tmp, fps, lossless)
    n = len(frames)
    return {"path": str(path), "kind": "video", "ext": ext, "bytes": path.stat().st_size,
            "width": frames.shape[2], "height": frames.shape[1], "num_frames": n,
            "fps": float(fps), "duration": n / fps}


# ----------------------------------------------------------------------------- audio


def _write_wav(audio: np.ndarray, tmp: Path, sample_rate: int) -> None:
    with wave.open(str(tmp), "wb") as w:
        w.setnchannels(audio.shape[0])
        w.setsampwidth(2)
        w.setframerate(sample_rate)
        w.writeframes(_to_int16(audio).T.astype("<i2").tobytes())  # interleaved, little-endian


def _write_av_audio(audio: np.ndarray, tmp: Path, sample_rate: int, ext: str, bitrate: int) -> None:
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
    with av.open(str(tmp), "w", format=ext) as container:
        stream = container.add_stream(codec_name, rate=sample_rate)
        stream.layout = layout
        stream.format = frame.format.name
        if ext == "mp3":
            stream.bit_rate = bitrate
        # PyAV re-chunks the single big frame into the encoder's frame size.
        container.mux(stream.encode(frame))
        container.mux(stream.encode())  # flush


def save_audio(audio, path, sample_rate: int, ext=None, *, bitrate=192000) -> dict:
    """Write audio as 16-bit PCM wav (stdlib ``wave``), flac (s16) or mp3 (libmp3lame, ``bitrate``).

    ``audio`` is float in [-1, 1] (clipped), shaped (C, T), (T,) or (1, C, T).
    PCM samples are ``round(clip(x) * 32767)`` as int16.
    """
    path, ext = _resolve(path, ext, AUDIO_EXTS)
    if not sample_rate or sample_rate <= 0:
        raise ValueError(f"sample_rate must be positive, got {sample_rate!r}")
    sample_rate = int(sample_rate)
    audio = _to_audio(audio)
    with atomic_path(path) as tmp:
        if ext == "wav":
            _write_wav(audio, tmp, sample_rate)
        else:
            _write_av_audio(audio, tmp, sample_rate, ext, bitrate)
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
        return save_video(data, path, fps, ext, **kw)
    if kind == "audio":
        if sample_rate is None:
            raise ValueError("save_media(kind='audio') needs sample_rate")
        return save_audio(data, path, sample_rate, ext, **kw)
    raise ValueError(f"unknown media kind {kind!r}; expected image, video or audio")

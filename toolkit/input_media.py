"""A request's input videos and audio (`init_video`, `mask_video`, `init_audio`), as toolkit/images.py
is for its images: checked where they arrive, prepared where they are used.

- `check_input(path, field, kind)` runs in the engine process (PyAV, no torch) before a request is
  queued; an image goes to toolkit.images.check_image. A video must have a video stream whose frames are
  at most `images.MAX_INPUT_PIXELS` pixels, and at most `MAX_INPUT_FRAMES` frames, counted from its
  packets (demuxed, not decoded); an audio file an audio stream of at most `MAX_INPUT_SECONDS`. The
  first frame of each is decoded, so a file that is no media or whose codec cannot be read is
  refused there. Every refusal is a ConfigError naming the field.
- `check_fits(gen)`: a video input against the request it comes with: it must hold the frames the
  request makes (`num_frames`); the first ones are used.
- `load_video(path, width, height, num_frames, resize_mode, mask=)` and
  `load_audio(path, sample_rate, channels, seconds=)` run in the worker: frames as PIL images at the
  request's size (toolkit.images.fit, as an input image), audio as a float32 (1, channels, samples)
  tensor resampled to the model's rate (PyAV's resampler) and cut at `seconds`.
"""
from toolkit import images
from toolkit.errors import ConfigError

MAX_INPUT_FRAMES = 2048          # past any model's clip (LTX-2: 20 s at 50 fps is 1001)
MAX_INPUT_SECONDS = 1200.0       # 20 minutes of audio
KINDS = ("image", "video", "audio")


def _open(path: str, field: str, kind: str):
    import av

    try:
        container = av.open(path)
    except (av.FFmpegError, OSError, ValueError, UnicodeDecodeError):
        raise ConfigError(field, f"is not a {kind} file PyAV/FFmpeg can read") from None
    streams = container.streams.video if kind == "video" else container.streams.audio
    if not streams:
        container.close()
        raise ConfigError(field, f"holds no {kind} stream")
    return container, streams[0]


def _first_frame(container, stream, field: str, kind: str):
    import av

    try:
        for frame in container.decode(stream):
            return frame
    except (av.FFmpegError, ValueError) as e:
        raise ConfigError(field, f"is not a whole {kind} file (its first frame does not decode: {e})") from None
    raise ConfigError(field, f"has no {kind} frames")


def video_info(path: str, field: str) -> tuple[int, int, int]:
    """(width, height, frames) of the video at `path`, checked (module docstring)."""
    import av

    container, stream = _open(path, field, "video")
    with container:
        width, height = stream.codec_context.width, stream.codec_context.height
        if width < 1 or height < 1:
            raise ConfigError(field, f"is {width}x{height}: an empty video")
        if width * height > images.MAX_INPUT_PIXELS:
            raise ConfigError(field, f"has {width}x{height} frames ({width * height} pixels), over the "
                              f"{images.MAX_INPUT_PIXELS} pixels an input frame may have")
        frames = 0
        try:
            for packet in container.demux(stream):
                if packet.size:
                    frames += 1
                    if frames > MAX_INPUT_FRAMES:
                        raise ConfigError(field, f"has over {MAX_INPUT_FRAMES} frames, the most an input "
                                          "video may have")
        except av.FFmpegError as e:
            raise ConfigError(field, f"is not a whole video (truncated or corrupt: {e})") from None
        container.seek(0)
        _first_frame(container, stream, field, "video")
    return width, height, frames


def audio_info(path: str, field: str) -> tuple[int, float]:
    """(sample_rate, seconds) of the audio at `path`, checked (module docstring)."""
    import av

    container, stream = _open(path, field, "audio")
    with container:
        rate = stream.codec_context.sample_rate or stream.rate
        if not rate:
            raise ConfigError(field, "has no sample rate")
        samples = 0
        try:
            for packet in container.demux(stream):
                if packet.duration and packet.time_base:
                    samples += float(packet.duration * packet.time_base) * rate
                if samples > MAX_INPUT_SECONDS * rate:
                    raise ConfigError(field, f"is over {MAX_INPUT_SECONDS:g} s, the longest an input audio "
                                      "may be")
        except av.FFmpegError as e:
            raise ConfigError(field, f"is not a whole audio file (truncated or corrupt: {e})") from None
        container.seek(0)
        _first_frame(container, stream, field, "audio")
    return int(rate), samples / rate


def check_input(path: str, field: str, kind: str):
    """Check the input file at `path` as a `kind` (image | video | audio); ConfigError naming `field`."""
    if kind == "image":
        return images.check_image(path, field)
    if kind == "video":
        return video_info(path, field)
    if kind == "audio":
        return audio_info(path, field)
    raise ValueError(f"unknown input kind {kind!r} (known: {', '.join(KINDS)})")


def check_fits(gen, where: str = "sample"):
    """A video input holds at least the frames the request makes."""
    from toolkit.models.arch import INPUT_KINDS

    for name, kind in INPUT_KINDS.items():
        path = getattr(gen, name, None)
        if kind == "video" and path:
            _w, _h, frames = video_info(path, f"{where}.{name}")
            if frames < gen.num_frames:
                raise ConfigError(f"{where}.{name}", f"has {frames} frames; the request makes {gen.num_frames} "
                                  f"(sample.num_frames): send a longer video or ask for fewer frames")


def load_video(path: str, width: int, height: int, num_frames: int, resize_mode: str = "crop", *,
               mask: bool = False) -> list:
    """The first `num_frames` frames of the video at `path` as PIL images at width x height by
    `resize_mode` (RGB; a mask: L, white = generate, padded white as a mask image is)."""
    import av

    out = []
    with av.open(path) as container:
        for frame in container.decode(container.streams.video[0]):
            im = frame.to_image().convert("L" if mask else "RGB")
            out.append(images.fit(im, width, height, resize_mode, fill=255 if mask else None))
            if len(out) == num_frames:
                break
    if len(out) < num_frames:
        raise ValueError(f"{path}: {len(out)} frames decode, {num_frames} are needed")
    return out


def load_audio(path: str, sample_rate: int, channels: int, seconds: float | None = None):
    """The audio at `path` as a float32 tensor (1, channels, samples) at `sample_rate` Hz (resampled;
    mono made stereo or stereo mono as `channels` asks), cut at `seconds` when given."""
    import av
    import numpy as np
    import torch

    layout = {1: "mono", 2: "stereo"}.get(channels, f"{channels}c")
    resampler = av.AudioResampler(format="fltp", layout=layout, rate=sample_rate)
    chunks = []
    with av.open(path) as container:
        for frame in container.decode(container.streams.audio[0]):
            chunks.extend(f.to_ndarray() for f in resampler.resample(frame))
        chunks.extend(f.to_ndarray() for f in resampler.resample(None))      # flush
    audio = np.concatenate(chunks, axis=1) if chunks else np.zeros((channels, 0), np.float32)
    if seconds is not None:
        audio = audio[:, : int(round(seconds * sample_rate))]
    return torch.from_numpy(np.ascontiguousarray(audio, dtype=np.float32))[None]

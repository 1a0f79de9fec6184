"""Test fixtures built on the tiny models (toolkit/models/tiny): files no arch's recipe writes."""
from __future__ import annotations

import os
import pathlib

from toolkit.models.tiny.loras import write_tiny_lora


def make_tiny_lora(arch: str, model_folder: str | os.PathLike, out_file: str | os.PathLike, seed: int = 0,
                   rank: int = 4, fmt: str = "peft", text_encoder: bool = False) -> pathlib.Path:
    """A random LoRA for a tiny model (toolkit/models/tiny/loras.py: diffusers/PEFT keys by default,
    or the kohya / ComfyUI layouts the arch takes). Its weights change the output visibly."""
    return write_tiny_lora(arch, model_folder, out_file, fmt=fmt, seed=seed, rank=rank, text_encoder=text_encoder)


def input_image(path: str | os.PathLike, width: int = 64, height: int = 64) -> str:
    """A deterministic RGB test picture (gradients and a square) for archs that take an input image."""
    import numpy as np
    from PIL import Image

    y, x = np.mgrid[0:height, 0:width]
    rgb = np.stack([x * 255 // max(width - 1, 1), y * 255 // max(height - 1, 1), (x + y) * 127 // max(width + height - 2, 1)],
                   axis=-1).astype(np.uint8)
    rgb[height // 4: height // 2, width // 4: width // 2] = (250, 40, 40)
    pathlib.Path(path).parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(rgb, "RGB").save(path)
    return str(path)


def input_mask(path: str | os.PathLike, width: int = 64, height: int = 64) -> str:
    """A deterministic inpaint mask: white (repaint) over the centre half, black (keep) around it."""
    import numpy as np
    from PIL import Image

    mask = np.zeros((height, width), np.uint8)
    mask[height // 4: height * 3 // 4, width // 4: width * 3 // 4] = 255
    pathlib.Path(path).parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(mask).save(path)
    return str(path)


def input_video(path: str | os.PathLike, width: int = 64, height: int = 64, frames: int = 9, mask: bool = False) -> str:
    """A deterministic test video (the input picture's gradients, its square moving right each frame; a
    mask: white over the square's path), as an mp4 of another codec than our writer's (MPEG-4 Part 2)."""
    import av
    import numpy as np

    pathlib.Path(path).parent.mkdir(parents=True, exist_ok=True)
    y, x = np.mgrid[0:height, 0:width]
    with av.open(str(path), "w", format="mp4") as c:
        s = c.add_stream("mpeg4", rate=8)
        s.width, s.height, s.pix_fmt = width, height, "yuv420p"
        s.options = {"qscale": "2"}
        for i in range(frames):
            if mask:
                rgb = np.zeros((height, width, 3), np.uint8)
                rgb[height // 4: height * 3 // 4, :] = 255
            else:
                rgb = np.stack([x * 255 // max(width - 1, 1), y * 255 // max(height - 1, 1),
                                np.full_like(x, 40 + 20 * i)], -1).astype(np.uint8)
                left = (i * width // max(frames, 1)) % max(width // 2, 1)
                rgb[height // 4: height // 2, left: left + width // 4] = (250, 40, 40)
            frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(rgb), format="rgb24")
            frame.pts = i
            c.mux(s.encode(frame))
        c.mux(s.encode())
    return str(path)


def input_audio(path: str | os.PathLike, seconds: float = 1.0, sample_rate: int = 22050, channels: int = 1) -> str:
    """A deterministic test sound (a chord, fading in), as a wav at another rate than the models'."""
    import numpy as np

    from toolkit.media import save_audio

    t = np.arange(int(seconds * sample_rate)) / sample_rate
    tone = sum(np.sin(2 * np.pi * f * t) for f in (220.0, 277.2, 329.6)) / 4 * np.minimum(1.0, t * 4)
    return save_audio(np.stack([tone] * channels), path, sample_rate)["path"]

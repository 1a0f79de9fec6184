"""A scheduler's latents as a `latent` frame carries them: every batch item, in the frame layout the arch's
`Latents` row names (BCHW, BCFHW or BLC), float16 on the CPU. Packed tokens are unpacked here so
that clients project every arch the same way, with the arch's channels x 3 table."""
import sys

import torch

from toolkit.models.arch import Latents


def unpack_tokens(latents: torch.Tensor, h: int, w: int, patch: int) -> torch.Tensor:
    """(B, h*w, C*p*p) tokens, each a p x p patch with channel index c*p*p + dy*p + dx (Flux's
    `_pack_latents`, Flux.2's patchify) -> (B, C, h*p, w*p)."""
    b, length, d = latents.shape
    if h * w != length:
        raise ValueError(f"cannot unpack {length} tokens into {h}x{w}")
    c = d // (patch * patch)
    x = latents.reshape(b, h, w, c, patch, patch).permute(0, 3, 1, 4, 2, 5)
    return x.reshape(b, c, h * patch, w * patch)


def unfold_patches(latents: torch.Tensor, patch: int) -> torch.Tensor:
    """(B, C*p*p, h, w), each position a p x p patch with channel index c*p*p + dy*p + dx (ERNIE-Image's
    `_patchify`: the order unpack_tokens reads) -> (B, C, h*p, w*p)."""
    b, d, h, w = latents.shape
    c = d // (patch * patch)
    x = latents.reshape(b, c, patch, patch, h, w).permute(0, 1, 4, 2, 5, 3)
    return x.reshape(b, c, h * patch, w * patch)


def unpack_tokens_channels_last(latents: torch.Tensor, h: int, w: int, patch: int) -> torch.Tensor:
    """(B, h*w, p*p*C) tokens, each a p x p patch with channel index dy*p*C + dx*C + c (Ideogram 4's
    packing) -> (B, C, h*p, w*p)."""
    b, length, d = latents.shape
    if h * w != length:
        raise ValueError(f"cannot unpack {length} tokens into {h}x{w}")
    c = d // (patch * patch)
    x = latents.reshape(b, h, w, patch, patch, c).permute(0, 5, 1, 3, 2, 4)
    return x.reshape(b, c, h * patch, w * patch)


def unpack_video_tokens(latents: torch.Tensor, f: int, h: int, w: int) -> torch.Tensor:
    """(B, f*h*w, C) tokens in (frame, row, column) order (LTX-Video, patch 1) -> (B, C, f, h, w)."""
    b, length, c = latents.shape
    if f * h * w != length:
        raise ValueError(f"cannot unpack {length} tokens into {f}x{h}x{w}")
    return latents.reshape(b, f, h, w, c).permute(0, 4, 1, 2, 3)


def to_frame(latents: torch.Tensor, spec: Latents, *, height: int, width: int, num_frames: int = 1,
             max_frames: int = 4) -> tuple[torch.Tensor, str]:
    """(contiguous float16 CPU tensor, frame layout); video is evenly subsampled to `max_frames`. The
    whole batch (B = sample.batch_size): item i is the image of seed + i."""
    x, layout = frame_on_device(latents, spec, height=height, width=width, num_frames=num_frames,
                                max_frames=max_frames)
    return x.to("cpu").contiguous(), layout


def frame_on_device(latents: torch.Tensor, spec: Latents, *, height: int, width: int, num_frames: int = 1,
                    max_frames: int = 4) -> tuple[torch.Tensor, str]:
    """to_frame without the copy: the contiguous float16 frame where the latents are (latent_copy.py
    moves it to the host without stalling the device)."""
    x = latents.detach()
    if spec.layout in ("packed", "packed_last", "packed_layers"):
        h, w = height // (spec.spatial * spec.patch), width // (spec.spatial * spec.patch)
        if spec.layout == "packed_layers":      # the first of the stacked images (Qwen-Image-Layered's composite)
            x = x[:, :h * w]
        unpack = unpack_tokens_channels_last if spec.layout == "packed_last" else unpack_tokens
        x = unpack(x, h, w, spec.patch)
    elif spec.layout == "patched":
        x = unfold_patches(x, spec.patch)
    elif spec.layout == "packed_video":
        x = unpack_video_tokens(x, spec.latent_frames(num_frames), height // spec.spatial, width // spec.spatial)
    elif spec.layout in ("BCT", "BFCHW"):       # channels second, as the frame layouts have them
        x = x.transpose(1, 2)
    elif spec.layout == "BFHWC":                # channels last: second, as BCFHW has them
        x = x.permute(0, 4, 1, 2, 3)
    elif spec.layout == "B1HWC":                # the one frame, channels second
        x = x[:, 0].permute(0, 3, 1, 2)
    elif spec.layout == "BC1HW":                # the one frame
        x = x[:, :, 0]
    if spec.frame_layout == "BCFHW" and max_frames and x.shape[2] > max_frames:
        idx = torch.linspace(0, x.shape[2] - 1, max_frames).round().long().to(x.device)
        x = x.index_select(2, idx)
    return x.to(torch.float16).contiguous(), spec.frame_layout


def payload_bytes(t: torch.Tensor) -> bytes:
    """Little-endian float16 bytes, C order."""
    arr = t.numpy()
    if sys.byteorder != "little":
        arr = arr.byteswap()
    return arr.tobytes()

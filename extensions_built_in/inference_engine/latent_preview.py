"""Latent layouts and per-family latent->RGB tables (data), and the conversion of a scheduler's
latents into what a `latent` frame carries.

The factors are facts from ComfyUI's comfy/latent_formats.py: a channels x 3 linear map (plus
bias) from the model-space latent to roughly [-1, 1] RGB. diffusers' schedulers work in the same
model space (scaled/normalised), so the tables apply to their latents as they are.
"""
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class PreviewFamily:
    rgb_factors: tuple      # C rows of (r, g, b)
    rgb_bias: tuple | None = None


FAMILIES = {
    "sd1": PreviewFamily((
        (0.3512, 0.2297, 0.3227), (0.3250, 0.4974, 0.2350), (-0.2829, 0.1762, 0.2721), (-0.2120, -0.2616, -0.7177))),
    "sdxl": PreviewFamily((
        (0.3920, 0.4054, 0.4549), (-0.2634, -0.0196, 0.0653), (0.0568, 0.1687, -0.0755), (-0.3112, -0.2359, -0.2076))),
    "sd3": PreviewFamily((
        (-0.0922, -0.0175, 0.0749), (0.0311, 0.0633, 0.0954), (0.1994, 0.0927, 0.0458), (0.0856, 0.0339, 0.0902),
        (0.0587, 0.0272, -0.0496), (-0.0006, 0.1104, 0.0309), (0.0978, 0.0306, 0.0427), (-0.0042, 0.1038, 0.1358),
        (-0.0194, 0.0020, 0.0669), (-0.0488, 0.0130, -0.0268), (0.0922, 0.0988, 0.0951), (-0.0278, 0.0524, -0.0542),
        (0.0332, 0.0456, 0.0895), (-0.0069, -0.0030, -0.0810), (-0.0596, -0.0465, -0.0293), (-0.1448, -0.1463, -0.1189)),
        (0.2394, 0.2135, 0.1925)),
    "flux": PreviewFamily((
        (-0.0346, 0.0244, 0.0681), (0.0034, 0.0210, 0.0687), (0.0275, -0.0668, -0.0433), (-0.0174, 0.0160, 0.0617),
        (0.0859, 0.0721, 0.0329), (0.0004, 0.0383, 0.0115), (0.0405, 0.0861, 0.0915), (-0.0236, -0.0185, -0.0259),
        (-0.0245, 0.0250, 0.1180), (0.1008, 0.0755, -0.0421), (-0.0515, 0.0201, 0.0011), (0.0428, -0.0012, -0.0036),
        (0.0817, 0.0765, 0.0749), (-0.1264, -0.0522, -0.1103), (-0.0280, -0.0881, -0.0499), (-0.1262, -0.0982, -0.0778)),
        (-0.0329, -0.0718, -0.0851)),
    "wan21": PreviewFamily((
        (-0.1299, -0.1692, 0.2932), (0.0671, 0.0406, 0.0442), (0.3568, 0.2548, 0.1747), (0.0372, 0.2344, 0.1420),
        (0.0313, 0.0189, -0.0328), (0.0296, -0.0956, -0.0665), (-0.3477, -0.4059, -0.2925), (0.0166, 0.1902, 0.1975),
        (-0.0412, 0.0267, -0.1364), (-0.1293, 0.0740, 0.1636), (0.0680, 0.3019, 0.1128), (0.0032, 0.0581, 0.0639),
        (-0.1251, 0.0927, 0.1699), (0.0060, -0.0633, 0.0005), (0.3477, 0.2275, 0.2950), (0.1984, 0.0913, 0.1861)),
        (-0.1835, -0.0868, -0.3360)),
    "hunyuan_video": PreviewFamily((
        (-0.0395, -0.0331, 0.0445), (0.0696, 0.0795, 0.0518), (0.0135, -0.0945, -0.0282), (0.0108, -0.0250, -0.0765),
        (-0.0209, 0.0032, 0.0224), (-0.0804, -0.0254, -0.0639), (-0.0991, 0.0271, -0.0669), (-0.0646, -0.0422, -0.0400),
        (-0.0696, -0.0595, -0.0894), (-0.0799, -0.0208, -0.0375), (0.1166, 0.1627, 0.0962), (0.1165, 0.0432, 0.0407),
        (-0.2315, -0.1920, -0.1355), (-0.0270, 0.0401, -0.0821), (-0.0616, -0.0997, -0.0727), (0.0249, -0.0469, -0.1703)),
        (0.0259, -0.0192, -0.0761)),
}

# what a latent frame carries for each layout a scheduler may return
FRAME_LAYOUT = {"BCHW": "BCHW", "packed": "BCHW", "BCFHW": "BCFHW", "BLC": "BLC"}


def preview_block(spec) -> dict:
    """The start frame's `preview` for an arch: family, frame layout and (when known) its tables."""
    fam = FAMILIES.get(spec.preview_family) if spec.preview_family else None
    return {"family": spec.preview_family, "layout": FRAME_LAYOUT[spec.latent_layout],
            "rgb_factors": [list(r) for r in fam.rgb_factors] if fam else None,
            "rgb_bias": list(fam.rgb_bias) if fam and fam.rgb_bias else None}


def unpack_tokens(latents: torch.Tensor, height: int, width: int, vae_scale: int, patch: int) -> torch.Tensor:
    """(B, L, C*p*p) packed tokens -> (B, C, H, W) latent image."""
    b, length, d = latents.shape
    h, w = height // (vae_scale * patch), width // (vae_scale * patch)
    if h * w != length:
        raise ValueError(f"cannot unpack {length} tokens into {h}x{w}")
    c = d // (patch * patch)
    x = latents.view(b, h, w, c, patch, patch).permute(0, 3, 1, 4, 2, 5)
    return x.reshape(b, c, h * patch, w * patch)


def to_frame(latents: torch.Tensor, spec, *, height: int, width: int, max_frames: int = 4):
    """Batch item 0 of the scheduler's latents in the frame layout, as a contiguous float16 CPU
    tensor: packed tokens unpacked, video evenly subsampled to `max_frames` frames."""
    x = latents.detach()[:1]
    layout = spec.latent_layout
    if layout == "packed":
        x = unpack_tokens(x, height, width, spec.vae_scale, spec.latent_patch)
    elif layout == "BCFHW" and max_frames and x.shape[2] > max_frames:
        idx = torch.linspace(0, x.shape[2] - 1, max_frames).round().long().to(x.device)
        x = x.index_select(2, idx)
    return x.to("cpu", torch.float16).contiguous(), FRAME_LAYOUT[layout]


def payload_bytes(t: torch.Tensor) -> bytes:
    """Little-endian float16 bytes, C order."""
    import sys
    arr = t.numpy()
    if sys.byteorder != "little":
        arr = arr.byteswap()
    return arr.tobytes()

"""A request's newest `preview` frame (or, for a request without previews, its newest `latent` frame
by the projection in docs/engine_api.md) as a small base64 image: A1111's /progress `current_image`,
OpenAI's partial images."""
import base64
import io

import numpy as np

from extensions_built_in.inference_engine.protocol import FrameReader

PREVIEW_MAX_SIDE = 512


def latent_png_b64(frame: bytes, spec, max_side: int = PREVIEW_MAX_SIDE) -> str | None:
    """A `latent` frame as a small base64 PNG; None for audio or an unreadable frame."""
    from PIL import Image

    try:
        header, payload = FrameReader().feed(frame)[0]
        arr = np.frombuffer(payload, dtype="<f2").reshape(header["shape"]).astype(np.float32)
    except Exception:
        return None
    layout = header.get("layout")
    if layout == "BCFHW":
        arr = arr[:, :, 0]                       # the first frame
    elif layout != "BCHW":
        return None
    x = arr[0]                                   # C, H, W
    c, h, w = x.shape
    fam = spec.latents.format
    if fam is not None and len(fam.rgb_factors) == c:
        rgb = np.einsum("chw,ck->hwk", x, np.asarray(fam.rgb_factors, dtype=np.float32))
        if fam.rgb_bias:
            rgb += np.asarray(fam.rgb_bias, dtype=np.float32)
        img = np.round(np.clip((rgb + 1) / 2, 0, 1) * 255)
    else:
        chans = [x[i] if i < c else x[0] for i in range(3)]
        img = np.stack([(ch - ch.min()) / max(float(ch.max() - ch.min()), 1e-8) * 255 for ch in chans], axis=-1)
    img = np.nan_to_num(img).astype(np.uint8)
    scale = max(1, min(spec.latents.spatial, max_side // max(h, w, 1)))
    pil = Image.fromarray(img, "RGB")
    if scale > 1:
        pil = pil.resize((w * scale, h * scale), Image.Resampling.BILINEAR)
    buf = io.BytesIO()
    pil.save(buf, format="PNG")
    return base64.b64encode(buf.getvalue()).decode("ascii")


def preview_payload(frame: bytes) -> tuple[dict, bytes] | None:
    """(header, JPEG bytes) of an encoded `preview` frame; None when it is not one."""
    try:
        header, payload = FrameReader().feed(frame)[0]
    except Exception:
        return None
    return (header, payload) if header.get("type") == "preview" else None


def preview_b64(frame: bytes, jpeg: bool = False) -> str | None:
    """A `preview` frame's image as base64 (no data: prefix): PNG (A1111's default `samples_format`), or
    the frame's own JPEG bytes with `jpeg`."""
    from PIL import Image

    got = preview_payload(frame)
    if got is None:
        return None
    data = got[1]
    if not jpeg:
        buf = io.BytesIO()
        with Image.open(io.BytesIO(data)) as im:
            im.convert("RGB").save(buf, format="PNG")
        data = buf.getvalue()
    return base64.b64encode(data).decode("ascii")

"""Small decoded preview images while a request samples (`stream.preview_image: "jpeg"`).

Two methods, each frame saying which (`decoder`):
- a tiny autoencoder (TAESD, TAESDXL, TAESD3, TAEF1: toolkit/models/tiny_autoencoder.py) where the
  person has the one for the model's latent space and engine.preview_decoder is auto: the worker loads
  it with the model and it decodes the image latent (8x its size), resized to at most TAE_MAX_SIDE;
- else the latent->RGB projection the `latent` frames' clients use (docs/engine_api.md, "Preview
  projection"), done here on the device: a matmul of the latent channels with the arch's table
  (`Latents.format`, toolkit/latent_formats.py) plus its bias, `(rgb + 1) / 2` to bytes, then a
  bilinear resize to the picture's aspect with at most PREVIEW_MAX_SIDE pixels on the long side. An arch
  without a table shows its first three channels, each normalised by its own min/max.
Video shows its first frame, projected (no video TAE has a diffusers class); audio (BLC) makes none.
A decoder that fails on a step is dropped for the rest of the request (logged once), the projection on.

The small RGB tensor leaves the device through latent_copy.FrameStream (on CUDA without a per-step
sync, like the latent frames) and is JPEG-encoded on the host when it arrives.
"""
import io
import logging

from toolkit.models import latent_copy
from toolkit.models import latents as latent_frames
from toolkit.models import tiny_autoencoder

log = logging.getLogger(__name__)
PREVIEW_MAX_SIDE = 256          # the projection: 1/8 scale, upscaled
TAE_MAX_SIDE = 512              # a tiny autoencoder's full-size picture, downscaled (ComfyUI's default)
JPEG_QUALITY = 80
FORMATS = ("jpeg",)


def preview_size(width: int, height: int, max_side: int = PREVIEW_MAX_SIDE) -> tuple[int, int]:
    """(w, h) of a preview: the picture's aspect, at most `max_side` on the long side, never larger."""
    scale = min(1.0, max_side / max(width, height, 1))
    return max(1, round(width * scale)), max(1, round(height * scale))


def device_table(fmt, device):
    """(C x 3 factors, 3 x 1 x 1 bias or None) of `fmt` as float32 tensors on `device`."""
    import torch

    table = torch.tensor(fmt.rgb_factors, dtype=torch.float32, device=device)
    bias = torch.tensor(fmt.rgb_bias, dtype=torch.float32, device=device)[:, None, None] if fmt.rgb_bias else None
    return table, bias


def project_rgb(frame, fmt, out_w: int, out_h: int, tables=None):
    """A (C, H, W) latent frame (any float dtype, on any device) -> (out_h, out_w, 3) uint8 on that device.
    `tables`: device_table(fmt, frame.device), made once per request rather than copied up every step."""
    import torch
    import torch.nn.functional as F

    x = frame.float()
    c = x.shape[0]
    if fmt is not None and len(fmt.rgb_factors) == c:
        table, bias = tables or device_table(fmt, x.device)
        rgb = torch.einsum("chw,ck->khw", x, table)
        if bias is not None:
            rgb = rgb + bias
        rgb = ((rgb + 1) / 2).clamp(0, 1)
    else:
        chans = torch.stack([x[i] if i < c else x[0] for i in range(3)])
        lo = chans.amin(dim=(1, 2), keepdim=True)
        hi = chans.amax(dim=(1, 2), keepdim=True)
        rgb = (chans - lo) / (hi - lo).clamp_min(1e-8)
    rgb = torch.nan_to_num(rgb)
    rgb = F.interpolate(rgb[None], size=(out_h, out_w), mode="bilinear", align_corners=False)[0]
    return (rgb * 255).round().clamp(0, 255).to(torch.uint8).permute(1, 2, 0).contiguous()


def encode_jpeg(rgb_hwc) -> bytes:
    """(H, W, 3) uint8 host tensor -> JPEG bytes."""
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(rgb_hwc.numpy(), "RGB").save(buf, format="JPEG", quality=JPEG_QUALITY)
    return buf.getvalue()


class PreviewImages:
    """One request's preview frames: `step(i, n, latents, x0)` on its every_n_steps (and the last step)
    makes one from the request's first row, `flush()` delivers what is still copying, `discard()` drops it.
    `emit(header, payload)` sends a frame of the request; `decoder`: the resident tiny autoencoder for
    its latent space (None: the projection), named `tae`."""

    def __init__(self, emit, spec, opts, *, width: int, height: int, num_frames: int = 1, copier=None,
                 decoder=None, tae: str | None = None):
        self.emit, self.spec, self.opts = emit, spec, opts
        self.width, self.height, self.num_frames = width, height, num_frames
        self.decoder, self.tae = decoder, tae
        self.frames = latent_copy.FrameStream(self._deliver, copier or latent_copy.SyncCopier())
        self.tables = None

    def _size(self, decoded: bool) -> tuple[int, int]:
        return preview_size(self.width, self.height, TAE_MAX_SIDE if decoded else PREVIEW_MAX_SIDE)

    def _deliver(self, header, rgb):
        h, w = int(rgb.shape[0]), int(rgb.shape[1])
        self.emit({**header, "format": "jpeg", "width": w, "height": h}, encode_jpeg(rgb))

    def step(self, i: int, n: int, latents, x0):
        if (i + 1) % self.opts.every_n_steps and i + 1 != n:
            return
        src = x0 if (self.opts.preview == "x0" and x0 is not None) else latents
        frame, layout = latent_frames.frame_on_device(src[:1], self.spec, height=self.height, width=self.width,
                                                      num_frames=self.num_frames, max_frames=1)
        if layout == "BCFHW":
            x = frame[0, :, 0]
        elif layout == "BCHW":
            x = frame[0]
        else:
            return                      # audio: no picture
        header = {"type": "preview", "step": i + 1, "total": n}
        if layout == "BCHW" and tiny_autoencoder.fits(self.decoder, x.shape[0]):
            try:
                rgb = tiny_autoencoder.decode_rgb(self.decoder, x, *self._size(True))
            except Exception as e:     # never worth the request (out of memory included): the projection goes on
                log.warning("preview decoder %s failed, projecting this request's previews: %s: %s",
                            self.tae, type(e).__name__, e)
                self.decoder = None
            else:
                self.frames.push({**header, "decoder": self.tae}, rgb)
                return
        fmt = self.spec.format
        if self.tables is None and fmt is not None and len(fmt.rgb_factors) == x.shape[0]:
            self.tables = device_table(fmt, x.device)
        w, h = self._size(False)
        self.frames.push({**header, "decoder": tiny_autoencoder.PROJECTION}, project_rgb(x, fmt, w, h, self.tables))

    def flush(self):
        self.frames.flush()

    def discard(self):
        self.frames.discard()


def for_request(emit, spec, opts, *, width: int, height: int, num_frames: int = 1, device="cpu", decoder=None,
                tae: str | None = None):
    """The request's PreviewImages, or None when it asked for none (`stream.preview_image`)."""
    if opts.preview_image not in FORMATS:
        return None
    return PreviewImages(emit, spec, opts, width=width, height=height, num_frames=num_frames,
                         copier=latent_copy.copier_for(device), decoder=decoder, tae=tae)

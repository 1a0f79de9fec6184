"""A request's input images (`init_img`, `mask_img`, `ctrl_img`, `ctrl_img_1..3`): checked where they
arrive, prepared where they are used.

- `check_image(path, field)` runs in the engine process (Pillow, no torch) before a request is
  queued: the size is read from the header alone and refused past `MAX_INPUT_PIXELS` before any
  pixel is decoded (a 50,000 x 50,000 PNG is a few kilobytes of header and 7.5 GB of pixels), then
  the whole image is decoded once, so a truncated file or one that is no image is refused too.
  Every refusal is a ConfigError naming the field.
- `decode_data_url(url, field)` turns a `data:image/<type>;base64,...` URL into bytes and an extension
  (the engine stores them as an asset before queueing).
- `load_image(path, width, height, resize_mode, mask=)` runs in the worker: EXIF orientation applied
  (`ImageOps.exif_transpose`), converted to RGB (a mask to L: white = repaint), and brought to the
  request's size by `resize_mode` (A1111's three):

  - `resize` (A1111's Just resize): scale to width x height; the aspect ratio is not kept.
  - `crop` (Crop and resize, the default): scale to cover width x height keeping the aspect ratio,
    then crop the overflow, centred.
  - `fill` (Resize and fill): scale to fit inside keeping the aspect ratio, centre it, and pad: an
    image with its edge pixels repeated outwards, a mask with white (the padding is new content:
    repainted).

  An image already at the request's size is used as it is in every mode. Scaling is Lanczos, as
  A1111's. Edit references are loaded with `width=height=None`: oriented and converted but kept at
  their own size, since every edit pipeline sizes its references itself (Qwen-Image-Edit to about
  1024x1024 of area, Kontext to its training resolutions) and cropping a reference to the output's
  aspect ratio would cut away what the prompt refers to.

Pillow is imported inside the functions and `Image.MAX_IMAGE_PIXELS` is set to `MAX_INPUT_PIXELS`
before the first image opens, so Pillow itself refuses (DecompressionBombError) past twice that
anywhere in the process.
"""
import base64
import binascii
import re
import warnings

# 8192 x 8192: above any camera's frame up to 64 MP, 4x the engine's largest output (max_pixels)
MAX_INPUT_PIXELS = 8192 * 8192
FORMATS = {"PNG": "png", "JPEG": "jpg", "WEBP": "webp", "BMP": "bmp", "GIF": "gif", "TIFF": "tiff"}
DATA_URL = re.compile(r"^data:(image|video|audio)/([a-z0-9.+-]+);base64,", re.IGNORECASE)
MAX_DATA_URL_BYTES = 64 << 20        # the decoded size, as POST /assets takes

_pil_ready = False


def _pil():
    """PIL's Image, with its decompression-bomb limit set to ours (once per process)."""
    global _pil_ready
    from PIL import Image
    if not _pil_ready:
        Image.MAX_IMAGE_PIXELS = MAX_INPUT_PIXELS
        _pil_ready = True
    return Image


def is_data_url(value) -> bool:
    return isinstance(value, str) and bool(DATA_URL.match(value))


def decode_data_url(url: str, field: str, kind: str = "image") -> tuple[bytes, str]:
    """(bytes, extension) of a `data:<kind>/...;base64,` URL (kind: image, or an input video's or
    audio's); ConfigError(field) when it is not one."""
    from toolkit.errors import ConfigError

    m = DATA_URL.match(url)
    if not m or m.group(1).lower() != kind:
        raise ConfigError(field, f"a data URL must read data:{kind}/<type>;base64,<data>")
    body = url[m.end():]
    if len(body) > (MAX_DATA_URL_BYTES + 2) // 3 * 4:
        raise ConfigError(field, f"the data URL holds more than {MAX_DATA_URL_BYTES} bytes")
    try:
        data = base64.b64decode(body, validate=True)
    except (binascii.Error, ValueError):
        raise ConfigError(field, "the data URL is not valid base64") from None
    if not data:
        raise ConfigError(field, "the data URL is empty")
    subtype = {"jpeg": "jpg", "mpeg": "mp3", "x-wav": "wav", "quicktime": "mov"}.get(m.group(2).lower(),
                                                                                   m.group(2).lower())
    return data, subtype if subtype.isalnum() else "img"      # a file name's extension: letters and digits only


def check_image(path: str, field: str, max_pixels: int = MAX_INPUT_PIXELS) -> tuple[int, int]:
    """(width, height) of the image at `path` after checking it: a format Pillow reads (FORMATS), at
    most `max_pixels` by its header (checked before decoding), and whole (decoded once). Anything
    else is a ConfigError naming `field`."""
    from toolkit.errors import ConfigError

    Image = _pil()
    from PIL import UnidentifiedImageError
    try:
        with warnings.catch_warnings():           # past MAX_INPUT_PIXELS Pillow warns; refused below
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            im = Image.open(path)                 # reads the header only (past twice the limit: refuses)
        with im:
            width, height = im.size
            fmt = im.format
            if fmt not in FORMATS:
                raise ConfigError(field, f"is a {fmt} image; send one of {', '.join(sorted(set(FORMATS.values())))}")
            if width * height > max_pixels:
                raise ConfigError(field, f"is {width}x{height} ({width * height} pixels), over the "
                                  f"{max_pixels} pixels an input image may have")
            if width < 1 or height < 1:
                raise ConfigError(field, f"is {width}x{height}: an empty image")
            im.load()                             # a truncated or corrupt file fails here
    except ConfigError:
        raise
    except UnidentifiedImageError:
        raise ConfigError(field, "is not an image (PNG, JPEG, WebP, BMP, GIF or TIFF)") from None
    except Image.DecompressionBombError:
        raise ConfigError(field, f"is over the {max_pixels} pixels an input image may have (a decompression "
                          "bomb, by its header)") from None
    except (OSError, SyntaxError, ValueError, EOFError) as e:   # Pillow's truncated/corrupt-file errors
        raise ConfigError(field, f"is not a whole image (truncated or corrupt: {e})") from None
    return width, height


def load_image(path: str, width: int | None = None, height: int | None = None, resize_mode: str = "crop", *,
               mask: bool = False):
    """The PIL image a pipeline gets for one input: EXIF orientation applied, RGB (a mask: L), at
    width x height by `resize_mode` (module docstring); with width/height None, at its own size."""
    from PIL import ImageOps

    Image = _pil()
    with Image.open(path) as im:
        im = ImageOps.exif_transpose(im)
        im = im.convert("L" if mask else "RGB")          # as diffusers' load_image (alpha is dropped)
    if width is None or height is None:
        return im
    return fit(im, width, height, resize_mode, fill=255 if mask else None)


def fit(im, width: int, height: int, resize_mode: str, fill: int | None = None):
    """`im` at width x height by `resize_mode` (resize | crop | fill). `fill` mode pads with the edge
    pixels repeated outwards, or with the constant `fill` when given (a mask's white)."""
    Image = _pil()
    if im.size == (width, height):
        return im
    if resize_mode == "resize":
        return im.resize((width, height), Image.LANCZOS)
    w, h = im.size
    if resize_mode == "crop":
        scale = max(width / w, height / h)
        sw, sh = max(width, round(w * scale)), max(height, round(h * scale))
        im = im.resize((sw, sh), Image.LANCZOS)
        left, top = (sw - width) // 2, (sh - height) // 2
        return im.crop((left, top, left + width, top + height))
    if resize_mode == "fill":
        import numpy as np

        scale = min(width / w, height / h)
        sw, sh = min(width, max(1, round(w * scale))), min(height, max(1, round(h * scale)))
        im = im.resize((sw, sh), Image.LANCZOS)
        left, top = (width - sw) // 2, (height - sh) // 2
        pad = ((top, height - sh - top), (left, width - sw - left))
        a = np.asarray(im)
        if a.ndim == 3:
            pad += ((0, 0),)
        a = np.pad(a, pad, mode="edge") if fill is None else np.pad(a, pad, mode="constant", constant_values=fill)
        return Image.fromarray(a)
    raise ValueError(f"unknown resize_mode {resize_mode!r}")


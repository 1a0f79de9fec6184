"""Input images of the compat routes (A1111's img2img, OpenAI's image edits), in the engine process
(Pillow and numpy, no torch).

Every image a client sends is checked by the engine's own `toolkit.images.check_image` before a pixel
is decoded (a decompression bomb is refused by its header; a truncated file or one that is no image
when decoded), then handed to the engine as a `data:image/...;base64,` URL: `Engine.submit` stores it
as an asset, within `engine.limits.max_asset_bytes`, as it does for /generate. An image the route has
to change first (an A1111 mask: binarized, inverted, blurred; an init image filled under its mask or
flattened onto white; an OpenAI alpha mask) is decoded only after that check and sent as a PNG.
A refusal is a ConfigError naming the client's own field; each route answers it in its shape.
"""
import base64
import binascii
import io
import re

from toolkit import images
from toolkit.errors import ConfigError

MAX_IMAGE_BYTES = images.MAX_DATA_URL_BYTES       # one image, decoded (what POST /assets takes)
_B64_SPACE = re.compile(rb"\s+")


# -- bytes in, data URLs out --------------------------------------------------------------------------

def decode_b64_image(value, field: str) -> bytes:
    """A1111's image string: bare base64 or a `data:image/...;base64,` URL (as A1111's own
    decode_base64_to_image takes), as bytes. URLs are not fetched."""
    if not isinstance(value, str):
        raise ConfigError(field, f"must be a base64 image (a string), got {type(value).__name__}")
    if value.startswith(("http://", "https://")):
        raise ConfigError(field, "image URLs are not fetched here: send the image itself as base64")
    if value.startswith("data:"):
        return images.decode_data_url(value, field)[0]
    raw = _B64_SPACE.sub(b"", value.encode("ascii", "replace"))
    if len(raw) > (MAX_IMAGE_BYTES + 2) // 3 * 4:
        raise ConfigError(field, f"holds more than {MAX_IMAGE_BYTES} bytes")
    try:
        data = base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError):
        raise ConfigError(field, "is not base64 data (nor a data:image/...;base64, URL)") from None
    if not data:
        raise ConfigError(field, "is empty")
    return data


def check(data: bytes, field: str) -> tuple[int, int]:
    """(width, height) of an image the engine would take: the engine's own check (header first)."""
    if len(data) > MAX_IMAGE_BYTES:
        raise ConfigError(field, f"is over {MAX_IMAGE_BYTES} bytes")
    return images.check_image(io.BytesIO(data), field)


def data_url(data: bytes) -> str:
    """A checked image's bytes as the data URL the engine stores (its format named as it is)."""
    from PIL import Image

    with Image.open(io.BytesIO(data)) as im:            # check()ed first: Pillow's pixel limit is set
        ext = images.FORMATS.get(im.format, "png")
    return f"data:image/{ext};base64," + base64.b64encode(data).decode("ascii")


def png_data_url(im) -> str:
    buf = io.BytesIO()
    im.save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def open_checked(data: bytes):
    """A checked image decoded, EXIF orientation applied (as the worker's load_image does, since a
    re-encoded PNG no longer carries the orientation tag)."""
    from PIL import Image, ImageOps

    with Image.open(io.BytesIO(data)) as im:
        im.load()
        return ImageOps.exif_transpose(im)


def has_alpha(im) -> bool:
    return "A" in im.getbands() or (im.mode == "P" and "transparency" in im.info)


# -- A1111 --------------------------------------------------------------------------------------------

def a1111_mask(im, *, invert: bool, blur_x: float, blur_y: float):
    """An A1111 mask as its img2img prepares it, before resizing: an RGBA mask with real alpha is
    its alpha thresholded at 128 (A1111's create_binary_mask), anything else its luminance; white
    repaints. Inverted (inpainting_mask_invert), then blurred by a Gaussian of sigma blur_x / blur_y
    (A1111's mask_blur_x / mask_blur_y: cv2.GaussianBlur there, Pillow's GaussianBlur here)."""
    from PIL import ImageFilter, ImageOps

    if im.mode == "P":
        im = im.convert("RGBA")
    if im.mode == "RGBA" and im.getextrema()[-1] != (255, 255):
        mask = im.split()[-1].convert("L").point(lambda x: 255 if x > 128 else 0)
    else:
        mask = im.convert("L")
    if invert:
        mask = ImageOps.invert(mask)
    if blur_x > 0 or blur_y > 0:
        mask = mask.filter(ImageFilter.GaussianBlur((blur_x, blur_y)))
    return mask


def flatten(im, background=(255, 255, 255)):
    """An image with alpha composited onto white (A1111's images.flatten with its default
    img2img_background_color), else the image as RGB."""
    from PIL import Image

    if not has_alpha(im):
        return im.convert("RGB")
    im = im.convert("RGBA")
    out = Image.new("RGBA", im.size, (*background, 255))
    out.alpha_composite(im)
    return out.convert("RGB")


def fill(image, mask):
    """A1111's masking.fill ("Masked content: fill"): the masked area filled with the colours around
    it, by blurring the unmasked image ever less and compositing the blurs (RGB image, L mask of the
    same size, white = masked)."""
    from PIL import Image, ImageFilter, ImageOps

    image_mod = Image.new("RGBA", image.size)
    image_masked = Image.new("RGBa", image.size)
    image_masked.paste(image.convert("RGBA").convert("RGBa"), mask=ImageOps.invert(mask.convert("L")))
    for radius, repeats in ((256, 1), (64, 1), (16, 2), (4, 4), (2, 2), (0, 1)):
        blurred = image_masked.filter(ImageFilter.GaussianBlur(radius)).convert("RGBA")
        for _ in range(repeats):
            image_mod.alpha_composite(blurred)
    return image_mod.convert("RGB")


def fit(im, width: int, height: int, resize_mode: str, *, mask: bool = False):
    """`im` at width x height as the worker would bring it (toolkit.images.fit; a mask pads white)."""
    return images.fit(im, width, height, resize_mode, fill=255 if mask else None)


# -- OpenAI -------------------------------------------------------------------------------------------

def openai_mask(im, field: str):
    """OpenAI's mask (a PNG whose transparent pixels, alpha 0, mark where to edit) as the engine's
    L mask, white = repaint: 255 - alpha. A mask without an alpha channel is refused: it marks nothing."""
    if not has_alpha(im):
        raise ConfigError(field, "must be a PNG with an alpha channel: its fully transparent pixels mark where "
                          "to edit")
    return im.convert("RGBA").split()[-1].point(lambda a: 255 - a)

"""ComfyUI's files on disk: where a `{filename, subfolder, type}` triple points (GET /view, /upload/mask's
`original_ref`), and POST /upload/image and /upload/mask storing into the input folder.

The input folder is `<assets folder>/comfy_input` (the job folder's assets/): an uploaded image counts in
engine.limits.max_asset_bytes, and a LoadImage node's file is an asset path the engine's resolver takes.
`output` and `temp` are both the engine's output folder (PreviewImage's files are written there too).
A name or subfolder that leads out of its folder, links included, is refused."""
import hashlib
import io
import json
import os

from extensions_built_in.inference_engine.compat import forms
from toolkit.errors import ConfigError
from toolkit.media import atomic_path

TYPES = ("output", "input", "temp")
INPUT_FOLDER = "comfy_input"


class Refused(Exception):
    """A 4xx: `status`, the field, why."""

    def __init__(self, status: int, field: str, message: str):
        super().__init__(message)
        self.status, self.field, self.message = status, field, message


def annotated(filename: str) -> tuple[str, str | None]:
    """ComfyUI's `name.png [output]` annotation: (name, type) or (filename, None)."""
    for kind in TYPES:
        tail = f" [{kind}]"
        if filename.endswith(tail):
            return filename[:-len(tail)], kind
    return filename, None


def check_name(filename, field: str = "filename") -> str:
    """A bare file name: no folder part, no `..`, no NUL."""
    if not isinstance(filename, str) or not filename.strip() or filename in (".", ".."):
        raise Refused(400, field, "must be a file name")
    if "/" in filename or "\\" in filename or "\x00" in filename or filename.startswith(".."):
        raise Refused(400, field, "must be a file name, without a folder or '..'")
    return filename


def folder_in(root: str, subfolder, field: str = "subfolder") -> str:
    """`root/subfolder`, links resolved, refused (403) when it is not inside `root`."""
    if not isinstance(subfolder, str) or "\x00" in subfolder:
        raise Refused(400, field, "must be a folder name")
    real_root = os.path.realpath(root)
    full = os.path.realpath(os.path.join(real_root, subfolder)) if subfolder else real_root
    if full != real_root and not full.startswith(real_root + os.sep):
        raise Refused(403, field, "leads out of its folder")
    return full


def locate(roots: dict, filename, subfolder="", kind="output", field: str = "filename") -> str:
    """The file `{filename, subfolder, type}` names (`roots`: type -> folder); 400 for a bad type or name,
    403 for a subfolder out of its folder, 404 when there is no such file inside."""
    name, note = annotated(filename) if isinstance(filename, str) else (filename, None)
    kind = note or kind or "output"
    if kind not in roots:
        raise Refused(400, "type", f"must be one of {', '.join(roots)}, got {kind!r}")
    name = check_name(name, field)
    folder = folder_in(roots[kind], subfolder or "")
    full = os.path.realpath(os.path.join(folder, name))
    if not full.startswith(os.path.realpath(roots[kind]) + os.sep) or not os.path.isfile(full):
        raise Refused(404, field, "no such file")
    return full


def parse_form(ctype: str, body: bytes) -> tuple[dict, list]:
    """The upload form as ({text field: value}, [(field, file name, bytes)]): compat/forms.py's parser."""
    if not ctype.lower().startswith("multipart/form-data"):
        raise Refused(400, "image", "send a multipart/form-data form (the image file and its fields)")

    def err(field, message):
        return Refused(400, field, message)
    return forms.parse_form(ctype, body, err, "image")


def store_upload(engine, input_dir: str, form: tuple, roots: dict, mask: bool) -> dict:
    """POST /upload/image (`mask`: /upload/mask): the form's `image` into the input folder's `subfolder`,
    named as sent or `name (1).ext` when that name holds other bytes (`overwrite`: replaced); the same
    bytes under the same name are not written twice. A mask is the `original_ref` image with the sent
    image's alpha. Answers ComfyUI's `{name, subfolder, type}`."""
    from extensions_built_in.inference_engine.compat import inputs

    fields, files = form
    image = next(((fn, data) for name, fn, data in files if name == "image"), None)
    if image is None:
        raise Refused(400, "image", "is required: the image file")
    kind = fields.get("type") or "input"
    if kind != "input":
        raise Refused(400, "type", f"uploads go to the input folder: must be 'input', got {kind!r}")
    subfolder = fields.get("subfolder", "")
    name = check_name(image[0], "image")
    data = image[1]
    try:
        inputs.check(data, "image")
    except ConfigError as e:
        raise Refused(400, "image", e.message) from None
    if mask:
        data = _masked(data, fields.get("original_ref"), roots)
    folder = folder_in(input_dir, subfolder)
    os.makedirs(folder, exist_ok=True)
    folder = folder_in(input_dir, subfolder)           # again: what was made is inside too
    stem, ext = os.path.splitext(name)
    path = os.path.join(folder, name)
    if fields.get("overwrite") not in ("true", "1"):
        digest, n = hashlib.sha256(data).digest(), 1
        while os.path.lexists(path):
            if os.path.isfile(path) and _digest(path) == digest:
                return {"name": name, "subfolder": subfolder, "type": "input"}
            name = f"{stem} ({n}){ext}"
            path = os.path.join(folder, name)
            n += 1
    elif os.path.islink(path) or (os.path.exists(path) and not os.path.isfile(path)):
        raise Refused(400, "image", "that name is not a file here")
    with engine.asset_upload() as upload:
        if not upload.take(len(data)):
            raise Refused(413, "image", upload.refusal)
        with atomic_path(path) as tmp:
            with open(tmp, "wb") as f:
                f.write(data)
        upload.stored()
    return {"name": name, "subfolder": subfolder, "type": "input"}


def _digest(path: str) -> bytes:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.digest()


def _masked(mask: bytes, original_ref, roots: dict) -> bytes:
    """The original image (`original_ref`: JSON `{filename, subfolder, type}`) with the mask's alpha, as PNG."""
    from extensions_built_in.inference_engine.compat import inputs

    try:
        ref = json.loads(original_ref) if isinstance(original_ref, str) else None
    except ValueError:
        ref = None
    if not isinstance(ref, dict):
        raise Refused(400, "original_ref", "is required: JSON {filename, subfolder, type} of the image masked")
    path = locate(roots, ref.get("filename"), ref.get("subfolder") or "", ref.get("type") or "output",
                  field="original_ref")
    with open(path, "rb") as f:
        original_bytes = f.read()
    try:
        inputs.check(original_bytes, "original_ref")
    except ConfigError as e:
        raise Refused(400, "original_ref", e.message) from None
    original = inputs.open_checked(original_bytes).convert("RGBA")
    alpha = inputs.open_checked(mask).convert("RGBA").getchannel("A")
    if alpha.size != original.size:
        raise Refused(400, "image", f"is {alpha.size[0]}x{alpha.size[1]}; the mask must have the original's size, "
                      f"{original.size[0]}x{original.size[1]}")
    original.putalpha(alpha)
    buf = io.BytesIO()
    original.save(buf, format="PNG")
    return buf.getvalue()

"""Control maps on request, for POST /preprocess (routes/preprocess.py) and A1111's /controlnet/detect
(compat/controlnet.py), in the engine process. No torch here.

Everything is checked here first (the preprocessor, its parameters, the image by its header: a ConfigError
naming the field). A model-free map (opencv) is made right here, on the caller's thread: it does not wait
for a running request. A model-based one (depth, normals) is made by the worker, where its model loads as a
pool component: a `messages.Preprocess` through `Engine.worker_call`, ahead of queued requests, after the
running one. Its model's folder is looked for here first (toolkit/annotators.find), so a missing model is a
422 before anything is sent.
"""
import io
import uuid

from extensions_built_in.inference_engine import messages as m
from toolkit import annotators, control_maps, images
from toolkit.errors import ConfigError

WAIT_SECONDS = 600.0          # how long a model-based map waits for the worker (a long request may run)


class PreprocessFailed(RuntimeError):
    """The worker could not make the map for a reason that is no bad value (a broken model file, say)."""


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def check_params(preprocessor, resolution=None, threshold_a=None, threshold_b=None, *, where: str = "",
                 model_folders=()):
    """(row, resolution, threshold_a, threshold_b) with defaults, the model of a model-based one present."""
    row, res, a, b = control_maps.check(preprocessor, resolution=resolution, threshold_a=threshold_a,
                                        threshold_b=threshold_b, where=where)
    if row.model is not None and annotators.find(row.model, model_folders) is None:
        ann = annotators.ANNOTATORS[row.model]
        raise ConfigError(_join(where, "preprocessor"),
                          f"{row.name} needs a {ann.label} model, and none is here: put its transformers folder "
                          f"(config.json, model.safetensors, preprocessor_config.json) under a model folder's "
                          f"annotators/ (e.g. `hf download {ann.repos[0]} --local-dir "
                          f"<model folder>/annotators/{ann.repos[0].split('/')[-1]}`)")
    return row, res, a, b


def make_png(engine, preprocessor, data: bytes, *, resolution=None, threshold_a=None, threshold_b=None,
             where: str = "", image_field: str = "image") -> bytes:
    """The control map of the image `data` (its file's bytes) as PNG bytes. ConfigError naming the field
    (`where.preprocessor`, `where.processor_res`, `where.threshold_a|b`, `image_field`); EngineBusy when the
    worker does not get to it; PreprocessFailed when it could not make it."""
    row, res, a, b = check_params(preprocessor, resolution, threshold_a, threshold_b, where=where,
                                  model_folders=engine.model_folders)
    images.check_image(io.BytesIO(data), image_field)
    if row.model_free:
        from PIL import Image, ImageOps
        with Image.open(io.BytesIO(data)) as im:
            im = ImageOps.exif_transpose(im)
            im.load()
        out = control_maps.make_map(row.name, im, resolution=res, threshold_a=a, threshold_b=b, where=where)
        buf = io.BytesIO()
        out.save(buf, format="PNG")
        return buf.getvalue()
    reply = engine.worker_call(m.Preprocess(uuid.uuid4().hex, row.name, bytes(data), res, a, b), m.Preprocessed,
                               WAIT_SECONDS)
    if reply.error is not None:
        if reply.field is not None:
            raise ConfigError(_join(where, reply.field), reply.error)
        raise PreprocessFailed(reply.error)
    return reply.png


def image_bytes(engine, value, field: str = "image") -> bytes:
    """An input image as bytes: a `data:image/...;base64,` URL (decoded, not stored), bare base64, or an
    asset id / path under the assets folder (POST /assets)."""
    if not isinstance(value, str) or not value:
        raise ConfigError(field, "must be an image: a data:image/...;base64, URL, base64, or an asset id from POST /assets")
    if images.is_data_url(value):
        return images.decode_data_url(value, field)[0]
    if engine.assets_folder:
        try:
            with open(engine.resolve_asset(value, field), "rb") as f:
                return f.read()
        except ConfigError:
            pass
    import base64
    import binascii
    if len(value) > (images.MAX_DATA_URL_BYTES + 2) // 3 * 4:
        raise ConfigError(field, f"holds more than {images.MAX_DATA_URL_BYTES} bytes")
    try:
        data = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise ConfigError(field, "must be an image: a data:image/...;base64, URL, base64, or an asset id from "
                                 "POST /assets") from None
    if not data:
        raise ConfigError(field, "is empty")
    return data

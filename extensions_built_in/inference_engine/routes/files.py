"""Files in: POST /assets stores an image a request then names, POST /settings reads the request
that made a file."""
import asyncio
import os
import re
import uuid

from fastapi import Depends, Request as HttpRequest

from extensions_built_in.inference_engine.engine import Engine
from extensions_built_in.inference_engine.routes.common import ApiError, engine_router, errors, require_token
from toolkit.errors import ConfigError
from toolkit.models.registry import ARCHS

MAX_ASSET_BYTES = 64 << 20
ASSET_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")

router = engine_router(dependencies=[Depends(require_token)])


@router.post("/assets", responses=errors(404, 413), max_body_size=MAX_ASSET_BYTES)
async def assets(request: HttpRequest, name: str):
    engine = request.app.state.engine
    if not engine.assets_folder:
        raise ApiError(404, "path", "this engine has no assets folder")
    if not ASSET_NAME.match(name) or ".." in name:
        raise ApiError(422, "name", "name: use letters, digits, '_', '-', '.' (no folders)")
    from toolkit.media import atomic_path
    stored = f"{uuid.uuid4().hex[:8]}_{name}"
    size = 0
    os.makedirs(engine.assets_folder, exist_ok=True)
    with engine.asset_upload() as upload:      # the folder's total, engine.limits.max_asset_bytes
        # written as it arrives, never held whole; a refusal or a dropped connection removes the part written
        with atomic_path(os.path.join(engine.assets_folder, stored)) as tmp:
            with open(tmp, "wb") as f:
                async for chunk in request.stream():
                    size += len(chunk)
                    if size > MAX_ASSET_BYTES:
                        raise ApiError(413, "body", f"asset is over {MAX_ASSET_BYTES} bytes")
                    if not upload.take(len(chunk)):
                        raise ApiError(413, "body", upload.refusal)
                    f.write(chunk)
            if not size:
                raise ApiError(422, "body", "empty body: send the file's bytes")
        upload.stored()
    return {"name": name, "path": stored}


@router.post("/settings", responses=errors(413, 503), max_body_size=MAX_ASSET_BYTES,
             openapi_extra={"requestBody": {"required": True, "content": {
                 "application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}}})
async def settings(request: HttpRequest):
    """The request that made a file: its raw bytes (png, jpg, webp, mp4, webm, wav, flac, mp3) in,
    `{source, format, model, sample, parameters, warnings}` out; `{model, sample}` is ready to
    POST to /generate. A foreign A1111 file gives the best mapping of its text onto a request.
    (Named /settings, not /resolve: /resolve reads as turning a JSON request into the resolved
    one, a route a form would want; one route taking a file or a request would be ambiguous.)"""
    # read whole: toolkit.media.read_metadata parses the file's bytes (bounded by MAX_ASSET_BYTES)
    data = bytearray()
    async for chunk in request.stream():
        data += chunk
        if len(data) > MAX_ASSET_BYTES:
            raise ApiError(413, "body", f"body: a file over {MAX_ASSET_BYTES} bytes")
    if not data:
        raise ApiError(422, "body", "body: empty: send the file's bytes")
    from toolkit.file_settings import READ_SECONDS
    try:      # off the event loop and within a bound; a thread past it finishes on its own
        return await asyncio.wait_for(asyncio.to_thread(file_settings, request.app.state.engine, data),
                                      READ_SECONDS)
    except TimeoutError:
        raise ApiError(503, "body", f"body: the file was not read within {READ_SECONDS:g} s (the engine "
                                    "is loaded): try again")


def file_settings(engine: Engine, data: bytes | bytearray) -> dict:
    """POST /settings: read a file's settings (toolkit/file_settings.py) and check them as a request
    here; what would not be accepted (a profile not defined here, a path the file kept only the name
    of) is a warning, so the answer still shows what made the file. A number no request may hold
    (NaN, Infinity) is a ConfigError naming it (a 422), as it would be in a request."""
    from toolkit.file_settings import NoSettings, settings_from_metadata
    from toolkit.media import MetadataError, read_metadata

    try:
        out = settings_from_metadata(read_metadata(data), profiles=engine.profiles.profiles, archs=ARCHS)
    except (MetadataError, NoSettings) as e:
        raise ApiError(422, "body", f"body: {e}")
    if out["model"] is not None:
        try:
            engine.resolve(out["model"], out["sample"], dry_run=True)
        except ConfigError as e:
            out["warnings"].append(f"not accepted here as it is: {e.one_line()}")
        except (TypeError, ValueError, ArithmeticError) as e:         # a file's JSON can hold any shape
            out["warnings"].append(f"not accepted here as it is: {type(e).__name__}: {e}")
    return out

"""GET /outputs/{relpath}: a file the engine wrote. Both ports serve it (the compat port for OpenAI's
`response_format: url`), each behind its own token check: `router(auth)`."""
import os

from fastapi import APIRouter, Depends, Request as HttpRequest
from fastapi.responses import FileResponse

from extensions_built_in.inference_engine.engine import Engine
from extensions_built_in.inference_engine.routes.common import ApiError, engine_router, errors
from toolkit.media import mime_type


def outputs(relpath: str, request: HttpRequest):
    return output_file(request.app.state.engine, relpath)


def router(auth) -> APIRouter:
    """The route behind `auth`: common.require_token on the engine port; on the compat port its own
    check, which takes HTTP Basic too and answers a 401 with WWW-Authenticate."""
    out = engine_router(dependencies=[Depends(auth)])
    out.add_api_route("/outputs/{relpath:path}", outputs, methods=["GET"], responses=errors(404))
    return out


def output_file(engine: Engine, relpath: str) -> FileResponse:
    """A file under the output folder, links resolved; anything else, a name with a NUL byte
    included, is one 404."""
    root = os.path.realpath(engine.output_folder)
    try:
        full = os.path.realpath(os.path.join(root, relpath))
    except ValueError:                  # an embedded NUL: no file has that name
        full = ""
    if not full.startswith(root + os.sep) or not os.path.isfile(full):
        raise ApiError(404, "relpath", "no such output")
    return FileResponse(full, media_type=mime_type(full))

"""Downloads a person asks for (toolkit/downloads.py): POST /downloads, GET /downloads,
DELETE /downloads/{id} (cancel a running one, else take it off the list), POST /downloads/{id}/resume."""
from fastapi import Depends, Request as HttpRequest
from pydantic import BaseModel, ConfigDict, Field

from extensions_built_in.inference_engine.routes.common import ApiError, engine_router, errors, require_token

router = engine_router(dependencies=[Depends(require_token)])


class DownloadBody(BaseModel):
    """One of `repo_id` (into the hub cache) or `url` (into a model folder); the rest is checked by
    toolkit/downloads.py, which names the field."""
    model_config = ConfigDict(extra="forbid")
    repo_id: str | None = Field(None, description="a hub repo id (owner/name): snapshot_download into the hub cache")
    revision: str | None = Field(None, description="the repo's branch, tag or commit (default main)")
    url: str | None = Field(None, description="a direct http(s) URL of one file")
    dest: str | None = Field(None, description='"hub" for a repo; for a url, one of engine.model_folders '
                                               '(default the first)')
    kind: str | None = Field(None, description="a url's file: checkpoint | diffusion_model | text_encoder | vae | lora "
                                               "(the tree's sub-folder for it)")
    subdir: str | None = Field(None, description="a url's file: this sub-folder of dest instead")
    filename: str | None = Field(None, description="a url's file name (default: the URL's last segment)")


def _downloads(request: HttpRequest):
    return request.app.state.engine.downloads


def _found(d, did: str):
    if d is None:
        raise ApiError(404, "id", f"unknown download {did!r}")
    return d.public()


@router.post("/downloads", status_code=201, responses=errors())
def start(body: DownloadBody, request: HttpRequest):
    """Start a download (or answer the same one, already running); its progress is GET /downloads."""
    return _downloads(request).start(body.model_dump(exclude_none=True)).public()


@router.get("/downloads", responses=errors())
def listing(request: HttpRequest):
    """Every download asked for since the engine started (status, bytes done / total / left, error), and
    where a URL's file may go: the model folders (`dest`) and the kinds (`kind`) a form offers."""
    from toolkit.model_trees import DOWNLOAD_KINDS
    downloads = _downloads(request)
    return {"downloads": downloads.list(), "model_folders": downloads.model_folders, "kinds": list(DOWNLOAD_KINDS)}


@router.delete("/downloads/{did}", responses=errors(404))
def cancel(did: str, request: HttpRequest):
    """Cancel a running download (its partial files stay, for resume); a finished one leaves the list."""
    downloads = _downloads(request)
    d = downloads.get(did)
    if d is not None and d.status != "running":
        downloads.forget(did)
        return {**d.public(), "forgotten": True}
    return _found(downloads.cancel(did), did)


@router.post("/downloads/{did}/resume", responses=errors(404))
def resume(did: str, request: HttpRequest):
    """Continue a cancelled or failed download from its partial files."""
    return _found(_downloads(request).resume(did), did)

"""The queue: GET /queue, POST /queue/{request_id}/move, and POST /unload (free the loaded model)."""
from typing import Any

from fastapi import Depends, Request as HttpRequest
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from extensions_built_in.inference_engine.engine import EngineBusy, NotQueued
from extensions_built_in.inference_engine.routes.common import ApiError, engine_router, errors, require_token

router = engine_router(dependencies=[Depends(require_token)])


class MoveBody(BaseModel):
    """`position` is checked by the engine (Engine.move), which names it."""
    model_config = ConfigDict(extra="forbid")
    position: Any = Field(description="the place in the queue: 0 = the next to run; past the end = last")


@router.get("/queue", responses=errors())
def queue(request: HttpRequest):
    return request.app.state.engine.queue_snapshot()


@router.post("/queue/{request_id}/move", responses=errors(404, 409))
def move(request_id: str, body: MoveBody, request: HttpRequest):
    """Put a queued request at `position` (0: next); it keeps that place under either policy."""
    try:
        moved = request.app.state.engine.move(request_id, body.position)
    except NotQueued as e:
        raise ApiError(409, "request_id", str(e))
    if moved is None:
        raise ApiError(404, "request_id", f"unknown request {request_id!r}")
    req, position = moved
    return JSONResponse({"request_id": request_id, "status": req.status, "position": position},
                        headers={"X-Request-Id": request_id})


@router.post("/unload", responses=errors(409))
def unload(request: HttpRequest):
    try:
        request.app.state.engine.request_unload()
    except EngineBusy as e:
        raise ApiError(409, "body", str(e))
    return {"unloaded": True}

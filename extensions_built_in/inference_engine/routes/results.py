"""GET /results: the results feed (results_feed.py), every request that ended, whoever asked: what a
follower (the UI's history) reads from `after` on."""
from fastapi import Depends, Query, Request as HttpRequest

from extensions_built_in.inference_engine.results_feed import MAX_LIMIT
from extensions_built_in.inference_engine.routes.common import engine_router, errors, require_token

router = engine_router(dependencies=[Depends(require_token)])


@router.get("/results", responses=errors())
def results(request: HttpRequest,
            after: int = Query(0, ge=0, description="the last seq the reader has (0: from the oldest kept)"),
            limit: int = Query(100, ge=1, le=MAX_LIMIT, description="at most this many entries")):
    """Entries with seq > `after`, oldest first; `last_seq`, `first_seq`, `more` (results_feed.read)."""
    return request.app.state.engine.results.read(after, limit)

"""GET /health (no token: a supervisor polls it) and GET /metrics (metrics.py)."""
from fastapi import Depends, Request as HttpRequest
from fastapi.responses import Response

from extensions_built_in.inference_engine.http_guard import auth_first
from extensions_built_in.inference_engine.routes.common import engine_router, errors, require_token

router = engine_router()


@auth_first
def metrics_token(request: HttpRequest):
    """The token, unless engine.metrics_open (a scraper on this machine reads /metrics without one)."""
    if not request.app.state.engine.metrics_open:
        require_token(request)


@router.get("/health")
def health(request: HttpRequest):
    return request.app.state.engine.health()


@router.get("/metrics", dependencies=[Depends(metrics_token)], responses=errors(), response_class=Response)
def metrics(request: HttpRequest):
    """Prometheus text format (metrics.py): behind the token unless engine.metrics_open."""
    from extensions_built_in.inference_engine.metrics import CONTENT_TYPE
    return Response(request.app.state.engine.metrics.render(), media_type=CONTENT_TYPE)

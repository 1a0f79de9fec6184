"""What every native route shares: the engine token check, the `{detail, field}` error (ApiError,
and ErrorBody for the OpenAPI schema), and the router class that checks the token before the body."""
import hmac

from fastapi import APIRouter, HTTPException, Request as HttpRequest
from pydantic import BaseModel

from extensions_built_in.inference_engine.http_guard import EngineRoute, auth_first


class ErrorBody(BaseModel):
    """Every 4xx answer: one line, and the field it is about (`body` for the body as a whole)."""
    detail: str
    field: str


class ApiError(HTTPException):
    def __init__(self, status: int, field: str, detail: str):
        super().__init__(status, detail)
        self.field = field


ERRORS = {401: {"model": ErrorBody, "description": "missing or bad engine token (field: token)"},
          404: {"model": ErrorBody, "description": "no such request, profile or file"},
          409: {"model": ErrorBody, "description": "not now (the engine is busy)"},
          413: {"model": ErrorBody, "description": "too large"},
          422: {"model": ErrorBody, "description": "a bad value, naming its field"},
          503: {"model": ErrorBody, "description": "the engine is stopping"}}


def errors(*codes) -> dict:
    return {c: ERRORS[c] for c in (401, 422, *codes)}


def engine_router(**kwargs) -> APIRouter:
    """An APIRouter whose routes are http_guard.EngineRoute: the token before the body, the body bounded."""
    return APIRouter(route_class=EngineRoute, **kwargs)


def presented_token(request) -> str | None:
    """The token a request carries, as `X-Engine-Token` or `Authorization: Bearer`."""
    given = request.headers.get("x-engine-token")
    auth = request.headers.get("authorization", "")
    if given is None and auth.lower().startswith("bearer "):
        given = auth[7:].strip()
    return given


def token_matches(request, given: str | None) -> bool:
    """`given` is the token of the app serving `request` (app.state.token), compared in constant time."""
    token = request.app.state.token
    return bool(given) and hmac.compare_digest(given.encode(), token.encode())


@auth_first
def require_token(request: HttpRequest):
    """The engine token, checked before the body is read (http_guard.EngineRoute)."""
    if not token_matches(request, presented_token(request)):
        raise ApiError(401, "token", "missing or bad engine token (X-Engine-Token or Authorization: Bearer)")

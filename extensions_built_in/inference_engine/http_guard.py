"""What every engine port checks before a route runs: where a request comes from (its Host and
Origin), its token before its body, and how large a body may be. No torch, no engine here.

- Host (DNS rebinding): on a loopback bind, a Host header that is not a loopback name or address is
  refused. A page on evil.example that rebinds its name to 127.0.0.1 sends `Host: evil.example:PORT`:
  it cannot read the token, and it does not reach the port at all.
- Origin (cross-site requests): a browser names the page that sent a request in `Origin` (or, without
  it, `Referer`). One present that is neither a loopback origin (a page of this machine, e.g. the UI)
  nor the engine's own is refused; `Origin: null` (a sandboxed or file page) too. Clients that are not
  browsers send neither.
- The token before the body: FastAPI reads and validates a route's body before it solves the route's
  dependencies, so without `EngineRoute` a client with no token learns a route's input rules (a
  malformed body got a 422, not a 401).
- Bodies: JSON routes take at most JSON_BODY_BYTES; a route that takes inline images documents more
  (its `max_body_size`). Past it, a 413 `{detail, field: "body"}` before the rest is read.
Both refusals are 403 `{detail, field}`, as every native 4xx.
"""
import ipaddress
from urllib.parse import urlsplit

from fastapi import HTTPException
from fastapi.routing import APIRoute
from starlette.requests import Request
from starlette.responses import JSONResponse

JSON_BODY_BYTES = 2 << 20              # a JSON request: prompts, settings, a few LoRA paths
INLINE_IMAGES_BODY_BYTES = 64 << 20    # a route whose JSON carries base64 images (data: URLs, A1111 init_images)


def is_loopback_name(host: str | None) -> bool:
    """`localhost`, a `*.localhost` name (RFC 6761: always this machine) or a loopback address."""
    if not host:
        return False
    host = host.rstrip(".").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _netloc(value: str) -> tuple[str | None, str]:
    """(host name, `host[:port]` lower-cased) of a Host header value or of a URL's authority."""
    try:
        parts = urlsplit(value if "//" in value else f"//{value}")
        parts.port            # raises for a malformed port
    except ValueError:
        return None, ""
    return parts.hostname, parts.netloc.lower().rpartition("@")[2]


def refusal(headers: dict, loopback_bind: bool) -> tuple[str, str] | None:
    """(field, why) when a request must be refused for where it comes from, else None. `headers`:
    lower-case names to values."""
    host_value = headers.get("host")
    if host_value is not None and loopback_bind:
        name, _ = _netloc(host_value)
        if not is_loopback_name(name):
            return "host", (f"Host {host_value!r} is not a loopback name: this engine listens on loopback only "
                            "(a page that rebinds its name to 127.0.0.1 is refused)")
    origin = headers.get("origin")
    key = "origin"
    if origin is None and headers.get("referer"):
        origin, key = headers["referer"], "referer"
    if origin is None:
        return None
    name, netloc = _netloc(origin) if origin.strip().lower() != "null" else (None, "")
    same = host_value is not None and netloc and netloc == _netloc(host_value)[1]
    if not (is_loopback_name(name) or same):
        return key, f"a request from the page {origin!r} is refused: only pages of this machine may call the engine"
    return None


class OriginGuard:
    """ASGI middleware refusing, with a 403, what `refusal` refuses (every route, /health included)."""

    def __init__(self, app, loopback_bind: bool = True):
        self.app = app
        self.loopback_bind = loopback_bind

    async def __call__(self, scope, receive, send):
        if scope["type"] in ("http", "websocket"):
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", ())}
            refused = refusal(headers, self.loopback_bind)
            if refused is not None:
                field, why = refused
                if scope["type"] == "websocket":
                    await send({"type": "websocket.close", "code": 1008})
                    return
                await JSONResponse({"detail": f"{field}: {why}", "field": field}, status_code=403)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def auth_first(check):
    """Mark a route dependency `check(request)` (raising to refuse) to run before the body is read."""
    check.auth_first = True
    return check


class BodyTooLarge(HTTPException):
    """A 413 naming the body (the error handlers answer `{detail, field}`)."""

    def __init__(self, limit: int):
        super().__init__(413, f"body: over this route's limit of {limit} bytes")
        self.field = "body"


class EngineRoute(APIRoute):
    """A route whose `auth_first` dependencies run before FastAPI reads and validates its body, and
    whose body is bounded: `max_body_size` (bytes; a route taking inline images says more), else
    JSON_BODY_BYTES. A Content-Length past it is refused before a byte is read; a chunked body when it
    passes it. (Starlette's own limiter answers a declared length with a plain-text 413, whatever the
    error handlers say, so this one does the counting.)"""

    def __init__(self, *args, max_body_size: int | None = None, **kwargs):
        self.body_limit = JSON_BODY_BYTES if max_body_size is None else max_body_size
        super().__init__(*args, **kwargs)

    def get_route_handler(self):
        handler = super().get_route_handler()
        checks = [d.dependency for d in self.dependencies if getattr(d.dependency, "auth_first", False)]
        limit = self.body_limit

        async def run(request):
            for check in checks:
                check(request)
            length = request.headers.get("content-length")
            if length is not None and length.isdigit() and int(length) > limit:
                raise BodyTooLarge(limit)
            seen = 0
            receive = request.receive

            async def bounded():
                nonlocal seen
                message = await receive()
                if message["type"] == "http.request":
                    seen += len(message.get("body", b""))
                    if seen > limit:
                        raise BodyTooLarge(limit)
                return message
            return await handler(Request(request.scope, bounded, request._send))
        return run

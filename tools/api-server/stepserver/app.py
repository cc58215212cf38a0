"""The application: create_app(settings, store) -> a Starlette app with every route.

Every request goes through Starlette's own stack (its error and exception middleware, any middleware
added with add_middleware, the router), so what is added there sees every route. Cross-cutting rules
live here: every answer is JSON; every error is {"error": "<one line>"}; an unexpected exception is
logged with a request id and answered {"error":"internal error","requestId":…} without its type or
message; the access log (info) names the method, path, status and time, never a header, a query
string or a body.
"""

from __future__ import annotations

import secrets
import time
import traceback
from typing import Any, Awaitable, Callable, Optional

import msgspec
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Match, Route

from .auth import Authenticator
from .errors import ApiError
from .expensive_reads import ClientGone, ExpensiveReads
from .request_body import BodyBudget
from .log import log
from .settings import Settings
from .storage.store import Store

encode = msgspec.json.Encoder().encode  # UTF-8 as is, compact: the bytes of json.dumps(ensure_ascii=False, separators=(",", ":"))


def json_response(payload: Any, status: int = 200, headers: Optional[dict[str, str]] = None) -> Response:
    body = payload if isinstance(payload, bytes) else encode(payload)
    return Response(body, status_code=status, headers=headers, media_type="application/json")


def error_response(status: int, message: str, headers: Optional[dict[str, str]] = None) -> Response:
    return json_response({"error": message}, status, headers)


class Context:
    """What every route needs: settings, the store, authentication, the body budget, the expensive
    reads' processes and shares."""

    def __init__(self, settings: Settings, store: Store) -> None:
        self.settings = settings
        self.store = store
        self.auth = Authenticator(store.token_user, settings.single_user)
        self.budget = BodyBudget(settings.max_bodies_in_flight, settings.max_bodies_per_user)
        self.expensive_reads = ExpensiveReads(settings.data, settings.database, settings.max_expensive_reads,
                                              settings.max_expensive_reads_per_user)

    async def user(self, request: Request) -> str:
        """The request's user (401 without a valid token); the token is looked up in a thread."""
        if self.settings.single_user:  # no token to look up
            return self.auth.user(None)
        return await run_in_threadpool(self.auth.user, request.headers.get("authorization"))


def query_text(request: Request) -> str:
    """The query string; bytes that are not UTF-8 are replaced, so that its check names the parameter."""
    return request.scope.get("query_string", b"").decode("utf-8", "replace")


def internal_error(error: BaseException, method: str, path: str) -> Response:
    """A 500 that names no exception: the details go to the log under a request id the answer carries."""
    request_id = secrets.token_hex(8)
    where = traceback.extract_tb(error.__traceback__)[-1] if error.__traceback__ else None
    place = f" at {where.filename.rsplit('/', 1)[-1]}:{where.lineno}" if where else ""
    first_line = (str(error).splitlines() or [""])[0][:500]
    log(f"internal error, request {request_id}: {method} {path}: {type(error).__name__}: {first_line}{place}")
    return json_response({"error": "internal error", "requestId": request_id}, 500)


def guarded(endpoint: Callable[[Request], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
    """A route's endpoint whose unexpected exceptions are answered by internal_error (ApiError and
    HTTPException go on to their handlers). A client that went away (before its body was read, or while
    its read ran) is no error of the server's: its answer, which nobody reads, is an empty 400."""

    async def run(request: Request) -> Response:
        try:
            return await endpoint(request)
        except (ApiError, HTTPException):
            raise
        except (ClientDisconnect, ClientGone):
            return Response(status_code=400)
        except Exception as error:  # noqa: BLE001 - the boundary
            return internal_error(error, request.method, request.url.path)

    run.__name__ = getattr(endpoint, "__name__", "endpoint")
    return run


class AccessLog:
    """ASGI middleware: one line a request (--log-level info)."""

    def __init__(self, app: Callable[..., Awaitable[None]]) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 0
        began = time.monotonic()

        async def tracking_send(message: dict) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        finally:
            client = scope.get("client") or ("-", 0)
            log(f"{client[0]} {scope.get('method')} {printable(scope.get('path', ''))} {status or 500} "
                f"{(time.monotonic() - began) * 1000:.1f} ms")


def printable(text: str) -> str:
    """A decoded path as one line of printable ASCII: a control character or a line break in it (%0A)
    cannot start a line of its own in the log."""
    return text.encode("unicode_escape").decode("ascii")


def create_app(settings: Settings, store: Store) -> Starlette:
    from .routes import daily, dashboard, digests, health, openapi, steps

    context = Context(settings, store)
    routes = [Route(path, guarded(endpoint), methods=methods)
              for module in (health, steps, daily, digests, openapi, dashboard) for path, endpoint, methods in module.routes(context)]

    async def answer_error(request: Request, error: Exception) -> Response:
        if isinstance(error, ApiError):
            return error_response(error.status, error.message, error.headers)
        assert isinstance(error, HTTPException)
        message = f"{error.detail}: {request.method} {request.url.path}"
        headers = dict(error.headers or {})
        if error.status_code == 405:
            methods: set[str] = set()
            for route in routes:
                if route.matches(request.scope)[0] is not Match.NONE:
                    methods |= set(route.methods or ())
            methods.discard("HEAD")
            headers["Allow"] = ", ".join(sorted(methods))
            message += f" (allowed: {headers['Allow']})"
        return error_response(error.status_code, message, headers or None)

    async def answer_internal(request: Request, error: Exception) -> Response:
        return internal_error(error, request.method, request.url.path)

    middleware = [Middleware(AccessLog)] if settings.log_level in ("info", "debug", "trace") else []
    app = Starlette(routes=routes, middleware=middleware,
                    exception_handlers={ApiError: answer_error, HTTPException: answer_error, Exception: answer_internal})
    app.router.redirect_slashes = False  # its redirect would take the Location's host from the Host header
    app.state.context = context
    return app

"""The application: create_app(settings, storage) -> an ASGI app (Starlette) with every route.

Cross-cutting rules live here: every answer is JSON; every error is {"error": "<one line>"}; an
unexpected exception is logged with a request id and answered {"error":"internal error","requestId":…}
without its type or message; request bodies are capped per request (413) and in total while in flight
(503 + Retry-After).
"""

from __future__ import annotations

import asyncio

import json
import secrets
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Awaitable, Callable, Optional

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Match, Route

from . import contract
from .auth import Authenticator
from .daily_buckets import BucketStore, DailyBuckets
from .errors import ApiError, bad_request
from .log import log
from .settings import Settings
from .storage.base import Storage
from .totals_cache import DailyTotalsCache

RETRY_AFTER_BUSY_S = 1
REQUEST_THREADS = 40  # request handlers run at once in threads (as anyio's default limiter allowed)


def json_response(payload: Any, status: int = 200, headers: Optional[dict[str, str]] = None) -> Response:
    body = payload if isinstance(payload, bytes) else json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()
    return Response(body, status_code=status, headers=headers, media_type="application/json")


def error_response(status: int, message: str, headers: Optional[dict[str, str]] = None) -> Response:
    return json_response({"error": message}, status, headers)


class BodyBudget:
    """Bytes of request bodies held at once, across all requests. Reservations beyond the cap fail."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.used = 0
        self._lock = threading.Lock()

    def reserve(self, size: int) -> bool:
        with self._lock:
            if self.used + size > self.capacity and self.used > 0:
                return False
            self.used += size
            return True

    def release(self, size: int) -> None:
        with self._lock:
            self.used -= size


def bucket_store(storage: Storage) -> Optional[BucketStore]:
    """Where the backend keeps the daily buckets between runs (none for another Storage)."""
    from .storage.embedded import EmbeddedStorage

    if isinstance(storage, EmbeddedStorage):
        from .storage.embedded_buckets import EmbeddedBucketStore

        return EmbeddedBucketStore(storage)
    if type(storage).__name__ == "PostgresStorage":  # without importing psycopg for the embedded backend
        from .storage.postgres_buckets import PostgresBucketStore

        return PostgresBucketStore(storage)  # type: ignore[arg-type]
    return None


class Context:
    """What every route needs: settings, storage, authentication, the body budget."""

    def __init__(self, settings: Settings, storage: Storage) -> None:
        self.settings = settings
        self.storage = storage
        self.auth = Authenticator(storage.tokens, settings.single_user)
        self.budget = BodyBudget(settings.max_bodies_in_flight)
        self.executor = ThreadPoolExecutor(max_workers=REQUEST_THREADS, thread_name_prefix="request")
        # Kept only while this process learns of every write: one worker, or the embedded backend's
        # workers, whose storage reports what the others wrote (foreign_write). See totals_cache.py.
        caches = settings.workers == 1 or not settings.database
        self.daily_cache = DailyTotalsCache(enabled=caches)
        self.daily_buckets = DailyBuckets(storage.samples_between, enabled=caches and settings.daily_buckets,
                                          store=bucket_store(storage),
                                          columns_between=storage.sample_columns_between,
                                          latest_end_ns=storage.latest_end_ns)
        storage.on_foreign = self.foreign_write

    def foreign_write(self, user: str, samples: Optional[list], replaced: Optional[list[str]]) -> None:
        """Another worker's write, applied by the storage (which holds the user's history meanwhile)."""
        self.daily_cache.invalidate_user(user)
        try:
            self.daily_buckets.foreign_write(user, samples, replaced)
        except Exception as error:  # noqa: BLE001 - never an answer from days the write may have changed
            log(f"daily buckets: {user}'s days dropped after another worker's write ({type(error).__name__})")
            self.daily_buckets.touch_all(user)

    def refresh(self, user: str) -> None:
        """Before an answer from memory: what other workers wrote is applied (embedded --workers)."""
        self.storage.refresh(user)

    async def in_thread(self, work: Callable[..., Any], *arguments: Any) -> Any:
        """Runs `work` in a request thread (every route's storage work), through asyncio's executor rather
        than starlette's run_in_threadpool: anyio's capacity limiter, cancel scope and checkpoints were
        6-7% of a 1,000-sample POST's time holding the GIL. As with anyio, a cancelled request (the
        client went away) still waits for its work to end (a POST's body stays reserved until then)."""
        running = asyncio.get_running_loop().run_in_executor(self.executor, work, *arguments)
        try:
            return await asyncio.shield(running)
        except asyncio.CancelledError:
            await asyncio.wait([running])
            raise

    def user(self, request: Request) -> str:
        return self.auth.user(request.headers.get("authorization"))

    async def read_json_body(self, request: Request, handle: Callable[[bytes], Any]) -> Any:
        """Reads the body within the per-request and in-flight caps and runs `handle(body)` in a
        worker thread while the bytes are reserved."""
        check_content_type(request.headers.get("content-type"))
        declared = request.headers.get("content-length")
        if declared is not None:
            if not declared.isdigit():
                raise bad_request("Content-Length: must be digits")
            if int(declared) > contract.MAX_BODY_BYTES:
                raise ApiError(413, f"body too large: {declared} bytes (at most {contract.MAX_BODY_BYTES})")
        reserved = int(declared) if declared is not None else 0
        if not self.budget.reserve(reserved):
            raise ApiError(503, "server busy: too many request bodies in flight, retry later",
                           {"Retry-After": str(RETRY_AFTER_BUSY_S)})
        try:
            # One buffer, filled in place: no list of chunks joined into a second copy.
            body = bytearray(reserved)
            size = 0
            async for chunk in request.stream():
                end = size + len(chunk)
                if end > contract.MAX_BODY_BYTES:
                    raise ApiError(413, f"body too large: more than {contract.MAX_BODY_BYTES} bytes")
                if end > reserved:  # no Content-Length (chunked), or more than it said: reserve as it comes
                    if not self.budget.reserve(end - reserved):
                        raise ApiError(503, "server busy: too many request bodies in flight, retry later",
                                       {"Retry-After": str(RETRY_AFTER_BUSY_S)})
                    body.extend(bytes(end - max(reserved, size)))
                    reserved = end
                body[size:end] = chunk
                size = end
            if size < len(body):
                del body[size:]
            return await self.in_thread(handle, body)
        finally:
            self.budget.release(reserved)


def query_text(request: Request) -> str:
    """The request's query string (what `request.url.query` gives, without building a URL: 4% of a
    1,000-sample POST's time holding the GIL). Bytes that are not UTF-8 are replaced, so that the
    query's check names the parameter instead of failing."""
    return request.scope.get("query_string", b"").decode("utf-8", "replace")


def check_content_type(value: Optional[str]) -> None:
    if value is None:
        return  # tolerate clients that send none
    media_type, _, parameters = value.partition(";")
    media_type = media_type.strip().lower()
    if media_type != "application/json" and not (media_type.startswith("application/") and media_type.endswith("+json")):
        raise bad_request(f"Content-Type must be application/json (got {json.dumps(value[:80])})")
    for parameter in parameters.split(";"):
        name, _, charset = parameter.partition("=")
        if name.strip().lower() == "charset" and charset.strip().strip('"').lower() not in ("utf-8", "utf8"):
            raise bad_request(f"Content-Type charset must be utf-8 (got {json.dumps(value[:80])})")


def internal_error(error: BaseException, method: str, path: str) -> Response:
    """A 500 that names no exception: the details go to the log under a request id the answer carries."""
    request_id = secrets.token_hex(8)
    where = traceback.extract_tb(error.__traceback__)[-1] if error.__traceback__ else None
    place = f" at {where.filename.rsplit('/', 1)[-1]}:{where.lineno}" if where else ""
    first_line = (str(error).splitlines() or [""])[0][:500]
    log(f"internal error, request {request_id}: {method} {path}: {type(error).__name__}: {first_line}{place}")
    return json_response({"error": "internal error", "requestId": request_id}, 500)


def guarded(endpoint: Callable[[Request], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
    """Wraps a route's endpoint: ApiError and HTTPException go to their handlers, anything else is
    answered by internal_error (before Starlette's own error middleware would answer in plain text)."""

    async def run(request: Request) -> Response:
        try:
            return await endpoint(request)
        except (ApiError, HTTPException):
            raise
        except Exception as error:  # noqa: BLE001 - the boundary
            return internal_error(error, request.method, request.url.path)

    run.__name__ = getattr(endpoint, "__name__", "endpoint")
    return run


class ErrorBoundary:
    """Outermost ASGI layer: the access log (method, path without the query string, status,
    milliseconds: never a header, a query string or a body, so a token sent in the wrong place is not
    logged either), a last resort for exceptions outside the endpoints (they are guarded), and the
    short way to the routes: a request whose method and path name one of them exactly is answered by
    its endpoint here, with the same error handlers, instead of through Starlette's error and exception
    middleware, router and route wrappers (a 1,000-sample POST spent about 8% of its time holding the
    GIL in those layers). Anything else (HEAD, a trailing slash, an unknown path or method, a root
    path) goes through Starlette, which answers it as before."""

    def __init__(self, app: Callable[..., Awaitable[None]], access_log: bool,
                 exact: dict[tuple[str, str], Callable[[Request], Awaitable[Response]]],
                 answer_error: Callable[[Request, Exception], Awaitable[Response]]) -> None:
        self.app = app
        self.access_log = access_log
        self.exact = exact
        self.answer_error = answer_error

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False
        status = 0
        began = time.monotonic()

        async def tracking_send(message: dict) -> None:
            nonlocal started, status
            if message["type"] == "http.response.start":
                started = True
                status = message["status"]
            await send(message)

        try:
            endpoint = None if scope.get("root_path") else self.exact.get((scope["method"], scope["path"]))
            if endpoint is None:
                await self.app(scope, receive, tracking_send)
            else:
                await self._answer(endpoint, scope, receive, tracking_send)
        except Exception as error:  # noqa: BLE001 - the boundary
            if started:
                raise  # the answer is already on its way; the server closes the connection
            response = internal_error(error, scope.get("method", "?"), scope.get("path", "?"))
            status = 500
            await response(scope, receive, send)
        finally:
            if self.access_log:
                client = scope.get("client") or ("-", 0)
                log(f"{client[0]} {scope.get('method')} {scope.get('path')} {status} "
                    f"{(time.monotonic() - began) * 1000:.1f} ms")

    async def _answer(self, endpoint: Callable[[Request], Awaitable[Response]], scope: dict,
                      receive: Callable, send: Callable) -> None:
        request = Request(scope, receive, send)
        try:
            response = await endpoint(request)
        except (ApiError, HTTPException) as error:
            response = await self.answer_error(request, error)
        await response(scope, receive, send)


def create_app(settings: Settings, storage: Storage) -> Callable:
    from .routes import daily, dashboard, health, openapi, steps

    context = Context(settings, storage)
    routes: list[Route] = []
    exact: dict[tuple[str, str], Callable[[Request], Awaitable[Response]]] = {}
    for module in (health, steps, daily, openapi, dashboard):
        for path, endpoint, methods in module.routes(context):
            route = Route(path, guarded(endpoint), methods=methods)
            routes.append(route)
            if route.param_convertors:
                continue
            for method in methods:
                exact.setdefault((method, path), route.endpoint)
    app = Starlette(routes=routes)

    async def answer_error(request: Request, error: Exception) -> Response:
        if isinstance(error, ApiError):
            return error_response(error.status, error.message, error.headers)
        assert isinstance(error, HTTPException)
        message = f"{error.detail}: {request.method} {request.url.path}"
        headers = dict(error.headers or {})
        if error.status_code == 405:
            methods: set[str] = set()
            for route in app.routes:
                if route.matches(request.scope)[0] is not Match.NONE:
                    methods |= set(getattr(route, "methods", None) or ())
            methods.discard("HEAD")
            if methods:
                headers["Allow"] = ", ".join(sorted(methods))
        if headers.get("Allow"):
            message += f" (allowed: {headers['Allow']})"
        return error_response(error.status_code, message, headers or None)

    app.add_exception_handler(ApiError, answer_error)  # type: ignore[arg-type]
    app.add_exception_handler(HTTPException, answer_error)  # type: ignore[arg-type]
    app.state.context = context
    boundary = ErrorBoundary(app, settings.log_level in ("info", "debug", "trace"), exact, answer_error)
    boundary.context = context  # for the server's stop (cli.py: the daily buckets are saved)
    return boundary

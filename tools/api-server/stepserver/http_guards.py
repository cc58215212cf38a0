"""The HTTP layer's guards against hostile or broken clients, in one place: read deadlines and a
per-client connection cap (GuardedProtocol, uvicorn's HTTP protocol with them), and the budget of
request body bytes held at once (BodyBudget, read_body).

uvicorn by itself times out only idle keep-alive connections; a client that trickles its request line,
headers or body would hold a connection for ever. GuardedProtocol arms a deadline for the request line
and headers (from the connection or the request's first byte) and another for the body (from the end of
the headers); when one passes, it answers 408 (if nothing was answered yet) and closes. A client
address holding more than max_connections_per_client connections gets a 503 and is closed at once.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections import Counter
from typing import Optional

from starlette.requests import Request
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from . import contract
from .errors import ApiError, bad_request
from .settings import Settings

RETRY_AFTER_BUSY_S = 1


def _plain_answer(status: str, message: str) -> bytes:
    body = json.dumps({"error": message}).encode()
    return (f"HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n"
            "connection: close\r\n\r\n").encode() + body


def guarded_protocol(settings: Settings) -> type:
    open_connections: Counter[str] = Counter()
    head_timeout = settings.head_timeout_s
    body_timeout = settings.body_timeout_s
    per_client = settings.max_connections_per_client

    class GuardedProtocol(HttpToolsProtocol):
        _deadline: Optional[asyncio.TimerHandle] = None
        _counted: Optional[str] = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            address = self.client[0] if self.client else "unknown"
            open_connections[address] += 1
            self._counted = address
            if open_connections[address] > per_client:
                transport.write(_plain_answer("503 Service Unavailable",
                                              f"too many connections from this address (at most {per_client})"))
                transport.close()
                return
            self._arm(head_timeout, "request line and headers")

        def connection_lost(self, exc: Optional[Exception]) -> None:
            self._disarm()
            if self._counted is not None:
                open_connections[self._counted] -= 1
                if open_connections[self._counted] <= 0:
                    del open_connections[self._counted]
                self._counted = None
            super().connection_lost(exc)

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._arm(head_timeout, "request line and headers")

        def on_headers_complete(self) -> None:
            super().on_headers_complete()
            self._arm(body_timeout, "body")

        def on_message_complete(self) -> None:
            super().on_message_complete()
            self._disarm()

        def _arm(self, seconds: float, what: str) -> None:
            self._disarm()
            self._deadline = self.loop.call_later(seconds, self._expire, seconds, what)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _expire(self, seconds: float, what: str) -> None:
            self._deadline = None
            if self.transport.is_closing():
                return
            if self.cycle is None or not self.cycle.response_started:
                if self.cycle is not None:
                    self.cycle.response_complete = True  # the app's answer, if any, is dropped
                self.transport.write(_plain_answer("408 Request Timeout", f"{what} not received within {seconds:g} s"))
            self.transport.close()

    return GuardedProtocol


class BodyBudget:
    """Bytes of request bodies held at once, across all requests. Reservations beyond the cap fail
    (one body alone is always let through: the per-request cap bounds it)."""

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


def _busy() -> ApiError:
    return ApiError(503, "server busy: too many request bodies in flight, retry later", {"Retry-After": str(RETRY_AFTER_BUSY_S)})


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


async def read_body(request: Request, budget: BodyBudget) -> tuple[bytearray, int]:
    """The JSON body, read within the per-request cap (413) and the budget (503); returns it and the
    bytes reserved, which the caller releases once it no longer holds the body."""
    check_content_type(request.headers.get("content-type"))
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.isdigit():
            raise bad_request("Content-Length: must be digits")
        if int(declared) > contract.MAX_BODY_BYTES:
            raise ApiError(413, f"body too large: {declared} bytes (at most {contract.MAX_BODY_BYTES})")
    reserved = int(declared) if declared is not None else 0
    if not budget.reserve(reserved):
        raise _busy()
    try:
        body = bytearray(reserved)  # filled in place: no copy made as it grows
        size = 0
        async for chunk in request.stream():
            end = size + len(chunk)
            if end > contract.MAX_BODY_BYTES:
                raise ApiError(413, f"body too large: more than {contract.MAX_BODY_BYTES} bytes")
            if end > reserved:  # no Content-Length (chunked), or more than it said
                if not budget.reserve(end - reserved):
                    raise _busy()
                body.extend(bytes(end - max(reserved, size)))
                reserved = end
            body[size:end] = chunk
            size = end
        del body[size:]
        return body, reserved
    except BaseException:
        budget.release(reserved)
        raise

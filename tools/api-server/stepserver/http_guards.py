"""The HTTP layer's guards against hostile or broken clients, below the app: uvicorn's httptools
protocol with bounded request heads, read deadlines and connection caps (GuardedProtocol).

- **Bounded heads.** httptools hands a header to uvicorn only once it is whole, joining each piece
  that arrives onto the bytes held (a header trickled in small pieces costs time quadratic in its
  size), and bounds nothing. So a request head is gathered here, in one buffer, until its blank line,
  and only then given to the parser in one piece: a request line over MAX_REQUEST_LINE_BYTES is
  answered 414, a header line over MAX_HEADER_LINE_BYTES or a head over MAX_HEAD_BYTES 431, as soon
  as the bytes held pass the bound (each byte looked at once).
- **Deadlines.** uvicorn by itself times out only idle keep-alive connections. A deadline is armed for
  the request line and headers (from the connection or the request's first byte) and another for the
  body (from the end of the headers); when one passes, the connection is answered 408 (if nothing was
  answered yet) and closed.
- **Connections.** A client address holding max_connections_per_client connections, or a server
  holding max_connections, is answered 503 with Retry-After and closed; but before a new connection
  is refused for the server's cap, the connection that has waited longest without a request under
  way (an idle keep-alive one, or one still sending its head) is closed in its place: a flood of idle
  connections cannot keep clients that send requests out.
Every answer given here is JSON, {"error": "<one line>"}, as the app's are.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter, OrderedDict
from typing import Optional

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from .settings import Settings

MAX_REQUEST_LINE_BYTES = 8 * 1024
MAX_HEADER_LINE_BYTES = 8 * 1024
MAX_HEAD_BYTES = 32 * 1024
RETRY_AFTER_CONNECTIONS_S = 1
LINGER_S = 1.0  # after a refusal, what the client still sends is read and dropped this long, then the close


def plain_answer(status: str, message: str, retry_after: Optional[int] = None) -> bytes:
    """A whole HTTP answer with a JSON error body, closing the connection."""
    body = json.dumps({"error": message}).encode()
    retry = f"retry-after: {retry_after}\r\n" if retry_after is not None else ""
    return (f"HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n{retry}"
            "connection: close\r\n\r\n").encode() + body


class Connections:
    """The connections of this process: how many each client address holds, and those waiting for a
    request (oldest first), which a new connection may take the place of when the server is full."""

    def __init__(self, limit: int, per_client: int) -> None:
        self.limit = limit
        self.per_client = per_client
        self.by_address: Counter[str] = Counter()
        self.total = 0
        self.waiting: "OrderedDict[object, None]" = OrderedDict()

    def refusal(self, address: str) -> Optional[bytes]:
        """None if a new connection from `address` may be served (having closed a waiting one to make
        room if the server is full); else the answer that refuses it."""
        if self.by_address[address] >= self.per_client:
            return plain_answer("503 Service Unavailable", f"too many connections from this address (at most {self.per_client})",
                                RETRY_AFTER_CONNECTIONS_S)
        if self.total >= self.limit:
            if not self.waiting:
                return plain_answer("503 Service Unavailable", f"too many connections (at most {self.limit})",
                                    RETRY_AFTER_CONNECTIONS_S)
            oldest, _ = self.waiting.popitem(last=False)
            oldest.make_room()  # type: ignore[attr-defined]
        return None


def guarded_protocol(settings: Settings) -> type:
    connections = Connections(settings.max_connections, settings.max_connections_per_client)
    head_timeout = settings.head_timeout_s
    body_timeout = settings.body_timeout_s

    class GuardedProtocol(HttpToolsProtocol):
        _deadline: Optional[asyncio.TimerHandle] = None
        _address: Optional[str] = None
        _head: Optional[bytearray] = None  # the head being gathered; None while the parser has it
        _line_start = 0  # where the head's current line begins
        _discarding = False  # refused: what arrives is dropped until the close

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            address = self.client[0] if self.client else "unknown"
            refusal = connections.refusal(address)
            if refusal is not None:
                transport.write(refusal)
                transport.close()
                return
            connections.by_address[address] += 1
            connections.total += 1
            self._address = address
            self._wait_for_head()
            connections.waiting[self] = None
            self._arm(head_timeout, "request line and headers")

        def connection_lost(self, exc: Optional[Exception]) -> None:
            self._disarm()
            connections.waiting.pop(self, None)
            if self._address is not None:
                connections.by_address[self._address] -= 1
                if connections.by_address[self._address] <= 0:
                    del connections.by_address[self._address]
                connections.total -= 1
                self._address = None
            super().connection_lost(exc)

        def make_room(self) -> None:
            """Closed to make room for a new connection (it had no request under way)."""
            self._disarm()
            self._head = None
            if not self.transport.is_closing():
                self.transport.write(plain_answer("503 Service Unavailable", "server full: an idle connection is closed",
                                                  RETRY_AFTER_CONNECTIONS_S))
                self.transport.close()

        def _wait_for_head(self) -> None:
            self._head = bytearray()
            self._line_start = 0

        def data_received(self, data: bytes) -> None:
            if self._discarding:
                return
            head = self._head
            if head is None:
                super().data_received(data)
                return
            self._unset_keepalive_if_required()
            if not head and self._deadline is None:
                self._arm(head_timeout, "request line and headers")
            start = len(head)
            head += data
            end, problem = self._head_end(start)
            if problem is not None:
                self._refuse(problem)
            elif end is not None:
                self._head = None
                connections.waiting.pop(self, None)
                super().data_received(bytes(head))

        def _refuse(self, answer: bytes) -> None:
            """Answers and closes, reading (and dropping) what the client still sends for a moment first:
            a close with unread bytes would reset the connection, and the answer could be lost."""
            self._head = None
            self._discarding = True
            self._disarm()
            connections.waiting.pop(self, None)
            self.transport.write(answer)
            if self.transport.can_write_eof():
                self.transport.write_eof()
            self._deadline = self.loop.call_later(LINGER_S, self.transport.close)

        def _head_end(self, start: int) -> tuple[Optional[int], Optional[bytes]]:
            """Looks at the lines of the head that the bytes from `start` end or extend (each byte once):
            (where the head ends, None) once its blank line is here, (None, the answer) when a bound is
            passed, else (None, None)."""
            head = self._head
            assert head is not None
            position = max(start - 1, self._line_start)
            while True:
                found = head.find(b"\r\n", position)
                length = (len(head) if found < 0 else found) - self._line_start
                if self._line_start == 0 and length > MAX_REQUEST_LINE_BYTES:
                    return None, plain_answer("414 URI Too Long", f"request line too long (at most {MAX_REQUEST_LINE_BYTES} bytes)")
                if length > MAX_HEADER_LINE_BYTES:
                    return None, plain_answer("431 Request Header Fields Too Large",
                                              f"a request header too long (at most {MAX_HEADER_LINE_BYTES} bytes a line)")
                if (len(head) if found < 0 else found + 2) > MAX_HEAD_BYTES:
                    return None, plain_answer("431 Request Header Fields Too Large",
                                              f"request headers too large (at most {MAX_HEAD_BYTES} bytes in all)")
                if found < 0:
                    return None, None
                if length == 0 and self._line_start > 0:
                    return found + 2, None
                self._line_start = position = found + 2

        def on_headers_complete(self) -> None:
            self._head = None  # a pipelined request's head reached the parser with the one before it
            super().on_headers_complete()
            self._arm(body_timeout, "body")

        def on_message_complete(self) -> None:
            super().on_message_complete()
            self._disarm()
            self._wait_for_head()  # the next request's (bytes of it already here go to the parser)

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if self._head is not None and not self.pipeline and not self.transport.is_closing():
                connections.waiting[self] = None  # no request under way: it may make room for a new connection

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
                self.transport.write(plain_answer("408 Request Timeout", f"{what} not received within {seconds:g} s"))
            if self.cycle is not None and not self.cycle.response_complete:
                self.cycle.disconnected = True  # for the app, its client is gone: its answer, if any, is dropped
                self.cycle.message_event.set()
            self.transport.close()

    return GuardedProtocol

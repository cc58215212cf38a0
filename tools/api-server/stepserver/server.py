"""Serving: uvicorn with an HTTP protocol that enforces read deadlines and a per-client connection cap.

uvicorn by itself times out only idle keep-alive connections; a client that trickles its request line,
headers or body holds a connection for ever. `GuardedProtocol` arms a deadline for the request line and
headers (from the connection or the request's first byte) and another for the body (from the end of the
headers); when one passes, it answers 408 (if nothing was answered yet) and closes. A client address
holding more than max_connections_per_client connections gets a 503 and is closed at once.
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections import Counter
from typing import Any, Callable, Optional

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from .settings import Settings


GRACEFUL_SHUTDOWN_S = 5  # on SIGTERM, requests still running after this are cancelled


def _plain_answer(status: str, message: str) -> bytes:
    body = ('{"error":"%s"}' % message).encode()
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


def pin_to_one_cpu(slot: int) -> Optional[int]:
    """Linux: keeps this process (the calling thread, and every thread it starts afterwards) on one of
    the CPUs it may use, the slot-th modulo their number; returns that CPU, or None when there is
    nothing to choose or no affinity to set. Why: a server process's threads (the event loop, the
    request threads, the daily buckets' worker) take turns holding Python's GIL several times a
    request, and each turn handed to a thread on another CPU costs a cross-CPU wake-up and cold
    caches. One client, 1,000-sample batches, alternating: 289,000-313,000 samples/s pinned against
    219,000-273,000 free (server CPU 2.8-3.0 ms a request against 3.2-3.9 ms). With --workers, each
    worker gets its own CPU."""
    if not hasattr(os, "sched_getaffinity"):
        return None
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2:
        return None
    cpu = allowed[slot % len(allowed)]
    try:
        os.sched_setaffinity(0, {cpu})
    except OSError:
        return None
    return cpu


def tune_malloc() -> None:
    """glibc only: give large blocks (request bodies, decoded batches) back to the system when they are
    freed. By default glibc raises its mmap threshold to the largest block freed so far, after which
    every 8 MiB body comes from a heap that never shrinks, and each worker thread gets its own arena
    that keeps what it freed: the peak RSS would no longer follow the bodies in flight."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    if not name or not hasattr(ctypes, "CDLL"):
        return
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return  # not glibc
    M_MMAP_THRESHOLD, M_ARENA_MAX = -3, -8
    mallopt(M_MMAP_THRESHOLD, 256 * 1024)
    mallopt(M_ARENA_MAX, 2)


def die_with_parent(parent: int) -> None:
    """Linux: this process gets SIGKILL when its parent dies (a killed supervisor leaves no worker
    holding the port). Elsewhere: nothing."""
    import ctypes
    import ctypes.util
    import os
    import signal as signals

    name = ctypes.util.find_library("c")
    if name:
        try:
            PR_SET_PDEATHSIG = 1
            ctypes.CDLL(name).prctl(PR_SET_PDEATHSIG, signals.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(1)


def listen_socket(host: str, port: int) -> socket.socket:
    family, kind, protocol, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    sock = socket.socket(family, kind, protocol)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(2048)
    except BaseException:
        sock.close()
        raise
    sock.set_inheritable(False)
    return sock


class HandedServer(uvicorn.Server):
    """A worker of --workers: serves the connections its supervisor accepted and handed over (their
    descriptors, over a Unix socket, SCM_RIGHTS) instead of accepting on the shared port itself, so
    that connections are spread evenly (workers accepting on one socket took 6 of 8 in one and 2 in
    the other, measured). A stop closes the channel first; the connections then finish as uvicorn's own."""

    def __init__(self, config: uvicorn.Config, channel: socket.socket) -> None:
        super().__init__(config)
        self.channel = channel

    async def startup(self, sockets: Optional[list] = None) -> None:
        await super().startup(sockets=[])
        loop = asyncio.get_running_loop()
        config = self.config

        def create_protocol(_loop: Optional[asyncio.AbstractEventLoop] = None) -> asyncio.Protocol:
            return config.http_protocol_class(config=config, server_state=self.server_state,  # type: ignore[call-arg]
                                              app_state=self.lifespan.state, _loop=_loop)

        def take() -> None:
            while True:
                try:
                    data, fds, _, _ = socket.recv_fds(self.channel, 1, 1)  # one message (cli.handing_channel)
                except BlockingIOError:
                    return
                except OSError:
                    data, fds = b"", []
                if not data and not fds:  # the supervisor is gone or stopping
                    loop.remove_reader(self.channel.fileno())
                    return
                for fd in fds:
                    connection = socket.socket(fileno=fd)
                    if self.should_exit:
                        connection.close()
                        continue
                    connection.setblocking(False)
                    loop.create_task(loop.connect_accepted_socket(create_protocol, connection))

        self.channel.setblocking(False)
        loop.add_reader(self.channel.fileno(), take)

    async def shutdown(self, sockets: Optional[list] = None) -> None:
        try:
            asyncio.get_running_loop().remove_reader(self.channel.fileno())
        except (ValueError, OSError):
            pass
        await super().shutdown(sockets)



def make_server(app: Callable[..., Any], settings: Settings, host: str, port: int,
                channel: Optional[socket.socket] = None) -> uvicorn.Server:
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=settings.log_level,
        lifespan="off",
        http=guarded_protocol(settings),
        ws="none",
        loop="uvloop",
        server_header=False,
        access_log=False,  # ours (app.ErrorBoundary) leaves the query string out
        date_header=False,
        timeout_keep_alive=int(settings.keep_alive_s),
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
        limit_concurrency=settings.max_connections,
    )
    return uvicorn.Server(config) if channel is None else HandedServer(config, channel)

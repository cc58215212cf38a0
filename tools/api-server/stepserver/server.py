"""Serving the app: uvicorn with the guarded HTTP protocol (http_guards.py) on a socket bound here, in
one process or in each of --workers processes sharing it (cli.py)."""

from __future__ import annotations

import socket
from typing import Any, Callable

import uvicorn

from .http_guards import guarded_protocol
from .settings import Settings

GRACEFUL_SHUTDOWN_S = 5  # on SIGTERM, requests still running after this are cancelled


def make_server(app: Callable[..., Any], settings: Settings) -> uvicorn.Server:
    config = uvicorn.Config(
        app,
        log_level=settings.log_level,
        lifespan="off",
        http=guarded_protocol(settings),
        ws="none",
        loop="uvloop",
        server_header=False,
        access_log=False,  # app.AccessLog leaves the query string out
        date_header=False,
        timeout_keep_alive=int(settings.keep_alive_s),
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
        limit_concurrency=None,  # the guarded protocol caps connections (and answers in JSON)
        proxy_headers=False,  # X-Forwarded-For is not taken from anyone: the client is the peer's address
    )
    return uvicorn.Server(config)


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

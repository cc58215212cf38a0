"""Expensive reads: GET /steps/daily, and GET /steps pages of more than LARGE_PAGE samples.

They run in processes of their own (a pool of max_expensive_reads, started at the first one, each at
nice 10 with its own connection to the database). A Python process gives its threads turns at one
interpreter lock: a read that computes for a second in a thread would take half the turns of every
other request of its process. In a process of its own at a lower priority it takes what the cores
have left once the server's own work is done.

Fair shares: at most max_expensive_reads_per_user of one user's run at once (beyond: 429) and
max_expensive_reads in all (beyond: 503), both answered with Retry-After. The work is done in chunks,
between which it stops (ClientGone) once its client has gone: each share has a flag in memory shared
with the pool, set when the request's connection closes, so an abandoned read holds its share, a
process and the database for at most a chunk.

A reading process ends when the server that started it does, however it ends: a server killed with
SIGKILL has no chance to stop its pool, so each reading process watches for its parent to change.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import threading
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any, Callable, Optional

from starlette.requests import Request

from .errors import ApiError

RETRY_AFTER_S = 1
LARGE_PAGE = 10_000  # GET /steps pages of more samples than this are expensive reads
READER_NICENESS = 10
PARENT_CHECK_S = 0.5  # how often a reading process looks whether its server is still there


class ClientGone(Exception):
    """The client of a read went away; its work stops here."""


class ExpensiveReads:
    def __init__(self, data: Path, database: Optional[str], total: int, per_user: int) -> None:
        self.data = data
        self.database = database
        self.total = total
        self.per_user = per_user
        self.by_user: Counter[str] = Counter()
        self.free = list(range(total))
        self._context = multiprocessing.get_context("spawn")  # no fork of a process with threads and connections
        self._gone = self._context.RawArray("b", total)
        self._pool: Optional[ProcessPoolExecutor] = None

    async def run(self, request: Request, user: str, work: Callable[..., bytes], *arguments: Any) -> bytes:
        """work(store, check_gone, user, *arguments) in the pool, within `user`'s share (on the event
        loop: the counts need no lock)."""
        if self.by_user[user] >= self.per_user:
            raise ApiError(429, f"too many expensive reads of this user at once (at most {self.per_user}); retry later",
                           {"Retry-After": str(RETRY_AFTER_S)})
        if not self.free:
            raise ApiError(503, f"server busy: too many expensive reads at once (at most {self.total}); retry later",
                           {"Retry-After": str(RETRY_AFTER_S)})
        slot = self.free.pop()
        self.by_user[user] += 1
        self._gone[slot] = 0
        watcher = asyncio.create_task(self._watch(request, slot))
        try:
            return await asyncio.wrap_future(self._executor().submit(_run, work, slot, user, *arguments))
        except BrokenProcessPool:
            self._pool = None  # a reading process died: the next read starts a new pool
            raise ApiError(503, "a reading process stopped; retry", {"Retry-After": str(RETRY_AFTER_S)}) from None
        finally:
            watcher.cancel()
            self.free.append(slot)
            self.by_user[user] -= 1
            if self.by_user[user] <= 0:
                del self.by_user[user]

    async def _watch(self, request: Request, slot: int) -> None:
        while True:
            message = await request.receive()  # after the (empty) body: only when the client goes
            if message["type"] == "http.disconnect":
                self._gone[slot] = 1
                return
            if not message.get("more_body"):
                await asyncio.sleep(0.05)

    def _executor(self) -> ProcessPoolExecutor:
        if self._pool is None:
            self._pool = ProcessPoolExecutor(self.total, mp_context=self._context, initializer=_start,
                                             initargs=(self.data, self.database, self._gone))
        return self._pool

    def close(self) -> None:
        """Stops the reading processes: a read under way stops at its next chunk."""
        if self._pool is not None:
            for slot in range(self.total):
                self._gone[slot] = 1
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None


# -- in each reading process ---------------------------------------------------------------------------

_store: Any = None
_gone: Any = None


def _start(data: Path, database: Optional[str], gone: Any) -> None:
    global _store, _gone
    from .storage import open_storage

    os.nice(READER_NICENESS)
    threading.Thread(target=_exit_with_server, args=(os.getppid(),), name="exit-with-server", daemon=True).start()
    _store = open_storage(data, database, pool_size=1, check=False)
    _gone = gone


def _exit_with_server(server: int) -> None:
    """Ends this process once its server is gone (it is then re-parented, so its parent id changes)."""
    while os.getppid() == server:
        time.sleep(PARENT_CHECK_S)
    os._exit(0)


def _run(work: Callable[..., bytes], slot: int, user: str, *arguments: Any) -> bytes:
    def check_gone() -> None:
        if _gone[slot]:
            raise ClientGone()

    return work(_store, check_gone, user, *arguments)

"""The supervisor's accept loop under --workers: which worker serves a connection.

Every connection is accepted here and its descriptor handed to one worker over that worker's channel
(SCM_RIGHTS; server.HandedServer serves it). Two aims, in this order:
- **A user stays on one worker.** Each worker keeps its own index of a user's history (embedded
  backend) and applies what the others wrote before it reads or writes; a user whose requests
  alternate between workers pays that on every request (one client keeping 4 requests in flight, the
  way `stepsync upload` does: 210,000-225,000 samples/s on two workers against 303,000-351,000 on one
  process, measured). So the first bytes of a connection are peeked at (MSG_PEEK: the worker still
  reads them) for its Authorization header, its token is hashed as auth.py does (SHA-256) and looked
  up in the token store (`users`: the embedded backend's DIR/tokens.sqlite, opened read-only), and a
  user seen before goes to the worker their first connection went to, whichever of their tokens (a
  phone and a laptop) it carries. Only the hash -> user and user -> worker are kept, in memory; the
  token itself never, nor is it logged. Without `users` (PostgreSQL, when told `user`) the token's
  hash stands for the user: a token's connections stay on one worker.
- **The workers share the users evenly.** A user not seen before goes to the worker with the fewest
  users assigned (ties in turn); one accepting on a shared socket had taken 6 of 8 clients.
A connection whose first bytes do not come within PEEK_WAIT_S, or name no token (a --single-user
server, a health check), or a token the store does not hold (unknown or revoked: its worker answers
401), goes to the next worker in turn; so does every connection with
`--worker-dispatch turns`, PostgreSQL's default (its workers share nothing but the database, so one
client's requests in flight are best spread), which the tests also use on the embedded backend to
send one user's requests to every worker. Waiting for them never holds up other
connections: they wait in a selector beside the listening socket.
"""

from __future__ import annotations

import hashlib
import selectors
import socket
import threading
import time
from collections import OrderedDict
from typing import Callable, Hashable, Optional

from .log import log

POLL_S = 0.25  # how often the loop looks whether it should stop, and at connections waiting too long
PEEK_WAIT_S = 0.5  # the longest a connection's first bytes are waited for
PEEK_BYTES = 8192
MAX_WAITING = 1024  # connections waiting for their first bytes; beyond, one goes on at once
MAX_USERS = 100_000  # users (or tokens' hashes) remembered with their worker (the least recently seen are forgotten)
MAX_TOKENS = 100_000  # tokens' hashes remembered with their user
_AUTHORIZATION = b"authorization:"
_BEARER = b"bearer"

UserOf = Callable[[bytes], Optional[str]]  # a token's SHA-256 -> its user, None when unknown or revoked


def token_key(first_bytes: bytes) -> Optional[bytes]:
    """The SHA-256 of the Bearer token (as auth.token_hash makes it) of the Authorization header among
    the complete header lines of a request's first bytes, or None when there is none."""
    lines = first_bytes.split(b"\r\n")
    for line in lines[1:-1]:  # not the request line; not the last, which may be cut
        if not line:
            break  # the end of the headers
        if line[: len(_AUTHORIZATION)].lower() == _AUTHORIZATION:
            scheme, _, presented = line[len(_AUTHORIZATION) :].strip().partition(b" ")
            presented = presented.strip()
            if scheme.lower() != _BEARER or not presented:
                return None
            return hashlib.sha256(presented).digest()
    return None


class ConnectionDispatcher:
    def __init__(self, sock: socket.socket, channels: list[socket.socket], by_user: bool = True,
                 users: Optional[UserOf] = None) -> None:
        self.sock = sock
        self.channels = channels
        self.by_user = by_user
        self.users = users
        self.turn = 0
        self.assigned: OrderedDict[Hashable, int] = OrderedDict()  # user -> worker, least recently seen first
        self.counts = [0] * len(channels)  # users assigned to each worker
        self.user_of: OrderedDict[bytes, str] = OrderedDict()  # token's hash -> user, least recently seen first
        self.waiting: dict[socket.socket, float] = {}  # connection -> when it was accepted

    def run(self, stopping: threading.Event) -> None:
        self.sock.setblocking(False)
        with selectors.DefaultSelector() as selector:
            selector.register(self.sock, selectors.EVENT_READ)
            try:
                while not stopping.is_set():
                    for key, _ in selector.select(POLL_S):
                        if key.fileobj is self.sock:
                            self._accept(selector, stopping)
                        else:
                            connection = key.fileobj
                            selector.unregister(connection)
                            del self.waiting[connection]
                            self._hand(connection, self._peek(connection) if self.by_user else None)
                    now = time.monotonic()
                    for connection in [c for c, since in self.waiting.items() if now - since > PEEK_WAIT_S]:
                        selector.unregister(connection)
                        del self.waiting[connection]
                        self._hand(connection, None)
            finally:
                for connection in self.waiting:
                    connection.close()
                self.waiting.clear()

    def _accept(self, selector: selectors.BaseSelector, stopping: threading.Event) -> None:
        try:
            connection, _ = self.sock.accept()
        except BlockingIOError:
            return
        except OSError as error:  # e.g. EMFILE: wait for descriptors to be freed
            if not stopping.is_set():
                log(f"accept: {error.strerror or error}")
                stopping.wait(POLL_S)
            return
        connection.setblocking(False)
        if not self.by_user or len(self.waiting) >= MAX_WAITING:
            self._hand(connection, None)
            return
        self.waiting[connection] = time.monotonic()
        selector.register(connection, selectors.EVENT_READ)

    def _peek(self, connection: socket.socket) -> Optional[Hashable]:
        """The user of the connection's token (without `users`: the token's hash), or None."""
        try:
            digest = token_key(connection.recv(PEEK_BYTES, socket.MSG_PEEK))
        except OSError:
            return None
        if digest is None or self.users is None:
            return digest
        user = self.user_of.get(digest)
        if user is not None:
            self.user_of.move_to_end(digest)
            return user
        user = self.users(digest)
        if user is None:
            return None  # unknown or revoked (not remembered: it may be created later)
        self.user_of[digest] = user
        if len(self.user_of) > MAX_TOKENS:
            self.user_of.popitem(last=False)
        return user

    def worker_for(self, key: Optional[Hashable]) -> int:
        """The worker a connection goes to, by its user (see the module's docstring)."""
        if key is None:
            self.turn += 1
            return (self.turn - 1) % len(self.channels)
        worker = self.assigned.get(key)
        if worker is not None:
            self.assigned.move_to_end(key)
            return worker
        least = min(self.counts)
        candidates = [k for k, count in enumerate(self.counts) if count == least]
        worker = candidates[self.turn % len(candidates)]
        self.turn += 1
        self.assigned[key] = worker
        self.counts[worker] += 1
        if len(self.assigned) > MAX_USERS:
            _, forgotten = self.assigned.popitem(last=False)
            self.counts[forgotten] -= 1
        return worker

    def _hand(self, connection: socket.socket, key: Optional[Hashable]) -> None:
        """Sends the descriptor to its worker (the next one that takes it if that one cannot), then
        closes it here."""
        with connection:
            first = self.worker_for(key)
            for step in range(len(self.channels)):
                try:
                    socket.send_fds(self.channels[(first + step) % len(self.channels)], [b"c"], [connection.fileno()])
                    return
                except OSError:
                    continue

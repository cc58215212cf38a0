"""The supervisor's dispatch of connections under --workers (stepserver/dispatcher.py): a user's
connections go to one worker, whichever of their tokens they carry, new users spread evenly, a connection without one (or silent) goes to
the next worker in turn; peeking leaves the bytes for the worker."""

from __future__ import annotations

import select
import socket
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from stepserver import dispatcher  # noqa: E402
from stepserver.dispatcher import ConnectionDispatcher, token_key  # noqa: E402


def request(token: str) -> bytes:
    return (f"POST /steps HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nAuthorization: Bearer {token}\r\n"
            "Content-Length: 2\r\n\r\n{}").encode()


def test_the_token_is_read_from_complete_header_lines_only():
    assert token_key(request("abc")) == token_key(b"GET / HTTP/1.1\r\nAUTHORIZATION:   Bearer abc  \r\n\r\n")
    assert token_key(request("abc")) != token_key(request("abd"))
    assert token_key(b"POST /steps HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ab") is None  # cut: not complete
    assert token_key(b"GET /authorization: x HTTP/1.1\r\nHost: x\r\n\r\n") is None
    assert token_key(b"GET / HTTP/1.1\r\nHost: x\r\n\r\nAuthorization: Bearer abc\r\n") is None  # in the body
    assert token_key(b"") is None


def test_tokens_stay_on_their_worker_and_spread_evenly():
    channels = [object(), object()]
    chooser = ConnectionDispatcher(None, channels)  # type: ignore[arg-type]
    keys = list(range(100, 108))
    first = [chooser.worker_for(key) for key in keys]
    assert sorted(first) == [0, 0, 0, 0, 1, 1, 1, 1]
    assert [chooser.worker_for(key) for key in reversed(keys)] == list(reversed(first))
    assert [chooser.worker_for(None) for _ in range(4)] in ([0, 1, 0, 1], [1, 0, 1, 0])


def test_a_users_tokens_go_to_the_users_worker_and_users_spread():
    """With `users` (the token store), the key is the token's user: a user's two tokens share a worker,
    new users go to the least loaded, an unknown token goes in turn and is looked up again next time;
    only hashes and user names are kept."""
    import hashlib

    from stepserver.auth import token_hash

    owners = {token_hash("phone"): "alice", token_hash("laptop"): "alice", token_hash("bob"): "bob",
              token_hash("carol"): "carol", token_hash("dave"): "dave"}
    asked: list[bytes] = []

    def user_of(digest: bytes):
        asked.append(digest)
        return owners.get(digest)

    chooser = ConnectionDispatcher(None, [object(), object()], users=user_of)  # type: ignore[arg-type]

    class Peeked:
        def __init__(self, token: str) -> None:
            self.data = request(token)

        def recv(self, size: int, flags: int) -> bytes:
            return self.data[:size]

    def worker(token: str) -> int:
        return chooser.worker_for(chooser._peek(Peeked(token)))  # type: ignore[arg-type]

    phone = worker("phone")
    assert [worker(token) for token in ("laptop", "phone", "laptop")] == [phone] * 3
    bob = worker("bob")
    assert bob != phone
    assert sorted([worker("carol"), worker("dave")]) == [0, 1]  # new users: the least loaded
    assert len(asked) == 5  # a token looked up once
    assert sorted(chooser.counts) == [2, 2]
    assert sorted(chooser.assigned) == ["alice", "bob", "carol", "dave"]
    assert set(chooser.user_of) == {token_hash(token) for token in ("phone", "laptop", "bob", "carol", "dave")}
    assert chooser._peek(Peeked("sst_unknown")) is None  # in turn; the worker answers 401
    assert chooser._peek(Peeked("sst_unknown")) is None
    assert asked[-2:] == [hashlib.sha256(b"sst_unknown").digest()] * 2  # not remembered: it may be created later
    assert [worker("sst_unknown") for _ in range(2)] in ([0, 1], [1, 0])


def test_connections_are_handed_with_their_bytes_unread(monkeypatch):
    monkeypatch.setattr(dispatcher, "PEEK_WAIT_S", 0.2)
    listener = socket.create_server(("127.0.0.1", 0))
    pairs = [socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET) for _ in range(2)]
    stopping = threading.Event()
    loop = threading.Thread(target=ConnectionDispatcher(listener, [ours for ours, _ in pairs]).run, args=(stopping,))
    loop.start()
    clients = []

    def handed() -> tuple[int, socket.socket]:
        """The worker a connection reached, and the connection as that worker has it."""
        ready, _, _ = select.select([theirs for _, theirs in pairs], [], [], 10)
        assert ready, "nothing handed"
        number = [theirs for _, theirs in pairs].index(ready[0])
        _, fds, _, _ = socket.recv_fds(ready[0], 1, 1)
        return number, socket.socket(fileno=fds[0])

    def connect(payload: bytes) -> tuple[int, socket.socket]:
        client = socket.create_connection(listener.getsockname())
        clients.append(client)
        if payload:
            client.sendall(payload)
        return handed()

    try:
        alice = [connect(request("alice")) for _ in range(3)]
        assert len({number for number, _ in alice}) == 1
        bob = [connect(request("bob")) for _ in range(2)]
        assert {number for number, _ in bob} == {1 - alice[0][0]}
        connection = alice[0][1]
        connection.settimeout(5)
        assert connection.recv(4096) == request("alice")  # the worker reads the whole request
        silent = [connect(b"")[0] for _ in range(2)]  # handed after PEEK_WAIT_S, in turn
        assert sorted(silent) == [0, 1]
        for _, handed_connection in alice + bob:
            handed_connection.close()
    finally:
        stopping.set()
        loop.join(10)
        for client in clients:
            client.close()
        listener.close()
        for ours, theirs in pairs:
            ours.close()
            theirs.close()
    assert not loop.is_alive()

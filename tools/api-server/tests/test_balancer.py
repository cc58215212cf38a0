"""HAProxy in front of an API server as the replicated deployment runs it (balancer.py): every
connection reaches the server from HAProxy's one address, so
- the server, started with balancer.API_SERVER_ARGUMENTS, takes more connections from that address
  than its own per-client default (64): many clients' requests at once are all answered;
- HAProxy keeps the per-client cap instead: a client address holding PER_CLIENT_CONNECTIONS
  connections is answered 503 with Retry-After on one more, and another address is still served."""

from __future__ import annotations

import http.client
import json
import os
import re
import socket
import time

import pytest

from balancer import API_SERVER_ARGUMENTS, PER_CLIENT_CONNECTIONS, Balancer, BalancerUnavailable, haproxy
from conftest import ServerProcess, make_samples, read_answer, wait_until


@pytest.fixture
def balanced(tmp_path):
    try:
        haproxy()
    except BalancerUnavailable as error:
        if os.environ.get("REQUIRE_CLUSTER") == "1":
            pytest.fail(str(error))
        pytest.skip(str(error))
    server = ServerProcess(tmp_path, extra=API_SERVER_ARGUMENTS).start()
    balancer = Balancer(tmp_path, {"api1": server.port}).start()
    try:
        yield server, balancer
    finally:
        balancer.stop()
        server.finish()


def connection(balancer: Balancer, address: str) -> http.client.HTTPConnection:
    opened = http.client.HTTPConnection("127.0.0.1", balancer.port, timeout=30, source_address=(address, 0))
    opened.connect()
    return opened


def test_many_clients_behind_haproxy_are_all_served_at_once(balanced):
    """120 writes held open at once (their bodies half sent), from two addresses: HAProxy opens a
    connection to the server for each, all from its address; each is answered 200 once its body is
    whole. On the server's own per-client default, those past 64 were answered 503 at once."""
    server, balancer = balanced
    body = json.dumps({"samples": make_samples(1)}).encode()
    head = (f"POST /steps HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {server.tokens['alice']}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode()
    held = []
    try:
        for address in ("127.0.0.2", "127.0.0.3"):
            for _ in range(60):
                sock = socket.create_connection(("127.0.0.1", balancer.port), timeout=30, source_address=(address, 0))
                sock.sendall(head + body[:10])
                held.append(sock)
        statuses = []
        for sock in held:
            sock.sendall(body[10:])
            answer = http.client.HTTPResponse(sock)
            answer.begin()
            statuses.append((answer.status, answer.read()[:200]))
        assert [status for status, _ in statuses] == [200] * len(held), [s for s in statuses if s[0] != 200][:3]
    finally:
        for sock in held:
            sock.close()


def test_haproxy_caps_the_connections_of_one_client_address(balanced):
    _, balancer = balanced
    held = []
    try:
        for _ in range(PER_CLIENT_CONNECTIONS):
            opened = connection(balancer, "127.0.0.4")
            opened.request("GET", "/health")
            answer = opened.getresponse()
            answer.read()
            assert answer.status == 200
            held.append(opened)
        with socket.create_connection(("127.0.0.1", balancer.port), timeout=30, source_address=("127.0.0.4", 0)) as one_more:
            one_more.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            refused = read_answer(one_more, time.monotonic() + 10)
            one_more.settimeout(0)
            assert one_more.recv(1) == b"", "HAProxy closes the refused connection"
        assert refused.startswith(b"HTTP/1.1 503") and re.search(rb"(?i)\r\nretry-after: [1-9]", refused), refused
        assert json.loads(refused.partition(b"\r\n\r\n")[2]) == {
            "error": f"too many connections from this address (at most {PER_CLIENT_CONNECTIONS})"}
        other = connection(balancer, "127.0.0.5")
        held.append(other)
        other.request("GET", "/health")
        assert other.getresponse().status == 200
        # A connection closed makes room for another.
        held.pop(0).close()

        def served() -> bool:
            again = connection(balancer, "127.0.0.4")
            held.append(again)
            again.request("GET", "/health")
            return again.getresponse().status == 200

        wait_until(served, "a connection from the capped address once one of its own closed", timeout=10)
    finally:
        for opened in held:
            opened.close()

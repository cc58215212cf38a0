"""Hostile and unlucky clients (#20): read deadlines, per-client connection caps, memory bounded by
the bodies in flight, and an internal error that tells the client nothing but a request id (#18.3)."""

from __future__ import annotations

import json
import re
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import requests

from conftest import ServerProcess, make_sample, make_samples, read_answer, wait_until

HEAD_TIMEOUT = 1.5
BODY_TIMEOUT = 2.0


def guarded_server(tmp_path, **options) -> ServerProcess:
    extra = ("--request-head-timeout", str(HEAD_TIMEOUT), "--request-body-timeout", str(BODY_TIMEOUT),
             "--max-connections-per-client", "8")
    return ServerProcess(tmp_path, extra=extra, **options).start()


def test_slow_clients_are_cut_off_and_others_still_served(tmp_path):
    server = guarded_server(tmp_path)
    try:
        trickler = socket.create_connection(("127.0.0.1", server.port))
        trickler.sendall(b"GET /steps HTTP/1.1\r\nHost: x\r\n")  # headers never finish
        silent = socket.create_connection(("127.0.0.1", server.port))  # sends nothing at all
        body_slow = socket.create_connection(("127.0.0.1", server.port))
        body_slow.sendall(b"POST /steps HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                          b"Authorization: Bearer " + server.tokens["alice"].encode() + b"\r\n"
                          b"Content-Length: 1000\r\n\r\n{\"samples\":")
        started = time.monotonic()
        # Meanwhile the server answers others promptly.
        for _ in range(5):
            began = time.monotonic()
            assert requests.get(server.url + "/health", timeout=5).status_code == 200
            assert time.monotonic() - began < 0.5
        for sock, limit, what in ((trickler, HEAD_TIMEOUT, b"request line and headers"),
                                  (silent, HEAD_TIMEOUT, b"request line and headers"),
                                  (body_slow, BODY_TIMEOUT, b"body")):
            answer = read_answer(sock, started + limit + 3)
            elapsed = time.monotonic() - started
            assert answer.startswith(b"HTTP/1.1 408"), answer
            assert b"not received within" in answer and what in answer
            assert elapsed < limit + 2.5, elapsed
            sock.close()
        assert server.total() == 0
    finally:
        server.finish()


def test_connections_per_client_are_capped(tmp_path):
    server = guarded_server(tmp_path)
    sockets = []
    try:
        for _ in range(8):
            sockets.append(socket.create_connection(("127.0.0.1", server.port)))
        extra = socket.create_connection(("127.0.0.1", server.port))
        answer = read_answer(extra, time.monotonic() + 5)
        assert answer.startswith(b"HTTP/1.1 503"), answer
        assert b"too many connections from this address (at most 8)" in answer
        extra.close()
        for sock in sockets:
            sock.close()
        # Once they are closed, the address may connect again.
        wait_until(lambda: requests.get(server.url + "/health", timeout=5).status_code == 200, "a new connection")
    finally:
        for sock in sockets:
            sock.close()
        server.finish()


def peak_rss_kib(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmHWM:\s+(\d+) kB", status).group(1))


PROBER = Path(__file__).with_name("health_prober.py")


def test_memory_stays_within_three_times_the_bodies_in_flight(tmp_path):
    """Four concurrent bodies of the maximal size (8 MiB of samples with 512-byte sources), twice:
    the server's peak RSS grows by at most 3x the bytes in flight, and /health answers in < 100 ms."""
    server = ServerProcess(tmp_path).start()
    try:
        server.post(make_samples(10))  # warm up every code path once
        baseline = peak_rss_kib(server.proc.pid)
        big = "\u00e9" * 256  # 512 UTF-8 bytes
        bodies = []
        for client in range(4):
            # As many samples with maximal sources as fit in the 8 MiB limit (about 6,600).
            samples = [make_sample(n, prefix=f"m{client}", sourceBundleId=big, sourceDeviceName=big) for n in range(7000)]
            body = json.dumps({"samples": samples}, ensure_ascii=False).encode()
            while len(body) > 8 * 1024 * 1024:
                samples = samples[: len(samples) * 8 * 1024 * 1024 // len(body) - 1]
                body = json.dumps({"samples": samples}, ensure_ascii=False).encode()
            assert len(body) > 8 * 1024 * 1024 - 2000
            bodies.append(body)
        # /health is timed from another process, so that this one's uploading threads do not skew it.
        prober = subprocess.Popen([sys.executable, str(PROBER), server.url + "/health"], stdout=subprocess.PIPE,
                                  stdin=subprocess.PIPE, text=True)

        def upload(body: bytes) -> int:
            with server.new_session() as session:
                return session.post(server.url + "/steps", data=body, headers={"Content-Type": "application/json"}, timeout=120).status_code

        statuses = []
        for _ in range(2):
            threads = [threading.Thread(target=lambda b=b: statuses.append(upload(b))) for b in bodies]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(timeout=120)
        output, _ = prober.communicate("stop\n", timeout=30)
        health_times = [float(value) for value in output.split()]
        assert statuses.count(200) + statuses.count(503) == 8 and statuses.count(200) >= 4, statuses
        growth_mib = (peak_rss_kib(server.proc.pid) - baseline) / 1024
        in_flight_mib = 4 * 8
        assert growth_mib <= 3 * in_flight_mib, f"peak RSS grew by {growth_mib:.0f} MiB"
        health_times.sort()
        assert health_times and health_times[len(health_times) * 9 // 10] < 0.1, health_times[-5:]
        print(f"peak RSS growth {growth_mib:.0f} MiB for {in_flight_mib} MiB in flight; /health p90 "
              f"{health_times[len(health_times) * 9 // 10] * 1000:.1f} ms, max {health_times[-1] * 1000:.1f} ms")
    finally:
        server.finish()


def test_bodies_in_flight_beyond_the_cap_get_503_with_retry_after(tmp_path):
    """Four users each hold 7 MiB of an unfinished body (28 of the 32 MiB in flight): a fifth user's
    8 MiB body is refused with Retry-After, and served once they are gone. (A body's bytes count as
    they arrive; one user's cap: tests/test_hostile_requests.py.)"""
    users = ("alice", "bob", "carol", "dave", "eve")
    server = ServerProcess(tmp_path, users=users).start()
    held = []
    try:
        for user in users[:4]:
            sock = socket.create_connection(("127.0.0.1", server.port))
            sock.sendall(b"POST /steps HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Authorization: Bearer " + server.tokens[user].encode() + b"\r\n"
                         b"Content-Length: 8388608\r\n\r\n{\"samples\": [" + b" " * (7 << 20))
            held.append(sock)
        eve = server.new_session("eve")
        body = json.dumps({"samples": make_samples(1)}).encode().ljust(8 << 20)

        def post() -> requests.Response:
            return eve.post(server.url + "/steps", data=body, headers={"Content-Type": "application/json"}, timeout=60)

        def refused() -> bool:
            response = post()
            return [response] if response.status_code == 503 else None  # (a Response is false when not ok)

        (response,) = wait_until(refused, "a 503 while 28 MiB are in flight", timeout=10)
        assert response.headers["Retry-After"] == "1"
        assert response.json()["error"] == "server busy: too many request bodies in flight, retry later"
        for sock in held:
            sock.close()
        wait_until(lambda: post().status_code == 200, "the budget to be released")
    finally:
        for sock in held:
            sock.close()
        server.finish()


def test_an_internal_error_names_nothing_but_a_request_id(sqlite_server):
    """A stored daily total is edited behind the server's back into something that is not a list:
    reading it fails in a way no route expects. The answer is 500 with a request id only; the log has
    the details."""
    server = sqlite_server
    server.post(make_samples(100))
    with sqlite3.connect(server.sqlite_path()) as connection:
        connection.execute("UPDATE daily_totals SET merged_quarters = 'not a list'")
    response = server.session.get(server.url + "/steps/daily", params={"from": "2024-01-01", "to": "2024-01-31"}, timeout=30)
    assert response.status_code == 500
    body = response.json()
    assert set(body) == {"error", "requestId"} and body["error"] == "internal error"
    assert re.fullmatch(r"[0-9a-f]{16}", body["requestId"])
    assert "DecodeError" not in response.text and "list" not in response.text
    log = server.stderr()
    line = next(line for line in log.splitlines() if body["requestId"] in line)
    assert "DecodeError" in line and "GET /steps/daily" in line

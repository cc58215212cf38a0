"""Crash and restart: a SIGKILLed server loses nothing it acknowledged and keeps its dedupe; the
database's own recovery (SQLite's WAL, PostgreSQL's) is all there is to it."""

from __future__ import annotations

import threading
import time

import requests

from conftest import make_samples, wait_until


def test_sigkill_then_restart_keeps_dedupe_and_total(server):
    samples = make_samples(300)
    assert server.post(samples[:200]).json()["saved"] == 200
    assert server.post(samples[200:]).json()["saved"] == 100
    server.kill()
    server.start()
    assert "(1 users, 300 samples)" in server.stderr()
    assert server.total() == 300
    assert server.post(samples).json()["saved"] == 0
    assert server.post(make_samples(5, start=300)).json()["saved"] == 5
    assert server.total() == 305


def test_sigkill_during_uploads_loses_no_acknowledged_sample(server):
    """Two clients upload continuously; the server is SIGKILLed mid-stream. After a restart every sample
    that was answered 200 is stored, and a retry of everything is deduplicated."""
    acknowledged: list[dict] = []
    attempted: list[dict] = []
    lock = threading.Lock()
    stop = threading.Event()

    def uploader(client: int) -> None:
        with server.new_session() as session:
            for batch in range(10_000):
                if stop.is_set():
                    return
                samples = make_samples(200, start=batch * 200, prefix=f"c{client}")
                with lock:
                    attempted.extend(samples)
                try:
                    response = session.post(server.url + "/steps", json={"samples": samples}, timeout=30)
                except requests.RequestException:
                    return  # the server died mid-request: this batch is unacknowledged
                if response.status_code != 200:
                    return
                with lock:
                    acknowledged.extend(samples)

    threads = [threading.Thread(target=uploader, args=(client,)) for client in range(2)]
    for thread in threads:
        thread.start()
    wait_until(lambda: len(acknowledged) >= 4000, "4,000 acknowledged samples", timeout=60)
    server.kill()
    stop.set()
    for thread in threads:
        thread.join(timeout=60)

    server.start()
    stored = server.all_samples()
    stored_ids = [record["id"] for record in stored]
    assert len(stored_ids) == len(set(stored_ids))
    assert {sample["id"] for sample in acknowledged} <= set(stored_ids)
    assert set(stored_ids) <= {sample["id"] for sample in attempted}
    assert len(server.history()) == len(stored)
    saved = sum(server.post(attempted[i : i + 1000]).json()["saved"] for i in range(0, len(attempted), 1000))
    assert saved == len({sample["id"] for sample in attempted}) - len(set(stored_ids))
    assert server.total() == len({sample["id"] for sample in attempted})


def test_a_database_away_past_the_request_deadline_is_a_503_then_writes_resume_by_themselves(tmp_path, postgres_cluster):
    """PostgreSQL stopped: a write is answered 503 with Retry-After once the server's retry deadline
    passed (never a 500, never later), /health says 503 (the log why); once it runs again, writes succeed without a
    restart of the server."""
    from conftest import ServerProcess
    from stepserver.storage.postgres import RETRY_DEADLINE_S

    server = ServerProcess(tmp_path, database=postgres_cluster.new_database()).start()
    try:
        assert server.post(make_samples(10)).status_code == 200
        postgres_cluster.stop("fast")
        try:
            began = time.monotonic()
            response = server.post(make_samples(10, start=10))
            waited = time.monotonic() - began
            assert response.status_code == 503 and response.headers["Retry-After"] == "5", response.text
            assert "database unavailable" in response.json()["error"]
            assert RETRY_DEADLINE_S - 1 <= waited < RETRY_DEADLINE_S + 5, waited
            (health,) = wait_until(lambda: (lambda r: [r] if r.status_code == 503 else None)(  # (a 503 Response is false)
                requests.get(server.url + "/health", timeout=5)), "/health to say the database is away")
            assert health.headers["Retry-After"] and health.json()["status"] == "error"
            assert "api-server: database unavailable" in server.stderr()  # the reason: in the log, not the answer
        finally:
            postgres_cluster.start()
        assert server.post(make_samples(10, start=10)).status_code == 200
        assert server.total() == 20
    finally:
        server.finish()

"""--workers N: plain processes sharing the port and the database; a stop reaches every worker; a
killed supervisor leaves no worker behind; every worker sees every other's writes."""

from __future__ import annotations

import socket
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import ServerProcess, make_samples, strip_received, wait_until


def workers_of(pid: int) -> list[int]:
    result = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True)
    return [int(line) for line in result.stdout.split()]


def _database(request, backend: str):
    return request.getfixturevalue("postgres_cluster").new_database() if backend == "postgres" else None


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_workers_serve_and_stop_together(tmp_path, request, backend):
    server = ServerProcess(tmp_path, database=_database(request, backend), workers=2).start()
    children = workers_of(server.proc.pid)
    assert len(children) == 2, children
    assert ", 2 workers" in server.stderr()

    def upload(k: int) -> int:
        with server.new_session() as session:
            return sum(session.post(server.url + "/steps", json={"samples": make_samples(200, start=k * 200 + n * 2000)},
                                    timeout=60).json()["saved"] for n in range(3))

    with ThreadPoolExecutor(6) as pool:
        assert sum(pool.map(upload, range(6))) == 3600
    assert server.total() == 3600
    assert server.stop() == 0
    for child in children:
        wait_until(lambda: subprocess.run(["kill", "-0", str(child)], capture_output=True).returncode != 0,
                   f"worker {child} to exit")


def test_a_killed_supervisor_takes_its_workers_along(tmp_path):
    server = ServerProcess(tmp_path, workers=2).start()
    children = workers_of(server.proc.pid)
    server.kill()

    def refused() -> bool:
        try:
            socket.create_connection(("127.0.0.1", server.port), timeout=1).close()
            return False
        except OSError:
            return True

    wait_until(refused, "the port to be free")
    for child in children:
        wait_until(lambda: subprocess.run(["kill", "-0", str(child)], capture_output=True).returncode != 0,
                   f"worker {child} to die")


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_workers_see_each_others_writes(tmp_path, request, backend):
    """Two workers, a new connection a request: every write (new, changed, deleted, emptied), whichever
    worker took it, is seen by the next read from either, pages, totals and daily totals alike; after
    the stop one process reads the same."""
    database = _database(request, backend)
    server = ServerProcess(tmp_path, database=database, users=("alice", "bob"), workers=2).start()
    alice, bob = server.new_session("alice"), server.new_session("bob")
    daily = {"tz": "UTC", "from": "2024-01-01", "to": "2024-01-06", "bySource": "true"}

    def expect(samples: list) -> None:
        for _ in range(6):  # spread over both workers
            stored = server.all_samples(session=alice)
            assert sorted(stored, key=lambda sample: sample["id"]) == sorted(stored, key=lambda sample: sample["id"])
            assert {sample["id"]: strip_received(sample) for sample in stored} == {sample["id"]: sample for sample in samples}
            days = alice.get(server.url + "/steps/daily", params=daily, timeout=60).json()["days"]
            assert sum(day["raw"] for day in days) == sum(sample["count"] for sample in samples)

    samples = make_samples(3000)
    for k in range(0, 3000, 500):
        assert server.post(samples[k : k + 500], session=alice).json()["saved"] == 500
        expect(samples[: k + 500])
    assert server.post(samples[:1000], session=alice).json()["saved"] == 0  # sent again, to either worker
    changed = [dict(sample, count=sample["count"] + 7) for sample in samples[100:200]]
    assert server.post(changed, session=alice).json()["saved"] == 100
    samples[100:200] = changed
    expect(samples)
    assert server.delete_ids([sample["id"] for sample in samples[:50]], session=alice).json()["deleted"] == 50
    samples = samples[50:]
    expect(samples)
    assert server.post(make_samples(10, prefix="b"), session=bob).json()["saved"] == 10
    assert server.delete(session=alice).status_code == 200
    expect([])
    assert len(server.all_samples(session=bob)) == 10  # bob's data is his own
    samples = make_samples(700, start=5000)
    assert server.post(samples, session=alice).json()["saved"] == 700
    expect(samples)
    before = [alice.get(server.url + "/steps/daily", params=daily, timeout=60).json() for _ in range(4)]
    assert server.stop() == 0
    alone = ServerProcess(tmp_path / "alone", database=database, data=server.data, users=("alice",)).start()
    try:
        assert alone.new_session("alice").get(alone.url + "/steps/daily", params=daily, timeout=60).json() == before[0]
        assert before == [before[0]] * 4
        assert {sample["id"]: strip_received(sample) for sample in alone.all_samples(session=alone.new_session("alice"))} == \
            {sample["id"]: sample for sample in samples}
    finally:
        alone.finish()

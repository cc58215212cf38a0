"""--workers N: processes sharing the port; a stop reaches every worker; a killed supervisor leaves no
worker behind; the embedded backend's workers see each other's writes (and its daily totals follow them)."""

from __future__ import annotations

import socket
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import requests

from conftest import MAIN, ServerProcess, make_samples, strip_received, wait_until


def workers_of(pid: int) -> list[int]:
    result = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True)
    return [int(line) for line in result.stdout.split()]


def test_workers_serve_and_stop_together(tmp_path, postgres_cluster):
    server = ServerProcess(tmp_path, database=postgres_cluster.new_database(), extra=("--workers", "2")).start()
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


def test_a_killed_supervisor_takes_its_workers_along(tmp_path, postgres_cluster):
    server = ServerProcess(tmp_path, database=postgres_cluster.new_database(), extra=("--workers", "2")).start()
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


def test_embedded_workers_hold_the_data_directory(tmp_path):
    """The supervisor holds DIR/LOCK for its workers: a second server on the same directory is refused,
    with or without --workers, and the lock goes with the whole server."""
    server = ServerProcess(tmp_path, extra=("--workers", "2")).start()
    for extra in ([], ["--workers", "2"]):
        result = subprocess.run([sys.executable, str(MAIN), "--port", "0", "--data", str(server.data), *extra],
                                capture_output=True, text=True, timeout=30)
        assert result.returncode == 1
        assert "is in use by another api-server" in result.stderr
    assert server.stop() == 0
    assert server.start().post(make_samples(3)).json()["saved"] == 3
    assert server.stop() == 0


def test_embedded_workers_see_each_others_writes(tmp_path):
    """Two workers, a new connection a request: every write (new, changed, deleted, emptied), whichever
    worker took it, is seen by the next read from either, pages, totals and daily totals alike; after
    the stop (each worker saved its daily buckets) one process reads the same."""
    server = ServerProcess(tmp_path, users=("alice", "bob"), workers=2).start()
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
    alone = ServerProcess(tmp_path / "alone", data=server.data, users=("alice",)).start()
    try:
        assert alone.new_session("alice").get(alone.url + "/steps/daily", params=daily, timeout=60).json() == before[0]
        assert before == [before[0]] * 4
        assert {sample["id"]: strip_received(sample) for sample in alone.all_samples(session=alone.new_session("alice"))} == \
            {sample["id"]: sample for sample in samples}
    finally:
        alone.finish()


def test_daily_totals_stay_exact_across_workers(tmp_path, postgres_cluster):
    """With --workers the totals cache is off (a worker would not see another's writes): every answer,
    whichever worker gives it, follows every write."""
    server = ServerProcess(tmp_path, database=postgres_cluster.new_database(),
                           extra=("--workers", "2", "--worker-dispatch", "turns")).start()
    params = {"tz": "UTC", "from": "2024-01-01", "to": "2024-01-01"}

    def totals() -> set:
        seen = set()
        for _ in range(8):  # new connections, spread over the workers
            with server.new_session() as session:
                seen.add(session.get(server.url + "/steps/daily", params=params, timeout=60).json()["days"][0]["raw"])
        return seen

    samples = make_samples(10)
    server.post(samples)
    assert totals() == {sum(sample["count"] for sample in samples)}
    samples[3]["count"] += 1000
    server.post([samples[3]])
    assert totals() == {sum(sample["count"] for sample in samples)}
    assert server.stop() == 0


def _allowed_cpus(pid: int) -> set[int]:
    import os

    return os.sched_getaffinity(pid)


def test_each_server_process_is_kept_on_one_cpu_unless_told_not_to(tmp_path):
    """A process alone is kept on one CPU (its threads hand the GIL to each other on it), each worker on
    a CPU of its own; --no-pin-cpu leaves them to the scheduler."""
    import os

    import pytest

    cpus = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set()
    if len(cpus) < 2:
        pytest.skip("one CPU (or no affinity): nothing to choose")
    alone = ServerProcess(tmp_path / "alone").start()
    assert len(_allowed_cpus(alone.proc.pid)) == 1
    alone.finish()
    workers = ServerProcess(tmp_path / "workers", workers=2).start()
    children = workers_of(workers.proc.pid)
    assert [len(_allowed_cpus(pid)) for pid in children] == [1, 1]
    assert _allowed_cpus(children[0]) != _allowed_cpus(children[1])
    assert _allowed_cpus(workers.proc.pid) == cpus  # the supervisor (it only accepts) is left alone
    assert workers.post(make_samples(5)).json()["saved"] == 5
    workers.finish()
    free = ServerProcess(tmp_path / "free", workers=2, extra=("--no-pin-cpu",)).start()
    assert [_allowed_cpus(pid) for pid in workers_of(free.proc.pid)] == [cpus, cpus]
    free.finish()


def _histories_open(pid: int) -> set[str]:
    """The users whose history a process has open."""
    from pathlib import Path

    names = set()
    for link in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = str(link.readlink())
        except OSError:
            continue
        if target.endswith(".jsonl"):
            names.add(Path(target).stem)
    return names


def test_a_users_connections_go_to_one_worker_and_users_spread(tmp_path):
    """The default dispatch: every connection of a token reaches the same worker (only it indexes that
    user's history), and two users' go to different workers."""
    server = ServerProcess(tmp_path, users=("alice", "bob"), extra=("--workers", "2")).start()  # embedded: by user
    for user in ("alice", "bob"):
        for n in range(6):  # a new connection each
            with server.new_session(user) as session:
                session.headers["Connection"] = "close"
                assert server.post(make_samples(10, start=n * 10, prefix=user), session=session).json()["saved"] == 10
                assert server.total() >= 0
    children = workers_of(server.proc.pid)
    opened = [_histories_open(pid) for pid in children]
    assert sorted(opened, key=sorted) == [{"alice"}, {"bob"}], opened
    server.finish()


def test_a_users_tokens_go_to_one_worker(tmp_path):
    """A user with two tokens (a phone and a laptop) whose connections alternate between them is served
    by one worker (only it indexes that user's history), and users still spread; a token created while
    the server runs is found, and an unknown one is answered 401 by whichever worker it reaches."""
    server = ServerProcess(tmp_path, users=("alice", "bob"), extra=("--workers", "2")).start()  # embedded: by user
    tokens = {"alice": [server.tokens["alice"], server.create_token("alice")], "bob": [server.tokens["bob"]]}

    def post(user: str, token: str, n: int) -> None:
        with requests.Session() as session:  # a new connection each
            session.headers.update({"Connection": "close", "Authorization": f"Bearer {token}"})
            assert server.post(make_samples(10, start=n * 10, prefix=user), session=session).json()["saved"] == 10

    for n in range(8):  # alice's laptop right after her phone: by token, it would go to the other worker
        post("alice", tokens["alice"][n % 2], n)
        if n % 2:
            post("bob", tokens["bob"][0], n // 2)
    for n in range(4, 8):
        post("bob", tokens["bob"][0], n)
    tokens["bob"].append(server.create_token("bob"))  # after the start
    for n in range(8, 12):
        post("bob", tokens["bob"][n % 2], n)
    children = workers_of(server.proc.pid)
    opened = [_histories_open(pid) for pid in children]
    assert sorted(opened, key=sorted) == [{"alice"}, {"bob"}], opened
    for _ in range(4):
        with requests.Session() as session:
            session.headers.update({"Connection": "close", "Authorization": "Bearer sst_unknown"})
            response = session.get(server.url + "/steps", timeout=60)
            assert response.status_code == 401 and response.json() == {"error": "unknown or revoked token"}
    assert server.total() == 80
    server.finish()


def test_a_start_removes_the_temporary_files_a_killed_save_left(tmp_path):
    """A worker killed while saving its daily buckets leaves NAME.buckets.PID.tmp (and one killed in a
    DELETE /steps, NAME.jsonl.PID.new): the next start removes them, alone or as a supervisor (holding
    DIR/LOCK, before any worker starts), and leaves the real buckets file and history as they are."""
    import os

    server = ServerProcess(tmp_path, users=("alice",))
    for extra in ((), ("--workers", "2")):
        server.extra = extra
        server.start()
        assert server.post(make_samples(20)).status_code == 200
        assert server.session.get(server.url + "/steps/daily", params={"from": "2024-01-01", "to": "2024-01-03"},
                                  timeout=60).status_code == 200
        assert server.stop() == 0
        users = server.data / "users"
        buckets, history = users / "alice.buckets", users / "alice.jsonl"
        assert buckets.exists()
        kept = {path: path.read_bytes() for path in (buckets, history)}
        stale = [users / "alice.buckets.999999.tmp", users / "a.b-c.buckets.12.tmp", users / "alice.jsonl.4242.new"]
        for path in stale:
            path.write_bytes(b"stepbkt\x03" + os.urandom(40))
        others = [users / "alice.buckets.tmp", users / "notes.txt"]  # not of that shape: not ours to remove
        for path in others:
            path.write_bytes(b"x")
        server.start()
        assert [path.name for path in stale if path.exists()] == []
        assert all(path.exists() for path in others)
        assert {path: path.read_bytes() for path in kept} == kept
        assert "left by a save that did not finish" in server.stderr()
        assert server.total() == 20
        assert server.stop() == 0
        for path in others:
            path.unlink()

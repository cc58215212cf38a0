"""--workers N (PostgreSQL): processes sharing the port; a stop reaches every worker; a killed
supervisor leaves no worker behind; the embedded backend refuses it."""

from __future__ import annotations

import socket
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

from conftest import MAIN, ServerProcess, make_samples, wait_until


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


def test_workers_need_postgresql(tmp_path):
    result = subprocess.run([sys.executable, str(MAIN), "--workers", "2", "--data", str(tmp_path)],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 2
    assert "--workers needs --database" in result.stderr


def test_daily_totals_stay_exact_across_workers(tmp_path, postgres_cluster):
    """With --workers the totals cache is off (a worker would not see another's writes): every answer,
    whichever worker gives it, follows every write."""
    server = ServerProcess(tmp_path, database=postgres_cluster.new_database(), extra=("--workers", "2")).start()
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

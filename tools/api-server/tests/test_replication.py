"""The server on a replicated PostgreSQL (pg_auto_failover: a primary and a synchronous standby,
failover_cluster.py), through the multi-host URL the README's replicated deployment gives it:
- a write (POST /steps, POST /steps/deletions) is answered 200 only once the standby has its commit;
- a write that arrives while the standby is being promoted is answered 200 once it is (within the
  request deadline), never 500; /health says 503 meanwhile and 200 after, by itself.
The fault test with HAProxy and stepsync is Tests/EndToEnd/test_failover.py."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from conftest import ServerProcess, make_samples, wait_until
from failover_cluster import FailoverCluster
from postgres_cluster import PostgresUnavailable
from stepserver.storage.postgres import RETRY_DEADLINE_S


@pytest.fixture(scope="module")
def cluster():
    try:
        started = FailoverCluster().start()
    except PostgresUnavailable as error:
        if os.environ.get("REQUIRE_CLUSTER") == "1":
            pytest.fail(f"pg_auto_failover cannot run here: {error}")
        pytest.skip(str(error))
    yield started
    started.destroy()


class Answer(threading.Thread):
    """One request on a thread of its own, so that the test can see it is not answered yet."""

    def __init__(self, call) -> None:
        super().__init__(daemon=True)
        self.call = call
        self.response = None
        self.seconds = None
        self.start()

    def run(self) -> None:
        began = time.monotonic()
        self.response = self.call()
        self.seconds = time.monotonic() - began


def standby_count(cluster: FailoverCluster, ids: list[str]) -> int:
    listed = ",".join(f"'{sample_id}'" for sample_id in ids)
    return int(cluster.sql(cluster.standby(), f"SELECT count(*) FROM samples WHERE id IN ({listed})"))


def waiting_for_the_standby(cluster: FailoverCluster) -> int:
    """Commits on the primary waiting for the synchronous standby."""
    return int(cluster.sql(cluster.primary(), "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'"))


def test_a_write_is_answered_only_once_the_standby_has_it(cluster, tmp_path):
    assert cluster.sql(cluster.primary(), "SHOW synchronous_commit") == "on"
    server = ServerProcess(tmp_path, database=cluster.url()).start()
    receiver = int(cluster.sql(cluster.standby(), "SELECT pid FROM pg_stat_wal_receiver"))
    try:
        samples = make_samples(50, prefix="sync")
        ids = [sample["id"] for sample in samples]
        for label, call, expected in (("POST /steps", lambda: server.post(samples), len(ids)),
                                      ("POST /steps/deletions", lambda: server.delete_ids(ids), 0)):
            os.kill(receiver, signal.SIGSTOP)  # the standby receives nothing more
            try:
                answer = Answer(call)
                wait_until(lambda: waiting_for_the_standby(cluster) > 0, f"{label}'s commit to wait for the standby")
                answer.join(timeout=1)
                assert answer.is_alive(), f"{label} was answered before the standby had the commit: {answer.response}"
            finally:
                os.kill(receiver, signal.SIGCONT)
            answer.join(timeout=60)
            assert answer.response is not None and answer.response.status_code == 200, answer.response
            wait_until(lambda: standby_count(cluster, ids) == expected, f"the standby to show {label}'s commit")
    finally:
        server.finish()


def test_a_write_during_a_failover_is_answered_once_the_standby_takes_over(cluster, tmp_path):
    server = ServerProcess(tmp_path, database=cluster.url(), users=("alice", "bob")).start()
    try:
        # Every pooled connection is to the primary that goes.
        warm = [Answer(lambda n=n: server.post(make_samples(10, start=n * 10, prefix="warm"))) for n in range(8)]
        for answer in warm:
            answer.join(timeout=60)
            assert answer.response.status_code == 200
        old_primary = cluster.primary()
        cluster.kill(old_primary)
        during = [Answer(lambda n=n: server.post(make_samples(100, start=n * 100, prefix="during"))) for n in range(4)]
        bob = server.new_session("bob")
        during.append(Answer(lambda: server.post(make_samples(100, prefix="bob"), session=bob)))
        wait_until(lambda: server.session.get(server.url + "/health", timeout=5).status_code == 503,
                   "/health to say the database is away", timeout=RETRY_DEADLINE_S)
        health = server.session.get(server.url + "/health", timeout=5)
        assert health.headers.get("Retry-After") and health.json()["status"] == "error"
        assert "api-server: database unavailable" in server.stderr()  # the reason: in the log, not the answer
        for answer in during:
            answer.join(timeout=RETRY_DEADLINE_S * 3)
            assert not answer.is_alive(), "a write hung past the request deadline"
            assert answer.response.status_code == 200, \
                f"{answer.response.status_code} after {answer.seconds:.1f} s: {answer.response.text}"
            assert answer.seconds < RETRY_DEADLINE_S
        assert cluster.primary() not in (None, old_primary)
        wait_until(lambda: server.session.get(server.url + "/health", timeout=5).status_code == 200,
                   "/health to say the database is back", timeout=10)
        assert server.total() == 80 + 400
        assert len(server.all_samples(session=bob)) == 100
        cluster.run(old_primary)  # the next test meets a replicated cluster again
        cluster.wait_until(cluster.replicated, "the old primary to rejoin as a synchronous standby")
    finally:
        server.finish()

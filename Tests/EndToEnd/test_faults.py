"""Faults during upload: the server killed and restarted, answering 500 or too
late for a while, and the uploader killed at random moments. In every case the
final history holds every sample exactly once and nothing is left unsynced."""
import json
import os
import random
import signal
import sqlite3
import subprocess

from conftest import STEPSYNC, TOKEN_ENV, LineReader, assert_exactly_once, ingest, status, stepsync, wait_until
from fault_proxy import FaultProxy


def start_upload(store, url, *extra):
    return subprocess.Popen([STEPSYNC, "upload", "--store", str(store), "--api-url", url, *extra],
                            env={**os.environ, **TOKEN_ENV},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_server_killed_and_restarted_mid_upload(server, tmp_path):
    store = tmp_path / "store"
    ingest(store, days=400)
    upload = start_upload(store, server.url, "--max-attempts", "60")
    errors = LineReader(upload.stderr)
    wait_until(lambda: len(server.records()) >= 5_000, "the first batches to arrive")
    server.kill()
    wait_until(lambda: errors.contains("retrying"), "the uploader to notice and retry")
    server.start()
    out, _ = upload.communicate(timeout=600)
    assert upload.returncode == 0, "\n".join(errors.lines)
    assert_exactly_once(server, store)


def test_server_errors_and_timeouts_for_a_while(server, tmp_path):
    store = tmp_path / "store"
    ingest(store, days=30)
    proxy = FaultProxy(server.port)
    try:
        # Three 500s, then two answers that come after the client gave up (the
        # server stored those batches), then normal service.
        proxy.plan = ["500", "500", "500", ("late", 3), ("late", 3)]
        result = stepsync("upload", "--store", str(store), "--api-url", proxy.url, "--timeout", "1", "--json")
        summary = json.loads(result.stdout)
        assert summary["retries"] >= 5
        assert "server error 500: injected failure" in result.stderr
        assert "timed out" in result.stderr
        assert_exactly_once(server, store)
    finally:
        proxy.close()


def test_uploader_killed_at_random_moments(server, tmp_path):
    store = tmp_path / "store"
    ingest(store, days=1100)  # ~190k samples (iPhone and Watch): enough work left for a dozen kills
    rng = random.Random(7)
    arrived = HistoryCounter(server)
    kills = 0
    while kills < 12:
        # A random moment, paced by the upload's own progress rather than the
        # clock: once 1 to 3,000 more samples reached the server, whatever the
        # machine's speed (a dozen kills use up at most ~40k of the ~190k).
        target = arrived.count() + rng.randint(1, 3_000)
        upload = start_upload(store, server.url)
        wait_until(lambda: arrived.count() >= target or upload.poll() is not None, "the upload to make progress")
        upload.send_signal(signal.SIGKILL)
        upload.wait()
        upload.stdout.close()
        upload.stderr.close()
        kills += 1
        if status(store)["unsyncedSamples"] == 0:
            break
    assert kills >= 10, "the upload finished too early to be killed 10 times; make the data larger"
    stepsync("upload", "--store", str(store), "--api-url", server.url)
    assert_exactly_once(server, store)


class HistoryCounter:
    """How many records (versions and deletions) the server's history holds, read from its database."""

    def __init__(self, server):
        self.server = server

    def count(self):
        if not self.server.data.exists():
            return 0
        connection = sqlite3.connect(self.server.data.resolve().as_uri() + "?mode=ro", uri=True, timeout=30)
        try:
            return sum(connection.execute(f"SELECT count(*) FROM {table} WHERE user_name = ?", (self.server.user,)).fetchone()[0]
                       for table in ("samples", "sample_versions", "deletions"))
        except sqlite3.OperationalError as error:
            if "no such table" in str(error):
                return 0
            raise
        finally:
            connection.close()


def test_sigterm_finishes_the_batch_in_flight_and_the_next_run_continues(server, tmp_path):
    store = tmp_path / "store"
    ingest(store, days=300)
    upload = start_upload(store, server.url)
    errors = LineReader(upload.stderr)
    wait_until(lambda: len(server.records()) >= 2_000, "a few batches")
    upload.send_signal(signal.SIGTERM)
    upload.wait(timeout=120)
    errors.thread.join(timeout=10)
    assert upload.returncode == 130
    assert errors.contains("paused; every acknowledged batch is marked synced")
    synced = status(store)["syncedSamples"]
    # Everything marked synced is at the server (nothing marked before its 200).
    assert synced <= len(server.records())
    stepsync("upload", "--store", str(store), "--api-url", server.url)
    assert_exactly_once(server, store)

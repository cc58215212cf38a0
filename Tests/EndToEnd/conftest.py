"""End-to-end tests: the real `stepsync` binary against the real API server on
loopback. Each test starts its own server (and stops it); nothing is shared."""
import json
import os
import pathlib
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.request

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
STEPSYNC = os.environ.get("STEPSYNC_BIN", str(ROOT / ".build" / "debug" / "stepsync"))
# The fixture program that deletes and changes samples in a store (Tests/StoreFixture), built beside stepsync.
STORE_FIXTURE = str(pathlib.Path(STEPSYNC).parent / "stepsync-store-fixture")
PYTHON = os.environ.get("API_SERVER_PYTHON", sys.executable)
SERVER_MAIN = ROOT / "tools" / "api-server" / "main.py"
# A fixed end date keeps every run's data identical.
MOCK_END = "2026-11-21"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(predicate, what, timeout=60.0):
    """Polls `predicate` until it is true; fails the test after `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")


# The server runs --single-user until `stepsync upload` sends a token; with E2E_SERVER_TOKENS=1 it
# requires tokens instead: the fixture creates one and stepsync gets it in STEPSYNC_TOKEN.
TOKEN_MODE = os.environ.get("E2E_SERVER_TOKENS") == "1"
TOKEN_ENV = {}


# Counts are kept in thousandths of a step; the history shows them as the wire does (whole: the integer).
HISTORY = """SELECT seq, id, start_date, end_date, count_thousandths, source_bundle_id, source_device_name, received_at FROM samples
WHERE user_name = ? UNION ALL
SELECT seq, id, start_date, end_date, count_thousandths, source_bundle_id, source_device_name, received_at FROM sample_versions
WHERE user_name = ? UNION ALL
SELECT seq, id, NULL, NULL, NULL, NULL, NULL, received_at FROM deletions WHERE user_name = ? ORDER BY seq"""
KEYS = ["id", "startDate", "endDate", "count", "sourceBundleId", "sourceDeviceName", "receivedAt"]


class Server:
    """The API server as a child process, on a fixed port so it can be restarted. Its data directory
    is `directory`; `data` is its SQLite file, whose history of the user the uploads are stored under
    `records` reads. With `database` (a PostgreSQL URL) it stores there instead."""

    def __init__(self, directory: pathlib.Path, port: int, tokens: bool = TOKEN_MODE, database: str = None):
        self.directory = directory
        self.database = database
        self.tokens = tokens
        self.user = "e2e" if tokens else "local"
        self.data = directory / "stepsync.sqlite"
        self.port = port
        self.process = None
        self.token = None
        self.log = directory.parent / f"server-{port}.log"
        if tokens:
            created = subprocess.run([PYTHON, str(SERVER_MAIN), "tokens", "create", "--user", self.user,
                                      *self.storage()], capture_output=True, text=True, check=True)
            self.token = created.stdout.strip()
            TOKEN_ENV["STEPSYNC_TOKEN"] = self.token

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def storage(self):
        """The server's storage arguments."""
        return ["--database", self.database] if self.database else ["--data", str(self.directory)]

    def start(self):
        log = open(self.log, "ab")
        self.process = subprocess.Popen(
            [PYTHON, str(SERVER_MAIN), "--host", "127.0.0.1", "--port", str(self.port), *self.storage(),
             *([] if self.tokens else ["--single-user"])],
            stdout=log, stderr=log)
        log.close()
        wait_until(self.healthy, f"the API server on port {self.port} (log {self.log})", timeout=60)

    def healthy(self):
        if self.process.poll() is not None:
            pytest.fail(f"the API server exited with {self.process.returncode}: {self.log.read_text()}")
        try:
            with urllib.request.urlopen(self.url + "/health", timeout=1) as response:
                return json.load(response) == {"status": "ok"}
        except OSError:
            return False

    def kill(self):
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def stop(self):
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def get(self, path):
        """GET `path` with the server's token (when it has one); the decoded JSON."""
        return get_json(self.url, path, self.token)

    def live_samples(self):
        """`GET /steps`, every page: the live samples by id, without `receivedAt`."""
        return live_samples(self.url, self.token)

    def records(self):
        """The user's history in the order received, read from the server's database (while it may be
        writing: a reader sees whole transactions): each version as a sample with receivedAt, each
        deletion as {"deleted": id, "receivedAt": ...}."""
        if not self.data.exists():
            return []
        connection = sqlite3.connect(self.data.resolve().as_uri() + "?mode=ro", uri=True, timeout=30)
        try:
            rows = connection.execute(HISTORY, (self.user,) * 3).fetchall()
        except sqlite3.OperationalError as error:
            if "no such table" in str(error):
                return []
            raise
        finally:
            connection.close()
        return [dict(zip(KEYS, (*row[1:4], wire_count(row[4]), *row[5:]))) if row[2] is not None
                else {"deleted": row[1], "receivedAt": row[7]} for row in rows]


def wire_count(thousandths):
    """A stored count as GET /steps answers it: the integer when whole, else up to three decimals."""
    return thousandths // 1000 if thousandths % 1000 == 0 else thousandths / 1000


def get_json(url, path, token=None):
    """GET `path` (with the token, when there is one); the decoded JSON."""
    request = urllib.request.Request(url + path)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.load(response)


def live_samples(url, token=None):
    """`GET /steps`, every page: the token's user's live samples by id, without `receivedAt`."""
    samples, offset = {}, 0
    while True:
        page = get_json(url, f"/steps?limit=100000&offset={offset}", token)
        for sample in page["samples"]:
            sample.pop("receivedAt", None)
            samples[sample["id"]] = sample
        offset += len(page["samples"])
        if not page["samples"] or offset >= page["total"]:
            return samples


@pytest.fixture
def server(tmp_path):
    TOKEN_ENV.clear()
    s = Server(tmp_path / "server-data", free_port())
    s.start()
    yield s
    s.stop()


@pytest.fixture
def token_server(tmp_path):
    """A server that requires tokens whatever E2E_SERVER_TOKENS says; its token is in TOKEN_ENV
    (so `stepsync` gets it in STEPSYNC_TOKEN) and in `.token`."""
    TOKEN_ENV.clear()
    s = Server(tmp_path / "server-data", free_port(), tokens=True)
    s.start()
    yield s
    s.stop()
    TOKEN_ENV.clear()


def stepsync(*args, check=True, timeout=900):
    result = subprocess.run([STEPSYNC, *args], capture_output=True, text=True, timeout=timeout,
                            env={**os.environ, **TOKEN_ENV})
    if check and result.returncode != 0:
        pytest.fail(f"stepsync {' '.join(args)} exited {result.returncode}:\n{result.stderr}")
    return result


def ingest(store, days):
    stepsync("ingest", "--store", str(store), "--source", f"mock:days={days},end={MOCK_END}")


def status(store):
    return json.loads(stepsync("status", "--store", str(store), "--json").stdout)


def export_samples(store):
    """The store's live samples in the API's shape, by id (`stepsync export`)."""
    samples = {}
    for line in stepsync("export", "--store", str(store)).stdout.splitlines():
        sample = json.loads(line)
        samples[sample["id"]] = sample
    return samples


def export_ids(store):
    return [json.loads(line)["id"] for line in stepsync("export", "--store", str(store)).stdout.splitlines()]


def assert_exactly_once(server, store):
    """The server's history holds every sample of the store, each exactly once,
    and the store says nothing is left to upload."""
    ids = [r["id"] for r in server.records()]
    expected = export_ids(store)
    assert len(ids) == len(set(ids)), f"{len(ids) - len(set(ids))} duplicate versions at the server"
    assert set(ids) == set(expected), f"{len(set(expected) - set(ids))} samples missing, {len(set(ids) - set(expected))} unexpected"
    assert status(store)["unsyncedSamples"] == 0


class LineReader:
    """Collects a child's stderr lines on a thread, so a test can wait for one."""

    def __init__(self, stream):
        self.lines = []
        self.thread = threading.Thread(target=self._run, args=(stream,), daemon=True)
        self.thread.start()

    def _run(self, stream):
        for line in stream:
            self.lines.append(line.rstrip("\n"))

    def contains(self, text):
        return any(text in line for line in self.lines)

"""Shared helpers: run the real server (main.py) as a child process on a free loopback port, on SQLite
or PostgreSQL, alone or with --workers 2. The PostgreSQL tests start a throw-away cluster (initdb -k +
pg_ctl on a temporary directory, Unix socket only) once per session and stop it at the end."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Optional

import pytest
import requests

from postgres_cluster import PostgresCluster, PostgresUnavailable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the stepserver package

from stepserver import contract  # noqa: E402

HERE = Path(__file__).resolve().parent
MAIN = HERE.parent / "main.py"
START_DEADLINE_S = 30.0
STOP_DEADLINE_S = 15.0
# "...-workers": --workers 2, every request on a new connection (so consecutive requests land on either
# worker: each must see what the other wrote).
BACKENDS = ["sqlite", "sqlite-workers", "postgres", "postgres-workers"]

LINE_KEYS = ["id", "startDate", "endDate", "count", "sourceBundleId", "sourceDeviceName", "receivedAt"]
SAMPLE_KEYS = LINE_KEYS[:-1]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def read_answer(sock: socket.socket, deadline: float) -> bytes:
    """What the server sends on `sock` until it closes it or `deadline` (time.monotonic()) passes."""
    sock.settimeout(max(0.1, deadline - time.monotonic()))
    data = b""
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return data
            data += chunk
    except (socket.timeout, ConnectionResetError):
        return data


def wait_until(predicate, what: str, timeout: float = 30.0, interval: float = 0.02):
    """Polls `predicate` until it returns something true; fails the test after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)


# --------------------------------------------------------------------------------------------------
# A throw-away PostgreSQL
# --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def postgres_cluster():
    yield from PostgresCluster.for_tests()


@pytest.fixture(params=["sqlite", "postgres"])
def store(request, tmp_path):
    """The storage seam (stepserver.storage.store.Store) in process, on a fresh SQLite file or
    PostgreSQL database."""
    from stepserver.storage import open_storage

    database = request.getfixturevalue("postgres_cluster").new_database() if request.param == "postgres" else None
    opened = open_storage(tmp_path / "data", database, pool_size=2)
    yield opened
    opened.close()


def call(app, method: str, path: str, body: bytes = b"", query: bytes = b"", headers=()) -> tuple[int, dict, bytes]:
    """One request through the ASGI app: (status, headers, body)."""
    answer: dict = {"body": b""}

    async def receive():
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message):
        if message["type"] == "http.response.start":
            answer["status"] = message["status"]
            answer["headers"] = {key.decode(): value.decode() for key, value in message["headers"]}
        elif message["type"] == "http.response.body":
            answer["body"] += message.get("body", b"")

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method, "scheme": "http",
             "path": path, "raw_path": path.encode(), "root_path": "", "query_string": query,
             "headers": [(b"content-type", b"application/json"), *headers], "client": ("127.0.0.1", 5000),
             "server": ("127.0.0.1", 80)}
    asyncio.run(app(scope, receive, send))
    return answer["status"], answer["headers"], answer["body"]


# --------------------------------------------------------------------------------------------------
# The server
# --------------------------------------------------------------------------------------------------


_CREATED: list["ServerProcess"] = []  # every server a test made, so that none outlives its test


@pytest.fixture(autouse=True)
def _no_server_outlives_its_test():
    """A test that fails (or forgets) before stopping a server it started: the server is killed, its
    workers with it, so no process is left behind holding a port or a data directory. Only the servers
    made during the test: a module's shared server (made before it) is its fixture's to stop."""
    before = len(_CREATED)
    yield
    made = _CREATED[before:]
    del _CREATED[before:]
    for server in made:
        if server.proc is not None and server.proc.poll() is None:
            server.kill()


class ServerProcess:
    """main.py in a child process. stderr goes to a file so it can be inspected and never blocks.
    Unless single_user, a token is created for each user before the start (tokens[user])."""

    def __init__(self, directory: Path, database: Optional[str] = None, single_user: bool = False,
                 users: tuple[str, ...] = ("alice",), extra: tuple[str, ...] = (), data: Optional[Path] = None,
                 workers: int = 1) -> None:
        self.directory = directory
        self.workers = workers
        _CREATED.append(self)
        if workers > 1:
            extra = (*extra, "--workers", str(workers))
        self.data = data or directory / "data"
        self.database = database
        self.single_user = single_user
        self.extra = extra
        self.backend = "postgres" if database else "sqlite"
        self.proc: Optional[subprocess.Popen] = None
        self.port = 0
        self.stderr_path: Optional[Path] = None
        self.starts = 0
        self.tokens: dict[str, str] = {}
        if not single_user:
            for user in users:
                self.tokens[user] = self.create_token(user)
        self.session = self.new_session()

    # -- tokens -------------------------------------------------------------------------------------

    def storage_arguments(self) -> list[str]:
        return ["--database", self.database] if self.database else ["--data", str(self.data)]

    def admin(self, *arguments: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, str(MAIN), "tokens", *arguments, *self.storage_arguments()],
                              capture_output=True, text=True, timeout=60)

    def create_token(self, user: str) -> str:
        """In-process through the token store the admin command uses (a subprocess per token cost a
        second of every test's set-up); test_auth and test_readme_commands run the command itself."""
        from stepserver.auth import new_token, now_text
        from stepserver.storage import open_storage

        store = open_storage(self.data, self.database, check=False, pool=False)
        try:
            token_id, token, digest = new_token()
            store.add_token(token_id, user, digest, now_text())
        finally:
            store.close()
        return token

    def new_session(self, user: Optional[str] = "alice") -> requests.Session:
        session = requests.Session()
        if self.workers > 1:
            session.headers["Connection"] = "close"  # each request to whichever worker accepts it
        if user is not None and user in self.tokens:
            session.headers["Authorization"] = f"Bearer {self.tokens[user]}"
        return session

    # -- process ------------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def sqlite_path(self) -> Path:
        assert self.backend == "sqlite"
        return self.data / "stepsync.sqlite"

    def history(self, user: Optional[str] = None) -> list[tuple]:
        """Every version and deletion of the user in the order received, read from the database: a
        version as (seq, "version", id, startDate, endDate, count, bundle, device, receivedAt), a
        deletion as (seq, "deletion", id, receivedAt)."""
        user = user or ("local" if self.single_user else "alice")
        query = ("SELECT seq, 'version', id, start_date, end_date, count_thousandths, source_bundle_id, source_device_name, received_at "
                 "FROM sample_versions WHERE user_name = {p} UNION ALL "
                 "SELECT seq, 'version', id, start_date, end_date, count_thousandths, source_bundle_id, source_device_name, received_at "
                 "FROM samples WHERE user_name = {p} UNION ALL "
                 "SELECT seq, 'deletion', id, received_at, NULL, NULL, NULL, NULL, NULL FROM deletions WHERE user_name = {p} "
                 "ORDER BY seq")
        if self.backend == "sqlite":
            import sqlite3

            with sqlite3.connect(self.sqlite_path().resolve().as_uri() + "?mode=ro", uri=True) as connection:
                rows = connection.execute(query.format(p="?"), (user, user, user)).fetchall()
        else:
            import psycopg

            with psycopg.connect(self.database) as connection:
                rows = connection.execute(query.format(p="%s"), (user, user, user)).fetchall()
        # A version's count as the wire has it (stored in thousandths).
        return [(*row[:5], contract.count_value(row[5]), *row[6:]) if row[1] == "version" else row[:4] for row in rows]

    def versions(self, user: Optional[str] = None) -> list[dict]:
        """Every version saved, in order, as GET /steps returns samples."""
        return [dict(zip(LINE_KEYS, row[2:])) for row in self.history(user) if row[1] == "version"]

    def start(self, wait: bool = True) -> "ServerProcess":
        assert self.proc is None or self.proc.poll() is not None, "already running"
        self.starts += 1
        self.port = free_port()
        self.directory.mkdir(parents=True, exist_ok=True)
        self.stderr_path = self.directory / f"server-{self.starts}.stderr"
        command = [sys.executable, str(MAIN), "--port", str(self.port), *self.storage_arguments(), *self.extra]
        if self.single_user:
            command.append("--single-user")
        with open(self.stderr_path, "wb") as stderr:
            self.proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr)
        self.session.close()
        self.session = self.new_session()
        if wait:
            self.wait_ready()
        return self

    def wait_ready(self) -> None:
        """Polls GET /health until it answers 200, the process exits, or the deadline passes."""
        assert self.proc is not None
        deadline = time.monotonic() + START_DEADLINE_S
        last_error = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"server exited with {self.proc.returncode} during start-up:\n{self.stderr()}")
            try:
                response = requests.get(self.url + "/health", timeout=2)
                if response.status_code == 200:
                    return
                last_error = f"HTTP {response.status_code}"
            except (requests.ConnectionError, requests.Timeout) as error:  # not up yet, or slow to answer on a busy machine
                last_error = error
            time.sleep(0.05)
        pytest.fail(f"server not ready after {START_DEADLINE_S}s ({last_error}):\n{self.stderr()}")

    def stderr(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8", errors="replace") if self.stderr_path else ""

    def stop(self) -> int:
        """SIGTERM, then wait; returns the exit status."""
        assert self.proc is not None
        self.session.close()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=STOP_DEADLINE_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            pytest.fail("server did not stop within the deadline after SIGTERM")

    def kill(self) -> None:
        """SIGKILL: no chance to clean up, like a crash."""
        assert self.proc is not None
        self.session.close()
        children = []
        if self.workers > 1:  # the whole server crashes: its workers first (else they die with it, a moment later)
            listed = subprocess.run(["pgrep", "-P", str(self.proc.pid)], capture_output=True, text=True).stdout
            children = [int(pid) for pid in listed.split()]
            for pid in children:
                os.kill(pid, signal.SIGKILL)
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=STOP_DEADLINE_S)
        for pid in children:
            wait_until(lambda: not Path(f"/proc/{pid}").exists() or "Z" in _process_state(pid), f"worker {pid} to die")

    def restart(self) -> "ServerProcess":
        if self.proc is not None and self.proc.poll() is None:
            assert self.stop() == 0
        return self.start()

    def finish(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            assert self.stop() == 0, self.stderr()

    # -- HTTP helpers -------------------------------------------------------------------------------

    def post(self, samples: list, session: Optional[requests.Session] = None, **kwargs) -> requests.Response:
        return (session or self.session).post(self.url + "/steps", json={"samples": samples}, timeout=60, **kwargs)

    def post_raw(self, body: bytes, content_type: Optional[str] = "application/json", path: str = "/steps") -> requests.Response:
        headers = {} if content_type is None else {"Content-Type": content_type}
        return self.session.post(self.url + path, data=body, headers=headers, timeout=60)

    def delete_ids(self, ids: list, session: Optional[requests.Session] = None) -> requests.Response:
        return (session or self.session).post(self.url + "/steps/deletions", json={"ids": ids}, timeout=60)

    def get(self, session: Optional[requests.Session] = None, **params) -> requests.Response:
        return (session or self.session).get(self.url + "/steps", params=params, timeout=60)

    def delete(self, session: Optional[requests.Session] = None) -> requests.Response:
        return (session or self.session).delete(self.url + "/steps", timeout=60)

    def total(self, **params) -> int:
        response = self.get(limit=0, **params)
        assert response.status_code == 200, response.text
        return response.json()["total"]

    def all_samples(self, session: Optional[requests.Session] = None, **params) -> list:
        response = self.get(session=session, limit=100000, **params)
        assert response.status_code == 200, response.text
        return response.json()["samples"]


def _process_state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "Z"


def make_sample(n: int, prefix: str = "s", **overrides) -> dict:
    minute = n % 1440
    sample = {
        "id": f"{prefix}-{n:06d}-{uuid.UUID(int=n)}",
        "startDate": f"2024-01-{1 + n // 1440 % 28:02d}T{minute // 60:02d}:{minute % 60:02d}:00Z",
        "endDate": f"2024-01-{1 + n // 1440 % 28:02d}T{minute // 60:02d}:{minute % 60:02d}:30Z",
        "count": n % 997,
        "sourceBundleId": "com.apple.health",
        "sourceDeviceName": "iPhone 15 Pro",
    }
    sample.update(overrides)
    return sample


def make_samples(count: int, start: int = 0, prefix: str = "s") -> list:
    return [make_sample(n, prefix) for n in range(start, start + count)]


def strip_received(record: dict) -> dict:
    return {key: record[key] for key in SAMPLE_KEYS}


def _server(tmp_path: Path, backend: str, request, **options) -> ServerProcess:
    database = request.getfixturevalue("postgres_cluster").new_database() if backend.startswith("postgres") else None
    if backend.endswith("-workers"):
        options.setdefault("workers", 2)
    return ServerProcess(tmp_path, database=database, **options)


@pytest.fixture(params=BACKENDS)
def server(tmp_path, request):
    """A fresh server (each backend) with a token for the user alice; stopped (exit 0 checked)."""
    instance = _server(tmp_path, request.param, request).start()
    yield instance
    instance.finish()


@pytest.fixture
def sqlite_server(tmp_path, request):
    """A fresh server on SQLite, for tests that look at its file."""
    instance = _server(tmp_path, "sqlite", request).start()
    yield instance
    instance.finish()


@pytest.fixture(scope="module", params=BACKENDS)
def shared_server(tmp_path_factory, request):
    """One server per backend for a whole module, for tests that never change stored state."""
    directory = tmp_path_factory.mktemp("shared")
    instance = _server(directory, request.param, request).start()
    yield instance
    instance.finish()

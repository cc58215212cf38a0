"""Shared helpers: run the real server (main.py) as a child process on a free loopback port."""

from __future__ import annotations

import json
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

MAIN = Path(__file__).resolve().parent.parent / "main.py"
START_DEADLINE_S = 30.0
STOP_DEADLINE_S = 15.0

LINE_KEYS = ["id", "startDate", "endDate", "count", "sourceBundleId", "sourceDeviceName", "receivedAt"]
SAMPLE_KEYS = LINE_KEYS[:-1]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ServerProcess:
    """main.py in a child process. stderr goes to a file so it can be inspected and never blocks."""

    def __init__(self, data: Path, log_dir: Path) -> None:
        self.data = data
        self.log_dir = log_dir
        self.proc: Optional[subprocess.Popen] = None
        self.port = 0
        self.stderr_path: Optional[Path] = None
        self.session = requests.Session()
        self.starts = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, wait: bool = True) -> "ServerProcess":
        assert self.proc is None or self.proc.poll() is not None, "already running"
        self.starts += 1
        self.port = free_port()
        self.stderr_path = self.log_dir / f"server-{self.starts}.stderr"
        with open(self.stderr_path, "wb") as stderr:
            self.proc = subprocess.Popen(
                [sys.executable, str(MAIN), "--port", str(self.port), "--data", str(self.data)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
            )
        self.session = requests.Session()
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
            except requests.ConnectionError as error:
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
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=STOP_DEADLINE_S)

    def restart(self) -> "ServerProcess":
        if self.proc is not None and self.proc.poll() is None:
            assert self.stop() == 0
        return self.start()

    # -- HTTP helpers ---------------------------------------------------------------------------------

    def post(self, samples: list, **kwargs) -> requests.Response:
        return self.session.post(self.url + "/steps", json={"samples": samples}, timeout=60, **kwargs)

    def post_raw(self, body: bytes, content_type: Optional[str] = "application/json") -> requests.Response:
        headers = {} if content_type is None else {"Content-Type": content_type}
        return self.session.post(self.url + "/steps", data=body, headers=headers, timeout=60)

    def get(self, **params) -> requests.Response:
        return self.session.get(self.url + "/steps", params=params, timeout=60)

    def delete(self) -> requests.Response:
        return self.session.delete(self.url + "/steps", timeout=60)

    def total(self) -> int:
        response = self.get(limit=0)
        assert response.status_code == 200, response.text
        return response.json()["total"]

    def all_samples(self) -> list:
        response = self.get(limit=100000)
        assert response.status_code == 200, response.text
        return response.json()["samples"]


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


def read_lines(path: Path) -> list[bytes]:
    """The JSONL's lines (without newlines); asserts the file ends with a newline."""
    data = path.read_bytes()
    if not data:
        return []
    assert data.endswith(b"\n"), f"{path} does not end with a newline: {data[-80:]!r}"
    return data[:-1].split(b"\n")


def read_records(path: Path) -> list[dict]:
    records = []
    for line in read_lines(path):
        record = json.loads(line)
        assert list(record) == LINE_KEYS, f"bad key order: {list(record)}"
        records.append(record)
    return records


def strip_received(record: dict) -> dict:
    return {key: record[key] for key in SAMPLE_KEYS}


@pytest.fixture
def server(tmp_path):
    """A fresh server with its own data file; stopped (and checked to exit 0) afterwards."""
    instance = ServerProcess(tmp_path / "data" / "steps.jsonl", tmp_path)
    instance.start()
    yield instance
    if instance.proc is not None and instance.proc.poll() is None:
        assert instance.stop() == 0, instance.stderr()


@pytest.fixture(scope="module")
def shared_server(tmp_path_factory):
    """One server for a whole module, for tests that never change stored state."""
    directory = tmp_path_factory.mktemp("shared")
    instance = ServerProcess(directory / "steps.jsonl", directory)
    instance.start()
    yield instance
    if instance.proc is not None and instance.proc.poll() is None:
        assert instance.stop() == 0, instance.stderr()

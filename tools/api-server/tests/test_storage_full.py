"""A full disk (#20.4): writes answer 503 and leave nothing visible; once space is freed they resume
without a restart, and /health follows; a server started on a full disk says so. SQLite on a small
tmpfs (needs root to mount it; skipped otherwise)."""

from __future__ import annotations

import errno
import os
import subprocess

import pytest
import requests

from conftest import ServerProcess, make_samples, wait_until

RECOVERY_DEADLINE_S = 20  # the probe's back-off tops out at 5 s


@pytest.fixture
def small_disk(tmp_path):
    mount = tmp_path / "disk"
    mount.mkdir()
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)], capture_output=True, text=True)
    if result.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({result.stderr.strip() or result.returncode})")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(path) -> None:
    """Writes until the filesystem is full (unbuffered: a buffered close would fail too)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for size in (65536, 4096, 512, 1):
            while True:
                try:
                    os.write(fd, b"\xff" * size)
                except OSError as error:
                    assert error.errno == errno.ENOSPC
                    break
    finally:
        os.close(fd)


def health(server) -> int:
    return requests.get(server.url + "/health", timeout=5).status_code


def test_enospc_then_space_freed_resumes_without_a_restart(small_disk, tmp_path):
    server = ServerProcess(tmp_path, data=small_disk / "data").start()
    try:
        first = make_samples(500)
        assert server.post(first).json()["saved"] == 500
        fill(small_disk / "filler")
        second = make_samples(1000, start=500)
        response = server.post(second)
        assert response.status_code == 503, response.text
        assert response.headers["Retry-After"]
        assert response.json()["error"].startswith("storage refuses writes (database or disk is full)")
        assert "nothing of this request was stored" in response.json()["error"]
        assert health(server) == 503
        assert requests.get(server.url + "/health", timeout=5).json()["error"] == "storage cannot take writes now"
        assert "storage refuses writes" in server.stderr() and "full" in server.stderr()  # the reason, in the log
        # Nothing of the refused request is visible.
        assert server.total() == 500 and server.total(versions="all") == 500
        response = server.delete_ids([first[0]["id"]])
        assert response.status_code == 503
        assert server.total() == 500

        os.unlink(small_disk / "filler")
        wait_until(lambda: health(server) == 200, "/health to see the space", timeout=RECOVERY_DEADLINE_S)
        assert server.post(second).json()["saved"] == 1000
        assert server.delete_ids([first[0]["id"]]).json()["deleted"] == 1
        assert server.total() == 1499 and server.total(versions="all") == 1500
        assert "storage takes writes again" in server.stderr()
    finally:
        server.finish()


def test_health_says_a_full_disk_before_a_write_fails(small_disk, tmp_path):
    server = ServerProcess(tmp_path, data=small_disk / "data").start()
    try:
        assert server.post(make_samples(10)).json()["saved"] == 10
        fill(small_disk / "filler")
        wait_until(lambda: health(server) == 503, "/health to see the full disk", timeout=RECOVERY_DEADLINE_S)
        assert "storage nearly full" in server.stderr()
        os.unlink(small_disk / "filler")
        wait_until(lambda: health(server) == 200, "/health to see the space", timeout=RECOVERY_DEADLINE_S)
        assert server.post(make_samples(10, start=10)).json()["saved"] == 10
    finally:
        server.finish()


def test_a_server_started_on_a_full_disk_says_so(small_disk, tmp_path):
    """SQLite cannot open its WAL's shared memory on a full disk: the start is refused with one line
    that names the file and the free space; once space is freed the server starts with everything."""
    server = ServerProcess(tmp_path, data=small_disk / "data").start()
    assert server.post(make_samples(10)).json()["saved"] == 10
    assert server.stop() == 0
    fill(small_disk / "filler")
    server.start(wait=False)
    assert server.proc.wait(timeout=30) == 1
    lines = [line for line in server.stderr().splitlines() if line.strip()]
    assert len(lines) == 1 and "stepsync.sqlite" in lines[0] and "0 bytes free on its filesystem" in lines[0], lines
    os.unlink(small_disk / "filler")
    server.start()
    try:
        assert server.total() == 10
        assert server.post(make_samples(10, start=10)).json()["saved"] == 10
    finally:
        server.finish()

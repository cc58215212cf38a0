"""The commands the READMEs give for the server work as written (#20.6): `tools/api-server/run` with
the venv's python, the server in single-user mode, and the tokens command."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import requests

from conftest import free_port, wait_until

RUN = Path(__file__).resolve().parent.parent / "run"
ROOT = RUN.parents[2]


def test_the_repository_readme_server_command(tmp_path):
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "tools/api-server/run --single-user --port 8000" in readme
    port = free_port()
    log = open(tmp_path / "server.log", "wb")
    process = subprocess.Popen([str(RUN), "--single-user", "--port", str(port), "--data", str(tmp_path / "data")],
                               cwd=tmp_path, stdout=log, stderr=log)
    try:
        def healthy():
            assert process.poll() is None, (tmp_path / "server.log").read_text()
            try:
                return requests.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200
            except requests.ConnectionError:
                return False

        wait_until(healthy, "the server started by tools/api-server/run", timeout=120)
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
        log.close()


def test_the_tokens_commands_as_written(tmp_path):
    data = str(tmp_path / "data")
    created = subprocess.run([str(RUN), "tokens", "create", "--user", "alice", "--data", data],
                             capture_output=True, text=True, timeout=120)
    assert created.returncode == 0, created.stderr
    token = created.stdout.strip()
    assert token.startswith("sst_") and len(token) == 47
    listed = subprocess.run([str(RUN), "tokens", "list", "--data", data], capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0 and "alice" in listed.stdout and token not in listed.stdout
    token_id = listed.stdout.split()[0]
    revoked = subprocess.run([str(RUN), "tokens", "revoke", token_id, "--data", data], capture_output=True, text=True, timeout=120)
    assert revoked.returncode == 0, revoked.stderr

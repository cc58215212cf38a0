"""The commands the READMEs give for the server work as written (#20.6): `tools/api-server/run` with
the venv's python, the server in single-user mode, and the tokens command."""

from __future__ import annotations

import re
import signal
import subprocess
from pathlib import Path

import requests

from conftest import ServerProcess, free_port, wait_until

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


def test_the_help_and_messages_name_the_command_people_run(tmp_path):
    """People start the server with tools/api-server/run: its help and errors say so, not main.py."""
    help_text = subprocess.run([str(RUN), "--help"], capture_output=True, text=True, timeout=120)
    assert help_text.returncode == 0 and help_text.stdout.startswith("usage: tools/api-server/run ")
    assert "Tokens: tools/api-server/run tokens --help" in help_text.stdout and "main.py" not in help_text.stdout
    refused = subprocess.run([str(RUN), "--single-user", "--host", "0.0.0.0", "--data", str(tmp_path)],
                             capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2
    assert refused.stderr.strip() == ("tools/api-server/run: error: --single-user is allowed on a loopback address only "
                                      "(not 0.0.0.0); create tokens instead: tools/api-server/run tokens create --user NAME")
    tokens = subprocess.run([str(RUN), "tokens", "revoke", "nope", "--data", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert tokens.returncode == 1 and tokens.stderr.strip() == "tools/api-server/run tokens: error: no active token nope"


def test_the_version_is_the_command_line_tools(tmp_path):
    version = subprocess.run([str(RUN), "--version"], capture_output=True, text=True, timeout=120)
    swift = (ROOT / "tools" / "common" / "ToolVersion.swift").read_text(encoding="utf-8")
    number = re.search(r'static let number = "([^"]+)"', swift).group(1)
    assert version.returncode == 0 and version.stdout.strip() == f"api-server {number}"


def test_a_server_that_wants_tokens_and_has_none_says_how_to_make_one(tmp_path):
    server = ServerProcess(tmp_path, users=()).start()
    try:
        assert ("api-server: no tokens yet: every request but GET /health and the dashboard is refused (401) until one "
                "exists: `tools/api-server/run tokens create --user NAME` (same --data/--database) prints one; for one "
                "person on this machine, --single-user needs none") in server.stderr()
    finally:
        server.finish()
    with_one = ServerProcess(tmp_path / "with-one").start()
    try:
        assert "no tokens yet" not in with_one.stderr()
    finally:
        with_one.finish()

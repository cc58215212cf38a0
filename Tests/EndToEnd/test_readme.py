"""The README's "Using it" block, run top to bottom as a newcomer would: a fresh home directory, a
real-looking export.zip (the synthetic-export generator's, `stepbench export generate`), and every
command as written. The store ends with the export's samples alone, and each command exits 0.
Then the token set-up, on that fresh account, against a server that wants a token.

What the test changes, and why: `swift build -c release` is not run and `S`/`L` name the binaries
under test (built by tools/test); the server gets a free port instead of 8000 and `--data` in the
test's directory instead of tools/api-server/data; https://steps.example.org is that server."""
import json
import os
import pathlib
import re
import subprocess
import urllib.request

import pytest

from conftest import ROOT, STEPSYNC, free_port, wait_until

STEPLOG = str(pathlib.Path(STEPSYNC).parent / "steplog")
STEPBENCH = str(pathlib.Path(STEPSYNC).parent / "stepbench")
RUN = ROOT / "tools" / "api-server" / "run"


def shell_blocks(section):
    """The ```sh blocks of the README section whose heading is `section`."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index(f"\n## {section}\n")
    end = text.find("\n## ", start + 1)
    return re.findall(r"```sh\n(.*?)```", text[start:end], re.DOTALL)


def commands(block):
    return [line for line in block.splitlines() if line.strip() and not line.lstrip().startswith("#")]


class Account:
    """A fresh home directory and a working directory holding export.zip, where lines run with
    bash as a person types them."""

    def __init__(self, tmp_path):
        self.home = tmp_path / "home"
        self.home.mkdir()
        self.work = tmp_path / "work"
        self.work.mkdir()
        self.variables = {}
        self.servers = []
        self.port = free_port()
        self.data = tmp_path / "server-data"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("STEPSYNC_")}
        self.env["HOME"] = str(self.home)

    def substitute(self, line):
        line = line.replace("tools/api-server/run", str(RUN)).replace(":8000", f":{self.port}").replace("--port 8000", f"--port {self.port}")
        return line.replace("https://steps.example.org", f"http://127.0.0.1:{self.port}")

    def run(self, line, timeout=600):
        words = line.split()
        if words[:3] == ["swift", "build", "-c"]:
            return None  # the binaries under test are built already
        if re.fullmatch(r"[SL]=\S+", line.split("#")[0].strip()):
            name = line[0]
            self.variables[name] = STEPSYNC if name == "S" else STEPLOG
            return None
        if words[0] == "tools/api-server/run" and "tokens" not in words:
            return self.start_server(line)
        command = self.substitute(line)
        result = subprocess.run(["bash", "-c", command], cwd=self.work, capture_output=True, text=True, timeout=timeout,
                                env={**self.env, **self.variables})
        assert result.returncode == 0, f"{line}\nexit {result.returncode}\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}"
        return result

    def start_server(self, line):
        command = self.substitute(line.split("#")[0]) + f" --data {self.data}"
        log = open(self.work.parent / f"server-{len(self.servers)}.log", "wb")
        process = subprocess.Popen(["bash", "-c", "exec " + command], cwd=self.work, stdout=log, stderr=log, env=self.env)
        self.servers.append(process)

        def healthy():
            assert process.poll() is None, (self.work.parent / f"server-{len(self.servers) - 1}.log").read_text()
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=1) as response:
                    return response.status == 200
            except OSError:
                return False

        wait_until(healthy, f"the server of the README's line: {line}", timeout=120)

    def stop(self):
        for process in self.servers:
            process.terminate()
            process.wait(timeout=30)
        self.servers = []

    def stepsync(self, *args):
        result = subprocess.run([STEPSYNC, *args], capture_output=True, text=True, check=True, env=self.env)
        return result.stdout


@pytest.fixture
def account(tmp_path):
    account = Account(tmp_path)
    subprocess.run([STEPBENCH, "export", "generate", "--out", str(account.work / "export.zip"), "--size-mb", "8"],
                   check=True, capture_output=True)
    yield account
    account.stop()


def test_the_using_it_block_runs_as_written_and_the_store_holds_the_export_alone(account):
    block = shell_blocks("Using it")[0]
    lines = commands(block)
    assert any("--source export.zip" in line for line in lines) and any("--source mock" in line for line in lines)
    for line in lines:
        account.run(line)
    steps = str(account.home / "steps")
    # The export's samples, and nothing else: equal to the export ingested alone.
    alone = str(account.work / "alone")
    account.stepsync("ingest", "--store", alone, "--source", str(account.work / "export.zip"))
    assert account.stepsync("export", "--store", steps) == account.stepsync("export", "--store", alone)
    status = json.loads(account.stepsync("status", "--store", steps, "--json"))
    assert status["mockSamples"] == 0 and status["realSamples"] == status["samples"] > 1_000
    assert status["unsyncedSamples"] == 0 and status["pendingDeletions"] == 0
    # The mock went into a store of its own.
    assert json.loads(account.stepsync("status", "--store", str(account.home / "steps-mock"), "--json"))["realSamples"] == 0


def test_the_token_set_up_works_on_a_fresh_account(account):
    """`install -D …` makes ~/.config/stepsync; $EDITOR (here a script that writes the token) fills
    the file; both upload lines then work against a server that requires the token."""
    created = subprocess.run([str(RUN), "tokens", "create", "--user", "me", "--data", str(account.data)],
                             capture_output=True, text=True, check=True, timeout=300)
    token = created.stdout.strip()
    editor = account.work.parent / "editor"
    editor.write_text(f"#!/bin/sh\nprintf '%s\\n' '{token}' > \"$1\"\n")
    editor.chmod(0o755)
    account.env["EDITOR"] = str(editor)
    account.stepsync("ingest", "--store", str(account.home / "steps"), "--source", str(account.work / "export.zip"))
    account.start_server("tools/api-server/run --port 8000")
    account.variables["S"] = STEPSYNC
    block = next(b for b in shell_blocks("Using it") if "install -D" in b)
    lines = commands(block)
    assert len(lines) == 3
    assert not (account.home / ".config").exists()
    account.run(lines[0])
    token_file = account.home / ".config" / "stepsync" / "token"
    assert token_file.read_text().strip() == token and token_file.stat().st_mode & 0o777 == 0o600
    first = account.run(lines[1])
    assert "upload complete" in first.stdout and token not in first.stdout + first.stderr
    second = account.run(lines[2])
    assert "upload complete" in second.stdout
    assert json.loads(account.stepsync("status", "--store", str(account.home / "steps"), "--json"))["unsyncedSamples"] == 0

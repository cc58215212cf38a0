"""The server README's replicated deployment on one machine, for the fault test and the benchmark: a
pg_auto_failover cluster (failover_cluster.py), two API servers on its multi-host URL, and HAProxy in
front of them (balancer.py). Everything listens on 127.0.0.1, is started here and is killed by
`close` (also at exit)."""

from __future__ import annotations

import atexit
import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Optional

from balancer import API_SERVER_ARGUMENTS, Balancer
from failover_cluster import FailoverCluster, free_port

MAIN = Path(__file__).resolve().parent.parent / "main.py"
START_DEADLINE_S = 60.0


def healthy(url: str) -> bool:
    """GET /health answers {"status": "ok"}."""
    try:
        with urllib.request.urlopen(url + "/health", timeout=2) as response:
            return json.load(response) == {"status": "ok"}
    except (OSError, ValueError):
        return False


class ApiServer:
    """main.py on a database URL, in a process group of its own, its log in DIRECTORY/NAME.log."""

    def __init__(self, name: str, database: str, directory: Path, python: str = sys.executable) -> None:
        self.name = name
        self.database = database
        self.python = python
        self.port = free_port()
        self.log = directory / f"{name}.log"
        self.process: Optional[subprocess.Popen] = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "ApiServer":
        # Every connection comes from HAProxy's address: the per-client cap is HAProxy's to keep.
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen([self.python, str(MAIN), "--host", "127.0.0.1", "--port", str(self.port),
                                             "--database", self.database, *API_SERVER_ARGUMENTS],
                                            stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + START_DEADLINE_S
        while not healthy(self.url):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"API server {self.name} did not start: {self.log.read_text(errors='replace')[-2000:]}")
            time.sleep(0.05)
        return self

    def kill(self) -> None:
        """SIGKILL (one process: no --workers)."""
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None


class ReplicatedSetup:
    def __init__(self, directory: Path, python: str = sys.executable, fsync: bool = False, fast: bool = True) -> None:
        self.directory = directory
        self.python = python
        self.cluster = FailoverCluster(fsync=fsync, fast=fast)
        self.servers: list[ApiServer] = []
        self.balancer: Optional[Balancer] = None
        atexit.register(self.close)

    def start(self) -> "ReplicatedSetup":
        """The cluster, the API servers, HAProxy; on a failure, everything started is killed."""
        try:
            self.cluster.start()
            self.servers = [ApiServer(f"api{n}", self.cluster.url(), self.directory, self.python) for n in (1, 2)]
            for server in self.servers:
                server.start()
            self.balancer = Balancer(self.directory, {server.name: server.port for server in self.servers}).start()
            deadline = time.monotonic() + START_DEADLINE_S
            while not healthy(self.url):
                if time.monotonic() > deadline:
                    raise RuntimeError("HAProxy found no healthy API server")
                time.sleep(0.1)
        except BaseException:
            self.close()
            raise
        return self

    @property
    def url(self) -> str:
        assert self.balancer is not None
        return self.balancer.url

    def create_token(self, user: str) -> str:
        """A token for `user` (main.py tokens create), printed once and kept by the caller."""
        created = subprocess.run([self.python, str(MAIN), "tokens", "create", "--user", user, "--database", self.cluster.url()],
                                 capture_output=True, text=True, timeout=60)
        if created.returncode != 0:
            raise RuntimeError(f"tokens create --user {user}: {created.stderr.strip()}")
        return created.stdout.strip()

    def close(self) -> None:
        if self.balancer is not None:
            self.balancer.stop()
        for server in self.servers:
            server.kill()
        self.cluster.destroy()
        atexit.unregister(self.close)

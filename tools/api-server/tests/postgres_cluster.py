"""A throw-away PostgreSQL for the tests and the benchmark: initdb on a temporary directory (with data
checksums, so that damaged pages are refused), a Unix socket only (no TCP), trust authentication,
started and stopped with pg_ctl."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Optional


class PostgresUnavailable(Exception):
    """No PostgreSQL to run here (the tests skip, saying why)."""


def postgres_bin(name: str) -> str:
    found = shutil.which(name)
    if found:
        return found
    for version in ("17", "16", "15", "14", "13"):
        candidate = Path(f"/usr/lib/postgresql/{version}/bin/{name}")
        if candidate.exists():
            return str(candidate)
    raise PostgresUnavailable(f"{name} not found (tools/test installs the Debian postgresql package)")


def server_user_prefix(root: Path) -> Optional[list[str]]:
    """As root: the command prefix that runs PostgreSQL's programs as the `postgres` user (initdb and
    postgres refuse root), `root` handed to that user; otherwise None (they run as the caller)."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        raise PostgresUnavailable("running as root and there is no postgres user to run PostgreSQL as") from None
    os.chmod(root, 0o755)
    shutil.chown(root, "postgres", "postgres")
    return ["runuser", "-u", "postgres", "--"]


class PostgresCluster:
    """initdb on a temporary directory, listening on a Unix socket only (no TCP), trust auth.
    As root, PostgreSQL runs as the `postgres` system user (initdb refuses root)."""

    def __init__(self, fsync: bool = False) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="stepsync-pg-"))
        self.data = self.root / "data"
        self.socket_dir = self.root / "socket"
        self.log = self.root / "postgres.log"
        self.fsync = fsync
        self.databases = 0
        self.run_as = server_user_prefix(self.root)

    def _run(self, *arguments: str, check: bool = True) -> subprocess.CompletedProcess:
        command = (self.run_as or []) + list(arguments)
        return subprocess.run(command, capture_output=True, text=True, timeout=120, check=check)

    def start(self) -> "PostgresCluster":
        if not self.data.exists():
            self.socket_dir.mkdir()
            if self.run_as:
                shutil.chown(self.socket_dir, "postgres", "postgres")
            self._run(postgres_bin("initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust",
                      "--no-sync", "-E", "UTF8", "--locale=C", "--data-checksums")
        options = f"-c listen_addresses='' -c unix_socket_directories='{self.socket_dir}' -c max_connections=200"
        if not self.fsync:
            options += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        self._run(postgres_bin("pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", "-o", options, "start")
        return self

    def stop(self, mode: str = "fast") -> None:
        self._run(postgres_bin("pg_ctl"), "-D", str(self.data), "-w", "-t", "60", "-m", mode, "stop", check=False)

    def restart(self) -> None:
        self.stop("fast")
        self.start()

    def url(self, database: str) -> str:
        return f"postgresql://postgres@/{database}?host={self.socket_dir}"

    def new_database(self) -> str:
        self.databases += 1
        name = f"stepsync_{os.getpid()}_{self.databases}"
        self._run(postgres_bin("psql"), "-h", str(self.socket_dir), "-U", "postgres", "-d", "postgres", "-q",
                  "-c", f"CREATE DATABASE {name}")
        return self.url(name)

    def destroy(self) -> None:
        self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)

    @classmethod
    def for_tests(cls):
        """A pytest fixture's body: a started cluster (the test is skipped where PostgreSQL is not to be
        had), destroyed after the last test that used it."""
        import pytest

        try:
            cluster = cls().start()
        except PostgresUnavailable as error:
            pytest.skip(str(error))
        yield cluster
        cluster.destroy()

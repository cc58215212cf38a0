"""A replicated PostgreSQL for the tests and the benchmark, kept by pg_auto_failover: a monitor and two
data nodes (a primary and a synchronous standby) on a temporary directory, TCP on 127.0.0.1 only, trust
authentication. pg_auto_failover does all the cluster work (replication, health checks, failover,
rejoin); this module starts its processes, kills them and starts them again.

Each `pg_autoctl run` (a node's keeper, which runs the node's PostgreSQL) is a process group of its
own; `kill` SIGKILLs it and every process under it at once, the way a node goes when its host is lost
(a SIGKILL of the postmaster alone would be restarted by its keeper, not failed over). `run` starts the
keeper again: it rewinds the old primary and rejoins it as a standby. Everything started is killed by
`destroy` (and at exit, should a caller forget).

`fast=True` shortens the monitor's health checks and the demotion wait (FAST_MONITOR) so a failover
takes seconds on loopback; `fast=False` keeps pg_auto_failover's defaults (the README's figures).
As root, every process runs as the `postgres` user (PostgreSQL refuses root), as postgres_cluster.py
does."""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Callable, Optional

from postgres_cluster import PostgresUnavailable, postgres_bin, server_user_prefix

DATABASE = "stepsync"
NODES = ("node1", "node2")
START_DEADLINE_S = 120.0
# The monitor's settings for a failover in seconds on loopback (pg_auto_failover's defaults in
# brackets): a node is unhealthy 2 s after its keeper's last report [20 s] and a failed health check
# [5 s period, 2 retries 2 s apart]; the standby is promoted 5 s later [30 s], once the old primary
# had the time to stop by itself (a keeper that loses the monitor and its standby stops PostgreSQL
# after network_partition_timeout, 3 s here [20 s]: always less than the demotion wait, so two
# primaries never accept writes at once).
FAST_MONITOR = {
    "pgautofailover.health_check_period": "1000",
    "pgautofailover.health_check_timeout": "1000",
    "pgautofailover.health_check_max_retries": "1",
    "pgautofailover.health_check_retry_delay": "500",
    "pgautofailover.node_considered_unhealthy_timeout": "2000",
    "pgautofailover.primary_demote_timeout": "5000",
    "pgautofailover.startup_grace_period": "2000",
}
FAST_KEEPER = {"timeout.network_partition_timeout": "3"}
# The data nodes' own settings (on the first node before pg_auto_failover takes it; the standby is a
# copy). synchronous_commit = on: a COMMIT returns once the standby pg_auto_failover names in
# synchronous_standby_names has flushed it, so an acknowledged write survives the primary's loss.
NODE_SETTINGS = {"synchronous_commit": "on", "max_connections": "200"}


def pg_autoctl() -> str:
    found = shutil.which("pg_autoctl")
    if not found:
        raise PostgresUnavailable("pg_autoctl not found (tools/test installs pg-auto-failover-cli and "
                                  "postgresql-NN-auto-failover)")
    return found


def pg_ctl() -> str:
    """pg_ctl's real path: pg_autoctl finds PostgreSQL's other programs beside it (a symbolic link in
    /usr/local/bin would not have them)."""
    return str(Path(postgres_bin("pg_ctl")).resolve())


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def process_tree(root: int) -> list[int]:
    """`root` and every process under it (from /proc), parents first."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                parent = int(stat.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(entry))
    tree, index = [root], 0
    while index < len(tree):
        tree.extend(children.get(tree[index], []))
        index += 1
    return tree


def processes_in(directory: Path) -> list[int]:
    """The processes whose working directory is in `directory` (PostgreSQL's run in their data
    directory)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if Path(os.readlink(f"/proc/{entry}/cwd")).is_relative_to(directory):
                    found.append(int(entry))
            except OSError:
                continue
    return found


def kill_tree(process: subprocess.Popen) -> None:
    """SIGKILL `process` and everything under it at once (PostgreSQL's children are session leaders
    of their own: the process group alone would miss them), then reap it."""
    for pid in process_tree(process.pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    process.wait()


class FailoverCluster:
    def __init__(self, fsync: bool = False, fast: bool = True) -> None:
        self.fast = fast
        self.fsync = fsync
        self.root = Path(tempfile.mkdtemp(prefix="stepsync-pgaf-"))
        self.run_as = server_user_prefix(self.root)
        self.monitor_port = free_port()
        self.ports = {name: free_port() for name in NODES}
        self.keepers: dict[str, subprocess.Popen] = {}
        self.environment = {
            "XDG_CONFIG_HOME": str(self.root / "config"),
            "XDG_DATA_HOME": str(self.root / "share"),
            "XDG_RUNTIME_DIR": str(self.root / "run"),
            "PATH": f"{Path(pg_ctl()).parent}:/usr/bin:/bin",
        }
        for name in ("config", "share", "run"):
            (self.root / name).mkdir()
        if self.run_as:
            for path in self.root.iterdir():
                shutil.chown(path, "postgres", "postgres")
        atexit.register(self.destroy)

    # -- processes ----------------------------------------------------------------------------------

    def _command(self, *arguments: str) -> list[str]:
        return [*(self.run_as or []), "env", *(f"{key}={value}" for key, value in self.environment.items()), *arguments]

    def _run(self, *arguments: str, timeout: float = START_DEADLINE_S) -> str:
        result = subprocess.run(self._command(*arguments), capture_output=True, text=True, timeout=timeout)
        if result.returncode != 0:
            raise RuntimeError(f"{' '.join(arguments[:3])} failed ({result.returncode}): {result.stderr[-2000:]}")
        return result.stdout

    def _start_keeper(self, name: str) -> None:
        """`pg_autoctl run` for the monitor or a node, in a process group of its own, its log appended to
        ROOT/NAME.log."""
        with open(self.root / f"{name}.log", "ab") as log:
            self.keepers[name] = subprocess.Popen(self._command(pg_autoctl(), "run", "--pgdata", str(self.root / name)),
                                                  stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)

    def start(self) -> "FailoverCluster":
        """The monitor, then the first node (the primary), then the second (a standby copied from it);
        returns once the second is a synchronous standby. On a failure, everything started is killed."""
        try:
            self._start()
        except BaseException:
            self.destroy()
            raise
        return self

    def _start(self) -> None:
        monitor = self.root / "monitor"
        self._run(pg_autoctl(), "create", "monitor", "--pgdata", str(monitor), "--pgport", str(self.monitor_port),
                  "--pgctl", pg_ctl(), "--hostname", "127.0.0.1", "--auth", "trust", "--no-ssl")
        self._append_settings(monitor, {**(FAST_MONITOR if self.fast else {}), **self._durability()})
        self._start_keeper("monitor")
        self.wait_until(self._monitor_answers, "the pg_auto_failover monitor")

        first = self.root / NODES[0]
        self._run(postgres_bin("initdb"), "-D", str(first), "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8",
                  "--locale=C", "--data-checksums")
        self._append_settings(first, {**NODE_SETTINGS, **self._durability(),
                                      "unix_socket_directories": f"'{self.root / 'run'}'"})
        for name in NODES:
            self._create_node(name)
            self._start_keeper(name)
            self.wait_until(lambda: self.assigned(name) in ("single", "primary", "secondary") and
                            self.reported(name) == self.assigned(name), f"{name} to join")
        self.wait_until(self.replicated, "the synchronous standby")

    def _durability(self) -> dict[str, str]:
        return {} if self.fsync else {"fsync": "off"}

    def _append_settings(self, pgdata: Path, settings: dict[str, str]) -> None:
        with open(pgdata / "postgresql.conf", "a") as conf:
            conf.write("".join(f"{key} = {value}\n" for key, value in settings.items()))

    def _create_node(self, name: str) -> None:
        self._run(pg_autoctl(), "create", "postgres", "--pgdata", str(self.root / name), "--pgport", str(self.ports[name]),
                  "--pgctl", pg_ctl(), "--pghost", "127.0.0.1", "--hostname", "127.0.0.1",
                  "--listen", "127.0.0.1", "--name", name, "--username", "postgres", "--dbname", DATABASE,
                  "--auth", "trust", "--no-ssl", "--monitor", self.monitor_url())
        if self.fast:
            for key, value in FAST_KEEPER.items():
                self._run(pg_autoctl(), "config", "set", "--pgdata", str(self.root / name), key, value)

    def kill(self, name: str) -> None:
        """The node's host is lost: its keeper and its PostgreSQL SIGKILLed at once."""
        kill_tree(self.keepers.pop(name))

    def run(self, name: str) -> None:
        """Starts the node's keeper again (after `kill`): an old primary is rewound and rejoins as a standby."""
        self._start_keeper(name)

    def destroy(self) -> None:
        """Kills every process started here: each keeper's tree, then any process still working in the
        cluster's directory (a PostgreSQL a failed `pg_autoctl create` left, a backend not yet gone)."""
        for name in list(self.keepers):
            kill_tree(self.keepers.pop(name))
        for pid in processes_in(self.root):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shutil.rmtree(self.root, ignore_errors=True)
        atexit.unregister(self.destroy)

    # -- what the monitor says ----------------------------------------------------------------------

    def monitor_url(self) -> str:
        return f"postgres://autoctl_node@127.0.0.1:{self.monitor_port}/pg_auto_failover?sslmode=disable"

    def url(self) -> str:
        """The multi-host URL an API server uses: both nodes, the one that takes writes chosen at each
        connection."""
        hosts = ",".join(f"127.0.0.1:{self.ports[name]}" for name in NODES)
        return f"postgresql://postgres@{hosts}/{DATABASE}?target_session_attrs=read-write"

    def node_url(self, name: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.ports[name]}/{DATABASE}"

    def _monitor_answers(self) -> bool:
        try:
            self.states()
            return True
        except RuntimeError:
            return False

    def states(self) -> dict[str, tuple[str, str]]:
        """Each node's (reported, assigned) state, as the monitor has them."""
        out = self._run(postgres_bin("psql"), self.monitor_url(), "-AtX", "-F", " ", "-c",
                        "SELECT nodename, reportedstate, goalstate FROM pgautofailover.node", timeout=30)
        return {name: (reported, assigned) for name, reported, assigned in (line.split() for line in out.splitlines())}

    def reported(self, name: str) -> Optional[str]:
        return self.states().get(name, (None, None))[0]

    def assigned(self, name: str) -> Optional[str]:
        return self.states().get(name, (None, None))[1]

    def primary(self) -> Optional[str]:
        """The node that takes writes (primary, or wait_primary while it has no standby), if one does."""
        for name, (reported, assigned) in self.states().items():
            if reported == assigned and reported in ("primary", "wait_primary", "single"):
                return name
        return None

    def standby(self) -> Optional[str]:
        for name, (reported, assigned) in self.states().items():
            if reported == assigned == "secondary":
                return name
        return None

    def replicated(self) -> bool:
        """A primary whose commits wait for a standby: the monitor says primary/secondary and the primary
        names the standby in synchronous_standby_names."""
        primary = self.primary()
        if primary is None or self.states()[primary][0] != "primary" or self.standby() is None:
            return False
        return self.sql(primary, "SHOW synchronous_standby_names") != ""

    def sql(self, name: str, query: str) -> str:
        """One query on a node, its rows as psql -At prints them."""
        return self._run(postgres_bin("psql"), self.node_url(name), "-AtX", "-c", query, timeout=30).strip()

    def wait_until(self, predicate: Callable[[], object], what: str, timeout: float = START_DEADLINE_S) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out after {timeout:g} s waiting for {what} (logs in {self.root})")
            for name, keeper in self.keepers.items():
                if keeper.poll() is not None:
                    log = (self.root / f"{name}.log").read_text(errors="replace")[-3000:]
                    raise RuntimeError(f"pg_autoctl run of {name} exited ({keeper.returncode}) waiting for {what}:\n{log}")
            time.sleep(0.2)

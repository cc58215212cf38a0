"""HAProxy in front of API servers, for the tests and the benchmark: 127.0.0.1 only, started and stopped
here, its configuration and log in a directory of the caller's.

It sends each request to an API server whose GET /health answered 200 (checked every second; two
failures take a server out, one success puts it back). While none does (the database failing over:
every server's /health says so), it sends to them all the same, as backup servers: a server holds a
write up to its retry deadline and answers it as soon as the standby takes writes (or 503 with
Retry-After at the deadline), where HAProxy would refuse it at once. A connection refused by a server
is retried on another; with none to take it, HAProxy answers 503 itself, with Retry-After and a JSON
error as the server's own 503. Every answer is logged on one line: the time it was sent (ms since the
epoch), the status, the method, the path (no query string, no header) and the server that answered
(`<NOSRV>`: HAProxy itself) — `answers()` reads them, which is what the clients saw.

Every connection reaches an API server from HAProxy's address, so the server's per-client cap is
HAProxy's to keep: a client address holding PER_CLIENT_CONNECTIONS connections (the server's own
default) is answered 503 with Retry-After on any more, and each API server is started with
API_SERVER_ARGUMENTS (its per-client cap raised to all its connections), which HAProxy never exceeds
(SERVER_CONNECTIONS on each of a server's two lines; more requests wait in HAProxy's queue).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

START_DEADLINE_S = 30.0
PER_CLIENT_CONNECTIONS = 64
SERVER_CONNECTIONS = 500
API_SERVER_ARGUMENTS = ("--max-connections", str(2 * SERVER_CONNECTIONS), "--max-connections-per-client", str(2 * SERVER_CONNECTIONS))
TOO_MANY = f'{{"error":"too many connections from this address (at most {PER_CLIENT_CONNECTIONS})"}}'
NO_SERVER = '{"error":"no API server can take writes now (the database may be failing over); retry later"}'

CONFIGURATION = """global
    log stdout format raw local0
    maxconn 2000

defaults
    mode http
    log global
    log-format "%[date(0,ms)] %ST %HM %HPO %s %Ta"
    timeout connect 2s
    timeout client 120s
    timeout server 120s
    timeout http-request 10s
    retries 2
    option redispatch
    option dontlognull
    http-error status 503 content-type application/json string '{no_server}' hdr Retry-After 5

frontend api
    bind 127.0.0.1:{port}
    stick-table type ip size 100k expire 60s store conn_cur
    tcp-request connection track-sc0 src
    http-request deny deny_status 503 content-type application/json string '{too_many}' hdr Retry-After 1 hdr Connection close if {{ sc0_conn_cur gt {per_client} }}
    default_backend api_servers

backend api_servers
    balance roundrobin
    option httpchk GET /health
    http-check expect status 200
    default-server inter 1s fall 2 rise 1 maxconn {server_connections}
    timeout queue 30s
    option allbackups
{servers}
"""


class BalancerUnavailable(Exception):
    """No HAProxy to run here (the tests skip, saying why)."""


@dataclass(frozen=True)
class Answer:
    """One answer HAProxy sent a client."""

    at: float  # seconds since the epoch, when it was sent
    status: int
    method: str
    path: str
    server: str  # the API server's name (NAME-fallback: as a backup), or <NOSRV> when HAProxy answered itself
    active_ms: int  # from the request's first byte to the answer's end


@dataclass(frozen=True)
class Unavailability:
    """What the clients saw of a fault, in seconds after it."""

    first_failure: Optional[float]  # the first 5xx answer to a write
    first_success: Optional[float]  # the first 200 to a write after it
    longest_stall: float  # the longest time without an acknowledged write
    stall_began: float

    def describe(self) -> str:
        seen = "no failed answer" if self.first_failure is None else (
            f"first 5xx +{self.first_failure:.1f} s, first 200 after it "
            + ("never" if self.first_success is None else
               f"+{self.first_success:.1f} s ({self.first_success - self.first_failure:.1f} s)"))
        return f"{seen}; no write acknowledged for {self.longest_stall:.1f} s (from +{self.stall_began:.1f} s)"


def haproxy() -> str:
    for candidate in (shutil.which("haproxy"), "/usr/sbin/haproxy"):
        if candidate and Path(candidate).exists():
            return candidate
    raise BalancerUnavailable("haproxy not found (tools/test installs the Debian haproxy package)")


class Balancer:
    def __init__(self, directory: Path, servers: dict[str, int]) -> None:
        """`servers`: each API server's name and port."""
        self.directory = directory
        self.servers = servers
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.configuration = directory / "haproxy.cfg"
        self.log = directory / "haproxy.log"
        self.process: Optional[subprocess.Popen] = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "Balancer":
        servers = "\n".join(f"    server {name} 127.0.0.1:{port} check" for name, port in self.servers.items()) + "\n" + \
            "\n".join(f"    server {name}-fallback 127.0.0.1:{port} backup" for name, port in self.servers.items())
        self.configuration.write_text(CONFIGURATION.format(
            port=self.port, servers=servers, no_server=NO_SERVER, too_many=TOO_MANY, per_client=PER_CLIENT_CONNECTIONS,
            server_connections=SERVER_CONNECTIONS))
        check = subprocess.run([haproxy(), "-c", "-q", "-f", str(self.configuration)], capture_output=True, text=True)
        if check.returncode != 0:
            raise RuntimeError(f"haproxy refused its configuration: {check.stdout}{check.stderr}")
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen([haproxy(), "-db", "-f", str(self.configuration)], stdout=log, stderr=log,
                                            stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + START_DEADLINE_S
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"haproxy did not start: {self.log.read_text(errors='replace')[-2000:]}") from None
                time.sleep(0.05)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def up(self, name: str) -> bool:
        """Whether HAProxy sends requests to the server `name` now: it does from the start, stops when
        the server's health check failed twice (`is DOWN` in the log) and starts again at the first
        check that passes (`is UP`)."""
        state = True
        for line in self.log.read_text(errors="replace").splitlines():
            if line.startswith(f"Server api_servers/{name} is "):
                state = line.startswith(f"Server api_servers/{name} is UP")
        return state

    def answers(self) -> list[Answer]:
        """Every answer logged so far, in the order sent."""
        found = []
        for line in self.log.read_text(errors="replace").splitlines():
            fields = line.split()
            if len(fields) == 6 and fields[0].isdigit():
                at, status, method, path, server, active = fields
                found.append(Answer(int(at) / 1000, int(status), method, path, server, int(active)))
        return sorted(found, key=lambda answer: answer.at)


def unavailability(answers: list[Answer], moment: float, until: float) -> Unavailability:
    """What the clients saw of a fault at `moment` (the answers to writes up to `until`)."""
    writes = [a for a in answers if a.method == "POST" and moment <= a.at < until]
    first = next((a for a in writes if a.status >= 500), None)
    back = next((a for a in writes if first is not None and a.at >= first.at and a.status == 200), None)
    acknowledged = [moment] + [a.at for a in writes if a.status == 200]
    gap, began = max((later - earlier, earlier) for earlier, later in zip(acknowledged, acknowledged[1:] + [until]))
    return Unavailability(None if first is None else first.at - moment, None if back is None else back.at - moment,
                          gap, began - moment)

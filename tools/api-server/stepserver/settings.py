"""Settings, parsed in one place from the command line (and STEPSYNC_DATABASE_URL)."""

from __future__ import annotations

import argparse
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from . import COMMAND, __version__, contract

PACKAGE_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = PACKAGE_ROOT / "data"
DATABASE_ENV = "STEPSYNC_DATABASE_URL"


@dataclass(frozen=True)
class Settings:
    host: str = "127.0.0.1"
    port: int = 8000
    data: Path = DEFAULT_DATA
    database: Optional[str] = None
    single_user: bool = False
    log_level: str = "warning"
    # Bounds for hostile or broken clients (README "Limits"), each of one server process (--workers N: N times).
    head_timeout_s: float = 10.0  # request line and headers, from the first byte (or the connection)
    body_timeout_s: float = 60.0  # the whole body, from the end of the headers
    keep_alive_s: float = 5.0  # idle between requests on one connection
    max_connections: int = 1000  # beyond: a connection waiting for a request is closed to make room, else 503
    max_connections_per_client: int = 64  # by client address (behind a proxy: the proxy's, for every client)
    max_bodies_in_flight: int = 4 * contract.MAX_BODY_BYTES  # request body bytes held at once, in all
    max_bodies_per_user: int = 2 * contract.MAX_BODY_BYTES  # ... and of one user
    max_expensive_reads: int = 4  # GET /steps/daily and pages over 10,000 samples at once, in all
    max_expensive_reads_per_user: int = 1  # ... and of one user
    database_pool: int = 8
    workers: int = 1


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class UsageError(Exception):
    """A usage error: one line, exit 2."""


def add_storage_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", default=None, metavar="DIR",
                        help=f"SQLite: the directory of stepsync.sqlite (default tools/api-server/{DEFAULT_DATA.relative_to(PACKAGE_ROOT)})")
    parser.add_argument("--database", default=None, metavar="URL",
                        help=f"PostgreSQL instead: postgresql://USER@HOST/DB or ...?host=/socket/dir (or ${DATABASE_ENV}); "
                        "the password goes in PGPASSWORD or ~/.pgpass, never in the URL")


def storage_settings(arguments: argparse.Namespace) -> tuple[Path, Optional[str]]:
    database = arguments.database or os.environ.get(DATABASE_ENV) or None
    if database and arguments.data:
        raise UsageError("--data and --database exclude each other")
    if database:
        from psycopg.conninfo import conninfo_to_dict

        try:
            parts = conninfo_to_dict(database)
        except Exception as error:  # psycopg.ProgrammingError: one line is enough
            raise UsageError(f"--database: not a PostgreSQL connection string ({str(error).splitlines()[0]})") from None
        if parts.get("password"):
            raise UsageError("--database: the URL holds a password; put it in PGPASSWORD or ~/.pgpass instead")
    data = DEFAULT_DATA if arguments.data is None else Path(arguments.data).expanduser().resolve()
    return data, database


def parse_serve(argv: list[str]) -> Settings:
    parser = argparse.ArgumentParser(prog=COMMAND, description="StepSync API server.",
                                     epilog=f"Tokens: {COMMAND} tokens --help")
    parser.add_argument("--version", action="version", version=f"api-server {__version__}")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="TCP port (default 8000; 0 picks a free one)")
    add_storage_arguments(parser)
    parser.add_argument("--single-user", action="store_true",
                        help="no tokens: every request is the user 'local' (loopback addresses only)")
    parser.add_argument("--log-level", default="warning",
                        choices=["critical", "error", "warning", "info", "debug", "trace"],
                        help="uvicorn log level (default warning: no per-request access logs)")
    parser.add_argument("--max-connections-per-client", type=int, default=Settings.max_connections_per_client,
                        help="connections one client address may hold open (default %(default)s; behind a "
                        "reverse proxy every client has the proxy's address: raise it, and cap at the proxy)")
    parser.add_argument("--max-connections", type=int, default=Settings.max_connections, metavar="N",
                        help="connections the server holds open in all (default %(default)s); when full, the one that "
                        "waited longest without a request makes room for a new one")
    parser.add_argument("--request-head-timeout", type=float, default=Settings.head_timeout_s, metavar="S",
                        help="seconds for a request line and headers to arrive (default %(default)s)")
    parser.add_argument("--request-body-timeout", type=float, default=Settings.body_timeout_s, metavar="S",
                        help="seconds for a whole body to arrive after the headers (default %(default)s)")
    parser.add_argument("--workers", type=int, default=1, metavar="N",
                        help="server processes sharing the port and the database (default 1)")
    arguments = parser.parse_args(argv)
    data, database = storage_settings(arguments)
    if arguments.max_connections < 1 or arguments.max_connections_per_client < 1:
        raise UsageError("--max-connections and --max-connections-per-client must be at least 1")
    if arguments.workers < 1 or arguments.workers > 64:
        raise UsageError("--workers must be between 1 and 64")
    if arguments.single_user and not is_loopback(arguments.host):
        raise UsageError(f"--single-user is allowed on a loopback address only (not {arguments.host}); "
                         f"create tokens instead: {COMMAND} tokens create --user NAME")
    return Settings(host=arguments.host, port=arguments.port, data=data, database=database,
                    single_user=arguments.single_user, log_level=arguments.log_level,
                    max_connections=arguments.max_connections,
                    max_connections_per_client=arguments.max_connections_per_client,
                    head_timeout_s=arguments.request_head_timeout, body_timeout_s=arguments.request_body_timeout,
                    workers=arguments.workers)

"""The entry point: `tools/api-server/run [serve options]` (main.py with the venv's python) runs the
server; `tools/api-server/run tokens …` manages tokens; `tools/api-server/run verify …` checks what
the database keeps beside the samples against them (storage/verifier.py).

Exit codes: 0 ok (a requested stop included), 1 failure (damaged storage, cannot listen, …), 2 usage error.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path
from typing import Any, Optional, Union

from . import COMMAND
from .errors import StartupError
from .log import log
from .settings import Settings, UsageError, add_storage_arguments, is_loopback, parse_serve, storage_settings
from .storage import open_storage
from .storage.sqlite import FILE_NAME
from .storage.store import Store

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
USER_NAME_PATTERN = "[A-Za-z0-9][A-Za-z0-9._-]{0,63}"


def main(argv: Optional[list[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv and argv[0] == "tokens":
            return tokens_command(argv[1:])
        if argv and argv[0] == "verify":
            return verify_command(argv[1:])
        settings = parse_serve(argv[1:] if argv and argv[0] == "serve" else argv)
    except UsageError as error:
        print(f"{COMMAND}: error: {error}", file=sys.stderr)
        return 2
    return serve(settings)


def _open(settings: Settings, check: bool = True) -> Store:
    return open_storage(settings.data, settings.database, settings.database_pool, check=check)


def serve(settings: Settings) -> int:
    from .server import listen_socket, tune_malloc

    tune_malloc()
    try:
        store = _open(settings)
    except StartupError as error:
        log(f"error: {error}")
        return 1
    try:
        if not settings.single_user and not is_loopback(settings.host) and store.active_tokens() == 0:
            log(f"error: refusing to listen on {settings.host} without tokens: create one with "
                f"`{COMMAND} tokens create --user NAME` (same --data/--database) first")
            return 1
        if not settings.single_user and store.active_tokens() == 0:
            log(f"no tokens yet: every request but GET /health and the dashboard is refused (401) until one exists: "
                f"`{COMMAND} tokens create --user NAME` (same --data/--database) prints one; for one person on this "
                "machine, --single-user needs none")
        try:
            sock = listen_socket(settings.host, settings.port)
        except OSError as error:
            log(f"error: cannot listen on {settings.host}:{settings.port}: {error.strerror or error}")
            return 1
        host, port = sock.getsockname()[:2]
        if settings.single_user and not is_loopback(host):  # the address bound, whatever the name said
            sock.close()
            print(f"main.py: error: --single-user is allowed on a loopback address only ({settings.host} is {host}); "
                  "create tokens instead: main.py tokens create --user NAME", file=sys.stderr)
            return 2
        mode = "single user, no tokens" if settings.single_user else "tokens required"
        workers = f", {settings.workers} workers" if settings.workers > 1 else ""
        line = (f"api-server listening on http://{f'[{host}]' if ':' in host else host}:{port}, "
                f"{store.describe()}, {mode}{workers}")
        with sock:
            if settings.workers == 1:
                return run_app(settings, store, sock, line)
            store.close()  # each worker opens its own connections: none crosses a fork
            return serve_workers(settings, sock, line)
    finally:
        store.close()


def serve_workers(settings: Settings, sock: Any, line: str) -> int:
    """settings.workers processes, each serving the shared listening socket with its own connections
    to the database. The parent supervises: a stop signal goes to every worker; a worker that exits on
    its own stops the others (exit 1). Workers die with the parent (PR_SET_PDEATHSIG)."""
    from .server import die_with_parent

    parent = os.getpid()
    children: set[int] = set()
    stopping = False

    def stop_all(number: int, frame: Any) -> None:
        nonlocal stopping
        stopping = True
        for pid in children:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)  # until the handlers are set, here and in each child
    try:
        for _ in range(settings.workers):
            pid = os.fork()
            if pid == 0:
                code = 1
                try:
                    die_with_parent(parent)
                    code = run_app(settings, _open(settings, check=False), sock, None)
                except BaseException as error:  # noqa: BLE001 - a worker reports and exits
                    log(f"worker {os.getpid()}: {type(error).__name__}: {(str(error).splitlines() or [''])[0]}")
                finally:
                    os._exit(code)
            children.add(pid)
        for stop_signal in STOP_SIGNALS:
            signal.signal(stop_signal, stop_all)
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
    print(line, file=sys.stderr, flush=True)
    status = 0
    while children:
        pid, wait_status = os.wait()
        if pid not in children:
            continue
        children.discard(pid)
        code = os.waitstatus_to_exitcode(wait_status)
        if not stopping:
            log(f"worker {pid} exited ({code}); stopping the others")
            stop_all(signal.SIGTERM, None)
            status = 1
        elif code != 0:
            status = 1
    return status


def run_app(settings: Settings, store: Store, sock: Any, line: Optional[str]) -> int:
    """Serves the app on the listening socket until a stop; `line` is printed once serving starts."""
    from .app import create_app
    from .server import make_server

    app = None
    try:
        app = create_app(settings, store)
        server = make_server(app, settings)

        # While serving, uvicorn handles SIGINT/SIGTERM itself (graceful shutdown); afterwards it
        # restores the previous handlers and re-raises the signal. These cover the moments before
        # and after: a stop before serving starts makes uvicorn skip its main loop, and the re-raise
        # is absorbed so that a requested stop exits with status 0.
        def request_stop(number: int, frame: Any) -> None:
            server.should_exit = True

        for stop_signal in STOP_SIGNALS:
            signal.signal(stop_signal, request_stop)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
        if line is not None:
            print(line, file=sys.stderr, flush=True)
        server.run(sockets=[sock])
        return 0
    finally:
        if app is not None:
            app.state.context.expensive_reads.close()
        store.close()


def tokens_command(argv: list[str]) -> int:
    from .auth import new_token, now_text

    parser = argparse.ArgumentParser(prog=f"{COMMAND} tokens", description="Manage API tokens (shown once, stored as hashes).")
    commands = parser.add_subparsers(dest="command", required=True)
    create = commands.add_parser("create", help="create a token for a user; prints it once on stdout")
    create.add_argument("--user", required=True, help=f"user name, {USER_NAME_PATTERN}")
    add_storage_arguments(create)
    listing = commands.add_parser("list", help="token ids, users, created, revoked (never the tokens)")
    add_storage_arguments(listing)
    revoke = commands.add_parser("revoke", help="revoke a token by its id; effective on the next request")
    revoke.add_argument("token_id", metavar="TOKEN_ID")
    add_storage_arguments(revoke)
    arguments = parser.parse_args(argv)
    import re

    if arguments.command == "create" and not re.fullmatch(USER_NAME_PATTERN, arguments.user):
        print(f"{COMMAND} tokens: error: --user must match {USER_NAME_PATTERN}", file=sys.stderr)
        return 2
    store = _admin_storage("tokens", arguments, check=False)
    if isinstance(store, int):
        return store
    try:
        if arguments.command == "create":
            token_id, token, digest = new_token()
            store.add_token(token_id, arguments.user, digest, now_text())
            print(f"created {token_id} for user {arguments.user}; the token is shown only now:", file=sys.stderr)
            print(token)
            return 0
        if arguments.command == "list":
            for token_id, user, created_at, revoked_at in store.list_tokens():
                print(f"{token_id}  {user}  created {created_at}  {f'revoked {revoked_at}' if revoked_at else 'active'}")
            return 0
        if store.revoke_token(arguments.token_id, now_text()):
            print(f"revoked {arguments.token_id}", file=sys.stderr)
            return 0
        print(f"{COMMAND} tokens: error: no active token {arguments.token_id}", file=sys.stderr)
        return 1
    finally:
        store.close()


def verify_command(argv: list[str]) -> int:
    """Exit 0 when every digest and daily total agrees with the samples, 1 when one does not (each on
    a line of stdout; with --repair, after putting it right) or the storage cannot be opened, 2 on a
    usage error."""
    import json
    import time

    from .storage.verifier import problems, repair

    parser = argparse.ArgumentParser(prog=f"{COMMAND} verify", description="Check the database (SQLite: every page and "
                                     "index first) and the digests and daily totals against the samples; read-only "
                                     "unless --repair.")
    add_storage_arguments(parser)
    parser.add_argument("--json", action="store_true", help='one JSON object on stdout: {"users", "samples", "problems"}')
    parser.add_argument("--repair", action="store_true", help="mark the differing digests to be computed again from the "
                        "samples (a client's next checked upload then sends its samples again) and merge the differing "
                        "days' totals again")
    arguments = parser.parse_args(argv)
    store = _admin_storage("verify", arguments, check=True, existing=True)
    if isinstance(store, int):
        return store
    began, counted, shown = time.monotonic(), {"users": 0, "samples": 0}, [0.0]

    def progress(done: int, users: int, samples: int) -> None:  # at most a line a second
        counted.update(users=done, samples=samples)
        elapsed = time.monotonic() - began
        if elapsed - shown[0] < 1 and done < users:
            return
        shown[0] = elapsed
        print(f"verify: {done:,} of {users:,} users, {samples:,} samples ({samples / max(elapsed, 1e-3):,.0f}/s, "
              f"ETA {elapsed / done * (users - done):.0f} s)", file=sys.stderr)

    try:
        found = []
        for problem in problems(store, progress):
            found.append(problem)
            if not arguments.json:
                print(problem.line, flush=True)
        if arguments.repair:
            for user in sorted({problem.user for problem in found}):
                repair(store, user, [problem for problem in found if problem.user == user])
            if found:
                print(f"verify: repaired: {sum(problem.uploader is not None for problem in found):,} digests to be computed "
                      f"again from the samples, {sum(problem.uploader is None for problem in found):,} days' totals merged "
                      "again", file=sys.stderr)
    finally:
        store.close()
    if arguments.json:
        print(json.dumps({**counted, "problems": [problem.line for problem in found]}))
    print(f"verify: {counted['users']:,} user{'' if counted['users'] == 1 else 's'}, {counted['samples']:,} samples: "
          f"{f'{len(found):,} problems' if found else 'every digest and daily total agrees with the samples'}", file=sys.stderr)
    return 1 if found else 0


def _admin_storage(command: str, arguments: argparse.Namespace, check: bool, existing: bool = False) -> Union[Store, int]:
    """The storage an admin command's --data/--database names, opened without a pool (`check`: SQLite's
    integrity check first; `existing`: one that holds no schema is an error, not made); or, after its
    one-line error, the exit code: 2 for a usage error, 1 when it cannot be opened."""
    try:
        data, database = storage_settings(arguments)
    except UsageError as error:
        print(f"{COMMAND} {command}: error: {error}", file=sys.stderr)
        return 2
    try:
        if existing:
            _must_exist(data, database)
        return open_storage(data, database, check=check, pool=False)
    except StartupError as error:
        print(f"{COMMAND} {command}: error: {error}", file=sys.stderr)
        return 1


def _must_exist(data: Path, database: Optional[str]) -> None:
    """StartupError unless the storage holds a server's schema (opening it would make one)."""
    if database is None:
        if not (data / FILE_NAME).is_file():
            raise StartupError(f"no database in {data} ({FILE_NAME} not found)")
        return
    import psycopg

    try:
        with psycopg.connect(database, connect_timeout=10) as connection:
            if connection.execute("SELECT to_regclass('stepsync_schema')").fetchone()[0] is None:
                raise StartupError("the database holds no stepsync schema (no table stepsync_schema)")
    except psycopg.Error as error:
        raise StartupError(f"cannot connect to the database: {str(error).splitlines()[0] if str(error) else type(error).__name__}") from None


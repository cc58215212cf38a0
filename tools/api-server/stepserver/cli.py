"""The entry point: `main.py [serve options]` runs the server; `main.py tokens …` manages tokens.

Exit codes: 0 ok (a requested stop included), 1 failure (data in use, cannot listen, …), 2 usage error.
"""

from __future__ import annotations

import argparse
import gc
import os
import signal
import socket
import sys
import threading
from typing import Any, Callable, Optional

from .dispatcher import ConnectionDispatcher
from .errors import StartupError
from .log import log
from .settings import Settings, UsageError, add_storage_arguments, is_loopback, parse_serve, storage_settings
from .storage.base import Storage


def open_storage(data, database: Optional[str], pool_size: int = 8, role: str = "alone") -> Storage:
    """role (the embedded backend): "alone", or with --workers "supervisor" (the parent) and "worker"."""
    if database:
        from .storage.postgres import PostgresStorage

        storage: Storage = PostgresStorage(database, pool_size)
    else:
        from .storage.embedded import EmbeddedStorage

        storage = EmbeddedStorage(data, role)
    storage.open()
    return storage


def main(argv: Optional[list[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv and argv[0] == "tokens":
            return tokens_command(argv[1:])
        settings = parse_serve(argv[1:] if argv and argv[0] == "serve" else argv)
    except UsageError as error:
        print(f"main.py: error: {error}", file=sys.stderr)
        return 2
    return serve(settings)


def serve(settings: Settings) -> int:
    from .server import listen_socket, pin_to_one_cpu, tune_malloc

    tune_malloc()
    if settings.pin_cpu and settings.workers == 1:  # before any thread starts (they inherit it)
        pin_to_one_cpu(os.getpid())
    try:
        storage = open_storage(settings.data, settings.database, settings.database_pool,
                               "supervisor" if settings.workers > 1 else "alone")
    except StartupError as error:
        log(f"error: {error}")
        return 1
    except Exception as error:  # noqa: BLE001 - one line, exit 1
        log(f"error: cannot open storage: {type(error).__name__}: {(str(error).splitlines() or [''])[0]}")
        return 1
    try:
        if not settings.single_user and not is_loopback(settings.host) and storage.tokens.count_active() == 0:
            log(f"error: refusing to listen on {settings.host} without tokens: create one with "
                "`main.py tokens create --user NAME` (same --data/--database) first")
            return 1
        try:
            sock = listen_socket(settings.host, settings.port)
        except OSError as error:
            log(f"error: cannot listen on {settings.host}:{settings.port}: {error.strerror or error}")
            return 1
        host, port = sock.getsockname()[:2]
        shown_host = f"[{host}]" if ":" in host else host
        mode = "single user, no tokens" if settings.single_user else "tokens required"
        workers = f", {settings.workers} workers" if settings.workers > 1 else ""
        line = f"api-server listening on http://{shown_host}:{port}, {storage.describe()}, {mode}{workers}"
        if settings.workers > 1:
            # Each worker opens its own (a pool must not cross a fork). The embedded backend's DIR/LOCK
            # stays held: its descriptor is kept open here and in every worker forked with it.
            lock_fd = storage.keep_lock_for_workers()
            storage.close()
            try:
                return serve_workers(settings, sock, line)
            finally:
                if lock_fd >= 0:
                    os.close(lock_fd)
        with sock:
            return run_app(settings, storage, host, port, sock=sock, line=line)
    finally:
        storage.close()


STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM}


def serve_workers(settings: Settings, sock, line: str) -> int:
    """Pre-forks settings.workers processes, each with its own storage (its own connection pool, its own
    index). The parent accepts on the port and hands each connection to a worker (over a Unix socket
    each: server.HandedServer), a user's to the same one and the users spread evenly (dispatcher.py),
    and supervises: a stop
    signal goes to every worker; a worker that exits on its own stops the others (exit 1). Workers die
    with the parent (PR_SET_PDEATHSIG)."""
    children: dict[int, int] = {}
    stopping = threading.Event()

    def stop_all(number: int, frame: Any) -> None:
        stopping.set()
        for pid in children:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    parent = os.getpid()
    pairs = [handing_channel() for _ in range(settings.workers)]
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)  # no handler of the parent's runs in a child
    try:
        for number in range(settings.workers):
            pid = os.fork()
            if pid == 0:
                code = 1
                try:
                    sock.close()  # only the supervisor accepts
                    for other, (ours, theirs) in enumerate(pairs):
                        ours.close()
                        if other != number:
                            theirs.close()
                    code = run_worker(settings, pairs[number][1], parent, number)
                except BaseException as error:  # noqa: BLE001 - a worker reports and exits
                    log(f"worker {os.getpid()}: {type(error).__name__}: {(str(error).splitlines() or [''])[0]}")
                finally:
                    os._exit(code)
            children[pid] = number
        for stop_signal in STOP_SIGNALS:
            signal.signal(stop_signal, stop_all)
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
    channels = [ours for ours, _ in pairs]
    for _, theirs in pairs:
        theirs.close()
    by_user = settings.worker_dispatch == "user"
    tokens = open_token_users(settings) if by_user else None  # opened after the forks: no connection crosses one
    dispatcher = ConnectionDispatcher(sock, channels, by_user, users=None if tokens is None else token_user(tokens))
    accepting = threading.Thread(target=dispatcher.run, args=(stopping,), name="accept", daemon=True)
    accepting.start()
    print(line, file=sys.stderr, flush=True)
    status = 0
    try:
        while children:
            pid, wait_status = os.wait()
            if pid not in children:
                continue
            del children[pid]
            code = os.waitstatus_to_exitcode(wait_status)
            if not stopping.is_set():
                log(f"worker {pid} exited ({code}); stopping the others")
                stop_all(signal.SIGTERM, None)
                status = 1
            elif code != 0:
                status = 1
    finally:
        stopping.set()
        accepting.join()
        sock.close()
        for channel in channels:
            channel.close()
        if tokens is not None:
            tokens.close()
    return status


TOKEN_LOOKUP_WAIT_S = 0.05  # the longest the supervisor's accept loop waits for a token lookup (SQLite's busy timeout)


def open_token_users(settings: Settings):
    """The embedded backend's token store, read-only, for dispatching by user (dispatcher.py); None
    for PostgreSQL (its workers are dispatched in turns unless told otherwise; then by token), with
    --single-user, or when it cannot be opened (then by token, logged)."""
    if settings.database or settings.single_user:
        return None
    from .storage.sqlite_tokens import SqliteTokenStore

    store = SqliteTokenStore(settings.data / "tokens.sqlite")
    try:
        store.open_read_only(TOKEN_LOOKUP_WAIT_S)
    except Exception as error:  # noqa: BLE001 - dispatching by token instead
        log(f"dispatching connections by token, not by user: cannot read {store.path}: {type(error).__name__}: "
            f"{(str(error).splitlines() or [''])[0]}")
        return None
    return store


def token_user(store) -> Callable[[bytes], Optional[str]]:
    """A token's hash -> its user (dispatcher.UserOf); None when unknown, revoked, or the store is busy
    past TOKEN_LOOKUP_WAIT_S (the connection then goes to the next worker, which decides)."""

    def user_of(digest: bytes) -> Optional[str]:
        try:
            found = store.lookup(digest)
        except Exception:  # noqa: BLE001 - e.g. "database is locked": dispatched in turn
            return None
        return None if found is None else found[0]

    return user_of


def handing_channel() -> tuple:
    """A connected pair of Unix sockets for handing descriptors: SOCK_SEQPACKET where there is one (Linux),
    else SOCK_STREAM (macOS), where HandedServer reads one byte, one descriptor, a message."""
    try:
        return socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    except (AttributeError, OSError):
        return socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)


def run_worker(settings: Settings, channel, parent: int, number: int) -> int:
    from .server import die_with_parent, pin_to_one_cpu

    die_with_parent(parent)
    if settings.pin_cpu:
        pin_to_one_cpu(number)  # a CPU of its own (with as many workers as CPUs)
    storage = open_storage(settings.data, settings.database, settings.database_pool, "worker")
    try:
        return run_app(settings, storage, settings.host, settings.port, channel=channel)
    finally:
        storage.close()
        channel.close()


def run_app(settings: Settings, storage: Storage, host: str, port: int, sock=None, channel=None,
            line: Optional[str] = None) -> int:
    """Serves the app on the listening `sock` (a process alone) or on the connections handed over
    `channel` (a worker) until a stop, then saves the daily buckets. `line`: printed once serving starts."""
    from .app import create_app
    from .server import make_server

    app = create_app(settings, storage)
    server = make_server(app, settings, host, port, channel=channel)

    # While serving, uvicorn handles SIGINT/SIGTERM itself (graceful shutdown); afterwards it restores
    # the previous handlers and re-raises the signal. These handlers cover the moments before and after:
    # a stop requested before serving starts makes uvicorn skip its main loop, and the re-raise is
    # absorbed so that a requested stop exits with status 0.
    def request_stop(number: int, frame: Any) -> None:
        server.should_exit = True

    for stop_signal in STOP_SIGNALS:
        signal.signal(stop_signal, request_stop)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)  # a worker is forked with them blocked
    if line is not None:
        print(line, file=sys.stderr, flush=True)
    # What start-up made (modules, the app, the storage's index) lives as long as the process: kept
    # out of the garbage collector's full collections, which otherwise traced it all again every
    # few hundred requests (gc.freeze).
    gc.freeze()
    server.run(sockets=None if sock is None else [sock])
    app.context.daily_buckets.save()  # no request runs any more
    return 0


def tokens_command(argv: list[str]) -> int:
    from .auth import new_token, now_text
    from .storage.embedded import USER_NAME_PATTERN, valid_user_name

    parser = argparse.ArgumentParser(prog="main.py tokens", description="Manage API tokens (shown once, stored as hashes).")
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
    try:
        data, database = storage_settings(arguments)
    except UsageError as error:
        print(f"main.py tokens: error: {error}", file=sys.stderr)
        return 2
    if arguments.command == "create" and not valid_user_name(arguments.user):
        print(f"main.py tokens: error: --user must match {USER_NAME_PATTERN}", file=sys.stderr)
        return 2
    try:
        tokens = open_token_store(data, database)
    except Exception as error:  # noqa: BLE001 - one line, exit 1
        print(f"main.py tokens: error: {type(error).__name__}: {(str(error).splitlines() or [''])[0]}", file=sys.stderr)
        return 1
    try:
        if arguments.command == "create":
            token_id, token, digest = new_token()
            tokens.add(token_id, arguments.user, digest, now_text())
            print(f"created {token_id} for user {arguments.user}; the token is shown only now:", file=sys.stderr)
            print(token)
            return 0
        if arguments.command == "list":
            for record in tokens.list():
                state = f"revoked {record.revoked_at}" if record.revoked_at else "active"
                print(f"{record.token_id}  {record.user}  created {record.created_at}  {state}")
            return 0
        if tokens.revoke(arguments.token_id, now_text()):
            print(f"revoked {arguments.token_id}", file=sys.stderr)
            return 0
        print(f"main.py tokens: error: no active token {arguments.token_id}", file=sys.stderr)
        return 1
    finally:
        tokens.close()


def open_token_store(data, database: Optional[str]):
    """The token store alone (the admin command runs beside a running server)."""
    if database:
        from .storage.postgres import PostgresTokenStore

        store = PostgresTokenStore.standalone(database)
    else:
        from .storage.sqlite_tokens import SqliteTokenStore

        store = SqliteTokenStore(data / "tokens.sqlite")
        store.open()
    return store

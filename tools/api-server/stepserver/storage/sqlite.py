"""The SQLite dialect: one file, DIR/stepsync.sqlite, through Python's sqlite3.

WAL with synchronous=FULL (a commit is durable when it returns), a busy timeout for the writers of
other processes (--workers), BEGIN IMMEDIATE for every write (the database's one write lock: writes
apply one after another), a small pool of connections for the request threads. A batch of new samples
with random ids dirties a page of the id index per sample: a larger page cache keeps the index in
memory, and checkpoints every ~40 MB of WAL write a page changed by many commits once. At open: the schema
migrated, then `PRAGMA integrity_check` (every page, every index against its table); damage found
there, or by any statement later, is one line naming what SQLite found: the server refuses to start,
or /health and every request say it while running.
"""

from __future__ import annotations

import os
import queue
import sqlite3
import threading
from contextlib import contextmanager
from itertools import chain
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

from ..errors import StartupError, StorageUnavailable
from ..log import log
from . import schema
from .writability import WritabilityProbe

FILE_NAME = "stepsync.sqlite"
BUSY_TIMEOUT_S = 30.0  # a writer waits this long for another process's transaction
POOL_SIZE = 4  # writes take turns anyway; reads are short
CACHE_KIB = 16 * 1024  # each connection's page cache, at most: the indexes of a large history stay in memory
CHECKPOINT_PAGES = 10_000  # the WAL is copied back into the file after about 40 MB, not SQLite's 4 MB
PARAMETERS_A_STATEMENT = 10_000  # SQLite's limit is 32,766 (SQLITE_MAX_VARIABLE_NUMBER)
TYPES = {"dialect": "sqlite", "blob": "BLOB", "request_seq": "CREATE TABLE request_seq (value BIGINT NOT NULL); INSERT INTO request_seq VALUES (0)"}
_DAMAGE = ("SQLITE_CORRUPT", "SQLITE_NOTADB")


class SqliteTransaction:
    """database.Transaction on one connection inside BEGIN … COMMIT."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self.connection = connection
        self.server_write = False

    def rows(self, sql: str, parameters: tuple = ()) -> list[tuple]:
        return self.connection.execute(sql, parameters).fetchall()

    def each(self, sql: str, parameters: tuple = ()) -> Iterator[tuple]:
        return iter(self.connection.execute(sql, parameters))

    def run(self, sql: str, parameters: tuple = ()) -> int:
        return self.connection.execute(sql, parameters).rowcount

    def run_many(self, sql: str, rows: list[tuple]) -> None:
        self.connection.executemany(sql, rows)

    def one_of(self, column: str, values: list) -> tuple[str, tuple]:
        return f"{column} IN ({','.join('?' * len(values))})", tuple(values)

    def insert(self, table: str, columns: str, rows: list[tuple]) -> None:
        """Multi-row INSERTs of up to PARAMETERS_A_STATEMENT values: one step of SQLite's for many rows
        (executemany steps once a row, taking the GIL back between rows). OR ROLLBACK: a row the
        table refuses ends the whole transaction, as any error of a write does here (and on
        PostgreSQL). With the default (ABORT) SQLite must be able to undo this one statement alone,
        so it first copies every page the statement changes to a statement journal, a temporary
        file: for a batch of random ids, a page of the id index a row, megabytes a request."""
        width = columns.count(",") + 1
        per_statement = PARAMETERS_A_STATEMENT // width
        for first in range(0, len(rows), per_statement):
            chunk = rows[first : first + per_statement]
            values = ", ".join([f"({', '.join('?' * width)})"] * len(chunk))
            self.connection.execute(f"INSERT OR ROLLBACK INTO {table} ({columns}) VALUES {values}", list(chain.from_iterable(chunk)))

    def replace(self, table: str, where: str, parameters: tuple, columns: str, rows: list[tuple]) -> None:
        self.connection.execute(f"DELETE FROM {table} WHERE {where}", parameters)
        if rows:
            self.insert(table, columns, rows)

    def lock_user(self, user: str, alone: bool) -> None:
        """Nothing more: BEGIN IMMEDIATE took the database's write lock."""

    def lock_days(self, user: str, days: list[tuple[int, int]]) -> None:
        """Nothing more: BEGIN IMMEDIATE took the database's write lock."""

    def locking(self) -> str:
        return ""

    def next_request(self) -> int:
        return self.connection.execute("UPDATE request_seq SET value = value + 1 RETURNING value").fetchone()[0]

    def mark_server_write(self) -> None:
        """A row in digest_writer until the commit (writes of every process take turns: one at a time)."""
        if not self.server_write:
            self.connection.execute("INSERT INTO digest_writer (active) VALUES (1)")
            self.server_write = True


class SqliteDatabase:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.path = directory / FILE_NAME
        self.probe = WritabilityProbe(directory)
        self.damage: Optional[str] = None
        self._pool: "queue.LifoQueue[sqlite3.Connection]" = queue.LifoQueue()
        self._connections: list[sqlite3.Connection] = []
        self._writer = threading.Lock()

    def describe(self) -> str:
        return f"data {self.path}"

    def open(self, migrate_extra: Optional[Callable[[SqliteTransaction], None]] = None, check: bool = True,
             rebuild_totals: Callable[[SqliteTransaction], None] = lambda tx: None,
             rebuild_digests: Callable[[SqliteTransaction], None] = lambda tx: None) -> int:
        """Creates or opens the file, migrates the schema (then runs migrate_extra in the same
        transaction when the file was new: the import of an earlier layout; rebuild_totals computes
        the daily totals after a migration from version 7 or earlier, rebuild_digests the digests after
        one from version 6), checks it. Returns the schema version found (0: a new file). StartupError
        with one line when it cannot."""
        if self.directory.exists() and not self.directory.is_dir():
            raise StartupError(f"--data {self.directory} is not a directory")
        if not self.directory.exists():
            self.directory.mkdir(parents=True, mode=0o700)  # the users' histories: their owner's only
        created = not self.path.exists()
        if created:
            os.close(os.open(self.path, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o600))  # tokens live here
        try:
            connection = self._connect()
            if check:
                self._check(connection)
            found = 0

            def work(tx: SqliteTransaction) -> None:
                nonlocal found
                found = schema.migrate(tx, TYPES, lambda: rebuild_totals(tx), lambda: rebuild_digests(tx))
                if found == 0 and migrate_extra is not None:
                    migrate_extra(tx)

            self._write_on(connection, work)
            if found not in (0, schema.VERSION):
                log(f"database schema migrated from version {found} to {schema.VERSION}")
        except sqlite3.DatabaseError as error:
            free = os.statvfs(self.directory)
            raise StartupError(f"cannot use {self.path}: {_first_line(error)} "
                               f"({free.f_bavail * free.f_frsize} bytes free on its filesystem)") from None
        for _ in range(POOL_SIZE - 1):
            self._pool.put(self._connect())
        self._pool.put(connection)
        return found

    def _connect(self) -> sqlite3.Connection:
        connection = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=BUSY_TIMEOUT_S)
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=FULL")
        connection.execute("PRAGMA cell_size_check=ON")
        connection.execute(f"PRAGMA cache_size=-{CACHE_KIB}")
        connection.execute(f"PRAGMA wal_autocheckpoint={CHECKPOINT_PAGES}")
        self._connections.append(connection)
        return connection

    def _check(self, connection: sqlite3.Connection) -> None:
        problems = [" ".join(row[0].replace("*** in database main ***", "").split())
                    for row in connection.execute("PRAGMA integrity_check(10)").fetchall()]
        if problems != ["ok"]:
            raise StartupError(f"{self.path} is damaged, refusing to serve it (PRAGMA integrity_check: "
                               f"{problems[0]}{f'; and {len(problems) - 1} more' if len(problems) > 1 else ''}); "
                               "restore it from a backup")

    def close(self) -> None:
        for connection in self._connections:
            connection.close()
        self._connections.clear()

    @contextmanager
    def _connection(self) -> Iterator[sqlite3.Connection]:
        connection = self._pool.get()
        try:
            yield connection
        finally:
            self._pool.put(connection)

    def write(self, work: Callable[[SqliteTransaction], Any]) -> Any:
        # One writer of this process at a time waits here, not in SQLite's busy handler (which sleeps
        # and polls); writers of other processes meet at SQLite's lock.
        with self._writer, self._connection() as connection:
            return self._write_on(connection, work)

    def _write_on(self, connection: sqlite3.Connection, work: Callable[[SqliteTransaction], Any]) -> Any:
        try:
            connection.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as error:
            raise self._unavailable(error) from None
        try:
            tx = SqliteTransaction(connection)
            result = work(tx)
            if tx.server_write:
                connection.execute("DELETE FROM digest_writer")
            connection.execute("COMMIT")
            return result
        except BaseException as error:
            if connection.in_transaction:
                connection.execute("ROLLBACK")
            if isinstance(error, sqlite3.DatabaseError):
                raise self._unavailable(error) from None
            raise

    def read(self, work: Callable[[SqliteTransaction], Any]) -> Any:
        with self._connection() as connection:
            try:
                connection.execute("BEGIN")
                try:
                    return work(SqliteTransaction(connection))
                finally:
                    connection.execute("ROLLBACK")
            except sqlite3.DatabaseError as error:
                raise self._unavailable(error) from None

    def _unavailable(self, error: sqlite3.DatabaseError) -> Exception:
        """The 503 for an error of the database: damage (kept, /health says it), a full or failing disk
        (the probe watches for its return), or a writer of another process holding on too long."""
        name = getattr(error, "sqlite_errorname", "")
        line = _first_line(error)
        if name.startswith(_DAMAGE):
            if self.damage is None:
                log(f"{self.path} is damaged: {line}")
                self.damage = f"the database is damaged ({line}): restore {self.path} from a backup"
            return StorageUnavailable(self.damage)
        if name.startswith(("SQLITE_FULL", "SQLITE_IOERR", "SQLITE_CANTOPEN", "SQLITE_READONLY")):
            reason = f"storage refuses writes ({line})"
            self.probe.failed(reason)
            return StorageUnavailable(f"{reason}; nothing of this request was stored, retry later")
        if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")):
            return StorageUnavailable("the database is busy; retry later")
        return error

    def health(self) -> Optional[str]:
        return self.damage or self.probe.status()


def _first_line(error: BaseException) -> str:
    return (str(error).splitlines() or [type(error).__name__])[0]

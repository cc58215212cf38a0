"""The PostgreSQL dialect (psycopg 3 and its pool): `--database postgresql://…`.

A request is one transaction on a pooled connection; writes run beside each other, one user's too
(store.py says how they meet: row locks, the primary key, advisory locks per user and day). Many new
rows go in by binary COPY; the statements whose answers are not read travel together in pipeline mode. An
operation that loses its connection (a restart, a failover) is retried on a fresh one until
RETRY_DEADLINE_S, then answered 503; a write is idempotent, so a retried COMMIT whose first outcome was
unknown changes nothing twice. An attempt waits for a pooled connection at most POOL_WAIT_S: the pool
gives up a connection it cannot open at once, and the next attempt asks it to open one again, so that
with a multi-host URL (`host=a,b … target_session_attrs=read-write`) a write that arrives during a
failover is answered within about a second of the standby taking writes. The schema is migrated at
open under an advisory lock (two servers starting at once), from the earlier server's schema too.
Damage: run the cluster with data checksums (`initdb -k`); a checksum failure is an error of the
statement that read the page, answered 503 and said by /health.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Iterator, Optional

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from ..errors import StartupError, StorageUnavailable
from ..log import log
from . import schema

RETRY_DEADLINE_S = 20.0
RETRY_FIRST_WAIT_S = 0.1
RETRY_MAX_WAIT_S = 1.0
KEY_RETRIES = 3  # a write refused by a key runs again at most this often: a race for a new id is over after one
POOL_WAIT_S = 1.0  # an attempt's wait for a pooled connection (the pool does not retry a failed connect)
CONNECT_TIMEOUT_S = 5
HEALTH_CACHE_S = 1.0
LOCK_SPACE = 0x5735  # the user's and the migration's advisory locks: (LOCK_SPACE, hashtext(user) or 0); a day's: (hashtext(user), day)
PIPELINED_ROWS = 100  # an insert of up to this many rows is one INSERT in the pipeline; more go by COPY
_COLUMN_TYPES: dict[str, dict[str, tuple[int, str]]] = {}  # table -> column -> (type oid, name) (PostgresTransaction._column_types)
TYPES = {"dialect": "postgres", "blob": "BYTEA", "request_seq": "CREATE SEQUENCE IF NOT EXISTS request_seq"}


class PostgresTransaction:
    """database.Transaction on a psycopg connection inside a transaction. A statement whose result is not
    read (a lock, a DELETE, an INSERT of a few rows, the COMMIT) is sent in pipeline mode and travels
    with the next one whose result is: a write waits for the database once per result it reads, not once
    per statement. COPY, which a pipeline cannot carry, ends the pipeline first."""

    def __init__(self, connection: psycopg.Connection) -> None:
        self.connection = connection
        self.cursor = connection.cursor()
        self._pipeline: Optional[Any] = None  # the context manager of the open pipeline

    def pipelined(self) -> None:
        if self._pipeline is None:
            self._pipeline = self.connection.pipeline()
            self._pipeline.__enter__()

    def end_pipeline(self, failed: bool = False) -> None:
        """Sends what is queued and waits for every answer (an error among them is raised: the
        statement's own, where psycopg reports the pipeline's abort it caused), unless `failed`: the
        transaction already failed, and nothing the pipeline says adds to that."""
        if self._pipeline is not None:
            pipeline, self._pipeline = self._pipeline, None
            try:
                pipeline.__exit__(None, None, None)
            except psycopg.errors.PipelineAborted as error:
                if not failed:
                    raise error.__context__ if isinstance(error.__context__, psycopg.Error) else error
            except psycopg.Error:
                if not failed:
                    raise

    # A statement whose answer is read gets a cursor of its own. In pipeline mode the answers of the
    # statements queued before it are handed to their cursor as they arrive, possibly after this
    # statement was sent: on the shared cursor such an answer (a DELETE's) would stand in for this
    # one's, and reading it fails ("the last operation didn't produce records"), as seen under load
    # after a database restart. psycopg's advice for pipelines is the same (psycopg#604).

    def rows(self, sql: str, parameters: tuple = ()) -> list[tuple]:
        return self.connection.execute(sql.replace("?", "%s"), parameters).fetchall()

    def each(self, sql: str, parameters: tuple = ()) -> Iterator[tuple]:
        return iter(self.connection.execute(sql.replace("?", "%s"), parameters))

    def run(self, sql: str, parameters: tuple = ()) -> int:
        self.end_pipeline()  # the count is the answer's
        return self.cursor.execute(sql.replace("?", "%s"), parameters).rowcount

    def run_many(self, sql: str, rows: list[tuple]) -> None:
        self.pipelined()
        self.cursor.executemany(sql.replace("?", "%s"), rows)

    def one_of(self, column: str, values: list) -> tuple[str, tuple]:
        """The list as a binary array (%b): in text, psycopg quotes and escapes it element by element
        in Python, about 7 times as long (0.79 ms against 0.11 for a write's 1,000 ids)."""
        return f"{column} = ANY(%b)", (list(values),)

    def insert(self, table: str, columns: str, rows: list[tuple]) -> None:
        """A few rows in the pipeline as one INSERT of a column array each (unnest: one statement text
        whatever the number of rows, so psycopg converts it once a process, not for every write, and the
        arrays go in binary); more rows by binary COPY, which ends the pipeline."""
        if not rows:
            return
        types = self._column_types(table, [name.strip() for name in columns.split(",")])
        if len(rows) <= PIPELINED_ROWS:
            self.pipelined()
            arrays = ", ".join(f"%b::{type_name}[]" for _, type_name in types)
            self.cursor.execute(f"INSERT INTO {table} ({columns}) SELECT * FROM unnest({arrays})",
                                [list(column) for column in zip(*rows)])
            return
        self.end_pipeline()
        with self.cursor.copy(f"COPY {table} ({columns}) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types([oid for oid, _ in types])
            for row in rows:
                copy.write_row(row)

    def _column_types(self, table: str, columns: list[str]) -> list[tuple[int, str]]:
        """The types (oid, name) of the table's columns, which a binary COPY and the arrays name: read
        from the catalog once a process, and again when a column is not known (a table of another schema
        version)."""
        types = _COLUMN_TYPES.get(table, {})
        if not all(column in types for column in columns):
            types = _COLUMN_TYPES[table] = {name: (oid, type_name) for name, oid, type_name in self.connection.execute(
                "SELECT attname, atttypid::int8, format_type(atttypid, NULL) FROM pg_attribute "
                "WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped", (table,)).fetchall()}
        return [types[column] for column in columns]

    def replace(self, table: str, where: str, parameters: tuple, columns: str, rows: list[tuple]) -> None:
        self.pipelined()
        self.cursor.execute(f"DELETE FROM {table} WHERE {where}".replace("?", "%s"), parameters)
        if rows:
            self.insert(table, columns, rows)

    def lock_user(self, user: str, alone: bool) -> None:
        lock = "pg_advisory_xact_lock" if alone else "pg_advisory_xact_lock_shared"
        self.pipelined()
        self.cursor.execute(f"SELECT {lock}(%s, hashtext(%s))", (LOCK_SPACE, user))

    def lock_days(self, user: str, days: list[tuple[int, int]]) -> None:
        numbers = [day for first, last in days for day in range(first, last + 1)]
        self.pipelined()
        self.cursor.execute("SELECT count(pg_advisory_xact_lock(hashtext(%s), day)) FROM unnest(%s::int4[]) AS day",
                            (user, numbers))

    def locking(self) -> str:
        return " FOR UPDATE"

    def next_request(self) -> int:
        return self.connection.execute("SELECT nextval('request_seq')").fetchone()[0]

    def mark_server_write(self) -> None:
        self.pipelined()
        self.cursor.execute("SET LOCAL stepsync.writer = 'server'")


def in_transaction(connection: psycopg.Connection, work: Callable[[PostgresTransaction], Any]) -> Any:
    """work(tx) in one transaction on the connection, committed (the COMMIT travels in the pipeline with
    the statements before it). Returns once the COMMIT was answered."""
    tx = PostgresTransaction(connection)
    try:
        with connection.transaction():
            result = work(tx)
        tx.end_pipeline()  # the COMMIT's answer: an error of a statement in the pipeline is raised here
    except BaseException:
        tx.end_pipeline(failed=True)
        if connection.info.transaction_status == psycopg.pq.TransactionStatus.INERROR:
            connection.rollback()  # the failed pipeline dropped the COMMIT or ROLLBACK queued in it
        raise
    return result


def _is_retried(error: BaseException) -> bool:
    """A lost connection, or a write that met another: a new id it sends was stored beside it first
    (the primary key: run again, the write finds that id stored; a key that refuses it again is no race,
    see KEY_RETRIES), or a deadlock of locks taken in another order (a day's and a row's)."""
    return isinstance(error, (psycopg.OperationalError, psycopg.errors.AdminShutdown, psycopg.errors.CannotConnectNow,
                              psycopg.errors.ReadOnlySqlTransaction, psycopg.errors.SerializationFailure,
                              psycopg.errors.DeadlockDetected, psycopg.errors.UniqueViolation, PoolTimeout))


class PostgresDatabase:
    def __init__(self, conninfo: str, pool_size: int = 8) -> None:
        self.conninfo = conninfo
        self.pool_size = pool_size
        self.pool: Optional[ConnectionPool] = None
        self._health_lock = threading.Lock()
        self._health: tuple[float, Optional[str]] = (0.0, None)
        self.damage: Optional[str] = None

    def describe(self) -> str:
        from psycopg.conninfo import conninfo_to_dict

        parts = conninfo_to_dict(self.conninfo)
        return f"database {parts.get('dbname', '?')} on {parts.get('host', 'localhost')}"

    def open(self, rebuild_totals: Callable[[PostgresTransaction], None], rebuild_digests: Callable[[PostgresTransaction], None],
             pool: bool = True) -> int:
        """Migrates the schema (rebuild_totals computes the daily totals after a migration from the
        earlier server, rebuild_digests the digests after one from version 6 or earlier) and opens
        the pool. Returns the version found."""
        try:
            with psycopg.connect(self.conninfo, connect_timeout=CONNECT_TIMEOUT_S) as connection:
                def migrate(tx: PostgresTransaction) -> int:
                    tx.run("SELECT pg_advisory_xact_lock(?, 0)", (LOCK_SPACE,))
                    return schema.migrate(tx, TYPES, lambda: rebuild_totals(tx), lambda: rebuild_digests(tx))

                found = in_transaction(connection, migrate)
                if found not in (0, schema.VERSION):
                    log(f"database schema migrated from version {found} to {schema.VERSION}")
                if connection.execute("SHOW data_checksums").fetchone()[0] != "on":
                    log("the database cluster runs without data checksums: damage to its pages goes unnoticed "
                        "(initdb -k, or pg_checksums --enable on a stopped cluster)")
        except psycopg.Error as error:
            raise StartupError(f"cannot use the database: {_first_line(error)}") from None
        if pool:
            self.pool = ConnectionPool(self.conninfo, min_size=1, max_size=self.pool_size, open=True, name="stepsync",
                                       kwargs={"connect_timeout": CONNECT_TIMEOUT_S}, timeout=RETRY_DEADLINE_S,
                                       reconnect_timeout=0)
            self._health_lock.acquire()
            self._probe()  # the first answer of /health is a real one
        return found

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()
            self.pool = None

    def write(self, work: Callable[[PostgresTransaction], Any]) -> Any:
        return self._retried(work)

    def read(self, work: Callable[[PostgresTransaction], Any]) -> Any:
        return self._retried(work)

    def _retried(self, work: Callable[[PostgresTransaction], Any]) -> Any:
        """Runs `work` in one transaction; retried on a fresh connection while the database is away."""
        if self.pool is None:  # the tokens command: one connection of its own
            with psycopg.connect(self.conninfo, connect_timeout=CONNECT_TIMEOUT_S) as connection:
                return in_transaction(connection, work)
        deadline = time.monotonic() + RETRY_DEADLINE_S
        wait = RETRY_FIRST_WAIT_S
        refusals = 0
        while True:
            try:
                with self.pool.connection(timeout=max(0.0, min(POOL_WAIT_S, deadline - time.monotonic()))) as connection:
                    return in_transaction(connection, work)
            except psycopg.errors.DataCorrupted as error:
                self.damage = f"the database is damaged ({_first_line(error)})"
                log(self.damage)
                raise StorageUnavailable(self.damage) from None
            except Exception as error:  # noqa: BLE001 - sorted below
                if not _is_retried(error):
                    raise
                if isinstance(error, psycopg.errors.UniqueViolation):
                    refusals += 1
                    if refusals > KEY_RETRIES:
                        raise
                if time.monotonic() + wait > deadline:
                    raise StorageUnavailable(f"database unavailable ({_first_line(error)}); retry later") from None
                time.sleep(wait)
                wait = min(wait * 2, RETRY_MAX_WAIT_S)

    def health(self) -> Optional[str]:
        if self.damage:
            return self.damage
        checked, failure = self._health
        if time.monotonic() - checked >= HEALTH_CACHE_S and self._health_lock.acquire(blocking=False):
            threading.Thread(target=self._probe, name="database-probe", daemon=True).start()
        return failure

    def _probe(self) -> None:
        try:
            try:
                with psycopg.connect(self.conninfo, connect_timeout=2, autocommit=True) as connection:
                    in_recovery = connection.execute("SELECT pg_is_in_recovery()").fetchone()[0]
                failure = "the database is a read-only standby" if in_recovery else None
            except psycopg.Error as error:
                failure = f"database unavailable ({_first_line(error)})"
            if failure != self._health[1]:
                log(failure or "database reachable again")
            self._health = (time.monotonic(), failure)
        finally:
            self._health_lock.release()


def _first_line(error: BaseException) -> str:
    return (str(error).splitlines() or [type(error).__name__])[0]

"""The PostgreSQL backend (psycopg 3 and its pool): `--database postgresql://…`.

Schema (migrated on start, versioned in stepsync_schema): every table is keyed by the user first, so a
cluster that distributes tables by user (Citus: distribute samples, sample_versions by user_name)
serves many users unchanged.
  samples          the current live version of each (user_name, id); a deletion removes the row
  sample_versions  every version replaced or deleted, with its seq; with the samples rows, every version
                   saved in the order received (GET /steps?versions=all)
  tokens           API tokens (hashes only)
  daily_buckets    the daily totals' buckets, saved when the server stops: a header and the sums (postgres_buckets.py)
  deletion_counts  per user, how many deletions committed (the saved buckets' state)
A save is one transaction. A batch of new ids (the usual upload) is one query: BEGIN, the request's
number, a COPY (text) of the samples into samples and COMMIT (_SAVE_FRESH); the primary key finds any
id already stored, and the save then runs the lookup path: the batch's stored ids are looked up and
locked, the new samples are sent with COPY, and the stored ids whose content differs take the new
version, the one they had going to sample_versions (_LOOKUP, _REPLACE).
Rows are locked in id order, so concurrent requests that share ids cannot deadlock. Every SQL statement
takes bound parameters only. An operation that loses its connection (a database restart) is retried
on a fresh one until RETRY_DEADLINE_S, then answered 503; saves and deletions are idempotent, so a
retried COMMIT whose first outcome was unknown changes nothing twice.
"""

from __future__ import annotations

import operator
import threading
import time
from itertools import repeat
from typing import Any, Callable, Iterator, Optional, TypeVar

import msgspec
import numpy as np
import psycopg
from psycopg import generators, pq
from psycopg_pool import ConnectionPool, PoolTimeout

from ..contract import (MAX_DURATION_SECONDS, MAX_SAMPLES_PER_REQUEST, SampleFields, StoredSample, bundle_of, count_of, device_of,
                        end_of, id_of, start_of)
from ..errors import StorageUnavailable
from ..log import log
from ..sample_columns import SampleColumns, instants_ns, whole_ms
from .base import DaySample, ForeignWrite, TokenRecord

RETRY_DEADLINE_S = 20.0
RETRY_FIRST_WAIT_S = 0.1
RETRY_MAX_WAIT_S = 1.0
CONNECT_TIMEOUT_S = 5
# seq = request number * this + position in the request (< MAX_SAMPLES_PER_REQUEST): a power of ten, so
# that a seq's text is the request number's followed by the position's in five digits (copy_data). Up
# to schema version 5's first servers it was 16,384: every request number since is greater, so every
# seq given since is greater than any given before (postgres_buckets.py relies on it).
ORDINALS_PER_REQUEST = 100_000
POSITION_DIGITS = 5
HEALTH_CACHE_S = 1.0

T = TypeVar("T")

MIGRATIONS: list[str] = [
    # 1: the first schema
    """
    CREATE TABLE tokens (
        id text PRIMARY KEY,
        user_name text NOT NULL,
        hash bytea NOT NULL UNIQUE,
        created_at text NOT NULL,
        revoked_at text
    );
    CREATE SEQUENCE request_seq;
    CREATE TABLE samples (
        user_name text NOT NULL,
        id text NOT NULL,
        seq bigint NOT NULL,
        start_date text NOT NULL,
        end_date text NOT NULL,
        start_ns bigint NOT NULL,
        end_ns bigint NOT NULL,
        count integer NOT NULL,
        source_bundle_id text NOT NULL,
        source_device_name text,
        received_at text NOT NULL,
        PRIMARY KEY (user_name, id)
    );
    CREATE INDEX samples_by_seq ON samples (user_name, seq);
    CREATE INDEX samples_by_start ON samples (user_name, start_ns);
    CREATE TABLE sample_versions (
        user_name text NOT NULL,
        seq bigint NOT NULL,
        id text NOT NULL,
        start_date text NOT NULL,
        end_date text NOT NULL,
        count integer NOT NULL,
        source_bundle_id text NOT NULL,
        source_device_name text,
        received_at text NOT NULL,
        PRIMARY KEY (user_name, seq)
    );
    """,
    # 2: the daily buckets kept between runs (postgres_buckets.py)
    """
    CREATE TABLE daily_buckets (
        user_name text PRIMARY KEY,
        data bytea NOT NULL
    );
    ALTER TABLE daily_buckets ALTER COLUMN data SET STORAGE EXTERNAL;  -- read whole at a start: not compressed
    """,
    # 3: deletions counted per user, for the saved buckets' state (postgres_buckets.py) without a count(*)
    """
    CREATE TABLE deletion_counts (
        user_name text PRIMARY KEY,
        deletions bigint NOT NULL
    );
    """,
    # 4: the daily buckets saved as a header and sums, so that a start reads only the days a query asks
    # for (postgres_buckets.py); buckets saved in the old layout are dropped (computed again from samples)
    """
    DELETE FROM daily_buckets;
    ALTER TABLE daily_buckets RENAME COLUMN data TO sums;
    ALTER TABLE daily_buckets ADD COLUMN saved_id bytea NOT NULL, ADD COLUMN header bytea NOT NULL;
    """,
    # 5: sample_versions keeps only the versions replaced or deleted; a live version is its samples row
    # (the same seq), and GET /steps?versions=all reads both. A third less to write for new samples (the
    # WAL of a 1,000-sample save). The saved buckets' state follows (postgres_buckets.py).
    """
    DELETE FROM sample_versions v USING samples s WHERE v.user_name = s.user_name AND v.seq = s.seq;
    """,
]

# Counts a deletion (in its transaction): a saved state of the daily buckets names the count.
_COUNT_DELETION = """INSERT INTO deletion_counts AS d (user_name, deletions) VALUES (%s, 1)
ON CONFLICT (user_name) DO UPDATE SET deletions = d.deletions + 1"""

# A save is one transaction of three round trips: _LOOKUP, a COPY of the new samples into samples,
# and the COMMIT; and one statement more (_REPLACE) only when some stored ids are sent with other
# content. _LOOKUP takes the request's seq base from the sequence and the batch's ids stored before,
# looked up by the primary key and locked (FOR UPDATE, in id order): a request beside it that replaced
# or deleted one of them meanwhile has committed when the lock is granted, and the row read is then
# the one it left (READ COMMITTED reads the newest version of a row it locks), so the version kept in
# sample_versions is exactly the one this save replaces. The new samples go in by COPY (binary) in id
# order: its multi-row heap insertion (and no staging table, no sort, no anti-join) cost the database
# 5.2-5.4 ms of CPU per 1,000 new samples instead of 6.2-6.3 for a COPY into a session's staging table
# and one INSERT … SELECT from it, and 370 KB of WAL instead of 418 (alternating, fsync on); the rows
# need no ON CONFLICT, whose speculative insertion cost every new row the most of a statement. A request
# beside it that stores one of the new ids after the lookup makes the COPY fail (a unique violation,
# nothing kept): the save runs again (PostgresStorage.save) and its lookup finds that id. Concurrent
# saves of the same new ids wait for each other in id order, so they cannot deadlock.
_LOOKUP = """
WITH base AS MATERIALIZED (SELECT nextval('request_seq') * %(per)s AS b),
existing AS MATERIALIZED (
    SELECT s.id, s.start_date, s.end_date, s.count, s.source_bundle_id, s.source_device_name
    FROM samples s
    WHERE s.user_name = %(user)s AND s.id = ANY(string_to_array(%(ids)s, ','))
    ORDER BY s.id
    FOR UPDATE
)
SELECT base.b, e.id, e.start_date, e.end_date, e.count, e.source_bundle_id, e.source_device_name
FROM base LEFT JOIN existing e ON true
"""
# The new samples go in as COPY text, built a column at a time (copy_data): it cost the database
# 3.8-4.1 ms of CPU per 1,000 samples instead of 4.95-5.15 ms for binary COPY rows written one by one
# (alternating, fsync on). The data is built before the request's number is known: each seq is a
# placeholder byte and the position's five digits, and the number's text replaces every placeholder
# in one pass (with_request).
_COPY_SAMPLES = ("COPY samples (user_name, received_at, id, start_date, end_date, start_ns, end_ns, count, "
                 "source_bundle_id, source_device_name, seq) FROM STDIN")

# A save whose ids are all new (the usual upload) needs no lookup: it is one transaction sent as one
# simple-protocol query string, the COPY's data between (_save_fresh), so one round trip and a half
# instead of five (BEGIN, _LOOKUP, the COPY's start and end, COMMIT), and none of _LOOKUP's 1,000
# index probes (0.6-0.7 ms of the database's CPU). The primary key checks that every id is new; if one
# is stored (a unique violation, nothing kept), the save runs the lookup path instead (see save).
_SAVE_FRESH = (f"BEGIN; SELECT nextval('request_seq') * {ORDINALS_PER_REQUEST}; {_COPY_SAMPLES}; COMMIT").encode()
COPY_CHUNK_BYTES = 1 << 20  # the COPY's data is queued to libpq at most this much at a time

# Stored ids (locked by _LOOKUP) that take a new version: the versions replaced go to sample_versions
# (every part of a statement reads the rows as they were when it began), then the rows are updated.
_REPLACE = """
WITH kept AS (
    INSERT INTO sample_versions (user_name, seq, id, start_date, end_date, count, source_bundle_id,
                                 source_device_name, received_at)
    SELECT user_name, seq, id, start_date, end_date, count, source_bundle_id, source_device_name, received_at
    FROM samples WHERE user_name = %(user)s AND id = ANY(%(ids)s::text[])
)
UPDATE samples s SET
    seq = n.seq, start_date = n.start_date, end_date = n.end_date, start_ns = n.start_ns, end_ns = n.end_ns,
    count = n.count, source_bundle_id = n.source_bundle_id, source_device_name = n.source_device_name,
    received_at = %(received)s
FROM unnest(%(ids)s::text[], %(seqs)s::int8[], %(starts)s::text[], %(ends)s::text[], %(starts_ns)s::int8[],
            %(ends_ns)s::int8[], %(counts)s::int4[], %(bundles)s::text[], %(devices)s::text[])
     AS n(id, seq, start_date, end_date, start_ns, end_ns, count, source_bundle_id, source_device_name)
WHERE s.user_name = %(user)s AND s.id = n.id
"""

# A deletion, one statement: the live versions removed go to sample_versions (the history keeps them).
_DELETE_IDS = """
WITH gone AS (
    DELETE FROM samples WHERE user_name = %(user)s AND id = ANY(%(ids)s::text[])
    RETURNING seq, id, start_date, end_date, count, source_bundle_id, source_device_name, received_at
),
kept AS (
    INSERT INTO sample_versions (user_name, seq, id, start_date, end_date, count, source_bundle_id,
                                 source_device_name, received_at)
    SELECT %(user)s, seq, id, start_date, end_date, count, source_bundle_id, source_device_name, received_at FROM gone
)
SELECT start_date, end_date FROM gone
"""

# Every version saved (GET /steps?versions=all), in the order received: those replaced or deleted
# (sample_versions) and the live ones (samples), merged by seq (both are indexed by user and seq).
_VERSIONS = """(SELECT seq, id, start_date, end_date, count, source_bundle_id, source_device_name, received_at
 FROM sample_versions WHERE user_name = %(user)s
 UNION ALL
 SELECT seq, id, start_date, end_date, count, source_bundle_id, source_device_name, received_at
 FROM samples WHERE user_name = %(user)s)"""
_COUNT_VERSIONS = ("SELECT (SELECT count(*) FROM sample_versions WHERE user_name = %(user)s) "
                   "+ (SELECT count(*) FROM samples WHERE user_name = %(user)s)")
_READ_VERSIONS = ("SELECT id, start_date, end_date, count, source_bundle_id, source_device_name, received_at FROM "
                  + _VERSIONS + " v ORDER BY seq LIMIT %(limit)s OFFSET %(offset)s")
_COUNT_LIVE = "SELECT count(*) FROM samples WHERE user_name = %(user)s"
_READ_LIVE = ("SELECT id, start_date, end_date, count, source_bundle_id, source_device_name, received_at "
              "FROM samples WHERE user_name = %(user)s ORDER BY seq LIMIT %(limit)s OFFSET %(offset)s")
CAUTIOUS_USERS = 10_000  # users remembered to have sent stored ids (then cleared, the cost of a COPY each)
SAVE_ATTEMPTS = 100  # a unique violation means a request beside it stored one of the ids: its next try sees it

_encode = msgspec.json.Encoder().encode
_content_of = operator.attrgetter("startDate", "endDate", "count", "sourceBundleId", "sourceDeviceName")  # as stored


def _text_column(texts: list[str]) -> list[bytes]:
    """COPY text fields (UTF-8; backslash, tab, newline, carriage return and the request number's
    placeholder escaped) of texts that hold no NUL (the contract's; PostgreSQL's text has none): one
    join, one encode, one split, in C."""
    joined = "\x00".join(texts).encode()
    if b"\\" in joined or b"\t" in joined or b"\n" in joined or b"\r" in joined or _PLACEHOLDER in joined:
        joined = (joined.replace(b"\\", b"\\\\").replace(b"\t", b"\\t").replace(b"\n", b"\\n")
                  .replace(b"\r", b"\\r").replace(_PLACEHOLDER, b"\\001"))
    fields = joined.split(b"\x00")
    if len(fields) != len(texts):
        raise ValueError("a text holds a NUL")
    return fields


_PLACEHOLDER = b"\x01"  # the request number, in copy_data
_POSITIONS = [b"%s%0*d" % (_PLACEHOLDER, POSITION_DIGITS, k) for k in range(MAX_SAMPLES_PER_REQUEST)]


def copy_data(user: str, received_at: str, picked: list[SampleFields], positions: list[int]) -> bytes:
    """The COPY text data (_COPY_SAMPLES) of these samples, in their order, at these positions in the
    request, the seqs waiting for the request's number (with_request). A few passes in C over all the
    texts at once, one over the numbers (one %-format: the instants' texts are the dates' milliseconds
    and six zeros when every date is read as digits, sample_columns.whole_ms), and one zip and join
    for the rows."""
    if not picked:
        return b""
    count = len(picked)
    starts = list(map(start_of, picked))
    ends = list(map(end_of, picked))
    counts = list(map(count_of, picked))
    millis = whole_ms(starts + ends)
    if millis is not None:
        numbers = np.column_stack((millis[:count], millis[count:], np.asarray(counts, dtype=np.int64))).ravel().tolist()
        pattern = "%d000000\t%d000000\t%d\n"
    else:
        instants = instants_ns(starts + ends)
        numbers = [n for triple in zip(instants[:count], instants[count:], counts) for n in triple]
        pattern = "%d\t%d\t%d\n"
    number_fields = ((pattern * count) % tuple(numbers)).encode().split(b"\n")
    # Ids and dates (ASCII: one join encodes fast), then the sources, few distinct: each encoded once.
    texts = _text_column([*map(id_of, picked), *starts, *ends, user, received_at])
    bundles = list(map(bundle_of, picked))
    devices = list(map(device_of, picked))
    rows = map(b"\t".join, zip(
        repeat(b"\t".join(texts[3 * count :]), count), texts[:count], texts[count : 2 * count],
        texts[2 * count : 3 * count], number_fields, map(_source_fields(bundles).__getitem__, bundles),
        map(_source_fields(devices).__getitem__, devices), map(_POSITIONS.__getitem__, positions)))
    return b"\n".join(rows) + b"\n"


def _source_fields(texts: list) -> dict:
    """Each distinct text (None or UNSET: NULL) -> its COPY field."""
    distinct = [text for text in set(texts) if text is not None and text is not msgspec.UNSET]
    fields = dict(zip(distinct, _text_column(distinct))) if distinct else {}
    fields[None] = fields[msgspec.UNSET] = b"\\N"
    return fields


def with_request(data: bytes, base: int) -> bytes:
    """copy_data's data with the seqs of the request whose first seq is `base`."""
    number, position = divmod(base, ORDINALS_PER_REQUEST)
    if position or number <= 0:
        raise ValueError(f"not a request's first seq: {base}")
    return data.replace(_PLACEHOLDER, str(number).encode())


def _raise_first_error(results: list, pgconn: Any) -> None:
    """Raises the first error among a query's results as psycopg would (its class by SQLSTATE)."""
    for result in results:
        if result.status == pq.ExecStatus.FATAL_ERROR:
            raise psycopg.errors.error_from_result(result, encoding=pgconn._encoding)  # type: ignore[attr-defined]
    if not results or results[-1].status not in (pq.ExecStatus.COMMAND_OK, pq.ExecStatus.TUPLES_OK, pq.ExecStatus.COPY_IN):
        raise psycopg.InterfaceError("unexpected results from the database")


def _is_connection_problem(error: BaseException) -> bool:
    return isinstance(error, (psycopg.OperationalError, psycopg.errors.AdminShutdown, psycopg.errors.CannotConnectNow,
                              psycopg.errors.ReadOnlySqlTransaction, psycopg.errors.SerializationFailure,
                              psycopg.errors.DeadlockDetected))


def migrate(connection: psycopg.Connection) -> int:
    """Brings the schema to the newest version under an advisory lock (two servers starting at once).
    Returns the version."""
    with connection.transaction():
        connection.execute("SELECT pg_advisory_xact_lock(%s)", (0x5735_5917,))
        connection.execute("CREATE TABLE IF NOT EXISTS stepsync_schema (version integer NOT NULL)")
        row = connection.execute("SELECT version FROM stepsync_schema").fetchone()
        version = row[0] if row else 0
        if row is None:
            connection.execute("INSERT INTO stepsync_schema (version) VALUES (0)")
        if version > len(MIGRATIONS):
            raise RuntimeError(f"the database's schema is version {version}, newer than this server's {len(MIGRATIONS)}")
        for number in range(version, len(MIGRATIONS)):
            connection.execute(MIGRATIONS[number])
            connection.execute("UPDATE stepsync_schema SET version = %s", (number + 1,))
            log(f"database schema migrated to version {number + 1}")
    return len(MIGRATIONS)


class PostgresStorage:
    def __init__(self, conninfo: str, pool_size: int = 8) -> None:
        self.conninfo = conninfo
        self.pool_size = pool_size
        self.pool: Optional[ConnectionPool] = None
        self.tokens = PostgresTokenStore(self._run, self._read)
        self._health_lock = threading.Lock()
        self._health: tuple[float, Optional[str]] = (0.0, None)
        # Users whose last save sent some stored ids: their next save looks the ids up first, instead
        # of trying _SAVE_FRESH (a batch sent again would fail its COPY and then take the lookup).
        self._cautious: set[str] = set()
        self.on_foreign: Optional[ForeignWrite] = None  # never called: every read asks the database

    def open(self) -> None:
        with psycopg.connect(self.conninfo, connect_timeout=CONNECT_TIMEOUT_S, autocommit=True) as connection:
            migrate(connection)
        self.pool = ConnectionPool(
            self.conninfo, min_size=1, max_size=self.pool_size, open=True, name="stepsync",
            kwargs={"connect_timeout": CONNECT_TIMEOUT_S, "autocommit": False},
            timeout=RETRY_DEADLINE_S, reconnect_timeout=0,
        )
        self._health_lock.acquire()
        self._probe()  # the first answer of /health is a real one

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()
            self.pool = None

    def describe(self) -> str:
        users, samples = self._run(lambda c: c.execute("SELECT count(DISTINCT user_name), count(*) FROM samples").fetchone())
        return f"database {self._where()} ({users} users, {samples} samples)"

    def _where(self) -> str:
        from psycopg.conninfo import conninfo_to_dict

        parts = conninfo_to_dict(self.conninfo)
        return f"{parts.get('dbname', '?')} on {parts.get('host', 'localhost')}"

    def _run(self, work: Callable[[psycopg.Connection], T]) -> T:
        """Runs `work` in one transaction; retried on a fresh connection while the database is away."""
        return self._retried(work, True)

    def _read(self, work: Callable[[psycopg.Connection], T]) -> T:
        """Runs `work`, one read-only statement, outside a transaction (autocommit): one round trip
        instead of BEGIN, the statement and COMMIT (the token lookup every request makes: 0.07-0.14 ms
        instead of 0.31 ms, measured alone). Retried as _run."""
        return self._retried(work, False)

    def _retried(self, work: Callable[[psycopg.Connection], T], transaction: Optional[bool]) -> T:
        """transaction True: `work` runs in a transaction; False: in autocommit; None: as it is (an idle
        connection, not in autocommit: `work` manages its own transaction, _save_fresh)."""
        assert self.pool is not None
        deadline = time.monotonic() + RETRY_DEADLINE_S
        wait = RETRY_FIRST_WAIT_S
        while True:
            try:
                with self.pool.connection() as connection:
                    if transaction is None:
                        return work(connection)
                    if not transaction:
                        connection.autocommit = True
                        try:
                            return work(connection)
                        finally:
                            # A broken connection stays as it is: the pool discards it.
                            if connection.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
                                connection.autocommit = False
                    with connection.transaction():
                        return work(connection)
            except Exception as error:  # noqa: BLE001 - sorted below
                if not (_is_connection_problem(error) or isinstance(error, PoolTimeout)):
                    raise
                if time.monotonic() + wait > deadline:
                    line = (str(error).splitlines() or [type(error).__name__])[0]
                    raise StorageUnavailable(f"database unavailable ({line}); retry later") from None
                time.sleep(wait)
                wait = min(wait * 2, RETRY_MAX_WAIT_S)

    def save(self, user: str, samples: list[SampleFields], received_at: str, replaced: Optional[list[str]] = None) -> int:
        # A repeated id keeps its first position and its last content (dict semantics).
        unique = list(dict(zip(map(id_of, samples), samples)).values())
        if not unique:
            return 0
        ids = list(map(id_of, unique))
        order = sorted(range(len(ids)), key=ids.__getitem__)  # id order (see _LOOKUP)
        if user not in self._cautious:
            data = copy_data(user, received_at, list(map(unique.__getitem__, order)), order)
            try:
                self._retried(lambda connection: self._save_fresh(connection, data), None)
                return len(unique)
            except psycopg.errors.UniqueViolation:  # some are stored: the lookup path says which
                if len(self._cautious) >= CAUTIOUS_USERS:
                    self._cautious.clear()
                self._cautious.add(user)
        # The ids as one text, split by the database: a contract id holds no comma (ID_PATTERN), and a
        # list of 1,000 texts cost the driver a pattern search each to dump as an array.
        joined = ",".join(ids)
        if joined.count(",") != len(ids) - 1:
            raise ValueError("a sample id holds a comma")
        lookup = {"per": ORDINALS_PER_REQUEST, "user": user, "ids": joined}

        def work(connection: psycopg.Connection) -> tuple[int, Optional[str], Optional[str]]:
            cursor = connection.cursor()
            rows = cursor.execute(_LOOKUP, lookup).fetchall()
            base = rows[0][0]
            stored = {row[1]: row[2:] for row in rows if row[1] is not None}
            if stored:
                fresh = [k for k in order if ids[k] not in stored]
                changed = [k for k, sample_id in enumerate(ids)
                           if sample_id in stored and stored[sample_id] != _content_of(unique[k])]
            else:  # every id new
                fresh, changed = order, []
            if fresh:
                data = copy_data(user, received_at, list(map(unique.__getitem__, fresh)), fresh)
                with cursor.copy(_COPY_SAMPLES) as copy:
                    copy.write(with_request(data, base))
            if changed:
                picked = [unique[k] for k in changed]
                both = instants_ns([*map(start_of, picked), *map(end_of, picked)])
                cursor.execute(_REPLACE, {
                    "user": user, "received": received_at, "ids": [ids[k] for k in changed],
                    "seqs": [base + k for k in changed], "starts": [sample.startDate for sample in picked],
                    "ends": [sample.endDate for sample in picked], "starts_ns": both[: len(picked)],
                    "ends_ns": both[len(picked) :], "counts": [sample.count for sample in picked],
                    "bundles": [sample.sourceBundleId for sample in picked],
                    "devices": [sample.sourceDeviceName for sample in picked]})
            if not stored:
                return len(fresh), None, None
            return (len(fresh) + len(changed), min(content[0] for content in stored.values()),
                    max(content[1] for content in stored.values()))

        for attempt in range(1, SAVE_ATTEMPTS + 1):
            try:
                saved, first, last = self._run(work)
                break
            except psycopg.errors.UniqueViolation:  # a new id stored beside it meanwhile (see _LOOKUP)
                if attempt == SAVE_ATTEMPTS:
                    raise
        if first is None:  # every id was new: the next save of the user tries without the lookup
            self._cautious.discard(user)
        if replaced is not None and first is not None:
            replaced += (first, last)
        return saved

    @staticmethod
    def _save_fresh(connection: psycopg.Connection, data: bytes) -> None:
        """_SAVE_FRESH on this connection (idle, outside a transaction): BEGIN, the seq base, the COPY of
        this data (copy_data, given the request's number) and COMMIT, sent as one query; returns once
        the COMMIT is durable. Any error leaves the connection idle (rolled back) or closed (the pool
        discards it)."""
        pgconn = connection.pgconn
        with connection.lock:
            try:
                pgconn.send_query(_SAVE_FRESH)
                results = connection.wait(generators.execute(pgconn))
                if not results or results[-1].status != pq.ExecStatus.COPY_IN or len(results) < 2:
                    _raise_first_error(results, pgconn)
                    raise psycopg.InterfaceError("the database did not start the COPY")
                base = int(results[-2].get_value(0, 0))
                data = memoryview(with_request(data, base))
                for offset in range(0, len(data), COPY_CHUNK_BYTES):
                    connection.wait(generators.copy_to(pgconn, data[offset : offset + COPY_CHUNK_BYTES]))
                while pgconn.put_copy_end(None) == 0:  # a full output buffer: wait until it drains
                    connection.wait(generators.send(pgconn))
                results = connection.wait(generators.execute(pgconn))
                _raise_first_error(results, pgconn)
            finally:
                if pgconn.status == pq.ConnStatus.OK and pgconn.transaction_status != pq.TransactionStatus.IDLE:
                    try:
                        if pgconn.transaction_status == pq.TransactionStatus.ACTIVE:  # still in the COPY
                            pgconn.put_copy_end(b"save abandoned")
                            connection.wait(generators.execute(pgconn))
                        pgconn.send_query(b"ROLLBACK")
                        connection.wait(generators.execute(pgconn))
                    except Exception:  # noqa: BLE001 - the error that brought us here is the one raised
                        connection.close()  # the pool discards it

    def delete_ids(self, user: str, ids: list[str], received_at: str, removed: Optional[list[str]] = None) -> int:
        unique = sorted(set(ids))

        def work(connection: psycopg.Connection) -> list[tuple]:
            rows = connection.execute(_DELETE_IDS, {"user": user, "ids": unique}).fetchall()
            if rows:
                connection.execute(_COUNT_DELETION, (user,))
            return rows

        rows = self._run(work)
        if removed is None:
            return len(rows)
        for start, end in rows:
            removed += (start, end)
        return len(rows)

    def delete_all(self, user: str) -> None:
        def work(connection: psycopg.Connection) -> None:
            connection.execute("DELETE FROM samples WHERE user_name = %s", (user,))
            connection.execute("DELETE FROM sample_versions WHERE user_name = %s", (user,))
            connection.execute(_COUNT_DELETION, (user,))

        self._run(work)

    def read(self, user: str, offset: int, limit: int, all_versions: bool) -> tuple[list[bytes], int]:
        count, page = (_COUNT_VERSIONS, _READ_VERSIONS) if all_versions else (_COUNT_LIVE, _READ_LIVE)
        parameters = {"user": user, "limit": limit, "offset": offset}

        def work(connection: psycopg.Connection) -> tuple[list[bytes], int]:
            total = connection.execute(count, parameters).fetchone()[0]
            if limit == 0 or offset >= total:
                return [], total
            rows = connection.execute(page, parameters).fetchall()
            return [_encode(StoredSample(*row)) for row in rows], total

        return self._run(work)

    def samples_between(self, user: str, start_ns: int, end_ns: int) -> Iterator[DaySample]:
        for row in self._rows_between(user, start_ns, end_ns):
            yield DaySample(*row)

    def sample_columns_between(self, user: str, start_ns: int, end_ns: int) -> SampleColumns:
        """samples_between as columns (the daily buckets)."""
        return SampleColumns.from_samples(self._rows_between(user, start_ns, end_ns))

    def latest_end_ns(self, user: str) -> Optional[int]:
        """A bound no live sample of the user ends after (ns): the greatest start (its index) plus the
        longest duration; None when the user has none."""
        latest = self._run(lambda c: c.execute("SELECT max(start_ns) FROM samples WHERE user_name = %s", (user,)).fetchone()[0])
        return None if latest is None else latest + MAX_DURATION_SECONDS * 1_000_000_000

    def refresh(self, user: str) -> None:
        """Nothing to apply: every read asks the database (other workers' writes included)."""

    def history_state(self, user: str) -> Optional[str]:
        """The greatest seq of the user's samples and the user's deletion count (postgres_buckets.py
        says why every write changes them)."""
        greatest, deletions = self._run(lambda c: c.execute(
            "SELECT (SELECT max(seq) FROM samples WHERE user_name = %s), "
            "(SELECT deletions FROM deletion_counts WHERE user_name = %s)", (user, user)).fetchone())
        return f"{greatest}:{deletions or 0}"

    def keep_lock_for_workers(self) -> int:
        """No lock: each worker opens its own pool on the database."""
        return -1

    def _rows_between(self, user: str, start_ns: int, end_ns: int) -> list[tuple]:
        # Every stored sample passed the contract (endDate - startDate <= 48 h), so one that reaches
        # start_ns began at most 48 hours before it: the index on start bounds the scan on both sides
        # (without the lower bound it read every earlier sample of the user).
        earliest = start_ns - MAX_DURATION_SECONDS * 1_000_000_000
        return self._run(lambda c: c.execute(
            "SELECT start_ns, end_ns, count, source_bundle_id, source_device_name FROM samples "
            "WHERE user_name = %s AND start_ns >= %s AND start_ns < %s AND end_ns >= %s",
            (user, earliest, end_ns, start_ns)).fetchall())

    def health(self) -> Optional[str]:
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
                failure = f"database unavailable ({(str(error).splitlines() or ['?'])[0]})"
            if failure != self._health[1]:
                log(failure or "database reachable again")
            self._health = (time.monotonic(), failure)
        finally:
            self._health_lock.release()


class PostgresTokenStore:
    def __init__(self, run: Callable[[Callable[[psycopg.Connection], Any]], Any],
                 read: Optional[Callable[[Callable[[psycopg.Connection], Any]], Any]] = None) -> None:
        self._run = run
        self._read = read or run  # a single read-only statement (lookup)
        self._connection: Optional[psycopg.Connection] = None

    @classmethod
    def standalone(cls, conninfo: str) -> "PostgresTokenStore":
        """For the admin command: its own connection, schema migrated first."""
        connection = psycopg.connect(conninfo, connect_timeout=CONNECT_TIMEOUT_S, autocommit=True)
        migrate(connection)

        def run(work: Callable[[psycopg.Connection], Any]) -> Any:
            with connection.transaction():
                return work(connection)

        store = cls(run)
        store._connection = connection
        return store

    def add(self, token_id: str, user: str, token_hash: bytes, created_at: str) -> None:
        self._run(lambda c: c.execute("INSERT INTO tokens (id, user_name, hash, created_at) VALUES (%s, %s, %s, %s)",
                                      (token_id, user, token_hash, created_at)))

    def lookup(self, token_hash: bytes) -> Optional[tuple[str, bytes]]:
        row = self._read(lambda c: c.execute("SELECT user_name, hash FROM tokens WHERE hash = %s AND revoked_at IS NULL",
                                             (token_hash,)).fetchone())
        return (row[0], bytes(row[1])) if row else None

    def list(self) -> list[TokenRecord]:
        rows = self._run(lambda c: c.execute("SELECT id, user_name, created_at, revoked_at FROM tokens ORDER BY created_at, id").fetchall())
        return [TokenRecord(*row) for row in rows]

    def revoke(self, token_id: str, revoked_at: str) -> bool:
        return self._run(lambda c: c.execute("UPDATE tokens SET revoked_at = %s WHERE id = %s AND revoked_at IS NULL",
                                             (revoked_at, token_id)).rowcount) == 1

    def count_active(self) -> int:
        return self._run(lambda c: c.execute("SELECT count(*) FROM tokens WHERE revoked_at IS NULL").fetchone()[0])

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

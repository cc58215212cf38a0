"""The database schema, described once for both dialects (SQLite and PostgreSQL), and its migrations.

Tables (every one keyed by the user first, so a cluster that distributes tables by user, as Citus
does, serves many users unchanged):
  samples          the live version of each (user_name, id); a deletion moves it to sample_versions
  sample_versions  the versions replaced or deleted, with their seq
  deletions        each deletion of a live version: the id, when, and its place in the history (seq)
  daily_totals     per user, UTC day and source: the merged and raw steps of docs/TOTALS.md for the
                   default priority, and the same per quarter hour of that day (JSON arrays of 96
                   integers), rewritten in the transaction of every write that changes that day; all
                   in thousandths of a step
  sample_digests   per user, uploader and UTC day of startDate: the count and the digest (sum mod
                   2^64 of content hashes, digests.py) of the live samples that uploader last wrote,
                   rewritten in the transaction of every write that changes them
  server_identity  the server's id: random, made with the database (a backup keeps it)
  tokens           API tokens (hashes only)
  stepsync_schema  the schema's version
samples.uploader and deletions.uploader name the client's store that last wrote the sample, or made
the deletion ('' before version 7, or for a client that does not say).
A seq orders the whole history of a user: request number * 100,000 + the sample's place in the
request. The request number comes from `request_seq` (PostgreSQL: a sequence; SQLite: a one-row
table, its writes serialized anyway). Instants are nanoseconds since 1970 UTC (start_ns, end_ns);
the texts are stored as sent. A count is kept in thousandths of a step (count_thousandths: the wire's
2741.7 is 2741700, its 42 is 42000), so a fractional count is exact and a whole one reads back the
integer it was.
"""

from __future__ import annotations

import uuid
from typing import Any, Callable

from ..daily_totals import DAY_NS

# The type of a step count in thousandths, in samples and in the daily totals (the wire's is contract.Count).
COUNT_TYPE = "BIGINT"
SEQ_PER_REQUEST = 100_000  # a request holds at most 10,000 samples
VERSION = 8  # PostgreSQL databases of the earlier server are at 1-5 (migrate_legacy)

# {blob} and {request_seq} are the two dialect differences (Dialect.types).
TABLES = """
CREATE TABLE tokens (
    id TEXT PRIMARY KEY,
    user_name TEXT NOT NULL,
    hash {blob} NOT NULL UNIQUE,
    created_at TEXT NOT NULL,
    revoked_at TEXT
);
{request_seq};
CREATE TABLE samples (
    user_name TEXT NOT NULL,
    id TEXT NOT NULL,
    seq BIGINT NOT NULL,
    start_date TEXT NOT NULL,
    end_date TEXT NOT NULL,
    start_ns BIGINT NOT NULL,
    end_ns BIGINT NOT NULL,
    count_thousandths {count} NOT NULL,
    source_bundle_id TEXT NOT NULL,
    source_device_name TEXT,
    received_at TEXT NOT NULL,
    PRIMARY KEY (user_name, id)
);
CREATE INDEX samples_by_seq ON samples (user_name, seq);
CREATE INDEX samples_by_start ON samples (user_name, start_ns);
CREATE TABLE sample_versions (
    user_name TEXT NOT NULL,
    seq BIGINT NOT NULL,
    id TEXT NOT NULL,
    start_date TEXT NOT NULL,
    end_date TEXT NOT NULL,
    count_thousandths {count} NOT NULL,
    source_bundle_id TEXT NOT NULL,
    source_device_name TEXT,
    received_at TEXT NOT NULL,
    PRIMARY KEY (user_name, seq)
);
"""

# Version 6: what the tables above lacked in the earlier server's PostgreSQL schema (version 5).
ADDED_IN_6 = """
CREATE TABLE deletions (
    user_name TEXT NOT NULL,
    seq BIGINT NOT NULL,
    id TEXT NOT NULL,
    received_at TEXT NOT NULL,
    PRIMARY KEY (user_name, seq)
);
CREATE TABLE daily_totals (
    user_name TEXT NOT NULL,
    day TEXT NOT NULL,
    source_bundle_id TEXT NOT NULL,
    source_device_name TEXT,
    merged {count} NOT NULL,
    raw {count} NOT NULL,
    merged_quarters TEXT NOT NULL,
    raw_quarters TEXT NOT NULL
);
CREATE INDEX daily_totals_by_day ON daily_totals (user_name, day);
"""

# Version 7: who wrote what, and the digests of what each uploader holds (docs/RECONCILE.md).
ADDED_IN_7 = """
ALTER TABLE samples ADD COLUMN uploader TEXT NOT NULL DEFAULT '';
ALTER TABLE deletions ADD COLUMN uploader TEXT NOT NULL DEFAULT '';
CREATE INDEX deletions_by_id ON deletions (user_name, id);
CREATE TABLE sample_digests (
    user_name TEXT NOT NULL,
    uploader TEXT NOT NULL,
    day BIGINT NOT NULL,
    count BIGINT NOT NULL,
    digest BIGINT NOT NULL,
    PRIMARY KEY (user_name, uploader, day)
);
CREATE TABLE server_identity (server_id TEXT NOT NULL);
CREATE TABLE digest_stale (
    user_name TEXT NOT NULL,
    uploader TEXT NOT NULL,
    day BIGINT NOT NULL,
    PRIMARY KEY (user_name, uploader, day)
);
CREATE TABLE digest_writer (active INTEGER NOT NULL)
"""

# Version 8: counts in thousandths of a step (fractional counts); the daily totals are rebuilt in them.
# A whole count's content hash is the same in thousandths (digests.py), so the digests stay as they are.
CHANGED_IN_8 = """
ALTER TABLE samples RENAME COLUMN count TO count_thousandths;
UPDATE samples SET count_thousandths = count_thousandths * 1000;
ALTER TABLE sample_versions RENAME COLUMN count TO count_thousandths;
UPDATE sample_versions SET count_thousandths = count_thousandths * 1000
"""

# A change to samples the server did not make (an operator's DELETE or UPDATE, a script) marks the
# digests it touched stale (digest_stale), so that they are computed again from the samples before
# they are read; the server's own writes keep the digests themselves (storage/store.py) and mark
# their transaction: SQLite with a row in digest_writer, PostgreSQL with the setting stepsync.writer.
_STALE_SQLITE = """
CREATE TRIGGER samples_digest_stale_insert AFTER INSERT ON samples WHEN NOT EXISTS (SELECT 1 FROM digest_writer) BEGIN
    INSERT INTO digest_stale VALUES (NEW.user_name, NEW.uploader, NEW.start_ns / {day_ns}) ON CONFLICT DO NOTHING;
END

CREATE TRIGGER samples_digest_stale_update AFTER UPDATE ON samples WHEN NOT EXISTS (SELECT 1 FROM digest_writer) BEGIN
    INSERT INTO digest_stale VALUES (OLD.user_name, OLD.uploader, OLD.start_ns / {day_ns}) ON CONFLICT DO NOTHING;
    INSERT INTO digest_stale VALUES (NEW.user_name, NEW.uploader, NEW.start_ns / {day_ns}) ON CONFLICT DO NOTHING;
END

CREATE TRIGGER samples_digest_stale_delete AFTER DELETE ON samples WHEN NOT EXISTS (SELECT 1 FROM digest_writer) BEGIN
    INSERT INTO digest_stale VALUES (OLD.user_name, OLD.uploader, OLD.start_ns / {day_ns}) ON CONFLICT DO NOTHING;
END
"""
_STALE_POSTGRES = """
CREATE FUNCTION samples_digest_stale() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        INSERT INTO digest_stale VALUES (OLD.user_name, OLD.uploader, OLD.start_ns / {day_ns}) ON CONFLICT DO NOTHING;
    END IF;
    IF TG_OP <> 'DELETE' THEN
        INSERT INTO digest_stale VALUES (NEW.user_name, NEW.uploader, NEW.start_ns / {day_ns}) ON CONFLICT DO NOTHING;
    END IF;
    RETURN NULL;
END $$

CREATE TRIGGER samples_digest_stale AFTER INSERT OR UPDATE OR DELETE ON samples FOR EACH ROW
    WHEN (current_setting('stepsync.writer', true) IS DISTINCT FROM 'server') EXECUTE FUNCTION samples_digest_stale()
"""
DIGEST_TRIGGERS = {"sqlite": _STALE_SQLITE, "postgres": _STALE_POSTGRES}

# The earlier server's PostgreSQL tables that version 6 no longer has (its own daily buckets).
DROPPED_IN_6 = "DROP TABLE IF EXISTS daily_buckets; DROP TABLE IF EXISTS deletion_counts;"


def statements(script: str, types: dict[str, str]) -> list[str]:
    """A script's statements, with the dialect's types filled in."""
    return [part.strip() for part in script.format(count=COUNT_TYPE, **types).split(";") if part.strip()]


def trigger_statements(dialect: str) -> list[str]:
    """The dialect's digest triggers (their bodies hold statements: they are apart by blank lines)."""
    return [part.strip() for part in DIGEST_TRIGGERS[dialect].format(day_ns=DAY_NS).split("\n\n") if part.strip()]


def migrate(tx: Any, types: dict[str, str], rebuild_totals: Callable[[], None], rebuild_digests: Callable[[], None]) -> int:
    """Brings the schema to VERSION inside the caller's transaction `tx` (a database.Transaction, which
    holds the database's write lock or, PostgreSQL, an advisory lock); `rebuild_totals` computes
    daily_totals from samples (after a migration from version 7 or earlier), `rebuild_digests` the
    sample_digests (after a migration from version 6 or earlier). Returns the version found."""
    execute = tx.run
    execute("CREATE TABLE IF NOT EXISTS stepsync_schema (version INTEGER NOT NULL)")
    rows = tx.rows("SELECT version FROM stepsync_schema")
    found = rows[0][0] if rows else 0
    if found > VERSION:
        raise RuntimeError(f"the database's schema is version {found}, newer than this server's {VERSION}")
    if found == VERSION:
        return found
    if found == 0:
        for statement in statements(TABLES + ADDED_IN_6 + ADDED_IN_7, types) + trigger_statements(types["dialect"]):
            execute(statement)
        tx.run("INSERT INTO server_identity (server_id) VALUES (?)", (str(uuid.uuid4()).upper(),))
        execute(f"INSERT INTO stepsync_schema (version) VALUES ({VERSION})")
        return found
    if found < 6:
        # The earlier server's PostgreSQL schema (1-5): its tables are these but for version 6's.
        execute("DELETE FROM sample_versions v USING samples s WHERE v.user_name = s.user_name AND v.seq = s.seq")
        for statement in statements(DROPPED_IN_6 + ADDED_IN_6, types):
            execute(statement)
    if found < 7:
        for statement in statements(ADDED_IN_7, types) + trigger_statements(types["dialect"]):
            execute(statement)
        tx.run("INSERT INTO server_identity (server_id) VALUES (?)", (str(uuid.uuid4()).upper(),))
    tx.mark_server_write()  # the scaling below changes no sample's content hash: no day is stale
    for statement in statements(CHANGED_IN_8, types):
        execute(statement)
    rebuild_totals()
    if found < 7:
        rebuild_digests()
    execute(f"UPDATE stepsync_schema SET version = {VERSION}")
    return found

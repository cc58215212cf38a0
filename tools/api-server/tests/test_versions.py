"""GET /steps?versions=all on every backend: every version saved, in the order received, whether it is
live, replaced or deleted (the live versions are the samples rows, sample_versions holds those
replaced or deleted); concurrent replacements keep each version once; a PostgreSQL database of the
earlier server (schema version 5) is migrated with its history, and its daily totals computed."""

from __future__ import annotations

import json
import sqlite3
import threading

import psycopg
import pytest

from conftest import make_sample, strip_received


def versions(server) -> list[dict]:
    return [strip_received(record) for record in server.all_samples(versions="all")]


def test_the_history_lists_every_version_in_the_order_received(server):
    a1, b1, c1 = make_sample(1, prefix="a"), make_sample(2, prefix="b"), make_sample(3, prefix="c")
    a2 = {**a1, "count": a1["count"] + 1}
    b2 = {**b1, "count": b1["count"] + 5}
    assert server.post([a1, b1, c1]).json()["saved"] == 3
    assert server.post([a2, c1]).json()["saved"] == 1  # c1 again: not a new version
    assert server.delete_ids([b1["id"]]).json()["deleted"] == 1
    assert server.post([b2]).json()["saved"] == 1  # live again, a new version
    assert server.post([a1]).json()["saved"] == 1  # back to the first content: a new version too
    expected = [a1, b1, c1, a2, b2, a1]
    assert versions(server) == expected
    assert server.total(versions="all") == 6
    # Pages of the history follow the same order (the PostgreSQL backend merges its two tables by seq).
    pages = [strip_received(record) for offset in range(0, 6, 4)
             for record in server.get(versions="all", offset=offset, limit=4).json()["samples"]]
    assert pages == expected
    assert [strip_received(record) for record in server.all_samples()] == [c1, b2, a1]
    server.restart()
    assert versions(server) == expected
    server.delete()
    assert server.total(versions="all") == 0


@pytest.mark.parametrize("user", [f"user{round}" for round in range(6)])
def test_concurrent_replacements_keep_each_version_once(store, user):
    """Eight threads give the same ids new content at once: each write applies whole, after the last —
    the live version is the one with the highest seq (a write's seq is taken once it holds its rows:
    taken before, a write that waited for another's rows got the lower seq yet was applied after it).
    Six rounds, as the race shows in a few percent of them."""
    from stepserver.contract import parse_samples

    def body(count: int) -> bytes:
        return json.dumps({"samples": [make_sample(n, count=count) for n in range(50)]}).encode()

    store.save(user, parse_samples(body(0), 2_000_000_000 * 10**9), "2026-01-01T00:00:00Z")
    barrier = threading.Barrier(8)

    def replace(count: int) -> None:
        samples = parse_samples(body(count), 2_000_000_000 * 10**9)
        barrier.wait(timeout=30)
        assert store.save(user, samples, "2026-01-01T00:00:01Z") == 50

    threads = [threading.Thread(target=replace, args=(count,)) for count in range(1, 9)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    samples, total = store.read(user, 0, 1000, True)
    assert total == 9 * 50
    by_id: dict = {}
    for sample in samples:
        by_id.setdefault(sample.id, []).append(sample.count)
    assert all(sorted(counts) == list(range(9)) and counts[0] == 0 for counts in by_id.values())
    live, _ = store.read(user, 0, 1000, False)
    assert all(sample.count == by_id[sample.id][-1] for sample in live)


# The earlier server's PostgreSQL schema, version 5 (its migrations 1-5 in one), with a history.
LEGACY = """
CREATE TABLE stepsync_schema (version integer NOT NULL); INSERT INTO stepsync_schema VALUES (5);
CREATE TABLE tokens (id text PRIMARY KEY, user_name text NOT NULL, hash bytea NOT NULL UNIQUE, created_at text NOT NULL, revoked_at text);
CREATE SEQUENCE request_seq;
CREATE TABLE samples (user_name text NOT NULL, id text NOT NULL, seq bigint NOT NULL, start_date text NOT NULL,
    end_date text NOT NULL, start_ns bigint NOT NULL, end_ns bigint NOT NULL, count integer NOT NULL,
    source_bundle_id text NOT NULL, source_device_name text, received_at text NOT NULL, PRIMARY KEY (user_name, id));
CREATE INDEX samples_by_seq ON samples (user_name, seq);
CREATE INDEX samples_by_start ON samples (user_name, start_ns);
CREATE TABLE sample_versions (user_name text NOT NULL, seq bigint NOT NULL, id text NOT NULL, start_date text NOT NULL,
    end_date text NOT NULL, count integer NOT NULL, source_bundle_id text NOT NULL, source_device_name text,
    received_at text NOT NULL, PRIMARY KEY (user_name, seq));
CREATE TABLE daily_buckets (user_name text PRIMARY KEY, sums bytea NOT NULL, saved_id bytea NOT NULL, header bytea NOT NULL);
CREATE TABLE deletion_counts (user_name text PRIMARY KEY, deletions bigint NOT NULL);
SELECT setval('request_seq', 3);
INSERT INTO samples VALUES
    ('alice', 'a', 300001, '2024-01-01T10:00:00Z', '2024-01-01T10:10:00Z', 1704103200000000000, 1704103800000000000, 70,
     'com.apple.health.x', 'iPhone', '2024-01-02T00:00:00Z'),
    ('alice', 'b', 200000, '2024-01-01T10:05:00Z', '2024-01-01T10:10:00Z', 1704103500000000000, 1704103800000000000, 60,
     'com.apple.health.y', 'Apple Watch', '2024-01-02T00:00:00Z');
INSERT INTO sample_versions VALUES
    ('alice', 100000, 'a', '2024-01-01T10:00:00Z', '2024-01-01T10:10:00Z', 100, 'com.apple.health.x', 'iPhone', '2024-01-01T00:00:00Z'),
    ('alice', 100001, 'c', '2024-01-01T11:00:00Z', '2024-01-01T11:10:00Z', 5, 'com.apple.health.x', 'iPhone', '2024-01-01T00:00:00Z');
INSERT INTO daily_buckets VALUES ('alice', '', '', '');
"""


def test_postgres_database_of_the_earlier_server_is_migrated(tmp_path, postgres_cluster, capfd):
    from conftest import ServerProcess

    database = postgres_cluster.new_database()
    with psycopg.connect(database, autocommit=True) as connection:
        connection.execute(LEGACY)
    server = ServerProcess(tmp_path, database=database).start()  # (its token's creation migrates)
    try:
        assert "database schema migrated from version 5 to 8" in capfd.readouterr().err
        assert [(r["id"], r["count"]) for r in server.all_samples(versions="all")] == [("a", 100), ("c", 5), ("b", 60), ("a", 70)]
        day = server.session.get(server.url + "/steps/daily", params={"from": "2024-01-01", "to": "2024-01-01"},
                                 timeout=30).json()["days"][0]
        assert day == {"date": "2024-01-01", "merged": 35 + 60, "raw": 130}  # the Watch wins 10:05-10:10
        assert server.post([make_sample(1)]).json()["saved"] == 1  # seqs go on after the earlier ones
        assert server.all_samples(versions="all")[-1]["id"] == make_sample(1)["id"]
    finally:
        server.finish()
    with psycopg.connect(database) as connection:
        tables = {row[0] for row in connection.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}
    assert "daily_buckets" not in tables and "deletion_counts" not in tables and "daily_totals" in tables


# A database of schema version 7 (counts in whole steps, in a column named count) made from one of
# version 8 by the inverse of the migration: the server migrates it back, the samples and their history
# read as they were written, the daily totals are rebuilt, the digests kept under version 7 still match
# (a whole count hashes as before) and no day is marked stale, and fractional counts go in beside.
TO_VERSION_7 = [
    "ALTER TABLE samples RENAME COLUMN count_thousandths TO count",
    "UPDATE samples SET count = count / 1000",
    "ALTER TABLE sample_versions RENAME COLUMN count_thousandths TO count",
    "UPDATE sample_versions SET count = count / 1000",
    "DELETE FROM daily_totals",
    "DELETE FROM digest_stale",  # the updates above were not the server's: undo the days they marked
    "UPDATE stepsync_schema SET version = 7",
]
KEPT_DIGESTS = "SELECT user_name, uploader, day, count, digest FROM sample_digests ORDER BY user_name, uploader, day"


def run_sql(server, backend: str, statements: list[str]) -> list:
    """The rows of the last statement, run on the stopped server's database."""
    if backend == "sqlite":
        with sqlite3.connect(server.sqlite_path()) as connection:
            return [connection.execute(statement) for statement in statements][-1].fetchall()
    with psycopg.connect(server.database) as connection:
        return [connection.execute(statement) for statement in statements][-1].fetchall()


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_database_of_version_7_keeps_its_whole_counts_and_digests_and_takes_fractional_ones(tmp_path, request, backend):
    from conftest import _server
    from stepserver import digests

    server = _server(tmp_path, backend, request).start()
    try:
        first = [make_sample(n, count=100 + n) for n in range(3)]
        assert server.post(first).json()["saved"] == 3
        assert server.post([make_sample(0, count=7)]).json()["saved"] == 1  # a replaced version too
        before = server.all_samples(versions="all")
        day = first[0]["startDate"][:10]
        totals = daily(server, day)
        assert totals["merged"] > 0
        server.stop()
        kept = run_sql(server, backend, TO_VERSION_7 + [KEPT_DIGESTS])
        assert len(kept) == 1
        server.start()
        assert "database schema migrated from version 7 to 8" in server.stderr()
        assert server.all_samples(versions="all") == before
        assert daily(server, day) == totals
        server.stop()
        assert run_sql(server, backend, [KEPT_DIGESTS]) == kept
        assert run_sql(server, backend, ["SELECT count(*) FROM digest_stale"]) == [(0,)]
        rows = run_sql(server, backend, ["SELECT id, start_ns, end_ns, count_thousandths, source_bundle_id, "
                                         "source_device_name FROM samples"])
        assert digests.to_signed(sum(digests.content_hash(*row) for row in rows)) == kept[0][4]
        server.start()
        fractional = make_sample(9, count=2741.7)
        assert server.post([fractional]).json()["saved"] == 1
        assert server.all_samples()[-1]["count"] == 2741.7
        assert [sample["count"] for sample in server.all_samples()][:3] == [101, 102, 7]  # integers, as sent
    finally:
        server.finish()


def daily(server, day: str) -> dict:
    answer = server.session.get(server.url + "/steps/daily", params={"from": day, "to": day}, timeout=30)
    assert answer.status_code == 200, answer.text
    return answer.json()["days"][0]

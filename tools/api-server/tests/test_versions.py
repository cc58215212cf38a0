"""GET /steps?versions=all on both backends: every version saved, in the order received, whether it is
live, replaced or deleted. On PostgreSQL the live versions are the samples rows and sample_versions
holds only those replaced or deleted (schema version 5): the history read from the two, the migration
from version 4, and the saved daily buckets' state (postgres_buckets.py), which must change with every
write that changes totals, a save of new samples only included."""

from __future__ import annotations

import json

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


def _pg_sample(n: int, count: int = 10, start: str = "2024-01-01T12:00:00Z", end: str = "2024-01-01T12:10:00Z"):
    from stepserver.contract import SampleFields

    return SampleFields(id=f"x{n}", startDate=start, endDate=end, count=count, sourceBundleId="b", sourceDeviceName=None)


def test_postgres_history_keeps_only_versions_replaced_or_deleted(pg_storage):
    """A save of new samples writes no history row; a replacement moves the version it replaces there,
    a deletion the version it deletes; the history read is every version."""
    def history_rows() -> list[tuple]:
        return pg_storage._run(lambda c: c.execute(
            "SELECT id, count FROM sample_versions WHERE user_name = 'alice' ORDER BY seq").fetchall())

    assert pg_storage.save("alice", [_pg_sample(n) for n in range(5)], "2024-01-20T15:00:00Z") == 5
    assert history_rows() == []
    assert pg_storage.save("alice", [_pg_sample(1, 11), _pg_sample(2), _pg_sample(5)], "2024-01-20T15:00:01Z") == 2
    assert history_rows() == [("x1", 10)]
    assert pg_storage.delete_ids("alice", ["x3", "x9"], "2024-01-20T15:00:02Z") == 1
    assert history_rows() == [("x1", 10), ("x3", 10)]
    lines, total = pg_storage.read("alice", 0, 100, True)
    assert total == 7
    assert [(json.loads(line)["id"], json.loads(line)["count"]) for line in lines] == \
        [("x0", 10), ("x1", 10), ("x2", 10), ("x3", 10), ("x4", 10), ("x1", 11), ("x5", 10)]


def test_postgres_bucket_state_changes_with_every_write_that_changes_totals(pg_storage):
    """The saved buckets are used only while the state is the one saved with them: a save of new
    samples only, a replacement, a deletion, DELETE /steps each change it (a state that missed one would
    serve a saved bucket as current after it); an identical save or a deletion of unknown ids does not."""
    from stepserver.storage.postgres_buckets import PostgresBucketStore

    buckets = PostgresBucketStore(pg_storage)
    seen = [buckets.state("alice")]

    def changed() -> bool:
        state = buckets.state("alice")
        new = state not in seen
        seen.append(state)
        return new

    assert pg_storage.save("alice", [_pg_sample(n) for n in range(3)], "2024-01-20T15:00:00Z") == 3
    assert changed(), "a save of new samples only"
    assert pg_storage.save("alice", [_pg_sample(n) for n in range(3)], "2024-01-20T15:00:01Z") == 0
    assert not changed(), "an identical save"
    assert pg_storage.save("alice", [_pg_sample(3)], "2024-01-20T15:00:02Z") == 1
    assert changed(), "another save of a new sample only"
    assert pg_storage.save("alice", [_pg_sample(1, 99)], "2024-01-20T15:00:03Z") == 1
    assert changed(), "a replacement"
    assert pg_storage.delete_ids("alice", ["x3"], "2024-01-20T15:00:04Z") == 1
    assert changed(), "a deletion of the newest sample"
    assert pg_storage.save("alice", [_pg_sample(4)], "2024-01-20T15:00:05Z") == 1
    assert changed(), "a save of a new sample after a deletion"
    assert pg_storage.delete_ids("alice", ["unknown"], "2024-01-20T15:00:06Z") == 0
    assert not changed(), "a deletion of an unknown id"
    pg_storage.delete_all("alice")
    assert changed(), "DELETE /steps"
    assert pg_storage.save("alice", [_pg_sample(0)], "2024-01-20T15:00:07Z") == 1
    assert changed(), "a save into an emptied account"
    assert buckets.state("bob") == "None:0"


def test_postgres_migration_to_version_5_keeps_the_history_and_the_saved_state(postgres_cluster):
    """A database written by schema version 4 (every version in sample_versions, live ones too) reads
    the same history after the migration, and a buckets state saved then still matches when nothing
    was written since and its newest version is live."""
    import psycopg

    from stepserver.storage.postgres import MIGRATIONS, PostgresStorage
    from stepserver.storage.postgres_buckets import PostgresBucketStore

    url = postgres_cluster.new_database()
    rows = [("x1", 16384, 5), ("x2", 16385, 6), ("x1", 32768, 7), ("x3", 49152, 8), ("x3", 65536, 9)]
    live = {"x1": 32768, "x2": 16385}  # x3 deleted after its second version
    with psycopg.connect(url) as connection:
        connection.execute("CREATE TABLE stepsync_schema (version integer NOT NULL)")
        for migration in MIGRATIONS[:4]:
            connection.execute(migration)
        connection.execute("INSERT INTO stepsync_schema (version) VALUES (4)")
        for sample_id, seq, count in rows:
            connection.execute("INSERT INTO sample_versions VALUES ('alice', %s, %s, '2024-01-01T12:00:00Z', "
                               "'2024-01-01T12:10:00Z', %s, 'b', NULL, '2024-01-20T15:00:00Z')", (seq, sample_id, count))
            if live.get(sample_id) == seq:
                connection.execute("INSERT INTO samples VALUES ('alice', %s, %s, '2024-01-01T12:00:00Z', "
                                   "'2024-01-01T12:10:00Z', 0, 0, %s, 'b', NULL, '2024-01-20T15:00:00Z')",
                                   (sample_id, seq, count))
        connection.execute("INSERT INTO deletion_counts VALUES ('alice', 1)")
        for table in ("sample_versions", "samples"):  # bob: one version, live
            connection.execute(f"INSERT INTO {table} (user_name, seq, id, start_date, end_date, count, source_bundle_id, "
                               "received_at" + (", start_ns, end_ns" if table == "samples" else "") + ") VALUES ('bob', "
                               "81920, 'y1', '2024-01-01T12:00:00Z', '2024-01-01T12:10:00Z', 3, 'b', "
                               "'2024-01-20T15:00:00Z'" + (", 0, 0" if table == "samples" else "") + ")")
        old_states = {user: "{}:{}".format(*connection.execute(
            "SELECT max(seq), (SELECT deletions FROM deletion_counts WHERE user_name = %s) FROM sample_versions "
            "WHERE user_name = %s", (user, user)).fetchone()).replace(":None", ":0") for user in ("alice", "bob")}
    storage = PostgresStorage(url, pool_size=1)
    storage.open()
    try:
        lines, total = storage.read("alice", 0, 100, True)
        assert total == 5
        assert [(json.loads(line)["id"], json.loads(line)["count"]) for line in lines] == \
            [(sample_id, count) for sample_id, _, count in rows]
        assert storage._run(lambda c: c.execute("SELECT count(*) FROM sample_versions").fetchone()[0]) == 3
        # bob's newest version is live: his saved buckets are still current. alice's newest (x3) was
        # deleted: her state differs from the one saved (the buckets are computed again, never wrong).
        assert PostgresBucketStore(storage).state("bob") == old_states["bob"] == "81920:0"
        assert PostgresBucketStore(storage).state("alice") == "32768:1" != old_states["alice"] == "65536:1"
        assert storage.delete_ids("alice", ["x2"], "2024-01-20T15:00:01Z") == 1
        lines, total = storage.read("alice", 0, 100, True)
        assert total == 5 and [json.loads(line)["count"] for line in lines] == [5, 6, 7, 8, 9]
    finally:
        storage.close()


def test_postgres_concurrent_replacements_keep_each_version_once(pg_storage):
    """Saves beside each other replacing the same ids: the version each one replaces is the one it
    found locked (the newest committed; a stale one would collide with the
    version already kept, by seq, and the save run again), so the history holds every version written once."""
    import threading

    barrier = threading.Barrier(2)
    written = [0, 0]

    def worker(lane: int) -> None:
        barrier.wait(timeout=30)
        for round_ in range(15):
            batch = [_pg_sample(n, count=1000 * lane + round_) for n in range(40)]
            written[lane] += pg_storage.save("alice", batch, f"2024-01-20T15:00:{round_:02d}Z")

    threads = [threading.Thread(target=worker, args=(lane,)) for lane in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    lines, total = pg_storage.read("alice", 0, 10_000, True)
    assert total == sum(written) == len(lines)
    chains: dict[str, list[int]] = {}
    for line in lines:
        record = json.loads(line)
        chains.setdefault(record["id"], []).append(record["count"])
    # Each id's versions in order: no two equal neighbours (a version is written only when it differs).
    assert all(all(a != b for a, b in zip(chain, chain[1:])) for chain in chains.values())
    live = {json.loads(line)["id"]: json.loads(line)["count"] for line in pg_storage.read("alice", 0, 100, False)[0]}
    assert live == {sample_id: chain[-1] for sample_id, chain in chains.items()}

"""The PostgreSQL backend's save paths (storage/postgres.py): a batch of new ids goes in as one query
(_SAVE_FRESH: BEGIN, the seq base, a COPY in text format and COMMIT) without looking its ids up; a
batch with stored ids fails that COPY on the primary key (nothing kept) and takes the lookup path,
and the user's next saves look up first until one finds every id new. Both give the same results,
and the text COPY keeps every character of the texts."""

from __future__ import annotations

import json
import threading

import pytest

from stepserver.contract import SampleFields

RECEIVED = "2024-01-20T15:00:00.000000Z"

# Characters the COPY text format escapes, its NULL marker and end-of-data line, and non-ASCII text.
AWKWARD = ["tab\there", "back\\slash", "new\nline", "carriage\rreturn", "\\N", "\\.", "a\\tb", "Anna\u2019s\u00a0iPhone",
           "\u5c0f\u660e \U0001f3c3", "", "start\x01of heading", "\\001"]


def sample(n: int, count: int = 10, device=None, bundle: str = "com.apple.health", prefix: str = "x") -> SampleFields:
    return SampleFields(id=f"{prefix}{n:04d}", startDate=f"2024-01-01T12:{n % 60:02d}:00Z",
                        endDate=f"2024-01-01T12:{n % 60:02d}:30+00:00", count=count, sourceBundleId=bundle,
                        sourceDeviceName=device)


def live(storage, user: str = "alice") -> list[dict]:
    lines, total = storage.read(user, 0, 10_000, False)
    assert total == len(lines)
    return [json.loads(line) for line in lines]


def rows(storage, user: str = "alice") -> list[tuple]:
    return storage._run(lambda c: c.execute(
        "SELECT id, seq, start_ns, end_ns, count, source_bundle_id, source_device_name, received_at FROM samples "
        "WHERE user_name = %s ORDER BY seq", (user,)).fetchall())


def test_copy_rows_escape_every_awkward_text(pg_storage):
    """Bundle ids and device names with tabs, backslashes, newlines, carriage returns, a NULL marker's
    or an end-of-data line's text: stored and read back exactly, by both paths; an absent name is NULL."""
    batch = [sample(n, device=name, bundle=f"b.{name}") for n, name in enumerate(AWKWARD)]
    batch.append(sample(len(AWKWARD), device=None))
    assert pg_storage.save("alice", batch, RECEIVED) == len(batch)  # the fresh path
    assert "alice" not in pg_storage._cautious
    stored = live(pg_storage)
    assert [(record["sourceBundleId"], record["sourceDeviceName"]) for record in stored] == \
        [(s.sourceBundleId, s.sourceDeviceName) for s in batch]
    assert "sourceDeviceName" in stored[-1] and stored[-1]["sourceDeviceName"] is None
    # The same batch again: the fresh path's COPY fails on the first stored id, the lookup path finds
    # every one identical (the texts compared as stored): nothing written.
    assert pg_storage.save("alice", batch, RECEIVED) == 0
    assert "alice" in pg_storage._cautious
    # The lookup path's COPY escapes the same way.
    more = [sample(n + 100, device=name, bundle=name or "b") for n, name in enumerate(AWKWARD)]
    assert pg_storage.save("alice", more, RECEIVED) == len(more)
    assert [(r["sourceBundleId"], r["sourceDeviceName"]) for r in live(pg_storage)[len(batch):]] == \
        [(s.sourceBundleId, s.sourceDeviceName) for s in more]


def test_both_paths_store_the_same_rows(pg_storage):
    """The seq of each sample is the request's base plus its place in the request (its first place for
    a repeated id, whose last content wins), start_ns and end_ns are its instants, received_at the
    request's: the same whichever path saved it."""
    from stepserver.contract import instant_ns

    batch = [sample(n, count=n) for n in (5, 3, 9, 1)] + [sample(3, count=33)]
    assert pg_storage.save("alice", batch, RECEIVED) == 4
    assert "alice" not in pg_storage._cautious
    pg_storage._cautious.add("bob")  # bob's save takes the lookup path
    assert pg_storage.save("bob", batch, RECEIVED) == 4
    assert "bob" not in pg_storage._cautious  # every id was new: his next save tries the fresh path
    alice, bob = rows(pg_storage, "alice"), rows(pg_storage, "bob")
    assert [row[0] for row in alice] == ["x0005", "x0003", "x0009", "x0001"]
    assert [row[4] for row in alice] == [5, 33, 9, 1]
    for row, expected in zip(alice, [batch[0], batch[4], batch[2], batch[3]]):
        assert row[2:4] == (instant_ns(expected.startDate), instant_ns(expected.endDate))
        assert row[5:] == ("com.apple.health", None, RECEIVED)
    base = alice[0][1]
    assert [row[1] - base for row in alice] == [0, 1, 2, 3]
    assert [row[:1] + row[2:] for row in alice] == [row[:1] + row[2:] for row in bob]
    assert [row[1] - bob[0][1] for row in bob] == [0, 1, 2, 3]


def test_a_batch_with_stored_ids_takes_the_lookup_path(pg_storage):
    """New, identical, changed and repeated ids in one batch: counted, replaced and kept in the history
    as without the fresh path; the user looks up first until a save finds every id new."""
    assert pg_storage.save("alice", [sample(n) for n in range(4)], RECEIVED) == 4
    replaced: list[str] = []
    mixed = [sample(1), sample(2, count=20), sample(4), sample(5), sample(5, count=50)]
    assert pg_storage.save("alice", mixed, "2024-01-20T15:00:01.000000Z", replaced) == 3  # x0002 changed, x0004 and x0005 new
    assert replaced and "alice" in pg_storage._cautious
    assert {(r["id"], r["count"]) for r in live(pg_storage)} == \
        {("x0000", 10), ("x0001", 10), ("x0002", 20), ("x0003", 10), ("x0004", 10), ("x0005", 50)}
    history = pg_storage._run(lambda c: c.execute("SELECT id, count FROM sample_versions").fetchall())
    assert history == [("x0002", 10)]
    assert pg_storage.save("alice", [sample(n) for n in range(10, 13)], RECEIVED) == 3  # looked up: all new
    assert "alice" not in pg_storage._cautious
    assert pg_storage.save("alice", [sample(n) for n in range(13, 15)], RECEIVED) == 2  # the fresh path again
    assert len(live(pg_storage)) == 11
    # A failed fresh try leaves nothing behind: the pool's connections are idle and usable.
    assert pg_storage.save("alice", [sample(14), sample(15)], RECEIVED) == 1
    assert pg_storage._run(lambda c: c.execute("SELECT count(*) FROM samples").fetchone()[0]) == 12


def test_concurrent_fresh_saves_of_the_same_ids_store_each_once(pg_storage):
    """Two saves of the same new ids at once, both trying the fresh path: one stores them, the other's
    COPY waits for it and then fails on the primary key, and its lookup finds them stored."""
    batch = [sample(n, prefix="c") for n in range(500)]
    results: list[int] = []
    barrier = threading.Barrier(2)

    def save() -> None:
        barrier.wait()
        results.append(pg_storage.save("alice", list(batch), RECEIVED))

    threads = [threading.Thread(target=save) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == [0, 500]
    assert len(live(pg_storage)) == 500


def test_seqs_stay_greater_than_those_given_before(pg_storage):
    """A seq is the request number times ORDINALS_PER_REQUEST (100,000; 16,384 before) plus the position:
    a save after rows numbered the old way gives greater seqs, and its seqs' texts are the request
    number's followed by the position's five digits."""
    from stepserver.storage.postgres import ORDINALS_PER_REQUEST

    pg_storage._run(lambda c: c.execute(
        "INSERT INTO samples VALUES ('alice', 'old', %s, '2024-01-01T12:00:00Z', '2024-01-01T12:00:30Z', 1, 2, 3, 'b', "
        "NULL, %s)", (40 * 16384 + 9_999, RECEIVED)))
    pg_storage._run(lambda c: c.execute("SELECT setval('request_seq', 40)"))
    assert pg_storage.save("alice", [sample(n) for n in range(3)], RECEIVED) == 3
    pg_storage._cautious.add("alice")
    assert pg_storage.save("alice", [sample(n) for n in range(2, 6)], RECEIVED) == 3  # the lookup path
    seqs = [row[1] for row in rows(pg_storage)]
    assert seqs == [40 * 16384 + 9_999, 41 * ORDINALS_PER_REQUEST, 41 * ORDINALS_PER_REQUEST + 1,
                    41 * ORDINALS_PER_REQUEST + 2, 42 * ORDINALS_PER_REQUEST + 1, 42 * ORDINALS_PER_REQUEST + 2,
                    42 * ORDINALS_PER_REQUEST + 3]


def test_a_save_abandoned_in_its_copy_keeps_nothing_and_the_connection_works(pg_storage, monkeypatch):
    """An error after the query started (here the data's last step) ends the COPY, rolls back, and
    leaves the pool's connection usable."""
    from stepserver.storage import postgres

    def broken(data: bytes, base: int) -> bytes:
        raise ValueError("broken on purpose")

    monkeypatch.setattr(postgres, "with_request", broken)
    with pytest.raises(ValueError, match="broken on purpose"):
        pg_storage.save("alice", [sample(n) for n in range(3)], RECEIVED)
    monkeypatch.undo()
    assert live(pg_storage) == []
    for _ in range(3):  # every connection of the pool (2) is idle and works
        assert pg_storage._run(lambda c: c.execute("SELECT 1").fetchone()[0]) == 1
    assert pg_storage.save("alice", [sample(n) for n in range(3)], RECEIVED) == 3
    assert len(live(pg_storage)) == 3


def test_dates_read_as_digits_match_the_contract():
    """sample_columns.instants_ms and whole_ms (the COPY data's instants) agree with contract.instant_ns
    on every form the contract takes: whole seconds or milliseconds (what stepsync sends) read as
    digits, in UTC or with an offset; other fractions through the contract's parser (instants_ms) or
    not at all (whole_ms: None, the COPY data then takes contract.instants)."""
    import random

    from stepserver.contract import instant_ns
    from stepserver.sample_columns import instants_ms, whole_ms

    rng = random.Random(28)

    def text() -> str:
        day = f"{rng.randint(2000, 2030):04d}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
        time_of_day = f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}"
        fraction = rng.choice(["", "", f".{rng.randint(0, 999):03d}", ".5", ".123456", f".{rng.randint(0, 10**9 - 1):09d}"])
        return f"{day}T{time_of_day}{fraction}{rng.choice(['Z', 'Z', '+02:00', '-05:30', '+14:00', '-00:00'])}"

    for _ in range(300):
        texts = [text() for _ in range(rng.randint(1, 40))]
        expected = [instant_ns(t) // 1_000_000 for t in texts]
        assert instants_ms(texts).tolist() == expected, texts
        whole = whole_ms(texts)
        if whole is not None:
            assert [m * 1_000_000 for m in whole.tolist()] == [instant_ns(t) for t in texts], texts
    for zones in (["Z"], [".123Z"], [".123Z", "Z"], ["+02:00", ".250-05:30"]):  # these always read as digits
        texts = [f"2024-03-0{1 + k % 9}T1{k % 10}:0{k % 10}:1{k % 10}{zones[k % len(zones)]}" for k in range(100)]
        whole = whole_ms(texts)
        assert whole is not None and [m * 1_000_000 for m in whole.tolist()] == [instant_ns(t) for t in texts]
    assert whole_ms(["2024-03-01T10:00:00.5Z"]) is None

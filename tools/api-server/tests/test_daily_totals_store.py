"""The daily totals a write keeps (storage/store.py: the write's own samples from memory, every other
live sample of the days it touches read back) equal the totals rebuilt from the samples alone, after
seeded writes of every kind: batches that reach over months, samples crossing midnight or of the
longest duration, repeated ids in a body, changed and identical re-posts, deletions by id, and writes
that meet the samples of earlier ones in the same quarter hours. In process, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import random
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from stepserver import contract  # noqa: E402

SOURCES = [("com.apple.health.A1", "iPhone"), ("com.apple.health.B2", "Apple Watch"), ("com.example.app", None),
           ("com.apple.health.C3", "iPhone")]
BASE_MS = int(datetime(2025, 1, 1, tzinfo=timezone.utc).timestamp() * 1000)
DAY_MS = 86_400_000


def text(ms: int) -> str:
    seconds, rest = divmod(ms, 1000)
    return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S") + f".{rest:03d}Z"


def stored_rows(store, user: str) -> list[tuple]:
    return store.database.read(lambda tx: sorted(tuple(row) for row in tx.rows(
        "SELECT day, source_bundle_id, coalesce(source_device_name, ''), merged, raw, merged_quarters, raw_quarters "
        "FROM daily_totals WHERE user_name = ?", (user,))))


def rebuilt_rows(store, user: str) -> list[tuple]:
    store.database.write(lambda tx: store.rebuild_daily_totals(tx, user))
    return stored_rows(store, user)


@pytest.mark.parametrize("seed", range(3))
def test_the_totals_a_write_keeps_equal_a_rebuild_from_the_samples(store, seed):
    rng = random.Random(seed)
    ids: list[str] = []

    def sample(span_days: int) -> dict:
        if ids and rng.random() < 0.25:
            sample_id = rng.choice(ids)  # a change, or (same draw again) an identical re-post
        else:
            sample_id = f"s{len(ids)}-{rng.randrange(10**6)}"
            ids.append(sample_id)
        start = BASE_MS + rng.randrange(0, span_days * DAY_MS, 250)
        end = start + rng.choice([0, rng.randrange(1, 900_000), rng.randrange(1, 6) * 3_600_000, 48 * 3_600_000])
        bundle, device = rng.choice(SOURCES)
        return {"id": sample_id, "startDate": text(start), "endDate": text(end), "count": rng.randrange(0, 2000) if rng.random() < 0.7 else rng.randrange(0, 2_000_000) / 1000,
                "sourceBundleId": bundle, "sourceDeviceName": device}  # a third with up to three decimals

    def save(batch: list[dict]) -> None:
        body = json.dumps({"samples": batch}).encode()
        store.save("alice", contract.parse_samples(body, time.time_ns()), "2026-01-01T00:00:00Z")

    save([sample(3) for _ in range(300)])  # one dense stretch of days: later writes meet these
    assert stored_rows(store, "alice") and stored_rows(store, "alice") == rebuilt_rows(store, "alice")
    for step in range(14):
        kind = step % 4
        if kind == 0:
            batch = [sample(120) for _ in range(rng.choice([40, 150]))]  # over four months: several reads
        elif kind == 1:
            batch = [sample(3) for _ in range(rng.choice([1, 10, 60]))]
            batch += [dict(batch[0])] if batch else []  # a repeated id in one body
        elif kind == 2:
            store.delete_ids("alice", rng.sample(ids, min(20, len(ids))), "2026-01-01T00:00:00Z")
            batch = []
        else:
            batch = [sample(3) for _ in range(5)]
            save(batch)  # the same body twice: the second writes nothing
        if batch:
            save(batch)
        assert stored_rows(store, "alice") == rebuilt_rows(store, "alice"), f"step {step}"
    # Two runs of days in one body, one sample of no duration at the very start of the second.
    save([{**sample(1), "startDate": text(BASE_MS + 40 * DAY_MS), "endDate": text(BASE_MS + 40 * DAY_MS)},
          {**sample(1), "startDate": text(BASE_MS + 5 * DAY_MS - 1000), "endDate": text(BASE_MS + 5 * DAY_MS + 1000)}])
    assert stored_rows(store, "alice") == rebuilt_rows(store, "alice")
    store.save("bob", contract.parse_samples(json.dumps({"samples": [sample(3)]}).encode(), time.time_ns()), "x")
    assert stored_rows(store, "alice") == rebuilt_rows(store, "alice")

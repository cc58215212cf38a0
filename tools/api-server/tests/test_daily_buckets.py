"""The daily buckets on their own (stepserver/daily_buckets.py), over an in-memory store: the rows they
sum equal the full merge (totals.daily_totals, itself checked against TOTALS.md's reference in
test_daily.py) in zones whose offsets are quarter and half hours, across DST days, after seeded writes
and deletions, whether the days were computed by a read or by the worker; a computation that read
before a write keeps nothing; days that do not start on a quarter hour are left to the full merge.
Through the API on both backends: test_daily.py (every answer against a fresh merge) and
test_daily_agreement's end-to-end comparison with `stepsync daily`."""

from __future__ import annotations

import random
import sys
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from stepserver import totals  # noqa: E402
from stepserver.contract import SampleFields  # noqa: E402
from stepserver.daily_buckets import DAY_MS, DailyBuckets  # noqa: E402
from stepserver.storage.base import DaySample  # noqa: E402

SOURCES = [("com.apple.health.A1", "Apple Watch"), ("com.apple.health.B2", "iPhone"), ("com.example.pedometer", "iPhone"),
           ("com.apple.Health", None), ("Simon\u2019s Apple\u00a0Watch", "Apple Watch"), ("com.example.band", None)]
ZONES = ["UTC", "Europe/Paris", "America/New_York", "Asia/Kathmandu", "Australia/Lord_Howe", "Pacific/Chatham",
         "Australia/Eucla", "America/St_Johns", "Pacific/Kiritimati", "Pacific/Apia", "Asia/Kolkata"]
BASE_MS = int(datetime(2026, 3, 1, tzinfo=timezone.utc).timestamp() * 1000)
_MS = 1_000_000


class Store:
    """Live samples by id, and what DailyBuckets asks of a storage: those overlapping [start, end)."""

    def __init__(self) -> None:
        self.samples: dict[str, tuple[int, int, int, str, object]] = {}  # id -> (start_ms, end_ms, count, bundle, device)
        self.reads = 0
        self.during_read = None  # called once while a read is under way (a write landing then)

    def between(self, user: str, start_ns: int, end_ns: int):
        self.reads += 1
        found = [DaySample(s * _MS, e * _MS, c, b, d) for s, e, c, b, d in list(self.samples.values())
                 if e * _MS >= start_ns and s * _MS < end_ns]
        if self.during_read is not None:
            hook, self.during_read = self.during_read, None
            hook()
        return found


def random_sample(rng: random.Random, days: int = 20) -> tuple[int, int, int, str, object]:
    start = BASE_MS + rng.randrange(0, days * DAY_MS, rng.choice([1, 1000, 60_000]))
    end = start + rng.choice([0, rng.randrange(1, 900_000), rng.randrange(60, 1200) * 1000,
                              rng.randrange(1, 48) * 3_600_000 + rng.randrange(0, 3_600_000)])
    return (start, end, rng.randrange(0, 5000)) + rng.choice(SOURCES)


def expected(store: Store, zone: str, first: date, last: date) -> list[dict]:
    return totals.daily_totals(list(store.samples.values()), zone, first, last, totals.DEFAULT_PRIORITY, True)["days"]


def utc_days(sample: tuple) -> tuple[int, int]:
    return sample[0] // DAY_MS, sample[1] // DAY_MS


@pytest.mark.parametrize("seed", range(12))
def test_bucket_rows_equal_the_full_merge(seed):
    rng = random.Random(seed)
    store = Store()
    for n in range(rng.choice([1, 30, 400])):
        store.samples[f"s{n}"] = random_sample(rng)
    buckets = DailyBuckets(store.between, background=False)
    for zone in rng.sample(ZONES, 5):
        first = date(2026, 2, 27) + timedelta(days=rng.randrange(0, 10))
        last = first + timedelta(days=rng.randrange(0, 25))
        assert buckets.rows("u", ZoneInfo(zone), first, last) == expected(store, zone, first, last), (zone, first, last)


def test_dst_and_quarter_hour_days_on_known_dates():
    """A 23- and a 25-hour day, a half-hour DST change (Lord Howe), +05:45 and +12:45/+13:45, a skipped
    date (Apia, 2011-12-30: a day of no hours), each with samples crossing its edges."""
    cases = [("America/New_York", date(2026, 3, 7), date(2026, 3, 9)), ("Europe/Paris", date(2026, 10, 24), date(2026, 10, 26)),
             ("Australia/Lord_Howe", date(2026, 4, 4), date(2026, 4, 6)), ("Asia/Kathmandu", date(2026, 3, 1), date(2026, 3, 2)),
             ("Pacific/Chatham", date(2026, 4, 4), date(2026, 4, 6)), ("Pacific/Apia", date(2011, 12, 28), date(2011, 12, 31))]
    rng = random.Random(7)
    for zone, first, last in cases:
        store = Store()
        begin = totals.day_start_ms(first, ZoneInfo(zone))
        for n in range(300):
            start = begin + rng.randrange(-DAY_MS, 4 * DAY_MS, 1000)
            store.samples[f"s{n}"] = (start, start + rng.choice([0, 1000, 600_000, 7_200_000, 30 * 3_600_000]),
                                      rng.randrange(0, 3000)) + rng.choice(SOURCES[:3])
        buckets = DailyBuckets(store.between, background=False)
        got = buckets.rows("u", ZoneInfo(zone), first, last)
        assert got == expected(store, zone, first, last), zone
        assert any(row["merged"] < row["raw"] for row in got), zone  # the sources overlap: the merge did something


@pytest.mark.parametrize("seed", range(6))
def test_random_writes_and_deletions_through_touches(seed):
    """After each write the touched days are dropped; reads and the worker (run here in this thread)
    compute them again, and every answer equals the merge of what is live then."""
    rng = random.Random(100 + seed)
    store = Store()
    buckets = DailyBuckets(store.between, background=False, settle_s=0.0)
    zones = rng.sample(ZONES, 3)
    for n in range(200):
        store.samples[f"s{n}"] = random_sample(rng)
    next_id = 200
    for step in range(25):
        action = rng.random()
        if action < 0.5:  # new samples, and new versions of some (their old days are touched too)
            spans = []
            for _ in range(rng.choice([1, 5, 30])):
                if store.samples and rng.random() < 0.3:
                    sample_id = rng.choice(sorted(store.samples))
                    spans.append(utc_days(store.samples[sample_id]))
                else:
                    sample_id, next_id = f"s{next_id}", next_id + 1
                store.samples[sample_id] = random_sample(rng)
                spans.append(utc_days(store.samples[sample_id]))
            buckets.touch_days("u", spans)
        elif action < 0.7 and store.samples:  # deletions by id: every day
            for sample_id in rng.sample(sorted(store.samples), min(10, len(store.samples))):
                del store.samples[sample_id]
            buckets.touch_all("u")
        elif action < 0.8:  # deletions whose days are known
            doomed = rng.sample(sorted(store.samples), min(10, len(store.samples)))
            buckets.touch_days("u", [utc_days(store.samples[sample_id]) for sample_id in doomed])
            for sample_id in doomed:
                del store.samples[sample_id]
        if rng.random() < 0.5:
            buckets.run_settled()
        for zone in zones:
            first = date(2026, 2, 27) + timedelta(days=rng.randrange(0, 15))
            last = first + timedelta(days=rng.randrange(0, 10))
            assert buckets.rows("u", ZoneInfo(zone), first, last) == expected(store, zone, first, last), (step, zone)


def test_the_worker_computes_touched_days_so_a_read_does_not():
    store = Store()
    rng = random.Random(3)
    for n in range(300):
        store.samples[f"s{n}"] = random_sample(rng)
    buckets = DailyBuckets(store.between, background=False, settle_s=0.0)
    buckets.touch_days("u", [(BASE_MS // DAY_MS - 2, BASE_MS // DAY_MS + 22)])
    assert buckets.run_settled() > 0 and buckets.idle()
    reads = store.reads
    assert buckets.rows("u", ZoneInfo("Asia/Kathmandu"), date(2026, 3, 1), date(2026, 3, 20)) == \
        expected(store, "Asia/Kathmandu", date(2026, 3, 1), date(2026, 3, 20))
    assert store.reads == reads  # summed from buckets only
    # A write drops its days: the next read computes those (one read of samples), nothing else.
    store.samples["late"] = (BASE_MS + 5 * DAY_MS + 1234, BASE_MS + 5 * DAY_MS + 600_000, 777, "com.example.band", None)
    buckets.touch_days("u", [utc_days(store.samples["late"])])
    assert buckets.rows("u", ZoneInfo("Asia/Kathmandu"), date(2026, 3, 1), date(2026, 3, 20)) == \
        expected(store, "Asia/Kathmandu", date(2026, 3, 1), date(2026, 3, 20))
    assert store.reads == reads + 1


def test_a_computation_that_read_before_a_write_keeps_nothing():
    """A write lands (and touches its day) while a read is computing that day from the samples: the
    read answers from what it read, but the day stays absent, so the next read sees the write."""
    store = Store()
    store.samples["a"] = (BASE_MS + 3_600_000, BASE_MS + 3_900_000, 100, "com.example.band", None)
    buckets = DailyBuckets(store.between, background=False)
    zone = ZoneInfo("UTC")

    def write() -> None:
        store.samples["b"] = (BASE_MS + 7_200_000, BASE_MS + 7_500_000, 50, "com.example.band", None)
        buckets.touch_days("u", [utc_days(store.samples["b"])])

    store.during_read = write
    first = buckets.rows("u", zone, date(2026, 3, 1), date(2026, 3, 1))
    assert first[0]["raw"] == 100  # as read before the write
    assert buckets.rows("u", zone, date(2026, 3, 1), date(2026, 3, 1))[0]["raw"] == 150
    # The same when every day is touched (a deletion by id).
    store.during_read = lambda: (store.samples.pop("a"), buckets.touch_all("u"))
    buckets.touch_days("u", [(BASE_MS // DAY_MS, BASE_MS // DAY_MS)])
    assert buckets.rows("u", zone, date(2026, 3, 1), date(2026, 3, 1))[0]["raw"] == 150
    assert buckets.rows("u", zone, date(2026, 3, 1), date(2026, 3, 1))[0]["raw"] == 50


def test_touching_by_date_texts_covers_offsets_far_from_utc():
    """touch_samples works from the texts' dates: one written at -12:00 late in its day is on the next
    UTC date, one at +14:00 early in its day on the one before; both days are dropped."""
    store = Store()
    buckets = DailyBuckets(store.between, background=False)
    zone, first, last = "UTC", date(2026, 3, 1), date(2026, 3, 6)
    assert buckets.rows("u", ZoneInfo(zone), first, last) == expected(store, zone, first, last)
    west = SampleFields(id="w", startDate="2026-03-02T20:00:00-12:00", endDate="2026-03-02T21:00:00-12:00", count=60,
                        sourceBundleId="com.example.band", sourceDeviceName=None)
    east = SampleFields(id="e", startDate="2026-03-05T01:00:00+14:00", endDate="2026-03-05T01:30:00+14:00", count=30,
                        sourceBundleId="com.example.band", sourceDeviceName=None)
    for sample in (west, east):
        start = int(datetime.fromisoformat(sample.startDate).timestamp() * 1000)
        end = int(datetime.fromisoformat(sample.endDate).timestamp() * 1000)
        store.samples[sample.id] = (start, end, sample.count, sample.sourceBundleId, None)
    buckets.touch_samples("u", [west, east], [])
    rows = buckets.rows("u", ZoneInfo(zone), first, last)
    assert rows == expected(store, zone, first, last)
    assert [row["raw"] for row in rows] == [0, 0, 60, 30, 0, 0]
    # A new version replacing "w": the replaced version's texts name its days.
    moved = SampleFields(id="w", startDate="2026-03-06T10:00:00Z", endDate="2026-03-06T10:00:00Z", count=5,
                         sourceBundleId="com.example.band", sourceDeviceName=None)
    store.samples["w"] = (int(datetime(2026, 3, 6, 10, tzinfo=timezone.utc).timestamp() * 1000),) * 2 + (5, "com.example.band", None)
    buckets.touch_samples("u", [moved], [west.startDate, west.endDate])
    assert [row["raw"] for row in buckets.rows("u", ZoneInfo(zone), first, last)] == [0, 0, 0, 30, 0, 5]


def test_users_are_apart():
    stores = {"ann": Store(), "bob": Store()}
    stores["ann"].samples["a"] = (BASE_MS, BASE_MS + 60_000, 10, "com.example.band", None)
    stores["bob"].samples["a"] = (BASE_MS, BASE_MS + 60_000, 99, "com.example.band", None)
    buckets = DailyBuckets(lambda user, start, end: stores[user].between(user, start, end), background=False)
    zone = ZoneInfo("UTC")
    assert buckets.rows("ann", zone, date(2026, 3, 1), date(2026, 3, 1))[0]["raw"] == 10
    assert buckets.rows("bob", zone, date(2026, 3, 1), date(2026, 3, 1))[0]["raw"] == 99
    stores["ann"].samples.clear()
    buckets.touch_all("ann")
    assert buckets.rows("ann", zone, date(2026, 3, 1), date(2026, 3, 1))[0]["raw"] == 0
    assert buckets.rows("bob", zone, date(2026, 3, 1), date(2026, 3, 1))[0]["raw"] == 99


def test_days_that_do_not_start_on_a_quarter_hour_are_left_to_the_full_merge():
    """Monrovia kept -00:44:30 until 1972: its days started 44.5 minutes past a UTC hour."""
    store = Store()
    buckets = DailyBuckets(store.between, background=False)
    assert buckets.rows("u", ZoneInfo("Africa/Monrovia"), date(1971, 6, 1), date(1971, 6, 2)) is None
    assert store.reads == 0
    assert buckets.rows("u", ZoneInfo("Africa/Monrovia"), date(2026, 6, 1), date(2026, 6, 2)) is not None


def test_disabled_buckets_answer_nothing_and_keep_nothing():
    store = Store()
    buckets = DailyBuckets(store.between, enabled=False)
    buckets.touch_days("u", [(0, 10)])
    assert buckets.rows("u", ZoneInfo("UTC"), date(2026, 3, 1), date(2026, 3, 1)) is None
    assert buckets.idle() and store.reads == 0


class MemoryBucketStore:
    """A BucketStore in memory; its state is a counter the test bumps for a write made elsewhere."""

    def __init__(self) -> None:
        self.blobs: dict[str, bytes] = {}
        self.writes = 0

    def state(self, user: str):
        return str(self.writes)

    def load(self, user: str):
        return self.blobs.get(user)

    def save(self, user: str, blob: bytes) -> None:
        self.blobs[user] = blob


def test_saved_buckets_are_used_after_a_restart_only_while_nothing_was_written():
    rng = random.Random(11)
    store = Store()
    for n in range(300):
        store.samples[f"s{n}"] = random_sample(rng)
    kept = MemoryBucketStore()
    zone, first, last = "Australia/Eucla", date(2026, 3, 1), date(2026, 3, 21)
    before = DailyBuckets(store.between, background=False, store=kept)
    assert before.rows("u", ZoneInfo(zone), first, last) == expected(store, zone, first, last)
    before.touch_days("u", [(BASE_MS // DAY_MS + 3, BASE_MS // DAY_MS + 3)])  # one day not current at the stop
    before.save()
    reads = store.reads
    after = DailyBuckets(store.between, background=False, store=kept)
    assert after.rows("u", ZoneInfo(zone), first, last) == expected(store, zone, first, last)
    assert store.reads == reads + 1  # only the day that was not current
    # A write while stopped (the state differs): nothing saved is used.
    kept.writes += 1
    store.samples["new"] = (BASE_MS + 10 * DAY_MS, BASE_MS + 10 * DAY_MS + 60_000, 4321, "com.example.band", None)
    again = DailyBuckets(store.between, background=False, store=kept)
    assert again.rows("u", ZoneInfo(zone), first, last) == expected(store, zone, first, last)
    assert store.reads > reads + 1


def test_damaged_saved_buckets_are_computed_again(capfd):
    store = Store()
    store.samples["a"] = (BASE_MS, BASE_MS + 60_000, 10, "com.example.band", None)
    kept = MemoryBucketStore()
    before = DailyBuckets(store.between, background=False, store=kept)
    before.rows("u", ZoneInfo("UTC"), date(2026, 3, 1), date(2026, 3, 1))
    before.save()
    kept.blobs["u"] = kept.blobs["u"][:-5]
    after = DailyBuckets(store.between, background=False, store=kept)
    assert after.rows("u", ZoneInfo("UTC"), date(2026, 3, 1), date(2026, 3, 1))[0]["raw"] == 10
    assert "the saved buckets of u are not used" in capfd.readouterr().err


def test_a_request_spanning_months_touches_each_of_its_dates_not_the_months_between():
    store = Store()
    reads = []
    buckets = DailyBuckets(lambda user, start, end: reads.append((start, end)) or store.between(user, start, end),
                           background=False)
    zone, first, last = "UTC", date(2026, 1, 1), date(2026, 4, 30)
    buckets.rows("u", ZoneInfo(zone), first, last)
    batch = [SampleFields(id="jan", startDate="2026-01-10T23:00:00-05:00", endDate="2026-01-10T23:30:00-05:00", count=40,
                          sourceBundleId="com.example.band", sourceDeviceName=None),
             SampleFields(id="apr", startDate="2026-04-20T00:30:00+09:00", endDate="2026-04-20T01:00:00+09:00", count=9,
                          sourceBundleId="com.example.band", sourceDeviceName=None)]
    for sample in batch:
        start = int(datetime.fromisoformat(sample.startDate).timestamp() * 1000)
        end = int(datetime.fromisoformat(sample.endDate).timestamp() * 1000)
        store.samples[sample.id] = (start, end, sample.count, sample.sourceBundleId, None)
    buckets.touch_samples("u", batch, [])
    reads.clear()
    assert buckets.rows("u", ZoneInfo(zone), first, last) == expected(store, zone, first, last)
    assert sum((end - start) // (DAY_MS * _MS) for start, end in reads) == 4  # 01-10..01-11 and 04-19..04-20

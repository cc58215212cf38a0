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
        self.ranges: list[tuple[int, int]] = []  # every read's [start_ns, end_ns)
        self.read_samples = 0
        self.during_read = None  # called once while a read is under way (a write landing then)

    def between(self, user: str, start_ns: int, end_ns: int):
        self.reads += 1
        self.ranges.append((start_ns, end_ns))
        found = [DaySample(s * _MS, e * _MS, c, b, d) for s, e, c, b, d in list(self.samples.values())
                 if e * _MS >= start_ns and s * _MS < end_ns]
        self.read_samples += len(found)
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
    """A BucketStore in memory; its state is a counter the test bumps for a write made elsewhere. It notes
    every read of sums (offset, length)."""

    def __init__(self) -> None:
        self.saves: dict[str, tuple[bytes, bytes, bytes]] = {}  # user -> (saved id, header, sums)
        self.writes = 0
        self.sums_reads: list[tuple[int, int]] = []
        self.during_read = None  # called once while sums are read (a write landing then)

    def state(self, user: str):
        return str(self.writes)

    def load_header(self, user: str):
        return self.saves[user][1] if user in self.saves else None

    def load_sums(self, user: str, saved_id: bytes, offset: int, length: int):
        if user not in self.saves or self.saves[user][0] != saved_id:
            return None
        self.sums_reads.append((offset, length))
        sums = self.saves[user][2][offset : offset + length]
        if self.during_read is not None:
            hook, self.during_read = self.during_read, None
            hook()
        return sums

    def save(self, user: str, saved_id: bytes, header: bytes, sums: bytes) -> None:
        self.saves[user] = (saved_id, header, sums)


def day_range(day: int) -> tuple[int, int]:
    return day * DAY_MS * _MS, (day + 1) * DAY_MS * _MS


def test_saved_buckets_are_used_after_a_restart_only_while_nothing_was_written():
    rng = random.Random(11)
    store = Store()
    for n in range(300):
        store.samples[f"s{n}"] = random_sample(rng)
    kept = MemoryBucketStore()
    zone, first, last = "Australia/Eucla", date(2026, 3, 1), date(2026, 3, 21)
    before = DailyBuckets(store.between, background=False, store=kept)
    assert before.rows("u", ZoneInfo(zone), first, last) == expected(store, zone, first, last)
    touched = BASE_MS // DAY_MS + 3
    before.touch_days("u", [(touched, touched)])  # one day not current at the stop
    before.save()
    store.ranges.clear()
    after = DailyBuckets(store.between, background=False, store=kept)
    assert after.rows("u", ZoneInfo(zone), first, last) == expected(store, zone, first, last)
    assert store.ranges == [day_range(touched)]  # only the day that was not current; the rest were saved
    # A write while stopped (the state differs): nothing saved is used.
    after.save()
    kept.writes += 1
    store.samples["new"] = (BASE_MS + 10 * DAY_MS, BASE_MS + 10 * DAY_MS + 60_000, 4321, "com.example.band", None)
    kept.sums_reads.clear()
    again = DailyBuckets(store.between, background=False, store=kept)
    assert again.rows("u", ZoneInfo(zone), first, last) == expected(store, zone, first, last)
    assert kept.sums_reads == []


def test_a_start_reads_the_saved_days_a_query_asks_for_and_a_write_drops_those_it_touches():
    """After a start the sums are read a range of days at a time: a query of 3 days of 40 reads those 3
    days' sums, once; a day a write touched before any read asked for it is computed from the samples,
    not restored; the next stop saves the days never read again with the others."""
    rng = random.Random(5)
    store = Store()
    for n in range(600):
        store.samples[f"s{n}"] = random_sample(rng, days=40)
    kept = MemoryBucketStore()
    zone = "UTC"
    before = DailyBuckets(store.between, background=False, store=kept)
    assert before.rows("u", ZoneInfo(zone), date(2026, 3, 1), date(2026, 4, 9)) == expected(store, zone, date(2026, 3, 1), date(2026, 4, 9))
    before.save()
    whole = len(kept.saves["u"][2])
    store.ranges.clear()
    after = DailyBuckets(store.between, background=False, store=kept)
    three = (date(2026, 3, 10), date(2026, 3, 12))
    assert after.rows("u", ZoneInfo(zone), *three) == expected(store, zone, *three)
    assert after.rows("u", ZoneInfo(zone), *three) == expected(store, zone, *three)
    assert store.ranges == [] and len(kept.sums_reads) == 1
    assert 0 < kept.sums_reads[0][1] <= whole * 3 // 40 + 1552 * 6  # those days' pairs, not the rest
    # A write on a saved day nobody has read yet: that day comes from the samples, with the new sample.
    written = BASE_MS // DAY_MS + 20
    store.samples["late"] = (written * DAY_MS + 5_000, written * DAY_MS + 65_000, 999, "com.example.band", None)
    after.touch_days("u", [(written, written)])
    month = (date(2026, 3, 1), date(2026, 3, 31))
    assert after.rows("u", ZoneInfo(zone), *month) == expected(store, zone, *month)
    assert store.ranges == [day_range(written)]
    # The next stop saves every day again, read or not: a third start reads no sample for the 40 days.
    after.save()
    store.ranges.clear()
    third = DailyBuckets(store.between, background=False, store=kept)
    whole_range = (date(2026, 3, 1), date(2026, 4, 9))
    assert third.rows("u", ZoneInfo(zone), *whole_range) == expected(store, zone, *whole_range)
    assert store.ranges == []


@pytest.mark.parametrize("write", ["one day", "every day"])
def test_a_write_while_saved_days_are_read_keeps_them_from_becoming_current(write):
    """A write lands while a query reads saved sums: that query may answer as of before it, but the days
    it touched (one, or every day: a deletion by id) are not kept, and the next query counts the write."""
    rng = random.Random(8)
    store = Store()
    for n in range(200):
        store.samples[f"s{n}"] = random_sample(rng, days=6)
    kept = MemoryBucketStore()
    first, last = date(2026, 3, 1), date(2026, 3, 6)
    before = DailyBuckets(store.between, background=False, store=kept)
    before.rows("u", ZoneInfo("UTC"), first, last)
    before.save()
    after = DailyBuckets(store.between, background=False, store=kept)
    day = BASE_MS // DAY_MS + 2

    def landing() -> None:
        store.samples["x"] = (day * DAY_MS + 1000, day * DAY_MS + 61_000, 555, "com.example.band", None)
        if write == "one day":
            after.touch_days("u", [(day, day)])
        else:
            after.touch_all("u")

    kept.during_read = landing
    after.rows("u", ZoneInfo("UTC"), first, last)
    assert kept.during_read is None  # the write landed during the read
    assert after.rows("u", ZoneInfo("UTC"), first, last) == expected(store, "UTC", first, last)


@pytest.mark.parametrize("damage", ["sums cut short", "header cut short", "saved again meanwhile"])
def test_damaged_saved_buckets_are_computed_again(capfd, damage):
    store = Store()
    store.samples["a"] = (BASE_MS, BASE_MS + 60_000, 10, "com.example.band", None)
    kept = MemoryBucketStore()
    before = DailyBuckets(store.between, background=False, store=kept)
    before.rows("u", ZoneInfo("UTC"), date(2026, 3, 1), date(2026, 3, 1))
    before.save()
    saved_id, header, sums = kept.saves["u"]
    after = DailyBuckets(store.between, background=False, store=kept)
    if damage == "sums cut short":
        kept.saves["u"] = (saved_id, header, sums[:-5])
    elif damage == "header cut short":
        kept.saves["u"] = (saved_id, header[:-5], sums)
    else:  # after this process read the header, another save replaced the sums: not mixed in
        after.touch_days("u", [(0, 0)])  # reads the header
        kept.saves["u"] = (b"another save    ", header, sums)
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


def text_of(ms: int, rng: random.Random) -> str:
    """A date-time text of whole second ms // 1000, in UTC or at a random offset (what clients send)."""
    moment = datetime.fromtimestamp(ms // 1000, timezone.utc)
    minutes = rng.choice([0, 0, 60, -300, 345, 840, -720])
    if minutes == 0:
        return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
    local = moment + timedelta(minutes=minutes)
    return local.strftime("%Y-%m-%dT%H:%M:%S") + f"{'+' if minutes > 0 else '-'}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


def fields(sample_id: str, sample: tuple, rng: random.Random) -> SampleFields:
    start, end, count, bundle, device = sample
    return SampleFields(id=sample_id, startDate=text_of(start, rng), endDate=text_of(end, rng), count=count,
                        sourceBundleId=bundle, sourceDeviceName=device)


class FrontierStore(Store):
    """Store with the bound a backend gives DailyBuckets (latest_end_ns) and a write that may be split
    around other writes: begin (before_write), save (visible), finish (touch_written)."""

    def latest_end_ns(self, user: str):
        return max((end for _, end, _, _, _ in self.samples.values()), default=None) and \
            max(end for _, end, _, _, _ in self.samples.values()) * _MS


@pytest.mark.parametrize("seed", range(8))
def test_an_upload_in_time_order_is_computed_from_the_writes_without_reading_back(seed):
    """An upload in time order (1,000-sample-like batches, two in flight: a write's steps interleave
    with the next one's), some batches sent twice (a retry), with the worker running between: the
    days past what was stored are held from the writes and computed without a read of samples; a
    rewrite of a sample with new content, a deletion, and a write into an earlier day let the days go
    and they are read again; every answer equals the merge of what is live."""
    rng = random.Random(500 + seed)
    store = FrontierStore()
    for n in range(50):  # what was there before the upload: the first days
        store.samples[f"old{n}"] = random_sample(rng, days=2)
    buckets = DailyBuckets(store.between, background=False, settle_s=0.0, latest_end_ns=store.latest_end_ns)
    position = BASE_MS + 8 * DAY_MS  # past every end of those (under 48 hours after day 2), a text's date and a day
    batches = []
    for b in range(30):
        batch = {}
        for n in range(rng.choice([5, 40, 120])):
            start = position + rng.randrange(0, 1800_000, 1000)
            end = start + rng.choice([0, rng.randrange(1, 600) * 1000, rng.randrange(1, 30) * 3_600_000])
            batch[f"b{b}-{n}"] = (start, end, rng.randrange(0, 3000)) + rng.choice(SOURCES)
            position += rng.choice([60_000, 900_000, 3_600_000])
        batches.append(batch)
    in_flight = []
    zones = rng.sample(ZONES, 2)
    read_before = store.read_samples
    # The last batch sent again (its answer was lost) with a few more samples: only those are saved, so
    # its days are let go and read back.
    again = dict(batches[-1], **{f"again{n}": (position + n * 60_000, position + n * 60_000 + 30_000, 9, *SOURCES[0])
                                 for n in range(3)})
    for b, batch in enumerate(batches + [again]):
        written = buckets.before_write("u", [fields(sample_id, sample, rng) for sample_id, sample in batch.items()])
        in_flight.append((batch, written))
        if len(in_flight) == 2 or b == len(batches):
            if rng.random() < 0.5:
                in_flight.reverse()  # the later write finished first
            for done, done_written in in_flight:
                saved = sum(store.samples.get(sample_id) != sample for sample_id, sample in done.items())
                store.samples.update(done)
                if saved:  # as the route: a write that saved nothing touches nothing
                    buckets.touch_written("u", done_written, [], saved)
            in_flight = []
        if rng.random() < 0.3:
            buckets.run_settled()
    buckets.run_settled()
    # The days were held, not read back, but for those the retry touched.
    uploaded = sum(map(len, batches))
    assert 0 < store.read_samples - read_before <= uploaded // 10 + 3 * len(again), (store.read_samples - read_before, uploaded)
    for zone in zones:
        first, last = date(2026, 2, 28), date(2026, 3, 1) + timedelta(days=(position - BASE_MS) // DAY_MS + 1)
        assert buckets.rows("u", ZoneInfo(zone), first, last) == expected(store, zone, first, last), zone
    reads = store.reads

    # Changes the held days cannot follow: each lets its days go, and they are read again.
    sample_id = rng.choice(sorted(batches[-1]))
    moved = store.samples[sample_id][:2] + (store.samples[sample_id][2] + 1,) + store.samples[sample_id][3:]
    new_version = fields(sample_id, moved, rng)
    written = buckets.before_write("u", [new_version])
    old = store.samples[sample_id]
    store.samples[sample_id] = moved
    buckets.touch_written("u", written, [text_of(old[0], rng), text_of(old[1], rng)], 1)
    doomed = rng.choice(sorted(batches[-2]))
    removed = store.samples.pop(doomed)
    buckets.touch_samples("u", [], [text_of(removed[0], rng), text_of(removed[1], rng)])
    earlier = (BASE_MS + 3_600_000, BASE_MS + 3_700_000, 5, "com.example.band", None)
    written = buckets.before_write("u", [fields("earlier", earlier, rng)])
    store.samples["earlier"] = earlier
    buckets.touch_written("u", written, [], 1)
    buckets.run_settled()
    for zone in zones:
        first, last = date(2026, 2, 28), date(2026, 3, 1) + timedelta(days=(position - BASE_MS) // DAY_MS + 1)
        assert buckets.rows("u", ZoneInfo(zone), first, last) == expected(store, zone, first, last), zone
    assert store.reads > reads


def test_a_failed_write_lets_every_held_day_go():
    """A write that failed (it may have committed) touches every day: nothing held is trusted."""
    rng = random.Random(9)
    store = FrontierStore()
    buckets = DailyBuckets(store.between, background=False, settle_s=0.0, latest_end_ns=store.latest_end_ns)
    sample = (BASE_MS + 600_000, BASE_MS + 900_000, 40, "com.example.band", None)
    written = buckets.before_write("u", [fields("a", sample, rng)])
    store.samples["a"] = sample
    buckets.touch_written("u", written, [], 1)
    hidden = (BASE_MS + 1_000_000, BASE_MS + 1_100_000, 2, "com.example.band", None)
    buckets.before_write("u", [fields("b", hidden, rng)])
    store.samples["b"] = hidden  # committed, though the request failed
    buckets.touch_all("u")
    buckets.run_settled()
    assert buckets.rows("u", ZoneInfo("UTC"), date(2026, 3, 1), date(2026, 3, 1))[0]["raw"] == 42


@pytest.mark.parametrize("seed", range(6))
def test_held_days_from_parsed_bodies_count_long_samples_once_across_runs(seed):
    """An upload in time order parsed as the route parses it (the contract's fast path hands its field
    lists on: ParsedSamples), with samples up to 47 hours long (three UTC days), device names absent,
    null or given, UTC and offset texts, computed by the worker in runs of every length, also cut
    inside a long sample: every day is computed from the held writes (no read of samples) and each
    sample counts once, as the full merge counts it."""
    import json

    from stepserver import contract

    rng = random.Random(900 + seed)
    store = FrontierStore()
    buckets = DailyBuckets(store.between, background=False, settle_s=0.0, latest_end_ns=store.latest_end_ns)
    position = BASE_MS
    window = contract.DateWindow(int(datetime(2026, 11, 1, tzinfo=timezone.utc).timestamp()) * 1_000_000_000)
    for b in range(25):
        samples, stored = [], {}
        for n in range(rng.choice([3, 30, 80])):
            start = position + rng.randrange(0, 600, 1) * 1000
            end = start + rng.choice([0, rng.randrange(1, 900) * 1000, rng.randrange(1, 47) * 3_600_000])
            bundle, device = rng.choice(SOURCES)
            sample = {"id": f"b{b}-{n}", "startDate": text_of(start, rng), "endDate": text_of(end, rng),
                      "count": rng.randrange(0, 3000), "sourceBundleId": bundle}
            shape = rng.randrange(3)
            if shape == 1:
                sample["sourceDeviceName"] = device
            elif shape == 2:
                sample["sourceDeviceName"] = None
            samples.append(sample)
            stored[sample["id"]] = (start, end, sample["count"], bundle, device if shape == 1 else None)
            position += rng.choice([60_000, 900_000, 3_600_000, 5 * 3_600_000])
        parsed = contract.parse_samples(json.dumps({"samples": samples}, ensure_ascii=False).encode(), window)
        assert isinstance(parsed, contract.ParsedSamples)
        written = buckets.before_write("u", parsed)
        assert parsed.fields is None  # taken: the save may free the samples before its sync
        store.samples.update(stored)
        buckets.touch_written("u", written, [], len(stored))
        if rng.random() < 0.4:
            buckets.run_settled()
    buckets.run_settled()
    assert store.read_samples == 0
    first, last = date(2026, 2, 27), date(2026, 3, 1) + timedelta(days=(position - BASE_MS) // DAY_MS + 3)
    for zone in rng.sample(ZONES, 3):
        assert buckets.rows("u", ZoneInfo(zone), first, last) == expected(store, zone, first, last), zone
    assert store.read_samples == 0


def test_the_background_worker_computes_an_upload_s_days_once_it_moves_on_and_reads_stay_exact(monkeypatch):
    """With the background worker running (as in the server): an upload in time order whose writes
    each cover under half a day, so consecutive writes touch the same UTC day; a read right after a
    write answers exactly what is live (read-your-writes: it computes the days not current itself,
    from the held writes); the worker computes a day once no write has touched it for settle_s, 31
    settled days at a time while the upload goes on, so (without a pause in the upload that long)
    each day once, after its writes have moved on; at the end every day is exact and no sample was
    read back."""
    import threading
    import time

    rng = random.Random(21)
    store = FrontierStore()
    settle_s = 0.15
    buckets = DailyBuckets(store.between, background=True, settle_s=settle_s, latest_end_ns=store.latest_end_ns)
    worker_days: list[int] = []
    compute = DailyBuckets._compute

    def counted(self, user, entry, first_day, last_day):
        if threading.current_thread().name == "daily-buckets":
            worker_days.extend(range(first_day, last_day + 1))
        return compute(self, user, entry, first_day, last_day)

    monkeypatch.setattr(DailyBuckets, "_compute", counted)
    position = BASE_MS + 3_600_000
    zone = ZoneInfo("Asia/Kathmandu")
    gaps = []
    written_at = time.monotonic()
    try:
        for b in range(120):
            batch = {}
            for n in range(25):  # 25 samples 25 minutes apart: about 0.43 of a day a write
                start = position + rng.randrange(0, 600, 1) * 1000
                batch[f"b{b}-{n}"] = (start, start + rng.randrange(60, 1200) * 1000, rng.randrange(1, 900)) + rng.choice(SOURCES)
                position += 1_500_000
            written = buckets.before_write("u", [fields(sample_id, sample, rng) for sample_id, sample in batch.items()])
            store.samples.update(batch)
            buckets.touch_written("u", written, [], len(batch))
            if b in (5, 6):  # the days of the writes just made, and those before
                assert buckets.rows("u", zone, date(2026, 3, 1), date(2026, 3, 4)) == \
                    expected(store, "Asia/Kathmandu", date(2026, 3, 1), date(2026, 3, 4)), b
            time.sleep(0.004)
            now = time.monotonic()
            gaps.append(now - written_at)
            written_at = now
        entry = buckets._users["u"]
        days = range(BASE_MS // DAY_MS, position // DAY_MS + 1)
        deadline = time.monotonic() + 30
        while not (buckets.idle() and all(day in entry.days for day in days)) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert buckets.idle() and all(day in entry.days for day in days)  # current: the read below sums them
        last = date(2026, 3, 1) + timedelta(days=(position - BASE_MS) // DAY_MS + 1)
        assert buckets.rows("u", zone, date(2026, 3, 1), last) == expected(store, "Asia/Kathmandu", date(2026, 3, 1), last)
        assert store.read_samples == 0
    finally:
        buckets.close()
    computed_by_reads = set(range(BASE_MS // DAY_MS - 1, BASE_MS // DAY_MS + 4))
    assert set(days) - computed_by_reads <= set(worker_days)
    if max(gaps) < settle_s / 3:  # no pause in the upload that let a day settle before its last write
        assert len(worker_days) == len(set(worker_days)), sorted(worker_days)
        assert len(set(worker_days)) > 31  # some while the upload went on, the rest after

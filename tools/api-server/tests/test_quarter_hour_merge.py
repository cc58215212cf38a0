"""The daily buckets' vectorised merge (stepserver/quarter_hour_merge.py) against the reference merge of
totals.py cut at every quarter hour, on seeded random samples: point samples, sub-second instants,
samples reaching outside the run, up to 48 hours, six sources, one source alone; and the columnar date
parsing (stepserver/sample_columns.py) against the contract's parser."""

from __future__ import annotations

import random
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from stepserver import totals  # noqa: E402
from stepserver.contract import instant_ns  # noqa: E402
from stepserver.daily_buckets import DAY_MS, DailyBuckets  # noqa: E402
from stepserver.quarter_hour_merge import QUARTER_MS, fits, merge_quarter_hours  # noqa: E402
from stepserver.sample_columns import SampleColumns, concatenate, instants_ms, instants_ns  # noqa: E402

SOURCES = [("com.apple.health.A1", "Apple Watch"), ("com.apple.health.B2", "iPhone"), ("com.example.pedometer", "iPhone"),
           ("com.apple.Health", None), ("com.example.band", None), ("com.apple.health.C3", "Anna\u2019s\u00a0iPhone")]
BASE_MS = int(datetime(2026, 3, 1, tzinfo=timezone.utc).timestamp() * 1000)


def random_samples(rng: random.Random, count: int, sources: list) -> list[tuple]:
    samples = []
    for _ in range(count):
        start = BASE_MS + rng.randrange(-2 * DAY_MS, 12 * DAY_MS, rng.choice([1, 1000, 60_000, QUARTER_MS]))
        end = start + rng.choice([0, rng.randrange(1, 900_000), rng.randrange(60, 1200) * 1000, QUARTER_MS,
                                  rng.randrange(1, 48) * 3_600_000 + rng.randrange(0, 3_600_000)])
        samples.append((start, end, rng.randrange(0, 1_000_001) if rng.random() < 0.1 else rng.randrange(0, 5000))
                       + rng.choice(sources))
    return samples


def columns_of(samples: list[tuple]) -> SampleColumns:
    sources = list(dict.fromkeys((b, d) for _, _, _, b, d in samples))
    number = {key: n for n, key in enumerate(sources)}
    return SampleColumns(np.array([s[0] for s in samples], dtype=np.int64), np.array([s[1] for s in samples], dtype=np.int64),
                         np.array([s[2] for s in samples], dtype=np.int64),
                         np.array([number[(s[3], s[4])] for s in samples], dtype=np.int64), sources)


@pytest.mark.parametrize("seed", range(40))
def test_the_vectorised_merge_equals_the_reference_at_every_quarter_hour(seed):
    rng = random.Random(seed)
    sources = SOURCES[:1] if seed % 8 == 0 else rng.sample(SOURCES, rng.randrange(2, len(SOURCES) + 1))
    samples = random_samples(rng, rng.choice([1, 5, 50, 600, 3000]), sources)
    first_day = BASE_MS // DAY_MS + rng.randrange(-1, 6)
    days = rng.randrange(1, 8)
    begin, finish = first_day * DAY_MS, (first_day + days) * DAY_MS
    columns = columns_of(samples)
    assert fits(columns)
    ranks = [totals.source_order_key(key, totals.DEFAULT_PRIORITY) for key in columns.sources]
    order, raw, merged = merge_quarter_hours(columns, begin, finish, ranks)
    keys, raw_expected, merged_expected = totals.merge_between_cuts(samples, list(range(begin, finish + 1, QUARTER_MS)),
                                                                    totals.DEFAULT_PRIORITY)
    assert [columns.sources[number] for number in order] == keys
    assert raw.tolist() == raw_expected
    assert merged.tolist() == merged_expected


def test_samples_past_int64_take_the_reference_merge():
    """count * duration past 2^62 (a line older than today's limits): the buckets take totals.py's merge."""
    samples = [(BASE_MS, BASE_MS + 47 * 3_600_000, 10**12, "com.apple.health.A1", "Apple Watch"),
               (BASE_MS + 3_600_000, BASE_MS + 5 * 3_600_000, 7_777, "com.apple.health.B2", "iPhone")]
    assert not fits(columns_of(samples))
    buckets = DailyBuckets(lambda user, start, end: [], background=False,
                           columns_between=lambda user, start, end: columns_of(samples))
    from datetime import date
    from zoneinfo import ZoneInfo

    first, last = date(2026, 2, 28), date(2026, 3, 4)
    expected = totals.daily_totals(samples, "Europe/Paris", first, last, totals.DEFAULT_PRIORITY, True)["days"]
    assert buckets.rows("u", ZoneInfo("Europe/Paris"), first, last) == expected
    assert sum(row["raw"] for row in expected) == 10**12 + 7_777


def test_date_texts_parse_as_the_contract_parses_them():
    rng = random.Random(7)
    texts = ["1970-01-01T00:00:00Z", "2000-02-29T23:59:59Z", "2024-12-31T23:59:59+14:00", "2026-03-29T01:30:00-09:30",
             "2026-03-29T01:30:00.123456789Z", "2026-03-29T01:30:00.5+05:45", "2100-03-01T00:00:00Z", "2016-07-03T12:00:00-00:00"]
    for _ in range(2000):
        moment = datetime(1971, 1, 1, tzinfo=timezone.utc) + timedelta(seconds=rng.randrange(0, 80 * 365 * 86400))
        shape = rng.randrange(4)
        if shape == 0:
            texts.append(moment.strftime("%Y-%m-%dT%H:%M:%SZ"))
        else:
            minutes = rng.choice([-1, 1]) * rng.randrange(0, 14 * 60, 15)
            local = moment + timedelta(minutes=minutes)
            sign = "+" if minutes >= 0 else "-"
            fraction = f".{rng.randrange(0, 1000):03d}" if shape == 3 else ""
            texts.append(local.strftime("%Y-%m-%dT%H:%M:%S") + fraction + f"{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}")
    rng.shuffle(texts)
    assert instants_ms(texts).tolist() == [instant_ns(text) // 1_000_000 for text in texts]
    assert instants_ms(texts[:1]).tolist() == [instant_ns(texts[0]) // 1_000_000]
    utc = [text for text in texts if len(text) == 20]  # the one-string path
    assert instants_ms(utc).tolist() == [instant_ns(text) // 1_000_000 for text in utc]
    mixed = ["2026-03-29T01:30:00.5Z", "2026-03-29T01:30:00.123+01:00"]  # the general path
    assert instants_ms(mixed).tolist() == [instant_ns(text) // 1_000_000 for text in mixed]
    # The exact nanoseconds PostgreSQL's save stores: the one-string path and the contract's.
    assert instants_ns(utc) == [instant_ns(text) for text in utc]
    assert instants_ns(texts) == [instant_ns(text) for text in texts]
    assert instants_ns(mixed) == [instant_ns(text) for text in mixed]
    assert instants_ns([]) == []


def test_utc_texts_read_by_digit_pairs_as_by_the_calendar():
    """The one-string path reads two digits at a time and a month's first day from a table of 1900-2399;
    texts of years outside it (or not digits) take the formula, with the same result as before."""
    rng = random.Random(11)
    moments = [datetime(1900, 1, 1, tzinfo=timezone.utc) + timedelta(seconds=rng.randrange(0, 500 * 365 * 86400))
               for _ in range(5000)]
    texts = [moment.strftime("%Y-%m-%dT%H:%M:%SZ") for moment in moments]
    texts += ["1900-01-01T00:00:00Z", "2399-12-31T23:59:59Z", "2000-02-29T12:00:00Z", "2100-02-28T23:59:59Z"]
    assert instants_ms(texts).tolist() == [instant_ns(text) // 1_000_000 for text in texts]
    for outside in (["1899-12-31T23:59:59Z"], ["2400-01-01T00:00:00Z", "2026-01-01T00:00:00Z"], ["0001-01-01T00:00:00Z"]):
        assert instants_ms(outside).tolist() == [(datetime.fromisoformat(text[:19]).replace(tzinfo=timezone.utc)
                                                  - datetime(1970, 1, 1, tzinfo=timezone.utc)) // timedelta(milliseconds=1)
                                                 for text in outside]


@pytest.mark.parametrize("millis", [False, True])
def test_columns_from_the_parse_s_date_bytes_equal_those_from_the_texts(millis):
    """contract.ParsedSamples hands the daily buckets the bytes of its usual-shape dates (whole seconds,
    or milliseconds mixed with whole seconds as stepsync sends them): the columns read from them equal
    those read from the texts; bytes of another shape are not used."""
    import json
    import time

    from stepserver import contract

    rng = random.Random(5)
    moments = [datetime(2001, 1, 1, tzinfo=timezone.utc) + timedelta(microseconds=1000 * rng.randrange(0, 25 * 365 * 86400 * 1000))
               for _ in range(300)]

    def text(moment: datetime) -> str:
        if millis and moment.microsecond and rng.random() < 0.8:
            return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
        return moment.strftime("%Y-%m-%dT%H:%M:%SZ")

    samples = [{"id": f"s{n}", "startDate": text(moment),
                "endDate": text(moment + timedelta(seconds=rng.randrange(1, 40 * 3600))),
                "count": n, "sourceBundleId": "com.example"} for n, moment in enumerate(moments)]
    parsed = contract.parse_samples(json.dumps({"samples": samples}).encode(), contract.DateWindow(time.time_ns()))
    starts, ends, bundles, devices, dates = parsed.take_fields()
    assert dates is not None and parsed.take_fields() is None
    counts = [sample.count for sample in parsed]
    from_bytes = SampleColumns.from_texts(starts, ends, counts, bundles, devices, usual_dates=dates)
    from_texts = SampleColumns.from_texts(starts, ends, counts, bundles, devices)
    assert from_bytes.start.tolist() == from_texts.start.tolist() == instants_ms(starts).tolist()
    assert from_bytes.end.tolist() == from_texts.end.tolist() == instants_ms(ends).tolist()
    samples[0]["endDate"] = samples[0]["startDate"][:19] + "-01:00"  # not the usual shape: no bytes handed on
    parsed = contract.parse_samples(json.dumps({"samples": samples}).encode(), contract.DateWindow(time.time_ns()))
    assert parsed.take_fields()[4] is None


def test_columns_from_several_reads_number_their_sources_as_one():
    a = SampleColumns.from_texts(["2026-03-01T00:00:00Z"] * 2, ["2026-03-01T00:05:00Z"] * 2, [5, 6],
                                 ["x", "y"], [None, "Watch"])
    b = SampleColumns.from_texts(["2026-03-02T00:00:00Z"] * 2, ["2026-03-02T00:05:00Z"] * 2, [7, 8],
                                 ["y", "z"], ["Watch", None])
    both = concatenate([a, b])
    assert [both.sources[n] for n in both.source.tolist()] == [("x", None), ("y", "Watch"), ("y", "Watch"), ("z", None)]
    assert both.count.tolist() == [5, 6, 7, 8]

"""GET /steps/daily: the hand-worked fixture of docs/TOTALS.md (Tests/Fixtures/totals/*.json, checked by
the Swift tests too) on every backend, its query's errors, seeded property tests of the Python merge
against the quadratic reference transcribed from TOTALS.md section 8, and the daily totals the
database keeps against that merge after every kind of write, by the server or by another process."""

from __future__ import annotations

import http.client
import json
import os
import random
import sys
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import msgspec  # noqa: E402

from stepserver import answers, contract, totals  # noqa: E402

from conftest import make_sample  # noqa: E402

FIXTURES = Path(os.environ.get("STEPSYNC_TOTALS_FIXTURES",
                               Path(__file__).resolve().parents[3] / "Tests" / "Fixtures" / "totals"))
CASES = sorted(FIXTURES.glob("*.json")) if FIXTURES.is_dir() else []


def daily(server, **params):
    return server.session.get(server.url + "/steps/daily", params=params, timeout=60)


@pytest.mark.skipif(not CASES, reason="Tests/Fixtures/totals not on this branch yet")
@pytest.mark.parametrize("path", CASES, ids=[path.stem for path in CASES])
def test_the_shared_fixture(server, path):
    case = json.loads(path.read_text(encoding="utf-8"))
    response = server.post(case["samples"])
    assert response.status_code == 200, response.text
    query = case["query"]
    params = {"tz": query["timeZone"], "from": query["from"], "to": query["to"]}
    if "priority" in query:
        params["priority"] = ",".join(query["priority"])
    response = daily(server, bySource="true", **params)
    assert response.status_code == 200, response.text
    assert response.json() == case["expected"]
    without = json.loads(json.dumps(case["expected"]))
    for row in without["days"]:
        del row["sources"]
    assert daily(server, **params).json() == without
    assert daily(server, bySource="false", **params).json() == without


def test_deleted_samples_are_not_counted_and_users_are_apart(server):
    samples = [make_sample(n, count=100) for n in range(10)]
    server.post(samples)
    server.tokens["bob"] = server.create_token("bob")
    server.post([make_sample(50, count=7)], session=server.new_session("bob"))
    params = {"tz": "UTC", "from": "2024-01-01", "to": "2024-01-02"}
    assert [row["merged"] for row in daily(server, **params).json()["days"]] == [1000, 0]
    # The answer has the shape the OpenAPI schema documents (DailyDocument).
    msgspec.json.decode(daily(server, bySource="true", **params).content, type=answers.DailyDocument)
    server.delete_ids([samples[0]["id"], samples[1]["id"]])
    assert [row["raw"] for row in daily(server, **params).json()["days"]] == [800, 0]


@pytest.mark.parametrize("query, expected", [
    ("from=2024-01-01", "to: required"),
    ("to=2024-01-01", "from: required"),
    ("from=2024-01-02&to=2024-01-01", "to: must not be before from"),
    ("from=2024-02-30&to=2024-03-01", 'from: not a calendar date (got "2024-02-30")'),
    ("from=2024-1-1&to=2024-01-02", "from: must be a date YYYY-MM-DD"),
    ("from=2000-01-01&to=2024-01-01", "to: at most 3700 days a request"),
    ("tz=Mars/Olympus&from=2024-01-01&to=2024-01-02", 'tz: unknown time zone "Mars/Olympus"'),
    ("tz=..%2Fetc&from=2024-01-01&to=2024-01-02", "tz: must be an IANA time zone"),
    ("from=2024-01-01&to=2024-01-02&bySource=yes", "bySource: must be true or false"),
    ("from=2024-01-01&to=2024-01-02&priority=a,,b", "priority: an empty pattern"),
    ("from=2024-01-01&to=2024-01-02&from=2024-01-01", "from: given more than once"),
])
def test_bad_daily_queries_are_400(shared_server, query, expected):
    connection = http.client.HTTPConnection("127.0.0.1", shared_server.port, timeout=30)
    connection.request("GET", "/steps/daily?" + query, headers=dict(shared_server.session.headers))
    response = connection.getresponse()
    body = json.loads(response.read())
    assert response.status == 400, body
    assert expected in body["error"]


# -- the merge against TOTALS.md's reference ------------------------------------------------------


def reference(samples, zone_name, first, last, patterns):
    """TOTALS.md section 8, transcribed."""
    zone = ZoneInfo(zone_name)
    keys = sorted({(b, d) for _, _, _, b, d in samples},
                  key=lambda key: (totals.rank(key[0], key[1], patterns), key[0], key[1] is not None, key[1] or ""))
    index = {key: k for k, key in enumerate(keys)}
    xs = [(s, e, c, index[(b, d)]) for s, e, c, b, d in samples]

    def F(s, e, c, t):  # in thousandths: the whole steps' floor, then the fraction's
        return (c // 1000) * (t - s) // (e - s) * 1000 + (c % 1000) * (t - s) // (e - s)

    def steps(thousandths):  # rounded half to even
        return round(thousandths / 1000) if thousandths % 500 == 0 else (thousandths + 500) // 1000

    rows = []
    day = first
    while day <= last:
        ds, de = totals.day_start_ms(day, zone), totals.day_start_ms(day + timedelta(days=1), zone)
        raw, merged = [0] * len(keys), [0] * len(keys)
        cuts = sorted({ds, de} | {t for s, e, c, k in xs for t in (s, e) if ds < t < de})
        for a, b in zip(cuts, cuts[1:]):
            cover = [x for x in xs if x[0] < x[1] and x[0] <= a and x[1] >= b]
            if cover:
                win = min(k for s, e, c, k in cover)
                for s, e, c, k in cover:
                    piece = F(s, e, c, b) - F(s, e, c, a)
                    raw[k] += piece
                    if k == win:
                        merged[k] += piece
        for s, e, c, k in xs:
            if s == e and ds <= s < de:
                raw[k] += c
                if not any(x[3] < k and x[0] <= s < x[1] for x in xs):
                    merged[k] += c
        rows.append({"date": day.isoformat(), "merged": steps(sum(merged)), "raw": steps(sum(raw)),
                     "sources": [{"bundleId": key[0], "deviceName": key[1], "merged": steps(merged[k]), "raw": steps(raw[k])}
                                 for k, key in enumerate(keys) if raw[k] > 0]})
        day += timedelta(days=1)
    return {"timeZone": zone_name, "from": first.isoformat(), "to": last.isoformat(), "priority": patterns, "days": rows}


SOURCES = [("com.apple.health.A1", "Apple Watch"), ("com.apple.health.B2", "iPhone"), ("com.example.pedometer", "iPhone"),
           ("com.apple.Health", None), ("Simon\u2019s Apple\u00a0Watch", "Apple Watch")]


@pytest.mark.parametrize("seed", range(40))
def test_the_merge_equals_the_reference_and_keeps_its_promises(seed):
    rng = random.Random(seed)
    zone = rng.choice(["UTC", "Europe/Paris", "America/New_York", "Asia/Tokyo", "Pacific/Apia"])
    first = date(2026, 3, 6) if seed % 2 else date(2026, 10, 23)
    last = first + timedelta(days=4)
    base = int(datetime(first.year, first.month, first.day, tzinfo=timezone.utc).timestamp() * 1000) - 86_400_000
    sources = rng.sample(SOURCES, rng.randint(1, len(SOURCES)))
    samples = []
    for _ in range(rng.randint(1, 60)):
        start = base + rng.randrange(0, 6 * 86_400_000, rng.choice([1, 1000, 60_000]))
        end = start + rng.choice([0, rng.randrange(1, 600_000), rng.randrange(1, 2 * 86_400_000)])
        bundle, device = rng.choice(sources)
        fraction = rng.randrange(1, 1000) if rng.random() < 0.3 else 0  # a third with thousandths
        samples.append((start, end, rng.randrange(0, 5000) * 1000 + fraction, bundle, device))
    got = totals.daily_totals(samples, zone, first, last, totals.DEFAULT_PRIORITY, True)
    assert got == reference(samples, zone, first, last, totals.DEFAULT_PRIORITY)
    for row in got["days"]:
        assert row["merged"] <= row["raw"]
    single = [sample for sample in samples if (sample[3], sample[4]) == sources[0]]
    for row in totals.daily_totals(single, zone, first, last, totals.DEFAULT_PRIORITY, False)["days"]:
        assert row["merged"] == row["raw"]
    # A source ranked below all others never lowers a day's merged total.
    lowest = [(s, e, c, "zzz.lowest", None) for s, e, c, _, _ in rng.sample(samples, min(5, len(samples)))]
    more = totals.daily_totals(samples + lowest, zone, first, last, totals.DEFAULT_PRIORITY, False)["days"]
    assert all(after["merged"] >= before["merged"] for before, after in zip(got["days"], more))


# -- the daily totals the database keeps (stepserver/daily_totals.py) ---------------------------------


def _text(ms: int, offset_minutes: int) -> str:
    moment = datetime.fromtimestamp(ms / 1000, timezone(timedelta(minutes=offset_minutes)))
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


def test_stored_totals_follow_every_write(server):
    """Queries over overlapping ranges, in five zones (quarter- and half-hour offsets among them) and two priorities (the stored totals, and the
    merge from the samples), between seeded writes (new samples, changed ones, samples written with
    offsets far from UTC, deletions by id, DELETE /steps): every answer equals the merge of what is
    live then, computed afresh here; and so does the first answer after a restart."""
    rng = random.Random(1416)
    base = int(datetime(2026, 3, 1, tzinfo=timezone.utc).timestamp() * 1000)
    live: dict[str, tuple] = {}
    queries = [("Europe/Paris", date(2026, 3, 1), date(2026, 3, 20), None),
               ("Pacific/Kiritimati", date(2026, 3, 5), date(2026, 3, 12), None),
               ("Asia/Kathmandu", date(2026, 3, 2), date(2026, 3, 21), None),  # +05:45
               ("Australia/Lord_Howe", date(2026, 3, 1), date(2026, 3, 21), None),  # +10:30 / +11:00
               ("America/New_York", date(2026, 2, 27), date(2026, 3, 22), "iPhone,Apple Watch")]

    step_name = ["first write"]

    def check() -> None:
        for zone, first, last, priority in queries:
            params = {"tz": zone, "from": first.isoformat(), "to": last.isoformat(), "bySource": "true"}
            patterns = totals.DEFAULT_PRIORITY
            if priority:
                params["priority"] = priority
                patterns = priority.split(",")
            got = daily(server, **params)
            assert got.status_code == 200, got.text
            expected = totals.daily_totals(list(live.values()), zone, first, last, patterns, True)
            diff = [(a, b) for a, b in zip(got.json()["days"], expected["days"]) if a != b]
            assert got.json() == expected, (zone, first, last, step_name[0], json.dumps(diff[:1]))

    def write(count: int) -> None:
        batch = []
        for _ in range(count):
            sample_id = rng.choice(list(live)) if live and rng.random() < 0.3 else f"c{len(live)}-{rng.randrange(10**9)}"
            start = base + rng.randrange(0, 20 * 86_400_000, 60_000)
            end = start + rng.choice([0, rng.randrange(60, 600) * 1000, rng.randrange(1, 40) * 3_600_000])
            offset = rng.choice([0, 0, 14 * 60, -12 * 60, 330])
            bundle, device = rng.choice(SOURCES[:3])
            thousandths = rng.randrange(0, 3000) * 1000 + (rng.randrange(1, 1000) if rng.random() < 0.3 else 0)
            sample = {"id": sample_id, "startDate": _text(start, offset), "endDate": _text(end, offset),
                      "count": contract.count_value(thousandths), "sourceBundleId": bundle, "sourceDeviceName": device}
            batch.append(sample)
            live[sample_id] = (start, end, thousandths, bundle, device)
        assert server.post(batch).status_code == 200

    write(200)
    # The model holds what the server holds (the whole seconds written above, read back).
    stored = {s["id"]: s for s in server.session.get(server.url + "/steps", params={"limit": 100000}).json()["samples"]}
    assert len(stored) == len(live)
    for k, v in live.items():
        s = stored[k]
        assert (contract.instant_ns(s["startDate"]) // 1_000_000, contract.instant_ns(s["endDate"]) // 1_000_000,
                contract.count_thousandths(s["count"])) == v[:3], (s, v)
    check()
    for step in range(12):
        step_name[0] = f"step {step}"
        if step == 7:
            assert server.delete().status_code == 200
            live.clear()
        elif step % 4 == 3:
            doomed = rng.sample(sorted(live), min(15, len(live)))
            assert server.delete_ids(doomed).status_code == 200
            for sample_id in doomed:
                del live[sample_id]
        else:
            write(rng.choice([1, 5, 40]))
        check()
    server.restart()
    check()


def test_a_sample_of_the_longest_duration_reaches_the_next_days(server):
    """A sample of exactly 48 hours (the contract's longest) that ends one second into the day asked
    for counts there: the storage bounds its range read by that duration (the index on the start), both
    when a write recomputes the days it touches and when a query merges from the samples."""
    longest = {"id": "longest", "startDate": "2024-03-08T00:00:01Z", "endDate": "2024-03-10T00:00:01Z", "count": 172_800,
               "sourceBundleId": "com.example.pedometer", "sourceDeviceName": None}
    offset = {"id": "offset", "startDate": "2024-03-08T01:00:01+01:00", "endDate": "2024-03-10T01:00:01+01:00",
              "count": 172_800, "sourceBundleId": "com.example.band", "sourceDeviceName": None}
    assert server.post([longest, offset]).status_code == 200
    days = daily(server, tz="UTC", **{"from": "2024-03-10", "to": "2024-03-10"}).json()["days"]
    assert days == [{"date": "2024-03-10", "merged": 1, "raw": 2}]


def test_another_process_s_writes_are_counted_at_once(server):
    """The daily totals are kept in the database by each write's own transaction: what another process
    writes through the storage (a second server, the tokens command's kind of neighbour) is in the very
    next answer, with nothing to invalidate."""
    from stepserver.contract import parse_samples
    from stepserver.storage import open_storage

    samples = [make_sample(n, count=100) for n in range(20)]
    server.post(samples)
    params = {"tz": "Asia/Kathmandu", "from": "2023-12-31", "to": "2024-01-02"}
    assert sum(row["raw"] for row in daily(server, **params).json()["days"]) == 2000
    other = open_storage(server.data, server.database, pool_size=1, check=False)
    try:
        assert other.delete_ids("alice", [samples[3]["id"]], "2024-01-20T15:00:00Z") == 1
        assert sum(row["raw"] for row in daily(server, **params).json()["days"]) == 1900
        body = json.dumps({"samples": [make_sample(99, id="by-another", count=7)]}).encode()
        assert other.save("alice", parse_samples(body, 2_000_000_000 * 10**9), "2024-01-20T15:00:00Z") == 1
        assert sum(row["raw"] for row in daily(server, **params).json()["days"]) == 1907
    finally:
        other.close()
    server.restart()
    assert sum(row["raw"] for row in daily(server, **params).json()["days"]) == 1907


def test_a_year_of_stored_totals_is_answered_without_a_reading_process(store, tmp_path):
    """Up to IN_PROCESS_DAYS of the default priority (in a zone whose days begin on a quarter hour) come
    from the stored daily totals in the request's thread; a longer range or another priority is an
    expensive read. With no expensive read allowed (a pool of 0: each is a 503), the year is answered,
    and its days are those of the same range made the expensive read's way."""
    from conftest import call
    from stepserver.app import create_app
    from stepserver.auth import SINGLE_USER
    from stepserver.routes.daily import IN_PROCESS_DAYS, document
    from stepserver.settings import Settings

    app = create_app(Settings(data=tmp_path / "data", single_user=True, max_expensive_reads=0), store)
    first = date(2023, 6, 1)
    samples = [make_sample(n, startDate=f"{first + timedelta(days=n // 3)}T{7 + n % 3 * 5:02d}:00:00Z",
                           endDate=f"{first + timedelta(days=n // 3)}T{7 + n % 3 * 5:02d}:20:00Z", count=100 + n,
                           sourceBundleId=["com.apple.health.A1", "com.example.band"][n % 2])
               for n in range(3 * 500)]
    assert call(app, "POST", "/steps", json.dumps({"samples": samples}).encode())[0] == 200

    def query(last: date, **extra) -> tuple[int, bytes]:
        text = f"tz=Europe/Paris&from={first}&to={last}&bySource=true" + "".join(f"&{k}={v}" for k, v in extra.items())
        status, _, body = call(app, "GET", "/steps/daily", query=text.encode())
        return status, body

    last = first + timedelta(days=IN_PROCESS_DAYS - 1)
    status, body = query(last)
    assert status == 200, body
    answered = json.loads(body)
    assert len(answered["days"]) == IN_PROCESS_DAYS and sum(day["raw"] for day in answered["days"]) > 0
    made = json.loads(document(store, lambda: None, SINGLE_USER, "Europe/Paris", first, last, True,
                               totals.DEFAULT_PRIORITY))
    assert answered == made
    assert query(last + timedelta(days=1))[0] == 503
    assert query(first + timedelta(days=30), priority="com.example.*")[0] == 503

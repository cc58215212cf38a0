"""The embedded backend's time index (UserLog.by_start_date, date_spans): a range read takes the lines
whose startDate's date lies from the day before the range's first UTC date, or earlier as far as the
lines of that date reach (their greatest span of dates), to the day after its last. Checked against
every live sample that overlaps, after writes and after the index is rebuilt from the file: a sample
spanning three dates is still found on its last UTC day, and a day of samples that start and end on
one date reads three dates of lines, not six."""

from __future__ import annotations

import random
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from stepserver.contract import SampleFields, instant_ns  # noqa: E402
from stepserver.storage.user_log import UserLog  # noqa: E402

RECEIVED = "2026-11-25T12:00:00Z"
DAY_NS = 86_400_000_000_000
BASE = datetime(2026, 3, 1, tzinfo=timezone.utc)


def text(moment: datetime, minutes: int) -> str:
    if minutes == 0:
        return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
    local = moment + timedelta(minutes=minutes)
    return local.strftime("%Y-%m-%dT%H:%M:%S") + f"{'+' if minutes > 0 else '-'}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


def overlapping(samples: dict[str, SampleFields], start_ns: int, end_ns: int) -> list[tuple[int, int, int]]:
    found = []
    for sample in samples.values():
        start, end = instant_ns(sample.startDate) // 1_000_000, instant_ns(sample.endDate) // 1_000_000
        if end * 1_000_000 >= start_ns and start * 1_000_000 < end_ns:
            found.append((start, end, sample.count))
    return sorted(found)


def read(user_log: UserLog, start_ns: int, end_ns: int) -> list[tuple[int, int, int]]:
    columns = user_log.sample_columns_between(start_ns, end_ns)
    return sorted(zip(columns.start.tolist(), columns.end.tolist(), columns.count.tolist()))


def lines_read(user_log: UserLog, start_ns: int, end_ns: int) -> int:
    return sum(len(lines) for lines in user_log._current_lines_between(start_ns, end_ns))


def test_a_day_reads_three_dates_of_lines_and_still_finds_samples_spanning_three_dates(tmp_path):
    rng = random.Random(3)
    path = tmp_path / "u.jsonl"
    user_log = UserLog("u", path)
    user_log.open()
    live: dict[str, SampleFields] = {}
    per_date = 20
    # Short samples: every date of 2026-02-20..2026-03-19, in UTC and at offsets up to 14 hours
    # either way (a text's date then differs from its UTC date), each within one text date.
    batch = []
    for day in range(28):
        for n in range(per_date):
            minutes = rng.choice([0, 0, 60, -300, 345, 840, -720])
            local_midnight = BASE + timedelta(days=day - 9) - timedelta(minutes=minutes)
            start = local_midnight + timedelta(seconds=rng.randrange(0, 86_400 - 3_600))
            end = start + timedelta(seconds=rng.randrange(0, 3_600))
            sample = SampleFields(f"s{day}-{n}", text(start, minutes), text(end, minutes), rng.randrange(1, 500), "com.example", None)
            assert sample.startDate[:10] == sample.endDate[:10]
            batch.append(sample)
    # Long ones: 47 hours from late on a date west of UTC (three text dates, and a fourth UTC date).
    for n, day in enumerate([2, 9, 15]):
        start = BASE + timedelta(days=day, hours=3)  # 22:00 the day before at -05:00
        batch.append(SampleFields(f"long{n}", text(start, -300), text(start + timedelta(hours=47), -300), 1000 + n,
                                  "com.example", "Watch"))
    for first in range(0, len(batch), 97):
        part = batch[first : first + 97]
        live.update((sample.id, sample) for sample in part)
        assert user_log.save(list(part), RECEIVED) == len(part)
    assert max(user_log.date_spans.values()) == 2

    def check(log: UserLog) -> None:
        for day in range(-8, 22):
            start_ns = int((BASE + timedelta(days=day)).timestamp()) * 1_000_000_000
            for end_ns in (start_ns + DAY_NS, start_ns + 3 * DAY_NS):
                assert read(log, start_ns, end_ns) == overlapping(live, start_ns, end_ns), (day, end_ns - start_ns)
        # A day between the long samples: its lines are those of three dates (the day before to the
        # day after), not the six the index's longest span would allow.
        start_ns = int((BASE + timedelta(days=6)).timestamp()) * 1_000_000_000
        assert lines_read(log, start_ns, start_ns + DAY_NS) <= 3 * per_date + 1
        # The last UTC day of a long sample (it began on the text date three days before).
        start_ns = int((BASE + timedelta(days=11)).timestamp()) * 1_000_000_000
        assert (1001 in [count for _, _, count in read(log, start_ns, start_ns + DAY_NS)])

    check(user_log)
    # Replaced and deleted versions stay indexed (stale): still only the live ones.
    moved = live["long1"]
    live["long1"] = SampleFields("long1", moved.startDate, moved.endDate, 7, "com.example", "Watch")
    assert user_log.save([live["long1"]], RECEIVED) == 1
    assert user_log.delete_ids(["s5-0", "long2"], RECEIVED) == 2
    del live["s5-0"], live["long2"]
    live["long1"] = SampleFields("long1", moved.startDate, moved.endDate, 1001, "com.example", "Watch")
    assert user_log.save([live["long1"]], RECEIVED) == 1
    check(user_log)
    user_log.close()
    reopened = UserLog("u", path)  # the index rebuilt from the file
    reopened.open()
    try:
        assert reopened.date_spans == user_log.date_spans
        check(reopened)
    finally:
        reopened.close()


def test_the_parses_start_dates_index_as_the_texts_do(tmp_path):
    """A batch from the contract's fast parse hands its start dates and whether every sample ends on
    its start date to the index (ParsedSamples); the index is the same as from the texts."""
    import json
    import time

    from stepserver.contract import DateWindow, ParsedSamples, parse_samples

    rng = random.Random(5)
    logs = [UserLog(name, tmp_path / f"{name}.jsonl") for name in ("parsed", "plain")]
    for user_log in logs:
        user_log.open()
    window = DateWindow(time.time_ns())
    for round_number in range(12):
        crossing = round_number % 3 == 0  # some batches hold samples across midnight, some do not
        millis = round_number % 2 == 1
        samples = []
        for n in range(150):
            start = BASE + timedelta(days=rng.randrange(0, 5), seconds=rng.randrange(0, 86_400 - 120))
            if crossing and n % 7 == 0:
                start = start.replace(hour=23, minute=59)
            end = start + timedelta(seconds=rng.randrange(0, 119))
            shape = "%Y-%m-%dT%H:%M:%S.{ms}Z" if millis else "%Y-%m-%dT%H:%M:%SZ"
            samples.append({"id": f"r{round_number}-{n}", "startDate": start.strftime(shape).format(ms="123"),
                            "endDate": end.strftime(shape).format(ms="456"), "count": n, "sourceBundleId": "b"})
        body = bytearray(json.dumps({"samples": samples}).encode())
        parsed = parse_samples(body, window)
        assert isinstance(parsed, ParsedSamples) and parsed.start_days is not None
        assert parsed.same_day == all(s["startDate"][:10] == s["endDate"][:10] for s in samples)
        plain = list(parse_samples(body, window))
        assert logs[0].save(parsed, RECEIVED) == logs[1].save(plain, RECEIVED) == 150
    parsed_log, plain_log = logs
    assert parsed_log.date_spans == plain_log.date_spans
    assert set(parsed_log.by_start_date) == set(plain_log.by_start_date)
    for date, offsets in plain_log.by_start_date.items():
        # The files hold the same lines at the same offsets (one receivedAt, ids in the same order).
        assert list(parsed_log.by_start_date[date]) == list(offsets), date
    for user_log in logs:
        user_log.close()

"""The daily totals the database keeps (table daily_totals, docs/TOTALS.md section 9), and the answer
of GET /steps/daily made from them.

Per user, UTC day and source: the merged and raw steps of the merge of docs/TOTALS.md section 4 with
the default priority, and the same cut at every UTC quarter hour of the day (two lists of 96
integers), all in thousandths of a step. A write rewrites the UTC days it touched from the live samples, in its own transaction
(storage/store.py), so every reader finds them current: no cache, no invalidation. Its own samples are
merged from memory (before the transaction, as if alone on their days: rows_by_day); only the days on
which the transaction finds other live samples are merged again with them. A local day in any
zone whose days start on a quarter hour is a run of whole quarter hours, and since a piece of a
sample holds F(b) - F(a) with F floored cumulatively, summing the quarters of a local day gives
exactly the merge of that day. Any other priority, or a day that does not start on a quarter hour,
is merged from the samples (routes/daily.py).
"""

from __future__ import annotations

from bisect import bisect_right
from datetime import date
from typing import Iterable, Optional
from zoneinfo import ZoneInfo

import msgspec

from .totals import DEFAULT_PRIORITY, day_cuts, document, merge_between_cuts, source_order_key

QUARTER_MS = 15 * 60 * 1000
QUARTERS = 96
DAY_MS = QUARTERS * QUARTER_MS
DAY_NS = DAY_MS * 1_000_000
_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
_encode = msgspec.json.Encoder().encode
_decode_quarters = msgspec.json.Decoder(list[int]).decode


def day_text(day: int) -> str:
    """A UTC day (days since 1970) as YYYY-MM-DD, the table's key."""
    return date.fromordinal(day + _EPOCH_ORDINAL).isoformat()


def day_number(text: str) -> int:
    """The UTC day (days since 1970) of a YYYY-MM-DD text: day_text's inverse."""
    return date.fromisoformat(text).toordinal() - _EPOCH_ORDINAL


def touched_days(spans: Iterable[tuple]) -> list[tuple[int, int]]:
    """Runs (first, last) of the UTC days (days since 1970) that samples (start_ms, end_ms, …) overlap."""
    return runs_of(days_touched(spans))


def days_touched(spans: Iterable[tuple]) -> set[int]:
    """The UTC days that samples (start_ms, end_ms, …) overlap (an instantaneous one: its start's day)."""
    days: set[int] = set()
    for span in spans:
        start, end = span[0], span[1]
        first, last = start // DAY_MS, (end - 1 if end > start else start) // DAY_MS
        days.add(first)
        if last != first:
            days.update(range(first + 1, last + 1))
    return days


def runs_of(days: Iterable[int]) -> list[tuple[int, int]]:
    """Days as runs (first, last) of consecutive ones, in order."""
    runs: list[list[int]] = []
    for day in sorted(days):
        if runs and day == runs[-1][1] + 1:
            runs[-1][1] = day
        else:
            runs.append([day, day])
    return [(first, last) for first, last in runs]


def rows_by_day(samples: list[tuple[int, int, int, str, Optional[str]]]) -> dict[str, list[tuple]]:
    """day_rows of every UTC day the samples (start_ms, end_ms, count in thousandths, bundle, device) overlap, merged
    from them alone, by day (its text). A sample's days are consecutive, so it lies in one run of them."""
    runs = touched_days(samples)
    groups: list[list[tuple]] = [[] for _ in runs]
    firsts = [first for first, _ in runs]
    for sample in samples:
        groups[bisect_right(firsts, sample[0] // DAY_MS) - 1].append(sample)
    by_day: dict[str, list[tuple]] = {}
    for (first, last), group in zip(runs, groups):
        for row in day_rows(group, first, last):
            by_day.setdefault(row[0], []).append(row)
    return by_day


def day_rows(samples: Iterable[tuple[int, int, int, str, Optional[str]]], first: int, last: int) -> list[tuple]:
    """The daily_totals rows of the UTC days first .. last from every live sample overlapping them
    (start_ms, end_ms, count in thousandths, bundle, device): (day, bundle, device, merged, raw, merged_quarters,
    raw_quarters), one per day and source with steps."""
    cuts = list(range(first * DAY_MS, (last + 1) * DAY_MS + 1, QUARTER_MS))
    order, raw, merged = merge_between_cuts(samples, cuts, DEFAULT_PRIORITY)
    rows = []
    for day in range(first, last + 1):
        offset = (day - first) * QUARTERS
        for k, (bundle, device) in enumerate(order):
            raw_quarters = raw[k][offset : offset + QUARTERS]
            if any(raw_quarters):
                merged_quarters = merged[k][offset : offset + QUARTERS]
                rows.append((day_text(day), bundle, device, sum(merged_quarters), sum(raw_quarters),
                             _encode(merged_quarters).decode(), _encode(raw_quarters).decode()))
    return rows


def local_day_cuts(first: date, last: date, zone: ZoneInfo) -> Optional[list[int]]:
    """day_cuts, when every day of the range starts on a UTC quarter hour (else None)."""
    cuts = day_cuts(first, last, zone)
    return cuts if all(cut % QUARTER_MS == 0 for cut in cuts) else None


def utc_day_range(cuts: list[int]) -> tuple[str, str]:
    """The UTC days (as stored) that the local days between the cuts overlap."""
    return day_text(cuts[0] // DAY_MS), day_text((cuts[-1] - 1) // DAY_MS)


def document_from_rows(rows: Iterable[tuple[str, str, Optional[str], str, str]], zone_name: str, first: date,
                       last: date, cuts: list[int], by_source: bool) -> dict:
    """The daily document (default priority) from the stored rows (day, bundle, device,
    merged_quarters, raw_quarters) of the UTC days the local days between `cuts` overlap: each local
    day's steps are the sums of its quarter hours in the two or three UTC days it spans."""
    stored: dict[tuple[str, Optional[str]], dict[int, tuple[list[int], list[int]]]] = {}
    for day, bundle, device, merged_text, raw_text in rows:
        number = date.fromisoformat(day).toordinal() - _EPOCH_ORDINAL
        stored.setdefault((bundle, device), {})[number] = (_decode_quarters(merged_text), _decode_quarters(raw_text))
    order = sorted(stored, key=lambda key: source_order_key(key, DEFAULT_PRIORITY))
    spans = [(start // QUARTER_MS, end // QUARTER_MS) for start, end in zip(cuts, cuts[1:])]  # local days, in quarters
    raw, merged = [], []
    for key in order:
        days = stored[key]
        merged_days, raw_days = [], []
        for low, high in spans:
            merged_steps = raw_steps = 0
            for day in range(low // QUARTERS, (high - 1) // QUARTERS + 1):
                quarters = days.get(day)
                if quarters is not None:
                    begin, end = max(low - day * QUARTERS, 0), min(high - day * QUARTERS, QUARTERS)
                    merged_steps += sum(quarters[0][begin:end])
                    raw_steps += sum(quarters[1][begin:end])
            merged_days.append(merged_steps)
            raw_days.append(raw_steps)
        merged.append(merged_days)
        raw.append(raw_days)
    return document(zone_name, first, last, DEFAULT_PRIORITY, order, raw, merged, by_source)

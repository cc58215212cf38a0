"""Daily totals merged across sources, as docs/TOTALS.md defines them (the Swift side is
Sources/StepSync/Totals/). Exact integer arithmetic in thousandths of a step; times in whole
milliseconds since 1970 UTC (a sample's nanoseconds are floored to milliseconds, as the store keeps
them). The document shows whole steps, each total rounded half to even (steps()).

How it computes the merge: sources are taken in priority order, highest first. The instants covered
by the sources ranked above the current one are kept as a sorted list of disjoint intervals; each of
the current source's samples counts, toward the merged totals, only on the parts of its interval
outside them (the instants its source wins), and then its interval joins them. Raw totals split
every sample over days without any of that. Pieces are F(b) - F(a) with F(t), in thousandths, the
whole steps' floor(w * p) * 1000 plus the fraction's floor(f * p) thousandths, for a count of
w steps and f thousandths and p = (t - start) / (end - start) (done()): a sample's pieces always add up
to its count, and a whole count's pieces are 1000 times the whole-step rule's.
"""

from __future__ import annotations

from bisect import bisect_right
from datetime import date, datetime, timedelta, timezone
from typing import Iterable, Optional
from zoneinfo import ZoneInfo

DEFAULT_PRIORITY = ["=Health", "=com.apple.Health", "Apple Watch", "iPhone", "iPod"]
APPLE_DEVICE_PREFIX = "com.apple.health."


def normalize(text: str) -> str:
    text = text.replace("\u00a0", " ").replace("\u2019", "'")
    return "".join(chr(ord(c) + 32) if "A" <= c <= "Z" else c for c in text)


def source_names(bundle: str, device: Optional[str]) -> list[str]:
    """What priority patterns are matched against (TOTALS.md section 1): an Apple device's own source
    (bundle id com.apple.health.…) by its device name and by the rest of its bundle id, any other
    source by its bundle id."""
    if not bundle.startswith(APPLE_DEVICE_PREFIX):
        return [bundle]
    rest = bundle[len(APPLE_DEVICE_PREFIX):]
    return [rest] if device is None else [device, rest]


def rank(bundle: str, device: Optional[str], patterns: list[str]) -> int:
    names = [normalize(name) for name in source_names(bundle, device)]
    for index, pattern in enumerate(patterns):
        if pattern.startswith("="):
            if normalize(pattern[1:]) in names:
                return index
        elif any(normalize(pattern) in name for name in names):
            return index
    return len(patterns)


def day_start_ms(day: date, zone: ZoneInfo) -> int:
    """The least whole second t with localDate(t) >= day, in milliseconds (TOTALS.md section 3)."""
    base = int(datetime(day.year, day.month, day.day, tzinfo=timezone.utc).timestamp())
    low, high = base - 26 * 3600, base + 26 * 3600
    # Usually local midnight: try it first, then fall back to the binary search of the reference.
    guess = datetime(day.year, day.month, day.day, tzinfo=zone)
    candidate = int(guess.timestamp())
    if (datetime.fromtimestamp(candidate, zone).date() >= day
            and datetime.fromtimestamp(candidate - 1, zone).date() < day):
        return candidate * 1000
    while low < high:
        middle = (low + high) // 2
        if datetime.fromtimestamp(middle, zone).date() >= day:
            high = middle
        else:
            low = middle + 1
    return low * 1000


def steps(thousandths: int) -> int:
    """Whole steps from thousandths, rounded half to even (Swift: DailyTotals.steps)."""
    whole, fraction = divmod(thousandths, 1000)
    return whole + 1 if fraction > 500 or (fraction == 500 and whole % 2) else whole


def done(whole: int, fraction: int, elapsed: int, span: int) -> int:
    """F at start + elapsed, in thousandths, of a sample of whole steps and fraction thousandths over span ms."""
    completed = whole * elapsed // span * 1000
    return completed + fraction * elapsed // span if fraction else completed


def _pieces(start: int, end: int, count: int, a: int, b: int, cuts: list[int], out: list[int], offset: int) -> None:
    """Adds to out[offset + d] the thousandths of the sample's part [a, b) that fall in day d, where
    day d is [cuts[d], cuts[d + 1])."""
    span = end - start
    whole, fraction = divmod(count, 1000)
    first = max(bisect_right(cuts, a) - 1, 0)
    day = first
    position = a
    before = done(whole, fraction, position - start, span)
    while position < b and day < len(cuts) - 1:
        stop = min(b, cuts[day + 1])
        if stop > position:
            reached = done(whole, fraction, stop - start, span)
            out[offset + day] += reached - before
            before = reached
            position = stop
        day += 1


def source_order_key(key: tuple[str, Optional[str]], patterns: list[str]) -> tuple:
    """Sorts sources (bundle, device) into priority order, highest first (TOTALS.md section 2)."""
    return (rank(key[0], key[1], patterns), key[0], key[1] is not None, key[1] or "")


def daily_totals(samples: Iterable[tuple[int, int, int, str, Optional[str]]], zone_name: str, first: date,
                 last: date, patterns: list[str], by_source: bool) -> dict:
    """samples: (start_ms, end_ms, count in thousandths, bundle, device). Returns the document of TOTALS.md
    section 5."""
    cuts = day_cuts(first, last, ZoneInfo(zone_name))
    order, raw, merged = merge_between_cuts(samples, cuts, patterns)
    return document(zone_name, first, last, patterns, order, raw, merged, by_source)


def day_cuts(first: date, last: date, zone: ZoneInfo) -> list[int]:
    """The starts of the days first .. last + 1 in the zone (ms): day d is [cuts[d], cuts[d + 1])."""
    return [day_start_ms(first + timedelta(days=d), zone) for d in range((last - first).days + 2)]


def document(zone_name: str, first: date, last: date, patterns: list[str], order: list[tuple[str, Optional[str]]],
             raw: list[list[int]], merged: list[list[int]], by_source: bool) -> dict:
    """The document of TOTALS.md section 5 from each source's raw and merged thousandths per day
    (sources in priority order, as merge_between_cuts gives them), each total in whole steps."""
    rows = []
    for d in range((last - first).days + 1):
        row: dict = {"date": (first + timedelta(days=d)).isoformat(),
                     "merged": steps(sum(merged[k][d] for k in range(len(order)))),
                     "raw": steps(sum(raw[k][d] for k in range(len(order))))}
        if by_source:
            row["sources"] = [{"bundleId": key[0], "deviceName": key[1], "merged": steps(merged[k][d]), "raw": steps(raw[k][d])}
                              for k, key in enumerate(order) if raw[k][d] > 0]
        rows.append(row)
    return {"timeZone": zone_name, "from": first.isoformat(), "to": last.isoformat(), "priority": patterns, "days": rows}


def merge_between_cuts(samples: Iterable[tuple[int, int, int, str, Optional[str]]], cuts: list[int],
                       patterns: list[str]) -> tuple[list[tuple[str, Optional[str]]], list[list[int]], list[list[int]]]:
    """The merge of TOTALS.md section 4 over the intervals [cuts[i], cuts[i + 1]) (ascending instants,
    in ms): the sources in priority order, and per source the raw and merged thousandths of each interval.
    Days are such intervals; so are the quarter hours of the stored daily totals (daily_totals.py). A day's
    numbers are the sums of its pieces' numbers however it is cut (F is floored cumulatively)."""
    days = len(cuts) - 1
    begin, finish = cuts[0], cuts[-1]

    by_key: dict[tuple[str, Optional[str]], list[tuple[int, int, int]]] = {}
    for start, end, count, bundle, device in samples:
        by_key.setdefault((bundle, device), []).append((start, end, count))
    order = sorted(by_key, key=lambda key: source_order_key(key, patterns))

    raw = [[0] * days for _ in order]
    merged = [[0] * days for _ in order]
    covered_starts: list[int] = []  # disjoint, sorted intervals covered by the sources ranked above
    covered_ends: list[int] = []
    for k, key in enumerate(order):
        own: list[tuple[int, int]] = []
        raw_k, merged_k = raw[k], merged[k]
        # No source above covers an instant (this is the highest, or those above hold only instantaneous
        # samples): this one wins every instant, and its merged numbers are its raw ones.
        wins_all = not covered_starts
        for start, end, count in by_key[key]:
            if start == end:
                if begin <= start < finish:
                    day = bisect_right(cuts, start) - 1
                    raw_k[day] += count
                    i = bisect_right(covered_starts, start) - 1
                    if not (i >= 0 and start < covered_ends[i]):
                        merged_k[day] += count
                continue
            a = start if start > begin else begin  # [a, b): the sample's part between the first and last cut
            b = end if end < finish else finish
            own.append((start, end))
            if a >= b:
                continue
            span = end - start
            whole, fraction = divmod(count, 1000)
            day = bisect_right(cuts, a) - 1
            if b <= cuts[day + 1]:  # the usual sample, inside one interval: its one piece, inline
                if a == start and b == end:
                    raw_k[day] += count
                else:
                    raw_k[day] += (whole * (b - start) // span - whole * (a - start) // span) * 1000 + (
                        fraction * (b - start) // span - fraction * (a - start) // span if fraction else 0)
            else:
                _pieces(start, end, count, a, b, cuts, raw_k, 0)
            if wins_all:
                continue
            # The parts of [a, b) that no higher source covers: between the covered intervals.
            i = bisect_right(covered_ends, a)  # the first covered interval ending after a
            position = a
            while position < b:
                if i < len(covered_starts) and covered_starts[i] <= position:
                    position = covered_ends[i]  # inside a covered interval: skip to its end
                    i += 1
                    continue
                stop = min(b, covered_starts[i]) if i < len(covered_starts) else b
                if stop <= cuts[day + 1] and position >= cuts[day]:
                    merged_k[day] += (whole * (stop - start) // span - whole * (position - start) // span) * 1000 + (
                        fraction * (stop - start) // span - fraction * (position - start) // span if fraction else 0)
                else:
                    _pieces(start, end, count, position, stop, cuts, merged_k, 0)
                position = stop
        if wins_all:
            merged[k] = list(raw_k)
        if own:
            covered_starts, covered_ends = _union(covered_starts, covered_ends, own)

    return order, raw, merged


def _union(starts: list[int], ends: list[int], more: list[tuple[int, int]]) -> tuple[list[int], list[int]]:
    intervals = sorted(list(zip(starts, ends)) + more)
    out_starts: list[int] = []
    out_ends: list[int] = []
    for a, b in intervals:
        if out_ends and a <= out_ends[-1]:
            if b > out_ends[-1]:
                out_ends[-1] = b
        else:
            out_starts.append(a)
            out_ends.append(b)
    return out_starts, out_ends

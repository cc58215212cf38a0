"""GET /steps/daily?tz=ZONE&from=YYYY-MM-DD&to=YYYY-MM-DD[&bySource=true][&priority=P1,P2]: the caller's
daily totals merged across sources (docs/TOTALS.md), the same document as `stepsync daily --json`.
With the default priority, in a zone whose days start on quarter hours, from the daily totals the
database keeps (daily_totals.py): a few rows a day, so a range of up to IN_PROCESS_DAYS is answered in
the request's thread like a small page. A longer range, and any other priority (merged from the
samples, DAYS_A_CHUNK days at a time: memory bounded by a chunk's samples, the work stopping between
chunks once the client has gone), is an expensive read (expensive_reads.py)."""

from __future__ import annotations

import json
from datetime import date, timedelta
from typing import Callable, Optional
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from .. import contract, daily_totals
from ..app import Context, encode, json_response, query_text
from ..errors import bad_request
from ..query import parse_query
from ..totals import DEFAULT_PRIORITY, day_cuts, daily_totals as merged_document

QUERY = {"tz": "zone", "from": "date", "to": "date", "bySource": "bool", "priority": "text"}
_NS_PER_MS = 1_000_000
DAYS_A_CHUNK = 92
IN_PROCESS_DAYS = 400  # a year and a bit of stored totals: ~20 ms of work, no reading process to wake
_LAST_NS = 2 ** 63 - 1  # the databases' integers: days after 2262 hold no sample (none ends after the server's time + 24 h)


def parse_daily_query(query: str) -> tuple[str, date, date, bool, list[str]]:
    values = parse_query(query, QUERY)
    zone = values.get("tz", "UTC")
    try:
        ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError):
        raise bad_request(f"tz: unknown time zone {json.dumps(zone)}") from None
    days = {}
    for name in ("from", "to"):
        if name not in values:
            raise bad_request(f"{name}: required (YYYY-MM-DD)")
        try:
            days[name] = date.fromisoformat(values[name])
        except ValueError:
            raise bad_request(f"{name}: not a calendar date (got {json.dumps(values[name])})") from None
    first, last = days["from"], days["to"]
    if last < first:
        raise bad_request(f"to: must not be before from ({last} < {first})")
    if (last - first).days + 1 > contract.MAX_DAILY_DAYS:
        raise bad_request(f"to: at most {contract.MAX_DAILY_DAYS} days a request (got {(last - first).days + 1})")
    if first.year < contract.MIN_DAILY_YEAR or last.year > contract.MAX_DAILY_YEAR:
        raise bad_request(f"from: dates must lie between {contract.MIN_DAILY_YEAR} and {contract.MAX_DAILY_YEAR}")
    patterns = DEFAULT_PRIORITY
    if "priority" in values:
        patterns = [pattern.strip(" \t") for pattern in values["priority"].split(",")]
        if len(patterns) > contract.MAX_PRIORITY_PATTERNS or any(len(p) > contract.MAX_PRIORITY_PATTERN_BYTES for p in patterns):
            raise bad_request(f"priority: at most {contract.MAX_PRIORITY_PATTERNS} patterns of at most "
                              f"{contract.MAX_PRIORITY_PATTERN_BYTES} characters each")
        if any(not pattern or pattern == "=" for pattern in patterns):
            raise bad_request("priority: an empty pattern (patterns are separated by commas)")
    return zone, first, last, values.get("bySource") == "true", patterns


def stored_cuts(zone: str, first: date, last: date, patterns: list[str]) -> Optional[list[int]]:
    """The local days' cuts when the stored daily totals answer the query (else None)."""
    return daily_totals.local_day_cuts(first, last, ZoneInfo(zone)) if patterns == DEFAULT_PRIORITY else None


def stored_document(store, user: str, zone: str, first: date, last: date, by_source: bool, cuts: list[int]) -> bytes:
    """The daily totals' document from the stored daily totals."""
    rows = store.daily_rows(user, *daily_totals.utc_day_range(cuts))
    return encode(daily_totals.document_from_rows(rows, zone, first, last, cuts, by_source))


def document(store, check_gone: Callable[[], None], user: str, zone: str, first: date, last: date, by_source: bool,
             patterns: list[str]) -> bytes:
    """The daily totals' document (in a reading process: expensive_reads.py)."""
    cuts = stored_cuts(zone, first, last, patterns)
    if cuts is not None:
        return stored_document(store, user, zone, first, last, by_source, cuts)
    zone_info = ZoneInfo(zone)
    days: list = []
    low = first
    while low <= last:
        check_gone()
        high = min(last, low + timedelta(days=DAYS_A_CHUNK - 1))
        cuts = day_cuts(low, high, zone_info)
        samples = store.samples_between(user, *(min(cut * _NS_PER_MS, _LAST_NS) for cut in (cuts[0], cuts[-1])))
        days += merged_document(samples, zone, low, high, patterns, by_source)["days"]
        low = high + timedelta(days=1)
    return encode({"timeZone": zone, "from": first.isoformat(), "to": last.isoformat(), "priority": patterns, "days": days})


def routes(context: Context) -> list:
    async def daily(request: Request) -> Response:
        user = await context.user(request)
        zone, first, last, by_source, patterns = parse_daily_query(query_text(request))
        if (last - first).days < IN_PROCESS_DAYS:
            cuts = stored_cuts(zone, first, last, patterns)
            if cuts is not None:
                return json_response(await run_in_threadpool(stored_document, context.store, user, zone, first, last,
                                                             by_source, cuts))
        return json_response(await context.expensive_reads.run(request, user, document, zone, first, last, by_source,
                                                               patterns))

    return [("/steps/daily", daily, ["GET"])]

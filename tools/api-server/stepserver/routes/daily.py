"""GET /steps/daily?tz=ZONE&from=YYYY-MM-DD&to=YYYY-MM-DD[&bySource=true][&priority=P1,P2]: the caller's
daily totals merged across sources (docs/TOTALS.md), the same document as `stepsync daily --json`.
With the default priority, from the daily totals the database keeps (daily_totals.py); otherwise
merged from the samples."""

from __future__ import annotations

import json
from datetime import date
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from .. import contract, daily_totals
from ..app import Context, json_response, query_text
from ..errors import bad_request
from ..totals import DEFAULT_PRIORITY, day_cuts, daily_totals as merged_document

QUERY = {"tz": "zone", "from": "date", "to": "date", "bySource": "bool", "priority": "text"}
_NS_PER_MS = 1_000_000


def parse_daily_query(query: str) -> tuple[str, date, date, bool, list[str]]:
    values = contract.parse_query(query, QUERY)
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
    if first.year < 1990 or last.year > 9998:
        raise bad_request("from: dates must lie between 1990 and 9998")
    patterns = DEFAULT_PRIORITY
    if "priority" in values:
        patterns = [pattern.strip(" \t") for pattern in values["priority"].split(",")]
        if any(not pattern or pattern == "=" for pattern in patterns):
            raise bad_request("priority: an empty pattern (patterns are separated by commas)")
    return zone, first, last, values.get("bySource") == "true", patterns


def routes(context: Context) -> list:
    store = context.store

    async def daily(request: Request) -> Response:
        zone, first, last, by_source, patterns = parse_daily_query(query_text(request))
        user = await context.user(request)

        def handle() -> dict:
            zone_info = ZoneInfo(zone)
            cuts = daily_totals.local_day_cuts(first, last, zone_info) if patterns == DEFAULT_PRIORITY else None
            if cuts is not None:
                rows = store.daily_rows(user, *daily_totals.utc_day_range(cuts))
                return daily_totals.document_from_rows(rows, zone, first, last, cuts, by_source)
            cuts = day_cuts(first, last, zone_info)
            samples = store.samples_between(user, cuts[0] * _NS_PER_MS, cuts[-1] * _NS_PER_MS)
            return merged_document(samples, zone, first, last, patterns, by_source)

        return json_response(await run_in_threadpool(handle))

    return [("/steps/daily", daily, ["GET"])]

"""GET /steps/daily?tz=ZONE&from=YYYY-MM-DD&to=YYYY-MM-DD[&bySource=true][&priority=P1,P2]: the caller's
daily totals merged across sources (docs/TOTALS.md), the same document as `stepsync daily --json`."""

from __future__ import annotations

import json

import msgspec
from datetime import date, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from starlette.requests import Request
from starlette.responses import Response

from .. import contract
from ..app import Context, json_response, query_text
from ..errors import bad_request
from ..totals import DEFAULT_PRIORITY, daily_totals, day_start_ms

_encoder = msgspec.json.Encoder()  # the same bytes as json.dumps(ensure_ascii=False, separators=(",", ":"))
QUERY = {"tz": "zone", "from": "date", "to": "date", "bySource": "bool", "priority": "text"}
_MS = 1_000_000


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
    storage = context.storage

    async def daily(request: Request) -> Response:
        zone, first, last, by_source, patterns = parse_daily_query(query_text(request))
        if not context.settings.single_user and not request.headers.get("authorization"):
            context.user(request)  # raises the 401

        def handle() -> bytes:
            user = context.user(request)
            zone_info = ZoneInfo(zone)
            context.refresh(user)  # (--workers) what the other workers wrote reaches the caches first
            cache = context.daily_cache
            version = cache.version(user)  # before reading any sample: see totals_cache.py, Races
            known, missing = cache.lookup(user, zone, patterns, first, last)
            computed: list[tuple[int, dict]] = []
            for run_first, run_last in missing:
                day_first, day_last = date.fromordinal(run_first), date.fromordinal(run_last)
                if patterns == DEFAULT_PRIORITY:  # summed from the buckets kept on write, when the days allow
                    rows = context.daily_buckets.rows(user, zone_info, day_first, day_last)
                    if rows is not None:
                        computed.extend(zip(range(run_first, run_last + 1), rows))
                        continue
                begin = day_start_ms(day_first, zone_info) * _MS
                end = day_start_ms(day_last + timedelta(days=1), zone_info) * _MS
                samples = ((s.start_ns // _MS, s.end_ns // _MS, s.count, s.source_bundle_id, s.source_device_name)
                           for s in storage.samples_between(user, begin, end))
                rows = daily_totals(samples, zone, day_first, day_last, patterns, True)["days"]
                computed.extend(zip(range(run_first, run_last + 1), rows))
            if computed:
                cache.store(user, version, zone, patterns, computed)
                known.update(computed)
            rows = [known[day] for day in range(first.toordinal(), last.toordinal() + 1)]
            if not by_source:
                rows = [{"date": row["date"], "merged": row["merged"], "raw": row["raw"]} for row in rows]
            document = {"timeZone": zone, "from": first.isoformat(), "to": last.isoformat(), "priority": patterns, "days": rows}
            return _encoder.encode(document)

        return json_response(await context.in_thread(handle))

    return [("/steps/daily", daily, ["GET"])]

"""The digest routes a client uses to prove that the server holds what it acknowledged, and to find
what differs where it does not (docs/RECONCILE.md). Each is the caller's own data only, and none
costs more than O(days) of the history:

  GET  /steps/digest?uploader=U                          who answers (server id, user) and the digest
                                                         of every live sample U last wrote: one row a
                                                         day summed
  GET  /steps/digest/days?uploader=U[&after=D][&limit=N] the digest of each UTC day, in day order
  GET  /steps/digest/samples?uploader=U&day=D[&after=ID][&limit=N]
                                                         the ids and content hashes of one day, by id
  POST /steps/digest/lookup {"ids":[…]}                  what the server knows of up to 1,000 ids: live
                                                         (who wrote it, its day and hash) or deleted (by whom)
"""

from __future__ import annotations

from datetime import date

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from .. import answers, contract, digests
from ..app import Context, json_response, query_text
from ..daily_totals import day_text
from ..errors import bad_request
from ..query import bounded_int, parse_query
from ..request_body import read_body

MAX_DAYS_PER_PAGE = 4000  # more than ten years in one answer
MAX_SAMPLES_PER_PAGE = 10_000
_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()


def _day_number(values: dict[str, str], name: str) -> int:
    try:
        return date.fromisoformat(values[name]).toordinal() - _EPOCH_ORDINAL
    except ValueError:
        raise bad_request(f"{name}: not a calendar date (got {values[name]!r})") from None


def _uploader(values: dict[str, str]) -> str:
    if "uploader" not in values:
        raise bad_request("uploader: required (the client's store id)")
    return values["uploader"]


def routes(context: Context) -> list:
    store = context.store

    async def digest(request: Request) -> Response:
        user = await context.user(request)
        uploader = _uploader(parse_query(query_text(request), {"uploader": "id"}))

        def handle() -> answers.UploaderDigest:
            count, total, days = store.uploader_digest(user, uploader)
            return answers.UploaderDigest(store.server_id(), user, uploader, count, digests.hex_digest(total), days)

        return json_response(await run_in_threadpool(handle))

    async def days(request: Request) -> Response:
        user = await context.user(request)
        values = parse_query(query_text(request), {"uploader": "id", "after": "date", "limit": "digits"})
        uploader = _uploader(values)
        after = _day_number(values, "after") if "after" in values else None
        limit = max(1, bounded_int(values, "limit", MAX_DAYS_PER_PAGE, MAX_DAYS_PER_PAGE))
        rows = await run_in_threadpool(store.day_digests, user, uploader, after, limit)
        return json_response({"days": [digests.day_answer(*row) for row in rows],
                              "next": day_text(rows[-1][0]) if len(rows) == limit else None})

    async def samples(request: Request) -> Response:
        user = await context.user(request)
        values = parse_query(query_text(request), {"uploader": "id", "day": "date", "after": "id", "limit": "digits"})
        uploader = _uploader(values)
        if "day" not in values:
            raise bad_request("day: required (YYYY-MM-DD)")
        day = _day_number(values, "day")
        limit = max(1, bounded_int(values, "limit", MAX_SAMPLES_PER_PAGE, MAX_SAMPLES_PER_PAGE))
        rows = await run_in_threadpool(store.day_hashes, user, uploader, day, values.get("after"), limit)
        return json_response({"samples": [{"id": sample_id, "hash": digests.hex_digest(content)} for sample_id, content in rows],
                              "next": rows[-1][0] if len(rows) == limit else None})

    async def lookup(request: Request) -> Response:
        user = await context.user(request)
        parse_query(query_text(request), {})
        body, reserved = await read_body(request, context.budget, user)

        def handle() -> dict:
            try:
                ids = contract.parse_lookup(body)
            finally:
                body.clear()
                context.budget.release(user, reserved)
            entries = []
            for found in store.lookup(user, ids):
                if found[0] == "live":
                    _, sample_id, uploader, day, content = found
                    entries.append({"id": sample_id, "state": "live", "uploader": uploader, "day": day_text(day),
                                    "hash": digests.hex_digest(content)})
                else:
                    entries.append({"id": found[1], "state": "deleted", "uploader": found[2]})
            return {"samples": entries}

        return json_response(await run_in_threadpool(handle))

    return [
        ("/steps/digest", digest, ["GET"]),
        ("/steps/digest/days", days, ["GET"]),
        ("/steps/digest/samples", samples, ["GET"]),
        ("/steps/digest/lookup", lookup, ["POST"]),
    ]

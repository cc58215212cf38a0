"""/steps: POST (save samples), GET (a page of samples), DELETE (empty the caller's data), and
POST /steps/deletions (delete samples by id). Every one needs the caller's token, checked before a
body is read."""

from __future__ import annotations

import time
from typing import Callable

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from .. import answers, contract
from ..app import Context, encode, json_response, query_text
from ..expensive_reads import LARGE_PAGE
from ..query import bounded_int, parse_query
from ..request_body import read_body


def page(store, check_gone: Callable[[], None], user: str, offset: int, limit: int, all_versions: bool) -> bytes:
    """A page of more than LARGE_PAGE samples as JSON (in a reading process: expensive_reads.py), made
    LARGE_PAGE samples at a time from one snapshot: what is held is the JSON, not every sample's objects."""
    pieces = []

    def add(samples: list) -> None:
        check_gone()
        pieces.append(encode(samples)[1:-1])

    total = store.read_in_chunks(user, offset, limit, all_versions, LARGE_PAGE, add)
    return b'{"samples":[' + b",".join(pieces) + b'],"total":' + str(total).encode() + b"}"


def routes(context: Context) -> list:
    store = context.store

    async def write(request: Request, parse: Callable[[bytearray, int], contract.Upload],
                    apply: Callable[[str, list, str, str], int]) -> int:
        """A write's common path: the query (none), the token, the body within its budget, parsed and
        freed, then applied with the request's receive time and the body's uploader; -1 for no items."""
        now_ns = time.time_ns()
        user = await context.user(request)
        parse_query(query_text(request), {})
        body, reserved = await read_body(request, context.budget, user)

        def handle() -> int:
            try:
                parsed = parse(body, now_ns)
            finally:
                body.clear()  # the bytes are not needed once parsed
                context.budget.release(user, reserved)
            return apply(user, parsed.items, contract.utc_text(now_ns), parsed.uploader) if parsed.items else -1

        return await run_in_threadpool(handle)

    async def post_steps(request: Request) -> Response:
        saved = await write(request, contract.parse_upload, store.save)
        if saved < 0:
            return json_response({"saved": 0, "message": "No samples provided"})
        return json_response({"saved": saved, "message": "Success"})

    async def post_deletions(request: Request) -> Response:
        deleted = await write(request, lambda body, now_ns: contract.parse_deletion_upload(body), store.delete_ids)
        return json_response({"deleted": max(deleted, 0), "message": "Success"})

    async def get_steps(request: Request) -> Response:
        user = await context.user(request)
        query = parse_query(query_text(request), {"limit": "digits", "offset": "digits", "versions": "word"})
        limit = bounded_int(query, "limit", contract.DEFAULT_LIMIT, contract.MAX_LIMIT)
        offset = bounded_int(query, "offset", 0, None)
        all_versions = query.get("versions") == "all"
        if limit <= LARGE_PAGE:
            samples, total = await run_in_threadpool(store.read, user, offset, limit, all_versions)
            return json_response(answers.StepsPage(samples, total))

        return json_response(await context.expensive_reads.run(request, user, page, offset, limit, all_versions))

    async def delete_steps(request: Request) -> Response:
        user = await context.user(request)
        parse_query(query_text(request), {})
        await run_in_threadpool(store.delete_all, user)
        return json_response({"deleted": True, "message": "All samples deleted"})

    return [
        ("/steps", post_steps, ["POST"]),
        ("/steps", get_steps, ["GET"]),
        ("/steps", delete_steps, ["DELETE"]),
        ("/steps/deletions", post_deletions, ["POST"]),
    ]

"""/steps: POST (save samples), GET (a page of samples), DELETE (empty the caller's data), and
POST /steps/deletions (delete samples by id). Every one needs the caller's token."""

from __future__ import annotations

import time
from datetime import date
from typing import Optional

from starlette.requests import Request
from starlette.responses import Response

from .. import contract
from ..app import Context, json_response, query_text
from ..auth import unauthorized
from ..contract import utc_text


def touched_dates(texts: list[str]) -> tuple[int, int]:
    """The UTC dates (ordinals) that date-time texts span (the new samples' least startDate and
    greatest endDate, and those of the earlier versions they replaced), widened by a day: a
    date-time's own date (its first ten characters) is within a day of its UTC date."""
    first = min(text[:10] for text in texts)
    last = max(text[:10] for text in texts)
    return date.fromisoformat(first).toordinal() - 1, date.fromisoformat(last).toordinal() + 1


def routes(context: Context) -> list:
    storage = context.storage

    def require_token_header(request: Request) -> None:
        # Refused before the body is read; the token itself is looked up with the work.
        if not context.settings.single_user and not request.headers.get("authorization"):
            raise unauthorized("missing token: send Authorization: Bearer <token>")

    async def post_steps(request: Request) -> Response:
        now_ns = time.time_ns()
        contract.parse_query(query_text(request), {})
        require_token_header(request)

        def handle(body: bytes):
            user = context.user(request)
            samples = contract.parse_samples(body, contract.DateWindow(now_ns))
            body.clear()  # the bytes are not needed once parsed: free them before storing
            if not samples:
                return None
            # What the replaced versions named is asked for only while daily totals are kept.
            buckets = context.daily_buckets
            replaced: Optional[list[str]] = [] if buckets.enabled or context.daily_cache.holds(user) else None
            # Taken first: save may empty `samples` (see Storage.save).
            named = list(contract.date_bounds(samples))
            written_days = buckets.before_write(user, samples)
            try:
                saved = storage.save(user, samples, utc_text(now_ns), replaced)
            except BaseException:
                # Usually nothing was stored; but a database may have committed before the
                # connection broke: the totals cache must not keep what the write may have changed.
                context.daily_cache.invalidate_user(user)
                buckets.touch_all(user)
                raise
            if saved:
                buckets.touch_written(user, written_days, replaced or [], saved)
                # Without the replaced versions' dates (rows kept since the save began), any day.
                context.daily_cache.invalidate_dates(
                    user, lambda: touched_dates(named + replaced) if replaced is not None else None)
            return saved

        saved = await context.read_json_body(request, handle)
        if saved is None:
            return json_response(b'{"saved":0,"message":"No samples provided"}')
        return json_response(b'{"saved":%d,"message":"Success"}' % saved)

    async def post_deletions(request: Request) -> Response:
        now_ns = time.time_ns()
        contract.parse_query(query_text(request), {})
        require_token_header(request)

        def handle(body: bytes) -> int:
            user = context.user(request)
            ids = contract.parse_deletions(body)
            body.clear()
            buckets = context.daily_buckets
            removed: Optional[list[str]] = [] if buckets.enabled else None
            try:
                deleted = storage.delete_ids(user, ids, utc_text(now_ns), removed) if ids else 0
            except BaseException:
                context.daily_cache.invalidate_user(user)
                buckets.touch_all(user)
                raise
            if deleted:
                context.daily_cache.invalidate_user(user)
                buckets.touch_samples(user, [], removed or [])
            return deleted

        deleted = await context.read_json_body(request, handle)
        return json_response(b'{"deleted":%d,"message":"Success"}' % deleted)

    async def get_steps(request: Request) -> Response:
        query = contract.parse_query(query_text(request), {"limit": "digits", "offset": "digits", "versions": "word"})
        limit = contract.bounded_int(query, "limit", contract.DEFAULT_LIMIT, contract.MAX_LIMIT)
        offset = contract.bounded_int(query, "offset", 0, None)
        all_versions = query.get("versions") == "all"
        require_token_header(request)

        def handle():
            user = context.user(request)
            return storage.read(user, offset, limit, all_versions)

        lines, total = await context.in_thread(handle)
        return json_response(b'{"samples":[' + b",".join(lines) + b'],"total":%d}' % total)

    async def delete_steps(request: Request) -> Response:
        contract.parse_query(query_text(request), {})
        require_token_header(request)

        def handle() -> None:
            user = context.user(request)
            try:
                storage.delete_all(user)
            finally:
                context.daily_cache.invalidate_user(user)  # even a failed one may have emptied some of it
                context.daily_buckets.touch_all(user)

        await context.in_thread(handle)
        return json_response(b'{"deleted":true,"message":"All samples deleted"}')

    return [
        ("/steps", post_steps, ["POST"]),
        ("/steps", get_steps, ["GET"]),
        ("/steps", delete_steps, ["DELETE"]),
        ("/steps/deletions", post_deletions, ["POST"]),
    ]

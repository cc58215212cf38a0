"""GET /health: 200 only when storage takes writes now; 503 otherwise. No token, so the answer names
no reason (the reason, which may name a path, a user or the database's address, is in the log when the
state changes)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from ..app import Context, json_response, query_text


def routes(context: Context) -> list:
    async def health(request: Request) -> Response:
        if query_text(request):
            return json_response({"error": "GET /health takes no query parameters"}, 400)
        failure = context.store.health()  # never blocks: probes run in the background
        if failure is not None:
            return json_response({"status": "error", "error": "storage cannot take writes now"}, 503, {"Retry-After": "5"})
        return json_response({"status": "ok"})

    return [("/health", health, ["GET"])]

"""GET /: the dashboard. One static page with its own small script (no CDN, nothing fetched from
elsewhere): daily totals from GET /steps/daily as an SVG bar chart over a chosen range (default the
last 90 days in the browser's zone, or, when those hold no steps, the 90 days to the last day with
steps in the ten years before), merged totals with the raw sums or each source's on demand, the
exact numbers on hover and in a table below. The URL may set tz, from, to and view (merged|raw|sources).
With tokens, the page asks for one and keeps it in the tab's sessionStorage only. The page is
dashboard.html beside this file."""

from __future__ import annotations

from pathlib import Path

from starlette.requests import Request
from starlette.responses import Response

from ..app import Context

PAGE = Path(__file__).with_name("dashboard.html")


def routes(context: Context) -> list:
    page = PAGE.read_bytes()

    async def dashboard(request: Request) -> Response:
        return Response(page, media_type="text/html; charset=utf-8",
                        headers={"Content-Security-Policy": "default-src 'self'; script-src 'unsafe-inline'; "
                                 "style-src 'unsafe-inline'; img-src 'self' data:; connect-src 'self'",
                                 "X-Content-Type-Options": "nosniff", "Cache-Control": "no-cache"})

    return [("/", dashboard, ["GET"])]

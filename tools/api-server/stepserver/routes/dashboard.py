"""GET /: the dashboard (daily totals), once the totals exist (docs/TOTALS.md)."""

from __future__ import annotations

from ..app import Context


def routes(context: Context) -> list:
    return []

"""Daily totals already computed, per user and per (time zone, priority), kept until a write touches
their day: GET /steps/daily computes only the days it has not seen since the last write that touched
them (docs/TOTALS.md; tools/api-server/README.md, Performance).

Why it is exact: a local day's row depends only on the live samples that overlap that day (TOTALS.md
section 4), and the order of sources within a row is the priority's total order, which does not depend
on which other sources exist. So rows computed by different requests, over different ranges, are the
rows one request over the whole range would give.

Invalidation: after a write is durable and visible, the route reports the UTC dates it may touch
(`invalidate_dates`, from the samples' date texts: a text's own date is within a day of its UTC date),
or the whole user (deletions by id, DELETE /steps). A local date D lies within UTC dates D-1..D+1
(offsets are under 24 h; a 25-hour day still starts and ends inside them), so the cache drops every
local date within one day of a touched UTC date.

Races: every user has a version, bumped by each invalidation. A request notes the version before it
reads any sample and stores its rows only if the version is still the same afterwards; so rows computed
from a state older than an invalidation are never kept.

Only correct while this process learns of every write to the user's data: the embedded backend (one
server per directory, enforced by its lock; with `--workers N` each worker's storage applies what the
others wrote before it reads that user, and tells the cache: app.Context.foreign_write), or PostgreSQL
with one worker and a database of its own (`--workers N` > 1 turns the cache off there).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from datetime import date
from typing import Callable, Iterable, Optional

MAX_VIEWS_PER_USER = 8  # (zone, priority) pairs kept per user; the least recently used goes first
MAX_DAYS_PER_VIEW = 40_000  # over a hundred years of rows; beyond, the view starts again
MAX_ROWS = 200_000  # rows kept in all (about a KiB each with three sources): the least recently used views go

DateSpan = tuple[int, int]  # (first, last) proleptic ordinals, inclusive


class _View:
    __slots__ = ("rows",)

    def __init__(self) -> None:
        self.rows: dict[int, dict] = {}  # date ordinal -> the row with its "sources"


class _UserEntry:
    __slots__ = ("version", "views")

    def __init__(self) -> None:
        self.version = 0
        self.views: dict[tuple[str, tuple[str, ...]], _View] = {}


class DailyTotalsCache:
    """Thread-safe; every method is short and holds one lock."""

    def __init__(self, enabled: bool = True, max_rows: int = MAX_ROWS) -> None:
        self.enabled = enabled
        self.max_rows = max_rows
        self._lock = threading.Lock()
        self._users: dict[str, _UserEntry] = {}
        self._recent: OrderedDict[tuple[str, tuple[str, tuple[str, ...]]], None] = OrderedDict()  # views, oldest first
        self.rows = 0  # rows kept in all views

    def _drop_view(self, user: str, key: tuple[str, tuple[str, ...]]) -> None:
        view = self._users[user].views.pop(key)
        self._recent.pop((user, key), None)
        self.rows -= len(view.rows)

    def version(self, user: str) -> int:
        with self._lock:
            entry = self._users.get(user)
            return entry.version if entry is not None else 0

    def lookup(self, user: str, zone: str, patterns: list[str], first: date, last: date) -> tuple[dict[int, dict], list[DateSpan]]:
        """The rows known for first..last, and the runs of dates still to compute (in order)."""
        begin, end = first.toordinal(), last.toordinal()
        known: dict[int, dict] = {}
        if self.enabled:
            with self._lock:
                entry = self._users.get(user)
                key = (zone, tuple(patterns))
                view = entry.views.get(key) if entry is not None else None
                if view is not None:
                    self._recent.move_to_end((user, key))
                    rows = view.rows
                    if len(rows) < end - begin + 1:
                        known = {day: rows[day] for day in rows if begin <= day <= end}
                    else:
                        known = {day: row for day in range(begin, end + 1) if (row := rows.get(day)) is not None}
        missing: list[DateSpan] = []
        day = begin
        while day <= end:
            if day in known:
                day += 1
                continue
            run = day
            while day <= end and day not in known:
                day += 1
            missing.append((run, day - 1))
        return known, missing

    def store(self, user: str, version: int, zone: str, patterns: list[str], rows: Iterable[tuple[int, dict]]) -> None:
        """Keeps rows computed from the state at `version`, unless a write touched the user since."""
        if not self.enabled:
            return
        with self._lock:
            entry = self._users.get(user)
            if entry is None:
                entry = self._users[user] = _UserEntry()  # entries stay (a few bytes): versions never restart
            if entry.version != version:
                return
            key = (zone, tuple(patterns))
            view = entry.views.pop(key, None) or _View()
            entry.views[key] = view  # most recently used last
            self._recent[(user, key)] = None
            self._recent.move_to_end((user, key))
            if len(entry.views) > MAX_VIEWS_PER_USER:
                self._drop_view(user, next(iter(entry.views)))
            if len(view.rows) > MAX_DAYS_PER_VIEW:
                self.rows -= len(view.rows)
                view.rows = {}
            before = len(view.rows)
            view.rows.update(rows)
            self.rows += len(view.rows) - before
            while self.rows > self.max_rows and len(self._recent) > 1:
                oldest_user, oldest_key = next(iter(self._recent))
                self._drop_view(oldest_user, oldest_key)

    def invalidate_dates(self, user: str, span: Callable[[], Optional[DateSpan]]) -> None:
        """A write to the user is durable and visible. `span()` gives the UTC dates (ordinals) it may
        have touched, or None for any; it is called only when rows of the user are kept."""
        with self._lock:
            entry = self._users.get(user)
            if entry is None:
                entry = self._users[user] = _UserEntry()
            entry.version += 1
            if not entry.views:
                return
            touched = span()
            if touched is None:
                for key in list(entry.views):
                    self._drop_view(user, key)
                return
            begin, end = touched[0] - 1, touched[1] + 1
            for view in entry.views.values():
                rows = view.rows
                before = len(rows)
                if end - begin + 1 < len(rows):
                    for day in range(begin, end + 1):
                        rows.pop(day, None)
                else:
                    for day in [day for day in rows if begin <= day <= end]:
                        del rows[day]
                self.rows -= before - len(rows)

    def invalidate_user(self, user: str) -> None:
        self.invalidate_dates(user, lambda: None)

    def holds(self, user: str) -> bool:
        """Whether rows of the user are kept now (a write need not learn what it replaced otherwise)."""
        if not self.enabled:
            return False
        with self._lock:
            entry = self._users.get(user)
            return entry is not None and bool(entry.views)

"""The daily totals' cache on its own (stepserver/totals_cache.py): what it keeps, what a write
drops, versions against a request that read before a write, and the bound on the rows it keeps.
Through the API, test_daily.py checks every answer against a fresh merge."""

from __future__ import annotations

import sys
from datetime import date, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from stepserver.totals_cache import DailyTotalsCache  # noqa: E402

FIRST = date(2026, 3, 1)
PATTERNS = ["Apple Watch", "iPhone"]


def rows(first: date, days: int, tag: str = "") -> list[tuple[int, dict]]:
    return [((first + timedelta(days=d)).toordinal(), {"date": (first + timedelta(days=d)).isoformat(), "tag": tag})
            for d in range(days)]


def ordinals(first: date, last: date) -> tuple[int, int]:
    return first.toordinal(), last.toordinal()


def test_rows_are_kept_per_user_zone_and_priority_and_gaps_are_computed():
    cache = DailyTotalsCache()
    known, missing = cache.lookup("ann", "UTC", PATTERNS, FIRST, FIRST + timedelta(days=9))
    assert known == {} and missing == [ordinals(FIRST, FIRST + timedelta(days=9))]
    cache.store("ann", cache.version("ann"), "UTC", PATTERNS, rows(FIRST + timedelta(days=3), 3))
    known, missing = cache.lookup("ann", "UTC", PATTERNS, FIRST, FIRST + timedelta(days=9))
    assert sorted(known) == list(range(FIRST.toordinal() + 3, FIRST.toordinal() + 6))
    assert missing == [ordinals(FIRST, FIRST + timedelta(days=2)), ordinals(FIRST + timedelta(days=6), FIRST + timedelta(days=9))]
    assert cache.lookup("bob", "UTC", PATTERNS, FIRST, FIRST)[0] == {}
    assert cache.lookup("ann", "Europe/Paris", PATTERNS, FIRST + timedelta(days=3), FIRST + timedelta(days=3))[0] == {}
    assert cache.lookup("ann", "UTC", ["iPhone"], FIRST + timedelta(days=3), FIRST + timedelta(days=3))[0] == {}
    assert cache.holds("ann") and not cache.holds("bob")


def test_a_write_drops_the_local_dates_within_a_day_of_what_it_touched():
    cache = DailyTotalsCache()
    cache.store("ann", 0, "UTC", PATTERNS, rows(FIRST, 30))
    cache.store("ann", 0, "Asia/Tokyo", PATTERNS, rows(FIRST, 30))
    touched = FIRST + timedelta(days=10)
    cache.invalidate_dates("ann", lambda: (touched.toordinal(), touched.toordinal() + 1))
    for zone in ("UTC", "Asia/Tokyo"):
        known, missing = cache.lookup("ann", zone, PATTERNS, FIRST, FIRST + timedelta(days=29))
        assert missing == [(touched.toordinal() - 1, touched.toordinal() + 2)], zone
    assert cache.rows == 2 * 26
    cache.invalidate_user("ann")
    assert cache.lookup("ann", "UTC", PATTERNS, FIRST, FIRST)[0] == {} and cache.rows == 0 and not cache.holds("ann")


def test_rows_read_before_a_write_are_not_kept():
    cache = DailyTotalsCache()
    before = cache.version("ann")  # a request notes the version, then reads samples...
    cache.invalidate_dates("ann", lambda: None)  # ...while a write lands
    cache.store("ann", before, "UTC", PATTERNS, rows(FIRST, 5, "stale"))
    assert cache.lookup("ann", "UTC", PATTERNS, FIRST, FIRST + timedelta(days=4))[0] == {}
    cache.store("ann", cache.version("ann"), "UTC", PATTERNS, rows(FIRST, 5, "fresh"))
    assert {row["tag"] for row in cache.lookup("ann", "UTC", PATTERNS, FIRST, FIRST + timedelta(days=4))[0].values()} == {"fresh"}


def test_the_rows_kept_are_bounded_the_least_recently_used_views_go_first():
    cache = DailyTotalsCache(max_rows=100)
    for user in ("ann", "bob", "cid"):
        cache.store(user, 0, "UTC", PATTERNS, rows(FIRST, 40))
        assert cache.rows <= 100
    assert cache.lookup("ann", "UTC", PATTERNS, FIRST, FIRST)[0] == {}  # the oldest went
    assert cache.lookup("bob", "UTC", PATTERNS, FIRST, FIRST)[0] != {}  # and this use makes bob's recent
    cache.store("dan", 0, "UTC", PATTERNS, rows(FIRST, 40))
    assert cache.lookup("cid", "UTC", PATTERNS, FIRST, FIRST)[0] == {}
    assert cache.lookup("bob", "UTC", PATTERNS, FIRST, FIRST)[0] != {}
    assert cache.rows == 80
    for zone in [f"Etc/GMT+{k}" for k in range(1, 11)]:  # at most 8 views a user
        cache.store("eve", 0, zone, PATTERNS, rows(FIRST, 1))
    assert sum(1 for k in range(1, 11) if cache.lookup("eve", f"Etc/GMT+{k}", PATTERNS, FIRST, FIRST)[0]) == 8


def test_a_disabled_cache_keeps_nothing():
    cache = DailyTotalsCache(enabled=False)
    cache.store("ann", 0, "UTC", PATTERNS, rows(FIRST, 3))
    assert cache.lookup("ann", "UTC", PATTERNS, FIRST, FIRST)[0] == {} and not cache.holds("ann")

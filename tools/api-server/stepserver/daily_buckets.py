"""Daily totals kept up to date as samples are written: per user, the merge of docs/TOTALS.md section 4
for the default priority, in fixed UTC quarter hours, so that GET /steps/daily sums buckets instead of
merging a year of samples (docs/TOTALS.md section 9; tools/api-server/README.md, "Daily buckets").

Why it is exact: a day's merged and raw totals are sums of pieces F(b) - F(a) over intervals inside the
day (F floored cumulatively), so cutting the day further, at every quarter hour, keeps every sum. Every
UTC offset the tz database gives since 1990 is a whole number of quarter hours, so a local day is a run
of whole buckets; a query whose day starts are not (checked per request) takes the full merge instead.
Buckets hold integers, exactly the pieces the full merge adds up.

What is kept, per user and UTC day (days since 1970): for each source with steps that day, the prefix
sums over the day's 96 buckets of its raw and its merged steps (97 integers each), so a local day is a
difference per UTC day it overlaps. A UTC day is present only while it is current.

Writes: after a save or a deletion is durable and visible (or failed: it may have committed), the route
calls `touch_samples` with what the write changed (or `touch_all`). Touching drops the UTC days
and queues them for the background worker, which recomputes a user's days once no write of that
user has come for SETTLE_S (during an upload it would compete with the upload for the interpreter:
measured, it halved POST /steps throughput), RUN_DAYS days a time, from the samples
overlapping them (the storage's time index). A read computes the days of its range that are not
present itself, so no answer waits for the worker and none depends on it.

Races: a per-user write counter; touching a day records the counter. A computation notes the counter
before it reads any sample and keeps a day only if no write touched it since; computations of one user
run one at a time (its compute lock), so an older result never replaces a newer one.

Restarts: `save` (when the server stops) hands the current days to the backend's BucketStore with the
storage's state; a user first used after the start gets them back only if that state is unchanged.

Only correct while every write to the user's data goes through this process (as totals_cache.py): one
worker.
"""

from __future__ import annotations

import sys
import threading
import time
from array import array
from contextlib import contextmanager
from datetime import date, timedelta
from itertools import accumulate
from operator import attrgetter
from typing import Callable, Iterable, Iterator, Optional, Protocol, Sequence
from zoneinfo import ZoneInfo

import msgspec

from .contract import SampleFields
from .log import log
from .storage.base import DaySample
from .totals import DEFAULT_PRIORITY, day_start_ms, merge_between_cuts, source_order_key

QUARTER_MS = 900_000
DAY_MS = 86_400_000
SLOTS = DAY_MS // QUARTER_MS  # 96 buckets a UTC day
RUN_DAYS = 16  # UTC days the worker computes at a time (about 13,000 samples at 3M over ten years)
READ_RUN_DAYS = 31  # UTC days a read computes at a time (bounds the samples it holds)
SETTLE_S = 1.0  # the worker leaves a user's days alone until no write of theirs has come for this long
EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
COMPACT_SPAN_DAYS = 7  # a request's samples within this many dates are touched as one span
_start_text = attrgetter("startDate")
_end_text = attrgetter("endDate")
_MS = 1_000_000

Sums = tuple[Sequence[int], Sequence[int]]  # prefix sums of a source's raw and merged steps over a day's buckets (97 each)
Day = dict[int, Sums]  # source number -> its sums; only sources with steps that day
SamplesBetween = Callable[[str, int, int], Iterable[DaySample]]
FORMAT_VERSION = 2


class BucketStore(Protocol):
    """Where a backend keeps the buckets between runs (storage/embedded_buckets.py, postgres_buckets.py)."""

    def state(self, user: str) -> Optional[str]:
        """A text that changes with every write of the user's samples."""

    def load(self, user: str) -> Optional[bytes]: ...

    def save(self, user: str, blob: bytes) -> None: ...


class _Saved(msgspec.Struct, array_like=True):
    """A user's buckets as saved: the storage's state then, the sources, per UTC day the sources (indexes
    into `sources`) with steps that day, and in `sums`, for each of those (day, source) in that order,
    the 97 raw then the 97 merged prefix sums, int64 little-endian. One bytes object, read back as
    slices of one memoryview: loading ten years of three sources is a few milliseconds, not 22,000
    arrays."""

    version: int
    state: str
    sources: list[tuple[str, Optional[str]]]
    days: list[tuple[int, list[int]]]
    sums: bytes


class _User:
    __slots__ = ("days", "touched", "writes", "every_day_touched", "compute_lock")

    def __init__(self) -> None:
        self.days: dict[int, Day] = {}  # UTC day -> its buckets, only while current
        self.touched: dict[int, int] = {}  # UTC day -> the write counter when a write last touched it
        self.writes = 0
        self.every_day_touched = 0  # the write counter of the last write that touched every day
        self.compute_lock = threading.Lock()


class DailyBuckets:
    """Thread-safe. `samples_between(user, start_ns, end_ns)` is the storage's (live samples overlapping)."""

    def __init__(self, samples_between: SamplesBetween, enabled: bool = True, background: bool = True,
                 settle_s: float = SETTLE_S, store: Optional[BucketStore] = None) -> None:
        self.samples_between = samples_between
        self.store = store
        self.enabled = enabled
        self.background = background
        self.settle_s = settle_s
        self._lock = threading.Condition()
        self._users: dict[str, _User] = {}
        self._sources: list[tuple[str, Optional[str]]] = []  # source number -> (bundle id, device name)
        self._source_numbers: dict[tuple[str, Optional[str]], int] = {}
        self._source_keys: list[tuple] = []  # source number -> its place in the default priority
        self._pending: dict[tuple[str, int], float] = {}  # (user, UTC day) -> when a write last touched it
        # user -> when any write of theirs last touched a day: the worker leaves a user's days alone
        # while that user is writing (an upload in progress), so that recomputing never competes with
        # the upload for the interpreter; the days are computed once the user has been quiet SETTLE_S.
        self._last_write: dict[str, float] = {}
        self._worker: Optional[threading.Thread] = None
        self._closed = False

    # -- writes ------------------------------------------------------------------------------------

    def touch_samples(self, user: str, samples: list[SampleFields], replaced: list[str]) -> None:
        """A save of these samples is durable and visible; `replaced` holds startDate, endDate text
        pairs spanning the versions it replaced or deleted (Storage.save, delete_ids)."""
        self.touch_written(user, self.sample_days(samples), replaced)

    def sample_days(self, samples: list[SampleFields]) -> list[tuple[int, int]]:
        """The runs of UTC days (days since 1970, inclusive) that these samples may lie on, from
        their texts' dates; taken before a save, which may empty its list (Storage.save). A date-time
        text's own date (its first ten characters) is its UTC date with Z, that or the day before
        with an offset east (+HH:MM), that or the day after with one west (-HH:MM, offsets are under
        24 hours)."""
        if not self.enabled or not samples:
            return []
        pairs: set[tuple[str, str, str, str]] = set()
        # Usually a request's samples lie within a few days: one span from the least start text
        # to the greatest end text (four passes in C); otherwise a span per distinct pair of dates.
        least, greatest = min(map(_start_text, samples))[:10], max(map(_end_text, samples))[:10]
        if _text_day(greatest) - _text_day(least) <= COMPACT_SPAN_DAYS:
            pairs.add((least, "+", greatest, "-"))
        else:
            pairs.update((sample.startDate[:10], sample.startDate[-6], sample.endDate[:10], sample.endDate[-6])
                         for sample in samples)
        return [(_text_day(start) - (east == "+"), _text_day(end) + (west == "-")) for start, east, end, west in pairs]

    def touch_written(self, user: str, days: list[tuple[int, int]], replaced: list[str]) -> None:
        """A write is durable and visible: it wrote samples on `days` (sample_days) and replaced or
        deleted versions spanning the startDate, endDate text pairs in `replaced`. A replaced pair
        may be the least and greatest texts of several versions (PostgreSQL), each with its own
        offset: it is widened by a day on both sides."""
        if not self.enabled:
            return
        spans = list(days)
        spans.extend((_text_day(start[:10]) - 1, _text_day(end[:10]) + 1) for start, end in zip(replaced[::2], replaced[1::2]))
        self.touch_days(user, spans)

    def touch_days(self, user: str, spans: Iterable[tuple[int, int]]) -> None:
        """A write may have changed these runs of UTC days (days since 1970, inclusive)."""
        if not self.enabled:
            return
        with self._write_of(user) as (entry, now):
            for first, last in spans:
                for day in range(first, last + 1):
                    entry.touched[day] = entry.writes
                    entry.days.pop(day, None)
                    self._pending[(user, day)] = now

    def touch_all(self, user: str) -> None:
        """A write may have changed any day of the user (a deletion by id, DELETE /steps): every day is
        dropped, and those that were present are queued again."""
        if not self.enabled:
            return
        with self._write_of(user) as (entry, now):
            entry.every_day_touched = entry.writes
            for day in entry.days:
                self._pending[(user, day)] = now
            entry.days = {}

    @contextmanager
    def _write_of(self, user: str) -> Iterator[tuple[_User, float]]:
        """A write of `user` (touch_days, touch_all): counted and its time noted, then the user's entry
        and that time under the lock; the worker is woken after."""
        self._user(user)
        now = time.monotonic()
        with self._lock:
            entry = self._entry(user)
            entry.writes += 1
            self._last_write[user] = now
            yield entry, now
            self._wake()

    def _entry(self, user: str) -> _User:
        """Caller holds the lock (and, for a user not used yet since the start, called _user first)."""
        entry = self._users.get(user)
        if entry is None:
            entry = self._users[user] = _User()
        return entry

    def _user(self, user: str) -> None:
        """A user first used since the start gets the buckets saved at the last stop, if nothing was
        written since; read without the lock, so another thread that made the user meanwhile wins."""
        if self.store is None or user in self._users:
            return
        days = self._load(user)
        with self._lock:
            if user not in self._users:
                self._users[user] = _User()
                self._users[user].days = days

    def _load(self, user: str) -> dict[int, Day]:
        try:
            blob = self.store.load(user)
            if blob is None:
                return {}
            saved = _decode(blob)
            if saved.version != FORMAT_VERSION or saved.state != self.store.state(user):
                return {}
            with self._lock:
                numbers = [self._source_number(key) for key in saved.sources]
            if BIG_ENDIAN:
                swapped = array("q")
                swapped.frombytes(saved.sums)
                swapped.byteswap()
                values = memoryview(swapped)
            else:
                values = memoryview(saved.sums).cast("q")
            pairs = sum(len(indexes) for _, indexes in saved.days)
            if len(values) != pairs * 2 * (SLOTS + 1):
                raise ValueError(f"{len(values)} sums for {pairs} days and sources, not {pairs * 2 * (SLOTS + 1)}")
            days: dict[int, Day] = {}
            position = 0
            width = SLOTS + 1
            for day, indexes in saved.days:
                buckets: Day = {}
                for index in indexes:
                    buckets[numbers[index]] = (values[position : position + width], values[position + width : position + 2 * width])
                    position += 2 * width
                days[day] = buckets
            return days
        except Exception as error:  # noqa: BLE001 - computed again from the samples
            line = (str(error).splitlines() or [type(error).__name__])[0]
            log(f"daily buckets: the saved buckets of {user} are not used ({type(error).__name__}: {line}); "
                "they are computed again from the samples")
            return {}

    def save(self) -> None:
        """Saves every user's current days (the server has stopped taking requests); a user's days that
        are not current are left out and computed again after the next start."""
        if self.store is None or not self.enabled:
            return
        self.close()
        with self._lock:
            users = list(self._users.items())
        for user, entry in users:
            with entry.compute_lock, self._lock:
                days = dict(entry.days)
            try:
                state = self.store.state(user)
                if state is None:
                    continue
                numbers = sorted({number for buckets in days.values() for number in buckets})
                index = {number: k for k, number in enumerate(numbers)}
                ordered = sorted(days.items())
                sums = b"".join(_little(raw_sums) + _little(merged_sums)
                                for _, buckets in ordered for raw_sums, merged_sums in buckets.values())
                saved = _Saved(FORMAT_VERSION, state, [self._sources[number] for number in numbers],
                               [(day, [index[number] for number in buckets]) for day, buckets in ordered], sums)
                self.store.save(user, _encoder.encode(saved))
            except Exception as error:  # noqa: BLE001 - the next start computes them again
                line = (str(error).splitlines() or [type(error).__name__])[0]
                log(f"daily buckets: saving {user}'s failed ({type(error).__name__}: {line}); the next start "
                    "computes them from the samples")

    # -- reads -------------------------------------------------------------------------------------

    def rows(self, user: str, zone: ZoneInfo, first: date, last: date) -> Optional[list[dict]]:
        """The rows of first..last for the default priority, with "sources" (TOTALS.md section 5), or
        None when a day of the range does not start on a quarter hour (then the full merge answers)."""
        if not self.enabled:
            return None
        count = (last - first).days + 1
        cuts = [day_start_ms(first + timedelta(days=d), zone) for d in range(count + 1)]
        if any(cut % QUARTER_MS for cut in cuts):
            return None
        first_day, last_day = cuts[0] // DAY_MS, max(cuts[0], cuts[-1] - 1) // DAY_MS
        days = self._current_days(user, first_day, last_day)
        sources = self._sources
        keys = self._source_keys
        rows = []
        for d in range(count):
            begin, end = cuts[d], cuts[d + 1]
            raw: dict[int, int] = {}
            merged: dict[int, int] = {}
            position = begin
            while position < end:
                day = position // DAY_MS
                day_begin = day * DAY_MS
                stop = min(end, day_begin + DAY_MS)
                low, high = (position - day_begin) // QUARTER_MS, (stop - day_begin) // QUARTER_MS
                for number, (raw_sums, merged_sums) in days[day].items():
                    raw[number] = raw.get(number, 0) + raw_sums[high] - raw_sums[low]
                    merged[number] = merged.get(number, 0) + merged_sums[high] - merged_sums[low]
                position = stop
            present = sorted((number for number, steps in raw.items() if steps > 0), key=keys.__getitem__)
            rows.append({"date": (first + timedelta(days=d)).isoformat(),
                         "merged": sum(merged.values()), "raw": sum(raw.values()),
                         "sources": [{"bundleId": sources[n][0], "deviceName": sources[n][1],
                                      "merged": merged[n], "raw": raw[n]} for n in present]})
        return rows

    def _current_days(self, user: str, first_day: int, last_day: int) -> dict[int, Day]:
        """The buckets of the UTC days first_day..last_day, computing those not present."""
        self._user(user)
        with self._lock:
            entry = self._entry(user)
            days = {day: found for day in range(first_day, last_day + 1) if (found := entry.days.get(day)) is not None}
        if len(days) == last_day - first_day + 1:
            return days
        with entry.compute_lock:
            with self._lock:  # what another computation added while this one waited
                days.update((day, found) for day in range(first_day, last_day + 1)
                            if day not in days and (found := entry.days.get(day)) is not None)
            for run_first, run_last in _runs([day for day in range(first_day, last_day + 1) if day not in days],
                                             READ_RUN_DAYS):
                days.update(self._compute(user, entry, run_first, run_last))
        return days

    def _compute(self, user: str, entry: _User, first_day: int, last_day: int) -> dict[int, Day]:
        """Computes UTC days first_day..last_day from the samples (caller holds the user's compute lock),
        keeps those no write touched meanwhile, and returns them all (as of when the samples were read)."""
        with self._lock:
            writes = entry.writes
        begin, end = first_day * DAY_MS, (last_day + 1) * DAY_MS
        samples = ((s.start_ns // _MS, s.end_ns // _MS, s.count, s.source_bundle_id, s.source_device_name)
                   for s in self.samples_between(user, begin * _MS, end * _MS))
        cuts = list(range(begin, end + 1, QUARTER_MS))
        order, raw, merged = merge_between_cuts(samples, cuts, DEFAULT_PRIORITY)
        computed: dict[int, Day] = {day: {} for day in range(first_day, last_day + 1)}
        with self._lock:
            numbers = [self._source_number(key) for key in order]
        for k, number in enumerate(numbers):
            raw_k, merged_k = raw[k], merged[k]
            for d in range(last_day - first_day + 1):
                low = d * SLOTS
                raw_sums = array("q", accumulate(raw_k[low : low + SLOTS], initial=0))
                if raw_sums[-1] > 0:
                    computed[first_day + d][number] = (raw_sums, array("q", accumulate(merged_k[low : low + SLOTS], initial=0)))
        with self._lock:
            if entry.every_day_touched <= writes:
                for day, buckets in computed.items():
                    if entry.touched.get(day, 0) <= writes:
                        entry.days[day] = buckets
        return computed

    def _source_number(self, key: tuple[str, Optional[str]]) -> int:
        number = self._source_numbers.get(key)
        if number is None:
            number = self._source_numbers[key] = len(self._sources)
            self._sources.append(key)
            self._source_keys.append(source_order_key(key, DEFAULT_PRIORITY))
        return number

    # -- the background worker ---------------------------------------------------------------------

    def _wake(self) -> None:
        """Caller holds the lock."""
        if not self.background or self._closed:
            return
        if self._worker is None:
            self._worker = threading.Thread(target=self._work, name="daily-buckets", daemon=True)
            self._worker.start()
        self._lock.notify()

    def _next_run(self, wait: bool) -> Optional[tuple[str, int, int]]:
        """The next settled run of pending days of one user, taken off the queue (caller holds the
        lock); with `wait`, waits for one (None once closed), else None when none is settled."""
        while not self._closed:
            now = time.monotonic()
            left_least = None
            chosen = None
            for (user, day), touched_at in self._pending.items():
                left = max(touched_at, self._last_write.get(user, touched_at)) + self.settle_s - now
                if left <= 0:
                    chosen = (user, day)
                    break
                left_least = left if left_least is None else min(left_least, left)
            if chosen is None:
                if not wait:
                    return None
                self._lock.wait(left_least)
                continue
            user, day = chosen
            first = last = day
            settled = lambda d: (user, d) in self._pending  # noqa: E731 (the user is quiet: all their days are)
            while last - first + 1 < RUN_DAYS and settled(last + 1):
                last += 1
            while last - first + 1 < RUN_DAYS and settled(first - 1):
                first -= 1
            for d in range(first, last + 1):
                del self._pending[(user, d)]
            return user, first, last
        return None

    def _work(self) -> None:
        while self._run_next(wait=True):
            pass

    def run_settled(self) -> int:
        """Computes, in this thread, every pending run that has settled; returns how many (the worker's
        job, for tests: a server's worker does it on its own)."""
        runs = 0
        while self._run_next(wait=False):
            runs += 1
        return runs

    def _run_next(self, wait: bool) -> bool:
        with self._lock:
            run = self._next_run(wait)
            if run is None:
                return False
            user, first, last = run
            entry = self._entry(user)
        try:
            with entry.compute_lock:
                with self._lock:
                    missing = [day for day in range(first, last + 1) if day not in entry.days]
                for run_first, run_last in _runs(missing, RUN_DAYS):
                    self._compute(user, entry, run_first, run_last)
        except Exception as error:  # noqa: BLE001 - a read computes what the worker could not
            line = (str(error).splitlines() or [type(error).__name__])[0]
            log(f"daily buckets: computing {user}'s UTC days {_day_text(first)}..{_day_text(last)} failed "
                f"({type(error).__name__}: {line}); a read computes them")
        return True

    def idle(self) -> bool:
        """Whether no day waits for the worker (for the benchmark's report)."""
        with self._lock:
            return not self._pending

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._lock.notify_all()


BIG_ENDIAN = sys.byteorder == "big"
_encoder = msgspec.msgpack.Encoder()


def _little(sums: Sequence[int]) -> bytes:
    if BIG_ENDIAN:
        swapped = array("q", sums)
        swapped.byteswap()
        return swapped.tobytes()
    return sums.tobytes()  # an array or a memoryview of int64

_decode = msgspec.msgpack.Decoder(_Saved).decode


def _runs(days: list[int], longest: int) -> Iterator[tuple[int, int]]:
    """Runs of consecutive days (ascending), each at most `longest` long."""
    index = 0
    while index < len(days):
        first = last = days[index]
        index += 1
        while index < len(days) and days[index] == last + 1 and last - first + 1 < longest:
            last = days[index]
            index += 1
        yield first, last


_text_days: dict[str, int] = {}


def _text_day(text: str) -> int:
    """The day (since 1970) of the date YYYY-MM-DD."""
    day = _text_days.get(text)
    if day is None:
        day = date.fromisoformat(text).toordinal() - EPOCH_ORDINAL
        if len(_text_days) < 100_000:
            _text_days[text] = day
    return day


def _day_text(day: int) -> str:
    return date.fromordinal(day + EPOCH_ORDINAL).isoformat()

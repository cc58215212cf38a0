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

Writes: before a save the route calls `before_write` (the request's days, and held days: below); after
the save or a deletion is durable and visible (or failed: it may have committed), `touch_written` /
`touch_samples` with what the write changed (or `touch_all`). Touching drops the UTC days and queues
them for the background worker, which recomputes a day once no write has touched it for SETTLE_S,
RUN_DAYS days a run (while the user still writes, only full runs), each run one columnar read of the
samples overlapping it (the storage's time index) and one vectorised merge (quarter_hour_merge.py).
A read computes the days of its range that are not present itself, so no answer waits for the worker
and none depends on it.

Held days: reading back what an upload just wrote halved POST /steps throughput (measured). Per user,
a frontier (ms) bounds the ends of every live sample, stored or being written: the storage's bound at
first, raised by before_write before each save. A day starting after it is empty; a write reaching it
makes it held, and every write from then on whose every sample was new (saved as many as sent,
nothing replaced) adds the samples overlapping it to columns in memory, from which the worker computes
it without a read. Any other write (a batch sent again, a repeated id, a replacement, a deletion, a
failure) lets the held days it touches go (read back as any other day).

Races: a per-user write counter; touching a day records the counter. A computation notes the counter
before it reads any sample and keeps a day only if no write touched it since; computations of one user
run one at a time (its compute lock), so an older result never replaces a newer one.

Restarts: `save` (when the server stops) hands the current days to the backend's BucketStore with the
storage's state: a header (the state, the sources, per UTC day which sources have steps) and the sums,
day after day, in one bytes object. A user first used after the start reads the header only, and only
if its state is unchanged; a read then takes the saved days of its range with one read of the sums
between them (a year is a tenth of ten years: the first query after a start no longer waits for the
whole file or row), and a write drops the saved days it touches. `save` reads what is still saved
before it writes again.

Only correct while this process learns of every write to the user's data (as totals_cache.py): its own,
and with the embedded backend's --workers those of the other workers, which its storage applies before
any read of that user and reports (foreign_write). PostgreSQL with --workers keeps no buckets.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from array import array
from contextlib import contextmanager
from datetime import date, timedelta
from operator import attrgetter
from typing import Callable, Iterable, Iterator, NamedTuple, Optional, Protocol, Sequence
from zoneinfo import ZoneInfo

import msgspec
import numpy as np

from .contract import ParsedSamples, SampleFields, date_bounds
from .quarter_hour_merge import fits, merge_quarter_hours
from .sample_columns import SampleColumns
from .log import log
from .storage.base import DaySample
from .totals import DEFAULT_PRIORITY, day_start_ms, merge_between_cuts, source_order_key

QUARTER_MS = 900_000
DAY_MS = 86_400_000
SLOTS = DAY_MS // QUARTER_MS  # 96 buckets a UTC day
RUN_DAYS = 31  # UTC days the worker computes at a time (about 25,000 samples at 3M over ten years)
READ_RUN_DAYS = 92  # UTC days a read computes at a time: one range read and one merge each (bounds the samples held)
SETTLE_S = 0.5  # the worker leaves a day alone until no write has touched it for this long
LOOK_AGAIN_SHARE = 0.2  # the worker waits at least this share of SETTLE_S before it looks at the queue again
EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
HOLD_AHEAD_DAYS = 62  # the most days past the frontier a write holds beyond its own
WRITING_S = 10.0  # a write not touched this long after before_write saved nothing (or is forgotten)
HOLD_BEHIND_DAYS = 4  # a computed day is let go (read again if written) once the frontier is this far past it
COMPACT_SPAN_DAYS = 7  # a request's samples within this many dates are touched as one span
BY_DAY_MASKS = 4  # a write's samples within fewer UTC days than this are found a day at a time
_written_fields = [attrgetter(name) for name in ("startDate", "endDate", "count", "sourceBundleId", "sourceDeviceName")]
_count_of = attrgetter("count")
_MS = 1_000_000
_RUNNING = float("-inf")  # DailyBuckets._waiting_until while the worker is not waiting

Sums = tuple[Sequence[int], Sequence[int]]  # prefix sums of a source's raw and merged steps over a day's buckets (97 each)
Day = dict[int, Sums]  # source number -> its sums; only sources with steps that day
SamplesBetween = Callable[[str, int, int], Iterable[DaySample]]
ColumnsBetween = Callable[[str, int, int], SampleColumns]
FORMAT_VERSION = 3
PAIR_BYTES = 2 * (SLOTS + 1) * 8  # a (day, source)'s saved sums: 97 raw then 97 merged, int64 little-endian


class BucketStore(Protocol):
    """Where a backend keeps the buckets between runs (storage/embedded_buckets.py, postgres_buckets.py).
    A save is a header and the sums; `saved_id` names one save, so that a read of sums never mixes two."""

    def state(self, user: str) -> Optional[str]:
        """A text that changes with every write of the user's samples."""

    def load_header(self, user: str) -> Optional[bytes]: ...

    def load_sums(self, user: str, saved_id: bytes, offset: int, length: int) -> Optional[bytes]:
        """`length` bytes of the sums from `offset`, or None when that save is no longer there."""

    def save(self, user: str, saved_id: bytes, header: bytes, sums: bytes) -> None: ...


class _Saved(msgspec.Struct, array_like=True):
    """A user's buckets as saved (the header): the save's id, the storage's state then, the sources, and
    per UTC day (ascending) the sources (indexes into `sources`) with steps that day. The sums hold, for
    each of those (day, source) in that order, PAIR_BYTES: a day's are one slice, a range of days one read."""

    version: int
    saved_id: bytes
    state: str
    sources: list[tuple[str, Optional[str]]]
    days: list[tuple[int, list[int]]]


class _SavedDays:
    """The days of the last stop's save that no write has touched since the start and no read has
    taken yet: UTC day -> (its first byte in the sums, its sources' numbers)."""

    __slots__ = ("saved_id", "places")

    def __init__(self, saved_id: bytes, places: dict[int, tuple[int, list[int]]]) -> None:
        self.saved_id = saved_id
        self.places = places


class _User:
    __slots__ = ("days", "touched", "writes", "every_day_touched", "compute_lock", "held", "frontier", "writing", "saved")

    def __init__(self) -> None:
        self.days: dict[int, Day] = {}  # UTC day -> its buckets, only while current
        self.touched: dict[int, int] = {}  # UTC day -> the write counter when a write last touched it
        self.writes = 0
        self.every_day_touched = 0  # the write counter of the last write that touched every day
        self.compute_lock = threading.Lock()
        self.held: dict[int, _HeldDay] = {}  # UTC day -> every live sample on it, while an upload fills it
        self.frontier: Optional[int] = None  # ms: no live sample, stored or being written, ends after it
        # Writes between before_write and their touch -> (their first day, when they began); one that
        # saved nothing is never touched: entries older than WRITING_S are dropped.
        self.writing: dict[int, tuple[int, float]] = {}
        self.saved: Optional[_SavedDays] = None  # read when a read asks for them (_restore)


class _HeldDay:
    """Every live sample that overlaps one UTC day, held in memory from the writes themselves: the day
    was empty when its first write began (past the user's frontier), and every write since added the
    samples of it that overlap the day: columns (global source numbers), a part per write. Only writes
    whose every sample was new are added (touch_written: saved equal to the samples sent, nothing
    replaced), so a sample is in one write; one spanning several days is in each of their parts, and
    held_columns keeps it once."""

    __slots__ = ("parts",)

    def __init__(self) -> None:
        self.parts: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []

    @classmethod
    def of(cls, parts: list) -> "_HeldDay":
        day = cls()
        day.parts = parts
        return day


def held_columns(days: list[_HeldDay], first_day: int, sources: list[tuple[str, Optional[str]]]) -> SampleColumns:
    """The samples of the held UTC days first_day, first_day + 1, ... (`days`, each held since before
    any write of these samples: see below), each sample once: from the first day every part, from each
    later day the samples that start on it (the others are in an earlier day's parts).

    Why each is there: a day is held only when it begins after the user's frontier, which bounds
    every sample written or being written and only grows; so a day held now was held before any write
    reaching it, and every write whose samples overlap it added them to it (touch_days)."""
    parts = [part for part in days[0].parts] if days else []
    for offset, day in enumerate(days[1:], 1):
        begin = (first_day + offset) * DAY_MS
        for part in day.parts:
            keep = part[0] >= begin
            parts.append(part if keep.all() else (part[0][keep], part[1][keep], part[2][keep], part[3][keep]))
    if not parts:
        return SampleColumns(*(np.empty(0, dtype=np.int64) for _ in range(4)), sources)
    start, end, count, source = (np.concatenate([part[n] for part in parts]) for n in range(4))
    return SampleColumns(start, end, count, source, sources)


class Written(NamedTuple):
    """What before_write found of a request's samples, for touch_written after the save: the runs of UTC
    days they overlap (from their instants; sample_days when those were not parsed), and, to add to
    held days, their columns (global source numbers) and which overlap each day."""

    spans: list[tuple[int, int]]
    columns: Optional[SampleColumns] = None
    ticket: int = 0  # its key in the user's `writing`
    by_day: Optional[dict[int, np.ndarray]] = None  # UTC day -> indexes of the samples overlapping it


class DailyBuckets:
    """Thread-safe. `samples_between(user, start_ns, end_ns)` is the storage's (live samples overlapping)."""

    def __init__(self, samples_between: SamplesBetween, enabled: bool = True, background: bool = True,
                 settle_s: float = SETTLE_S, store: Optional[BucketStore] = None,
                 columns_between: Optional[ColumnsBetween] = None,
                 latest_end_ns: Optional[Callable[[str], Optional[int]]] = None) -> None:
        self.samples_between = samples_between
        self.columns_between = columns_between
        self.latest_end_ns = latest_end_ns  # the storage's bound on its samples' ends: days past it are held
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
        # user -> when any write of theirs last touched a day (the worker takes short runs only once
        # the user is quiet)
        self._last_write: dict[str, float] = {}
        self._worker: Optional[threading.Thread] = None
        # When the worker's wait ends (monotonic), None while it waits for a wake, _RUNNING while not
        # waiting (it looks at the queue before it waits again).
        self._waiting_until: Optional[float] = _RUNNING
        self._closed = False
        self._tickets = 0

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
        return self._sample_days(samples, *date_bounds(samples))

    @staticmethod
    def _sample_days(samples: list[SampleFields], least: str, greatest: str) -> list[tuple[int, int]]:
        """sample_days, given the least startDate and the greatest endDate text of the samples."""
        pairs: set[tuple[str, str, str, str]] = set()
        # Usually a request's samples lie within a few days: one span from the least start text
        # to the greatest end text; otherwise a span per distinct pair of dates.
        least, greatest = least[:10], greatest[:10]
        if _text_day(greatest) - _text_day(least) <= COMPACT_SPAN_DAYS:
            pairs.add((least, "+", greatest, "-"))
        else:
            pairs.update((sample.startDate[:10], sample.startDate[-6], sample.endDate[:10], sample.endDate[-6])
                         for sample in samples)
        return [(_text_day(start) - (east == "+"), _text_day(end) + (west == "-")) for start, east, end, west in pairs]

    def before_write(self, user: str, samples: list[SampleFields]) -> Written:
        """Called before a save of these samples (which may empty the list): the UTC days they overlap
        and, when some of those days lie past everything the user has stored or is writing (the
        frontier: an upload in time order moves into empty days), those days start to be held in
        memory, so that touch_written adds the samples to them and the worker computes them without
        reading the storage back."""
        # The field lists the contract's parse built (all but the counts), taken in any case.
        parsed = samples.take_fields() if isinstance(samples, ParsedSamples) else None
        if not self.enabled or not samples:
            return Written([])
        if self.latest_end_ns is None:
            return Written(self.sample_days(samples))
        # A list per field, each one pass in C (no tuple a sample for the collector to trace), unless
        # the parse's.
        dates = None
        if parsed is not None:
            starts, ends, bundles, devices, dates = parsed
            fields = [starts, ends, list(map(_count_of, samples)), bundles, devices]
        else:
            fields = [list(map(field, samples)) for field in _written_fields]
        try:
            return self._begin_write(user, fields, dates)
        except Exception as error:  # noqa: BLE001 - the write goes on; its days are read back instead
            line = (str(error).splitlines() or [type(error).__name__])[0]
            log(f"daily buckets: {user}'s write is not held ({type(error).__name__}: {line}); its days are read back")
            return Written(self.sample_days(samples))

    def _begin_write(self, user: str, fields: list[list], dates: Optional[bytes]) -> Written:
        self._user(user)
        with self._lock:
            entry = self._entry(user)
            frontier = entry.frontier
        if frontier is None:  # the storage's bound, once per user and process
            latest = self.latest_end_ns(user)
            frontier = -(1 << 62) if latest is None else -(-latest // _MS)
        columns = SampleColumns.from_texts(*fields, usual_dates=dates)
        # The days are those the samples overlap, from their instants (sample_days, from the texts'
        # dates, would add a day on each side).
        by_day = _samples_by_day(columns)
        spans = list(_runs(list(by_day), 1 << 62))
        with self._lock:
            numbers = np.array([self._source_number((bundle, None if device is msgspec.UNSET else device))
                                for bundle, device in columns.sources], dtype=np.int64)
            columns = SampleColumns(columns.start, columns.end, columns.count, numbers[columns.source], self._sources)
            if entry.frontier is not None:
                frontier = max(frontier, entry.frontier)
            # Past the frontier as it was before this write: nothing stored, nothing being written.
            if frontier < 1 << 61:
                # The days starting after it that this write may touch, and those between (empty, and
                # a write reaching them later adds to them): at most HOLD_AHEAD_DAYS of those.
                past = frontier // DAY_MS + 1
                last_day = max(last for _, last in spans)
                days = range(past, last_day + 1) if last_day - past < HOLD_AHEAD_DAYS else \
                    [day for first, last in spans for day in range(max(first, past), last + 1)]
                for day in days:
                    if day not in entry.held:
                        entry.held[day] = _HeldDay()
            entry.frontier = max(frontier, int(columns.end.max()))
            self._tickets += 1
            ticket = self._tickets
            entry.writing[ticket] = (min(first for first, _ in spans), time.monotonic())
        # A repeated id, or a sample sent before, saves fewer than were sent: touch_written lets go.
        return Written(spans, columns, ticket, by_day)

    def touch_written(self, user: str, written: "Written | list[tuple[int, int]]", replaced: list[str],
                      saved: Optional[int] = None) -> None:
        """A write is durable and visible: it wrote samples on `written`'s days (before_write, or
        sample_days) and replaced or deleted versions spanning the startDate, endDate text pairs in
        `replaced`. A replaced pair may be the least and greatest texts of several versions
        (PostgreSQL), each with its own offset: it is widened by a day on both sides. Its samples are
        added to held days only if every one was new: `saved` (what the storage wrote) equals them
        and nothing was replaced; else (a sample sent again) the held days it touches are let go."""
        if not self.enabled:
            return
        if not isinstance(written, Written):
            written = Written(written)
        spans = list(written.spans)
        spans.extend((_text_day(start[:10]) - 1, _text_day(end[:10]) + 1) for start, end in zip(replaced[::2], replaced[1::2]))
        if replaced or written.columns is None or saved != len(written.columns.start):  # held days let go
            written = Written(written.spans, ticket=written.ticket)
        self.touch_days(user, spans, written)

    def touch_days(self, user: str, spans: Iterable[tuple[int, int]], written: Optional[Written] = None) -> None:
        """A write may have changed these runs of UTC days (days since 1970, inclusive). With `written`
        (a write that only added samples), its samples are added to the days held; without, held days
        are let go (their samples are read from the storage again)."""
        if not self.enabled:
            return
        days: set[int] = set()
        for first, last in spans:
            days.update(range(first, last + 1))
        with self._write_of(user) as (entry, now):
            if written is not None:
                entry.writing.pop(written.ticket, None)
            holding = written is not None and written.by_day is not None
            for day in days:
                entry.touched[day] = entry.writes
                entry.days.pop(day, None)
                if entry.saved is not None:
                    entry.saved.places.pop(day, None)
                self._pending[(user, day)] = now
                held = entry.held.get(day)
                if held is not None:
                    if not holding:
                        del entry.held[day]
                    elif (chosen := written.by_day.get(day)) is not None:
                        columns = written.columns
                        held.parts.append((columns.start[chosen], columns.end[chosen], columns.count[chosen],
                                           columns.source[chosen]))

    def foreign_write(self, user: str, samples: Optional[list], replaced: Optional[list[str]]) -> None:
        """Another worker (--workers) wrote these samples (objects with startDate and endDate) and replaced
        or deleted versions spanning the `replaced` text pairs; None for either: any day may have changed.
        Called by the storage while it holds the user's history, so nothing here may call the storage: a
        user this process has not used is left alone (a saved header read later checks the state)."""
        if not self.enabled:
            return
        with self._lock:
            if user not in self._users:
                return
        if samples is None or replaced is None:
            self.touch_all(user)
        else:
            self.touch_written(user, self.sample_days(samples), replaced)
        with self._lock:
            self._users[user].frontier = None  # the storage's bound again (it ends later now)

    def touch_all(self, user: str) -> None:
        """A write may have changed any day of the user (a deletion by id, DELETE /steps): every day is
        dropped, and those that were present are queued again."""
        if not self.enabled:
            return
        with self._write_of(user) as (entry, now):
            entry.every_day_touched = entry.writes
            for day in entry.days:
                self._pending[(user, day)] = now
            if entry.saved is not None:
                for day in entry.saved.places:
                    self._pending[(user, day)] = now
                entry.saved = None
            entry.days = {}
            entry.held = {}
            entry.writing = {}

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
        """A user first used since the start gets the header of the buckets saved at the last stop, if
        nothing was written since; read without the lock, so another thread that made the user meanwhile wins."""
        if self.store is None or user in self._users:
            return
        saved = self._load(user)
        with self._lock:
            if user not in self._users:
                self._users[user] = _User()
                self._users[user].saved = saved

    def _load(self, user: str) -> Optional[_SavedDays]:
        try:
            header = self.store.load_header(user)
            if header is None:
                return None
            saved = _decode(header)
            if saved.version != FORMAT_VERSION or saved.state != self.store.state(user):
                return None
            with self._lock:
                numbers = [self._source_number(key) for key in saved.sources]
            places: dict[int, tuple[int, list[int]]] = {}
            position = 0
            for day, indexes in saved.days:
                places[day] = (position, [numbers[index] for index in indexes])
                position += len(indexes) * PAIR_BYTES
            return _SavedDays(saved.saved_id, places)
        except Exception as error:  # noqa: BLE001 - computed again from the samples
            self._not_used(user, error)
            return None

    def _not_used(self, user: str, error: Exception) -> None:
        line = (str(error).splitlines() or [type(error).__name__])[0]
        log(f"daily buckets: the saved buckets of {user} are not used ({type(error).__name__}: {line}); "
            "they are computed again from the samples")

    def _restore(self, user: str, entry: _User, days: list[int]) -> dict[int, Day]:
        """The saved days among these (caller holds the user's compute lock), with one read of the sums
        from the first to the last; those no write touched meanwhile become current."""
        with self._lock:
            saved = entry.saved
            if saved is None:
                return {}
            wanted = [(day, place) for day in days if (place := saved.places.get(day)) is not None]
        if not wanted:
            return {}
        begin = wanted[0][1][0]
        last_offset, last_numbers = wanted[-1][1]
        end = last_offset + len(last_numbers) * PAIR_BYTES
        try:
            sums = self.store.load_sums(user, saved.saved_id, begin, end - begin)
            if sums is None:
                raise LookupError("the saved buckets were replaced or removed since the start")
            if len(sums) != end - begin:
                raise ValueError(f"{len(sums)} bytes of sums read, not {end - begin}")
        except Exception as error:  # noqa: BLE001 - computed again from the samples
            self._not_used(user, error)
            with self._lock:
                if entry.saved is saved:
                    entry.saved = None
            return {}
        if BIG_ENDIAN:
            swapped = array("q")
            swapped.frombytes(sums)
            swapped.byteswap()
            values = memoryview(swapped)
        else:
            values = memoryview(sums).cast("q")
        width = SLOTS + 1
        restored: dict[int, Day] = {}
        for day, (offset, numbers) in wanted:
            position = (offset - begin) // 8
            buckets: Day = {}
            for number in numbers:
                buckets[number] = (values[position : position + width], values[position + width : position + 2 * width])
                position += 2 * width
            restored[day] = buckets
        with self._lock:
            if entry.saved is saved:  # else a write touched every day (touch_all) while they were read
                for day, buckets in restored.items():
                    if saved.places.pop(day, None) is not None:  # else a write touched it while it was read
                        entry.days[day] = buckets
        return restored

    def save(self) -> None:
        """Saves every user's current days (the server has stopped taking requests); a user's days that
        are not current are left out and computed again after the next start."""
        if self.store is None or not self.enabled:
            return
        self.close()
        with self._lock:
            users = list(self._users.items())
        for user, entry in users:
            try:
                with entry.compute_lock:
                    with self._lock:
                        unread = sorted(entry.saved.places) if entry.saved is not None else []
                    self._restore(user, entry, unread)  # what is still saved is saved again
                    # The state first: with --workers, taking it applies what the others wrote (which
                    # drops the days they touched), so the days taken after are exactly those of the state.
                    state = self.store.state(user)
                    with self._lock:
                        days = dict(entry.days)
                if state is None:
                    continue
                numbers = sorted({number for buckets in days.values() for number in buckets})
                index = {number: k for k, number in enumerate(numbers)}
                ordered = sorted(days.items())
                sums = b"".join(_little(raw_sums) + _little(merged_sums)
                                for _, buckets in ordered for raw_sums, merged_sums in buckets.values())
                saved_id = os.urandom(16)
                header = _Saved(FORMAT_VERSION, saved_id, state, [self._sources[number] for number in numbers],
                                [(day, [index[number] for number in buckets]) for day, buckets in ordered])
                self.store.save(user, saved_id, _encoder.encode(header), sums)
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
            missing = [day for day in range(first_day, last_day + 1) if day not in days]
            days.update(self._restore(user, entry, missing))
            days.update(self._compute_days(user, entry, [day for day in missing if day not in days], READ_RUN_DAYS))
        return days

    def _compute(self, user: str, entry: _User, first_day: int, last_day: int) -> dict[int, Day]:
        """Computes UTC days first_day..last_day from the samples (caller holds the user's compute lock),
        keeps those no write touched meanwhile, and returns them all (as of when the samples were read)."""
        begin, end = first_day * DAY_MS, (last_day + 1) * DAY_MS
        with self._lock:
            writes = entry.writes
            held = [entry.held.get(day) for day in range(first_day, last_day + 1)]
            # Held days: their parts as they are now (a part never changes once added).
            held = [_HeldDay.of(list(day.parts)) for day in held] if all(day is not None for day in held) else None
        columns = held_columns(held, first_day, self._sources) if held is not None else \
            self.sample_columns(user, begin * _MS, end * _MS)
        computed: dict[int, Day] = {day: {} for day in range(first_day, last_day + 1)}
        if fits(columns):
            with self._lock:
                numbers = [self._source_number(key) for key in columns.sources]
                ranks = [self._source_keys[number] for number in numbers]
            order, raw, merged = merge_quarter_hours(columns, begin, end, ranks)
            numbers = [numbers[index] for index in order]
        else:  # a count times a duration past int64 (lines older than today's limits): the exact Python merge
            samples = zip(columns.start.tolist(), columns.end.tolist(), columns.count.tolist(),
                          (columns.sources[index] for index in columns.source.tolist()))
            order, raw_lists, merged_lists = merge_between_cuts(((s, e, c, b, d) for s, e, c, (b, d) in samples),
                                                                list(range(begin, end + 1, QUARTER_MS)), DEFAULT_PRIORITY)
            raw, merged = np.array(raw_lists, dtype=np.int64), np.array(merged_lists, dtype=np.int64)
            with self._lock:
                numbers = [self._source_number(key) for key in order]
        days = last_day - first_day + 1
        for k, number in enumerate(numbers):
            # Per UTC day, the prefix sums over its 96 buckets (97 each), one array for the run.
            raw_sums = _prefix_sums(raw[k].reshape(days, SLOTS))
            merged_sums = _prefix_sums(merged[k].reshape(days, SLOTS))
            for d in np.flatnonzero(raw_sums[:, -1] > 0).tolist():
                computed[first_day + d][number] = (memoryview(raw_sums[d]), memoryview(merged_sums[d]))
        with self._lock:
            if entry.every_day_touched <= writes:
                for day, buckets in computed.items():
                    if entry.touched.get(day, 0) <= writes:
                        entry.days[day] = buckets
                        # Current now; held no longer once an upload has moved on: HOLD_BEHIND_DAYS
                        # before the frontier and before the first day of every write under way.
                        if held is not None and day + HOLD_BEHIND_DAYS < min((entry.frontier or 0) // DAY_MS,
                                                                             self._first_day_written(entry)):
                            entry.held.pop(day, None)
        return computed

    def _first_day_written(self, entry: _User) -> int:
        """The least first day of the writes under way (caller holds the lock)."""
        now = time.monotonic()
        for ticket in [ticket for ticket, (_, began) in entry.writing.items() if now - began > WRITING_S]:
            del entry.writing[ticket]
        return min((first for first, _ in entry.writing.values()), default=1 << 62)

    def _compute_days(self, user: str, entry: _User, days: list[int], longest: int) -> dict[int, Day]:
        """Computes these UTC days (ascending; caller holds the user's compute lock) in runs of at most
        `longest`: runs of held days from memory, the others from the storage."""
        with self._lock:
            held = {day for day in days if day in entry.held}
        computed: dict[int, Day] = {}
        for run_first, run_last in _runs([day for day in days if day in held], longest):
            computed.update(self._compute(user, entry, run_first, run_last))
        for run_first, run_last in _runs([day for day in days if day not in held], longest):
            computed.update(self._compute(user, entry, run_first, run_last))
        return computed

    def sample_columns(self, user: str, start_ns: int, end_ns: int) -> SampleColumns:
        """The live samples overlapping [start_ns, end_ns), as columns: the backend's columnar read when it
        has one (sample_columns_between), else its samples_between."""
        if self.columns_between is not None:
            return self.columns_between(user, start_ns, end_ns)
        return SampleColumns.from_samples(self.samples_between(user, start_ns, end_ns))

    def _source_number(self, key: tuple[str, Optional[str]]) -> int:
        number = self._source_numbers.get(key)
        if number is None:
            number = self._source_numbers[key] = len(self._sources)
            self._sources.append(key)
            self._source_keys.append(source_order_key(key, DEFAULT_PRIORITY))
        return number

    # -- the background worker ---------------------------------------------------------------------

    def _wake(self) -> None:
        """A write queued days (caller holds the lock): the worker is woken only when it waits for
        nothing or for longer than these days take to settle. A write's days settle settle_s after
        it, and no later write makes anything settle sooner: while the worker waits for a deadline,
        a wake at every write (every request of an upload) only cost both threads the GIL back and
        forth; at the deadline it looks again."""
        if not self.background or self._closed:
            return
        if self._worker is None:
            self._worker = threading.Thread(target=self._work, name="daily-buckets", daemon=True)
            self._worker.start()
        if self._waiting_until is None or self._waiting_until > time.monotonic() + self.settle_s:
            self._lock.notify()

    def _next_run(self, wait: bool) -> Optional[tuple[str, int, int]]:
        """The next settled run of pending days of one user, taken off the queue (caller holds the
        lock); with `wait`, waits for one (None once closed), else None when none is settled.

        A day has settled once no write has touched it for settle_s. An upload in store order (as
        `stepsync upload` and bench_post.py send) fills days roughly in time order, so the days behind
        it settle one after another while it goes on: those are computed during the upload, but only
        RUN_DAYS adjacent ones at a time (a run reads a day or more of the history beyond what it
        covers: short runs would read lines several times). Once the user has written nothing for
        settle_s, any settled run is taken."""
        while not self._closed:
            now = time.monotonic()
            left_least = None
            chosen = None
            # Days of settled runs already looked at (shorter than RUN_DAYS, so the whole run: any of
            # its days gives the same one): one look a run, not one a day.
            seen: set[tuple[str, int]] = set()
            for (user, day), touched_at in self._pending.items():
                left = touched_at + self.settle_s - now
                if left <= 0:
                    if (user, day) in seen:
                        continue
                    first, last = self._settled_run(user, day, now)
                    if last - first + 1 >= RUN_DAYS or self._last_write.get(user, 0.0) + self.settle_s <= now:
                        chosen = (user, first, last)
                        break
                    seen.update((user, d) for d in range(first, last + 1))
                    left = self._last_write[user] + self.settle_s - now  # the user's quiet, unless more settles first
                left_least = left if left_least is None else min(left_least, left)
            if chosen is None:
                if not wait:
                    return None
                # Not sooner than a fifth of settle_s: while users write, a day settles every few
                # milliseconds, and a look at the queue at each (under the lock every write takes)
                # held up the writes; a day computed up to that much later costs a read nothing.
                if left_least is not None:
                    left_least = max(left_least, self.settle_s * LOOK_AGAIN_SHARE)
                self._waiting_until = None if left_least is None else now + left_least
                try:
                    self._lock.wait(left_least)
                finally:
                    self._waiting_until = _RUNNING
                continue
            user, first, last = chosen
            for d in range(first, last + 1):
                del self._pending[(user, d)]
            return chosen
        return None

    def _settled_run(self, user: str, day: int, now: float) -> tuple[int, int]:
        """The run of adjacent settled pending days around `day` (settled itself), at most RUN_DAYS
        long, earlier days first (caller holds the lock)."""
        def settled(d: int) -> bool:
            touched_at = self._pending.get((user, d))
            return touched_at is not None and touched_at + self.settle_s <= now

        first = last = day
        while last - first + 1 < RUN_DAYS and settled(first - 1):
            first -= 1
        while last - first + 1 < RUN_DAYS and settled(last + 1):
            last += 1
        return first, last

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
                self._compute_days(user, entry, missing, RUN_DAYS)
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


def _samples_by_day(columns: SampleColumns) -> dict[int, np.ndarray]:
    """UTC day -> the indexes of the samples that overlap it (end >= its start, start < its end)."""
    first = columns.start // DAY_MS
    last = columns.end // DAY_MS
    low, high = int(first.min()), int(last.max())
    if high - low < BY_DAY_MASKS:  # a request within a few days (usual): a mask a day
        return {day: chosen for day in range(low, high + 1)
                if len(chosen := np.flatnonzero((first <= day) & (last >= day)))}
    spans = last - first + 1
    owner = np.repeat(np.arange(len(first)), spans)
    day = first[owner] + (np.arange(len(owner)) - np.repeat(np.cumsum(spans) - spans, spans))
    order = np.argsort(day, kind="stable")
    day, owner = day[order], owner[order]
    distinct, starts = np.unique(day, return_index=True)
    bounds = starts.tolist() + [len(day)]
    return {d: owner[bounds[k] : bounds[k + 1]] for k, d in enumerate(distinct.tolist())}


def _prefix_sums(buckets: np.ndarray) -> np.ndarray:
    """Rows of buckets -> rows of their prefix sums, a 0 first (int64, C order, so a row is one buffer)."""
    sums = np.zeros((buckets.shape[0], buckets.shape[1] + 1), dtype=np.int64)
    np.cumsum(buckets, axis=1, out=sums[:, 1:])
    return sums


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

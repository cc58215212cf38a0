"""The storage seam: every operation of the API as SQL, the same for SQLite and PostgreSQL.

A request is one transaction (Database.write / Database.read, storage/sqlite.py and postgres.py).
SQLite's writes take its one write lock (BEGIN IMMEDIATE) and apply one after another. PostgreSQL's
run beside each other: a write locks the stored rows it replaces or deletes (FOR UPDATE, in id order),
the primary key refuses a new id another write stored first (the transaction runs again and finds
it), and the daily totals of a day are recomputed under an advisory lock on (user, day), taken in day
order after the samples are written, so each day's recomputation reads every write committed before
it; DELETE /steps takes the user's lock alone, the writes share it. Guarantees (the API test-suite
runs against both dialects):
- save and delete_ids return only after their transaction committed (durable: SQLite
  synchronous=FULL, PostgreSQL synchronous_commit on); nothing of a failed one is visible.
- Idempotent by (user, id): a sample stored with identical content (startDate, endDate, count,
  sourceBundleId, sourceDeviceName) is not written again; in one body a repeated id counts once,
  its last occurrence wins; a changed sample is a new version, the one it replaces goes to
  sample_versions; a deleted sample posted again is live again.
- The daily totals of the UTC days a write touches are recomputed in its transaction
  (daily_totals.py): before and after every commit they are the merge of the live samples.
- Users never mix: every statement names the user.
"""

from __future__ import annotations

import itertools
from operator import itemgetter
from typing import Callable, Optional

from .. import daily_totals, digests
from ..answers import StoredSample
from ..contract import MAX_DURATION_SECONDS, ValidSample
from . import sample_digests
from .database import Database, Transaction
from .schema import SEQ_PER_REQUEST

_NS_PER_MS = 1_000_000
_LOOKBACK_NS = MAX_DURATION_SECONDS * 1_000_000_000  # a sample overlapping an instant began at most this before it
SAMPLE_COLUMNS = ("user_name, id, seq, start_date, end_date, start_ns, end_ns, count_thousandths, source_bundle_id, "
                  "source_device_name, received_at")
_STORED = "id, start_date, end_date, count_thousandths, source_bundle_id, source_device_name, received_at"


class Store:
    """The API's operations on a Database (a dialect's)."""

    def __init__(self, database: Database) -> None:
        self.database = database

    def health(self) -> Optional[str]:
        return self.database.health()

    def describe(self) -> str:
        users, samples = self.counts()
        return f"{self.database.describe()} ({users} users, {samples} samples)"

    def close(self) -> None:
        self.database.close()

    # -- samples ------------------------------------------------------------------------------------

    def save(self, user: str, samples: list[ValidSample], received_at: str, uploader: str = "") -> int:
        """Stores what is new or changed, written by `uploader` (the client's store, '' when it does not
        say); returns how many samples that was. A sample stored with identical content keeps its
        uploader, unless that is '' (written before uploaders were known): then it becomes this
        uploader's, without a new version."""
        unique = dict(zip((sample.id for sample in samples), samples))  # a repeated id: last content, first place
        if not unique:
            return 0
        # The batch's daily totals as if no other sample lay on its days, merged before the transaction
        # (outside the database's write lock and the days' locks); _rewrite_days merges again the days
        # on which it finds other live samples.
        batch = {sample.id: (sample.start_ns // _NS_PER_MS, sample.end_ns // _NS_PER_MS, sample.count_thousandths, sample.bundle,
                             sample.device) for sample in unique.values()}
        batch_rows = daily_totals.rows_by_day(list(batch.values()))

        def work(tx: Transaction) -> int:
            tx.lock_user(user, alone=False)
            tx.mark_server_write()
            among, parameters = tx.one_of("id", sorted(unique))
            stored = {row[0]: row[1:] for row in tx.rows(
                f"SELECT id, start_date, end_date, count_thousandths, source_bundle_id, source_device_name, start_ns, end_ns, uploader "
                f"FROM samples WHERE user_name = ? AND {among} ORDER BY id{tx.locking()}", (user, *parameters))}
            # The seq once the rows are held: a write that waited for another's rows comes after it.
            base = tx.next_request() * SEQ_PER_REQUEST
            fresh, changed, claimed, spans, written = [], [], [], [], []
            changes = digests.Changes()
            for position, sample in enumerate(unique.values()):
                row = (user, sample.id, base + position, sample.start_date, sample.end_date, sample.start_ns,
                       sample.end_ns, sample.count_thousandths, sample.bundle, sample.device, received_at, uploader)
                before = stored.get(sample.id)
                if before is not None and before[:5] == (sample.start_date, sample.end_date, sample.count_thousandths, sample.bundle, sample.device):
                    if before[7] != "" or not uploader:
                        continue
                    claimed.append(sample.id)  # the same content, this uploader's now: no new version
                    changes.remove("", before[5], sample_digests.stored_hash(sample.id, before))
                    spans.append(batch[sample.id])  # its day is locked: the day's digests change
                else:
                    if before is None:
                        fresh.append(row)
                    else:
                        changed.append(row)
                        spans.append((before[5] // _NS_PER_MS, before[6] // _NS_PER_MS))
                        changes.remove(before[7], before[5], sample_digests.stored_hash(sample.id, before))
                    spans.append(batch[sample.id])
                written.append(sample)
            changes.add_all(uploader, [sample.start_ns for sample in written], [digests.content_hash(
                sample.id, sample.start_ns, sample.end_ns, sample.count_thousandths, sample.bundle, sample.device) for sample in written])
            if fresh:
                tx.insert("samples", f"{SAMPLE_COLUMNS}, uploader", sorted(fresh, key=itemgetter(1)))  # in id order, as locked
            if changed:
                tx.run_many(f"INSERT INTO sample_versions (user_name, seq, {_STORED}) "
                            f"SELECT user_name, seq, {_STORED} FROM samples WHERE user_name = ? AND id = ?",
                            [(user, row[1]) for row in changed])
                tx.run_many("UPDATE samples SET seq = ?, start_date = ?, end_date = ?, start_ns = ?, end_ns = ?, count_thousandths = ?, "
                            "source_bundle_id = ?, source_device_name = ?, received_at = ?, uploader = ? "
                            "WHERE user_name = ? AND id = ?",
                            [(*row[2:], user, row[1]) for row in changed])
            if claimed:
                tx.run_many("UPDATE samples SET uploader = ? WHERE user_name = ? AND id = ?",
                            [(uploader, user, sample_id) for sample_id in claimed])
            self._rewrite_days(tx, user, spans, batch, batch_rows, (base, base + SEQ_PER_REQUEST))
            sample_digests.apply_changes(tx, user, changes)
            return len(fresh) + len(changed)

        return self.database.write(work)

    def delete_ids(self, user: str, ids: list[str], received_at: str, uploader: str = "") -> int:
        """Deletes those ids that are live, on behalf of `uploader`; returns how many were (unknown or
        deleted ids are fine)."""
        unique = list(dict.fromkeys(ids))
        if not unique:
            return 0

        def work(tx: Transaction) -> int:
            tx.lock_user(user, alone=False)
            tx.mark_server_write()
            among, parameters = tx.one_of("id", sorted(unique))
            live = tx.rows(f"SELECT id, start_date, end_date, count_thousandths, source_bundle_id, source_device_name, start_ns, end_ns, "
                           f"uploader FROM samples WHERE user_name = ? AND {among} ORDER BY id{tx.locking()}",
                           (user, *parameters))
            if not live:
                return 0
            base = tx.next_request() * SEQ_PER_REQUEST
            tx.run_many(f"INSERT INTO sample_versions (user_name, seq, {_STORED}) "
                        f"SELECT user_name, seq, {_STORED} FROM samples WHERE user_name = ? AND id = ?",
                        [(user, row[0]) for row in live])
            tx.insert("deletions", "user_name, seq, id, received_at, uploader",
                      [(user, base + position, row[0], received_at, uploader) for position, row in enumerate(live)])
            tx.run_many("DELETE FROM samples WHERE user_name = ? AND id = ?", [(user, row[0]) for row in live])
            self._rewrite_days(tx, user, [(row[6] // _NS_PER_MS, row[7] // _NS_PER_MS) for row in live])
            changes = digests.Changes()
            for row in live:
                changes.remove(row[8], row[6], sample_digests.stored_hash(row[0], row[1:]))
            sample_digests.apply_changes(tx, user, changes)
            return len(live)

        return self.database.write(work)

    def delete_all(self, user: str) -> None:
        """Empties the user's data (samples, history, deletions, daily totals) and nobody else's."""

        def work(tx: Transaction) -> None:
            tx.lock_user(user, alone=True)
            tx.mark_server_write()
            for table in ("samples", "sample_versions", "deletions", "daily_totals", "sample_digests", "digest_stale"):
                tx.run(f"DELETE FROM {table} WHERE user_name = ?", (user,))

        self.database.write(work)

    def read(self, user: str, offset: int, limit: int, all_versions: bool) -> tuple[list[StoredSample], int]:
        """A page of the live samples (or of every version), in the order received, and the total."""
        samples: list[StoredSample] = []
        total = self.read_in_chunks(user, offset, limit, all_versions, max(limit, 1), samples.extend)
        return samples, total

    def read_in_chunks(self, user: str, offset: int, limit: int, all_versions: bool, chunk: int,
                       handle: Callable[[list[StoredSample]], None]) -> int:
        """The page of `read`, from one snapshot, handed to handle() `chunk` samples at a time (a large
        page's objects need not all be held at once); returns the total."""
        if all_versions:
            source = (f"(SELECT seq, {_STORED} FROM sample_versions WHERE user_name = ? "
                      f"UNION ALL SELECT seq, {_STORED} FROM samples WHERE user_name = ?) AS versions")
            parameters: tuple = (user, user)
        else:
            source, parameters = "samples WHERE user_name = ?", (user,)

        def work(tx: Transaction) -> int:
            total = tx.rows(f"SELECT count(*) FROM {source}", parameters)[0][0]
            if limit == 0 or offset >= total:
                return total
            rows = tx.each(f"SELECT {_STORED} FROM {source} ORDER BY seq LIMIT ? OFFSET ?", (*parameters, limit, offset))
            while True:
                samples = [StoredSample.from_row(*row) for row in itertools.islice(rows, chunk)]
                if not samples:
                    return total
                handle(samples)

        return self.database.read(work)

    def samples_between(self, user: str, start_ns: int, end_ns: int) -> list[tuple]:
        """(start_ms, end_ms, count_thousandths, bundle, device) of the live samples overlapping [start_ns, end_ns)."""
        return self.database.read(lambda tx: _overlapping(tx, user, start_ns, end_ns))

    def daily_rows(self, user: str, first_day: str, last_day: str) -> list[tuple]:
        """daily_totals rows (day, bundle, device, merged_quarters, raw_quarters) of the UTC days first .. last."""
        return self.database.read(lambda tx: tx.rows(
            "SELECT day, source_bundle_id, source_device_name, merged_quarters, raw_quarters FROM daily_totals "
            "WHERE user_name = ? AND day >= ? AND day <= ?", (user, first_day, last_day)))

    def rebuild_daily_totals(self, tx: Transaction, user: Optional[str] = None) -> None:
        """Computes daily_totals from the samples (of every user, or one): after an import or a migration,
        in the transaction that makes the schema, before any write can run beside it (so no day locks:
        ten years would be thousands)."""
        users = [user] if user else [row[0] for row in tx.rows("SELECT DISTINCT user_name FROM samples")]
        for name in users:
            tx.run("DELETE FROM daily_totals WHERE user_name = ?", (name,))
            first, last = tx.rows("SELECT min(start_ns), max(end_ns) FROM samples WHERE user_name = ?", (name,))[0]
            if first is not None:
                self._rewrite_days(tx, name, [(first // _NS_PER_MS, last // _NS_PER_MS)], lock=False)

    def rewrite_daily_totals(self, tx: Transaction, user: str, days: list[int]) -> None:
        """The user's daily_totals of the UTC `days` (days since 1970) merged again from the live samples."""
        self._rewrite_days(tx, user, [(day * daily_totals.DAY_MS, (day + 1) * daily_totals.DAY_MS) for day in days])

    def _rewrite_days(self, tx: Transaction, user: str, spans: list[tuple[int, int]], batch: Optional[dict] = None,
                      batch_rows: Optional[dict] = None, own: Optional[tuple[int, int]] = None, lock: bool = True) -> None:
        """Rewrites the user's daily_totals of every UTC day a span (start_ms, end_ms) touches from the
        live samples of those days: a save's own (`batch`, id -> (start_ms, end_ms, count_thousandths, bundle, device),
        live as given; `batch_rows`, their rows merged alone, daily_totals.rows_by_day; the rows it
        wrote have their seq in the range `own`) and every other one, read here. A day on which no other
        live sample lies takes the batch's rows as they are; the others are merged from both."""
        runs = daily_totals.touched_days(spans)
        if lock:
            tx.lock_days(user, runs)
        for low, high in months(runs):
            tx.replace("daily_totals", "user_name = ? AND day >= ? AND day <= ?",
                       (user, daily_totals.day_text(low), daily_totals.day_text(high)),
                       "user_name, day, source_bundle_id, source_device_name, merged, raw, merged_quarters, raw_quarters",
                       [(user, *row) for row in daily_rows(tx, user, low, high, batch, batch_rows, own)])

    # -- digests (docs/RECONCILE.md) ---------------------------------------------------------------

    def server_id(self) -> str:
        return self.database.read(lambda tx: tx.rows("SELECT server_id FROM server_identity"))[0][0]

    def refresh_digests(self, user: str) -> int:
        """Computes again, from the samples, the user's digests that a change the server did not make
        marked stale (an operator's DELETE or UPDATE): O(samples of those days), only after such a
        change. Returns how many (uploader, day) digests that was."""
        if not self.database.read(lambda tx: tx.rows("SELECT 1 FROM digest_stale WHERE user_name = ? LIMIT 1", (user,))):
            return 0
        return self.database.write(lambda tx: sample_digests.refresh(tx, user))

    def uploader_digest(self, user: str, uploader: str) -> tuple[int, int, int]:
        """(count, digest, days) of the live samples `uploader` last wrote: one row a day summed."""
        self.refresh_digests(user)
        rows = self.database.read(lambda tx: tx.rows(
            "SELECT count, digest FROM sample_digests WHERE user_name = ? AND uploader = ?", (user, uploader)))
        return (*digests.combine(rows), len(rows))

    def day_digests(self, user: str, uploader: str, after: Optional[int], limit: int) -> list[tuple[int, int, int]]:
        """(day, count, digest) of the UTC days after `after` (days since 1970) holding samples
        `uploader` last wrote, in day order, at most `limit`."""
        self.refresh_digests(user)
        return self.database.read(lambda tx: [(day, count, digest & digests.MASK) for day, count, digest in tx.rows(
            "SELECT day, count, digest FROM sample_digests WHERE user_name = ? AND uploader = ? AND day > ? "
            "ORDER BY day LIMIT ?", (user, uploader, -1 if after is None else after, limit))])

    def day_hashes(self, user: str, uploader: str, day: int, after: Optional[str], limit: int) -> list[tuple[str, int]]:
        """(id, content hash) of the live samples `uploader` last wrote that start on the UTC `day`,
        in id order after `after`, at most `limit`."""
        start = day * digests.DAY_NS
        if not 0 <= start < 2 ** 63 - digests.DAY_NS:
            return []  # no sample starts before 1970 or past what the databases' integers hold (2262)
        # The day's rows by the start index, put in id order here: ORDER BY id in SQL lets a planner walk
        # the primary key through the user's whole history instead (O(samples) a request).
        rows = self.database.read(lambda tx: tx.rows(
            f"SELECT {sample_digests.HASHED} FROM samples WHERE user_name = ? AND start_ns >= ? AND start_ns < ? AND uploader = ?",
            (user, start, start + digests.DAY_NS, uploader)))
        page = sorted(row for row in rows if row[0] > (after or ""))[:limit]
        return [(row[0], digests.content_hash(*row[:6])) for row in page]

    def lookup(self, user: str, ids: list[str]) -> list[tuple]:
        """What the server knows of each id: ("live", id, uploader, day, hash) for a live sample,
        ("deleted", id, uploader) for one whose last word was a deletion; unknown ids are left out."""
        unique = sorted(set(ids))
        if not unique:
            return []

        def work(tx: Transaction) -> list[tuple]:
            among, parameters = tx.one_of("id", unique)
            found = {row[0]: ("live", row[0], row[6], digests.day_of(row[1]), digests.content_hash(*row[:6]))
                     for row in tx.rows(f"SELECT {sample_digests.HASHED} FROM samples WHERE user_name = ? AND {among}", (user, *parameters))}
            rest = [sample_id for sample_id in unique if sample_id not in found]
            if rest:
                among, parameters = tx.one_of("id", rest)
                for sample_id, uploader in tx.rows(f"SELECT id, uploader FROM deletions WHERE user_name = ? AND {among} "
                                                   "ORDER BY seq", (user, *parameters)):
                    found[sample_id] = ("deleted", sample_id, uploader)  # the latest deletion last
            return [found[sample_id] for sample_id in unique if sample_id in found]

        return self.database.read(work)

    # -- tokens -------------------------------------------------------------------------------------

    def add_token(self, token_id: str, user: str, token_hash: bytes, created_at: str) -> None:
        self.database.write(lambda tx: tx.run("INSERT INTO tokens (id, user_name, hash, created_at) VALUES (?, ?, ?, ?)",
                                              (token_id, user, token_hash, created_at)))

    def token_user(self, token_hash: bytes) -> Optional[tuple[str, bytes]]:
        """(user, stored hash) of a token that exists and is not revoked."""
        rows = self.database.read(lambda tx: tx.rows(
            "SELECT user_name, hash FROM tokens WHERE hash = ? AND revoked_at IS NULL", (token_hash,)))
        return (rows[0][0], bytes(rows[0][1])) if rows else None

    def list_tokens(self) -> list[tuple[str, str, str, Optional[str]]]:
        return self.database.read(lambda tx: tx.rows(
            "SELECT id, user_name, created_at, revoked_at FROM tokens ORDER BY created_at, id"))

    def revoke_token(self, token_id: str, revoked_at: str) -> bool:
        return self.database.write(lambda tx: tx.run(
            "UPDATE tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL", (revoked_at, token_id))) == 1

    def active_tokens(self) -> int:
        return self.database.read(lambda tx: tx.rows("SELECT count(*) FROM tokens WHERE revoked_at IS NULL"))[0][0]

    def counts(self) -> tuple[int, int]:
        """(users, live samples), for the start-up line."""
        return self.database.read(lambda tx: tuple(tx.rows("SELECT count(DISTINCT user_name), count(*) FROM samples")[0]))


def months(runs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Runs of days (first, last) cut into spans of at most 31 days: a month a read, bounded memory for
    a long history."""
    return [(low, min(last, low + 30)) for first, last in runs for low in range(first, last + 1, 31)]


def daily_rows(tx: Transaction, user: str, low: int, high: int, batch: Optional[dict] = None,
               batch_rows: Optional[dict] = None, own: Optional[tuple[int, int]] = None) -> list[tuple]:
    """The daily_totals rows (day, bundle, device, merged, raw, merged_quarters, raw_quarters) of the
    user's UTC days low .. high from their live samples: a save's own (`batch`, `batch_rows` and `own`
    as Store._rewrite_days says) and every other one, read here."""
    batch, batch_rows = batch or {}, batch_rows or {}
    others = [sample[1:] for sample in _overlapping(tx, user, low * daily_totals.DAY_NS, (high + 1) * daily_totals.DAY_NS,
                                                    with_id=True, other_than=own) if sample[0] not in batch]
    crowded = {day for day in daily_totals.days_touched(others) if low <= day <= high}
    rows = [row for day in range(low, high + 1) if day not in crowded for row in batch_rows.get(daily_totals.day_text(day), ())]
    for first, last in daily_totals.runs_of(crowded):
        begin, end = first * daily_totals.DAY_MS, (last + 1) * daily_totals.DAY_MS
        rows += daily_totals.day_rows(others + [sample for sample in batch.values() if _overlaps(sample, begin, end)], first, last)
    return rows


def _overlapping(tx: Transaction, user: str, start_ns: int, end_ns: int, with_id: bool = False,
                 other_than: Optional[tuple[int, int]] = None) -> list[tuple]:
    """(start_ms, end_ms, count_thousandths, bundle, device) of the user's live samples overlapping [start_ns, end_ns)
    (an instantaneous one: starting in it), each after its id when `with_id`, but for those whose seq
    lies in the range `other_than` (a write's own). The index on start bounds the scan on both sides.
    Each source's two names are kept once, however many samples carry them."""
    sources: dict[tuple, tuple] = {}
    sql = (f"SELECT {'id, ' if with_id else ''}start_ns, end_ns, count_thousandths, source_bundle_id, source_device_name FROM samples "
           "WHERE user_name = ? AND start_ns >= ? AND start_ns < ? AND (start_ns >= ? OR end_ns > ?)")
    parameters: tuple = (user, start_ns - _LOOKBACK_NS, end_ns, start_ns, start_ns)
    if other_than is not None:
        sql += " AND (seq < ? OR seq >= ?)"
        parameters += other_than
    rows = tx.each(sql, parameters)
    if with_id:
        return [(sample_id, start // _NS_PER_MS, end // _NS_PER_MS, count, *sources.setdefault((bundle, device), (bundle, device)))
                for sample_id, start, end, count, bundle, device in rows]
    return [(start // _NS_PER_MS, end // _NS_PER_MS, count, *sources.setdefault((bundle, device), (bundle, device)))
            for start, end, count, bundle, device in rows]


def _overlaps(sample: tuple, begin_ms: int, end_ms: int) -> bool:
    """Whether a (start_ms, end_ms, …) sample overlaps [begin_ms, end_ms) (an instantaneous one: starts in it)."""
    return sample[0] < end_ms and (sample[1] > begin_ms or begin_ms <= sample[0])

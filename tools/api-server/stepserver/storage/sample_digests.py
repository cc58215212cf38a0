"""The sample_digests table (docs/RECONCILE.md): per user, uploader and UTC day, the count and digest of
the live samples that uploader last wrote. A write changes it in its own transaction (apply_changes);
rebuild computes it from the samples after a migration or an import; refresh computes again the days
a change the server did not make marked stale (storage/schema.py's triggers)."""

from __future__ import annotations

from typing import Iterable, Optional

from .. import daily_totals, digests
from .database import Transaction

HASHED = "id, start_ns, end_ns, count_thousandths, source_bundle_id, source_device_name, uploader"  # a content hash's fields


def rebuild(tx: Transaction, user: Optional[str] = None) -> None:
    """Computes sample_digests from the samples (of every user, or one): after a migration or an
    import, in the transaction that makes the schema, before any write can run beside it."""
    if user is None:
        tx.run("DELETE FROM sample_digests")
        tx.run("DELETE FROM digest_stale")
        rows = tx.each(f"SELECT user_name, {HASHED} FROM samples")
    else:
        tx.run("DELETE FROM sample_digests WHERE user_name = ?", (user,))
        tx.run("DELETE FROM digest_stale WHERE user_name = ?", (user,))
        rows = tx.each(f"SELECT user_name, {HASHED} FROM samples WHERE user_name = ?", (user,))
    totals = from_samples(rows)
    if totals:
        tx.insert("sample_digests", "user_name, uploader, day, count, digest",
                  [(*key, count, digests.to_signed(total)) for key, (count, total) in totals.items()])


def from_samples(rows: Iterable[tuple]) -> dict[tuple[str, str, int], list[int]]:
    """(user, uploader, day) -> [count, digest not yet reduced to 64 bits] of samples rows
    (user_name, then the HASHED columns)."""
    totals: dict[tuple[str, str, int], list[int]] = {}
    for name, sample_id, start_ns, end_ns, thousandths, bundle, device, uploader in rows:
        total = totals.setdefault((name, uploader, digests.day_of(start_ns)), [0, 0])
        total[0] += 1
        total[1] += digests.content_hash(sample_id, start_ns, end_ns, thousandths, bundle, device)
    return totals


def refresh(tx: Transaction, user: str) -> int:
    """Computes again, from the samples, the user's digests that a change the server did not make
    marked stale (digest_stale); how many (uploader, day) digests that was."""
    tx.lock_user(user, alone=False)
    tx.mark_server_write()
    stale = sorted(tx.rows(f"SELECT uploader, day FROM digest_stale WHERE user_name = ?{tx.locking()}", (user,)))
    days = sorted({day for _, day in stale})
    tx.lock_days(user, daily_totals.runs_of(days))
    for day in days:
        totals: dict[str, list[int]] = {}
        for row in tx.rows(f"SELECT {HASHED} FROM samples WHERE user_name = ? AND start_ns >= ? AND start_ns < ?",
                           (user, day * digests.DAY_NS, (day + 1) * digests.DAY_NS)):
            total = totals.setdefault(row[6], [0, 0])
            total[0] += 1
            total[1] += digests.content_hash(*row[:6])
        for uploader in sorted({who for who, when in stale if when == day}):
            tx.run("DELETE FROM sample_digests WHERE user_name = ? AND uploader = ? AND day = ?", (user, uploader, day))
            if uploader in totals:
                count, total = totals[uploader]
                tx.insert("sample_digests", "user_name, uploader, day, count, digest",
                          [(user, uploader, day, count, digests.to_signed(total))])
    tx.run_many("DELETE FROM digest_stale WHERE user_name = ? AND uploader = ? AND day = ?",
                [(user, uploader, day) for uploader, day in stale])
    return len(stale)


def stored_hash(sample_id: str, row: tuple) -> int:
    """The content hash of a stored row (start_date, end_date, count_thousandths, bundle, device, start_ns, end_ns, ...)."""
    return digests.content_hash(sample_id, row[5], row[6], row[2], row[3], row[4])


def apply_changes(tx: Transaction, user: str, changes: digests.Changes) -> None:
    """Adds a write's changes to sample_digests (the caller holds the locks of the days they touch: the
    daily totals' locks, whose days include every start day). A digest of no samples is removed."""
    deltas = changes.nonzero()
    for uploader in sorted({key[0] for key in deltas}):
        days = sorted(day for who, day in deltas if who == uploader)
        among, parameters = tx.one_of("day", days)
        stored = {day: (count, digest) for day, count, digest in tx.rows(
            f"SELECT day, count, digest FROM sample_digests WHERE user_name = ? AND uploader = ? AND {among}",
            (user, uploader, *parameters))}
        inserts, updates, deletes = [], [], []
        for day in days:
            count, total = deltas[(uploader, day)]
            before = stored.get(day)
            if before is not None:
                count += before[0]
                total += before[1]
            if count == 0 and total & digests.MASK == 0:
                if before is not None:
                    deletes.append((user, uploader, day))
            elif before is None:
                inserts.append((user, uploader, day, count, digests.to_signed(total)))
            else:
                updates.append((count, digests.to_signed(total), user, uploader, day))
        if deletes:
            tx.run_many("DELETE FROM sample_digests WHERE user_name = ? AND uploader = ? AND day = ?", deletes)
        if updates:
            tx.run_many("UPDATE sample_digests SET count = ?, digest = ? WHERE user_name = ? AND uploader = ? AND day = ?", updates)
        if inserts:
            tx.insert("sample_digests", "user_name, uploader, day, count, digest", inserts)

"""`run verify`: whether what the database keeps beside the samples still agrees with them.

SQLite keeps no checksums of its pages: a bit flipped inside a value no index covers (a count, a
date, a source's name) passes `PRAGMA integrity_check`. Every such value is part of its sample's
content hash, summed in its day's digest (sample_digests), and of its days' merged totals
(daily_totals); both are rewritten in the transaction of every write, so they always equal what the
samples give. Computed again from the samples and compared, they find such a flip in the samples,
and a flip in a digest or a total finds itself. On PostgreSQL the same check finds what its page
checksums cannot: a row changed by hand past the server's triggers.

One snapshot a user, the daily totals a month of days at a time. A digest that a change the server
did not make marked stale (digest_stale) is computed again on its next read, not compared. `repair`
puts what was found right as far as the database can: the day's digests marked stale (computed from
the samples on their next read, so the client's next checked upload sees the difference and sends
its samples again, docs/RECONCILE.md) and the day's daily totals merged again from the live samples.
"""

from __future__ import annotations

from typing import Callable, Iterator, NamedTuple, Optional

from .. import daily_totals, digests
from ..contract import count_value
from . import sample_digests
from .database import Transaction
from .store import Store, daily_rows, months

class Problem(NamedTuple):
    """A UTC day (days since 1970) of a user whose digest (of `uploader`) or, uploader None, daily totals
    differ from what its samples give; `line` says it in one line."""

    user: str
    day: int
    uploader: Optional[str]
    line: str


def problems(store: Store, progress: Callable[[int, int, int], None] = lambda users, of, samples: None) -> Iterator[Problem]:
    """Each disagreement, user by user; progress(users done, users, samples read) after each user."""
    users = store.database.read(lambda tx: [row[0] for row in tx.rows(
        "SELECT user_name FROM samples UNION SELECT user_name FROM daily_totals UNION SELECT user_name FROM sample_digests")])
    samples = 0
    for done, user in enumerate(sorted(users), 1):
        found, count = store.database.read(lambda tx: _user_problems(tx, user))
        samples += count
        yield from found
        progress(done, len(users), samples)


def repair(store: Store, user: str, found: list[Problem]) -> None:
    """In one write: the digests found different marked stale, the days of totals found different merged again."""
    def work(tx: Transaction) -> None:
        tx.lock_user(user, alone=False)
        tx.mark_server_write()
        stale = sorted({(user, problem.uploader, problem.day) for problem in found if problem.uploader is not None})
        if stale:
            tx.run_many("INSERT INTO digest_stale (user_name, uploader, day) VALUES (?, ?, ?) ON CONFLICT DO NOTHING", stale)
        store.rewrite_daily_totals(tx, user, sorted({problem.day for problem in found if problem.uploader is None}))

    store.database.write(work)


def _user_problems(tx: Transaction, user: str) -> tuple[list[Problem], int]:
    """The user's disagreements, and how many samples were read."""
    found: list[Problem] = []
    computed = sample_digests.from_samples(
        tx.each(f"SELECT user_name, {sample_digests.HASHED} FROM samples WHERE user_name = ?", (user,)))
    stored = {(uploader, day): (count, digest & digests.MASK) for uploader, day, count, digest in tx.rows(
        "SELECT uploader, day, count, digest FROM sample_digests WHERE user_name = ?", (user,))}
    stale = {(uploader, day) for uploader, day in tx.rows("SELECT uploader, day FROM digest_stale WHERE user_name = ?", (user,))}
    recomputed = {(uploader, day): (count, total & digests.MASK) for (_, uploader, day), (count, total) in computed.items()}
    for uploader, day in sorted((stored.keys() | recomputed.keys()) - stale):
        kept, given = stored.get((uploader, day), (0, 0)), recomputed.get((uploader, day), (0, 0))
        if kept != given:
            found.append(Problem(user, day, uploader, f"user {user}: the digest of {daily_totals.day_text(day)} (uploader "
                                 f"{uploader or '(none)'}) does not match its samples: {_digest_text(kept)} kept, "
                                 f"{_digest_text(given)} from the samples"))
    found += _totals_problems(tx, user)
    return found, sum(count for count, _ in recomputed.values())


def _totals_problems(tx: Transaction, user: str) -> list[Problem]:
    """The UTC days whose daily_totals rows differ from the merge of the live samples."""
    first_ns, last_ns = tx.rows("SELECT min(start_ns), max(end_ns) FROM samples WHERE user_name = ?", (user,))[0]
    first_text, last_text = tx.rows("SELECT min(day), max(day) FROM daily_totals WHERE user_name = ?", (user,))[0]
    bounds = [first_ns // daily_totals.DAY_NS, last_ns // daily_totals.DAY_NS] if first_ns is not None else []
    bounds += [daily_totals.day_number(first_text), daily_totals.day_number(last_text)] if first_text is not None else []
    if not bounds:
        return []
    found = []
    for low, high in months([(min(bounds), max(bounds))]):
        kept: dict[str, list[tuple]] = {}
        for row in tx.rows("SELECT day, source_bundle_id, source_device_name, merged, raw, merged_quarters, raw_quarters "
                           "FROM daily_totals WHERE user_name = ? AND day >= ? AND day <= ?",
                           (user, daily_totals.day_text(low), daily_totals.day_text(high))):
            kept.setdefault(row[0], []).append(tuple(row))
        given: dict[str, list[tuple]] = {}
        for row in daily_rows(tx, user, low, high):
            given.setdefault(row[0], []).append(row)
        for day in sorted(kept.keys() | given.keys()):
            if sorted(kept.get(day, []), key=repr) != sorted(given.get(day, []), key=repr):
                found.append(Problem(user, daily_totals.day_number(day), None, f"user {user}: the daily totals of {day} "
                                     f"do not match its samples: {_totals_text(kept.get(day, []))} kept, {_totals_text(given.get(day, []))} "
                                     "from the samples"))
    return found


def _digest_text(digest: tuple[int, int]) -> str:
    return f"{digest[0]} samples {digests.hex_digest(digest[1])}"


def _totals_text(rows: list[tuple]) -> str:
    """A day's rows as its summed merged and raw steps and its number of sources."""
    merged, raw = sum(row[3] for row in rows), sum(row[4] for row in rows)
    return f"merged {count_value(merged)}, raw {count_value(raw)} steps from {len(rows)} sources"

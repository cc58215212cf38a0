"""The storage interface every backend implements (embedded JSONL, PostgreSQL), and what it guarantees.

Every method takes the user the request authenticated as; a backend never mixes users' data: the same
sample id under two users is two samples, and nothing one user does is visible to another.

Guarantees every backend gives (the API test-suite runs against each):
- `save` and `delete_ids` return only after their effect is durable (fsync / COMMIT), and a request is
  applied whole or not at all as far as any reader can see (on failure: StorageUnavailable, nothing
  visible).
- Idempotence by (user, id): a sample whose id is stored with identical content (startDate, endDate,
  count, sourceBundleId, sourceDeviceName; absent and null device names are the same) is not written
  again. Within one call, a repeated id counts once and its last occurrence wins.
- `read` returns the current live version of each id (or, with all_versions, every version saved, in
  the order received), as compact JSON objects with the keys id, startDate, endDate, count,
  sourceBundleId, sourceDeviceName, receivedAt; `total` counts what that query returns over all pages.
- A deleted id is gone from `read` and `samples`; saving it again makes it live again.
- `health()` is None only when a write would succeed now (it probes, with back-off when failing).

Several processes (--workers N): each worker opens its own Storage. PostgreSQL's share nothing but the
database, which every read asks, so each answer follows every write already. The embedded backend's
share each user's history file, and each keeps its own index of it in memory: `refresh` brings that
index up to what the other workers wrote, and `on_foreign` tells the app what it applied (the daily
totals' caches drop those days). These are members of Storage, not of a protocol of the embedded
backend's own, so that the app calls them on any backend without asking which it has; for
PostgreSQL they do nothing (documented on each).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Iterator, NamedTuple, Optional, Protocol

from ..contract import SampleFields

if TYPE_CHECKING:  # sample_columns imports DaySample from here
    from ..sample_columns import SampleColumns


class TokenRecord(NamedTuple):
    token_id: str
    user: str
    created_at: str
    revoked_at: Optional[str]


class TokenStore(Protocol):
    def add(self, token_id: str, user: str, token_hash: bytes, created_at: str) -> None: ...

    def lookup(self, token_hash: bytes) -> Optional[tuple[str, bytes]]:
        """(user, stored hash) of a token that exists and is not revoked, looked up by its hash."""

    def list(self) -> list[TokenRecord]: ...

    def revoke(self, token_id: str, revoked_at: str) -> bool:
        """False when there is no such unrevoked token."""

    def count_active(self) -> int: ...


class DaySample(NamedTuple):
    """What the daily totals need of a live sample."""

    start_ns: int
    end_ns: int
    count: int
    source_bundle_id: str
    source_device_name: Optional[str]


ForeignWrite = Callable[[str, Optional[list], Optional[list[str]]], None]


class Storage(Protocol):
    tokens: TokenStore
    # Set by the app (app.Context): called with (user, samples, replaced texts) for what `refresh` or a
    # write of this process applied of another worker's writes, or (user, None, None) when any day
    # may have changed (the history was emptied). PostgreSQL never calls it.
    on_foreign: Optional[ForeignWrite]

    def open(self) -> None: ...

    def close(self) -> None: ...

    def describe(self) -> str:
        """For the start-up line, e.g. "data /srv/steps (2 users, 91692 samples)"."""

    def save(self, user: str, samples: list[SampleFields], received_at: str, replaced: Optional[list[str]] = None) -> int:
        """Stores the samples not already stored with identical content; returns how many were written.
        With `replaced` (a list), appends startDate/endDate texts whose dates span every earlier version
        this call replaced (the days whose totals it changed besides the new samples' own; the daily
        totals' cache asks for them). A backend may empty `samples` once it no longer needs them
        (the embedded one does before waiting for its sync, so that requests in flight together do
        not each hold their samples until then)."""

    def delete_ids(self, user: str, ids: list[str], received_at: str, removed: Optional[list[str]] = None) -> int:
        """Deletes those ids that are live; returns how many were. Unknown or deleted ids are fine.
        With `removed` (a list), appends the startDate, endDate texts of each version deleted (the
        days whose totals it changed; the daily buckets ask for them)."""

    def read(self, user: str, offset: int, limit: int, all_versions: bool) -> tuple[list[bytes], int]:
        """A page of samples as JSON objects (bytes), and the total over all pages."""

    def delete_all(self, user: str) -> None:
        """Empties this user's data (samples, history and deletions) and nobody else's."""

    def samples_between(self, user: str, start_ns: int, end_ns: int) -> Iterator[DaySample]:
        """Live samples that overlap [start_ns, end_ns). An embedded worker answers as it has applied
        the history: call `refresh` first for an answer that follows the other workers' writes."""

    def sample_columns_between(self, user: str, start_ns: int, end_ns: int) -> "SampleColumns":
        """samples_between as columns (the daily buckets)."""

    def latest_end_ns(self, user: str) -> Optional[int]:
        """A bound no live sample of the user ends after (ns); None when the user has none."""

    def refresh(self, user: str) -> None:
        """Applies what other worker processes wrote to the user's data held in memory (calling
        on_foreign with it), so that an answer from memory made after this follows every write
        acknowledged before the call. PostgreSQL, and a process alone: nothing to do."""

    def history_state(self, user: str) -> Optional[str]:
        """A text that changes with every write of the user's samples, as this process has applied
        them (the daily buckets' saved state): embedded, the history's size and modification time
        (None without one); PostgreSQL, the greatest seq and the user's deletion count."""

    def keep_lock_for_workers(self) -> int:
        """The supervisor of --workers, before it closes its storage: a descriptor the workers must
        inherit, which close() then leaves open (embedded: the one holding DIR/LOCK), or -1 (PostgreSQL)."""

    def health(self) -> Optional[str]:
        """None when writable; otherwise one line saying why not. Answers at once from the last probe
        (a probe that is due runs in the background), so it may be called on the event loop."""

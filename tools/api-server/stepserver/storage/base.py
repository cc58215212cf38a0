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
"""

from __future__ import annotations

from typing import Iterator, NamedTuple, Optional, Protocol

from ..contract import SampleFields


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


class Storage(Protocol):
    tokens: TokenStore

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
        """Live samples that overlap [start_ns, end_ns)."""

    def health(self) -> Optional[str]:
        """None when writable; otherwise one line saying why not. Answers at once from the last probe
        (a probe that is due runs in the background), so it may be called on the event loop."""

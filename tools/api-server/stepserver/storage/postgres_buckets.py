"""Where the PostgreSQL backend keeps the daily buckets between runs (stepserver/daily_buckets.py): the
table daily_buckets (user_name, saved_id, header, sums), written when the server stops; the header is
read when the user is first used, the sums a range of days at a time (substring of an uncompressed
column: a year of ten is a tenth of the 17 MB, which took 50-130 ms to read whole). Sent and read in
binary (a 17 MB text-format bytea took a second).

Its state is the greatest seq of the user's samples (the live versions) and the user's row of
deletion_counts, two index lookups (a count(*) of the samples took 2 s at 3M and held back the first
query after a start). Every save that writes a row gives it a seq, from a sequence, greater than any
handed out before (the buckets are saved when no request runs), and the row stays in samples until it
is replaced (by a greater seq again) or deleted; every deletion request that removes a row, and every
DELETE /steps, adds one to the count in its own transaction, and the count never goes down. So while
the count is unchanged the greatest seq only grows, with every save that wrote something: any write
since the buckets were saved changes the state; only a write that changed nothing leaves it. (Up to
schema version 4 the greatest seq was that of sample_versions, which then also held the live
versions; a state saved so still names the same data: if the newest version written is live, the two
are equal, and any write since would have raised the samples' greatest seq above it.)"""

from __future__ import annotations

from typing import Optional

from .postgres import PostgresStorage


class PostgresBucketStore:
    def __init__(self, storage: PostgresStorage) -> None:
        self.storage = storage

    def state(self, user: str) -> Optional[str]:
        return self.storage.history_state(user)

    def load_header(self, user: str) -> Optional[bytes]:
        row = self.storage._run(lambda c: c.execute(
            "SELECT header FROM daily_buckets WHERE user_name = %s", (user,), binary=True).fetchone())
        return bytes(row[0]) if row else None

    def load_sums(self, user: str, saved_id: bytes, offset: int, length: int) -> Optional[bytes]:
        # The column is stored EXTERNAL (not compressed), so substring reads only the chunks it needs.
        row = self.storage._run(lambda c: c.execute(
            "SELECT substring(sums FROM %s FOR %s) FROM daily_buckets WHERE user_name = %s AND saved_id = %b",
            (offset + 1, length, user, saved_id), binary=True).fetchone())
        return bytes(row[0]) if row else None

    def save(self, user: str, saved_id: bytes, header: bytes, sums: bytes) -> None:
        self.storage._run(lambda c: c.execute(
            "INSERT INTO daily_buckets (user_name, saved_id, header, sums) VALUES (%s, %b, %b, %b) "
            "ON CONFLICT (user_name) DO UPDATE SET saved_id = excluded.saved_id, header = excluded.header, "
            "sums = excluded.sums", (user, saved_id, header, sums)))

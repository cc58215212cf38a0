"""Where the PostgreSQL backend keeps the daily buckets between runs (stepserver/daily_buckets.py): the
table daily_buckets (user_name, state, data), written when the server stops and read when the user is
first used (sent and read in binary: a 17 MB text-format bytea took a second). Its state is the user's sample count and greatest seq: a save gives its rows a seq greater
than any before, and a deletion lowers the count; the pair returns to a saved value only when every row
written since was deleted again and no earlier row was (the same rows as then)."""

from __future__ import annotations

from typing import Optional

from .postgres import PostgresStorage


class PostgresBucketStore:
    def __init__(self, storage: PostgresStorage) -> None:
        self.storage = storage

    def state(self, user: str) -> Optional[str]:
        count, greatest = self.storage._run(lambda c: c.execute(
            "SELECT count(*), max(seq) FROM samples WHERE user_name = %s", (user,)).fetchone())
        return f"{count}:{greatest}"

    def load(self, user: str) -> Optional[bytes]:
        row = self.storage._run(lambda c: c.execute(
            "SELECT data FROM daily_buckets WHERE user_name = %s", (user,), binary=True).fetchone())
        return bytes(row[0]) if row else None

    def save(self, user: str, blob: bytes) -> None:
        self.storage._run(lambda c: c.execute(
            "INSERT INTO daily_buckets (user_name, data) VALUES (%s, %b) "
            "ON CONFLICT (user_name) DO UPDATE SET data = excluded.data", (user, blob)))

"""What a dialect gives the store (storage/store.py): a Database that runs work in transactions, and
the Transaction that work runs SQL on. SQLite's are in sqlite.py, PostgreSQL's in postgres.py."""

from __future__ import annotations

from typing import Any, Callable, Iterator, Optional, Protocol


class Transaction(Protocol):
    """One transaction of a dialect (storage/sqlite.py, storage/postgres.py). SQL takes ? parameters."""

    def rows(self, sql: str, parameters: tuple = ()) -> list[tuple]: ...

    def each(self, sql: str, parameters: tuple = ()) -> Iterator[tuple]:
        """The rows one at a time (a long read's Python objects are made as they are used)."""

    def run(self, sql: str, parameters: tuple = ()) -> int:
        """Runs a statement; the rows it changed."""

    def run_many(self, sql: str, rows: list[tuple]) -> None: ...

    def one_of(self, column: str, values: list) -> tuple[str, tuple]:
        """SQL saying that `column` is one of `values`, and its parameters."""

    def insert(self, table: str, columns: str, rows: list[tuple]) -> None:
        """Rows of `columns` into `table`, the dialect's way for many rows (SQLite multi-row INSERTs,
        PostgreSQL COPY)."""

    def replace(self, table: str, where: str, parameters: tuple, columns: str, rows: list[tuple]) -> None:
        """Deletes the rows of `table` matching `where` and inserts `rows` in their place."""

    def lock_user(self, user: str, alone: bool) -> None:
        """The user's lock to the end of the transaction: `alone` (DELETE /steps) excludes every other
        write of the user; otherwise shared with them."""

    def lock_days(self, user: str, days: list[tuple[int, int]]) -> None:
        """The locks of the user's UTC days (runs of first, last), in day order, to the end of the
        transaction: one write at a time recomputes a day."""

    def locking(self) -> str:
        """What a SELECT of rows the transaction will change ends with (PostgreSQL: FOR UPDATE)."""

    def next_request(self) -> int:
        """The next request number (request_seq)."""

    def mark_server_write(self) -> None:
        """Says that this transaction's changes to samples are the server's, which keeps the digests
        itself: the triggers that mark digests stale after anyone else's change let them be
        (storage/schema.py)."""


class Database(Protocol):
    def write(self, work: Callable[[Transaction], Any]) -> Any:
        """Runs work(tx) in a write transaction and commits; StorageUnavailable when the database cannot."""

    def read(self, work: Callable[[Transaction], Any]) -> Any:
        """Runs work(tx) in a read transaction (one snapshot)."""

    def health(self) -> Optional[str]:
        """None while writes can succeed; else one line saying why not. Never blocks."""

    def describe(self) -> str: ...

    def close(self) -> None: ...

"""The embedded backend's API tokens: DIR/tokens.sqlite (hashes only)."""

from __future__ import annotations

import os
import sqlite3
import threading
from pathlib import Path
from typing import Optional

from ..errors import ApiError
from .base import TokenRecord
from .files import make_directories, sync_directory


class SqliteTokenStore:
    """Tokens of the embedded backend: DIR/tokens.sqlite (hashes only). Safe to use from the admin
    command while a server runs: SQLite serializes the writers, and a revocation is seen by the
    server's next lookup.

    Found tokens are remembered with the database's file change counter (the 4 bytes at offset 24,
    which every commit in rollback-journal mode changes): a lookup reads those 4 bytes and answers
    from memory while they are the same, and forgets everything when they differ. So a revocation
    (a commit) still takes effect on the next request, which costs one pread instead of a query
    (eight system calls and SQLite's locking). Unknown tokens are never remembered."""

    CACHED_TOKENS = 10_000  # at most; beyond, found tokens are looked up every time

    _SCHEMA = """
    CREATE TABLE IF NOT EXISTS tokens (
        id TEXT PRIMARY KEY, user TEXT NOT NULL, hash BLOB NOT NULL UNIQUE,
        created_at TEXT NOT NULL, revoked_at TEXT
    );
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._db: Optional[sqlite3.Connection] = None
        self._lock = threading.Lock()
        self._counter_fd: Optional[int] = None  # None: no cache (not rollback-journal mode)
        self._counter = b""
        self._found: dict[bytes, tuple[str, bytes]] = {}

    def open(self) -> None:
        created = not self.path.exists()
        make_directories(self.path.parent)
        db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=10)
        # The rollback journal (not WAL): reading needs no -wal/-shm files, so a server starts on a full disk.
        db.execute("PRAGMA synchronous=FULL")
        db.executescript(self._SCHEMA)
        if created:
            os.chmod(self.path, 0o600)
            sync_directory(self.path.parent)
        self._db = db
        # The change counter tells commits apart only in rollback-journal modes (a WAL commit
        # leaves it alone): then a cache, else every lookup a query.
        if db.execute("PRAGMA journal_mode").fetchone()[0].lower() in ("delete", "truncate", "persist"):
            self._counter_fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))

    def open_read_only(self, busy_timeout_s: float) -> None:
        """Opens the existing store for lookups only (the supervisor of --workers, dispatcher.py: it never
        writes, nor creates the file), waiting at most busy_timeout_s for a writer's lock."""
        self._db = sqlite3.connect(self.path.resolve().as_uri() + "?mode=ro", uri=True, isolation_level=None,
                                   check_same_thread=False, timeout=busy_timeout_s)

    def _execute(self, sql: str, parameters: tuple = ()) -> list[tuple]:
        if self._db is None:
            raise ApiError(503, "token store is closed")
        with self._lock:
            return self._db.execute(sql, parameters).fetchall()

    def add(self, token_id: str, user: str, token_hash: bytes, created_at: str) -> None:
        self._execute("INSERT INTO tokens(id, user, hash, created_at) VALUES (?, ?, ?, ?)", (token_id, user, token_hash, created_at))

    def lookup(self, token_hash: bytes) -> Optional[tuple[str, bytes]]:
        counter = None
        if self._counter_fd is not None:
            counter = os.pread(self._counter_fd, 4, 24)
            with self._lock:
                if counter != self._counter:
                    self._found.clear()
                    self._counter = counter
                found = self._found.get(token_hash)
            if found is not None:
                return found
        rows = self._execute("SELECT user, hash FROM tokens WHERE hash = ? AND revoked_at IS NULL", (token_hash,))
        if not rows:
            return None
        found = (rows[0][0], bytes(rows[0][1]))
        if counter is not None:
            with self._lock:
                # Kept under the counter read before the query (what it found is at least that
                # recent), unless another lookup has seen a later commit meanwhile.
                if counter == self._counter and len(self._found) < self.CACHED_TOKENS:
                    self._found[token_hash] = found
        return found

    def list(self) -> list[TokenRecord]:
        rows = self._execute("SELECT id, user, created_at, revoked_at FROM tokens ORDER BY created_at, id")
        return [TokenRecord(*row) for row in rows]

    def revoke(self, token_id: str, revoked_at: str) -> bool:
        with self._lock:
            assert self._db is not None
            cursor = self._db.execute("UPDATE tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL", (revoked_at, token_id))
            return cursor.rowcount == 1

    def count_active(self) -> int:
        return self._execute("SELECT count(*) FROM tokens WHERE revoked_at IS NULL")[0][0]

    def close(self) -> None:
        if self._counter_fd is not None:
            os.close(self._counter_fd)
            self._counter_fd = None
        if self._db is not None:
            self._db.close()
            self._db = None

"""A write is one transaction, all of it or none: a row a table refuses part-way through a multi-row
insert leaves nothing of the write, statements before it included, and the next write works. On
SQLite (storage/sqlite.py inserts with OR ROLLBACK, which ends the transaction in SQLite itself) the
refusal is the write's answer at once; PostgreSQL runs a write refused by a key again, as a race for a
new id with another write, but only KEY_RETRIES times: a key that refuses it every time is no race and
is answered as the error it is, not after the retry deadline as an unavailable database. In process."""

from __future__ import annotations

import sqlite3

import psycopg
import pytest

from stepserver.storage.postgres import KEY_RETRIES, PIPELINED_ROWS, PostgresDatabase


@pytest.mark.parametrize("count", [PIPELINED_ROWS // 2, PIPELINED_ROWS * 2])  # PostgreSQL: one INSERT in the pipeline; COPY
def test_a_refused_row_leaves_nothing_of_its_write_and_the_next_write_works(store, count):
    attempts = []

    def refused(tx) -> None:
        attempts.append(1)
        tx.run("INSERT INTO tokens (id, user_name, hash, created_at) VALUES (?, ?, ?, ?)", ("first", "alice", b"h0", "now"))
        rows = [(f"t{k}", "alice", bytes([k + 1]), "now") for k in range(count)]
        tx.insert("tokens", "id, user_name, hash, created_at", rows + [("t7", "alice", b"again", "now")])  # t7 twice

    with pytest.raises((sqlite3.IntegrityError, psycopg.errors.UniqueViolation)):
        store.database.write(refused)
    assert len(attempts) == (1 + KEY_RETRIES if isinstance(store.database, PostgresDatabase) else 1)
    assert store.list_tokens() == []

    store.add_token("second", "alice", b"h1", "now")
    assert [row[0] for row in store.list_tokens()] == ["second"]
    assert store.token_user(b"h1") == ("alice", b"h1")

"""A write is one transaction, all of it or none: on SQLite, a row a table refuses part-way through a
multi-row insert (storage/sqlite.py inserts with OR ROLLBACK, which ends the transaction in SQLite
itself) leaves nothing of the write, statements before it included, and the next write works. In
process. (PostgreSQL runs a write refused by a key again, as a race with another write, until its
deadline: storage/postgres.py.)"""

from __future__ import annotations

import sqlite3

import pytest


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)  # conftest's store, on SQLite only
def test_a_refused_row_leaves_nothing_of_its_write_and_the_next_write_works(store):
    def refused(tx) -> None:
        tx.run("INSERT INTO tokens (id, user_name, hash, created_at) VALUES (?, ?, ?, ?)", ("first", "alice", b"h0", "now"))
        rows = [(f"t{k}", "alice", bytes([k + 1]), "now") for k in range(50)]
        tx.insert("tokens", "id, user_name, hash, created_at", rows + [("t7", "alice", b"again", "now")])  # t7 twice

    with pytest.raises(sqlite3.IntegrityError):
        store.database.write(refused)
    assert store.list_tokens() == []

    store.add_token("second", "alice", b"h1", "now")
    assert [row[0] for row in store.list_tokens()] == ["second"]
    assert store.token_user(b"h1") == ("alice", b"h1")

"""Storage: one SQL store (store.py, with the digests' table in sample_digests.py) on a database
(database.py's protocols): SQLite (sqlite.py, the default: one file in --data DIR) or PostgreSQL
(postgres.py, --database URL); one schema (schema.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from . import sample_digests
from .store import Store


def open_storage(data: Path, database: Optional[str], pool_size: int = 8, check: bool = True, pool: bool = True) -> Store:
    """The store on its database, migrated (and, for a new SQLite file beside the earlier JSONL
    layout, that layout imported); `check`: SQLite's integrity check first (a server's start, not each
    worker's); `pool` False: PostgreSQL without a pool (the tokens command). StartupError with one line
    when it cannot be used."""
    if database:
        from .postgres import PostgresDatabase

        postgres = PostgresDatabase(database, pool_size)
        store = Store(postgres)
        postgres.open(store.rebuild_daily_totals, sample_digests.rebuild, pool=pool)
        return store
    from .jsonl_import import earlier_layout, import_layout
    from .sqlite import SqliteDatabase

    sqlite = SqliteDatabase(data)
    store = Store(sqlite)
    sqlite.open(lambda tx: import_layout(data, tx, store) if earlier_layout(data) else None, check=check,
                rebuild_totals=store.rebuild_daily_totals, rebuild_digests=sample_digests.rebuild)
    return store

"""Every backend implements the whole Storage protocol (storage/base.py), the embedded backend's hooks
for --workers included (refresh, history_state, on_foreign, keep_lock_for_workers, with their no-op
meaning for PostgreSQL): the app calls them on any storage, without asking which backend it has."""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from stepserver.storage.base import Storage  # noqa: E402
from stepserver.storage.embedded import EmbeddedStorage  # noqa: E402
from stepserver.storage.postgres import PostgresStorage  # noqa: E402


def members() -> tuple[list[str], list[str]]:
    """The protocol's attributes and methods."""
    attributes = sorted(Storage.__annotations__)
    methods = sorted(name for name, value in vars(Storage).items() if inspect.isfunction(value) and not name.startswith("_"))
    return attributes, methods


def test_the_protocol_declares_the_workers_hooks():
    attributes, methods = members()
    assert "on_foreign" in attributes
    assert {"refresh", "history_state", "keep_lock_for_workers", "sample_columns_between", "latest_end_ns"} <= set(methods)


@pytest.mark.parametrize("make", [lambda path: EmbeddedStorage(path), lambda path: PostgresStorage("postgresql://nobody@/none")],
                         ids=["embedded", "postgres"])
def test_every_backend_implements_every_member(tmp_path, make):
    storage = make(tmp_path)  # not opened: only its shape
    attributes, methods = members()
    for name in attributes:
        assert hasattr(storage, name), name
    for name in methods:
        implemented = getattr(type(storage), name, None)
        assert inspect.isfunction(implemented), name
        assert list(inspect.signature(implemented).parameters) == list(inspect.signature(getattr(Storage, name)).parameters), name
    assert storage.on_foreign is None  # until the app sets it


def test_postgres_has_nothing_to_refresh_nor_a_lock_to_keep():
    storage = PostgresStorage("postgresql://nobody@/none")
    assert storage.refresh("alice") is None  # no connection needed: nothing is asked
    assert storage.keep_lock_for_workers() == -1

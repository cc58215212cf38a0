"""Damage is refused, not skipped. A SQLite file with bits flipped is checked at start (PRAGMA
integrity_check): damage found is one line and exit 1, and a sample deleted before the damage is
never served as live again; damage met by a statement while running makes /health and the answers
say what is wrong. (PostgreSQL: the tests' cluster has data checksums, conftest.)"""

from __future__ import annotations

import random
import sqlite3
import sys
from pathlib import Path

import pytest
import requests

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from stepserver.errors import StorageUnavailable  # noqa: E402
from stepserver.storage import open_storage  # noqa: E402

from conftest import ServerProcess, make_samples  # noqa: E402


def written_history(tmp_path: Path) -> tuple[ServerProcess, set, set]:
    """A server's SQLite file holding 3,000 samples posted, 1,000 of them deleted; stopped and
    checkpointed (everything in the file, nothing in the WAL). Returns (server, live ids, deleted ids)."""
    server = ServerProcess(tmp_path, single_user=True).start()
    samples = make_samples(3000)
    for first in range(0, 3000, 1000):
        assert server.post(samples[first : first + 1000]).json()["saved"] == 1000
    deleted = {sample["id"] for sample in samples[::3]}
    for first in range(0, len(deleted), 1000):
        assert server.delete_ids(sorted(deleted)[first : first + 1000]).status_code == 200
    assert server.stop() == 0
    with sqlite3.connect(server.sqlite_path()) as connection:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return server, {sample["id"] for sample in samples} - deleted, deleted


def flip(path: Path, offset: int, bit: int) -> None:
    with open(path, "r+b") as handle:
        handle.seek(offset)
        byte = handle.read(1)[0]
        handle.seek(offset)
        handle.write(bytes([byte ^ (1 << bit)]))


def refused_or_faithful(server: ServerProcess, live: set, deleted: set) -> str:
    """Starts the server on the damaged file: either it refuses (exit 1, one line saying what
    integrity_check found), or it serves no deleted sample and only samples that were live."""
    server.start(wait=False)
    while server.proc.poll() is None and "api-server listening" not in server.stderr():
        try:
            if requests.get(server.url + "/health", timeout=1).status_code in (200, 503):
                break
        except requests.ConnectionError:
            pass
    if server.proc.poll() is not None:
        assert server.proc.returncode == 1
        lines = [line for line in server.stderr().splitlines() if line.strip()]
        assert len(lines) == 1 and "stepsync.sqlite" in lines[0], lines
        return "refused"
    server.wait_ready()
    served = {sample["id"] for sample in server.all_samples()}
    assert not served & deleted, "a deleted sample is served as live"
    assert served <= live
    assert server.stop() == 0
    return "served"


def test_a_flipped_bit_in_an_indexed_value_is_refused_at_start(tmp_path):
    """The bytes of a live sample's id appear in its row and in the primary key's index: a bit flipped
    in either makes them disagree, which integrity_check reports."""
    server, live, deleted = written_history(tmp_path)
    path = server.sqlite_path()
    pristine = path.read_bytes()
    some_id = sorted(live)[100].encode()
    places = [index for index in range(len(pristine)) if pristine.startswith(some_id, index)]
    assert len(places) >= 2
    for place in places:
        path.write_bytes(pristine)
        flip(path, place + 10, 1)
        assert refused_or_faithful(server, live, deleted) == "refused"
        assert "is damaged, refusing to serve it (PRAGMA integrity_check:" in server.stderr()
    path.write_bytes(pristine)
    assert refused_or_faithful(server, live, deleted) == "served"


def test_bits_flipped_anywhere_never_bring_a_deleted_sample_back(tmp_path):
    """Seeded single-bit flips over the whole file, one at a time: every start either refuses with one
    line or serves only what was live (a flip inside a value no index covers, such as a count, cannot
    be seen by SQLite, which keeps no checksums: README, Storage)."""
    server, live, deleted = written_history(tmp_path)
    path = server.sqlite_path()
    pristine = path.read_bytes()
    rng = random.Random(31)
    outcomes = []
    for _ in range(24):
        path.write_bytes(pristine)
        flip(path, rng.randrange(100, len(pristine)), rng.randrange(8))
        outcomes.append(refused_or_faithful(server, live, deleted))
    assert "refused" in outcomes


def test_damage_met_while_running_is_said_by_health_and_answers(tmp_path):
    server, live, deleted = written_history(tmp_path)
    with sqlite3.connect(server.sqlite_path()) as connection:
        root = connection.execute("SELECT rootpage FROM sqlite_master WHERE name = 'samples'").fetchone()[0]
        page_size = connection.execute("PRAGMA page_size").fetchone()[0]
    store = open_storage(server.data, None, pool_size=1)  # checked and open: the damage comes after
    try:
        assert store.health() is None
        flip(server.sqlite_path(), (root - 1) * page_size, 1)  # the b-tree page's type byte
        store.close()
        store = open_storage(server.data, None, pool_size=1, check=False)
        with pytest.raises(StorageUnavailable) as raised:
            store.read("local", 0, 10, False)
        assert "the database is damaged (database disk image is malformed)" in raised.value.message
        assert store.health() == raised.value.message
    finally:
        store.close()

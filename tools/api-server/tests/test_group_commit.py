"""The embedded backend's group commit (UserLog._await_durable), in process with a gated sync: a write
is answered only after a sync that began after its bytes were written; writes that arrive while a
sync runs share the next one; a failed sync fails every write it would have covered and leaves the
file as the acknowledged writes made it (checked by reopening it)."""

from __future__ import annotations

import errno
import sys
import threading
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from stepserver.contract import SampleFields  # noqa: E402
from stepserver.errors import StorageUnavailable  # noqa: E402
from stepserver.storage import user_log as embedded  # noqa: E402 (UserLog and the sync it calls)
from stepserver.storage.user_log import UserLog  # noqa: E402

RECEIVED = "2026-11-25T12:00:00Z"


def samples(first: int, count: int, prefix: str = "g", steps: int = 10) -> list[SampleFields]:
    return [SampleFields(f"{prefix}{n}", "2026-03-01T10:00:00Z", "2026-03-01T10:05:00Z", steps + n, "com.example", None)
            for n in range(first, first + count)]


def until(predicate, what: str) -> None:
    deadline = time.monotonic() + 30
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.001)


class GatedSync:
    """Replaces the backend's sync: each call is counted and waits for the test to let it finish
    (or fail it with EIO)."""

    def __init__(self, monkeypatch) -> None:
        self.started = 0
        self.finished = 0
        self.allowed = 0
        self.failing = False
        self.condition = threading.Condition()
        self.real = embedded.sync_file
        monkeypatch.setattr(embedded, "sync_file", self)

    def __call__(self, fd: int) -> None:
        with self.condition:
            self.started += 1
            number = self.started
            self.condition.wait_for(lambda: self.allowed >= number, timeout=30)
            self.finished += 1
            if self.failing:
                raise OSError(errno.EIO, "injected")
        self.real(fd)

    def allow(self, count: int = 1) -> None:
        with self.condition:
            self.allowed += count
            self.condition.notify_all()


class Writer(threading.Thread):
    def __init__(self, user_log: UserLog, batch: list[SampleFields]) -> None:
        super().__init__(daemon=True)
        self.user_log, self.batch = user_log, batch
        self.result: object = None

    def run(self) -> None:
        try:
            self.result = self.user_log.save(self.batch, RECEIVED)
        except StorageUnavailable as error:
            self.result = error


def ids_served(user_log: UserLog) -> list[str]:
    lines, _ = user_log.read(0, 100_000, False)
    return [line.split(b'"', 4)[3].decode() for line in lines]


def reopened(path: Path) -> list[str]:
    user_log = UserLog("u", path)
    user_log.open()
    try:
        return ids_served(user_log)
    finally:
        user_log.close()


@pytest.fixture
def user_log(tmp_path):
    log = UserLog("u", tmp_path / "u.jsonl")
    log.open()
    yield log
    log.close()


def test_writes_arriving_during_a_sync_share_the_next_one_and_are_answered_after_it(user_log, monkeypatch):
    sync = GatedSync(monkeypatch)
    first = Writer(user_log, samples(0, 50, "a"))
    first.start()
    until(lambda: sync.started == 1, "the first write's sync")
    size_after_first = user_log.written
    second, third = Writer(user_log, samples(0, 50, "b")), Writer(user_log, samples(0, 50, "c"))
    second.start()
    third.start()
    until(lambda: len(user_log.unpublished) == 3, "both later writes written")
    assert user_log.written > size_after_first
    assert first.result is None and second.result is None and third.result is None  # nobody answered yet
    assert ids_served(user_log) == []  # nothing visible before it is durable
    sync.allow()
    first.join(30)
    assert first.result == 50
    until(lambda: sync.started == 2, "the second sync")
    assert second.result is None and third.result is None  # the first sync began before their bytes
    assert len(ids_served(user_log)) == 50
    sync.allow()
    second.join(30)
    third.join(30)
    assert second.result == 50 and third.result == 50
    assert sync.started == 2  # one sync for the two writes that arrived while the first ran
    assert user_log.size == user_log.written
    assert sorted(ids_served(user_log)) == sorted(f"{p}{n}" for p in "abc" for n in range(50))
    assert sorted(reopened(user_log.path)) == sorted(ids_served(user_log))


def test_a_repeat_of_a_write_not_yet_durable_waits_for_it_and_writes_nothing(user_log, monkeypatch):
    sync = GatedSync(monkeypatch)
    first = Writer(user_log, samples(0, 20))
    first.start()
    until(lambda: sync.started == 1, "the first write's sync")
    written = user_log.written
    repeat = Writer(user_log, samples(0, 20))
    repeat.start()
    until(lambda: len(user_log.unpublished) == 2, "the repeat waiting")
    assert user_log.written == written and repeat.result is None
    sync.allow(2)
    first.join(30)
    repeat.join(30)
    assert first.result == 20 and repeat.result == 0
    assert len(ids_served(user_log)) == 20


def test_a_failed_sync_fails_every_write_it_covers_and_the_file_keeps_only_acknowledged_ones(user_log, monkeypatch):
    assert user_log.save(samples(0, 30, "kept"), RECEIVED) == 30
    acknowledged_size = user_log.size
    sync = GatedSync(monkeypatch)
    first = Writer(user_log, samples(0, 40, "x"))
    first.start()
    until(lambda: sync.started == 1, "the first write's sync")
    second = Writer(user_log, samples(0, 40, "y"))
    second.start()
    until(lambda: len(user_log.unpublished) == 2, "the second write waiting")
    sync.failing = True
    sync.allow(10)
    first.join(30)
    second.join(30)
    assert isinstance(first.result, StorageUnavailable) and isinstance(second.result, StorageUnavailable)
    assert "syncing" in first.result.message
    assert user_log.path.stat().st_size == acknowledged_size == user_log.size == user_log.written
    assert sorted(ids_served(user_log)) == sorted(f"kept{n}" for n in range(30))
    sync.failing = False
    assert user_log.save(samples(0, 40, "y"), RECEIVED) == 40  # writes resume
    assert sorted(reopened(user_log.path)) == sorted([f"kept{n}" for n in range(30)] + [f"y{n}" for n in range(40)])


def test_a_deletion_behind_a_write_not_yet_durable_deletes_it_after_it(user_log, monkeypatch):
    sync = GatedSync(monkeypatch)
    first = Writer(user_log, samples(0, 10))
    first.start()
    until(lambda: sync.started == 1, "the first write's sync")
    deleted: list = []
    deleter = threading.Thread(target=lambda: deleted.append(user_log.delete_ids(["g1", "g2", "nope"], RECEIVED)))
    deleter.start()
    until(lambda: len(user_log.unpublished) == 2, "the deletion waiting")
    sync.allow(2)
    first.join(30)
    deleter.join(30)
    assert first.result == 10 and deleted == [2]
    expected = sorted(f"g{n}" for n in range(10) if n not in (1, 2))
    assert sorted(ids_served(user_log)) == expected
    assert sorted(reopened(user_log.path)) == expected


def test_a_deletion_asked_for_the_dates_it_removes_reads_them_from_a_write_not_yet_durable(user_log, monkeypatch):
    # The server asks for the removed versions' dates (daily totals); the ids' current lines are
    # still in a write waiting for its sync, not yet in the published index.
    sync = GatedSync(monkeypatch)
    first = Writer(user_log, samples(0, 10))
    first.start()
    until(lambda: sync.started == 1, "the first write's sync")
    removed: list[str] = []
    deleted: list = []
    deleter = threading.Thread(target=lambda: deleted.append(user_log.delete_ids(["g1", "g2"], RECEIVED, removed)))
    deleter.start()
    until(lambda: len(user_log.unpublished) == 2, "the deletion waiting")
    sync.allow(2)
    first.join(30)
    deleter.join(30)
    assert first.result == 10 and deleted == [2]
    assert removed == ["2026-03-01T10:00:00Z", "2026-03-01T10:05:00Z"] * 2
    assert sorted(reopened(user_log.path)) == sorted(f"g{n}" for n in range(10) if n not in (1, 2))


def test_changed_content_behind_a_write_not_yet_durable_is_a_new_version_and_the_same_content_is_not(user_log, monkeypatch):
    # A re-posted id's content is compared with its current line read back, here a line of a write
    # still waiting for its sync.
    sync = GatedSync(monkeypatch)
    first = Writer(user_log, samples(0, 20))
    first.start()
    until(lambda: sync.started == 1, "the first write's sync")
    changed = Writer(user_log, samples(0, 10, steps=500) + samples(10, 10))
    changed.start()
    until(lambda: len(user_log.unpublished) == 2, "the changed write waiting")
    sync.allow(2)
    first.join(30)
    changed.join(30)
    assert first.result == 20 and changed.result == 10
    lines, total = user_log.read(0, 100, True)
    assert total == 30
    assert user_log.save(samples(0, 10, steps=500), RECEIVED) == 0
    served = {line.split(b'"', 4)[3].decode(): line for line in user_log.read(0, 100, False)[0]}
    assert len(served) == 20 and b'"count":503,' in served["g3"] and b'"count":23,' in served["g13"]

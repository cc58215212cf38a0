"""The embedded backend's histories shared by --workers (UserLog with shared=True), in process: two
UserLog objects on one file stand for two workers (each has its own descriptors, so their flocks on
NAME.lock exclude each other as two processes' do). Each must read what the other wrote, report it
(on_foreign: the samples, and the dates of the versions they replaced or deleted), follow an emptied
history, skip a partial last line as a reader and cut it as a writer; a write holds the other off
until its sync."""

from __future__ import annotations

import os
import sys
import threading
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from stepserver.contract import SampleFields  # noqa: E402
from stepserver.storage.user_log import UserLog  # noqa: E402

RECEIVED = "2026-11-27T12:00:00Z"


def samples(first: int, count: int, day: int = 1, steps: int = 10) -> list[SampleFields]:
    return [SampleFields(f"s{n}", f"2026-03-{day:02d}T10:00:00Z", f"2026-03-{day:02d}T10:05:00Z", steps + n, "com.example", None)
            for n in range(first, first + count)]


class Worker:
    def __init__(self, path: Path) -> None:
        self.told: list[tuple] = []
        self.log = UserLog("alice", path, shared=True, on_foreign=lambda user, found, replaced: self.told.append(
            (user, None if found is None else sorted(sample.id for sample in found), replaced)))
        self.log.open()

    def ids(self) -> dict[str, int]:
        lines, total = self.log.read(0, 100_000, False)
        assert len(lines) == total
        import json

        return {record["id"]: record["count"] for record in map(json.loads, lines)}


def test_two_workers_read_and_report_each_others_writes(tmp_path):
    path = tmp_path / "alice.jsonl"
    a, b = Worker(path), Worker(path)
    assert a.log.save(samples(0, 5), RECEIVED) == 5
    assert b.ids() == {f"s{n}": 10 + n for n in range(5)}
    assert b.told == [("alice", ["s0", "s1", "s2", "s3", "s4"], [])]
    assert a.told == []  # its own write is not foreign

    # A replacement and a deletion by b: a learns the new version and the days of those they removed.
    assert b.log.save(samples(2, 1, day=3, steps=100), RECEIVED) == 1
    assert b.log.delete_ids(["s4"], RECEIVED) == 1
    assert a.ids() == {"s0": 10, "s1": 11, "s2": 102, "s3": 13}
    assert a.told == [("alice", ["s2"], ["2026-03-01T10:00:00Z", "2026-03-01T10:05:00Z",
                                          "2026-03-01T10:00:00Z", "2026-03-01T10:05:00Z"])]
    # a's daily read path (the time index) sees b's version on its new day, not the old one.
    march_3 = int(datetime(2026, 3, 3, tzinfo=timezone.utc).timestamp()) * 10**9
    assert a.log.sample_columns_between(march_3, march_3 + 86_400 * 10**9).count.tolist() == [102]
    assert sorted(a.log.sample_columns_between(march_3 - 2 * 86_400 * 10**9, march_3 - 86_400 * 10**9).count.tolist()) == [10, 11, 13]

    # Writing on top of what the other wrote: no duplicate, the other's version compared.
    assert a.log.save(samples(2, 1, day=3, steps=100) + samples(5, 1), RECEIVED) == 1
    assert b.ids() == a.ids() == {"s0": 10, "s1": 11, "s2": 102, "s3": 13, "s5": 15}


def test_an_emptied_history_is_followed_and_a_torn_line_is_skipped_then_cut(tmp_path):
    path = tmp_path / "alice.jsonl"
    a, b = Worker(path), Worker(path)
    a.log.save(samples(0, 3), RECEIVED)
    assert len(b.ids()) == 3
    a.log.delete_all()
    assert b.ids() == {}
    assert b.told[-1] == ("alice", None, None)  # anything may have changed
    a.log.save(samples(10, 2), RECEIVED)
    assert b.ids() == {"s10": 20, "s11": 21}

    # A worker that died mid-append left a partial line: a reader does not read it, a writer cuts it.
    intact = path.read_bytes()
    with open(path, "ab") as handle:
        handle.write(b'{"id":"torn","startDate":"2026-03-01T10:00:00Z","sourceDeviceName":"' + b"x" * 600)  # longer than a line
    assert a.ids() == {"s10": 20, "s11": 21}
    assert b.log.save(samples(20, 1), RECEIVED) == 1
    data = path.read_bytes()
    assert data.startswith(intact) and data.endswith(b"\n") and data.count(b"\n") == 3 and b"x" * 10 not in data
    assert a.ids() == {"s10": 20, "s11": 21, "s20": 30}
    # Reopened from scratch (a restart), the file holds exactly that.
    c = Worker(path)
    assert c.ids() == a.ids()


def test_a_write_holds_the_other_worker_off_until_it_is_durable(tmp_path, monkeypatch):
    path = tmp_path / "alice.jsonl"
    a, b = Worker(path), Worker(path)
    from stepserver.storage import user_log as embedded

    gate = threading.Event()
    entered = threading.Event()
    real = embedded.sync_file

    def gated(fd: int) -> None:
        if threading.current_thread().name == "writer-a":
            entered.set()
            assert gate.wait(30)
        real(fd)

    monkeypatch.setattr(embedded, "sync_file", gated)
    writer = threading.Thread(target=a.log.save, args=(samples(0, 4), RECEIVED), name="writer-a")
    writer.start()
    assert entered.wait(30)  # a's lines are in the file, its sync not done
    assert os.path.getsize(path) > 0
    seen: list[dict] = []
    reader = threading.Thread(target=lambda: seen.append(b.ids()))
    reader.start()
    reader.join(0.3)
    assert reader.is_alive(), "b read while a's write was not durable"
    gate.set()
    writer.join(30)
    reader.join(30)
    assert seen == [{f"s{n}": 10 + n for n in range(4)}]

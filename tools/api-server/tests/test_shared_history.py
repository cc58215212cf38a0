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


def _get(app, path: str, query: str, token: str) -> tuple[int, bytes]:
    """One request to the ASGI app, in process: its status and body."""
    import asyncio

    async def run() -> list[dict]:
        sent: list[dict] = []
        scope = {"type": "http", "http_version": "1.1", "method": "GET", "scheme": "http", "path": path,
                 "raw_path": path.encode(), "root_path": "", "query_string": query.encode(),
                 "headers": [(b"host", b"x"), (b"authorization", f"Bearer {token}".encode())],
                 "server": ("127.0.0.1", 80), "client": ("127.0.0.1", 1)}

        async def receive() -> dict:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: dict) -> None:
            sent.append(message)

        await app(scope, receive, send)
        return sent

    sent = asyncio.run(run())
    return sent[0]["status"], b"".join(message.get("body", b"") for message in sent[1:])


def test_a_daily_query_applies_the_other_workers_writes_once(tmp_path, monkeypatch):
    """A worker's GET /steps/daily applies what another worker wrote once, before it looks at its caches
    (Context.refresh), and its reads of the days to compute use that (no second stat and flocks), while
    its answer still follows every write acknowledged before it."""
    import json

    from stepserver.app import create_app
    from stepserver.auth import new_token, now_text
    from stepserver.settings import Settings
    from stepserver.storage.embedded import EmbeddedStorage
    from stepserver.storage.sqlite_tokens import SqliteTokenStore
    from stepserver.storage.user_log import UserLog as Log

    data = tmp_path / "data"
    tokens = SqliteTokenStore(data / "tokens.sqlite")
    tokens.open()
    token_id, token, digest = new_token()
    tokens.add(token_id, "alice", digest, now_text())
    tokens.close()
    storage = EmbeddedStorage(data, "worker")
    storage.open()
    other = Worker(data / "users" / "alice.jsonl")  # the other worker (it creates the history)
    app = create_app(Settings(data=data, workers=2), storage)
    catch_ups: list[str] = []
    real = Log._catch_up

    def counted(self, writer: bool) -> None:
        if threading.current_thread().name.startswith("request"):
            catch_ups.append(self.user)
        real(self, writer)

    monkeypatch.setattr(Log, "_catch_up", counted)
    try:
        for first, day, steps in ((0, 1, 10), (2, 3, 100), (10, 2, 1000)):  # new; replacing; new again
            assert other.log.save(samples(first, 3, day=day, steps=steps), RECEIVED) == 3
            stored = other.ids()
            # The default priority (the daily buckets' columnar read), then another (the storage's samples_between).
            for query in ("tz=UTC&from=2026-03-01&to=2026-03-04", "tz=UTC&from=2026-03-01&to=2026-03-04&priority=com.*"):
                catch_ups.clear()
                status, body = _get(app, "/steps/daily", query, token)
                assert status == 200, body
                assert catch_ups == ["alice"]  # once, though days were computed from the history
                assert sum(row["raw"] for row in json.loads(body)["days"]) == sum(stored.values())
    finally:
        app.context.daily_buckets.close()
        storage.close()

"""Crash and restart: the JSONL is the source of truth, the SQLite index is rebuilt or caught up from it."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import requests

from conftest import LINE_KEYS, make_samples, read_lines, read_records, strip_received


def index_path(server) -> Path:
    return server.data.with_name(server.data.name + ".index.sqlite")


def assert_all_lines_valid(path: Path) -> list[dict]:
    records = read_records(path)  # asserts key order and the trailing newline
    for record in records:
        assert set(record) == set(LINE_KEYS)
    return records


def test_sigkill_then_restart_keeps_dedupe_and_total(server):
    samples = make_samples(300)
    assert server.post(samples[:200]).json()["saved"] == 200
    assert server.post(samples[200:]).json()["saved"] == 100
    before = server.data.read_bytes()
    server.kill()
    server.start()
    assert "(300 records, 300 ids)" in server.stderr()
    assert server.total() == 300
    assert server.post(samples).json()["saved"] == 0
    assert server.data.read_bytes() == before
    assert server.post(make_samples(5, start=300)).json()["saved"] == 5
    assert server.total() == 305


def test_partial_last_line_is_truncated_on_start(server):
    samples = make_samples(20)
    server.post(samples)
    intact = server.data.read_bytes()
    server.kill()
    torn = b'{"id":"torn-1","startDate":"2024-01-15T10:30:00Z","endDate":"2024-01-'
    with open(server.data, "ab") as handle:
        handle.write(torn)
    server.start()
    assert f"dropped {len(torn)} bytes of a partial last line at byte offset {len(intact)}" in server.stderr()
    assert server.data.read_bytes() == intact
    assert server.total() == 20
    assert server.post(samples).json()["saved"] == 0
    more = make_samples(10, start=20)
    assert server.post(more).json()["saved"] == 10
    records = assert_all_lines_valid(server.data)
    assert [strip_received(record) for record in records] == samples + more


def test_partial_only_line_is_truncated_to_empty(server):
    server.stop()
    server.data.write_bytes(b'{"id":"x","start')
    server.start()
    assert "dropped 16 bytes of a partial last line at byte offset 0" in server.stderr()
    assert server.data.read_bytes() == b""
    assert server.post(make_samples(2)).json()["saved"] == 2
    assert len(assert_all_lines_valid(server.data)) == 2


def test_deleted_index_is_rebuilt_with_the_same_dedupe(server):
    samples = make_samples(150)
    server.post(samples[:100])
    changed = dict(samples[5], count=samples[5]["count"] + 1)
    server.post([changed])
    server.kill()  # leaves the -wal file behind; only the main index file is deleted
    index_path(server).unlink()
    server.start()
    assert "rebuilding it from" in server.stderr()
    assert "(101 records, 100 ids)" in server.stderr()
    assert server.total() == 101
    assert server.post(samples[:100]).json()["saved"] == 1  # samples[5]'s stored content is `changed`
    assert server.post([changed]).json()["saved"] == 1
    assert server.post(samples).json()["saved"] == 51  # 50 new, and samples[5] differs from `changed`
    assert server.total() == 154


def test_corrupt_index_is_rebuilt(server):
    samples = make_samples(40)
    server.post(samples)
    assert server.stop() == 0
    index_path(server).write_bytes(b"this is not a database" * 100)
    server.start()
    assert "rebuilding it from" in server.stderr()
    assert server.total() == 40
    assert server.post(samples).json()["saved"] == 0


def test_index_covering_more_than_the_jsonl_is_rebuilt(server):
    samples = make_samples(50)
    server.post(samples)
    assert server.stop() == 0
    lines = read_lines(server.data)
    server.data.write_bytes(b"\n".join(lines[:30]) + b"\n")  # truncated externally
    server.start()
    assert "covers" in server.stderr() and "rebuilding" in server.stderr()
    assert server.total() == 30
    assert server.post(samples[:30]).json()["saved"] == 0
    assert server.post(samples).json()["saved"] == 20
    assert [strip_received(record) for record in read_records(server.data)] == samples


def test_replaced_jsonl_of_the_same_size_is_detected(server):
    server.post(make_samples(30, prefix="a"))
    assert server.stop() == 0
    original = server.data.read_bytes()
    replacement = original.replace(b'"a-', b'"b-')  # same length, different ids
    assert len(replacement) == len(original) and replacement != original
    server.data.write_bytes(replacement)
    server.start()
    assert "does not match" in server.stderr()
    assert server.total() == 30
    assert server.post(make_samples(30, prefix="b")).json()["saved"] == 0
    assert server.post(make_samples(30, prefix="a")).json()["saved"] == 30


def test_lines_appended_while_stopped_are_caught_up(server):
    samples = make_samples(20)
    server.post(samples[:10])
    assert server.stop() == 0
    extra = [dict(sample, receivedAt="2024-01-20T15:00:00Z") for sample in samples[10:]]
    with open(server.data, "ab") as handle:
        for record in extra:
            handle.write(json.dumps(record, separators=(",", ":")).encode() + b"\n")
    server.start()
    assert "rebuilding" not in server.stderr()
    assert "(20 records, 20 ids)" in server.stderr()
    assert server.post(samples).json()["saved"] == 0
    assert [strip_received(sample) for sample in server.all_samples()] == samples


def test_unreadable_line_in_the_middle_is_reported_and_skipped(server):
    samples = make_samples(6)
    server.post(samples[:3])
    assert server.stop() == 0
    offset = server.data.stat().st_size
    with open(server.data, "ab") as handle:
        handle.write(b"this is not json\n")
    server.data.with_name(server.data.name + ".index.sqlite").unlink()
    server.start()
    assert f"skipping unreadable line at byte offset {offset} (17 bytes)" in server.stderr()
    server.post(samples[3:])
    assert server.total() == 6
    assert [strip_received(sample) for sample in server.all_samples()] == samples
    assert [strip_received(sample) for sample in server.get(offset=2, limit=2).json()["samples"]] == samples[2:4]
    assert len(read_lines(server.data)) == 7  # the bad line stays in the file


def test_sigkill_during_uploads_loses_no_acknowledged_sample(server):
    """Two clients upload continuously; the server is SIGKILLed mid-stream. After a restart every sample
    that was answered 200 is stored, every line is well-formed, and a retry of everything is deduplicated."""
    acknowledged: list[dict] = []
    attempted: list[dict] = []
    lock = threading.Lock()
    stop = threading.Event()

    def uploader(client: int) -> None:
        with requests.Session() as session:
            for batch in range(10_000):
                if stop.is_set():
                    return
                samples = make_samples(200, start=batch * 200, prefix=f"c{client}")
                with lock:
                    attempted.extend(samples)
                try:
                    response = session.post(server.url + "/steps", json={"samples": samples}, timeout=30)
                except requests.RequestException:
                    return  # the server died mid-request: this batch is unacknowledged
                if response.status_code != 200:
                    return
                with lock:
                    acknowledged.extend(samples)

    threads = [threading.Thread(target=uploader, args=(client,)) for client in range(2)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with lock:
            if len(acknowledged) >= 4000:
                break
        time.sleep(0.01)
    server.kill()
    stop.set()
    for thread in threads:
        thread.join(timeout=60)
    assert len(acknowledged) >= 4000, "uploads too slow to reach the kill point"

    server.start()
    records = assert_all_lines_valid(server.data)
    stored_ids = [record["id"] for record in records]
    assert len(stored_ids) == len(set(stored_ids))
    acknowledged_ids = {sample["id"] for sample in acknowledged}
    assert acknowledged_ids <= set(stored_ids)
    assert set(stored_ids) <= {sample["id"] for sample in attempted}
    assert server.total() == len(records)
    # A client retry of everything attempted writes exactly the samples that were not stored.
    saved = sum(server.post(attempted[i : i + 1000]).json()["saved"] for i in range(0, len(attempted), 1000))
    assert saved == len({sample["id"] for sample in attempted}) - len(set(stored_ids))
    assert server.total() == len({sample["id"] for sample in attempted})

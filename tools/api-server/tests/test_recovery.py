"""Crash and restart. The embedded backend's JSONL is the source of truth: a torn last line is cut,
an unreadable line in the middle is reported and skipped, the index is rebuilt from the file."""

from __future__ import annotations

import json
import threading

import requests

from conftest import LINE_KEYS, make_samples, read_lines, read_records, strip_received, wait_until


def test_sigkill_then_restart_keeps_dedupe_and_total(server):
    samples = make_samples(300)
    assert server.post(samples[:200]).json()["saved"] == 200
    assert server.post(samples[200:]).json()["saved"] == 100
    server.kill()
    server.start()
    assert "(1 users, 300 samples)" in server.stderr() or server.workers > 1  # (workers: no counts)
    assert server.total() == 300
    assert server.post(samples).json()["saved"] == 0
    assert server.post(make_samples(5, start=300)).json()["saved"] == 5
    assert server.total() == 305


def test_partial_last_line_is_truncated_on_start(embedded_server):
    server = embedded_server
    samples = make_samples(20)
    server.post(samples)
    intact = server.jsonl().read_bytes()
    server.kill()
    torn = b'{"id":"torn-1","startDate":"2024-01-15T10:30:00Z","endDate":"2024-01-'
    with open(server.jsonl(), "ab") as handle:
        handle.write(torn)
    server.start()
    assert f"dropped {len(torn)} bytes of a partial last line at byte offset {len(intact)}" in server.stderr()
    assert server.jsonl().read_bytes() == intact
    assert server.total() == 20
    assert server.post(samples).json()["saved"] == 0
    more = make_samples(10, start=20)
    assert server.post(more).json()["saved"] == 10
    assert [strip_received(record) for record in read_records(server.jsonl())] == samples + more


def test_partial_only_line_is_truncated_to_empty(embedded_server):
    server = embedded_server
    server.stop()
    server.jsonl().parent.mkdir(parents=True, exist_ok=True)
    server.jsonl().write_bytes(b'{"id":"x","start')
    server.start()
    assert "dropped 16 bytes of a partial last line at byte offset 0" in server.stderr()
    assert server.jsonl().read_bytes() == b""
    assert server.post(make_samples(2)).json()["saved"] == 2
    assert len(read_records(server.jsonl())) == 2


def test_lines_appended_while_stopped_are_served(embedded_server):
    server = embedded_server
    samples = make_samples(20)
    server.post(samples[:10])
    assert server.stop() == 0
    with open(server.jsonl(), "ab") as handle:
        for record in samples[10:]:
            line = dict(record, receivedAt="2024-01-20T15:00:00Z")
            handle.write(json.dumps(line, separators=(",", ":"), ensure_ascii=False).encode() + b"\n")
    server.start()
    assert "(1 users, 20 samples)" in server.stderr()
    assert server.post(samples).json()["saved"] == 0
    assert [strip_received(sample) for sample in server.all_samples()] == samples


def test_unreadable_line_in_the_middle_is_reported_and_skipped(embedded_server):
    server = embedded_server
    samples = make_samples(6)
    server.post(samples[:3])
    assert server.stop() == 0
    offset = server.jsonl().stat().st_size
    with open(server.jsonl(), "ab") as handle:
        handle.write(b"this is not json\n")
    server.start()
    assert f"skipping unreadable line at byte offset {offset} (17 bytes)" in server.stderr()
    server.post(samples[3:])
    assert server.total() == 6
    assert [strip_received(sample) for sample in server.all_samples()] == samples
    assert [strip_received(sample) for sample in server.get(offset=2, limit=2).json()["samples"]] == samples[2:4]
    assert len(read_lines(server.jsonl())) == 7  # the bad line stays in the file


def test_sigkill_during_uploads_loses_no_acknowledged_sample(server):
    """Two clients upload continuously; the server is SIGKILLed mid-stream. After a restart every sample
    that was answered 200 is stored, and a retry of everything is deduplicated."""
    acknowledged: list[dict] = []
    attempted: list[dict] = []
    lock = threading.Lock()
    stop = threading.Event()

    def uploader(client: int) -> None:
        with server.new_session() as session:
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
    wait_until(lambda: len(acknowledged) >= 4000, "4,000 acknowledged samples", timeout=60)
    server.kill()
    stop.set()
    for thread in threads:
        thread.join(timeout=60)

    server.start()
    stored = server.all_samples()
    stored_ids = [record["id"] for record in stored]
    assert len(stored_ids) == len(set(stored_ids))
    assert {sample["id"] for sample in acknowledged} <= set(stored_ids)
    assert set(stored_ids) <= {sample["id"] for sample in attempted}
    if server.backend == "embedded":
        records = read_records(server.jsonl())  # every line well-formed, keys in order
        assert all(list(record) == LINE_KEYS for record in records)
        assert len(records) == len(stored)
    saved = sum(server.post(attempted[i : i + 1000]).json()["saved"] for i in range(0, len(attempted), 1000))
    assert saved == len({sample["id"] for sample in attempted}) - len(set(stored_ids))
    assert server.total() == len({sample["id"] for sample in attempted})

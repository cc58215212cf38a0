"""The seed's checklist: health, POST saves to JSONL, GET returns, DELETE clears, exact line format."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone

from conftest import LINE_KEYS, make_sample, make_samples, read_lines, read_records, strip_received

RECEIVED_AT = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z")


def test_health(server):
    response = server.session.get(server.url + "/health", timeout=10)
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_startup_line_reports_address_data_and_counts(server):
    assert f"api-server listening on http://127.0.0.1:{server.port}, data {server.data} (0 records, 0 ids)" in server.stderr()
    assert server.post(make_samples(3)).json()["saved"] == 3
    server.restart()
    assert f"data {server.data} (3 records, 3 ids)" in server.stderr()


def test_post_saves_samples_to_jsonl(server):
    samples = make_samples(5)
    response = server.post(samples)
    assert response.status_code == 200
    assert response.json() == {"saved": 5, "message": "Success"}
    records = read_records(server.data)
    assert [strip_received(record) for record in records] == samples


def test_post_empty_list(server):
    response = server.post([])
    assert response.status_code == 200
    assert response.json() == {"saved": 0, "message": "No samples provided"}
    assert read_lines(server.data) == []


def test_get_returns_stored_samples_in_order(server):
    first, second = make_samples(3), make_samples(4, start=3)
    server.post(first)
    server.post(second)
    response = server.get()
    assert response.status_code == 200
    body = response.json()
    assert body["total"] == 7
    assert [strip_received(sample) for sample in body["samples"]] == first + second
    assert all(list(sample) == LINE_KEYS for sample in body["samples"])


def test_delete_clears_records_and_dedupe_index(server):
    samples = make_samples(10)
    assert server.post(samples).json()["saved"] == 10
    response = server.delete()
    assert response.status_code == 200
    assert response.json() == {"deleted": True, "message": "All samples deleted"}
    assert server.data.read_bytes() == b""
    assert server.get().json() == {"samples": [], "total": 0}
    # The dedupe index went with the records: the same samples are new again.
    assert server.post(samples).json()["saved"] == 10
    assert len(read_lines(server.data)) == 10
    # And the deletion survives a restart (nothing of the old history comes back).
    server.delete()
    server.post(samples[:2])
    server.restart()
    assert server.total() == 2
    assert [strip_received(record) for record in read_records(server.data)] == samples[:2]


def test_jsonl_line_format_is_exact(server):
    sample = make_sample(1, sourceDeviceName="Apple Watch")
    before = datetime.now(timezone.utc).replace(microsecond=0)
    server.post([sample])
    after = datetime.now(timezone.utc)
    lines = read_lines(server.data)
    assert len(lines) == 1
    received_at = json.loads(lines[0])["receivedAt"]
    assert RECEIVED_AT.fullmatch(received_at), received_at
    assert before <= datetime.fromisoformat(received_at) <= after + timedelta(seconds=1)
    expected = (
        '{"id":"%s","startDate":"%s","endDate":"%s","count":%d,"sourceBundleId":"com.apple.health",'
        '"sourceDeviceName":"Apple Watch","receivedAt":"%s"}'
        % (sample["id"], sample["startDate"], sample["endDate"], sample["count"], received_at)
    )
    assert lines[0] == expected.encode()


def test_every_line_is_one_compact_object_with_keys_in_order(server):
    server.post(make_samples(50))
    server.post(make_samples(50, start=50))
    lines = read_lines(server.data)
    assert len(lines) == 100
    for line in lines:
        record = json.loads(line)
        assert list(record) == LINE_KEYS
        assert line == json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode()


def test_optional_device_name_and_extra_fields(server):
    absent = make_sample(1)
    del absent["sourceDeviceName"]
    null = make_sample(2, sourceDeviceName=None)
    extra = make_sample(3, unknownField={"nested": [1, 2]}, another=5)
    assert server.post([absent, null, extra]).json()["saved"] == 3
    records = read_records(server.data)
    assert records[0]["sourceDeviceName"] is None
    assert records[1]["sourceDeviceName"] is None
    assert "unknownField" not in records[2] and "another" not in records[2]


def test_dates_are_stored_verbatim_and_offsets_accepted(server):
    samples = [
        make_sample(1, startDate="2024-01-15T10:30:00.123Z", endDate="2024-01-15T10:30:00.123Z"),
        make_sample(2, startDate="2024-01-15T10:30:00+02:00", endDate="2024-01-15T08:31:00Z"),
        make_sample(3, startDate="2024-01-15T10:30:00.000000001Z", endDate="2024-01-15T10:30:00.000000002Z"),
    ]
    response = server.post(samples)
    assert response.status_code == 200, response.text
    assert [strip_received(record) for record in read_records(server.data)] == samples


def test_large_count_and_zero_count(server):
    samples = [make_sample(1, count=0), make_sample(2, count=2**63 - 1)]
    assert server.post(samples).json()["saved"] == 2
    assert [record["count"] for record in read_records(server.data)] == [0, 2**63 - 1]


def test_unknown_route_and_method_answer_json_errors(server):
    response = server.session.get(server.url + "/nope", timeout=10)
    assert response.status_code == 404
    assert "/nope" in response.json()["error"]
    response = server.session.put(server.url + "/steps", timeout=10)
    assert response.status_code == 405
    assert response.json()["error"].startswith("Method Not Allowed: PUT /steps")
    assert set(response.headers["Allow"].split(", ")) == {"GET", "POST", "DELETE"}


def test_sigterm_exits_zero(server):
    server.post(make_samples(2))
    assert server.stop() == 0
    assert len(read_lines(server.data)) == 2


def test_second_server_on_same_data_is_refused(server, tmp_path):
    from conftest import ServerProcess

    other = ServerProcess(server.data, tmp_path / "other")
    other.log_dir.mkdir()
    other.start(wait=False)
    assert other.proc.wait(timeout=30) == 1
    message = other.stderr()
    assert "in use by another api-server" in message and f"pid {server.proc.pid}" in message
    # The first server is unaffected.
    assert server.post(make_samples(1)).json()["saved"] == 1


def test_stop_signal_right_after_the_listening_line_exits_zero(tmp_path):
    """The start-up line is printed only once SIGTERM/SIGINT lead to a clean stop."""
    import signal
    import time

    from conftest import ServerProcess

    for number in (signal.SIGTERM, signal.SIGINT):
        instance = ServerProcess(tmp_path / "steps.jsonl", tmp_path)
        instance.start(wait=False)
        deadline = time.monotonic() + 30
        while "api-server listening on" not in instance.stderr():
            assert instance.proc.poll() is None, instance.stderr()
            assert time.monotonic() < deadline, "no start-up line"
            time.sleep(0.001)
        instance.proc.send_signal(number)
        assert instance.proc.wait(timeout=30) == 0, instance.stderr()

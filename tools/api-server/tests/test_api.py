"""The seed's checklist on both backends: health, POST saves, GET returns, DELETE clears; the JSONL
line format of the embedded backend; start-up and stop."""

from __future__ import annotations

import json
import re
import signal
from datetime import datetime, timedelta, timezone

from conftest import (LINE_KEYS, ServerProcess, make_sample, make_samples, read_lines, read_records,
                      strip_received, wait_until)

RECEIVED_AT = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z")


def test_health(server):
    response = server.session.get(server.url + "/health", timeout=10)
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_startup_line_reports_address_storage_and_counts(server):
    assert f"api-server listening on http://127.0.0.1:{server.port}, " in server.stderr()
    if server.workers > 1:  # the supervisor indexes nothing (each worker indexes the users it serves)
        assert "(0 users), tokens required, 2 workers" in server.stderr()
        assert server.post(make_samples(3)).json()["saved"] == 3
        server.restart()
        assert "(1 users), tokens required, 2 workers" in server.stderr()
        return
    assert "(0 users, 0 samples), tokens required" in server.stderr()
    assert server.post(make_samples(3)).json()["saved"] == 3
    server.restart()
    assert "(1 users, 3 samples), tokens required" in server.stderr()


def test_post_saves_and_get_returns_them_in_order(server):
    first, second = make_samples(3), make_samples(4, start=3)
    assert server.post(first).json() == {"saved": 3, "message": "Success"}
    assert server.post(second).json() == {"saved": 4, "message": "Success"}
    response = server.get()
    assert response.status_code == 200
    body = response.json()
    assert body["total"] == 7
    assert [strip_received(sample) for sample in body["samples"]] == first + second
    assert all(list(sample) == LINE_KEYS for sample in body["samples"])
    assert all(RECEIVED_AT.fullmatch(sample["receivedAt"]) for sample in body["samples"])


def test_post_empty_list(server):
    response = server.post([])
    assert response.status_code == 200
    assert response.json() == {"saved": 0, "message": "No samples provided"}
    assert server.total() == 0


def test_delete_clears_the_callers_data(server):
    samples = make_samples(10)
    assert server.post(samples).json()["saved"] == 10
    response = server.delete()
    assert response.status_code == 200
    assert response.json() == {"deleted": True, "message": "All samples deleted"}
    assert server.get().json() == {"samples": [], "total": 0}
    assert server.total(versions="all") == 0
    # The dedupe state went with the records: the same samples are new again.
    assert server.post(samples).json()["saved"] == 10
    server.delete()
    server.post(samples[:2])
    server.restart()
    assert server.total() == 2
    assert [strip_received(sample) for sample in server.all_samples()] == samples[:2]


def test_optional_device_name_and_extra_fields(server):
    absent = make_sample(1)
    del absent["sourceDeviceName"]
    null = make_sample(2, sourceDeviceName=None)
    extra = make_sample(3, unknownField={"nested": [1, 2]}, another=5)
    assert server.post([absent, null, extra]).json()["saved"] == 3
    records = server.all_samples()
    assert records[0]["sourceDeviceName"] is None
    assert records[1]["sourceDeviceName"] is None
    assert "unknownField" not in records[2] and "another" not in records[2]


def test_dates_are_stored_verbatim_and_offsets_accepted(server):
    samples = [
        make_sample(1, startDate="2024-01-15T10:30:00.123Z", endDate="2024-01-15T10:30:00.123Z"),
        make_sample(2, startDate="2024-01-15T10:30:00+02:00", endDate="2024-01-15T08:31:00Z"),
        make_sample(3, startDate="2024-01-15T10:30:00.000000001Z", endDate="2024-01-15T10:30:00.000000002Z"),
        make_sample(4, startDate="2024-01-15T23:59:00Z", endDate="2024-01-16T00:01:00.5-01:00"),
    ]
    response = server.post(samples)
    assert response.status_code == 200, response.text
    assert [strip_received(record) for record in server.all_samples()] == samples


def test_count_bounds(server):
    samples = [make_sample(1, count=0), make_sample(2, count=1_000_000)]
    assert server.post(samples).json()["saved"] == 2
    assert [record["count"] for record in server.all_samples()] == [0, 1_000_000]


def test_unknown_route_and_method_answer_json_errors(server):
    response = server.session.get(server.url + "/nope", timeout=10)
    assert response.status_code == 404
    assert "/nope" in response.json()["error"]
    response = server.session.put(server.url + "/steps", timeout=10)
    assert response.status_code == 405
    assert response.json()["error"].startswith("Method Not Allowed: PUT /steps")
    assert set(response.headers["Allow"].split(", ")) == {"GET", "POST", "DELETE"}


def test_openapi_schema_carries_the_contract(server):
    response = server.session.get(server.url + "/openapi.json", timeout=10)
    assert response.status_code == 200
    schema = response.json()
    assert schema["openapi"].startswith("3.")
    assert set(schema["paths"]) >= {"/health", "/steps", "/steps/deletions"}
    sample = schema["components"]["schemas"]["Sample"]
    assert sample["properties"]["count"]["maximum"] == 1_000_000
    assert sample["properties"]["id"]["pattern"] == "^[A-Za-z0-9._:-]{1,64}$"
    assert schema["components"]["schemas"]["DeletionsBody"]["properties"]["ids"]["maxItems"] == 1000


def test_sigterm_exits_zero(server):
    server.post(make_samples(2))
    assert server.stop() == 0
    server.start()
    assert server.total() == 2


def test_stop_signal_right_after_the_listening_line_exits_zero(tmp_path):
    """The start-up line is printed only once SIGTERM/SIGINT lead to a clean stop."""
    for number in (signal.SIGTERM, signal.SIGINT):
        instance = ServerProcess(tmp_path, single_user=True)
        instance.start(wait=False)
        wait_until(lambda: "api-server listening on" in instance.stderr() or instance.proc.poll() is not None,
                   "the start-up line", interval=0.001)
        assert instance.proc.poll() is None, instance.stderr()
        instance.proc.send_signal(number)
        assert instance.proc.wait(timeout=30) == 0, instance.stderr()


# -- the embedded backend's files ------------------------------------------------------------------


def test_jsonl_line_format_is_exact(embedded_server):
    server = embedded_server
    sample = make_sample(1, sourceDeviceName="Apple Watch")
    before = datetime.now(timezone.utc).replace(microsecond=0)
    server.post([sample])
    after = datetime.now(timezone.utc)
    lines = read_lines(server.jsonl())
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


def test_every_line_is_one_compact_object_with_keys_in_order(embedded_server):
    server = embedded_server
    server.post(make_samples(50))
    server.post(make_samples(50, start=50))
    lines = read_lines(server.jsonl())
    assert len(lines) == 100
    for line in lines:
        record = json.loads(line)
        assert list(record) == LINE_KEYS
        assert line == json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode()


def test_each_user_has_their_own_file(embedded_server, tmp_path):
    server = embedded_server
    server.tokens["bob"] = server.create_token("bob")
    bob = server.new_session("bob")
    server.post(make_samples(3))
    server.post(make_samples(2, prefix="b"), session=bob)
    assert [r["id"] for r in read_records(server.jsonl("alice"))] == [s["id"] for s in make_samples(3)]
    assert [r["id"] for r in read_records(server.jsonl("bob"))] == [s["id"] for s in make_samples(2, prefix="b")]


def test_data_path_that_is_a_file_is_refused(tmp_path):
    (tmp_path / "data").write_text("")
    instance = ServerProcess(tmp_path, single_user=True)
    instance.start(wait=False)
    assert instance.proc.wait(timeout=30) == 1
    assert "is a file; it must be a directory" in instance.stderr()


def test_second_server_on_same_data_is_refused(embedded_server, tmp_path):
    server = embedded_server
    (tmp_path / "other").mkdir()
    other = ServerProcess(tmp_path / "other", single_user=True, data=server.data)
    other.start(wait=False)
    assert other.proc.wait(timeout=30) == 1
    message = other.stderr()
    assert "in use by another api-server" in message and f"pid {server.proc.pid}" in message
    assert server.post(make_samples(1)).json()["saved"] == 1


def test_the_short_way_and_starlette_answer_alike(server):
    """A request naming a route exactly is answered without Starlette's router (app.ErrorBoundary);
    anything else still goes through it. Both ways answer as the contract says."""
    session, url = server.session, server.url
    assert session.get(url + "/health", timeout=10).status_code == 200
    head = session.head(url + "/health", timeout=10)  # through Starlette
    assert head.status_code == 200 and head.content == b""
    slash = session.get(url + "/health/", timeout=10, allow_redirects=False)
    assert slash.status_code == 307 and slash.headers["location"].endswith("/health")
    query = session.post(url + "/steps?x=1", json={"samples": []}, timeout=10)
    assert query.status_code == 400
    assert query.json() == {"error": 'query parameter "x" is not known here (known: )'}
    malformed = session.post(url + "/steps", data=b"{", headers={"Content-Type": "application/json"}, timeout=10)
    assert malformed.status_code == 400 and set(malformed.json()) == {"error"}


def test_a_receivedAt_in_the_body_is_not_stored(server):
    """receivedAt is the server's: a sample that names one (in an otherwise usual body, which the fast
    parse refuses, and without a device name, whose two strings it would stand in for in a count) is
    stored with the server's receivedAt."""
    claimed = "2001-01-01T00:00:00Z"
    with_device = dict(make_sample(1), receivedAt=claimed)
    without_device = {key: value for key, value in make_sample(2).items() if key != "sourceDeviceName"}
    without_device["receivedAt"] = claimed
    response = server.post([with_device, without_device])
    assert response.status_code == 200 and response.json()["saved"] == 2
    stored = server.all_samples()
    assert len(stored) == 2 and all(record["receivedAt"] != claimed for record in stored)
    assert all(list(record)[-1] == "receivedAt" for record in stored)

"""The seed's checklist on every backend: health, POST saves, GET returns, DELETE clears; the SQLite
file as a person reads it; start-up and stop."""

from __future__ import annotations

import re
import signal
import sqlite3

from conftest import LINE_KEYS, ServerProcess, make_sample, make_samples, strip_received, wait_until

RECEIVED_AT = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z")


def test_health(server):
    response = server.session.get(server.url + "/health", timeout=10)
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_startup_line_reports_address_storage_and_counts(server):
    assert f"api-server listening on http://127.0.0.1:{server.port}, " in server.stderr()
    workers = ", 2 workers" if server.workers > 1 else ""
    assert f"(0 users, 0 samples), tokens required{workers}" in server.stderr()
    assert server.post(make_samples(3)).json()["saved"] == 3
    server.restart()
    assert f"(1 users, 3 samples), tokens required{workers}" in server.stderr()


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
    assert [branch["maximum"] for branch in sample["properties"]["count"]["anyOf"]] == [1_000_000, 1_000_000]  # integer, or three decimals
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


# -- the SQLite file ---------------------------------------------------------------------------------


def test_the_sqlite_file_reads_as_its_documented_tables(sqlite_server):
    """One file a person opens with sqlite3: the tables of the README, the samples as sent."""
    server = sqlite_server
    sample = make_sample(1, sourceDeviceName="Apple Watch")
    server.post([sample])
    with sqlite3.connect(server.sqlite_path().resolve().as_uri() + "?mode=ro", uri=True) as connection:
        tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        row = connection.execute("SELECT user_name, id, start_date, end_date, count_thousandths, source_bundle_id, "
                                 "source_device_name FROM samples").fetchone()
        daily = connection.execute("SELECT day, merged, raw FROM daily_totals").fetchall()
        mode = connection.execute("PRAGMA journal_mode").fetchone()[0]
    assert tables == {"stepsync_schema", "tokens", "request_seq", "samples", "sample_versions", "deletions", "daily_totals",
                      "sample_digests", "server_identity", "digest_stale", "digest_writer"}
    thousandths = sample["count"] * 1000  # counts are kept in thousandths of a step
    assert row == ("alice", sample["id"], sample["startDate"], sample["endDate"], thousandths, "com.apple.health", "Apple Watch")
    assert daily == [(sample["startDate"][:10], thousandths, thousandths)]
    assert mode == "wal"


def test_data_path_that_is_a_file_is_refused(tmp_path):
    (tmp_path / "data").write_text("")
    instance = ServerProcess(tmp_path, single_user=True)
    instance.start(wait=False)
    assert instance.proc.wait(timeout=30) == 1
    assert "is not a directory" in instance.stderr()


def test_a_receivedAt_in_the_body_is_not_stored(server):
    """receivedAt is the server's: a sample that names one is stored with the server's receivedAt."""
    claimed = "2001-01-01T00:00:00Z"
    with_device = dict(make_sample(1), receivedAt=claimed)
    without_device = {key: value for key, value in make_sample(2).items() if key != "sourceDeviceName"}
    without_device["receivedAt"] = claimed
    response = server.post([with_device, without_device])
    assert response.status_code == 200 and response.json()["saved"] == 2
    stored = server.all_samples()
    assert len(stored) == 2 and all(record["receivedAt"] != claimed for record in stored)
    assert all(list(record)[-1] == "receivedAt" for record in stored)

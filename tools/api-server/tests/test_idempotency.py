"""Retried uploads: a sample already stored with identical content is not written again."""

from __future__ import annotations

from conftest import make_sample, make_samples, read_lines, read_records, strip_received


def test_same_body_twice_saves_nothing_the_second_time(server):
    samples = make_samples(100)
    assert server.post(samples).json() == {"saved": 100, "message": "Success"}
    before = server.data.read_bytes()
    assert server.post(samples).json() == {"saved": 0, "message": "Success"}
    assert server.data.read_bytes() == before
    assert server.total() == 100


def test_changed_content_for_a_known_id_is_written_again(server):
    samples = make_samples(3)
    server.post(samples)
    changed = dict(samples[1], count=samples[1]["count"] + 1)
    assert server.post([samples[0], changed, samples[2]]).json()["saved"] == 1
    records = read_records(server.data)
    assert len(records) == 4
    assert strip_received(records[3]) == changed
    # Each of the five content fields counts as a change.
    for field, value in [
        ("startDate", "2023-01-01T00:00:00Z"),
        ("endDate", "2030-01-01T00:00:00Z"),
        ("sourceBundleId", "com.example.other"),
        ("sourceDeviceName", None),
    ]:
        assert server.post([dict(samples[2], **{field: value})]).json()["saved"] == 1, field
    assert server.total() == 8
    # The latest content is now the known one: posting it again writes nothing, the old content is new again.
    assert server.post([changed]).json()["saved"] == 0
    assert server.post([samples[1]]).json()["saved"] == 1


def test_duplicate_ids_inside_one_body_count_once_and_last_wins(server):
    first = make_sample(7, count=1)
    last = make_sample(7, count=2)
    other = make_sample(8)
    response = server.post([first, other, last, dict(first, count=3), last])
    assert response.json()["saved"] == 2
    records = read_records(server.data)
    assert len(records) == 2
    by_id = {record["id"]: strip_received(record) for record in records}
    assert by_id[first["id"]] == last
    assert by_id[other["id"]] == other
    # Exact duplicates inside one body as well.
    assert server.post([make_sample(9)] * 5).json()["saved"] == 1
    assert len(read_lines(server.data)) == 3


def test_mixed_body_counts_only_new_samples(server):
    server.post(make_samples(60))
    response = server.post(make_samples(100, start=30))  # 30 known, 70 new
    assert response.json()["saved"] == 70
    ids = [record["id"] for record in read_records(server.data)]
    assert len(ids) == len(set(ids)) == 130


def test_device_name_absent_and_null_are_the_same_content(server):
    sample = make_sample(1, sourceDeviceName=None)
    absent = dict(sample)
    del absent["sourceDeviceName"]
    assert server.post([sample]).json()["saved"] == 1
    assert server.post([absent]).json()["saved"] == 0


def test_extra_fields_do_not_change_content(server):
    sample = make_sample(1)
    assert server.post([sample]).json()["saved"] == 1
    assert server.post([dict(sample, note="retry")]).json()["saved"] == 0

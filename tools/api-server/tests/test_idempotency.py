"""Retried uploads: a sample already stored with identical content is not written again; a changed
one is a new version, and GET returns the current version of each id. Both backends."""

from __future__ import annotations

from conftest import make_sample, make_samples, strip_received


def test_same_body_twice_saves_nothing_the_second_time(server):
    samples = make_samples(100)
    assert server.post(samples).json() == {"saved": 100, "message": "Success"}
    assert server.post(samples).json() == {"saved": 0, "message": "Success"}
    assert server.total() == 100
    assert server.total(versions="all") == 100


def test_a_retry_writes_nothing(server):
    samples = make_samples(100)
    server.post(samples)
    before = server.history()
    assert server.post(samples).json()["saved"] == 0
    assert server.history() == before


def test_changed_content_is_a_new_version_and_get_returns_the_current_one(server):
    samples = make_samples(3)
    server.post(samples)
    changed = dict(samples[1], count=samples[1]["count"] + 1)
    assert server.post([samples[0], changed, samples[2]]).json()["saved"] == 1
    current = [strip_received(record) for record in server.all_samples()]
    assert current == [samples[0], samples[2], changed]  # the current version is where it was received
    history = [strip_received(record) for record in server.all_samples(versions="all")]
    assert history == samples + [changed]
    # Each of the five content fields counts as a change.
    for field, value in [
        ("startDate", "2024-01-01T00:01:00Z"),
        ("endDate", "2024-01-01T00:03:00Z"),
        ("sourceBundleId", "com.example.other"),
        ("sourceDeviceName", None),
    ]:
        assert server.post([dict(samples[2], **{field: value})]).json()["saved"] == 1, field
    assert server.total() == 3
    assert server.total(versions="all") == 8
    # The latest content is now the known one: posting it again writes nothing, the old content is new again.
    assert server.post([changed]).json()["saved"] == 0
    assert server.post([samples[1]]).json()["saved"] == 1
    assert server.total() == 3


def test_conflicting_versions_from_many_posts_leave_one_sample_per_id(server):
    for version in range(5):
        samples = [make_sample(n, count=version) for n in range(200)]
        assert server.post(samples).json()["saved"] == 200
    current = server.all_samples()
    assert len(current) == 200 == server.total()
    assert {record["count"] for record in current} == {4}
    assert server.total(versions="all") == 1000


def test_duplicate_ids_inside_one_body_count_once_and_last_wins(server):
    first = make_sample(7, count=1)
    last = make_sample(7, count=2)
    other = make_sample(8)
    response = server.post([first, other, last, dict(first, count=3), last])
    assert response.json()["saved"] == 2
    by_id = {record["id"]: strip_received(record) for record in server.all_samples()}
    assert by_id == {first["id"]: last, other["id"]: other}
    assert server.post([make_sample(9)] * 5).json()["saved"] == 1
    assert server.total(versions="all") == 3


def test_mixed_body_counts_only_new_samples(server):
    server.post(make_samples(60))
    response = server.post(make_samples(100, start=30))  # 30 known, 70 new
    assert response.json()["saved"] == 70
    ids = [record["id"] for record in server.all_samples(versions="all")]
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


def test_the_stored_history_is_the_versions(server):
    samples = make_samples(3)
    server.post(samples)
    server.post([dict(samples[0], count=5)])
    assert len(server.history()) == 4

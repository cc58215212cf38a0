"""GET /steps?limit=L&offset=O: windows over the records in the order received."""

from __future__ import annotations

import pytest

from conftest import make_sample, make_samples, read_records, strip_received


def fill(server):
    """1,250 records in 5 requests, plus one rewritten sample (a second line for a known id)."""
    expected = []
    for start in range(0, 1250, 250):
        batch = make_samples(250, start=start)
        assert server.post(batch).json()["saved"] == 250
        expected += batch
    rewritten = make_sample(10, count=12345)
    assert server.post([rewritten]).json()["saved"] == 1
    expected.append(rewritten)
    return server, expected


@pytest.fixture(scope="module")
def filled(shared_server):
    """One filled server for the read-only tests of this module."""
    return fill(shared_server)


def window(server, **params):
    response = server.get(**params)
    assert response.status_code == 200, response.text
    body = response.json()
    return [strip_received(sample) for sample in body["samples"]], body["total"]


def test_default_limit_is_1000(filled):
    server, expected = filled
    samples, total = window(server)
    assert total == 1251
    assert samples == expected[:1000]


@pytest.mark.parametrize(
    "offset, limit",
    [(0, 1), (0, 10), (1, 10), (249, 2), (250, 250), (999, 3), (1000, 1000), (1240, 20), (1250, 1), (3, 100000)],
)
def test_windows(filled, offset, limit):
    server, expected = filled
    samples, total = window(server, offset=offset, limit=limit)
    assert total == 1251
    assert samples == expected[offset : offset + limit]


def test_offset_at_and_beyond_the_end(filled):
    server, _ = filled
    for offset in (1251, 1252, 10**6, 10**30):
        response = server.get(offset=offset)
        assert response.status_code == 200, response.text
        assert response.json() == {"samples": [], "total": 1251}


def test_limit_zero_returns_only_the_total(filled):
    server, _ = filled
    assert server.get(limit=0).json() == {"samples": [], "total": 1251}


def test_walking_all_pages_reproduces_the_file(filled):
    server, expected = filled
    collected = []
    offset = 0
    while True:
        response = server.get(offset=offset, limit=97).json()
        if not response["samples"]:
            break
        collected += response["samples"]
        offset += len(response["samples"])
    assert collected == read_records(server.data)  # including receivedAt, byte for byte equal values
    assert [strip_received(sample) for sample in collected] == expected


def test_pages_after_restart_and_index_rebuild(server):
    server, expected = fill(server)
    server.stop()
    server.data.with_name(server.data.name + ".index.sqlite").unlink()
    server.start()
    samples, total = window(server, offset=1200, limit=100)
    assert total == 1251
    assert samples == expected[1200:]

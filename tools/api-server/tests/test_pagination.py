"""GET /steps?limit=L&offset=O: windows over the current samples (or every version) in the order
received. Every backend."""

from __future__ import annotations

import pytest

from conftest import make_sample, make_samples, strip_received


def fill(server):
    """1,250 samples in 5 requests, then one of them changed (its current version moves to the end)."""
    history = []
    for start in range(0, 1250, 250):
        batch = make_samples(250, start=start)
        assert server.post(batch).json()["saved"] == 250
        history += batch
    rewritten = make_sample(10, count=12345)
    assert server.post([rewritten]).json()["saved"] == 1
    current = [sample for sample in history if sample["id"] != rewritten["id"]] + [rewritten]
    return server, current, history + [rewritten]


@pytest.fixture(scope="module")
def filled(shared_server):
    return fill(shared_server)


def window(server, **params):
    response = server.get(**params)
    assert response.status_code == 200, response.text
    body = response.json()
    return [strip_received(sample) for sample in body["samples"]], body["total"]


def test_default_limit_is_1000(filled):
    server, current, _ = filled
    samples, total = window(server)
    assert total == 1250
    assert samples == current[:1000]


@pytest.mark.parametrize(
    "offset, limit",
    [(0, 1), (0, 10), (1, 10), (249, 2), (250, 250), (999, 3), (1000, 1000), (1240, 20), (1249, 1), (3, 100000)],
)
def test_windows(filled, offset, limit):
    server, current, history = filled
    samples, total = window(server, offset=offset, limit=limit)
    assert total == 1250
    assert samples == current[offset : offset + limit]
    samples, total = window(server, offset=offset, limit=limit, versions="all")
    assert total == 1251
    assert samples == history[offset : offset + limit]


def test_offset_at_and_beyond_the_end(filled):
    server, _, _ = filled
    for offset in (1250, 1251, 10**6, 10**17):
        response = server.get(offset=offset)
        assert response.status_code == 200, response.text
        assert response.json() == {"samples": [], "total": 1250}


def test_limit_zero_returns_only_the_total(filled):
    server, _, _ = filled
    assert server.get(limit=0).json() == {"samples": [], "total": 1250}
    assert server.get(limit=0, versions="current").json() == {"samples": [], "total": 1250}


def test_walking_all_pages_gives_every_current_sample_once(filled):
    server, current, _ = filled
    collected = []
    offset = 0
    while True:
        response = server.get(offset=offset, limit=97).json()
        if not response["samples"]:
            break
        collected += response["samples"]
        offset += len(response["samples"])
    assert [strip_received(sample) for sample in collected] == current


def test_every_version_walk_reproduces_the_stored_history(server):
    server, _, history = fill(server)
    assert server.all_samples(versions="all") == server.versions()
    assert [strip_received(sample) for sample in server.all_samples(versions="all")] == history


def test_pages_after_restart(server):
    server, current, _ = fill(server)
    server.restart()
    samples, total = window(server, offset=1200, limit=100)
    assert total == 1250
    assert samples == current[1200:]

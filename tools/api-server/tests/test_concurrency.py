"""Concurrent POSTs never interleave or corrupt lines, and the dedupe check is atomic with the write."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from conftest import make_samples

THREADS = 8
REQUESTS_PER_THREAD = 20
SAMPLES_PER_REQUEST = 100


def test_concurrent_posts_of_distinct_samples(server):
    barrier = threading.Barrier(THREADS)

    def worker(thread: int) -> list[int]:
        saved = []
        with server.new_session() as session:
            barrier.wait(timeout=30)
            for request in range(REQUESTS_PER_THREAD):
                start = (thread * REQUESTS_PER_THREAD + request) * SAMPLES_PER_REQUEST
                body = {"samples": make_samples(SAMPLES_PER_REQUEST, start=start, prefix=f"t{thread}")}
                response = session.post(server.url + "/steps", json=body, timeout=60)
                assert response.status_code == 200, response.text
                saved.append(response.json()["saved"])
        return saved

    with ThreadPoolExecutor(THREADS) as pool:
        results = list(pool.map(worker, range(THREADS)))

    expected = THREADS * REQUESTS_PER_THREAD * SAMPLES_PER_REQUEST
    assert all(saved == [SAMPLES_PER_REQUEST] * REQUESTS_PER_THREAD for saved in results)
    ids = [record["id"] for record in server.all_samples()]
    assert len(ids) == len(set(ids)) == expected == server.total()
    # Each request's samples are contiguous and in body order.
    for first in range(0, expected, SAMPLES_PER_REQUEST):
        block = ids[first : first + SAMPLES_PER_REQUEST]
        prefix = block[0].split("-")[0]
        numbers = [int(sample_id.split("-")[1]) for sample_id in block]
        assert all(sample_id.startswith(prefix + "-") for sample_id in block)
        assert numbers == list(range(numbers[0], numbers[0] + SAMPLES_PER_REQUEST))
    assert len(server.history()) == expected  # one version each, nothing more


def test_concurrent_identical_posts_store_each_sample_once(server):
    samples = make_samples(SAMPLES_PER_REQUEST)
    barrier = threading.Barrier(THREADS)

    def worker(_: int) -> int:
        with server.new_session() as session:
            barrier.wait(timeout=30)
            total = 0
            for _ in range(5):
                response = session.post(server.url + "/steps", json={"samples": samples}, timeout=60)
                assert response.status_code == 200, response.text
                total += response.json()["saved"]
            return total

    with ThreadPoolExecutor(THREADS) as pool:
        saved = sum(pool.map(worker, range(THREADS)))
    assert saved == SAMPLES_PER_REQUEST
    assert server.total(versions="all") == SAMPLES_PER_REQUEST

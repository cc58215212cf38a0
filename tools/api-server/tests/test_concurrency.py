"""Concurrent POSTs never interleave or corrupt lines, and the dedupe check is atomic with the write."""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor

from conftest import LINE_KEYS, make_samples, read_lines, wait_until

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
    if server.backend == "embedded":
        lines = read_lines(server.jsonl())
        assert len(lines) == expected
        for line in lines:
            assert list(json.loads(line)) == LINE_KEYS  # every line a complete object: no interleaving


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


def test_postgres_save_of_an_id_stored_beside_it_meanwhile_upserts(postgres_cluster):
    """PostgreSQL inserts a save's new ids with a plain INSERT (storage/postgres.py, _SAVE): when
    another transaction stores one of them after the save's statement began, that INSERT fails and the
    save runs again, seeing it: every sample once, the other's version replaced (kept in the history),
    its dates reported."""
    import psycopg
    from stepserver.contract import SampleFields
    from stepserver.storage.postgres import PostgresStorage

    url = postgres_cluster.new_database()
    storage = PostgresStorage(url, pool_size=2)
    storage.open()
    try:
        def sample(n: int, count: int) -> SampleFields:
            return SampleFields(id=f"x{n}", startDate="2024-01-01T12:00:00Z", endDate="2024-01-01T12:10:00Z",
                                count=count, sourceBundleId="b", sourceDeviceName=None)

        replaced: list = []
        outcome: dict = {}
        with psycopg.connect(url) as other, psycopg.connect(url, autocommit=True) as watcher:
            other.execute("INSERT INTO samples (user_name, id, seq, start_date, end_date, start_ns, end_ns, count, "
                          "source_bundle_id, source_device_name, received_at) VALUES ('alice', 'x1', 1, "
                          "'2023-12-31T12:00:00Z', '2023-12-31T12:10:00Z', 0, 0, 5, 'b', NULL, '2024-01-20T15:00:00Z')")
            saving = threading.Thread(target=lambda: outcome.update(
                saved=storage.save("alice", [sample(0, 1), sample(1, 9), sample(2, 3)], "2024-01-20T15:00:01Z", replaced)))
            saving.start()
            wait_until(lambda: watcher.execute("SELECT count(*) FROM pg_locks WHERE NOT granted").fetchone()[0],
                       "the save waiting for the other transaction's x1")
            other.commit()
            saving.join(30)
        assert outcome["saved"] == 3
        assert replaced == ["2023-12-31T12:00:00Z", "2023-12-31T12:10:00Z"]
        lines, total = storage.read("alice", 0, 10, False)
        assert total == 3 and sorted((json.loads(line)["id"], json.loads(line)["count"]) for line in lines) == \
            [("x0", 1), ("x1", 9), ("x2", 3)]
        history, total = storage.read("alice", 0, 10, True)
        assert total == 4 and [(json.loads(line)["id"], json.loads(line)["count"]) for line in history] == \
            [("x1", 5), ("x0", 1), ("x1", 9), ("x2", 3)]
        assert storage.save("alice", [sample(0, 1), sample(1, 9), sample(2, 3)], "2024-01-20T15:00:02Z", []) == 0
    finally:
        storage.close()

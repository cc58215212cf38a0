"""POST /steps/deletions on every backend: what is deleted, the history it leaves, across crashes."""

from __future__ import annotations

import threading

import requests

from conftest import make_sample, make_samples, strip_received, wait_until


def test_deleting_live_unknown_and_deleted_ids(server):
    samples = make_samples(10)
    server.post(samples)
    ids = [sample["id"] for sample in samples]
    response = server.delete_ids(ids[:3] + ["never-seen", ids[0]])
    assert response.status_code == 200
    assert response.json() == {"deleted": 3, "message": "Success"}
    assert server.delete_ids(ids[:3]).json() == {"deleted": 0, "message": "Success"}
    assert server.delete_ids([]).json() == {"deleted": 0, "message": "Success"}
    assert [strip_received(s) for s in server.all_samples()] == samples[3:]
    assert server.total() == 7
    assert server.total(versions="all") == 10  # the history keeps what was received


def test_a_sample_posted_again_after_its_deletion_is_live_again(server):
    sample = make_sample(1)
    server.post([sample])
    assert server.delete_ids([sample["id"]]).json()["deleted"] == 1
    assert server.post([sample]).json()["saved"] == 1
    assert [strip_received(s) for s in server.all_samples()] == [sample]
    server.restart()
    assert [strip_received(s) for s in server.all_samples()] == [sample]
    assert server.post([sample]).json()["saved"] == 0


def test_deletions_survive_a_restart(server):
    samples = make_samples(50)
    server.post(samples)
    server.delete_ids([sample["id"] for sample in samples[::2]])
    server.kill()
    server.start()
    assert [strip_received(s) for s in server.all_samples()] == samples[1::2]
    assert server.post(samples[1::2]).json()["saved"] == 0
    assert server.post(samples[::2]).json()["saved"] == 25


def test_a_deletion_is_kept_in_the_history(server):
    server.post(make_samples(2))
    server.delete_ids([make_sample(1)["id"], "unknown", make_sample(1)["id"]])
    history = server.history()
    assert len(history) == 3  # an unknown id, or one repeated, writes nothing more
    assert [row[1:3] for row in history] == [("version", make_sample(0)["id"]), ("version", make_sample(1)["id"]),
                                            ("deletion", make_sample(1)["id"])]
    assert history[2][3] >= history[1][8]  # its receivedAt


def test_sigkill_during_deletions_applies_every_acknowledged_one(server):
    samples = make_samples(6000)
    for first in range(0, 6000, 1000):
        server.post(samples[first : first + 1000])
    acknowledged: list[str] = []
    stop = threading.Event()

    def deleter() -> None:
        with server.new_session() as session:
            for first in range(0, 6000, 50):
                if stop.is_set():
                    return
                ids = [sample["id"] for sample in samples[first : first + 50]]
                try:
                    response = session.post(server.url + "/steps/deletions", json={"ids": ids}, timeout=30)
                except requests.RequestException:
                    return
                if response.status_code != 200:
                    return
                acknowledged.extend(ids)

    thread = threading.Thread(target=deleter)
    thread.start()
    wait_until(lambda: len(acknowledged) >= 500, "500 acknowledged deletions")
    server.kill()
    stop.set()
    thread.join(timeout=60)
    server.start()
    remaining = {s["id"] for s in server.all_samples()}
    assert not remaining & set(acknowledged)
    assert len(remaining) >= 6000 - len(acknowledged) - 50  # at most the request in flight went too
    assert sum(1 for row in server.history() if row[1] == "deletion") == 6000 - len(remaining)
    # Deleting everything again deletes exactly what was left.
    deleted = sum(server.delete_ids([s["id"] for s in samples[i : i + 1000]]).json()["deleted"] for i in range(0, 6000, 1000))
    assert deleted == len(remaining)
    assert server.total() == 0

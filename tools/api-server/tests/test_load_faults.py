"""Load and faults (#16.5): 8 users upload at once (new samples, changed versions, deletions), like a
client that retries a request until it is answered 200; in the middle the server is SIGKILLed and
restarted and (PostgreSQL backend) the database is restarted. At the end every user's data equals
what that user sent, nothing is lost or duplicated, and no user sees another's samples. Bounded:
loopback only, a fixed amount of work, a deadline."""

from __future__ import annotations

import threading
import time
from datetime import date

import pytest
import requests

from conftest import BACKENDS, make_sample, strip_received, wait_until
from stepserver.contract import count_thousandths, instant_ns
from stepserver.totals import DEFAULT_PRIORITY, daily_totals

USERS = 8
SAMPLES_PER_USER = 6000
BATCH = 500
DEADLINE_S = 240
DAILY = {"tz": "Europe/Paris", "from": "2023-12-30", "to": "2024-02-02", "bySource": "true"}


class Uploader(threading.Thread):
    def __init__(self, server, user: str, number: int) -> None:
        super().__init__(name=f"uploader-{user}")
        self.server = server
        self.user = user
        self.token = server.tokens[user]
        samples = [make_sample(n, prefix=f"u{number}") for n in range(SAMPLES_PER_USER)]
        changed = [dict(sample, count=sample["count"] + 1) for sample in samples[::7]]
        doomed = [sample["id"] for sample in samples[::11]]
        self.operations = [("/steps", {"samples": samples[i : i + BATCH]}) for i in range(0, len(samples), BATCH)]
        self.operations += [("/steps", {"samples": changed[i : i + BATCH]}) for i in range(0, len(changed), BATCH)]
        self.operations += [("/steps/deletions", {"ids": doomed[i : i + 1000]}) for i in range(0, len(doomed), 1000)]
        final = {sample["id"]: sample for sample in samples}
        final.update({sample["id"]: sample for sample in changed})
        for sample_id in doomed:
            del final[sample_id]
        self.expected = final
        self.done = 0
        self.retries = 0
        self.error = None

    def run(self) -> None:
        try:
            deadline = time.monotonic() + DEADLINE_S
            session = self.server.new_session(self.user)  # (workers: a new connection a request)
            for path, body in self.operations:
                while True:
                    assert time.monotonic() < deadline, f"{self.user}: out of time"
                    try:
                        response = session.post(self.server.url + path, json=body, timeout=30)
                        if response.status_code == 200:
                            break
                        assert response.status_code == 503 and response.headers.get("Retry-After"), response.text
                    except requests.RequestException:
                        session = self.server.new_session(self.user)
                    self.retries += 1
                    time.sleep(0.05)
                self.done += 1
        except BaseException as error:  # noqa: BLE001 - reported by the test
            self.error = error


@pytest.mark.parametrize("backend", BACKENDS)
def test_eight_users_through_a_server_kill_and_a_database_restart(tmp_path, request, backend):
    """With --workers 2 (a new connection a request) every user's requests land on both workers in
    turn. At the end each user's daily totals, as the database keeps them, equal the merge of what
    that user stored."""
    from conftest import ServerProcess

    users = tuple(f"user{k}" for k in range(USERS))
    database = request.getfixturevalue("postgres_cluster").new_database() if backend.startswith("postgres") else None
    server = ServerProcess(tmp_path, database=database, users=users, workers=2 if backend.endswith("workers") else 1).start()
    uploaders = [Uploader(server, user, number) for number, user in enumerate(users)]
    try:
        for uploader in uploaders:
            uploader.start()
        operations = sum(len(u.operations) for u in uploaders)
        progress = lambda: sum(u.done for u in uploaders)  # noqa: E731
        wait_until(lambda: progress() >= operations // 4, "a quarter of the uploads", timeout=DEADLINE_S)
        server.kill()
        server.start()
        if database:
            wait_until(lambda: progress() >= operations // 2, "half of the uploads", timeout=DEADLINE_S)
            cluster = request.getfixturevalue("postgres_cluster")
            cluster.restart()
        for uploader in uploaders:
            uploader.join(timeout=DEADLINE_S)
        for uploader in uploaders:
            assert uploader.error is None, f"{uploader.user}: {uploader.error!r}"
            assert uploader.done == len(uploader.operations)
        assert sum(u.retries for u in uploaders) > 0, "the faults were not felt"
        for number, uploader in enumerate(uploaders):
            session = server.new_session(uploader.user)
            stored = server.all_samples(session=session)
            ids = [sample["id"] for sample in stored]
            assert len(ids) == len(set(ids)), f"{uploader.user}: duplicates"
            assert all(sample_id.startswith(f"u{number}-") for sample_id in ids), f"{uploader.user} sees another's samples"
            assert {sample["id"]: strip_received(sample) for sample in stored} == uploader.expected
            assert server.get(session=session, limit=0).json()["total"] == len(uploader.expected)
            daily = session.get(server.url + "/steps/daily", params=DAILY, timeout=60).json()
            merged = daily_totals(((instant_ns(s["startDate"]) // 1_000_000, instant_ns(s["endDate"]) // 1_000_000, count_thousandths(s["count"]),
                                    s["sourceBundleId"], s["sourceDeviceName"]) for s in stored),
                                  DAILY["tz"], date.fromisoformat(DAILY["from"]), date.fromisoformat(DAILY["to"]), DEFAULT_PRIORITY, True)
            assert sum(day["raw"] for day in merged["days"]) > 0
            assert daily == merged, f"{uploader.user}: the stored daily totals differ from the merge of the samples"
    finally:
        for uploader in uploaders:
            uploader.join(timeout=5)
        if server.proc is not None and server.proc.poll() is None:
            server.finish()

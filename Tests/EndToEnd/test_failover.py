"""Failover end to end, on the server README's replicated deployment (tools/api-server/tests/
replicated_setup.py): four users upload at once with the real `stepsync upload` through HAProxy to two
API servers on a pg_auto_failover cluster (a primary and a synchronous standby), while the test
(a) SIGKILLs the primary node (its keeper and its PostgreSQL, as when its host is lost) and lets the
standby take over, (b) kills one API server (and starts it again), (c) starts the old primary again,
which rejoins as a standby. Every upload finishes by itself (its retries ride through the faults).
Then each user's store changes (older days, new versions, deletions) and is uploaded again, every
commit now waiting for the rejoined standby. At the end each user's data at the server equals their
store, ids and content, every version stored once, no user sees another's, and the standby holds what
the primary holds. Prints the figures: failovers, kills, samples checked, and the unavailability
windows as the clients saw them (HAProxy's log of every answer: the first 5xx after a fault to the
first 200 after it, and the longest time without an acknowledged write).

Runs where pg_auto_failover and HAProxy are installed (tools/test installs them and sets
REQUIRE_CLUSTER=1, which turns a missing piece into a failure instead of a skip)."""
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import MOCK_END, PYTHON, ROOT, STEPSYNC, export_samples, get_json, live_samples, status, stepsync
from test_deletions import fixture

sys.path.insert(0, str(ROOT / "tools" / "api-server" / "tests"))
from balancer import BalancerUnavailable, unavailability  # noqa: E402
from postgres_cluster import PostgresUnavailable  # noqa: E402
from replicated_setup import ReplicatedSetup  # noqa: E402

USERS = 4
DAYS = 1000  # ~170k samples a user (iPhone and Watch): uploads that outlast the failover and the API server's kill
MORE_DAYS = 300  # the second round's older days (~50k samples a user)
DEADLINE_S = 420
REQUEST_DEADLINE_S = 30  # stepsync upload's --timeout: no answer may take longer


class Upload:
    """One user's `stepsync upload` through HAProxy, its stderr in a file."""

    def __init__(self, user, store, token, url, directory):
        self.user = user
        self.store = store
        self.errors = directory / f"upload-{user}.err"
        with open(self.errors, "wb") as err:
            self.process = subprocess.Popen(
                [STEPSYNC, "upload", "--store", str(store), "--api-url", url, "--timeout", str(REQUEST_DEADLINE_S)],
                env={**os.environ, "STEPSYNC_TOKEN": token}, stdout=subprocess.DEVNULL, stderr=err)

    def retries(self):
        return sum("retrying in" in line for line in self.errors.read_text(errors="replace").splitlines())


def test_four_users_upload_through_a_failover_an_api_server_kill_and_a_rejoin(tmp_path, capsys):
    began = time.monotonic()
    directory = tmp_path / "cluster"
    directory.mkdir()
    try:
        setup = ReplicatedSetup(directory, python=PYTHON).start()
    except (PostgresUnavailable, BalancerUnavailable) as error:
        if os.environ.get("REQUIRE_CLUSTER") == "1":
            pytest.fail(f"the replicated set-up cannot run here: {error}")
        pytest.skip(str(error))
    uploads = []
    try:
        cluster, balancer = setup.cluster, setup.balancer
        users = [f"user{n}" for n in range(1, USERS + 1)]
        tokens = {user: setup.create_token(user) for user in users}
        stores = {}
        for number, user in enumerate(users, start=1):
            stores[user] = tmp_path / f"store-{user}"
            stepsync("ingest", "--store", str(stores[user]), "--source", f"mock:seed={number},days={DAYS},end={MOCK_END}")
        set_up_s = time.monotonic() - began

        uploads = [Upload(user, stores[user], tokens[user], setup.url, tmp_path) for user in users]
        acknowledged = lambda: sum(a.status == 200 and a.path == "/steps" for a in balancer.answers())  # noqa: E731

        def wait_for(what, predicate, timeout=120):
            deadline = time.monotonic() + timeout
            while not predicate():
                finished = [u.user for u in uploads if u.process.poll() is not None]
                if finished:
                    pytest.fail(f"the uploads of {finished} ended while waiting for {what}: the data is too small "
                                f"or an upload gave up ({[u.errors.read_text()[-500:] for u in uploads]})")
                if time.monotonic() > deadline:
                    pytest.fail(f"timed out after {timeout} s waiting for {what}")
                time.sleep(0.1)

        def more_batches(count):
            target = acknowledged() + count
            return lambda: acknowledged() >= target

        faults = []
        wait_for("the first batches", more_batches(40))

        # (a) The primary's host is lost.
        old_primary = cluster.primary()
        faults.append(("primary killed", time.time()))
        cluster.kill(old_primary)
        wait_for("the standby's promotion", lambda: cluster.primary() not in (None, old_primary))
        new_primary = cluster.primary()
        wait_for("the uploads to go on after the failover", more_batches(10))

        # (b) One API server killed while it serves uploads; once HAProxy took it out, started again.
        killed = setup.servers[0]
        wait_for("HAProxy to send to both API servers again", lambda: all(balancer.up(s.name) for s in setup.servers))
        served = lambda: sum(a.server == killed.name for a in balancer.answers())  # noqa: E731
        target = served() + 10
        wait_for(f"{killed.name} to serve uploads again", lambda: served() >= target)
        faults.append(("API server killed", time.time()))
        killed.kill()
        wait_for("HAProxy to take the killed API server out", lambda: not balancer.up(killed.name))
        wait_for("the uploads to go on with one API server", more_batches(10))
        killed.start()
        wait_for("HAProxy to send to the restarted API server", lambda: balancer.up(killed.name))

        # (c) The old primary starts again and rejoins as a synchronous standby, the uploads going on
        # meanwhile as long as they last.
        faults.append(("old primary restarted", time.time()))
        cluster.run(old_primary)
        # (Its catch-up runs under the uploads' writes, which it must overtake: it has what is left of the
        # test's deadline rather than a fixed wait of its own.)
        cluster.wait_until(cluster.replicated, "the old primary to rejoin as a synchronous standby",
                           timeout=max(1, DEADLINE_S - (time.monotonic() - began)))
        assert cluster.standby() == old_primary and cluster.primary() == new_primary
        for upload in uploads:
            upload.process.wait(timeout=max(1, DEADLINE_S - (time.monotonic() - began)))
            assert upload.process.returncode == 0, f"{upload.user}: {upload.errors.read_text()[-2000:]}"
        first_round_ended = time.time()

        # Each store changes (older days; deletions of every 11th sample and new versions of every 7th
        # of the rest, all among those uploaded) and is uploaded again: every commit waits for the
        # rejoined standby.
        changes = {}
        for number, user in enumerate(users, start=1):
            stepsync("ingest", "--store", str(stores[user]), "--source",
                     f"mock:seed={number},days={DAYS + MORE_DAYS},end={MOCK_END}")
            deleted = fixture("delete", str(stores[user]), "--every", "11", "--limit", "2000")["deleted"]
            changed = fixture("change", str(stores[user]), "--every", "7", "--limit", "3000")["changed"]
            changes[user] = deleted + changed  # versions the server keeps beside the live ones
        second_round = acknowledged()
        uploads = [Upload(user, stores[user], tokens[user], setup.url, tmp_path) for user in users]
        for upload in uploads:
            upload.process.wait(timeout=max(1, DEADLINE_S - (time.monotonic() - began)))
            assert upload.process.returncode == 0, f"{upload.user}: {upload.errors.read_text()[-2000:]}"
        assert acknowledged() > second_round and cluster.replicated()
        uploaded_s = time.monotonic() - began

        # Every user's data at the server equals their store, each sample once, none of another user's.
        checked = 0
        seen = set()
        with ThreadPoolExecutor(USERS) as pool:
            exported = dict(zip(users, pool.map(lambda user: export_samples(stores[user]), users)))
        for user in users:
            expected = exported[user]
            live = live_samples(setup.url, tokens[user])
            versions = get_json(setup.url, "/steps?versions=all&limit=0", tokens[user])["total"]
            assert live == expected, f"{user}: {len(set(expected) - set(live))} missing, {len(set(live) - set(expected))} unexpected, " \
                                     f"{sum(live[i] != expected[i] for i in set(live) & set(expected))} different"
            assert versions == len(expected) + changes[user], \
                f"{user}: {versions} versions stored for {len(expected)} live samples and {changes[user]} changes"
            assert not seen & set(live), f"{user} holds another user's samples"
            seen |= set(live)
            assert status(stores[user])["unsyncedSamples"] == 0
            checked += len(live)

        # The rejoined standby holds what the primary holds.
        digest = "SELECT count(*), md5(string_agg(user_name || id || count_thousandths, ',' ORDER BY user_name, id)) FROM samples"
        position = cluster.sql(new_primary, "SELECT pg_current_wal_lsn()")
        wait_for_standby = time.monotonic() + 60
        while cluster.sql(old_primary, f"SELECT pg_last_wal_replay_lsn() >= '{position}'") != "t":
            assert time.monotonic() < wait_for_standby, "the standby did not replay the primary's last writes"
            time.sleep(0.1)
        on_primary = cluster.sql(new_primary, digest)
        assert on_primary.startswith(f"{checked}|") and cluster.sql(old_primary, digest) == on_primary

        # What the clients saw: no 500, no answer later than the request deadline, and how long each
        # fault kept writes from succeeding.
        answers = balancer.answers()
        statuses = {a.status for a in answers}
        assert statuses <= {200, 502, 503}, f"answers other than 200, 502 and 503: {sorted(statuses)}"
        slowest = max(answers, key=lambda a: a.active_ms)
        assert slowest.active_ms < REQUEST_DEADLINE_S * 1000, f"an answer took {slowest.active_ms} ms: {slowest}"
        ends = [moment for _, moment in faults[1:]] + [first_round_ended]
        windows = [(name, unavailability(answers, moment, until)) for (name, moment), until in zip(faults, ends)]
        failover = windows[0][1]
        assert failover.first_failure is not None or failover.longest_stall >= 1, "the clients never felt the failover"
        with capsys.disabled():
            print(f"\nfailover test: set-up {set_up_s:.0f} s, uploads until {uploaded_s:.0f} s, {USERS} users, failovers 1 ({old_primary} -> {new_primary}), "
                  f"kills: 1 database node, 1 API server; samples checked {checked:,}; "
                  f"retries by the uploads {sum(u.retries() for u in uploads)}; answers 502: "
                  f"{sum(a.status == 502 for a in answers)}, 503: {sum(a.status == 503 for a in answers)}; "
                  f"slowest answer {slowest.active_ms / 1000:.1f} s; {time.monotonic() - began:.0f} s in all")
            for name, window in windows:
                print(f"  {name}: {window.describe()}")
    finally:
        for upload in uploads:
            if upload.process.poll() is None:
                upload.process.kill()
                upload.process.wait()
        setup.close()

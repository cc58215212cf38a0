"""The server proven to hold what the store acknowledged, and healed when it does not (docs/RECONCILE.md):
the real `stepsync` against the real server, on SQLite and on PostgreSQL. A restored backup, a day
deleted by hand, a count changed by hand, a count changed past the digests (found by the server's
`run verify`), a deletion lost, another store's samples beside ours, a new server and a second
account, and `stepsync reconcile` killed again and again."""
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from conftest import (PYTHON, ROOT, SERVER_MAIN, STEPSYNC, STORE_FIXTURE, TOKEN_ENV, MOCK_END, Server, export_samples, free_port,
                      ingest, status, stepsync)

sys.path.insert(0, str(ROOT / "tools" / "api-server" / "tests"))
from postgres_cluster import PostgresCluster, PostgresUnavailable  # noqa: E402


@pytest.fixture(scope="module")
def postgres():
    try:
        cluster = PostgresCluster().start()
    except PostgresUnavailable as error:
        pytest.skip(str(error))
    yield cluster
    cluster.destroy()


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request, tmp_path):
    """A server requiring tokens, on SQLite or on a PostgreSQL database of its own."""
    TOKEN_ENV.clear()
    database = request.getfixturevalue("postgres").new_database() if request.param == "postgres" else None
    server = Server(tmp_path / "server-data", free_port(), tokens=True, database=database)
    server.start()
    yield server
    server.stop()
    TOKEN_ENV.clear()


# -- the server's database, by hand ---------------------------------------------------------------------


def sql(server, statement, parameters=()):
    """Runs one statement on the server's database behind its back, as an operator would."""
    if server.database:
        import psycopg

        with psycopg.connect(server.database, autocommit=True) as connection:
            connection.execute(statement.replace("?", "%s"), parameters)
    else:
        with sqlite3.connect(server.data, timeout=30) as connection:
            connection.execute(statement, parameters)


def rows(server, statement, parameters=()):
    if server.database:
        import psycopg

        with psycopg.connect(server.database) as connection:
            return connection.execute(statement.replace("?", "%s"), parameters).fetchall()
    with sqlite3.connect(server.data.resolve().as_uri() + "?mode=ro", uri=True, timeout=30) as connection:
        return connection.execute(statement, parameters).fetchall()


def _admin(server, statement):
    import psycopg

    name = server.database.split("/")[3].split("?")[0]
    with psycopg.connect(server.database.replace(f"/{name}?", "/postgres?"), autocommit=True) as connection:
        connection.execute(statement.format(name=name))


def backup(server, directory):
    """A copy of the server's database, as a nightly backup takes it (SQLite's online backup;
    PostgreSQL: a copy of the database, made while the server is stopped)."""
    if server.database:
        server.stop()
        _admin(server, "CREATE DATABASE {name}_backup TEMPLATE {name}")
        server.start()
        return None
    copy = directory / "backup.sqlite"
    with sqlite3.connect(server.data) as source, sqlite3.connect(copy) as target:
        source.backup(target)
    return copy


def restore(server, copy):
    """Puts the backup back: stop, replace, start."""
    server.stop()
    if server.database:
        _admin(server, "DROP DATABASE {name}")
        _admin(server, "CREATE DATABASE {name} TEMPLATE {name}_backup")
    else:
        for suffix in ("", "-wal", "-shm"):
            server.data.with_name(server.data.name + suffix).unlink(missing_ok=True)
        shutil.copyfile(copy, server.data)
    server.start()


# -- what a run says ------------------------------------------------------------------------------------


def upload(store, server, *extra):
    return json.loads(stepsync("upload", "--store", str(store), "--api-url", server.url, "--json", *extra).stdout)


def reconcile(store, server, *extra):
    return json.loads(stepsync("reconcile", "--store", str(store), "--api-url", server.url, "--json", *extra).stdout)


def assert_equal(server, store, also=None):
    """The server's live samples are the store's (ids and content), and `also`'s (another store's)."""
    expected = export_samples(store)
    if also is not None:
        expected.update(export_samples(also))
    held = server.live_samples()
    missing = expected.keys() - held.keys()
    unexpected = held.keys() - expected.keys()
    different = [i for i in expected.keys() & held.keys() if expected[i] != held[i]]
    assert not (missing or unexpected or different), \
        f"{len(missing)} missing, {len(unexpected)} unexpected, {len(different)} different at the server"


def found(report, **counts):
    """The first reconcile of an upload's report found these counts (and nothing else to correct)."""
    assert report["reconciles"], report
    first = report["reconciles"][-1]
    for name in ("samplesMissing", "versionsDifferent", "deletionsLost", "heldByAnotherUploader"):
        assert first[name] == counts.get(name, 0), (name, first)


def utc_days(store):
    days = {}
    for sample in export_samples(store).values():
        days.setdefault(sample["startDate"][:10], []).append(sample)
    return days


# -- the tests ------------------------------------------------------------------------------------------


def test_a_restored_backup_is_healed_by_one_ordinary_upload(backend, tmp_path):
    """The issue's scenario: 300 days uploaded, the server backed up, 30 more days uploaded, the backup
    restored; one `stepsync upload` leaves the server equal to the store."""
    store = tmp_path / "store"
    ingest(store, days=300)
    first = upload(store, backend)
    assert first["check"]["provenEqual"] and first["check"]["requests"] <= 2
    copy = backup(backend, tmp_path)
    ingest(store, days=330)
    second = upload(store, backend)
    assert second["check"]["provenEqual"] and second["samplesSynced"] > 4000
    restore(backend, copy)
    assert len(backend.live_samples()) < len(export_samples(store))

    healed = upload(store, backend)
    found(healed, samplesMissing=second["samplesSynced"])
    assert healed["check"]["provenEqual"]
    assert healed["samplesSynced"] == second["samplesSynced"]
    assert_equal(backend, store)
    again = upload(store, backend)
    assert again["samplesSynced"] == 0 and again["check"]["provenEqual"] and not again["reconciles"]
    assert again["check"]["requests"] == 1
    shown = status(store)
    assert shown["destination"]["serverId"] == healed["check"]["serverId"] and shown["destination"]["provenEqualAt"]


def test_damage_by_hand_and_a_lost_deletion_are_found_and_repaired(backend, tmp_path):
    store = tmp_path / "store"
    ingest(store, days=40)
    upload(store, backend)
    days = utc_days(store)

    # The samples of one UTC day deleted by hand.
    day = sorted(days)[10]
    sql(backend, "DELETE FROM samples WHERE user_name = ? AND start_date LIKE ?", (backend.user, day + "%"))
    report = upload(store, backend)
    found(report, samplesMissing=len(days[day]))
    assert report["reconciles"][-1]["daysDiffering"] == 1 and report["check"]["provenEqual"]
    assert_equal(backend, store)

    # One sample's count changed by hand.
    sample = days[sorted(days)[20]][3]
    sql(backend, "UPDATE samples SET count_thousandths = count_thousandths + 1000 WHERE user_name = ? AND id = ?", (backend.user, sample["id"]))
    report = upload(store, backend)
    found(report, versionsDifferent=1)
    assert report["samplesSynced"] == 1 and report["check"]["provenEqual"]
    assert_equal(backend, store)

    # A deletion lost: the store deletes samples and uploads the deletions; the server is then
    # restored from a backup taken before.
    copy = backup(backend, tmp_path)
    deleted = json.loads(subprocess.run([STORE_FIXTURE, "delete", str(store), "--every", "50", "--limit", "40"],
                                        capture_output=True, text=True, check=True).stdout)["deleted"]
    assert upload(store, backend)["deletionsAcknowledged"] == deleted
    restore(backend, copy)
    report = upload(store, backend)
    found(report, deletionsLost=deleted)
    assert report["deletionsAcknowledged"] == deleted and report["check"]["provenEqual"]
    assert_equal(backend, store)


def change_past_the_triggers(server, sample_id):
    """A count changed as a flipped bit would change it: in a transaction the digests' triggers take for
    the server's own (storage/schema.py), so no digest is marked stale and the digests still say in sync."""
    statement = "UPDATE samples SET count_thousandths = count_thousandths + 1000 WHERE user_name = ? AND id = ?"
    if server.database:
        import psycopg

        with psycopg.connect(server.database) as connection, connection.transaction():
            connection.execute("SET LOCAL stepsync.writer = 'server'")
            assert connection.execute(statement.replace("?", "%s"), (server.user, sample_id)).rowcount == 1
    else:
        with sqlite3.connect(server.data, timeout=30) as connection:
            connection.execute("INSERT INTO digest_writer VALUES (1)")
            assert connection.execute(statement, (server.user, sample_id)).rowcount == 1
            connection.execute("DELETE FROM digest_writer")


def verify(server, *extra):
    finished = subprocess.run([PYTHON, str(SERVER_MAIN), "verify", *server.storage(), "--json", *extra],
                              capture_output=True, text=True, timeout=300)
    assert finished.returncode in (0, 1), finished.stderr
    return finished.returncode, json.loads(finished.stdout)["problems"]


def test_a_value_the_digests_cannot_see_is_found_by_verify_and_healed_after_repair(backend, tmp_path):
    """A count changed past the triggers (a flipped bit) leaves the digests saying in sync, so an upload
    cannot see it; `run verify` finds its day, `--repair` hands the day to the next upload, which sends
    the sample again: the server holds the store's samples and verify finds nothing."""
    store = tmp_path / "store"
    ingest(store, days=20)
    upload(store, backend)
    days = utc_days(store)
    sample = next(each for each in days[sorted(days)[5]] if each["startDate"][:10] == each["endDate"][:10])
    change_past_the_triggers(backend, sample["id"])
    assert upload(store, backend)["check"]["provenEqual"]  # what the digests cannot see
    code, problems = verify(backend)
    assert code == 1 and len(problems) == 2, problems
    assert all(sample["startDate"][:10] in problem for problem in problems), problems
    assert verify(backend, "--repair") == (code, problems)
    report = upload(store, backend)
    found(report, versionsDifferent=1)
    assert report["samplesSynced"] == 1 and report["check"]["provenEqual"]
    assert_equal(backend, store)
    assert verify(backend) == (0, [])


def test_another_stores_samples_are_left_alone(backend, tmp_path):
    """A phone and a laptop of one person upload to one account: the laptop's samples are never deleted
    or overwritten by the phone's reconcile, and a sample both wrote is left to the later writer
    without keeping the check failing."""
    phone, laptop = tmp_path / "phone", tmp_path / "laptop"
    ingest(phone, days=30)
    stepsync("ingest", "--store", str(laptop), "--source", f"mock:seed=7,days=20,end={MOCK_END},watch=0")
    upload(phone, backend)
    upload(laptop, backend)
    assert_equal(backend, phone, also=laptop)

    days = utc_days(phone)
    day = sorted(days)[3]
    # The laptop writes one of the phone's samples (of another day) in another version, later.
    shared = sorted(days[sorted(days)[9]], key=lambda s: s["id"])[5]
    changed = dict(shared, count=shared["count"] + 7)
    request = json.dumps({"samples": [changed], "uploader": "LAPTOP-SCRIPT"}).encode()
    import urllib.request

    urllib.request.urlopen(urllib.request.Request(backend.url + "/steps", data=request, method="POST",
                                                  headers={"Authorization": f"Bearer {backend.token}",
                                                           "Content-Type": "application/json"}), timeout=60).read()
    # And a day of the phone's is lost.
    sql(backend, "DELETE FROM samples WHERE user_name = ? AND start_date LIKE ? AND uploader = ?",
        (backend.user, day + "%", status(phone)["destination"]["uploader"]))

    laptop_ids = set(export_samples(laptop))
    laptop_before = {i: s for i, s in backend.live_samples().items() if i in laptop_ids}
    report = upload(phone, backend)
    found(report, samplesMissing=len(days[day]), heldByAnotherUploader=1)
    held = backend.live_samples()
    assert held[shared["id"]] == changed, "the later writer's version stays"
    assert {i: held[i] for i in laptop_before} == laptop_before, "the other store's samples are untouched"
    assert report["check"]["provenEqual"]
    again = upload(phone, backend)
    assert again["check"]["provenEqual"] and not again["reconciles"] and again["samplesSynced"] == 0


def test_a_new_server_or_account_gets_every_live_sample_in_one_upload(backend, tmp_path):
    store = tmp_path / "store"
    ingest(store, days=30)
    first = upload(store, backend)
    live = len(export_samples(store))
    assert first["samplesSynced"] == live

    # A second account on the same server.
    other_token = subprocess.run([*PYTHON_SERVER(), "tokens", "create", "--user", "second", *backend.storage()],
                                 capture_output=True, text=True, check=True).stdout.strip()
    TOKEN_ENV["STEPSYNC_TOKEN"] = other_token
    moved = upload(store, backend)
    assert moved["samplesSynced"] == live and moved["check"]["provenEqual"] and moved["check"]["user"] == "second"
    assert status(store)["destination"]["user"] == "second"

    # A new, empty server.
    TOKEN_ENV["STEPSYNC_TOKEN"] = backend.token
    empty = Server(tmp_path / "empty-server", free_port(), tokens=False)
    empty.start()
    try:
        result = json.loads(stepsync("upload", "--store", str(store), "--api-url", empty.url, "--json").stdout)
        assert result["samplesSynced"] == live and result["check"]["provenEqual"]
        assert len(empty.live_samples()) == live
        assert len(status(store)["destinations"]) == 3
    finally:
        empty.stop()


def PYTHON_SERVER():
    return [PYTHON, str(SERVER_MAIN)]


def test_reconcile_killed_again_and_again_converges(backend, tmp_path):
    """`stepsync reconcile` SIGKILLed at random moments (at least ten times) and the server restarted in
    the middle: a last run leaves the server equal to the store, no version stored twice."""
    store = tmp_path / "store"
    ingest(store, days=200)
    upload(store, backend)
    copy = backup(backend, tmp_path)
    # The damage: a changed version of every 3rd sample, and deletions, uploaded; then the backup back.
    subprocess.run([STORE_FIXTURE, "change", str(store), "--every", "3", "--limit", "8000"], check=True, capture_output=True)
    subprocess.run([STORE_FIXTURE, "delete", str(store), "--every", "7", "--limit", "3000"], check=True, capture_output=True)
    upload(store, backend)
    restore(backend, copy)

    rng = random.Random(32)
    kills, restarted, runs = 0, False, 0
    while kills < 12 and runs < 60:
        runs += 1
        process = subprocess.Popen([STEPSYNC, "reconcile", "--store", str(store), "--api-url", backend.url],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, **TOKEN_ENV})
        time.sleep(rng.uniform(0.05, 1.5))
        if process.poll() is None:
            process.send_signal(signal.SIGKILL)
            kills += 1
        process.wait()
        if kills == 5 and not restarted:
            backend.kill()
            backend.start()
            restarted = True
    assert kills >= 10 and restarted, (kills, runs)

    final = reconcile(store, backend)
    assert final["check"]["provenEqual"]
    assert_equal(backend, store)
    # Nothing duplicated: no id has two equal versions in a row in the server's history.
    history = rows(backend, "SELECT id, count_thousandths, start_date, end_date FROM sample_versions WHERE user_name = ? "
                   "UNION ALL SELECT id, count_thousandths, start_date, end_date FROM samples WHERE user_name = ?", (backend.user, backend.user))
    versions = {}
    for row in history:
        versions.setdefault(row[0], []).append(row[1:])
    doubled = [i for i, vs in versions.items() if len(vs) != len(set(vs))]
    assert not doubled, f"{len(doubled)} ids with a version stored twice"
    again = upload(store, backend)
    assert again["samplesSynced"] == 0 and again["check"]["provenEqual"] and not again["reconciles"]

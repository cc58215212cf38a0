"""`run verify` (storage/verifier.py), through the command: a history the server wrote verifies clean;
a count changed under the server's feet (as a flipped bit would, no trigger seeing it) is named by
the digest and the daily totals of its day, and nothing else; a real bit flipped in a count inside
the SQLite file, which PRAGMA integrity_check passes, is found; verify changes nothing, --repair
hands the digest to the client's next upload and merges the day again. On SQLite and PostgreSQL."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from stepserver import contract  # noqa: E402
from stepserver.storage import open_storage  # noqa: E402

from conftest import make_sample  # noqa: E402
from test_damage import flip  # noqa: E402

MAIN = Path(__file__).resolve().parent.parent / "main.py"
RECEIVED = "2026-01-01T00:00:00Z"
ODD_COUNT = 123_456  # its thousandths, 0x075BCA00, are four bytes found once in the file


@pytest.fixture(params=["sqlite", "postgres"])
def location(request, tmp_path) -> list[str]:
    """The storage arguments of a fresh SQLite directory or PostgreSQL database."""
    if request.param == "postgres":
        return ["--database", request.getfixturevalue("postgres_cluster").new_database()]
    return ["--data", str(tmp_path / "data")]


def opened(location: list[str]):
    return open_storage(Path(location[1]), None, pool=False) if location[0] == "--data" else \
        open_storage(Path("."), location[1], pool=False)


def verify(location: list[str], *options: str) -> tuple[int, dict]:
    finished = subprocess.run([sys.executable, str(MAIN), "verify", *location, "--json", *options],
                              capture_output=True, text=True, timeout=120)
    assert finished.returncode in (0, 1), finished.stderr
    return finished.returncode, json.loads(finished.stdout)


def write_history(location: list[str]) -> list[dict]:
    """Two users' samples over a few days, from two sources and two uploaders, some replaced and some
    deleted. Returns alice's live samples."""
    store = opened(location)
    try:
        def save(user: str, samples: list[dict], uploader: str = "") -> None:
            body = json.dumps({"samples": samples, **({"uploader": uploader} if uploader else {})}).encode()
            store.save(user, contract.parse_samples(body, time.time_ns()), RECEIVED, uploader)

        alice = [make_sample(n * 50, prefix="a", **({"sourceBundleId": "com.example.app", "sourceDeviceName": None} if n % 4 == 0 else {}))
                 for n in range(300)]  # over eleven days, every fourth from an app
        alice[7]["count"] = ODD_COUNT
        save("alice", alice[:150], "phone-store")
        save("alice", alice[150:])
        save("bob", [make_sample(n * 60, prefix="b") for n in range(120)], "bob-store")
        alice[3]["count"] += 1  # a new version
        save("alice", [alice[3]], "phone-store")
        store.delete_ids("alice", [alice[5]["id"]], RECEIVED)
        return [sample for n, sample in enumerate(alice) if n != 5]
    finally:
        store.close()


def odd(live: list[dict]) -> dict:
    """The sample of ODD_COUNT steps."""
    return next(sample for sample in live if sample["count"] == ODD_COUNT)


def day_of(sample: dict) -> str:
    return sample["startDate"][:10]


def test_a_history_the_server_wrote_verifies_clean(location):
    live = write_history(location)
    assert odd(live)["startDate"][:10] == odd(live)["endDate"][:10]  # the changed sample lies in one day
    code, answer = verify(location)
    assert (code, answer) == (0, {"users": 2, "samples": len(live) + 120, "problems": []})


def test_a_count_changed_under_the_server_is_named_by_its_day(location):
    live = write_history(location)
    target = odd(live)
    change_a_count_under_the_server(location, target["id"])
    code, answer = verify(location)
    assert code == 1
    day = day_of(target)
    assert len(answer["problems"]) == 2, answer["problems"]
    digest, totals = answer["problems"]
    assert digest.startswith(f"user alice: the digest of {day} (uploader phone-store) does not match its samples: "), digest
    assert totals.startswith(f"user alice: the daily totals of {day} do not match its samples: "), totals
    raw = sum(sample["count"] for sample in live if day_of(sample) == day)
    assert f"raw {raw} steps from 2 sources kept, " in totals and totals.endswith(f"raw {raw + 1} steps from 2 sources from the samples")
    # verify only reads: the same answer again, and the changed count is still there
    assert verify(location) == (code, answer)
    store = opened(location)
    try:
        assert store.database.read(lambda tx: tx.rows("SELECT count_thousandths FROM samples WHERE user_name = ? AND id = ?",
                                                      ("alice", target["id"])))[0][0] == (ODD_COUNT + 1) * 1000
    finally:
        store.close()


def change_a_count_under_the_server(location: list[str], sample_id: str) -> None:
    store = opened(location)
    try:
        def change(tx) -> None:
            tx.mark_server_write()  # the digests' triggers stay silent, as for a flipped bit
            assert tx.run("UPDATE samples SET count_thousandths = count_thousandths + 1000 WHERE user_name = ? AND id = ?",
                          ("alice", sample_id)) == 1

        store.database.write(change)
    finally:
        store.close()


def test_repair_leaves_the_digest_to_the_client_and_merges_the_day_again(location):
    """--repair: the day's digest is computed again from the samples (so it now differs from what the
    client holds, and its next checked upload sends the sample again) and the day's totals are the
    samples' merge; a second verify finds nothing."""
    live = write_history(location)
    store = opened(location)
    try:
        digest_before = store.uploader_digest("alice", "phone-store")
    finally:
        store.close()
    change_a_count_under_the_server(location, odd(live)["id"])
    found = verify(location)
    assert verify(location, "--repair") == found and found[0] == 1
    assert verify(location) == (0, {"users": 2, "samples": len(live) + 120, "problems": []})
    store = opened(location)
    try:
        count, digest, days = store.uploader_digest("alice", "phone-store")
        assert (count, days) == digest_before[::2] and digest != digest_before[1]
        day = day_of(odd(live))
        raw = store.database.read(lambda tx: tx.rows("SELECT sum(raw) FROM daily_totals WHERE user_name = ? AND day = ?",
                                                     ("alice", day)))[0][0]
        assert raw == 1000 * (sum(sample["count"] for sample in live if day_of(sample) == day) + 1)
    finally:
        store.close()


def test_a_change_the_server_did_not_make_leaves_its_digest_to_be_recomputed(location):
    """An operator's UPDATE marks the digest stale (recomputed on its next read: not a problem), but
    the day's stored totals no longer match: verify says so."""
    live = write_history(location)
    store = opened(location)
    try:
        store.database.write(lambda tx: tx.run("UPDATE samples SET count_thousandths = 1000 WHERE user_name = ? AND id = ?",
                                               ("alice", odd(live)["id"])))
    finally:
        store.close()
    code, answer = verify(location)
    assert code == 1 and len(answer["problems"]) == 1, answer
    assert answer["problems"][0].startswith(f"user alice: the daily totals of {day_of(odd(live))} do not match its samples")


def test_a_bit_flipped_in_a_count_inside_the_sqlite_file_passes_the_integrity_check_and_is_found(tmp_path):
    location = ["--data", str(tmp_path / "data")]
    live = write_history(location)
    path = tmp_path / "data" / "stepsync.sqlite"
    with sqlite3.connect(path) as connection:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    content = path.read_bytes()
    thousandths = (ODD_COUNT * 1000).to_bytes(4, "big")
    assert content.count(thousandths) == 1
    flip(path, content.index(thousandths) + 3, 0)  # 123,456 steps become 123,456.001
    with sqlite3.connect(path) as connection:
        assert connection.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    code, answer = verify(location)
    assert code == 1
    assert [problem.split(":")[1].strip() for problem in answer["problems"]] == [
        f"the digest of {day_of(odd(live))} (uploader phone-store) does not match its samples",
        f"the daily totals of {day_of(odd(live))} do not match its samples"]


def test_a_directory_without_a_database_is_an_error_and_stays_empty(tmp_path):
    finished = subprocess.run([sys.executable, str(MAIN), "verify", "--data", str(tmp_path / "none")],
                              capture_output=True, text=True, timeout=60)
    assert finished.returncode == 1 and finished.stdout == ""
    assert finished.stderr.strip().splitlines() == [f"tools/api-server/run verify: error: no database in {tmp_path / 'none'} "
                                                    "(stepsync.sqlite not found)"]
    assert not (tmp_path / "none").exists()


"""A server started on a data directory of the earlier layout (DIR/users/NAME.jsonl, DIR/tokens.sqlite)
imports it once into DIR/stepsync.sqlite and says so: nothing lost (live samples, every version in
order, deletions, tokens with their revocations), a torn last line left out and said, the files left
as they were; a damaged line refuses the start with one line naming the file, line and offset."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from stepserver.auth import new_token  # noqa: E402

from conftest import SAMPLE_KEYS, ServerProcess, make_sample, strip_received  # noqa: E402


def line(record: dict) -> bytes:
    """A line as the earlier server wrote it."""
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def version(n: int, received: str, **changes) -> dict:
    return {**make_sample(n, **changes), "receivedAt": received}


def earlier_layout(directory: Path) -> dict:
    """Two users' histories and three tokens (one revoked); returns what each should hold."""
    users = directory / "users"
    users.mkdir(parents=True)
    a0, a1, a2 = version(0, "2024-02-01T00:00:00Z"), version(1, "2024-02-01T00:00:00Z"), version(2, "2024-02-01T00:00:00Z")
    a1_changed = version(1, "2024-02-02T00:00:00Z", count=999, sourceDeviceName="Anna\u2019s\u00a0iPhone")
    a0_again = version(0, "2024-02-04T00:00:00Z")
    alice = [a0, a1, a2, a1_changed, {"deleted": a0["id"], "receivedAt": "2024-02-03T00:00:00Z"}, a0_again,
             {"deleted": a2["id"], "receivedAt": "2024-02-05T00:00:00Z"}]
    (users / "alice.jsonl").write_bytes(b"".join(map(line, alice)) + b'{"id":"torn","startDate":"2024-')
    bob = [version(n, "2024-03-01T00:00:00Z", sourceBundleId="com.example.band") for n in range(5, 2005)]
    (users / "bob.jsonl").write_bytes(b"".join(map(line, bob)))
    tokens = {}
    with sqlite3.connect(directory / "tokens.sqlite") as connection:
        connection.execute("CREATE TABLE tokens (id TEXT PRIMARY KEY, user TEXT NOT NULL, hash BLOB NOT NULL UNIQUE, "
                           "created_at TEXT NOT NULL, revoked_at TEXT)")
        for user, revoked in (("alice", None), ("bob", None), ("alice", "2024-02-10T00:00:00Z")):
            token_id, token, digest = new_token()
            connection.execute("INSERT INTO tokens VALUES (?, ?, ?, ?, ?)", (token_id, user, digest, "2024-01-01T00:00:00Z", revoked))
            tokens[(user, revoked is not None)] = token
    return {"alice": {"live": [a1_changed, a0_again], "versions": [a0, a1, a2, a1_changed, a0_again], "deletions": 2},
            "bob": {"live": bob, "versions": bob, "deletions": 0}, "tokens": tokens}


def test_the_earlier_layout_is_imported_once_and_nothing_is_lost(tmp_path):
    data = tmp_path / "data"
    expected = earlier_layout(data)
    before = {path: path.read_bytes() for path in data.rglob("*") if path.is_file()}
    server = ServerProcess(tmp_path, users=(), data=data)
    server.start()
    try:
        log = server.stderr()
        assert "importing the JSONL layout of" in log
        assert "alice.jsonl: line 8 (byte offset" in log and "a write never acknowledged, left out" in log
        assert "imported 2 users (2002 live samples, 3 earlier versions, 2 deletions) and 3 tokens" in log
        assert "(2 users, 2002 samples)" in log
        for user in ("alice", "bob"):
            server.tokens[user] = expected["tokens"][(user, False)]
            session = server.new_session(user)
            keep = [key for key in SAMPLE_KEYS] + ["receivedAt"]
            assert server.all_samples(session=session) == [{key: s[key] for key in keep} for s in expected[user]["live"]]
            assert server.all_samples(session=session, versions="all") == [{key: s[key] for key in keep}
                                                                            for s in expected[user]["versions"]]
            assert sum(1 for row in server.history(user) if row[1] == "deletion") == expected[user]["deletions"]
        revoked = server.session.get(server.url + "/steps", timeout=10,
                                     headers={"Authorization": f"Bearer {expected['tokens'][('alice', True)]}"})
        assert revoked.status_code == 401
        days = server.new_session("bob").get(server.url + "/steps/daily", params={"from": "2024-01-01", "to": "2024-01-02"},
                                              timeout=30).json()["days"]
        in_range = [s for s in expected["bob"]["live"] if s["startDate"] < "2024-01-03"]
        assert sum(day["raw"] for day in days) == sum(s["count"] for s in in_range)
        server.restart()
        assert "importing" not in server.stderr()
        assert len(server.all_samples(session=server.new_session("bob"))) == 2000
    finally:
        server.finish()
    assert {path: path.read_bytes() for path in before} == before  # the files are left as they were
    assert [strip_received(s) for s in expected["alice"]["live"]]


def test_a_damaged_line_refuses_the_import_naming_it(tmp_path):
    data = tmp_path / "data"
    users = data / "users"
    users.mkdir(parents=True)
    good = line(version(0, "2024-02-01T00:00:00Z"))
    (users / "local.jsonl").write_bytes(good + b'{"id":"x","count":\n' + good)
    server = ServerProcess(tmp_path, users=(), data=data, single_user=True)
    server.start(wait=False)
    assert server.proc.wait(timeout=60) == 1
    lines = [text for text in server.stderr().splitlines() if "error" in text]
    assert len(lines) == 1 and f"local.jsonl: line 2 (byte offset {len(good)})" in lines[0], server.stderr()
    # Nothing was imported: the next start (the line mended) imports all of it.
    (users / "local.jsonl").write_bytes(good + good)
    server.start()
    try:
        assert server.total(versions="all") == 2 and server.total() == 1  # each line a version
    finally:
        server.finish()

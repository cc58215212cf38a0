"""The digests a client reconciles against (docs/RECONCILE.md): the content hash against the shared
vectors, the digests kept by every write on both backends, the digest routes, and the migration
that computes them for a database of version 6."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from conftest import make_sample, make_samples

from stepserver import digests
from stepserver.contract import count_thousandths, instant_ns, parse_samples

VECTORS = json.loads((Path(__file__).resolve().parents[3] / "Tests/Fixtures/digest/vectors.json").read_text("utf-8"))
NOW = 2_000_000_000 * 10**9


def sample_hash(sample: dict) -> int:
    return digests.content_hash(sample["id"], instant_ns(sample["startDate"]), instant_ns(sample["endDate"]),
                                count_thousandths(sample["count"]),
                                sample["sourceBundleId"], sample.get("sourceDeviceName"))


def digest_of(samples: list[dict]) -> tuple[int, str]:
    return len(samples), digests.hex_digest(sum(sample_hash(sample) for sample in samples))


# -- the content hash -------------------------------------------------------------------------------


def test_xxh64_reference_values():
    import xxhash

    for case in VECTORS["xxh64"]:
        assert f"{xxhash.xxh64_intdigest(case['input'].encode()):016x}" == case["hash"]


def test_content_hashes_match_the_shared_vectors():
    total = 0
    for vector in VECTORS["vectors"]:
        sample = vector["sample"]
        assert (instant_ns(sample["startDate"]), instant_ns(sample["endDate"])) == (vector["startNs"], vector["endNs"])
        assert digests.day_of(vector["startNs"]) == vector["day"], vector["name"]
        assert digests.hex_digest(sample_hash(sample)) == vector["hash"], vector["name"]
        total += sample_hash(sample)
    assert (len(VECTORS["vectors"]), digests.hex_digest(total)) == (VECTORS["all"]["count"], VECTORS["all"]["digest"])
    assert len({vector["hash"] for vector in VECTORS["vectors"]}) == len(VECTORS["vectors"])  # every field counts


def test_changes_of_a_batch_are_those_of_each_sample():
    """Changes.add_all (a write's samples, a run of one day at a time) adds what add() of each adds,
    in time order or any other."""
    rng = random.Random(7)
    starts = sorted(rng.randrange(0, 5 * digests.DAY_NS) for _ in range(300))
    hashes = [rng.getrandbits(64) for _ in starts]
    each = digests.Changes()
    for start, content in zip(starts, hashes):
        each.add("u", start, content)
    pairs = list(zip(starts, hashes))
    for order in (pairs, pairs[::-1], rng.sample(pairs, len(pairs))):
        batch = digests.Changes()
        batch.remove("u", starts[0], hashes[0])
        batch.add("u", starts[0], hashes[0])
        batch.add_all("u", [start for start, _ in order], [content for _, content in order])
        assert batch.deltas == each.deltas


# -- the table, kept by every write (in process, both dialects) --------------------------------------


def kept_digests(store) -> dict:
    rows = store.database.read(lambda tx: tx.rows("SELECT user_name, uploader, day, count, digest FROM sample_digests"))
    return {(user, uploader, day): (count, digest & digests.MASK) for user, uploader, day, count, digest in rows}


def recomputed_digests(store) -> dict:
    rows = store.database.read(lambda tx: tx.rows(
        "SELECT user_name, uploader, id, start_ns, end_ns, count_thousandths, source_bundle_id, source_device_name FROM samples"))
    expected: dict = {}
    for user, uploader, *fields in rows:
        key = (user, uploader, digests.day_of(fields[1]))
        count, total = expected.get(key, (0, 0))
        expected[key] = (count + 1, (total + digests.content_hash(*fields)) & digests.MASK)
    return expected


def body(samples: list[dict]) -> bytes:
    return json.dumps({"samples": samples}).encode()


def test_every_write_keeps_the_digests_equal_to_the_live_samples(store):
    generator = random.Random(32)
    at = "2026-01-01T00:00:00Z"
    for step in range(60):
        user = generator.choice(["alice", "bob"])
        uploader = generator.choice(["", "PHONE", "LAPTOP"])
        numbers = generator.sample(range(400), generator.randint(1, 40))
        if generator.random() < 0.25:
            store.delete_ids(user, [make_sample(n)["id"] for n in numbers], at, uploader)
        else:
            # Changed counts and start dates move samples between days; identical ones may be claimed.
            samples = [make_sample(n, count=generator.choice([n % 997, step]),
                                   startDate=f"2024-01-{1 + generator.randrange(3):02d}T00:00:00Z",
                                   endDate="2024-01-03T00:00:00Z") for n in numbers]
            store.save(user, parse_samples(body(samples), NOW), at, uploader)
        assert kept_digests(store) == recomputed_digests(store), f"after step {step}"
    assert len({key[1] for key in kept_digests(store)}) == 3
    store.delete_all("alice")
    assert {key[0] for key in kept_digests(store)} == {"bob"}
    assert kept_digests(store) == recomputed_digests(store)


def test_identical_content_keeps_its_uploader_unless_it_had_none(store):
    samples = make_samples(3)
    at = "2026-01-01T00:00:00Z"
    store.save("alice", parse_samples(body(samples[:2]), NOW), at)  # an earlier client: no uploader
    store.save("alice", parse_samples(body(samples[2:]), NOW), at, "LAPTOP")
    assert store.save("alice", parse_samples(body(samples), NOW), at, "PHONE") == 0  # no new version
    owners = dict(store.database.read(lambda tx: tx.rows("SELECT id, uploader FROM samples")))
    assert owners == {samples[0]["id"]: "PHONE", samples[1]["id"]: "PHONE", samples[2]["id"]: "LAPTOP"}
    assert store.uploader_digest("alice", "PHONE")[:2] == (2, sum(map(sample_hash, samples[:2])) & digests.MASK)
    assert store.uploader_digest("alice", "")[:2] == (0, 0)
    assert kept_digests(store) == recomputed_digests(store)


def stale(store) -> list:
    return store.database.read(lambda tx: tx.rows("SELECT user_name, uploader, day FROM digest_stale ORDER BY day"))


def test_changes_the_server_did_not_make_are_found(store):
    """An operator's DELETE of a day and UPDATE of a count (a transaction the server did not mark as its
    own) mark the digests they touched stale; the next read computes them again from the samples."""
    at = "2026-01-01T00:00:00Z"
    samples = [make_sample(n * 720) for n in range(8)]  # two a day, 2024-01-01 .. 2024-01-04
    store.save("alice", parse_samples(body(samples), NOW), at, "PHONE")
    store.save("bob", parse_samples(body(samples), NOW), at, "PHONE")
    assert stale(store) == []  # the server's own writes keep the digests themselves
    before = store.uploader_digest("alice", "PHONE")

    store.database.write(lambda tx: tx.run("DELETE FROM samples WHERE user_name = 'alice' AND start_date LIKE ?",
                                                       ("2024-01-02%",)))
    store.database.write(lambda tx: tx.run("UPDATE samples SET count_thousandths = count_thousandths + 1000 WHERE user_name = 'alice' AND id = ?",
                                           (samples[6]["id"],)))
    assert stale(store) == [("alice", "PHONE", 19724), ("alice", "PHONE", 19726)]
    assert kept_digests(store) != recomputed_digests(store)
    changed = dict(samples[6], count=samples[6]["count"] + 1)
    expected = [samples[0], samples[1], samples[4], samples[5], changed, samples[7]]
    assert store.uploader_digest("alice", "PHONE") == (6, sum(map(sample_hash, expected)) & digests.MASK, 3)
    assert stale(store) == [] and kept_digests(store) == recomputed_digests(store)
    assert store.uploader_digest("bob", "PHONE") == before
    assert [row[0] for row in store.day_digests("alice", "PHONE", None, 10)] == [19723, 19725, 19726]


# -- the routes (every backend) ----------------------------------------------------------------------


def get(server, path: str, **params):
    return server.session.get(server.url + path, params=params, timeout=60)


def post_as(server, uploader: str, samples: list[dict]):
    response = server.session.post(server.url + "/steps", json={"samples": samples, "uploader": uploader}, timeout=60)
    assert response.status_code == 200, response.text
    return response.json()


def test_digest_routes(server):
    phone, laptop = make_samples(300), make_samples(50, start=1000, prefix="l")
    post_as(server, "PHONE", phone)
    post_as(server, "LAPTOP", laptop)
    answer = get(server, "/steps/digest", uploader="PHONE").json()
    count, digest = digest_of(phone)
    assert answer["user"] == "alice" and answer["uploader"] == "PHONE"
    assert (answer["count"], answer["digest"]) == (count, digest)
    assert answer["days"] == 1
    server_id = answer["serverId"]
    assert len(server_id) == 36

    # The laptop changes one of the phone's samples: it leaves the phone's digest.
    changed = dict(phone[7], count=phone[7]["count"] + 1)
    post_as(server, "LAPTOP", [changed])
    assert (get(server, "/steps/digest", uploader="PHONE").json()["count"], ) == (299, )
    assert get(server, "/steps/digest", uploader="LAPTOP").json()["digest"] == digest_of(laptop + [changed])[1]

    # The phone deletes one: gone from its digest; the lookup says who deleted what.
    response = server.session.post(server.url + "/steps/deletions", json={"ids": [phone[8]["id"]], "uploader": "PHONE"}, timeout=60)
    assert response.json()["deleted"] == 1
    expected = [sample for n, sample in enumerate(phone) if n not in (7, 8)]
    assert (get(server, "/steps/digest", uploader="PHONE").json()["digest"]) == digest_of(expected)[1]

    days = get(server, "/steps/digest/days", uploader="PHONE").json()
    assert days == {"days": [{"day": "2024-01-01", "count": 298, "digest": digest_of(expected)[1]}], "next": None}
    first = get(server, "/steps/digest/samples", uploader="PHONE", day="2024-01-01", limit=200).json()
    assert len(first["samples"]) == 200 and first["next"] == first["samples"][-1]["id"]
    rest = get(server, "/steps/digest/samples", uploader="PHONE", day="2024-01-01", after=first["next"]).json()
    assert rest["next"] is None
    listed = first["samples"] + rest["samples"]
    assert listed == sorted(({"id": s["id"], "hash": digests.hex_digest(sample_hash(s))} for s in expected), key=lambda e: e["id"])
    assert get(server, "/steps/digest/samples", uploader="PHONE", day="2024-01-02").json() == {"samples": [], "next": None}

    lookup = server.session.post(server.url + "/steps/digest/lookup",
                                 json={"ids": [phone[9]["id"], phone[8]["id"], phone[7]["id"], "never-seen"]}, timeout=60).json()
    assert lookup == {"samples": sorted([
        {"id": phone[9]["id"], "state": "live", "uploader": "PHONE", "day": "2024-01-01", "hash": digests.hex_digest(sample_hash(phone[9]))},
        {"id": phone[8]["id"], "state": "deleted", "uploader": "PHONE"},
        {"id": phone[7]["id"], "state": "live", "uploader": "LAPTOP", "day": "2024-01-01", "hash": digests.hex_digest(sample_hash(changed))},
    ], key=lambda e: e["id"])}

    # Another user sees nothing of alice's; the server id survives a restart.
    server.tokens["bob"] = server.create_token("bob")
    bob = server.new_session("bob")
    other = bob.get(server.url + "/steps/digest", params={"uploader": "PHONE"}, timeout=60).json()
    assert (other["user"], other["count"], other["digest"], other["serverId"]) == ("bob", 0, "0" * 16, server_id)
    server.restart()
    assert get(server, "/steps/digest", uploader="PHONE").json()["serverId"] == server_id


def test_days_are_paged_in_day_order(server):
    samples = [make_sample(n * 1440) for n in range(28)]  # one a day, 2024-01-01 .. 2024-01-28
    post_as(server, "PHONE", samples)
    page = get(server, "/steps/digest/days", uploader="PHONE", limit=10).json()
    assert [row["day"] for row in page["days"]] == [f"2024-01-{d:02d}" for d in range(1, 11)] and page["next"] == "2024-01-10"
    rest = get(server, "/steps/digest/days", uploader="PHONE", after=page["next"]).json()
    assert [row["day"] for row in rest["days"]] == [f"2024-01-{d:02d}" for d in range(11, 29)] and rest["next"] is None
    assert all(row["count"] == 1 for row in page["days"] + rest["days"])


@pytest.mark.parametrize("path, params, message", [
    ("/steps/digest", {}, "uploader: required"),
    ("/steps/digest", {"uploader": "a b"}, "uploader: must be 1-64 characters"),
    ("/steps/digest/days", {"uploader": "P", "after": "2024-02-30"}, "after: not a calendar date"),
    ("/steps/digest/samples", {"uploader": "P"}, "day: required"),
    ("/steps/digest/samples", {"uploader": "P", "day": "2024-01-01", "limit": "10001"}, "limit: must be at most 10000"),
])
def test_digest_queries_are_checked(shared_server, path, params, message):
    response = shared_server.session.get(shared_server.url + path, params=params, timeout=60)
    assert response.status_code == 400 and response.json()["error"].startswith(message), response.text


@pytest.mark.parametrize("day", ["0001-01-01", "1969-12-31", "2262-04-12", "9999-12-31"])
def test_days_no_sample_can_start_on_are_empty(shared_server, day):
    """Before 1970 or past 2262 a day's nanoseconds do not fit the databases' integers: no sample there."""
    response = shared_server.session.get(shared_server.url + "/steps/digest/samples", params={"uploader": "P", "day": day}, timeout=60)
    assert response.status_code == 200 and response.json() == {"samples": [], "next": None}, response.text


def test_bodies_name_a_bad_uploader(shared_server):
    response = shared_server.session.post(shared_server.url + "/steps", json={"samples": [], "uploader": "a/b"}, timeout=60)
    assert response.status_code == 400 and response.json()["error"].startswith("uploader: must be 1-64 characters")
    response = shared_server.session.post(shared_server.url + "/steps/digest/lookup", json={"ids": ["x"] * 1001}, timeout=60)
    assert response.status_code == 400 and response.json()["error"] == "ids: expected array of length <= 1000"
    assert shared_server.session.get(shared_server.url + "/steps/digest", params={"uploader": "P"},
                                     headers={"Authorization": "Bearer nope"}, timeout=60).status_code == 401


# -- the migration from version 6 --------------------------------------------------------------------


def test_a_version_6_database_gets_its_digests_and_an_id(tmp_path, request):
    for backend in ("sqlite", "postgres"):
        database = request.getfixturevalue("postgres_cluster").new_database() if backend == "postgres" else None
        from stepserver.storage import open_storage

        data = tmp_path / backend
        store = open_storage(data, database, pool_size=2)
        samples = make_samples(500)
        store.save("alice", parse_samples(body(samples), NOW), "2026-01-01T00:00:00Z")
        store.delete_ids("alice", [samples[0]["id"]], "2026-01-01T00:00:00Z")

        triggers = (["DROP TRIGGER samples_digest_stale ON samples", "DROP FUNCTION samples_digest_stale()"] if database else
                    [f"DROP TRIGGER samples_digest_stale_{event}" for event in ("insert", "update", "delete")])

        def back_to_6(tx):  # what a version 6 database held
            for statement in (*triggers, "DROP TABLE digest_stale", "DROP TABLE digest_writer",
                              "DROP TABLE sample_digests", "DROP TABLE server_identity", "DROP INDEX deletions_by_id",
                              "ALTER TABLE samples DROP COLUMN uploader", "ALTER TABLE deletions DROP COLUMN uploader",
                              "ALTER TABLE samples RENAME COLUMN count_thousandths TO count",
                              "UPDATE samples SET count = count / 1000",
                              "ALTER TABLE sample_versions RENAME COLUMN count_thousandths TO count",
                              "UPDATE sample_versions SET count = count / 1000",
                              "UPDATE stepsync_schema SET version = 6"):
                tx.run(statement)

        store.database.write(back_to_6)
        store.close()
        store = open_storage(data, database, pool_size=2)
        try:
            assert store.uploader_digest("alice", "")[:2] == (499, sum(map(sample_hash, samples[1:])) & digests.MASK)
            assert kept_digests(store) == recomputed_digests(store)
            assert len(store.server_id()) == 36
            assert store.database.read(lambda tx: tx.rows("SELECT version FROM stepsync_schema"))[0][0] == 8
        finally:
            store.close()

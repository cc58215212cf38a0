"""Deletions end to end: `stepsync upload` sends the store's deletions beside its additions, killed
again and again, the server restarted in the middle; at the end the server's live samples equal the
store's exactly and every deletion was applied exactly once."""
import collections
import json
import random
import signal
import subprocess
import time

from conftest import STORE_FIXTURE, export_samples, ingest, status, stepsync, wait_until
from test_faults import HistoryCounter, start_upload


def fixture(*args):
    result = subprocess.run([STORE_FIXTURE, *args], capture_output=True, text=True, check=True, timeout=120)
    return json.loads(result.stdout)


def upload_json(store, url):
    return json.loads(stepsync("upload", "--store", str(store), "--api-url", url, "--json").stdout)


def test_deletions_and_additions_survive_twenty_kills_and_a_server_restart(token_server, tmp_path):
    started = time.monotonic()
    server = token_server
    store = tmp_path / "store"
    ingest(store, days=200)
    first = upload_json(store, server.url)
    uploaded = first["samplesSynced"]
    # Additions (a new version of every 3rd sample) and deletions (every 2nd of the rest, in log
    # order), the way a source's changes arrive: both wait for the same upload.
    changed = fixture("change", str(store), "--every", "3", "--limit", "11000")["changed"]
    deleted = fixture("delete", str(store), "--every", "2", "--limit", "11000")["deleted"]
    assert deleted >= 5_000 and changed >= 5_000
    before = status(store)
    assert before["pendingDeletions"] == deleted and before["stage"] == "uploading"

    rng = random.Random(12)
    arrived = HistoryCounter(server)
    kills = 0
    rounds = 1
    restarted = False
    while kills < 24:
        waiting = status(store)
        if waiting["unsyncedSamples"] + waiting["pendingDeletions"] == 0:
            if kills >= 20:
                break
            # A fast machine finished before twenty kills: the source changes again (deletions
            # first, so that no new version waits behind a deletion of its own sample). With
            # deletions sent 4 requests at a time, a round often ends between two kills: up to 12
            # rounds (this bound only keeps the test from running for ever).
            rounds += 1
            assert rounds <= 12, f"the upload keeps finishing between kills ({kills} kills in {rounds} rounds)"
            deleted += fixture("delete", str(store), "--every", "2", "--limit", "4000")["deleted"]
            changed += fixture("change", str(store), "--every", "3", "--limit", "4000")["changed"]
            continue
        upload = start_upload(store, server.url, "--max-attempts", "100")
        if kills % 2 == 0:
            # Once more lines reached the server (a request was applied, its answer maybe not seen).
            target = arrived.count() + rng.randint(1, 999)
            wait_until(lambda: arrived.count() >= target or upload.poll() is not None, "the upload to make progress")
            time.sleep(rng.uniform(0, 0.03))
        else:
            # A random moment: opening the store, reading a batch, or a request on the wire.
            time.sleep(rng.uniform(0.01, 0.25))
        if upload.poll() is None:  # only a kill of a running upload counts
            upload.send_signal(signal.SIGKILL)
            kills += 1
        upload.wait()
        upload.stdout.close()
        upload.stderr.close()
        if kills == 10 and not restarted:
            server.kill()
            server.start()
            restarted = True
    assert kills >= 20 and restarted

    final = upload_json(store, server.url)
    after = status(store)
    assert after["unsyncedSamples"] == 0 and after["pendingDeletions"] == 0 and after["stage"] == "synced"
    assert after["samples"] == uploaded - deleted
    # A second upload sends nothing.
    again = upload_json(store, server.url)
    assert again["batches"] == 0 and again["samplesSynced"] == 0 and again["deletionsAcknowledged"] == 0

    # The server's live samples are the store's, ids and content.
    assert server.live_samples() == export_samples(store)
    # Its history: every deleted id got exactly one deletion line, and nothing else did; every
    # changed version arrived once (a re-sent identical version writes no line).
    lines = server.records()
    deletions = collections.Counter(line["deleted"] for line in lines if "deleted" in line)
    versions = collections.Counter(line["id"] for line in lines if "id" in line)
    assert sum(deletions.values()) == deleted and max(deletions.values()) == 1
    assert not set(deletions) & set(export_samples(store))
    assert sum(versions.values()) == uploaded + changed
    assert final["deletionsAcknowledged"] <= deleted and final["samplesSynced"] <= changed
    print(f"{kills} kills in {rounds} rounds of changes, {deleted} deletions, {changed} additions, "
          f"{time.monotonic() - started:.1f} s")


def test_a_sample_the_server_refuses_is_quarantined_and_the_rest_arrives(token_server, tmp_path):
    server = token_server
    store = tmp_path / "store"
    ingest(store, days=20)
    # Three samples with more steps than the server accepts (the store takes them).
    poisoned = fixture("change", str(store), "--every", "997", "--limit", "3", "--count", "2000000")["changed"]
    assert poisoned == 3
    result = stepsync("upload", "--store", str(store), "--api-url", server.url, "--json", check=False)
    assert result.returncode == 1
    assert "the server rejected 3 samples" in result.stderr and "count: expected int <= 1000000" in result.stderr
    summary = json.loads(result.stdout)
    assert summary["samplesRejected"] == 3 and len(summary["firstRejections"]) == 3
    after = status(store)
    assert after["rejectedSamples"] == 3 and after["unsyncedSamples"] == 0 and after["stage"] == "synced"
    assert [r["reason"] for r in after["firstRejections"]] == ["count: expected int <= 1000000"] * 3
    rejected = {r["id"] for r in after["firstRejections"]}
    local = export_samples(store)
    assert server.live_samples() == {i: s for i, s in local.items() if i not in rejected}
    text = stepsync("status", "--store", str(store)).stdout
    assert "rejected by the server: 3" in text and "count: expected int <= 1000000" in text

    # A re-run sends nothing and succeeds (it says what it left out).
    again = stepsync("upload", "--store", str(store), "--api-url", server.url, "--json")
    assert json.loads(again.stdout)["batches"] == 0 and "3 samples the server rejected earlier" in again.stderr

    # Fixed at the source: the new content is sent, and arrives.
    assert fixture("change", str(store), "--where-count", "2000000", "--count", "100")["changed"] == 3
    fixed = upload_json(store, server.url)
    assert fixed["samplesSynced"] == 3 and fixed["samplesRejected"] == 0
    assert status(store)["rejectedSamples"] == 0
    assert server.live_samples() == export_samples(store)

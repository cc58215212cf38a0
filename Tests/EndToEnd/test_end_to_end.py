"""Ingest the mock, upload it, and find every sample at the server exactly once."""
import json
import subprocess

from conftest import STEPSYNC, TOKEN_ENV, assert_exactly_once, export_ids, ingest, status, stepsync

KEYS = ["id", "startDate", "endDate", "count", "sourceBundleId", "sourceDeviceName", "receivedAt"]


def test_ingest_upload_every_sample_exactly_once(server, tmp_path):
    store = tmp_path / "store"
    ingest(store, days=60)
    summary = json.loads(stepsync("upload", "--store", str(store), "--api-url", server.url, "--json").stdout)
    records = server.records()
    assert summary["samplesSynced"] == len(records) == summary["samples"]
    assert_exactly_once(server, store)
    # The seeds' sample format, exactly, as GET /steps answers it.
    first = server.get("/steps?limit=1")["samples"][0]
    assert list(first.keys()) == KEYS
    # Samples carry what the store has.
    exported = {json.loads(l)["id"]: json.loads(l) for l in stepsync("export", "--store", str(store)).stdout.splitlines()}
    for record in records[:200]:
        assert {k: record[k] for k in KEYS[:-1]} == exported[record["id"]]
    # Intervals follow their samples.
    counts = status(store)["intervals"]
    assert counts["fetched"] == 0 and counts["synced"] > 0
    # Nothing left: a second upload sends nothing.
    again = json.loads(stepsync("upload", "--store", str(store), "--api-url", server.url, "--json").stdout)
    assert again["batches"] == 0 and len(server.records()) == len(records)


def test_upload_from_the_environment_url(server, tmp_path):
    store = tmp_path / "store"
    ingest(store, days=5)
    result = subprocess.run([STEPSYNC, "upload", "--store", str(store)], capture_output=True, text=True,
                            env={"STEPSYNC_API_URL": server.url, "PATH": "/usr/bin:/bin", **TOKEN_ENV})
    assert result.returncode == 0, result.stderr
    assert_exactly_once(server, store)


def test_no_server_is_a_clear_error(tmp_path):
    store = tmp_path / "store"
    ingest(store, days=3)
    result = stepsync("upload", "--store", str(store), "--api-url", "http://127.0.0.1:9", check=False)
    assert result.returncode == 1
    assert "cannot reach the API at http://127.0.0.1:9" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert status(store)["syncedSamples"] == 0
    # The way to start a server that fits the upload: no token given, a --single-user one on that port…
    assert "is the server running? (on this machine: tools/api-server/run --single-user --port 9," in result.stderr
    # …and with a token, one that takes tokens.
    token = tmp_path / "token"
    token.write_text("sst_0123456789\n")
    token.chmod(0o600)
    result = stepsync("upload", "--store", str(store), "--api-url", "http://127.0.0.1:9", "--token-file", str(token), check=False)
    assert result.returncode == 1 and "--single-user" not in result.stderr
    assert "is the server running? (on this machine: tools/api-server/run --port 9; its tokens: tools/api-server/run tokens create --user NAME)" in result.stderr


def test_bad_api_url_is_a_usage_error(tmp_path):
    store = tmp_path / "store"
    ingest(store, days=3)
    result = stepsync("upload", "--store", str(store), "--api-url", "not a url", check=False)
    assert result.returncode == 2 and "invalid API URL" in result.stderr


def test_the_urlsession_client_too(server, tmp_path):
    """`--http-client urlsession` (the seeds' URLSession client) uploads the same way."""
    store = tmp_path / "store"
    ingest(store, days=20)
    summary = json.loads(stepsync("upload", "--store", str(store), "--api-url", server.url,
                                  "--http-client", "urlsession", "--json").stdout)
    assert summary["samplesSynced"] == summary["samples"]
    assert_exactly_once(server, store)

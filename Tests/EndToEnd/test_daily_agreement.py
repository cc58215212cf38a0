"""`stepsync daily` and the server's GET /steps/daily agree to the step on every day of a two-year
multi-source mock store (an iPhone and an Apple Watch that overlap), in zones with DST, by source,
and again once the server answers from its cache of totals (docs/TOTALS.md)."""
import json
import urllib.parse
import urllib.request

from conftest import TOKEN_ENV, ingest, stepsync

QUERIES = [("Europe/Paris", "2024-11-22", "2026-11-21"),  # two years, two DST changes a year
           ("America/New_York", "2025-03-01", "2025-03-31"),  # a 23-hour day
           ("Asia/Kathmandu", "2026-01-01", "2026-01-10")]  # +05:45


def server_daily(server, zone, first, last):
    query = urllib.parse.urlencode({"tz": zone, "from": first, "to": last, "bySource": "true"})
    headers = {"Authorization": f"Bearer {TOKEN_ENV['STEPSYNC_TOKEN']}"} if TOKEN_ENV else {}
    request = urllib.request.Request(f"{server.url}/steps/daily?{query}", headers=headers)
    with urllib.request.urlopen(request, timeout=300) as response:
        return json.load(response)


def test_stepsync_daily_and_the_server_agree_on_every_day(server, tmp_path):
    store = tmp_path / "store"
    ingest(store, days=730)
    stepsync("upload", "--store", str(store), "--api-url", server.url)
    sources = set()
    for zone, first, last in QUERIES:
        local = json.loads(stepsync("daily", "--store", str(store), "--tz", zone, "--from", first, "--to", last,
                                    "--by-source", "--json").stdout)
        remote = server_daily(server, zone, first, last)
        assert len(local["days"]) == len(remote["days"]) > 0
        for mine, theirs in zip(local["days"], remote["days"]):
            assert mine == theirs, f"{zone} {mine['date']}"
        assert local == remote
        assert server_daily(server, zone, first, last) == local  # from the cache
        sources |= {(s["bundleId"], s["deviceName"]) for day in local["days"] for s in day["sources"]}
    paris = json.loads(stepsync("daily", "--store", str(store), "--tz", "Europe/Paris", "--from", QUERIES[0][1],
                                "--to", QUERIES[0][2], "--json").stdout)
    assert len(sources) >= 2, sources  # the iPhone and the Watch
    assert any(day["merged"] < day["raw"] for day in paris["days"])  # they overlap on some days

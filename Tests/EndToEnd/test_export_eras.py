"""An export of each era (Tests/Fixtures/export-eras: iOS 8 to iOS 16, synthetic) read by `stepsync
ingest` and by an independent reader written here from the formats themselves (regular expressions over
the text, not the scanner's byte rules): the same samples, sample for sample; the same skipped and
leniently read records; the same raw step total every day; Apple's own devices ranked above apps, the
Watch above the iPhone, whatever the person named them; and the server's GET /steps/daily equal to
`stepsync daily` after an upload (the rank rule is written twice, in Swift and in Python)."""
import collections
import datetime
import html
import json
import pathlib
import re
import urllib.parse
import urllib.request
from decimal import Decimal
from fractions import Fraction

import pytest

from conftest import ROOT, TOKEN_ENV, stepsync

ERAS = sorted((ROOT / "Tests" / "Fixtures" / "export-eras").glob("*.xml"))
STEPS = "HKQuantityTypeIdentifierStepCount"
TAG = re.compile(r'<(/?)([A-Za-z]+)((?:[^>"]|"[^"]*")*?)(/?)>')
ATTRIBUTE = re.compile(r'([^\s="]+)="([^"]*)"')


def instant(text):
    """Milliseconds since 1970 of `yyyy-MM-dd HH:mm:ss ±HHMM` or iOS 8's `yyyyMMddHHmmss±HHMM`."""
    for form in ("%Y-%m-%d %H:%M:%S %z", "%Y%m%d%H%M%S%z"):
        try:
            return int(datetime.datetime.strptime(text, form).timestamp()) * 1000
        except ValueError:
            pass
    raise AssertionError(f"not a date: {text!r}")


def device_fields(device):
    """`<<HKDevice: 0x…>, name:iPhone, …, hardware:iPhone12,3, software:16.1>` → {name: iPhone, …}."""
    inner = re.sub(r"^<<HKDevice: 0x[0-9a-fA-F]+>, ", "", device).removesuffix(">")
    return dict(part.split(":", 1) for part in re.split(r", (?=[A-Za-z][A-Za-z ]*:)", inner))


def read_export(path):
    """The step samples an export holds, by the rules of docs/EXPORT.md, and what was skipped."""
    text = path.read_text(encoding="utf-8")
    body = text[text.index("<HealthData"):]
    records, stack, export_date = [], [], None
    for match in TAG.finditer(body):
        closing, name, attributes, empty = match.groups()
        if closing:
            stack.pop()
            continue
        if name == "ExportDate":
            export_date = instant(dict(ATTRIBUTE.findall(attributes))["value"])
        if name == "Record" and len(stack) == 1:
            pairs = ATTRIBUTE.findall(attributes)
            fields = {key: html.unescape(value) for key, value in pairs}
            # Anything left once the name="value" pairs are gone: words of an iOS 8 metadata key.
            lenient = ATTRIBUTE.sub("", attributes).strip() != ""
            records.append({"fields": fields, "metadata": [], "lenient": lenient})
        if name == "MetadataEntry" and len(stack) == 2 and stack[-1] == "Record":
            entry = dict(ATTRIBUTE.findall(attributes))
            records[-1]["metadata"].append((html.unescape(entry["key"]), html.unescape(entry["value"])))
        if not empty:
            stack.append(name)
    steps = [r for r in records if r["fields"]["type"] == STEPS]

    kept, fractional, identities = [], 0, set()
    for r in steps:
        f = r["fields"]
        value = Decimal(f["value"])
        if value != value.to_integral_value():
            fractional += 1  # kept, in thousandths of a step (docs/EXPORT.md)
        source = f.get("sourceName", f.get("source"))
        device = device_fields(f["device"]) if "device" in f else {}
        metadata = dict(r["metadata"])
        identity = (source, f.get("sourceVersion"), re.sub(r"0x[0-9a-fA-F]+", "", f.get("device", "")), f.get("unit"),
                    f.get("creationDate") and instant(f["creationDate"]), instant(f["startDate"]), instant(f["endDate"]),
                    f["value"], tuple(sorted(r["metadata"])))
        if identity in identities:
            continue  # the same record printed twice
        identities.add(identity)
        thousandths = int(value.scaleb(3).quantize(Decimal(1), rounding="ROUND_HALF_EVEN"))
        kept.append({"source": source, "start": instant(f["startDate"]), "end": instant(f["endDate"]),
                     "count": thousandths // 1000 if thousandths % 1000 == 0 else thousandths / 1000,
                     "thousandths": thousandths, "value": value,
                     "deviceName": device.get("name"),
                     "byAppleDevice": device.get("manufacturer", "").startswith("Apple")
                     and (device.get("model") in ("iPhone", "Watch") or device.get("model", "").startswith("iPod"))
                     and device.get("software") == f.get("sourceVersion") and metadata.get("HKWasUserEntered") != "1",
                     "sync": (source, metadata["HKMetadataKeySyncIdentifier"], int(metadata["HKMetadataKeySyncVersion"]))
                     if "HKMetadataKeySyncIdentifier" in metadata else None})
    newest = collections.defaultdict(int)
    for s in kept:
        if s["sync"]:
            newest[s["sync"][:2]] = max(newest[s["sync"][:2]], s["sync"][2])
    kept = [s for s in kept if not s["sync"] or s["sync"][2] == newest[s["sync"][:2]]]

    # A source is an Apple device's own when one of its records says so; records of it without a
    # device take the device name the others share.
    names = collections.defaultdict(set)
    for s in kept:
        if s["byAppleDevice"]:
            names[s["source"]].add(s["deviceName"])
    for s in kept:
        if s["source"] in names:
            s["bundleId"] = "com.apple.health." + s["source"]
            if s["deviceName"] is None and len(names[s["source"]]) == 1:
                s["deviceName"] = next(iter(names[s["source"]]))
        else:
            s["bundleId"] = s["source"]
    return {"samples": kept, "fractional": fractional, "lenient": sum(r["lenient"] for r in steps),
            "exportDate": export_date}


def rfc3339(milliseconds):
    return datetime.datetime.fromtimestamp(milliseconds / 1000, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def raw_per_utc_day(samples):
    """Each sample spread evenly over its span, floored cumulatively (docs/TOTALS.md section 4: the
    whole steps and the thousandths apart), each day's thousandths rounded half to even to steps; and
    the exact sum of the values prorated over days, for the within-a-step check."""
    days, exact = collections.Counter(), collections.defaultdict(Fraction)
    for s in samples:
        c = s["thousandths"]
        if s["start"] == s["end"]:
            days[rfc3339(s["start"])[:10]] += c
            exact[rfc3339(s["start"])[:10]] += Fraction(s["value"])
            continue
        t, done = s["start"], 0
        while t < s["end"]:
            midnight = (t // 86_400_000 + 1) * 86_400_000
            stop = min(midnight, s["end"])
            span, elapsed = s["end"] - s["start"], stop - s["start"]
            reached = (c // 1000) * elapsed // span * 1000 + (c % 1000) * elapsed // span
            days[rfc3339(t)[:10]] += reached - done
            exact[rfc3339(t)[:10]] += Fraction(s["value"]) * Fraction(stop - t, span)
            done, t = reached, stop
    return {day: round(Fraction(v, 1000)) for day, v in days.items() if v}, exact


def kind(bundle, device):
    """Entered by hand first; then Apple's devices by what they are, a Watch before an iPhone; then
    everything else."""
    if bundle in ("Health", "com.apple.Health"):
        return 0
    if bundle.startswith("com.apple.health.") and device is not None:
        return 1 if "Watch" in device else 2
    return 3


def server_daily(server, first, last):
    query = urllib.parse.urlencode({"tz": "UTC", "from": first, "to": last, "bySource": "true"})
    headers = {"Authorization": f"Bearer {TOKEN_ENV['STEPSYNC_TOKEN']}"} if TOKEN_ENV else {}
    request = urllib.request.Request(f"{server.url}/steps/daily?{query}", headers=headers)
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.load(response)


@pytest.mark.parametrize("path", ERAS, ids=lambda p: p.stem)
def test_every_era_reads_as_the_independent_reader_reads_it(server, tmp_path, path):
    expected = read_export(path)
    store = tmp_path / "store"
    ingest = json.loads(stepsync("ingest", "--store", str(store), "--source", str(path), "--json").stdout)
    read = ingest["read"]
    assert read["fractionalStepRecords"] == expected["fractional"]
    assert read["lenientStepRecords"] == expected["lenient"]
    assert read["exportDate"] == rfc3339(expected["exportDate"])

    stored = [json.loads(line) for line in stepsync("export", "--store", str(store)).stdout.splitlines()]
    shape = lambda s: (s["startDate"], s["endDate"], s["count"], s["sourceBundleId"], s["sourceDeviceName"])
    mine = [(rfc3339(s["start"]), rfc3339(s["end"]), s["count"], s["bundleId"], s["deviceName"]) for s in expected["samples"]]
    assert sorted(map(shape, stored)) == sorted(mine)

    daily = json.loads(stepsync("daily", "--store", str(store), "--tz", "UTC", "--by-source", "--json").stdout)
    raw, exact = raw_per_utc_day(expected["samples"])
    assert {day["date"]: day["raw"] for day in daily["days"] if day["date"] in raw} == raw
    for day in daily["days"]:  # within a step of the values' sum (their share of the day)
        assert abs(day["raw"] - exact.get(day["date"], 0)) <= 1, day
    for day in daily["days"]:
        kinds = [kind(s["bundleId"], s["deviceName"]) for s in day["sources"]]
        assert kinds == sorted(kinds), day  # Watch, then iPhone, then the apps

    stepsync("upload", "--store", str(store), "--api-url", server.url)
    assert server_daily(server, daily["from"], daily["to"]) == daily

"""Deletions from the source, end to end: what the source no longer has (the mock's churn, a
sample absent from a newer export) is deleted in the store by `stepsync ingest` and at the server
by the next `stepsync upload`, so the server's live samples equal the source's exactly."""
import collections
import datetime
import json
import re

from conftest import MOCK_END, export_samples, status, stepsync


def upload_json(store, url):
    return json.loads(stepsync("upload", "--store", str(store), "--api-url", url, "--json").stdout)


def ingest_counts(store, source, *options):
    """Runs `stepsync ingest`; returns (new, changed, deleted) from its "N new, M changed, D deleted" line."""
    out = stepsync("ingest", "--store", str(store), "--source", source, *options).stdout
    match = re.search(r"^  ([\d,]+) new, ([\d,]+) changed, ([\d,]+) deleted$", out, re.MULTILINE)
    assert match, out
    return tuple(int(g.replace(",", "")) for g in match.groups())


def assert_server_equals_store_and_a_second_upload_sends_nothing(server, store):
    assert server.live_samples() == export_samples(store)
    again = upload_json(store, server.url)
    assert again["batches"] == 0 and again["samplesSynced"] == 0 and again["deletionsAcknowledged"] == 0
    after = status(store)
    assert after["unsyncedSamples"] == 0 and after["pendingDeletions"] == 0


def test_the_next_mock_day_with_churn_reaches_the_server(server, tmp_path):
    store = tmp_path / "store"
    ingest_counts(store, f"mock:days=30,end={MOCK_END}")
    first = upload_json(store, server.url)
    assert first["samplesSynced"] == status(store)["samples"]

    next_day = (datetime.date.fromisoformat(MOCK_END) + datetime.timedelta(days=1)).isoformat()
    new, changed, deleted = ingest_counts(store, f"mock:days=31,end={next_day},churn=0.05")
    assert changed == 0 and new > 0 and deleted > 100
    assert status(store)["pendingDeletions"] == deleted
    second = upload_json(store, server.url)
    assert second["deletionsAcknowledged"] == deleted and second["samplesSynced"] == new
    assert_server_equals_store_and_a_second_upload_sends_nothing(server, store)
    # The server's history: each deleted id got exactly one deletion line.
    deletions = collections.Counter(line["deleted"] for line in server.records() if "deleted" in line)
    assert sum(deletions.values()) == deleted and max(deletions.values()) == 1


def record(minute, count, source="Apple\u00a0Watch", end_minute=None, metadata=()):
    """A step record `minute` minutes after 2021-03-01 09:00 -0800."""
    base = datetime.datetime(2021, 3, 1, 9, 0, tzinfo=datetime.timezone(datetime.timedelta(hours=-8)))

    def text(m):
        return (base + datetime.timedelta(minutes=m)).strftime("%Y-%m-%d %H:%M:%S -0800")

    end = minute + 1 if end_minute is None else end_minute
    head = (f'<Record type="HKQuantityTypeIdentifierStepCount" sourceName="{source}" sourceVersion="8.5" unit="count" '
            f'creationDate="{text(end + 1)}" startDate="{text(minute)}" endDate="{text(end)}" value="{count}"')
    if not metadata:
        return head + "/>"
    entries = "".join(f'\n  <MetadataEntry key="{k}" value="{v}"/>' for k, v in metadata)
    return head + ">" + entries + "\n </Record>"


def export_xml(records, export_date):
    lines = ['<?xml version="1.0" encoding="UTF-8"?>', '<HealthData locale="en_US">',
             f' <ExportDate value="{export_date}"/>',
             ' <Me HKCharacteristicTypeIdentifierDateOfBirth="1985-04-12" HKCharacteristicTypeIdentifierBiologicalSex="HKBiologicalSexFemale" '
             'HKCharacteristicTypeIdentifierBloodType="HKBloodTypeNotSet" HKCharacteristicTypeIdentifierFitzpatrickSkinType="HKFitzpatrickSkinTypeNotSet" '
             'HKCharacteristicTypeIdentifierCardioFitnessMedicationsUse="None"/>']
    lines += [" " + r for r in records]
    lines.append("</HealthData>")
    return "\n".join(lines) + "\n"


def synced(minute, count, version):
    return record(minute, count, source="Pedometer++",
                  metadata=(("HKMetadataKeySyncIdentifier", "walk-6"), ("HKMetadataKeySyncVersion", str(version))))


def test_a_newer_export_reaches_the_server(server, tmp_path):
    shared = [record(60 + 2 * i, 40 + i) for i in range(200)]
    january = [record(0, 30), record(2, 70), record(4, 20_000), synced(6, 100, 1),
               record(8, 11, "Jane’s iPhone"), record(10, 12, "Jane’s iPhone")] + shared
    # March: the two first consolidated, the bogus entry gone, the app's sample at sync version 2,
    # the iPhone renamed, and a walk in April.
    march = [record(0, 100, end_minute=3), synced(6, 100, 1), synced(6, 130, 2),
             record(8, 11, "Jane’s iPhone 15"), record(10, 12, "Jane’s iPhone 15")] + shared + \
            [record(40 * 1440, 777, "Jane’s iPhone 15")]
    jan_path, mar_path = tmp_path / "january.xml", tmp_path / "march.xml"
    jan_path.write_text(export_xml(january, "2021-03-10 08:00:00 -0800"), encoding="utf-8")
    mar_path.write_text(export_xml(march, "2021-05-10 08:00:00 -0700"), encoding="utf-8")
    store = tmp_path / "store"

    assert ingest_counts(store, str(jan_path)) == (206, 0, 0)
    assert upload_json(store, server.url)["samplesSynced"] == 206
    assert ingest_counts(store, str(mar_path)) == (5, 0, 6)
    second = upload_json(store, server.url)
    assert second["samplesSynced"] == 5 and second["deletionsAcknowledged"] == 6
    assert len(export_samples(store)) == 205
    assert_server_equals_store_and_a_second_upload_sends_nothing(server, store)
    # What the server holds is March's export: the consolidated sample, version 2, the new name.
    counts = sorted((s["count"], s["sourceBundleId"]) for s in server.live_samples().values() if s["count"] >= 100)
    assert (100, "Apple\u00a0Watch") in counts and (130, "Pedometer++") in counts and (100, "Pedometer++") not in counts
    assert not any(s["sourceBundleId"] == "Jane’s iPhone" for s in server.live_samples().values())
    assert not any(s["count"] == 20_000 for s in server.live_samples().values())

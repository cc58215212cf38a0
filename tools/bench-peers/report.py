#!/usr/bin/env python3
"""Formats the figures tools/bench collects from command output (one line each)."""
import json
import sys


def ingest(path, label):
    s = json.load(open(path))
    f = s["fetch"]
    print(f"ingest {s['source']}{label}: {f['samplesInserted']:,} samples, layering {s['layering']['seconds']:.2f} s, "
          f"fetch {f['seconds']:.2f} s = {f['samplesPerSecond']:,.0f} samples/s, {f['storeShare']:.0%} of the fetch time in StepLog")


def export_ingest(path, seconds, kib, xml_bytes):
    s = json.load(open(path))
    t = float(seconds)
    print(f"stepsync ingest --source export.zip: {s['samples']:,} samples stored in {t:.2f} s = "
          f"{int(xml_bytes) / 1e6 / t:,.0f} MB/s of XML (read, layering, fetch, syncs), peak RSS {int(kib) / 1024:,.0f} MiB")


def export_reingest(path, seconds, kib, xml_bytes, first_seconds):
    s = json.load(open(path))
    t, first = float(seconds), float(first_seconds)
    print(f"  re-import of a newer export, 1% of its step records gone: {s['new']:,} new, {s['changed']:,} changed, "
          f"{s['deleted']:,} deleted in {t:.2f} s = {int(xml_bytes) / 1e6 / t:,.0f} MB/s of XML "
          f"({first / t:.0%} of the first import's speed), peak RSS {int(kib) / 1024:,.0f} MiB")


def peer(seconds, kib, xml_bytes):
    t = float(seconds)
    print(f"peer healthkit-to-sqlite 1.0 on the same records without a DTD: {t:.2f} s = {int(xml_bytes) / 1e6 / t:,.1f} MB/s of XML, "
          f"peak RSS {int(kib) / 1024:,.0f} MiB")


if __name__ == "__main__":
    {"ingest": ingest, "export-ingest": export_ingest, "export-reingest": export_reingest, "peer": peer}[sys.argv[1]](*sys.argv[2:])

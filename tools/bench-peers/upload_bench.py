#!/usr/bin/env python3
"""Upload throughput against the real API server (SQLite), beside the server's
own ceiling measured in the same run (the same request bodies posted one after
another over one keep-alive connection by a plain HTTP client) and, with
--peer-main, beside the single-file server of commit 9653f56 (JSONL + an SQLite
index), the two uploads alternating round by round.

Each measurement starts a fresh server with an empty data directory (what an
upload meets), and the upload starts from a fresh copy of the ingested store.

With --fixture (Tests/StoreFixture), also deletions beside additions in one
run: on a store already uploaded, N samples changed (N additions to send),
uploaded and timed; then N samples deleted, uploaded and timed.
Usage: upload_bench.py --stepsync BIN --server-python PY --work DIR [--days N] [--rounds R]
                       [--fixture BIN --deletions N] [--peer-python PY --peer-main MAIN_PY]
"""
import argparse
import http.client
import json
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parents[2]
SERVER = ROOT / "tools" / "api-server" / "main.py"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, python, data, main=SERVER, single_user=True):
        self.port = free_port()
        self.process = subprocess.Popen([python, str(main), "--port", str(self.port), "--data", str(data),
                                         *(["--single-user"] if single_user else [])],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=1):
                    return
            except OSError:
                time.sleep(0.05)
        raise SystemExit("the API server did not start")

    def stop(self):
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=30)


def log(text):
    print(text, file=sys.stderr, flush=True)


def load():
    return "load " + open("/proc/loadavg").read().split()[0]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--stepsync", required=True)
    parser.add_argument("--server-python", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--days", type=int, default=3650)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--fixture", help="stepsync-store-fixture, for the deletions measurement")
    parser.add_argument("--deletions", type=int, default=100_000)
    parser.add_argument("--peer-python", help="the python of the single-file server's venv")
    parser.add_argument("--peer-main", help="the single-file server of 9653f56 (its main.py)")
    args = parser.parse_args()
    work = pathlib.Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    pristine = work / "pristine"
    log(f"upload bench: ingesting {args.days} days of mock data")
    subprocess.run([args.stepsync, "ingest", "--store", str(pristine), "--source", f"mock:days={args.days},end=2026-11-21"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    lines = subprocess.run([args.stepsync, "export", "--store", str(pristine)], check=True,
                           capture_output=True).stdout.splitlines()
    bodies = [b'{"samples":[' + b",".join(lines[i:i + 1000]) + b"]}" for i in range(0, len(lines), 1000)]
    samples = len(lines)
    ceilings, uploads, peers = [], [], []

    def upload_to(server, round_, name):
        store = work / f"store-{name}-{round_}"
        shutil.copytree(pristine, store)
        result = subprocess.run([args.stepsync, "upload", "--store", str(store), "--api-url", f"http://127.0.0.1:{server.port}", "--json"],
                                check=True, capture_output=True, text=True)
        summary = json.loads(result.stdout)
        server.stop()
        shutil.rmtree(store)
        if summary["samplesSynced"] != samples:
            raise SystemExit(f"upload to {name} synced {summary['samplesSynced']} of {samples}")
        return summary["samplesPerSecond"]

    for round_ in range(args.rounds):
        server = Server(args.server_python, work / f"ceiling-{round_}")
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
        started = time.perf_counter()
        for body in bodies:
            connection.request("POST", "/steps", body=body, headers={"Content-Type": "application/json"})
            response = connection.getresponse()
            answer = response.read()
            if response.status != 200:
                raise SystemExit(f"ceiling client: server said {response.status}: {answer[:200]!r}")
        ceilings.append(samples / (time.perf_counter() - started))
        connection.close()
        server.stop()
        log(f"  round {round_ + 1}: ceiling {ceilings[-1]:,.0f} samples/s ({load()})")

        if args.peer_main:
            peer = Server(args.peer_python, work / f"peer-{round_}" / "steps.jsonl", main=args.peer_main, single_user=False)
            peers.append(upload_to(peer, round_, "9653f56"))
            log(f"  round {round_ + 1}: stepsync upload to the server of 9653f56 {peers[-1]:,.0f} samples/s ({load()})")
        uploads.append(upload_to(Server(args.server_python, work / f"upload-{round_}"), round_, "this server"))
        log(f"  round {round_ + 1}: stepsync upload {uploads[-1]:,.0f} samples/s ({load()})")
    if args.fixture:
        deletions_bench(args, work, pristine, samples)
    ceiling, upload = max(ceilings), max(uploads)
    print(f"upload: {samples:,} samples in {len(bodies)} bodies of 1,000; stepsync upload {upload:,.0f} samples/s, "
          f"server ceiling (same bodies, plain HTTP client) {ceiling:,.0f} samples/s: {upload / ceiling:.0%} of the ceiling "
          f"(best of {args.rounds} rounds each; {load()})")
    if peers:
        print(f"upload: the same upload to the single-file server of 9653f56: {max(peers):,.0f} samples/s; this server at "
              f"{upload / max(peers):.0%} of it (best of {args.rounds} alternating rounds each; rounds: this "
              f"{', '.join(f'{v:,.0f}' for v in uploads)}; 9653f56 {', '.join(f'{v:,.0f}' for v in peers)})")


def deletions_bench(args, work, pristine, samples):
    """N additions (changed samples) and then N deletions, each uploaded and timed, on one server."""
    n = min(args.deletions, samples)
    store = work / "deletions-store"
    shutil.copytree(pristine, store)
    server = Server(args.server_python, work / "deletions-server")
    url = f"http://127.0.0.1:{server.port}"

    def upload():
        result = subprocess.run([args.stepsync, "upload", "--store", str(store), "--api-url", url, "--json"],
                                check=True, capture_output=True, text=True)
        return json.loads(result.stdout)

    def fixture(command, *extra):
        return json.loads(subprocess.run([args.fixture, command, str(store), *extra],
                                         check=True, capture_output=True, text=True).stdout)

    log(f"  deletions: uploading {samples:,} samples first")
    upload()
    changed = fixture("change", "--every", str(max(1, samples // n)), "--limit", str(n))["changed"]
    additions = upload()
    if additions["samplesSynced"] != changed:
        raise SystemExit(f"upload synced {additions['samplesSynced']} of {changed} changed samples")
    deleted = fixture("delete", "--every", str(max(1, samples // n)), "--limit", str(n))["deleted"]
    removals = upload()
    server.stop()
    if removals["deletionsAcknowledged"] != deleted or removals["deletionsAppliedByServer"] != deleted:
        raise SystemExit(f"upload acknowledged {removals['deletionsAcknowledged']} of {deleted} deletions "
                         f"({removals['deletionsAppliedByServer']} applied by the server)")
    added_rate = changed / additions["seconds"]
    deleted_rate = deleted / removals["seconds"]
    print(f"upload of deletions: {deleted:,} deletions in {removals['deletionBatches']} requests of 1,000 ids, "
          f"{deleted_rate:,.0f} deletions/s; beside {changed:,} additions (changed samples) in the same run, "
          f"{added_rate:,.0f} samples/s: deletions at {deleted_rate / added_rate:.1f}x the additions' rate")


if __name__ == "__main__":
    main()

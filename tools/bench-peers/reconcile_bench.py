#!/usr/bin/env python3
"""What proving the server holds what the store acknowledged costs (docs/RECONCILE.md), against the
real API server (SQLite) and the real `stepsync` (release):

1. the check on an in-sync history of --samples samples (the mock, one iPhone at perDay samples a
   day over ten years): `stepsync upload` with nothing to send, several runs; its requests and the
   bytes they carried (counted by a TCP relay between the two), the whole command's time, the store's
   opening and the check's own split into the store's digest pass and the request, beside `stepsync
   status` on the same store in the same runs (opening it and one plain pass over its records);
2. a repair of --damage of the samples deleted at the server behind its back, spread over the
   history (every 1/damage-th row): one `stepsync upload` finds and re-sends them; its requests, bytes
   and time, and the server equal to the store after it.

Usage: reconcile_bench.py --stepsync BIN --server-python PY --work DIR [--samples N] [--rounds R] [--damage F]
"""
import argparse
import json
import pathlib
import shutil
import socket
import sqlite3
import subprocess
import sys
import threading
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from upload_bench import Server, load, log  # noqa: E402

END = "2026-11-21"


class CountingRelay:
    """A TCP relay on loopback that counts the bytes each way (requests, answers)."""

    def __init__(self, target_port):
        self.target = target_port
        self.sent = self.received = 0
        self.lock = threading.Lock()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target))
            threading.Thread(target=self._pipe, args=(client, upstream, "sent"), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client, "received"), daemon=True).start()

    def _pipe(self, source, target, counter):
        try:
            while True:
                data = source.recv(1 << 16)
                if not data:
                    break
                with self.lock:
                    setattr(self, counter, getattr(self, counter) + len(data))
                target.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, target):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def take(self):
        """(bytes sent, bytes received) since the last call."""
        with self.lock:
            counts = (self.sent, self.received)
            self.sent = self.received = 0
        return counts

    def close(self):
        self.listener.close()


def run(args, *command):
    started = time.monotonic()
    result = subprocess.run([args.stepsync, *command], capture_output=True, text=True, check=True)
    return result.stdout, time.monotonic() - started


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--stepsync", required=True)
    parser.add_argument("--server-python", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--samples", type=int, default=3_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--damage", type=float, default=0.01)
    args = parser.parse_args()
    work = pathlib.Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    store = work / "store"
    per_day = max(50, args.samples // 3650)
    log(f"ingesting the mock, 3650 days of {per_day} samples ({load()})")
    run(args, "ingest", "--store", str(store), "--source", f"mock:days=3650,end={END},perDay={per_day},watch=0")
    samples = json.loads(run(args, "status", "--store", str(store), "--json")[0])["samples"]
    server = Server(args.server_python, work / "server")
    relay = CountingRelay(server.port)
    url = f"http://127.0.0.1:{relay.port}"
    try:
        log(f"uploading {samples:,} samples ({load()})")
        first, seconds = run(args, "upload", "--store", str(store), "--api-url", url, "--json")
        uploaded = json.loads(first)
        relay.take()
        log(f"  {uploaded['samplesSynced']:,} samples in {seconds:.1f} s; proven equal: {uploaded['check']['provenEqual']}")

        print(f"check on an in-sync history of {samples:,} samples (stepsync upload with nothing to send; "
              f"stepsync status, which opens the same store and reads each of its records once, alternating):")
        passes = []
        for round_ in range(args.rounds):
            out, seconds = run(args, "upload", "--store", str(store), "--api-url", url, "--json")
            result = json.loads(out)
            sent, received = relay.take()
            _, status_seconds = run(args, "status", "--store", str(store))
            check = result["check"]
            passes.append((check["storeSeconds"], status_seconds))
            print(f"  round {round_ + 1}: {check['requests']} request(s), {sent:,} bytes sent, {received:,} received "
                  f"(health check included); open {result['openSeconds'] * 1000:.0f} ms, "
                  f"check {check['seconds'] * 1000:.0f} ms (the store's digest pass {check['storeSeconds'] * 1000:.0f} ms, "
                  f"the request {check['requestSeconds'] * 1000:.0f} ms), whole command {seconds * 1000:.0f} ms; "
                  f"stepsync status {status_seconds * 1000:.0f} ms (digest pass / status {check['storeSeconds'] / status_seconds:.2f}); "
                  f"proven equal: {check['provenEqual']}; {load()}")
        best = min(passes)
        print(f"  the digest pass, best of {args.rounds}: {best[0] * 1000:.0f} ms, {best[0] / best[1]:.2f} of stepsync status in the same round")

        every = round(1 / args.damage)
        with sqlite3.connect(work / "server" / "stepsync.sqlite") as connection:
            damaged = connection.execute("DELETE FROM samples WHERE rowid % ? = 0", (every,)).rowcount
        log(f"deleted {damaged:,} samples at the server by hand, one row in {every}")
        out, seconds = run(args, "upload", "--store", str(store), "--api-url", url, "--json")
        result = json.loads(out)
        sent, received = relay.take()
        report = result["reconciles"][0] if result["reconciles"] else {}
        print(f"repair of {damaged:,} samples deleted at the server ({args.damage:.0%}, spread over the history): "
              f"{report.get('daysDiffering', 0):,} of {report.get('daysCompared', 0):,} days differed, "
              f"{report.get('samplesMissing', 0):,} found missing; {result['check']['requests']} digest requests and "
              f"{result['batches']} upload batches; {sent:,} bytes sent, {received:,} received; "
              f"{seconds:.1f} s in all (check and reconcile {result['check']['seconds']:.1f} s); "
              f"proven equal after: {result['check']['provenEqual']}; {load()}")
        again = json.loads(run(args, "upload", "--store", str(store), "--api-url", url, "--json")[0])
        assert again["check"]["provenEqual"] and not again["reconciles"], again
    finally:
        relay.close()
        server.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

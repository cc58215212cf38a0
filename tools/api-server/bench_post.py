#!/usr/bin/env python3
"""Measures POST /steps throughput from one client: prints samples/s for new and for re-posted samples.

Usage: .venv/bin/python bench_post.py [--requests 100] [--batch 1000]
Starts main.py on a free loopback port with a temporary data file, sends pre-encoded bodies one after
another over one keep-alive connection, then stops the server. Client-side JSON encoding is not timed.
"""

from __future__ import annotations

import argparse
import json
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import requests

MAIN = Path(__file__).resolve().parent / "main.py"


def body(first: int, count: int) -> bytes:
    samples = []
    for n in range(first, first + count):
        minute = n % 1440
        samples.append(
            {
                "id": str(uuid.UUID(int=n + 1)).upper(),
                "startDate": f"2024-01-{1 + n // 1440 % 28:02d}T{minute // 60:02d}:{minute % 60:02d}:00Z",
                "endDate": f"2024-01-{1 + n // 1440 % 28:02d}T{minute // 60:02d}:{minute % 60:02d}:59Z",
                "count": n % 150,
                "sourceBundleId": "com.apple.health.4F1C2A9B-1111-2222-3333-444455556666",
                "sourceDeviceName": "Anna\u2019s\u00a0iPhone",
            }
        )
    return json.dumps({"samples": samples}).encode()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--batch", type=int, default=1000)
    arguments = parser.parse_args()

    bodies = [body(i * arguments.batch, arguments.batch) for i in range(arguments.requests)]
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with tempfile.TemporaryDirectory() as directory:
        data = Path(directory) / "steps.jsonl"
        server = subprocess.Popen([sys.executable, str(MAIN), "--port", str(port), "--data", str(data)])
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    requests.get(url + "/health", timeout=1).raise_for_status()
                    break
                except requests.ConnectionError:
                    if time.monotonic() > deadline or server.poll() is not None:
                        raise SystemExit("server did not start")
                    time.sleep(0.05)
            headers = {"Content-Type": "application/json"}
            with requests.Session() as session:
                for label, expect_saved in (("new samples", arguments.batch), ("re-posted (all duplicates)", 0)):
                    started = time.perf_counter()
                    for payload in bodies:
                        response = session.post(url + "/steps", data=payload, headers=headers, timeout=60)
                        response.raise_for_status()
                        assert response.json()["saved"] == expect_saved, response.text
                    elapsed = time.perf_counter() - started
                    samples = arguments.requests * arguments.batch
                    print(
                        f"POST /steps, {label}: {samples} samples in {arguments.requests} requests of "
                        f"{arguments.batch}: {elapsed:.2f} s, {samples / elapsed:,.0f} samples/s, "
                        f"{elapsed / arguments.requests * 1000:.1f} ms/request"
                    )
                started = time.perf_counter()
                page = session.get(url + "/steps", params={"limit": 100000, "offset": 0}, timeout=60).json()
                elapsed = time.perf_counter() - started
                print(f"GET /steps limit=100000: {len(page['samples'])} samples in {elapsed:.2f} s")
            print(f"JSONL {data.stat().st_size / 1e6:.1f} MB, index {Path(str(data) + '.index.sqlite').stat().st_size / 1e6:.1f} MB")
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())

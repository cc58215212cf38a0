#!/usr/bin/env python3
"""The server's benchmarks (tools/bench server, tools/bench daily), each beside a peer in the same run.

  post   POST /steps of 1,000 new samples a request (mock-like days of an iPhone and a Watch, in time
         order, as `stepsync upload` sends them), each request committed before its 200:
         - SQLite: the server, one request at a time and 4 in flight, beside a bare sqlite3 loop doing
           the same 1,000-row transactions (INSERT … ON CONFLICT DO UPDATE, BEGIN IMMEDIATE … COMMIT) on
           a file with the same schema and settings (WAL, synchronous=FULL), its rows built before the
           clock starts;
         - PostgreSQL (a cluster on a temporary directory, fsync on): the server with 4 requests in
           flight, beside bare psycopg, 4 connections each COPYing its batches (one transaction a batch).
         Rounds alternate the server and its peer; every round starts from an empty database.
  daily  GET /steps/daily for a year (Europe/Paris, by source) over a user holding N samples from three
         sources (loaded by POST), on both backends: the first answer after the load, again, and the
         first after a restart, each the median of 3 queries of a different year.

Usage: .venv/bin/python bench_server.py [post|daily ...] [--requests 200] [--rounds 3] [--daily-samples 3000000]
Figures on stdout, progress on stderr; the load average (uptime) beside each figure.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "tests"))

from postgres_cluster import PostgresCluster  # noqa: E402
from stepserver.contract import instant_ns  # noqa: E402
from stepserver.storage import open_storage  # noqa: E402
from stepserver.storage.store import SAMPLE_COLUMNS  # noqa: E402

BATCH = 1000
RECEIVED = "2026-11-27T12:00:00Z"


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def load() -> str:
    return "load " + open("/proc/loadavg").read().split()[0] if os.path.exists("/proc/loadavg") else "load ?"


def mock_samples(days: int, per_day: int = 150, sources: int = 2, seed: int = 42,
                 start: datetime = datetime(2016, 1, 1, tzinfo=timezone.utc)) -> list[dict]:
    """Days of walks: an iPhone's samples (30 s - 5 min, 10-500 steps), a Watch recording most of the
    same walks a little differently and, with sources=3, a pedometer app on some; in time order."""
    rng = random.Random(seed)
    names = [("com.apple.health.A1B2", "iPhone"), ("com.apple.health.C3D4", "Apple Watch"), ("com.example.pedometer", "iPhone")]
    samples = []
    for day in range(days):
        moment = start + timedelta(days=day, hours=7)
        for _ in range(rng.randint(per_day // 2, per_day * 3 // 2)):
            moment += timedelta(seconds=rng.randint(30, 300))
            duration, count = rng.randint(30, 300), rng.randint(10, 500)
            for k in range(sources):
                if k and rng.random() < 0.3:
                    continue
                shift = timedelta(seconds=rng.randint(-20, 20) if k else 0)
                begin = moment + shift
                samples.append({"id": f"{seed}-{day}-{len(samples)}", "startDate": begin.strftime("%Y-%m-%dT%H:%M:%S.000Z"),
                                "endDate": (begin + timedelta(seconds=duration)).strftime("%Y-%m-%dT%H:%M:%S.000Z"),
                                "count": count + (rng.randint(-5, 5) if k else 0) if count > 5 else count,
                                "sourceBundleId": names[k][0], "sourceDeviceName": names[k][1]})
            moment += timedelta(seconds=duration)
    return samples


def bodies_of(samples: list[dict]) -> list[bytes]:
    return [json.dumps({"samples": samples[i : i + BATCH]}, ensure_ascii=False).encode() for i in range(0, len(samples), BATCH)]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    started: list["Server"] = []  # every server of the run, stopped at its end whatever happened

    def __init__(self, *arguments: str) -> None:
        self.arguments = arguments
        Server.started.append(self)
        self.start()

    def start(self) -> None:
        self.port = free_port()
        self.process = subprocess.Popen([sys.executable, str(HERE / "main.py"), "--port", str(self.port), "--single-user",
                                         *self.arguments], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise SystemExit(f"the server exited: {self.process.stderr.read()}")
            try:
                connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
                connection.request("GET", "/health")
                if connection.getresponse().status == 200:
                    return
            except OSError:
                time.sleep(0.05)
        raise SystemExit("the server did not start")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(timeout=60)
        self.process.stderr.close()


def in_lanes(lane, count: int) -> float:
    """Runs lane(0) .. lane(count - 1) on threads at once; the seconds until all are done."""
    threads = [threading.Thread(target=lane, args=(k,)) for k in range(count)]
    began = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.perf_counter() - began


def post_all(port: int, bodies: list[bytes], in_flight: int) -> float:
    """Posts the bodies, `in_flight` at a time (one keep-alive connection each); samples/s."""
    failures: list[str] = []

    def lane(k: int) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
        for body in bodies[k::in_flight]:
            connection.request("POST", "/steps", body=body, headers={"Content-Type": "application/json"})
            response = connection.getresponse()
            answer = response.read()
            if response.status != 200:
                failures.append(f"{response.status}: {answer[:200]!r}")
                return
        connection.close()

    elapsed = in_lanes(lane, in_flight)
    if failures:
        raise SystemExit(f"the server answered {failures[0]}")
    return len(bodies) * BATCH / elapsed


def rows_of(samples: list[dict], request: int) -> list[tuple]:
    return [("local", sample["id"], request * 100_000 + k, sample["startDate"], sample["endDate"],
             instant_ns(sample["startDate"]), instant_ns(sample["endDate"]), sample["count"], sample["sourceBundleId"],
             sample["sourceDeviceName"], RECEIVED) for k, sample in enumerate(samples)]


UPSERT = (f"INSERT INTO samples ({SAMPLE_COLUMNS}) VALUES ({', '.join('?' * 11)}) ON CONFLICT (user_name, id) DO UPDATE SET "
          "seq = excluded.seq, start_date = excluded.start_date, end_date = excluded.end_date, start_ns = excluded.start_ns, "
          "end_ns = excluded.end_ns, count = excluded.count, source_bundle_id = excluded.source_bundle_id, "
          "source_device_name = excluded.source_device_name, received_at = excluded.received_at")


def bare_sqlite(directory: Path, batches: list[list[tuple]]) -> float:
    open_storage(directory, None).close()  # the server's schema
    connection = sqlite3.connect(directory / "stepsync.sqlite", isolation_level=None)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA synchronous=FULL")
    began = time.perf_counter()
    for rows in batches:
        connection.execute("BEGIN IMMEDIATE")
        connection.executemany(UPSERT, rows)
        connection.execute("COMMIT")
    elapsed = time.perf_counter() - began
    connection.close()
    return len(batches) * BATCH / elapsed


def bare_postgres(database: str, batches: list[list[tuple]], in_flight: int) -> float:
    import psycopg

    open_storage(Path("."), database, pool=False).close()  # the server's schema

    def lane(k: int) -> None:
        with psycopg.connect(database) as connection:
            for rows in batches[k::in_flight]:
                with connection.transaction(), connection.cursor().copy(f"COPY samples ({SAMPLE_COLUMNS}) FROM STDIN") as copy:
                    for row in rows:
                        copy.write_row(row)

    return len(batches) * BATCH / in_lanes(lane, in_flight)


def post_section(arguments: argparse.Namespace, work: Path, cluster: PostgresCluster) -> None:
    samples = mock_samples(days=arguments.requests * BATCH // 250 + 10)[: arguments.requests * BATCH]
    bodies = bodies_of(samples)
    batches = [rows_of(samples[i : i + BATCH], i // BATCH + 1) for i in range(0, len(samples), BATCH)]
    log(f"post: {len(samples):,} new samples in {len(bodies)} requests of {BATCH:,}, {arguments.rounds} rounds")
    figures: dict[str, list[float]] = {}

    def note(name: str, value: float) -> None:
        figures.setdefault(name, []).append(value)
        log(f"  {name}: {value:,.0f} samples/s ({load()})")

    for round_ in range(arguments.rounds):
        note("bare sqlite3", bare_sqlite(work / f"bare-{round_}", batches))
        for in_flight in (1, 4):
            server = Server("--data", str(work / f"sqlite-{round_}-{in_flight}"))
            note(f"server, SQLite, {in_flight} in flight", post_all(server.port, bodies, in_flight))
            server.stop()
        note("bare psycopg COPY, 4 connections", bare_postgres(cluster.new_database(), batches, 4))
        server = Server("--database", cluster.new_database())
        note("server, PostgreSQL, 4 in flight", post_all(server.port, bodies, 4))
        server.stop()
        server = Server("--database", cluster.new_database(), "--workers", "2")
        note("server, PostgreSQL, 4 in flight, --workers 2", post_all(server.port, bodies, 4))
        server.stop()
    median = {name: statistics.median(values) for name, values in figures.items()}
    for name, values in figures.items():
        print(f"post: {name}: median {median[name]:,.0f} samples/s (rounds: {', '.join(f'{v:,.0f}' for v in values)})")
    for in_flight in (1, 4):
        name = f"server, SQLite, {in_flight} in flight"
        print(f"post: {name} at {median[name] / median['bare sqlite3']:.0%} of bare sqlite3 (target >= 60%)")
    for name in ("server, PostgreSQL, 4 in flight", "server, PostgreSQL, 4 in flight, --workers 2"):
        print(f"post: {name} at {median[name] / median['bare psycopg COPY, 4 connections']:.0%} of bare psycopg COPY "
              f"(target >= 60%, and >= 150,000 samples/s)")
    print(f"post: {load()} at the end")


def daily_section(arguments: argparse.Namespace, work: Path, cluster: PostgresCluster) -> None:
    days = 3650  # ten years from 2016, about 2.4 samples a walk (the Watch on 70% of walks, the app on 70%)
    samples = mock_samples(days=days, per_day=max(10, round(arguments.daily_samples / days / 2.4)), sources=3)
    bodies = bodies_of(samples)
    first_year = 2016
    years = range(first_year + 1, min(first_year + days // 366, first_year + 10))
    log(f"daily: {len(samples):,} samples from 3 sources over {days} days; a year of GET /steps/daily, years {list(years)}")

    def year_query(port: int, year: int) -> float:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
        began = time.perf_counter()
        connection.request("GET", f"/steps/daily?tz=Europe/Paris&from={year}-01-01&to={year}-12-31&bySource=true")
        response = connection.getresponse()
        document = json.loads(response.read())
        elapsed = time.perf_counter() - began
        assert response.status == 200 and len(document["days"]) >= 365, document
        return elapsed * 1000

    for name, arguments_ in (("SQLite", ("--data", str(work / "daily-sqlite"))), ("PostgreSQL", ("--database", cluster.new_database()))):
        server = Server(*arguments_)
        rate = post_all(server.port, bodies, 4)
        after_load = [year_query(server.port, year) for year in years]
        again = [year_query(server.port, year) for year in years]
        server.stop()
        started = time.perf_counter()
        server.start()
        start_s = time.perf_counter() - started
        after_restart = [year_query(server.port, year) for year in years]
        server.stop()
        print(f"daily: {name}: loaded {len(samples):,} samples at {rate:,.0f}/s; a year: first queries after the load "
              f"{statistics.median(after_load):.0f} ms (max {max(after_load):.0f}), again {statistics.median(again):.0f} ms, "
              f"first after a restart (start {start_s:.1f} s) {statistics.median(after_restart):.0f} ms "
              f"(max {max(after_restart):.0f}); target <= 200 ms ({load()})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sections", nargs="*", default=["post", "daily"], choices=["post", "daily"])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--daily-samples", type=int, default=3_000_000)
    arguments = parser.parse_args()
    cluster = PostgresCluster(fsync=True).start()
    try:
        with tempfile.TemporaryDirectory(prefix="stepsync-bench-") as directory:
            if "post" in arguments.sections:
                post_section(arguments, Path(directory), cluster)
            if "daily" in arguments.sections:
                daily_section(arguments, Path(directory), cluster)
    finally:
        for server in Server.started:
            server.stop()
        cluster.destroy()
    return 0


if __name__ == "__main__":
    sys.exit(main())

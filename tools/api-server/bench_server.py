#!/usr/bin/env python3
"""The server's benchmarks (tools/bench server, tools/bench daily), each beside a peer in the same run.

  post   POST /steps of 1,000 new samples a request (mock-like days of an iPhone and a Watch, in time
         order, as `stepsync upload` sends them, each with a random UUID as HealthKit gives them: the
         index of ids takes them at random places, as it does a real history's), each request
         committed before its 200, beside two bare peers on the same schema and settings (SQLite:
         WAL, synchronous=FULL; PostgreSQL: a cluster on a temporary directory, fsync on):
         - the same transactions: every statement and lock the server's store runs for each batch,
           with the same values, recorded in process before the clock starts (the store's save on a
           scratch database) and made again by a bare loop through the dialect's transaction
           (sqlite3: one connection, BEGIN IMMEDIATE … COMMIT; psycopg: 4 connections, the same
           pipelining and COPYs). The server's own overhead (HTTP, the parse, the merge of the daily
           totals, Python around the statements) is what the ratio measures: the issue's peer, and
           the one the >= 60% target is read against.
         - inserts only: the samples alone (sqlite3: INSERT … ON CONFLICT DO UPDATE; psycopg: COPY),
           no daily totals, no look-up of the ids: what a store without those would cost.
         The server: SQLite with 1 request and with 4 in flight, PostgreSQL with 4 in flight (alone and
         with --workers 2). Rounds alternate the server and its peers; each starts on an empty database.
  daily  GET /steps/daily for a year (Europe/Paris, by source) over a user holding N samples from three
         sources (loaded by POST), on both backends: the first answer after the load, again, and the
         first after a restart, each the median of 3 queries of a different year.

Beside each figure: the CPU a request of the measured process (the server and its workers; for a
peer, the bench's own process), which other load on the machine changes less than samples/s, and of
the whole machine (for PostgreSQL, mostly the database's processes): the machine's CPU a request
over its cores is the most samples/s that work can reach here, however well it overlaps.

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
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Optional

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "tests"))

from postgres_cluster import PostgresCluster  # noqa: E402
from stepserver.contract import instant_ns, parse_samples  # noqa: E402
from stepserver.storage import open_storage  # noqa: E402
from stepserver.storage.postgres import in_transaction  # noqa: E402
from stepserver.storage.sqlite import SqliteDatabase, SqliteTransaction  # noqa: E402
from stepserver.storage.store import SAMPLE_COLUMNS, Store  # noqa: E402

BATCH = 1000
RECEIVED = "2026-11-27T12:00:00Z"


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def load() -> str:
    return "load " + open("/proc/loadavg").read().split()[0] if os.path.exists("/proc/loadavg") else "load ?"


def mock_samples(days: int, per_day: int = 150, sources: int = 2, seed: int = 42,
                 start: datetime = datetime(2016, 1, 1, tzinfo=timezone.utc)) -> list[dict]:
    """Days of walks: an iPhone's samples (30 s - 5 min, 10-500 steps), a Watch recording most of the
    same walks a little differently and, with sources=3, a pedometer app on some; in time order, each
    with a random (seeded) UUID."""
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
                samples.append({"id": str(uuid.UUID(int=rng.getrandbits(128), version=4)).upper(), "startDate": begin.strftime("%Y-%m-%dT%H:%M:%S.000Z"),
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


def process_cpu(pid: int) -> float:
    """CPU seconds (user and system) a process and its children (--workers) used so far (Linux /proc)."""
    children = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
    total = 0
    for process in [pid, *map(int, children)]:
        try:
            fields = Path(f"/proc/{process}/stat").read_text().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def machine_cpu() -> float:
    """CPU seconds the whole machine spent busy so far, every process on every core (Linux /proc/stat:
    user, nice, system, irq and softirq; not idle, iowait, or the time a hypervisor gave others)."""
    user, nice, system, _idle, _iowait, irq, softirq = map(int, Path("/proc/stat").read_text().split()[1:8])
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def with_cpu(run, requests: int, pid: Optional[int] = None) -> tuple[float, float, float]:
    """run()'s samples/s, the CPU milliseconds a request of the process `pid` (default: this one), and
    the machine's (the measured process, its database's processes, the bench's clients, the rest)."""
    clock = (lambda: process_cpu(pid)) if pid else time.process_time
    before, machine_before = clock(), machine_cpu()
    rate = run()
    return rate, (clock() - before) / requests * 1000, (machine_cpu() - machine_before) / requests * 1000


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
             instant_ns(sample["startDate"]), instant_ns(sample["endDate"]), sample["count"] * 1000, sample["sourceBundleId"],
             sample["sourceDeviceName"], RECEIVED) for k, sample in enumerate(samples)]


UPSERT = (f"INSERT INTO samples ({SAMPLE_COLUMNS}) VALUES ({', '.join('?' * 11)}) ON CONFLICT (user_name, id) DO UPDATE SET "
          "seq = excluded.seq, start_date = excluded.start_date, end_date = excluded.end_date, start_ns = excluded.start_ns, "
          "end_ns = excluded.end_ns, count_thousandths = excluded.count_thousandths, source_bundle_id = excluded.source_bundle_id, "
          "source_device_name = excluded.source_device_name, received_at = excluded.received_at")


SAME_SQLITE = "bare sqlite3, the same transactions"
INSERTS_SQLITE = "bare sqlite3, inserts only"
SAME_POSTGRES = "bare psycopg, the same transactions, 4 connections"
INSERTS_POSTGRES = "bare psycopg COPY, inserts only, 4 connections"


def sqlite_connection(directory: Path) -> tuple[SqliteDatabase, sqlite3.Connection]:
    """A connection with the server's settings (WAL, synchronous=FULL, its cache and checkpoints) on a
    new file with its schema."""
    database = SqliteDatabase(directory)
    database.open(lambda tx: None, check=False)  # a new file: no daily totals to rebuild
    return database, database._connect()


def bare_sqlite(directory: Path, batches: list[list[tuple]]) -> float:
    """Inserts only: each batch's rows by one INSERT … ON CONFLICT DO UPDATE, one transaction a batch."""
    database, connection = sqlite_connection(directory)
    began = time.perf_counter()
    for rows in batches:
        connection.execute("BEGIN IMMEDIATE")
        connection.executemany(UPSERT, rows)
        connection.execute("COMMIT")
    elapsed = time.perf_counter() - began
    database.close()
    return len(batches) * BATCH / elapsed


def with_schema(database: str) -> str:
    """The database, with the server's schema made in it (before a peer's clock starts)."""
    open_storage(Path("."), database, pool=False).close()
    return database


def bare_postgres(database: str, batches: list[list[tuple]], in_flight: int) -> float:
    """Inserts only: each batch's rows by one COPY, one transaction a batch, `in_flight` connections,
    on a database `with_schema`."""
    import psycopg

    def lane(k: int) -> None:
        with psycopg.connect(database) as connection:
            for rows in batches[k::in_flight]:
                with connection.transaction(), connection.cursor().copy(f"COPY samples ({SAMPLE_COLUMNS}) FROM STDIN") as copy:
                    for row in rows:
                        copy.write_row(row)

    return len(batches) * BATCH / in_lanes(lane, in_flight)


class Recorder:
    """A store.Transaction that notes each call (method name and arguments) before making it."""

    def __init__(self, tx, calls: list) -> None:
        self.tx = tx
        self.calls = calls

    def __getattr__(self, name: str):
        method = getattr(self.tx, name)

        def call(*arguments, **keywords):
            self.calls.append((name, arguments, keywords))
            return method(*arguments, **keywords)

        return call


def recorded_transactions(bodies: list[bytes], directory: Path, database: Optional[str]) -> list[list[tuple]]:
    """The calls of the store's transaction for each body, in order (parse_samples, then Store.save, as
    the server runs them), on a scratch database of the dialect: each a statement or a lock with its
    values, ready to be made again on another database."""
    store = open_storage(directory, database, pool=False)
    inner = store.database
    transactions: list[list[tuple]] = []

    def write(work):
        transactions.append([])
        return type(inner).write(inner, lambda tx: work(Recorder(tx, transactions[-1])))

    inner.write = write
    for body in bodies:
        Store.save(store, "local", parse_samples(body, time.time_ns()), RECEIVED)
    store.close()
    return transactions


def replayed(tx, calls: list[tuple]) -> None:
    """The recorded calls made on `tx`, every answer read."""
    for name, arguments, keywords in calls:
        answer = getattr(tx, name)(*arguments, **keywords)
        if name == "each":
            list(answer)


def replay_sqlite(directory: Path, transactions: list[list[tuple]]) -> float:
    """The same transactions: the server's statements for each batch, made again with their values
    through the dialect's transaction (SqliteTransaction) on one connection, BEGIN IMMEDIATE … COMMIT."""
    database, connection = sqlite_connection(directory)
    began = time.perf_counter()
    for calls in transactions:
        connection.execute("BEGIN IMMEDIATE")
        replayed(SqliteTransaction(connection), calls)
        connection.execute("COMMIT")
    elapsed = time.perf_counter() - began
    database.close()
    return len(transactions) * BATCH / elapsed


def replay_postgres(database: str, transactions: list[list[tuple]], in_flight: int) -> float:
    """The same transactions on PostgreSQL: `in_flight` connections, each making its share of them again
    through the dialect's transaction (postgres.in_transaction: the same pipelining, the same COPYs), on
    a database `with_schema`."""
    import psycopg

    def lane(k: int) -> None:
        with psycopg.connect(database) as connection:
            for calls in transactions[k::in_flight]:
                in_transaction(connection, lambda tx: replayed(tx, calls))

    return len(transactions) * BATCH / in_lanes(lane, in_flight)


def post_section(arguments: argparse.Namespace, work: Path, cluster: PostgresCluster) -> None:
    samples = mock_samples(days=arguments.requests * BATCH // 250 + 10)[: arguments.requests * BATCH]
    bodies = bodies_of(samples)
    batches = [rows_of(samples[i : i + BATCH], i // BATCH + 1) for i in range(0, len(samples), BATCH)]
    log(f"post: {len(samples):,} new samples in {len(bodies)} requests of {BATCH:,}, {arguments.rounds} rounds; "
        "recording the store's transactions")
    sqlite_transactions = recorded_transactions(bodies, work / "recorded", None)
    postgres_transactions = recorded_transactions(bodies, Path("."), cluster.new_database())
    statements = sum(len(statements) for statements in sqlite_transactions) / len(bodies)
    log(f"  a request's transaction: {statements:.1f} statements on SQLite, "
        f"{sum(len(statements) for statements in postgres_transactions) / len(bodies):.1f} on PostgreSQL")
    figures: dict[str, list[float]] = {}

    cpu: dict[str, list[float]] = {}
    machine: dict[str, list[float]] = {}

    def note(name: str, measured: tuple[float, float, float]) -> None:
        figures.setdefault(name, []).append(measured[0])
        cpu.setdefault(name, []).append(measured[1])
        machine.setdefault(name, []).append(measured[2])
        log(f"  {name}: {measured[0]:,.0f} samples/s, {measured[1]:.1f} ms of CPU a request, "
            f"the machine's {measured[2]:.1f} ms ({load()})")

    def served(server: Server, in_flight: int) -> tuple[float, float, float]:
        measured = with_cpu(lambda: post_all(server.port, bodies, in_flight), len(bodies), server.process.pid)
        server.stop()
        return measured

    requests = len(bodies)
    for round_ in range(arguments.rounds):
        note(SAME_SQLITE, with_cpu(lambda: replay_sqlite(work / f"replay-{round_}", sqlite_transactions), requests))
        note(INSERTS_SQLITE, with_cpu(lambda: bare_sqlite(work / f"bare-{round_}", batches), requests))
        for in_flight in (1, 4):
            note(f"server, SQLite, {in_flight} in flight", served(Server("--data", str(work / f"sqlite-{round_}-{in_flight}")), in_flight))
        database = with_schema(cluster.new_database())
        note(SAME_POSTGRES, with_cpu(lambda: replay_postgres(database, postgres_transactions, 4), requests))
        database = with_schema(cluster.new_database())
        note(INSERTS_POSTGRES, with_cpu(lambda: bare_postgres(database, batches, 4), requests))
        note("server, PostgreSQL, 4 in flight", served(Server("--database", cluster.new_database()), 4))
        note("server, PostgreSQL, 4 in flight, --workers 2", served(Server("--database", cluster.new_database(), "--workers", "2"), 4))
    median = {name: statistics.median(values) for name, values in figures.items()}
    for name, values in figures.items():
        print(f"post: {name}: median {median[name]:,.0f} samples/s (rounds: {', '.join(f'{v:,.0f}' for v in values)}); "
              f"CPU a request {statistics.median(cpu[name]):.1f} ms")
    for in_flight in (1, 4):
        name = f"server, SQLite, {in_flight} in flight"
        print(f"post: {name} at {median[name] / median[SAME_SQLITE]:.0%} of {SAME_SQLITE} (target >= 60%); "
              f"at {median[name] / median[INSERTS_SQLITE]:.0%} of {INSERTS_SQLITE}")
    for name in ("server, PostgreSQL, 4 in flight", "server, PostgreSQL, 4 in flight, --workers 2"):
        print(f"post: {name} at {median[name] / median[SAME_POSTGRES]:.0%} of {SAME_POSTGRES} (target >= 60%, and "
              f">= 150,000 samples/s); at {median[name] / median[INSERTS_POSTGRES]:.0%} of {INSERTS_POSTGRES}")
    cores = os.cpu_count() or 1
    for name in (INSERTS_POSTGRES, SAME_POSTGRES, "server, PostgreSQL, 4 in flight", "server, PostgreSQL, 4 in flight, --workers 2"):
        spent, own = statistics.median(machine[name]), statistics.median(cpu[name])
        busy = statistics.median(rate * ms / 1000 / cores / 1000 for rate, ms in zip(figures[name], machine[name]))
        print(f"post: {name}: the machine's CPU a request {spent:.1f} ms (the measured process {own:.1f}, the database "
              f"and the rest {spent - own:.1f}); all {cores} cores busy with it would do {cores * BATCH / spent * 1000:,.0f} "
              f"samples/s; the run kept them {busy:.0%} busy")
    for in_flight in (1, 4):  # SQLite: all the work in the measured process, for the server and the peer alike
        name = f"server, SQLite, {in_flight} in flight"
        print(f"post: CPU a request, {SAME_SQLITE} / {name}: {statistics.median(cpu[SAME_SQLITE]) / statistics.median(cpu[name]):.0%} "
              "(the ratio without the machine's other load)")
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

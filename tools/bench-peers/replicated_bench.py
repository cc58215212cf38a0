#!/usr/bin/env python3
"""The replicated deployment's cost and its failover, with the real `stepsync upload` (tools/bench
replicated).

Throughput: USERS users upload at once, each its own store (a fresh copy of an ingested mock, a
different seed each), to
  - single:     one API server on one PostgreSQL (fsync on, synchronous_commit on: no standby), and
  - replicated: HAProxy before two API servers on a pg_auto_failover cluster (fsync on, every commit
                flushed by the synchronous standby before its 200),
alternating round by round, each round on empty databases; samples/s is every user's samples over
the time from the first upload's start to the last one's end.

Failover: the same uploads through the replicated set-up, its primary's host killed (keeper and
PostgreSQL SIGKILLed) once they are under way; what the clients saw, from HAProxy's log: the first
5xx to the first 200 after it, and the longest time without an acknowledged write. Once with the
tests' fast monitor settings, once with pg_auto_failover's defaults.

Usage: replicated_bench.py --stepsync BIN --server-python PY --work DIR [--days N] [--rounds R]
Figures on stdout, progress on stderr, the load average beside each figure.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools" / "api-server" / "tests"))

from balancer import unavailability  # noqa: E402
from postgres_cluster import PostgresCluster  # noqa: E402
from replicated_setup import ApiServer, ReplicatedSetup  # noqa: E402

USERS = 4
MOCK_END = "2026-11-21"


def log(text):
    print(text, file=sys.stderr, flush=True)


def load():
    return "load " + open("/proc/loadavg").read().split()[0]


def run(*command):
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=3600)


def upload_all(stepsync, stores, url, tokens, work):
    """Every user's upload at once; (seconds from the first start to the last end, samples sent)."""
    began = time.monotonic()
    processes = []
    for user, store in stores.items():
        environment = {**os.environ, **({"STEPSYNC_TOKEN": tokens[user]} if tokens else {})}
        with open(work / f"upload-{user}.err", "wb") as err:
            processes.append(subprocess.Popen([stepsync, "upload", "--store", str(store), "--api-url", url, "--json"],
                                              env=environment, stdout=subprocess.PIPE, stderr=err, text=True))
    sent = 0
    for process in processes:
        out, _ = process.communicate(timeout=3600)
        if process.returncode != 0:
            raise SystemExit(f"stepsync upload failed ({process.returncode}); see {work}/upload-*.err")
        sent += json.loads(out)["samplesSynced"]
    return time.monotonic() - began, sent


def fresh_stores(templates, work):
    stores = {}
    for user, template in templates.items():
        stores[user] = work / f"store-{user}"
        shutil.rmtree(stores[user], ignore_errors=True)
        shutil.copytree(template, stores[user])
    return stores


def single(args, templates, work, python):
    cluster = PostgresCluster(fsync=True).start()
    server = None
    try:
        database = cluster.new_database()
        server = ApiServer("single", database, work, python)
        tokens = {user: create_token(python, database, user) for user in templates}
        server.start()
        return upload_all(args.stepsync, fresh_stores(templates, work), server.url, tokens, work)
    finally:
        if server is not None:
            server.kill()
        cluster.destroy()


def create_token(python, database, user):
    created = subprocess.run([python, str(ROOT / "tools" / "api-server" / "main.py"), "tokens", "create", "--user", user,
                              "--database", database], capture_output=True, text=True, check=True, timeout=60)
    return created.stdout.strip()


def replicated(args, templates, work, python, fast=True, kill_after_batches=None):
    """The uploads through the replicated set-up; with kill_after_batches, the primary's host is
    killed once that many batches were acknowledged. Returns (seconds, samples, unavailability)."""
    directory = work / "replicated"
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir()
    setup = ReplicatedSetup(directory, python=python, fsync=True, fast=fast).start()
    try:
        tokens = {user: setup.create_token(user) for user in templates}
        stores = fresh_stores(templates, work)
        if kill_after_batches is None:
            seconds, sent = upload_all(args.stepsync, stores, setup.url, tokens, work)
            return seconds, sent, None
        result = {}
        uploads = threading.Thread(target=lambda: result.update(done=upload_all(args.stepsync, stores, setup.url, tokens, work)))
        uploads.start()
        acknowledged = lambda: sum(a.status == 200 and a.method == "POST" for a in setup.balancer.answers())  # noqa: E731
        while acknowledged() < kill_after_batches and uploads.is_alive():
            time.sleep(0.05)
        if not uploads.is_alive():
            raise SystemExit("the uploads finished before the kill: raise --days")
        moment = time.time()
        setup.cluster.kill(setup.cluster.primary())
        uploads.join()
        answers = setup.balancer.answers()
        until = max(a.at for a in answers if a.method == "POST") + 0.001
        return (*result["done"], unavailability(answers, moment, until))
    finally:
        setup.close()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--stepsync", required=True)
    parser.add_argument("--server-python", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--days", type=int, default=730)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    templates = {}
    for number in range(1, USERS + 1):
        user = f"user{number}"
        templates[user] = work / f"template-{user}"
        run(args.stepsync, "ingest", "--store", str(templates[user]), "--source", f"mock:seed={number},days={args.days},end={MOCK_END}")
    log(f"{USERS} stores of {args.days} mock days ingested")

    rates = {"single": [], "replicated": []}
    samples = 0
    for number in range(args.rounds):
        order = ["single", "replicated"] if number % 2 == 0 else ["replicated", "single"]
        for kind in order:
            log(f"round {number + 1}: {kind}")
            seconds, samples = single(args, templates, work, args.server_python) if kind == "single" else \
                replicated(args, templates, work, args.server_python)[:2]
            rates[kind].append(samples / seconds)
            print(f"  round {number + 1}: {kind:10} {samples / seconds:9,.0f} samples/s ({samples:,} samples in {seconds:.1f} s, "
                  f"{load()})", flush=True)
    ratio = statistics.median(rates["replicated"]) / statistics.median(rates["single"])
    print(f"replicated (HAProxy, two API servers, a synchronous standby) beside single (one API server, one PostgreSQL): "
          f"{statistics.median(rates['replicated']):,.0f} vs {statistics.median(rates['single']):,.0f} samples/s "
          f"(medians of {args.rounds}), {ratio:.2f}x; {USERS} uploads at once, {samples:,} samples", flush=True)

    for fast, label in ((True, "the tests' fast monitor settings"), (False, "pg_auto_failover's default timeouts")):
        log(f"failover with {label}")
        seconds, sent, window = replicated(args, templates, work, args.server_python, fast=fast, kill_after_batches=40)
        print(f"failover mid-upload ({label}): {window.describe()}; the uploads finished by themselves in {seconds:.0f} s "
              f"({sent:,} samples, {load()})", flush=True)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

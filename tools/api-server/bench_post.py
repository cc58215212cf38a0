#!/usr/bin/env python3
"""POST /steps throughput: new samples in 1,000-sample batches, fsync per request (the server's own
durability), from one client and from 8 concurrent clients of different users, on each backend and on
the server as it was before the package split (the peer), all in one run. Prints samples/s.

Usage: .venv/bin/python bench_post.py [--requests 200] [--batch 1000] [--clients 8] [--in-flight 1,2,4]
       [--peer-python PY] [--only embedded,postgres,peer] [--no-daily-buckets] [--daily N] [--beside MAIN_PY]
       [--embedded-workers 2] [--millisecond-dates]
Each server gets a fresh data directory (or database) on a free loopback port and is stopped after.
Bodies are encoded before the clock starts; each client is its own process with one keep-alive
connection per request it keeps in flight (http.client). "1 client, N in flight" is one user's
process with N requests outstanding at a time (the way `stepsync upload` may pipeline), every 200
meaning that request's samples are durable. Each line also says what share of the CPU time used
during it the clients took (client and server share the machine's cores).
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
MAIN = HERE / "main.py"
PEER_COMMIT = "9653f56"  # the last commit with the single-file server


MILLISECOND_DATES = [False]  # --millisecond-dates: every date as stepsync sends it (…:SS.fffZ)


def body(first: int, count: int, prefix: str) -> bytes:
    """count samples of a minute each from the first-th minute of 2024 on (after 12 x 28 days, 483,840
    samples, the dates come round again), one source."""
    samples = []
    start_fraction, end_fraction = (".000Z", ".999Z") if MILLISECOND_DATES[0] else ("Z", "Z")
    for n in range(first, first + count):
        minute = n % 1440
        samples.append({
            "id": f"{prefix}{uuid.UUID(int=n + 1)}".upper()[:64],
            "startDate": f"2024-{1 + n // 40320 % 12:02d}-{1 + n // 1440 % 28:02d}T{minute // 60:02d}:{minute % 60:02d}:00{start_fraction}",
            "endDate": f"2024-{1 + n // 40320 % 12:02d}-{1 + n // 1440 % 28:02d}T{minute // 60:02d}:{minute % 60:02d}:59{end_fraction}",
            "count": n % 150,
            "sourceBundleId": "com.apple.health.4F1C2A9B-1111-2222-3333-444455556666",
            "sourceDeviceName": "Anna\u2019s\u00a0iPhone",
        })
    return json.dumps({"samples": samples}, ensure_ascii=False).encode()


def client(port: int, token: str, bodies: list[bytes], start_at: float, result, in_flight: int = 1) -> None:
    """One client: `in_flight` keep-alive connections, each sending every in_flight-th body and
    waiting for its answer (in_flight 1: one request after another)."""
    import threading

    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    saved = [0] * in_flight
    failures = []

    def send(lane: int) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        for payload in bodies[lane::in_flight]:
            connection.request("POST", "/steps", body=payload, headers=headers)
            response = connection.getresponse()
            answer = response.read()
            if response.status != 200:
                failures.append(f"HTTP {response.status}: {answer[:200]!r}")
                return
            saved[lane] += json.loads(answer)["saved"]
        connection.close()

    lanes = [threading.Thread(target=send, args=(lane,)) for lane in range(in_flight)]
    cpu = os.times()
    cpu_before = cpu.user + cpu.system
    while time.time() < start_at:
        time.sleep(0.001)
    began = time.perf_counter()
    for lane in lanes:
        lane.start()
    for lane in lanes:
        lane.join()
    if failures:
        raise SystemExit(failures[0])
    cpu = os.times()
    result.put((sum(saved), time.perf_counter() - began, cpu.user + cpu.system - cpu_before))


def process_tree_cpu(pid: int) -> float:
    """CPU seconds (user + system) of a process and its children so far (Linux /proc; 0 elsewhere)."""
    total = 0.0
    ticks = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    pids = [pid]
    try:
        pids += [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return 0.0
    for each in pids:
        try:
            fields = Path(f"/proc/{each}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / ticks
    return total


LAST_CLIENT_SHARE = [0.0]
LAST_SERVER_CPU_PER_REQUEST = [0.0]


def client_share() -> str:
    return (f"server {LAST_SERVER_CPU_PER_REQUEST[0] * 1000:.1f} ms of CPU a request, "
            f"clients {LAST_CLIENT_SHARE[0]:.0%} of the CPU time used")


def run_clients(port: int, tokens: list[str], bodies_per_client: list[list[bytes]], in_flight: int = 1,
                server_pid: int = 0) -> tuple[int, float]:
    queue = multiprocessing.Queue()
    start_at = time.time() + 0.5
    processes = [multiprocessing.Process(target=client, args=(port, token, bodies, start_at, queue, in_flight))
                 for token, bodies in zip(tokens, bodies_per_client)]
    for process in processes:
        process.start()
    server_before = process_tree_cpu(server_pid) if server_pid else 0.0
    results = [queue.get(timeout=600) for _ in processes]
    server_cpu = process_tree_cpu(server_pid) - server_before if server_pid else 0.0
    for process in processes:
        process.join()
        if process.exitcode != 0:
            raise SystemExit("a client failed")
    clients_cpu = sum(cpu for _, _, cpu in results)
    LAST_CLIENT_SHARE[0] = clients_cpu / (clients_cpu + server_cpu) if server_cpu > 0 else 0.0
    LAST_SERVER_CPU_PER_REQUEST[0] = server_cpu / max(1, sum(len(bodies) for bodies in bodies_per_client))
    return sum(saved for saved, _, _ in results), max(elapsed for _, elapsed, _ in results)


class Server:
    def __init__(self, label: str, command: list[str], port: int, env=None, start_s: float = 60) -> None:
        self.label = label
        self.port = port
        self.log = tempfile.NamedTemporaryFile(prefix="bench-server-", suffix=".log", delete=False)
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=self.log, env=env)
        deadline = time.monotonic() + start_s
        while True:
            try:
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                connection.request("GET", "/health")
                if connection.getresponse().status == 200:
                    return
            except OSError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"{label}: server did not start: {Path(self.log.name).read_text()[-2000:]}")
            time.sleep(0.05)

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=60)
        os.unlink(self.log.name)


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def create_token(storage: list[str], user: str, main_py: Path = MAIN) -> str:
    result = subprocess.run([sys.executable, str(main_py), "tokens", "create", "--user", user, *storage],
                            capture_output=True, text=True, check=True)
    return result.stdout.strip()


def daily_bodies(total: int) -> list[bytes]:
    """total samples from three overlapping sources, spread over ten years ending 2026-06-30."""
    sources = [("com.apple.health.W", "Apple Watch"), ("com.apple.health.P", "iPhone"), ("com.example.pedometer", "iPhone")]
    per_day = max(1, total // 3650)
    start = 1782777600 - 3650 * 86400  # 2016-07-03
    bodies, samples = [], []
    for n in range(total):
        day, k = divmod(n, per_day)
        begin = start + day * 86400 + (k * 86400 // per_day)
        bundle, device = sources[n % 3]
        samples.append({"id": f"D{n:012d}", "startDate": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(begin)),
                        "endDate": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(begin + 240)), "count": 50 + n % 300,
                        "sourceBundleId": bundle, "sourceDeviceName": device})
        if len(samples) == 1000:
            bodies.append(json.dumps({"samples": samples}).encode())
            samples = []
    if samples:
        bodies.append(json.dumps({"samples": samples}).encode())
    return bodies


def load_rate(backend: str, storage: list[str], flags: list[str], bodies: list[bytes]) -> float:
    """POST rate of the daily load into a fresh store (the peer of the load with buckets)."""
    token = create_token(storage, "daily")
    port = free_port()
    server = Server(backend, [sys.executable, str(MAIN), *storage, *flags, "--port", str(port)], port)
    try:
        saved, loading = run_clients(port, [token], [bodies], in_flight=2)
    finally:
        server.stop()
    return saved / loading


def bench_daily(total: int, wanted: list[str], server_flags: list[str]) -> int:
    """The load, then the year's query in the four cases. Unless the servers run --no-daily-buckets, each
    backend is first loaded the same way into a fresh store with --no-daily-buckets: the POST rate
    without buckets, measured in the same run, beside the rate with them."""
    bodies = daily_bodies(total)
    without = "--no-daily-buckets" in server_flags
    buckets = "without daily buckets" if without else "with daily buckets"
    with tempfile.TemporaryDirectory(prefix="bench-daily-") as directory:
        for backend in ("embedded", "postgres"):
            if backend not in wanted:
                continue
            cluster = None
            if backend == "embedded":
                storage = ["--data", str(Path(directory) / "embedded")]
                peer_storage = ["--data", str(Path(directory) / "embedded-peer")]
            else:
                sys.path.insert(0, str(HERE / "tests"))
                from postgres_cluster import PostgresCluster

                cluster = PostgresCluster(fsync=True).start()
                storage = ["--database", cluster.new_database()]
                peer_storage = ["--database", cluster.new_database()]
            peer_rate = None if without else load_rate(backend, peer_storage, [*server_flags, "--no-daily-buckets"], bodies)
            token = create_token(storage, "daily")
            command = [sys.executable, str(MAIN), *storage, *server_flags]
            port = free_port()
            server = Server(backend, command + ["--port", str(port)], port)
            headers = {"Authorization": f"Bearer {token}"}
            connection = None

            def get_year() -> float:
                began = time.perf_counter()
                connection.request("GET", "/steps/daily?tz=Europe/Paris&from=2025-07-01&to=2026-06-30", headers=headers)
                response = connection.getresponse()
                document = json.loads(response.read())
                elapsed = time.perf_counter() - began
                assert response.status == 200 and len(document["days"]) == 365, document
                return elapsed

            def post_one(n: int) -> None:
                sample = {"id": f"X{n}", "startDate": "2026-03-15T10:00:00Z", "endDate": "2026-03-15T10:05:00Z",
                          "count": 100 + n, "sourceBundleId": "com.apple.health.P", "sourceDeviceName": "iPhone"}
                connection.request("POST", "/steps", body=json.dumps({"samples": [sample]}),
                                   headers={**headers, "Content-Type": "application/json"})
                response = connection.getresponse()
                response.read()
                assert response.status == 200

            try:
                saved, loading = run_clients(port, [token], [bodies], in_flight=2)
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
                cold = get_year()
                warm = sorted(get_year() for _ in range(5))
                touched = []
                for n in range(3):
                    post_one(n)
                    touched.append(get_year())
                touched.sort()
                connection.close()
                stopping = time.perf_counter()
                server.stop()
                server = None
                stopped = time.perf_counter() - stopping
                port = free_port()
                starting = time.perf_counter()
                server = Server(backend, command + ["--port", str(port)], port, start_s=900)  # the index of 3M lines
                started = time.perf_counter() - starting
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
                restarted = get_year()
                post_one(10)
                restarted_post = get_year()
                rate = saved / loading
                peer = "" if peer_rate is None else (f", {peer_rate:,.0f} samples/s without buckets in the same run "
                                                     f"({rate / peer_rate - 1:+.0%})")
                print(f"GET /steps/daily, one year (Europe/Paris) of {saved:,} samples (3 sources, 10 years), {backend}, {buckets}: "
                      f"loaded by POST at {rate:,.0f} samples/s (1,000 a request, 2 in flight{peer}); "
                      f"first query right after the load {cold * 1000:,.0f} ms; again {warm[2] * 1000:,.0f} ms (median of 5, "
                      f"{warm[0] * 1000:,.0f}–{warm[-1] * 1000:,.0f}); after a POST touching one day {touched[1] * 1000:,.0f} ms "
                      f"(median of 3); after a restart (stop {stopped:,.1f} s, start {started:,.1f} s) {restarted * 1000:,.0f} ms, "
                      f"then after a POST {restarted_post * 1000:,.0f} ms (asked for: <= 200 ms)", flush=True)
            finally:
                if connection is not None:
                    connection.close()
                if server is not None:
                    server.stop()
                if cluster is not None:
                    cluster.destroy()
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200, help="requests per client (default 200)")
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=8, help="clients of different users at once (0: no such lanes)")
    parser.add_argument("--in-flight", default="1,2,4",
                        help="requests one client keeps in flight, one lane each (default 1,2,4)")
    parser.add_argument("--many-in-flight", default="1",
                        help="requests each of the --clients keeps in flight, one lane each (default 1)")
    parser.add_argument("--peer-python", default=None, help="a python with the peer's requirements (fastapi)")
    parser.add_argument("--database", default=None,
                        help="a PostgreSQL URL to bench against (default: a throw-away cluster, fsync on)")
    parser.add_argument("--only", default="embedded,postgres,peer")
    parser.add_argument("--beside", default=None, metavar="MAIN_PY",
                        help="also measure the embedded and PostgreSQL lanes of another checkout's main.py (e.g. "
                             "`git archive main tools/api-server` unpacked), labelled beside ours")
    parser.add_argument("--daily", type=int, default=0, metavar="N",
                        help="instead: load N samples (3 sources over 10 years) and time GET /steps/daily for a year")
    parser.add_argument("--embedded-workers", type=int, default=2, metavar="N",
                        help="also the embedded backend with --workers N, 8 clients (default 2; 1: not)")
    parser.add_argument("--no-daily-buckets", action="store_true",
                        help="start the servers with --no-daily-buckets (the POST cost of keeping them, by difference)")
    parser.add_argument("--millisecond-dates", action="store_true",
                        help="dates with milliseconds, as stepsync sends them (default: whole seconds)")
    arguments = parser.parse_args()
    MILLISECOND_DATES[0] = arguments.millisecond_dates
    wanted = arguments.only.split(",")
    flags = ["--no-daily-buckets"] if arguments.no_daily_buckets else []
    if arguments.daily:
        return bench_daily(arguments.daily, wanted, flags)
    users = [f"user{k}" for k in range(arguments.clients)]
    depths = [int(depth) for depth in arguments.in_flight.split(",")]
    many_depths = [int(depth) for depth in arguments.many_in_flight.split(",")]
    single = [[body(r * arguments.batch, arguments.batch, "A") for r in range(arguments.requests)]]
    many = [[body(r * arguments.batch, arguments.batch, f"U{k}") for r in range(arguments.requests // 2)]
            for k in range(arguments.clients)]

    def measure(label: str, server: "Server", tokens_single: list[str], tokens_many: list[list[str]]) -> None:
        port, pid = server.port, server.process.pid
        for lane, depth in enumerate(depths):
            # Fresh ids for every lane: each measures new samples. And a user of its own: the lanes send
            # the same dates, so a lane of a user who already has samples on them would be measured with
            # the daily buckets reading those days back after every request (on PostgreSQL a lane after
            # the first took 1.5-2x the server's and the database's CPU: that, not its depth, made
            # "2 in flight" slower than 1 when it came second).
            bodies = single if lane == 0 else [[payload.replace(b'"id": "A', b'"id": "P%d' % lane) for payload in single[0]]]
            saved, elapsed = run_clients(port, tokens_single[lane : lane + 1], bodies, in_flight=depth, server_pid=pid)
            assert saved == arguments.requests * arguments.batch, saved
            print(f"{label}: 1 client, {depth} request{'s' if depth > 1 else ''} in flight: {saved / elapsed:,.0f} samples/s "
                  f"({elapsed / arguments.requests * 1000:.1f} ms a request; {client_share()})", flush=True)
        if many:
            for lane, depth in enumerate(many_depths):
                bodies_many = many if lane == 0 else [[payload.replace(b'"id": "U', b'"id": "Q%d' % lane) for payload in bodies]
                                                      for bodies in many]
                saved, elapsed = run_clients(port, tokens_many[lane], bodies_many, in_flight=depth, server_pid=pid)
                assert saved == len(many) * len(many[0]) * arguments.batch, saved
                print(f"{label}: {len(many)} clients of different users, {depth} in flight each: {saved / elapsed:,.0f} "
                      f"samples/s aggregate ({client_share()})", flush=True)

    def lane_tokens(storage: list[str], main_py: Path) -> tuple[list[str], list[list[str]]]:
        """A user for each single-client lane, and users for each lane of the 8 clients (see measure)."""
        single_users = ["single"] + [f"single{lane}" for lane in range(1, len(depths))]
        many_users = [users] + [[f"{user}-{lane}" for user in users] for lane in range(1, len(many_depths))]
        return ([create_token(storage, user, main_py) for user in single_users],
                [[create_token(storage, user, main_py) for user in lane] for lane in many_users])

    servers = [(MAIN, "")]
    if arguments.beside:
        servers.append((Path(arguments.beside).resolve(), f" (beside: {arguments.beside})"))
    with tempfile.TemporaryDirectory(prefix="bench-post-") as directory:
        for main_py, beside in servers:
            if "embedded" not in wanted:
                break
            data = Path(directory) / ("embedded" + beside.replace(" ", "-"))
            storage = ["--data", str(data)]
            tokens_single, tokens_many = lane_tokens(storage, main_py)
            port = free_port()
            server = Server("embedded", [sys.executable, str(main_py), "--port", str(port), *storage, *flags], port)
            try:
                measure("embedded backend" + beside, server, tokens_single, tokens_many)
            finally:
                server.stop()
            if beside or arguments.embedded_workers < 2 or not many:
                continue
            # A fresh directory served by --workers processes (a worker indexes a user when first used).
            storage = ["--data", str(Path(directory) / "embedded-workers")]
            tokens = [create_token(storage, user, main_py) for user in users]
            port = free_port()
            server = Server("embedded", [sys.executable, str(main_py), "--port", str(port), *storage, *flags,
                                         "--workers", str(arguments.embedded_workers)], port)
            try:
                saved, elapsed = run_clients(port, tokens, many, server_pid=server.process.pid)
                print(f"embedded backend, --workers {arguments.embedded_workers}: {len(many)} clients of different users, "
                      f"1 in flight each: {saved / elapsed:,.0f} samples/s aggregate ({client_share()})", flush=True)
            finally:
                server.stop()
        cluster = None
        if "postgres" in wanted and not arguments.database:
            sys.path.insert(0, str(HERE / "tests"))
            from postgres_cluster import PostgresCluster

            cluster = PostgresCluster(fsync=True).start()
            arguments.database = cluster.new_database()
        try:
            for main_py, beside in servers:
                if "postgres" not in wanted:
                    break
                # Each server its own database (a fresh one beside ours when the cluster is ours).
                database = cluster.new_database() if cluster is not None and beside else arguments.database
                storage = ["--database", database]
                tokens_single, tokens_many = lane_tokens(storage, main_py)
                port = free_port()
                server = Server("postgres", [sys.executable, str(main_py), "--port", str(port), *storage, *flags], port)
                try:
                    measure("PostgreSQL backend" + beside, server, tokens_single, tokens_many)
                finally:
                    server.stop()
                port = free_port()
                server = Server("postgres", [sys.executable, str(main_py), "--port", str(port), "--workers", "2", *storage], port)
                try:
                    if many:
                        workers_many = [[payload.replace(b'"id": "U', b'"id": "W') for payload in bodies] for bodies in many]
                        saved, elapsed = run_clients(port, tokens_many[0], workers_many, server_pid=server.process.pid)
                        print(f"PostgreSQL backend{beside}, --workers 2: {len(many)} clients of different users, 1 in flight each: "
                              f"{saved / elapsed:,.0f} samples/s aggregate ({client_share()}; PostgreSQL's own processes not counted)", flush=True)
                    # One client keeping 4 requests in flight (stepsync upload's default): its connections go
                    # to both workers in turn.
                    token = create_token(storage, "single-workers", main_py)
                    bodies = [payload.replace(b'"id": "A', b'"id": "V') for payload in single[0]]
                    saved, elapsed = run_clients(port, [token], [bodies], in_flight=4, server_pid=server.process.pid)
                    print(f"PostgreSQL backend{beside}, --workers 2: 1 client, 4 requests in flight: {saved / elapsed:,.0f} "
                          f"samples/s ({client_share()}; PostgreSQL's own processes not counted)", flush=True)
                finally:
                    server.stop()
        finally:
            if cluster is not None:
                cluster.destroy()
        if "peer" in wanted and arguments.peer_python:
            peer = Path(directory) / "peer_main.py"
            peer.write_bytes(subprocess.run(["git", "-C", str(HERE), "show", f"{PEER_COMMIT}:tools/api-server/main.py"],
                                            capture_output=True, check=True).stdout)
            port = free_port()
            server = Server("peer", [arguments.peer_python, str(peer), "--port", str(port), "--data",
                                     str(Path(directory) / "peer" / "steps.jsonl")], port)
            try:
                saved, elapsed = run_clients(port, [""], single, server_pid=server.process.pid)
                print(f"the server before the split ({PEER_COMMIT}), embedded: 1 client, 1 request in flight: "
                      f"{saved / elapsed:,.0f} samples/s ({client_share()})", flush=True)
            finally:
                server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())

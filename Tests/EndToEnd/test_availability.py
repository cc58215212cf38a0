"""The server stays available under hostile clients (#36): while each attack runs, a legitimate
`stepsync upload` completes within twice its unattacked time and /health's p99 stays under 1 s, on
SQLite and PostgreSQL, alone and with --workers 2. Everything on loopback; every attack is bounded
in time (it runs while one upload does) and stops by itself.

The attacks (the adversary's of #36, 1-4):
- heads: 16 connections each sending an endless header 1 KiB at a time, as fast as the server takes
  it (and once refused, again 0.1 s later);
- bodies: 8 connections announcing an 8 MiB body with a made-up token, and 8 with a real one
  (mallory's) that send 1 MiB of it and then nothing;
- connections: idle connections from enough loopback addresses to pass the server's cap (64 from
  each), each opened again a second after the server closes it (one opened again at once, as fast as
  the attacker can, is a flood of connection attempts: a matter of rates, as below);
- reads: mallory's 40 daily-total queries over ten years with priorities that all differ, and 40
  pages of 100,000 samples, each sent again as soon as it is answered (a refused one after its
  Retry-After: a flood of requests refused at once is a matter of request rates, which the server
  leaves to the proxy in front of it; README, Deployment).

The figures (upload time beside the unattacked one, /health p50/p99) are printed; run with -s to
see them (tools/test does)."""
import asyncio
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from conftest import MOCK_END, PYTHON, ROOT, SERVER_MAIN, STEPSYNC, free_port, stepsync, wait_until

sys.path.insert(0, str(ROOT / "tools" / "api-server"))
sys.path.insert(0, str(ROOT / "tools" / "api-server" / "tests"))
from postgres_cluster import PostgresCluster  # noqa: E402

UPLOAD_DAYS = 180  # ~33,000 samples: about a second's upload
MALLORY_SAMPLES = 50_000  # over ten years: what her expensive reads go through
BASELINE_RUNS = 3
HEALTH_P99_S = 1.0
SLOWDOWN = 2.0
CONFIGS = [("sqlite", 1), ("sqlite", 2), ("postgres", 1), ("postgres", 2)]
ATTACKS = ["heads", "bodies", "connections", "reads"]
ATTACKER_ADDRESS = "127.0.2.1"  # the legitimate client and /health's prober are 127.0.0.1

PROBER = ROOT / "tools" / "api-server" / "tests" / "health_prober.py"


@pytest.fixture(scope="module")
def upload_store(tmp_path_factory):
    store = tmp_path_factory.mktemp("availability") / "store"
    stepsync("ingest", "--store", str(store), "--source", f"mock:days={UPLOAD_DAYS},end={MOCK_END}")
    return store


@pytest.fixture(scope="module")
def postgres():
    yield from PostgresCluster.for_tests()


def new_token(data, database, user):
    from stepserver.auth import new_token as make, now_text
    from stepserver.storage import open_storage

    store = open_storage(data, database, check=False, pool=False)
    try:
        token_id, token, digest = make()
        store.add_token(token_id, user, digest, now_text())
    finally:
        store.close()
    return token


class Server:
    def __init__(self, directory, database, workers):
        self.directory = directory
        self.data = directory / "data"
        self.database = database
        self.workers = workers
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        storage = ["--database", database] if database else ["--data", str(self.data)]
        self.storage = storage
        self.tokens = {user: new_token(self.data, database, user) for user in ["mallory", *(f"user{n}" for n in range(12))]}
        self.log = directory / "server.log"
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen([PYTHON, str(SERVER_MAIN), "--port", str(self.port), *storage,
                                             *(["--workers", str(workers)] if workers > 1 else [])],
                                            stdout=log, stderr=log)
        wait_until(self.healthy, f"the server on port {self.port}", timeout=60)

    def healthy(self):
        if self.process.poll() is not None:
            pytest.fail(f"the server exited: {self.log.read_text()}")
        try:
            with urllib.request.urlopen(self.url + "/health", timeout=1) as response:
                return response.status == 200
        except OSError:
            return False

    def post(self, user, samples):
        request = urllib.request.Request(self.url + "/steps", data=json.dumps({"samples": samples}).encode(), method="POST",
                                         headers={"Content-Type": "application/json", "Authorization": f"Bearer {self.tokens[user]}"})
        with urllib.request.urlopen(request, timeout=60) as response:
            assert response.status == 200

    def stop(self):
        self.process.send_signal(signal.SIGTERM)
        try:
            assert self.process.wait(timeout=30) == 0, self.log.read_text()
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            pytest.fail("the server did not stop on SIGTERM")


def mallory_history(count):
    """`count` samples over ten years from two sources (an iPhone and a Watch)."""
    samples, start = [], 946_684_800  # 2000-01-01
    step = 3650 * 86400 // count
    for n in range(count):
        begin = start + n * step
        source = n % 2
        samples.append({"id": f"m{n}", "startDate": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(begin)),
                        "endDate": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(begin + 300)), "count": 50 + n % 400,
                        "sourceBundleId": ["com.apple.health.A1", "com.apple.health.B2"][source],
                        "sourceDeviceName": ["iPhone", "Apple Watch"][source]})
    return samples


class Attack:
    """One attack of the module's docstring, on an asyncio loop of its own thread, until stop()."""

    def __init__(self, kind, server):
        self.kind = kind
        self.server = server
        self.loop = asyncio.new_event_loop()
        self.stopping = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.counts = {"connections": 0, "answers": 0}
        self.thread.start()

    def established(self):
        """Whether every connection of the attack has been opened once (the reads: answered once)."""
        if self.kind == "reads":
            return self.counts["answers"] >= 80
        wanted = {"heads": 16, "bodies": 16, "connections": self.addresses() * 64}[self.kind]
        return self.counts["connections"] >= wanted

    def addresses(self):
        return self.server.workers * 1000 // 64 + 4  # enough to pass the server's cap of connections

    def _run(self):
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self._main())
        self.loop.close()

    async def _main(self):
        self.stopping = asyncio.Event()
        port = self.server.port
        mallory = self.server.tokens["mallory"].encode()
        tasks = []
        if self.kind == "heads":
            tasks = [self._again(self._trickle_head, port) for _ in range(16)]
        elif self.kind == "bodies":
            tasks = [self._again(self._hold_body, port, b"x", 64 * 1024) for _ in range(8)]
            tasks += [self._again(self._hold_body, port, b"Bearer " + mallory, 1 << 20) for _ in range(8)]
        elif self.kind == "connections":
            tasks = [self._again(self._idle, port, f"127.0.1.{n + 1}") for n in range(self.addresses()) for _ in range(64)]
        elif self.kind == "reads":
            tasks = [self._again(self._read, port, mallory, f"/steps/daily?from=2000-01-01&to=2010-02-14&priority=X{n},", True)
                     for n in range(40)]
            tasks += [self._again(self._read, port, mallory, "/steps?limit=100000", False) for _ in range(40)]
        await asyncio.gather(*tasks)

    async def _again(self, attack, *arguments):
        """The attack, once more each time it ends, until the stop."""
        while not self.stopping.is_set():
            try:
                await asyncio.wait_for(attack(*arguments), timeout=30)
            except (OSError, asyncio.TimeoutError):
                await asyncio.sleep(0.05)

    async def _open(self, port, source=ATTACKER_ADDRESS):
        reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))
        self.counts["connections"] += 1
        return reader, writer

    async def _until_closed(self, reader, writer):
        try:
            while await reader.read(65536):
                pass
        finally:
            writer.close()

    async def _trickle_head(self, port):
        reader, writer = await self._open(port)
        writer.write(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ")
        closed = asyncio.ensure_future(self._until_closed(reader, writer))
        while not closed.done() and not self.stopping.is_set():
            writer.write(b"a" * 1024)
            await writer.drain()
            await asyncio.sleep(0)
        writer.close()
        await asyncio.sleep(0.1)

    async def _hold_body(self, port, authorization, send):
        reader, writer = await self._open(port)
        writer.write(b"POST /steps HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nAuthorization: " + authorization +
                     b"\r\nContent-Length: 8388608\r\n\r\n" + b'{"samples":[' + b" " * send)
        await self._wait_closed_or_stop(reader, writer)

    async def _idle(self, port, source):
        reader, writer = await self._open(port, source)
        await self._wait_closed_or_stop(reader, writer)
        await asyncio.sleep(1)

    async def _wait_closed_or_stop(self, reader, writer):
        closed = asyncio.ensure_future(self._until_closed(reader, writer))
        stop = asyncio.ensure_future(self.stopping.wait())
        await asyncio.wait([closed, stop], return_when=asyncio.FIRST_COMPLETED)
        stop.cancel()
        writer.close()
        if not closed.done():
            closed.cancel()

    async def _read(self, port, mallory, path, vary):
        reader, writer = await self._open(port)
        if vary:
            path += str(random.randrange(10 ** 9))  # a priority never asked before
        writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer ".encode() + mallory + b"\r\n\r\n")
        status = await reader.read(12)
        await self._until_closed(reader, writer)
        self.counts["answers"] += 1
        if not status.startswith(b"HTTP/1.1 200"):
            await asyncio.sleep(1)  # refused: again after the Retry-After

    def stop(self):
        self.loop.call_soon_threadsafe(self.stopping.set)
        self.thread.join(timeout=60)
        assert not self.thread.is_alive(), f"the {self.kind} attack did not stop"


def timed_upload(server, store_template, work, user):
    store = work / f"store-{user}"
    shutil.copytree(store_template, store)
    began = time.monotonic()
    result = subprocess.run([STEPSYNC, "upload", "--store", str(store), "--api-url", server.url, "--json"],
                            capture_output=True, text=True, timeout=600,
                            env={**os.environ, "STEPSYNC_TOKEN": server.tokens[user]})
    seconds = time.monotonic() - began
    shutil.rmtree(store)
    retries = result.stderr.count("retrying")
    if result.returncode != 0:
        return float("inf"), result.stderr.strip().splitlines()[-1], retries
    return seconds, None, retries


def probed(server, action):
    """action() while /health is asked every 10 ms from another process; (its result, the times)."""
    prober = subprocess.Popen([sys.executable, str(PROBER), server.url + "/health"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        result = action()
    finally:
        output, _ = prober.communicate("stop\n", timeout=60)
    return result, sorted(float(value) for value in output.split())


def percentile(times, fraction):
    return times[min(len(times) - 1, int(len(times) * fraction))]


@pytest.mark.parametrize("backend, workers", CONFIGS, ids=[f"{b}-{w}" for b, w in CONFIGS])
def test_uploads_and_health_hold_under_each_attack(backend, workers, tmp_path, upload_store, request):
    database = request.getfixturevalue("postgres").new_database() if backend == "postgres" else None
    server = Server(tmp_path, database, workers)
    lines, failures = [], []
    users = iter(f"user{n}" for n in range(12))
    try:
        history = mallory_history(MALLORY_SAMPLES)
        for low in range(0, len(history), 5000):
            server.post("mallory", history[low:low + 5000])
        runs, times = probed(server, lambda: [timed_upload(server, upload_store, tmp_path, next(users))
                                              for _ in range(BASELINE_RUNS)])
        assert all(error is None for _, error, _ in runs), runs
        baseline = [seconds for seconds, _, _ in runs]
        alone = statistics.median(baseline)
        lines.append(f"{backend}, {workers} worker(s), load {os.getloadavg()[0]:.1f}: unattacked upload "
                     f"{' '.join(f'{s:.2f}' for s in baseline)} s (median {alone:.2f}); /health p50 "
                     f"{statistics.median(times) * 1000:.1f} ms, p99 {percentile(times, 0.99) * 1000:.1f} ms")
        for kind in ATTACKS:
            attack = Attack(kind, server)
            try:
                wait_until(attack.established, f"the {kind} attack to be under way", timeout=60)
                (seconds, error, retries), times = probed(server, lambda: timed_upload(server, upload_store, tmp_path, next(users)))
            finally:
                attack.stop()
            p50, p99 = statistics.median(times), percentile(times, 0.99)
            lines.append(f"  {kind:<11} upload {seconds:.2f} s ({seconds / alone:.2f}x, {retries} retries), /health p50 {p50 * 1000:.1f} ms, "
                         f"p99 {p99 * 1000:.1f} ms ({len(times)} probes), attack connections {attack.counts['connections']}, "
                         f"load {os.getloadavg()[0]:.1f}")
            if error is not None:
                failures.append(f"{kind}: the upload failed: {error}")
            elif seconds > SLOWDOWN * alone:
                failures.append(f"{kind}: the upload took {seconds:.2f} s, more than {SLOWDOWN:g}x {alone:.2f} s")
            if p99 >= HEALTH_P99_S:
                failures.append(f"{kind}: /health p99 {p99:.2f} s")
            wait_until(server.healthy, "the server to recover after the attack", timeout=30)
    finally:
        print("\n" + "\n".join(lines), flush=True)
        server.stop()
    assert not failures, "; ".join(failures)

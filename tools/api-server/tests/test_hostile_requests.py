"""Hostile requests (#36): bounded request heads (414/431, in linear time), authentication before
validation and before a body is read, connection caps answered in JSON with Retry-After, a body
budget per user, fair shares of expensive reads, and the smaller points of #36.5."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import requests

from conftest import MAIN, ServerProcess, make_sample, make_samples, read_answer, wait_until

HEAD_TIMEOUT = 3.0


def answer_json(answer: bytes) -> dict:
    return json.loads(answer.partition(b"\r\n\r\n")[2] or b"{}")


def trickle(port: int, prefix: bytes, piece: bytes, total: int) -> tuple[bytes, int, float]:
    """Sends `prefix`, then `piece` one at a time (each its own segment) up to `total` bytes or until
    the server answers or closes; returns (answer, bytes sent, seconds)."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    began = time.monotonic()
    sent = 0
    try:
        sock.sendall(prefix)
        sock.setblocking(False)
        while sent < total:
            try:
                answer = sock.recv(4096)
                if answer or answer == b"":
                    sock.setblocking(True)
                    return answer + read_answer(sock, time.monotonic() + 2), sent, time.monotonic() - began
            except BlockingIOError:
                pass
            try:
                sent += sock.send(piece)
            except BlockingIOError:
                time.sleep(0.001)
        sock.setblocking(True)
        return read_answer(sock, time.monotonic() + HEAD_TIMEOUT + 5), sent, time.monotonic() - began
    except (BrokenPipeError, ConnectionResetError):
        return b"", sent, time.monotonic() - began
    finally:
        sock.close()


@pytest.fixture
def single(tmp_path):
    instance = ServerProcess(tmp_path, users=("alice", "bob"),
                             extra=("--request-head-timeout", str(HEAD_TIMEOUT), "--request-body-timeout", str(HEAD_TIMEOUT), "--log-level", "info")).start()
    yield instance
    instance.finish()


# -- 1. request heads ------------------------------------------------------------------------------


@pytest.mark.parametrize("what, prefix, status", [
    ("header", b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ", b"431"),
    ("request line", b"GET /health?", b"414"),
    ("many headers", b"GET /health HTTP/1.1\r\nHost: x\r\n", b"431"),
])
def test_an_endless_head_trickled_in_small_pieces_is_refused_at_once(single, what, prefix, status):
    """16 MiB offered 64 bytes at a time: the server answers 414/431 after at most a few tens of KiB,
    long before the head deadline, and /health is answered meanwhile."""
    piece = b"X-A: b\r\n" * 8 if what == "many headers" else b"a" * 64
    answer, sent, seconds = trickle(single.port, prefix, piece, 16 << 20)
    assert answer.startswith(b"HTTP/1.1 " + status), (answer[:200], sent, seconds)
    assert sent < 1 << 20 and seconds < HEAD_TIMEOUT, (sent, seconds)
    assert b"application/json" in answer and "at most" in answer_json(answer)["error"]
    began = time.monotonic()
    assert requests.get(single.url + "/health", timeout=5).status_code == 200
    assert time.monotonic() - began < 1


def test_heads_within_the_bounds_are_served(single):
    headers = {f"X-Fill-{n}": "v" * 900 for n in range(20)}  # 18 KB of headers, each under the line bound
    response = single.session.get(single.url + "/steps", params={"limit": "1"}, headers=headers, timeout=10)
    assert response.status_code == 200, response.text


def test_heads_split_anywhere_and_pipelined_requests_are_served(single):
    """The head is gathered before the parser sees it: a head cut at every kind of place, a body in the
    same piece as its head, and requests pipelined in one piece are all answered, in order."""
    body = json.dumps({"samples": make_samples(2)}).encode()
    post = (b"POST /steps HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nAuthorization: Bearer "
            + single.tokens["alice"].encode() + b"\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    get = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
    stream = get + post + get + get.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n")
    for cuts in ([], [1, 17, 18, 19, 20, len(get) + 3, len(get) + len(post) - 5], list(range(1, len(stream), 7))):
        sock = socket.create_connection(("127.0.0.1", single.port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            for low, high in zip([0, *cuts], [*cuts, len(stream)]):
                sock.sendall(stream[low:high])
                time.sleep(0.002)
            answer = read_answer(sock, time.monotonic() + 10)
        finally:
            sock.close()
        assert answer.count(b"HTTP/1.1 200") == 4, (cuts[:5], answer[:600])
        assert answer.index(b'"saved":') > answer.index(b'{"status":"ok"}')


# -- 2. authentication before the body ------------------------------------------------------------


def test_an_unknown_token_is_401_before_any_body_byte(single):
    sock = socket.create_connection(("127.0.0.1", single.port))
    try:
        sock.sendall(b"POST /steps HTTP/1.1\r\nHost: x\r\nAuthorization: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 8388608\r\n\r\n")
        answer = read_answer(sock, time.monotonic() + 5)
    finally:
        sock.close()
    assert answer.startswith(b"HTTP/1.1 401"), answer[:200]


def test_one_user_cannot_take_the_whole_body_budget(single):
    """alice holds as many unfinished bodies as she may; her next body is refused (in JSON, with
    Retry-After), and bob's POST is still served."""
    held = []
    try:
        for _ in range(8):
            sock = socket.create_connection(("127.0.0.1", single.port))
            sock.sendall(b"POST /steps HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Authorization: Bearer " + single.tokens["alice"].encode() + b"\r\n"
                         b"Content-Length: 8388608\r\n\r\n{\"samples\": [" + b" " * (4 << 20))
            held.append(sock)
        body = json.dumps({"samples": make_samples(1)}).encode().ljust(8 << 20)  # 8 MiB: beyond what she has left

        def refused():
            response = single.session.post(single.url + "/steps", data=body, headers={"Content-Type": "application/json"}, timeout=30)
            return [response] if response.status_code == 503 else None

        (response,) = wait_until(refused, "alice's next body to be refused", timeout=2)
        assert response.headers["Retry-After"] and "this user" in response.json()["error"], response.text
        bob = single.new_session("bob")
        response = single.post(make_samples(1), session=bob)
        assert response.status_code == 200, response.text
    finally:
        for sock in held:
            sock.close()


# -- 3. connections --------------------------------------------------------------------------------


def test_connection_caps_answer_json_with_retry_after_and_idle_connections_yield(tmp_path):
    server = ServerProcess(tmp_path, extra=("--max-connections-per-client", "4", "--max-connections", "12")).start()
    sockets = []
    try:
        for _ in range(4):
            sockets.append(socket.create_connection(("127.0.0.1", server.port)))
        extra = socket.create_connection(("127.0.0.1", server.port))
        answer = read_answer(extra, time.monotonic() + 5)
        extra.close()
        assert answer.startswith(b"HTTP/1.1 503"), answer
        assert re.search(rb"(?i)retry-after: \d+", answer) and b"application/json" in answer
        assert answer_json(answer)["error"] == "too many connections from this address (at most 4)"
        # Idle connections from other addresses fill the server: a new client is still served, in the
        # place of the connection that waited longest without sending a request.
        for address in range(2, 5):
            for _ in range(4):
                sockets.append(socket.create_connection(("127.0.0.1", server.port), source_address=(f"127.0.0.{address}", 0)))
        time.sleep(0.2)  # no answer is expected on those: give the server the moment to count them
        fresh = socket.create_connection(("127.0.0.1", server.port), source_address=("127.0.0.5", 0))
        fresh.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert read_answer(fresh, time.monotonic() + 5).startswith(b"HTTP/1.1 200")
        fresh.close()
        evicted = [sock for sock in sockets[4:] if read_answer(sock, time.monotonic() + 0.2).startswith(b"HTTP/1.1 503")]
        assert len(evicted) >= 1
    finally:
        for sock in sockets:
            sock.close()
        server.finish()


# -- 4. fair shares of expensive reads -------------------------------------------------------------


def test_expensive_reads_have_a_share_per_user(single):
    single.post(make_samples(2000))
    started = threading.Barrier(12)
    statuses: list[int] = []

    def daily(n: int) -> None:
        started.wait()
        response = single.session.get(single.url + "/steps/daily", timeout=60, params={
            "from": "2000-01-01", "to": "2010-02-14", "priority": f"com.apple.health{n}"})
        statuses.append(response.status_code)
        if response.status_code == 429:
            assert response.headers["Retry-After"] and "this user" in response.json()["error"]

    threads = [threading.Thread(target=daily, args=(n,)) for n in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert 429 in statuses and 200 in statuses, statuses
    bob = single.new_session("bob")
    assert bob.get(single.url + "/steps/daily", params={"from": "2024-01-01", "to": "2024-01-31"}, timeout=30).status_code == 200


def test_a_priority_query_of_days_beyond_2262_is_answered(single):
    """Found by schemathesis: a day whose instant is beyond the databases' 64-bit integers (ns) was a 500."""
    response = single.session.get(single.url + "/steps/daily", params={"from": "3303-10-09", "to": "3303-10-09", "priority": "0"}, timeout=30)
    assert response.status_code == 200, response.text
    assert response.json()["days"] == [{"date": "3303-10-09", "merged": 0, "raw": 0}]


def test_priority_is_bounded(single):
    too_many = ",".join(f"p{n}" for n in range(40))
    response = single.session.get(single.url + "/steps/daily", params={"from": "2024-01-01", "to": "2024-01-02", "priority": too_many}, timeout=10)
    assert response.status_code == 400 and response.json()["error"].startswith("priority: at most")


def test_a_read_stops_soon_after_its_client_goes(single):
    """A daily query over ten years by a priority (merged from the samples, chunk by chunk) whose
    client goes after a tenth of its time ends long before a whole one would have: its access log
    line, written when the work stops, says so."""
    for low in range(0, 100_000, 10_000):
        assert single.post([make_sample(n, startDate=f"{2001 + n % 9}-{1 + n % 12:02d}-{1 + n % 28:02d}T10:00:00Z",
                                        endDate=f"{2001 + n % 9}-{1 + n % 12:02d}-{1 + n % 28:02d}T10:05:00Z")
                            for n in range(low, low + 10_000)]).status_code == 200
    query = "/steps/daily?from=2000-01-01&to=2010-02-14&priority=x"
    assert single.session.get(single.url + query + "0", timeout=60).status_code == 200  # the reading processes start
    began = time.monotonic()
    assert single.session.get(single.url + query + "1", timeout=60).status_code == 200
    whole = time.monotonic() - began
    sock = socket.create_connection(("127.0.0.1", single.port))
    sock.sendall(f"GET {query}2 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {single.tokens['alice']}\r\n\r\n".encode())
    time.sleep(whole / 10)
    sock.close()
    line = wait_until(lambda: next((line for line in single.stderr().splitlines() if f"GET /steps/daily" in line and " 400 " in line), None),
                      "the abandoned query's log line", timeout=whole * 2 + 5)
    stopped_after = float(line.split()[-2]) / 1000
    assert stopped_after < whole / 2, (stopped_after, whole)


def descendants(pid: int) -> list[int]:
    listed = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    children = [int(child) for child in listed.split()]
    return children + [grandchild for child in children for grandchild in descendants(child)]


def test_the_reading_processes_end_with_a_killed_server(single):
    """A server killed with SIGKILL cannot stop its pool: its reading processes (and the pool's
    resource tracker) end by themselves instead of living on, each holding a database connection."""
    single.post(make_samples(10))
    assert single.session.get(single.url + "/steps/daily", params={"from": "2024-01-01", "to": "2024-01-31",
                                                                   "priority": "x"}, timeout=60).status_code == 200
    processes = descendants(single.proc.pid)
    assert len(processes) >= 2, processes  # a reading process and the resource tracker
    single.kill()
    wait_until(lambda: all(not Path(f"/proc/{pid}").exists() for pid in processes),
               "the reading processes of a killed server to end", timeout=10)


# -- 5. the smaller points ---------------------------------------------------------------------------


@pytest.mark.parametrize("path, query", [("/steps", "limit=x"), ("/steps", "nonsense=1"), ("/steps/daily", "from=x"),
                                          ("/steps/deletions", "a=1"), ("/steps/digest", "uploader=a%20b"),
                                          ("/steps/digest/days", "after=x"), ("/steps/digest/samples", "day=x"),
                                          ("/steps/digest/lookup", "a=1")])
def test_no_token_is_401_before_the_query_is_validated(single, path, query):
    method = "POST" if path in ("/steps/deletions", "/steps/digest/lookup") else "GET"
    response = requests.request(method, f"{single.url}{path}?{query}", data=b"{", timeout=10)
    assert response.status_code == 401, response.text


def test_health_without_a_token_names_no_path_user_or_socket(tmp_path):
    """/health on a store that says why it refuses writes: the reason reaches the log, not the
    unauthenticated client."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from conftest import call
    from stepserver.app import create_app
    from stepserver.settings import Settings
    from stepserver.storage import open_storage

    store = open_storage(tmp_path / "data", None, pool_size=2)
    try:
        secret = f"storage refuses writes ({tmp_path}/data/.probe: No space left on device) user alice socket /run/pg/.s.PGSQL.5432"
        store.health = lambda: secret
        app = create_app(Settings(data=tmp_path / "data"), store)
        status, headers, body = call(app, "GET", "/health")
        assert status == 503 and headers["retry-after"]
        assert json.loads(body) == {"status": "error", "error": "storage cannot take writes now"}
        assert str(tmp_path) not in body.decode() and "alice" not in body.decode()
    finally:
        store.close()


def test_a_client_that_goes_is_no_internal_error(single):
    sock = socket.create_connection(("127.0.0.1", single.port))
    sock.sendall(b"POST /steps HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Authorization: Bearer " + single.tokens["alice"].encode() + b"\r\nContent-Length: 1000\r\n\r\n{\"sam")
    time.sleep(0.3)
    sock.close()
    slow = socket.create_connection(("127.0.0.1", single.port))  # a body that times out
    slow.sendall(b"POST /steps HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Authorization: Bearer " + single.tokens["alice"].encode() + b"\r\nContent-Length: 1000\r\n\r\n{\"sam")
    assert read_answer(slow, time.monotonic() + HEAD_TIMEOUT + 5).startswith(b"HTTP/1.1 408")
    slow.close()
    assert single.post(make_samples(1)).status_code == 200
    log = single.stderr()
    assert "internal error" not in log and "Traceback" not in log, log


def test_single_user_refuses_a_name_that_binds_beyond_loopback(tmp_path):
    """`localhost` that resolves to 0.0.0.0: the address bound is what counts, not the name."""
    script = ("import socket, sys\n"
              "real = socket.getaddrinfo\n"
              "socket.getaddrinfo = lambda host, *a, **k: real('0.0.0.0' if host == 'localhost' else host, *a, **k)\n"
              f"sys.path.insert(0, {str(MAIN.parent)!r})\n"
              "from stepserver.cli import main\n"
              "sys.exit(main(sys.argv[1:]))\n")
    process = subprocess.Popen([sys.executable, "-c", script, "--single-user", "--host", "localhost", "--port", "0",
                                "--data", str(tmp_path / "data")], stderr=subprocess.PIPE, text=True)
    try:
        line = process.stderr.readline()
        assert "listening" not in line, line
        assert process.wait(timeout=30) == 2
        assert "--single-user is allowed on a loopback address only" in line, line
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_the_access_log_cannot_be_forged_by_a_path(single):
    requests.get(single.url + "/x%0Aapi-server:%20forged%20line%0D", timeout=10)
    requests.get(single.url + "/y%1B%5B2J\u00e9", timeout=10)
    time.sleep(0.2)
    lines = single.stderr().splitlines()
    assert not any(line.startswith("api-server: forged") for line in lines), lines
    assert any("GET /x\\napi-server: forged line\\r 404" in line
               for line in lines), lines
    assert not any("\x1b" in line for line in lines)


def test_a_trailing_slash_is_not_redirected_by_the_host_header(single):
    response = single.session.get(single.url + "/steps/", headers={"Host": "evil.example"}, allow_redirects=False, timeout=10)
    assert response.status_code == 404, response.headers
    assert "evil.example" not in response.headers.get("location", "")
    assert response.json()["error"] == "Not Found: GET /steps/"


def test_the_schema_refuses_what_the_server_refuses(single):
    import jsonschema_rs

    schema = requests.get(single.url + "/openapi.json", timeout=10).json()
    parameters = {(path, p["name"]): p["schema"] for path, item in schema["paths"].items()
                  for operation in item.values() for p in operation.get("parameters", [])}

    def accepts(path: str, name: str, value) -> bool:
        return jsonschema_rs.validator_for(parameters[(path, name)], validate_formats=True).is_valid(value)

    assert not accepts("/steps", "limit", 8395383) and accepts("/steps", "limit", 100000)
    assert not accepts("/steps/daily", "priority", "") and not accepts("/steps/daily", "priority", "a,,b")
    assert accepts("/steps/daily", "priority", "com.apple.health,=Watch")
    assert not accepts("/steps/daily", "from", "0000-00-00") and not accepts("/steps/daily", "to", "1989-12-31")
    assert accepts("/steps/daily", "from", "2024-02-29")


def test_the_data_directory_is_readable_by_its_owner_only(single):
    single.post(make_samples(3))
    assert single.data.stat().st_mode & 0o077 == 0, oct(single.data.stat().st_mode)
    for path in single.data.iterdir():
        if path.name.startswith("stepsync.sqlite"):
            assert path.stat().st_mode & 0o077 == 0, (path, oct(path.stat().st_mode))

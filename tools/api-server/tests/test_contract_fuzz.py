"""A property test of the wire contract (Hypothesis): over generated bodies (samples with ids, dates,
counts and names drawn near and across every rule, fields missing or of other types, unknown fields),
deletion ids and raw bytes (valid bodies with bytes changed, inserted or cut), the server's parser
answers a 400 or accepts, never anything else, and accepts exactly where the Swift SampleContract
(contract_reference.py, its transcription, pinned to the Swift code by the shared vectors) accepts.
In process for many examples, then fewer through a real server (no answer may be a 5xx).

What it found went into Tests/Fixtures/contract/samples.json, which the Swift tests read too."""

from __future__ import annotations

import json
import sys
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from stepserver import contract  # noqa: E402
from stepserver.errors import ApiError  # noqa: E402

import contract_reference  # noqa: E402

NOW = contract_reference.parse_timestamp("2026-11-22T12:00:00Z")
SETTINGS = settings(max_examples=1500, deadline=None, database=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

ID_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:-"
ids = st.one_of(
    st.text(ID_ALPHABET, min_size=1, max_size=64),
    st.text(ID_ALPHABET, min_size=0, max_size=70),
    st.text(min_size=0, max_size=66),
    st.builds(lambda base, tail: base + tail, st.text(ID_ALPHABET, min_size=1, max_size=10),
              st.sampled_from(["\n", "\x00", " ", "/", "\u00e9", "\ud800", "\U0001f3c3"])),
    st.integers(), st.none(), st.floats(allow_nan=False),
)


@st.composite
def date_texts(draw, base_ns: int = NOW) -> str:
    """RFC 3339-ish texts near `base_ns`, each part now and then out of its range or grammar."""
    seconds = base_ns // 10**9 + draw(st.sampled_from([0, -1, 1, -86400, 86400, -172800, 3600, -9 * 10**8]))
    seconds += draw(st.integers(-200_000, 200_000))
    days, rest = divmod(seconds, 86400)
    day = date.fromordinal(max(1, min(days + 719163, 3652059)))
    parts = [f"{day.year:04d}", f"{day.month:02d}", f"{day.day:02d}", f"{rest // 3600:02d}", f"{rest // 60 % 60:02d}", f"{rest % 60:02d}"]
    if draw(st.integers(0, 9)) == 0:
        index = draw(st.integers(0, 5))
        parts[index] = draw(st.sampled_from(["00", "13", "24", "29", "30", "31", "32", "60", "99", "1", "0000", "+02026", "1999"]))
    separator = draw(st.sampled_from(["T"] * 12 + ["t", " "]))
    fraction = draw(st.sampled_from(["", "", "", ".", ".0", ".000", ".5", ".123456789", ".0000000001", ".999999999"]))
    zone = draw(st.sampled_from(["Z"] * 8 + ["z", "", "+00:00", "+01:00", "-05:00", "+23:59", "+24:00", "-00:60", "+0100", "+05:45"]))
    text = f"{parts[0]}-{parts[1]}-{parts[2]}{separator}{parts[3]}:{parts[4]}:{parts[5]}{fraction}{zone}"
    return text + draw(st.sampled_from([""] * 20 + ["\n", " ", "x"]))


counts = st.one_of(st.integers(-3, 1_000_003), st.sampled_from([0, 1_000_000, 1_000_001, -1, 2**63, -(2**63) - 1, 10**30]),
                   st.floats(allow_nan=False, allow_infinity=False), st.booleans(), st.none(), st.text(max_size=5))
names = st.one_of(
    st.text(max_size=20),
    st.text(st.sampled_from("a\u00e9\u20ac\U0001f3c3"), min_size=100, max_size=520),
    st.sampled_from(["", "\x00", "a\x00", "\ud800", "a\udfffb", "Apple\u00a0Watch", "\u2028"]),
    st.integers(), st.none(), st.lists(st.text(max_size=3), max_size=2),
)
FIELDS = ["id", "startDate", "endDate", "count", "sourceBundleId", "sourceDeviceName"]


def text_of(instant_ns: int, offset_minutes: int, digits: int) -> str:
    """An instant as contract text with an offset and `digits` fraction digits (cut, not rounded)."""
    seconds, nanoseconds = divmod(instant_ns, 10**9)
    local = datetime.fromtimestamp(seconds, timezone.utc) + timedelta(minutes=offset_minutes)
    fraction = ("." + f"{nanoseconds:09d}"[:digits]) if digits else ""
    zone = "Z" if offset_minutes == 0 and digits % 2 == 0 else \
        f"{'+' if offset_minutes >= 0 else '-'}{abs(offset_minutes) // 60:02d}:{abs(offset_minutes) % 60:02d}"
    return local.strftime("%Y-%m-%dT%H:%M:%S") + fraction + zone


@st.composite
def samples(draw) -> dict:
    """A sample that keeps every rule or breaks one or two: dates near each bound (2000, now + 24 h,
    48 h long, end before start, to the nanosecond), ids, counts and names at and past their limits,
    fields missing, of other types, or unknown."""
    start_ns = draw(st.one_of(st.integers(contract_reference.EARLIEST_NS - 10**9, NOW + 86400 * 10**9),
                              st.sampled_from([contract_reference.EARLIEST_NS, contract_reference.EARLIEST_NS - 1,
                                               NOW + contract_reference.FUTURE_NS, NOW])))
    length = draw(st.one_of(st.integers(0, 3600 * 10**9), st.sampled_from(
        [0, -1, contract_reference.DURATION_NS, contract_reference.DURATION_NS + 1, -(10**9), 10**9])))
    offsets = st.sampled_from([0, 0, 60, -300, 345, 840, -720, 1439, -1439])
    digits = st.sampled_from([0, 0, 3, 3, 1, 6, 9])
    sample = {"id": draw(st.text(ID_ALPHABET, min_size=1, max_size=64)),
              "startDate": text_of(start_ns, draw(offsets), draw(digits)),
              "endDate": text_of(start_ns + length, draw(offsets), 9 if length % 10**6 else draw(digits)),
              "count": draw(st.integers(0, 1_000_000)),
              "sourceBundleId": draw(st.text(min_size=1, max_size=30).filter(lambda t: "\x00" not in t)),
              "sourceDeviceName": draw(st.one_of(st.none(), st.text(max_size=30)))}
    for _ in range(draw(st.sampled_from([0, 1, 1, 1, 2]))):
        field = draw(st.sampled_from(FIELDS + ["unknown"]))
        if field == "unknown":
            sample[draw(st.text(max_size=8))] = draw(st.one_of(names, counts))
        elif draw(st.integers(0, 6)) == 0:
            sample.pop(field, None)
        else:
            wild = {"id": ids, "startDate": date_texts(), "endDate": date_texts(start_ns), "count": counts,
                    "sourceBundleId": names, "sourceDeviceName": names}[field]
            sample[field] = draw(wild)
    return sample


bodies = st.builds(lambda items: {"samples": items}, st.lists(samples(), min_size=1, max_size=3))


def server_answer(body: bytes) -> str:
    """"accepted", or the 400's message; any other exception fails the test."""
    try:
        contract.parse_samples(body, NOW)
        return "accepted"
    except ApiError as error:
        assert error.status == 400 and "\n" not in error.message
        return error.message


def strict_json(body: bytes):
    """The body as RFC 8259 JSON (UTF-8, no NaN or Infinity), or None when it is not JSON."""
    def refuse(name):
        raise ValueError(name)

    try:
        return json.loads(body.decode("utf-8"), parse_constant=refuse)
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None


@SETTINGS
@given(body=bodies, ascii_only=st.booleans())
def test_the_parser_accepts_exactly_what_the_swift_contract_accepts(body, ascii_only):
    raw = json.dumps(body, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")
    expected = contract_reference.body_violation(body, NOW)
    answer = server_answer(raw)
    assert (answer == "accepted") == (expected is None), (expected, answer, raw[:400])


@st.composite
def damaged(draw) -> bytes:
    raw = bytearray(json.dumps(draw(bodies), ensure_ascii=draw(st.booleans())).encode("utf-8", "surrogatepass"))
    for _ in range(draw(st.integers(1, 3))):
        position = draw(st.integers(0, len(raw)))
        action = draw(st.sampled_from(["replace", "insert", "cut"]))
        piece = draw(st.sampled_from([b"\xc3", b"\xff", b"\xe2\x82", b"\x00", b'"', b"\\", b"\\u", b"{", b"]", b",", b"1e999",
                                      b"NaN", b"-0", b"\xf0\x9f\x8f\x83", b"\xed\xa0\x80", b" "]))
        if action == "replace" and position < len(raw):
            raw[position : position + len(piece)] = piece
        elif action == "insert":
            raw[position:position] = piece
        else:
            del raw[position:]
    return bytes(raw)


@SETTINGS
@given(raw=damaged())
def test_damaged_bytes_are_a_400_unless_they_are_an_acceptable_body(raw):
    answer = server_answer(raw)
    decoded = strict_json(raw)
    expected = None if decoded is not None and contract_reference.body_violation(decoded, NOW) is None else "refused"
    assert (answer == "accepted") == (expected is None), (answer, raw[:400])


@SETTINGS
@given(values=st.lists(ids, max_size=5))
def test_deletion_ids_are_accepted_exactly_when_each_is_a_contract_id(values):
    raw = json.dumps({"ids": values}).encode("utf-8", "surrogatepass")
    expected = all(isinstance(value, str) and contract_reference.violation(
        {"id": value, "startDate": "2026-11-22T10:00:00Z", "endDate": "2026-11-22T10:00:00Z", "count": 1,
         "sourceBundleId": "b"}, NOW) is None for value in values)
    try:
        assert contract.parse_deletions(raw) == values and expected, raw
    except ApiError as error:
        assert error.status == 400 and not expected, (error.message, raw)


@pytest.fixture(scope="module")
def running(tmp_path_factory, request):
    from conftest import ServerProcess

    server = ServerProcess(tmp_path_factory.mktemp("fuzz")).start()
    yield server
    server.finish()


@settings(max_examples=120, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large])
@given(raw=st.one_of(damaged(), bodies.map(lambda body: json.dumps(body).encode("utf-8", "surrogatepass"))))
def test_a_real_server_answers_fuzzed_bodies_with_200_or_400_only(running, raw):
    response = running.post_raw(raw)
    assert response.status_code in (200, 400), (response.status_code, response.text, raw[:400])
    if response.status_code == 400:
        assert set(response.json()) == {"error"}

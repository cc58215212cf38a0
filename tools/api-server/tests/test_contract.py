"""The contract module in-process: the fast path (msgspec) and the exact path (json with hooks) accept
exactly the same bodies, and the shared vectors (Tests/Fixtures/contract/samples.json, checked by the
Swift tests too) once they exist."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import msgspec
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from stepserver import contract  # noqa: E402
from stepserver.errors import ApiError  # noqa: E402
from test_validation import BAD_BODIES, BAD_RAW_BODIES, GOOD_EDGES  # noqa: E402

from conftest import make_samples  # noqa: E402

VECTORS = Path(__file__).resolve().parents[3] / "Tests" / "Fixtures" / "contract" / "samples.json"


def window() -> contract.DateWindow:
    return contract.DateWindow(time.time_ns())


def exact(body: bytes):
    try:
        return contract._parse_samples_exact(body, window())
    except ApiError as error:
        return error.message


@pytest.mark.parametrize("name, body, expected", BAD_BODIES + [(n, b, e) for n, b, e in BAD_RAW_BODIES],
                         ids=[case[0] for case in BAD_BODIES + BAD_RAW_BODIES])
def test_the_fast_path_refuses_what_the_exact_path_refuses(name, body, expected):
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    assert contract._parse_samples_fast(bytearray(raw), window()) is None
    assert isinstance(exact(raw), str)


@pytest.mark.parametrize("name, sample", GOOD_EDGES, ids=[case[0] for case in GOOD_EDGES])
def test_both_paths_agree_on_good_bodies(name, sample):
    for ensure_ascii in (True, False):
        raw = json.dumps({"samples": [sample] + make_samples(3)}, ensure_ascii=ensure_ascii).encode()
        fast = contract._parse_samples_fast(raw, window())
        slow = exact(raw)
        assert not isinstance(slow, str), slow
        if fast is not None:  # the fast path may always step aside (an escape, say), never disagree
            assert fast == slow
        assert contract.parse_samples(raw, window()) == slow


def test_the_usual_body_takes_the_fast_path():
    raw = json.dumps({"samples": make_samples(1000)}).encode()
    fast = contract._parse_samples_fast(raw, window())
    assert fast is not None and fast == exact(raw)


def vectors_path() -> Path:
    return Path(os.environ.get("STEPSYNC_CONTRACT_VECTORS", VECTORS))


@pytest.mark.skipif(not vectors_path().exists(), reason="Tests/Fixtures/contract/samples.json not on this branch yet")
def test_shared_contract_vectors():
    # json keeps what matters of each literal: 1.0 and 1e3 stay floats, a \ud800 escape a lone
    # surrogate, which json.dumps (ASCII) writes back as the same escape.
    vectors = json.loads(vectors_path().read_text(encoding="utf-8"))
    now = contract.DateWindow(contract.instant_ns(vectors["now"]))
    assert vectors["valid"] and vectors["invalid"]
    for case in vectors["valid"]:
        body = json.dumps({"samples": [case["sample"]]}).encode()
        samples = contract.parse_samples(body, now)
        assert len(samples) == 1, case["name"]
        fast = contract._parse_samples_fast(body, now)
        assert fast is None or fast == samples, case["name"]
        raw_utf8 = json.dumps({"samples": [case["sample"]]}, ensure_ascii=False).encode()
        assert contract._parse_samples_fast(raw_utf8, now) in (None, samples), case["name"]
    for case in vectors["invalid"]:
        body = json.dumps({"samples": [case["sample"]]}).encode()
        assert contract._parse_samples_fast(body, now) is None, case["name"]
        with pytest.raises(ApiError) as raised:
            contract.parse_samples(body, now)
        assert raised.value.status == 400
        assert raised.value.message.startswith(f"samples[0].{case['field']}: "), (case["name"], raised.value.message)


def test_the_decoding_struct_has_the_documented_fields():
    assert contract.Sample.__struct_fields__ + ("receivedAt",) == contract.SampleFields.__struct_fields__
    schema = msgspec.json.schema(contract.Sample)
    assert "Sample" in json.dumps(schema)


def _ms_sample(n: int, start: str, end: str) -> dict:
    return {"id": f"m{n}", "startDate": start, "endDate": end, "count": n % 100, "sourceBundleId": "b",
            "sourceDeviceName": "d"}


@pytest.mark.parametrize("whole_seconds", [True, False])
def test_millisecond_dates_take_the_fast_path(monkeypatch, whole_seconds):
    """What stepsync sends: dates with milliseconds (…:SS.fffZ), mixed with whole seconds (…:SSZ) or
    not; the fast path reads them as digits (no pattern match) and agrees with the exact path."""
    samples = []
    for n in range(1000):
        minute = n % 1440
        day = 1 + n // 1440
        start = f"2024-03-{day:02d}T{minute // 60:02d}:{minute % 60:02d}:0{n % 10}" + (f".{n:03d}Z" if n % 9 or not whole_seconds else "Z")
        end = f"2024-03-{day:02d}T{minute // 60:02d}:{minute % 60:02d}:5{n % 10}" + (f".{999 - n % 1000:03d}Z" if n % 7 or not whole_seconds else "Z")
        samples.append(_ms_sample(n, start, end))
    samples.append(_ms_sample(1000, "2024-03-01T23:59:59.500Z", "2024-03-03T23:59:59.500Z"))  # 48 h across days
    raw = json.dumps({"samples": samples}).encode()
    slow = exact(raw)

    class NoPattern:
        def fullmatch(self, text):
            raise AssertionError("the dates were matched by the pattern")

    monkeypatch.setattr(contract, "_ALL_DATES_RE", NoPattern())
    fast = contract._parse_samples_fast(raw, window())
    assert fast is not None and fast == slow


@pytest.mark.parametrize("start, end", [
    ("2024-03-01T24:00:00.000Z", "2024-03-01T24:00:01.000Z"),  # hour 24
    ("2024-03-01T23:00:00.000Z", "2024-03-01T29:00:00.000Z"),  # hour 29 after a valid hour 23
    ("2024-03-01T25:00:00Z", "2024-03-01T25:00:01Z"),  # hour 25, whole seconds
    ("2024-03-01T10:60:00.000Z", "2024-03-01T10:61:00Z"),  # minute 60
    ("2024-03-01T10:00:60.000Z", "2024-03-01T10:01:00Z"),  # second 60
    ("2023-02-29T10:00:00.000Z", "2023-02-29T10:01:00.000Z"),  # no such day
    ("2024-03-01T10:00:00.500Z", "2024-03-01T10:00:00.400Z"),  # end before start, the same second
    ("2024-03-01T10:00:00.500Z", "2024-03-01T10:00:00Z"),  # end before start, whole seconds
    ("1999-12-31T23:59:59.999Z", "2000-01-01T00:00:01Z"),  # before 2000
    ("2024-03-01T10:00:00.000Z", "2024-03-03T10:00:00.001Z"),  # longer than 48 hours
    ("2024-03-01T10:00:00.00Z", "2024-03-01T10:00:01.000Z"),  # two digits: not the millisecond shape
])
def test_millisecond_dates_the_exact_path_refuses_the_fast_path_refuses(start, end):
    raw = json.dumps({"samples": [_ms_sample(n, "2024-03-01T10:00:00.000Z", "2024-03-01T10:00:01Z") for n in range(3)]
                      + [_ms_sample(9, start, end)]}).encode()
    slow = exact(raw)
    fast = contract._parse_samples_fast(raw, window())
    if isinstance(slow, str):
        assert fast is None, slow
    else:
        assert fast is None or fast == slow


def test_a_millisecond_end_past_the_window_is_refused():
    now = window()
    late = now.max_text[:19] + ".999Z"  # in the window's last second, past its end unless it ends at .999…
    raw = json.dumps({"samples": [_ms_sample(1, now.max_text[:19] + ".000Z", late),
                                  _ms_sample(2, "2024-03-01T10:00:00.000Z", "2024-03-01T10:00:01Z")]}).encode()
    fast = contract._parse_samples_fast(raw, now)
    try:
        slow = contract._parse_samples_exact(raw, now)
    except ApiError as error:
        slow = error.message
    assert (fast is None) if isinstance(slow, str) else (fast is None or fast == slow)
    beyond = contract.utc_text(now.max_ns + 2 * 1_000_000_000)[:19] + ".000Z"
    raw = json.dumps({"samples": [_ms_sample(1, "2024-03-01T10:00:00.000Z", beyond)]}).encode()
    assert contract._parse_samples_fast(raw, now) is None
    with pytest.raises(ApiError):
        contract._parse_samples_exact(raw, now)


def test_a_line_with_receivedAt_set_is_the_line_earlier_versions_spliced():
    """The embedded backend now encodes a sample with receivedAt set (its last field); files written
    before hold encode(sample) with receivedAt spliced in before the closing brace. The bytes are the
    same, so a re-post of an old line's content still compares equal (user_log._content)."""
    received_at = "2026-11-27T14:00:00.123Z"
    samples = [contract.SampleFields("a", "2024-01-01T00:00:00Z", "2024-01-01T00:01:00Z", 5, "com.example", None),
               contract.SampleFields("b", "2024-01-01T00:00:00.250Z", "2024-01-01T00:01:00Z", 0, "b\u00e9", "Anna\u2019s\u00a0iPhone"),
               contract.SampleFields("c", "2024-01-01T00:00:00+02:00", "2024-01-01T00:01:00+02:00", 7, "x\"y", "q\\z")]
    spliced = [contract.encode_sample(sample)[:-1] + b',"receivedAt":"' + received_at.encode() + b'"}' for sample in samples]
    for sample in samples:
        sample.receivedAt = received_at
    assert msgspec.json.Encoder().encode_lines(samples).split(b"\n")[:-1] == spliced

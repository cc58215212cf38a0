"""The contract module in process: the shared vectors (Tests/Fixtures/contract/samples.json, checked by
the Swift tests too) against the server's parser and against the Swift transcription the property
test uses; the body the issue found answered 500; the OpenAPI schema from the same types."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import msgspec
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from stepserver import contract  # noqa: E402
from stepserver.errors import ApiError  # noqa: E402

import contract_reference  # noqa: E402
from conftest import make_samples  # noqa: E402

VECTORS = Path(os.environ.get("STEPSYNC_CONTRACT_VECTORS",
                              Path(__file__).resolve().parents[3] / "Tests" / "Fixtures" / "contract" / "samples.json"))
NOW = 2_000_000_000 * 10**9


def refusal(body: bytes, now_ns: int = NOW) -> str:
    with pytest.raises(ApiError) as raised:
        contract.parse_samples(body, now_ns)
    assert raised.value.status == 400 and "\n" not in raised.value.message
    return raised.value.message


@pytest.mark.skipif(not VECTORS.exists(), reason="Tests/Fixtures/contract/samples.json not on this branch")
def test_shared_contract_vectors():
    # json keeps what matters of each literal: 1.0 and 1e3 stay floats, a \ud800 escape a lone
    # surrogate, which json.dumps (ASCII) writes back as the same escape.
    vectors = json.loads(VECTORS.read_text(encoding="utf-8"))
    now = contract_reference.parse_timestamp(vectors["now"])
    assert vectors["valid"] and vectors["invalid"]
    for case in vectors["valid"]:
        assert contract_reference.violation(case["sample"], now) is None, case["name"]
        for ensure_ascii in (True, False):
            body = json.dumps({"samples": [case["sample"]]}, ensure_ascii=ensure_ascii).encode()
            assert len(contract.parse_samples(body, now)) == 1, case["name"]
    for case in vectors["invalid"]:
        assert contract_reference.violation(case["sample"], now) == case["field"], case["name"]
        message = refusal(json.dumps({"samples": [case["sample"]]}).encode(), now)
        if contract_reference.has_lone_surrogate(case["sample"]):
            assert message.startswith("body is not valid JSON"), (case["name"], message)
        else:
            assert message.startswith(f"samples[0].{case['field']}"), (case["name"], message)


def test_invalid_utf8_in_a_sample_string_is_a_400():
    """The issue's body: invalid UTF-8 inside a sample's string was answered 500."""
    assert refusal(b'{"samples":[{"sourceBundleId":"a\xc3"}]}') == "body is not valid UTF-8 (byte offset 32)"
    sample = json.dumps(make_samples(1)[0]).encode()
    for where in (b'"x":"\xff",', b'"sourceDeviceName":"\xe2\x82",', b'"\xc3\x28":1,'):
        assert refusal(b'{"samples":[{' + where + sample[1:] + b"]}").startswith("body is not valid UTF-8")


def test_nothing_but_a_400_leaves_the_parser():
    for body in (b"", b" ", b"[", b"{", b"null", b'{"samples":null}', b'{"samples":[null]}', b"\xef\xbb\xbf{}",
                 b'{"samples":' + b"[" * 200_000 + b"]" * 200_000 + b"}", b'{"samples":[],"x":' + b"[" * 200_000 + b"}",
                 b'{"samples":[{"count":' + b"9" * 5000 + b"}]}", b'{"samples":[{"id":"\\ud800"}]}'):
        refusal(body)
    with pytest.raises(ApiError):
        contract.parse_deletions(b'{"ids":["\\udfff"]}')


def test_a_repeated_key_counts_its_last_value():
    sample = make_samples(1)[0]
    body = json.dumps({"samples": [sample]}).encode().replace(b'"count": ', b'"count": 5, "count": ', 1)
    assert contract.parse_samples(body, NOW)[0].count_thousandths == sample["count"] * 1000


def test_the_schema_comes_from_the_decoding_types():
    _, components = msgspec.json.schema_components([contract.StepsBody, contract.DeletionsBody])
    sample = components["Sample"]["properties"]
    assert sample["id"]["pattern"] == contract.ID_PATTERN and sample["id"]["maxLength"] == 64
    assert sample["startDate"]["pattern"] == contract.DATE_PATTERN
    assert [branch["maximum"] for branch in sample["count"]["anyOf"]] == [contract.MAX_COUNT] * 2
    assert sample["count"]["anyOf"][1]["multipleOf"] == 0.001  # a number of at most three decimals
    assert components["DeletionsBody"]["properties"]["ids"]["maxItems"] == contract.MAX_IDS_PER_REQUEST


def test_the_instants_of_a_column_are_those_of_each_date():
    """contract.instants_ns (the dates of a body at once) answers what instant_ns answers date by date,
    whether every date is valid, one is not a date, or one is a day the calendar does not have."""
    to_the_microsecond = ["2024-01-15T10:30:00Z", "2000-01-01T00:00:00.1Z", "2024-01-15T10:30:00.123456+05:45",
                          "0001-01-01T00:00:00+01:00", "2024-02-29T23:59:59.999-12:00"]
    valid = to_the_microsecond + ["2024-01-15T10:30:00.123456789+05:45", "2024-02-29T23:59:59.9999999-12:00",
                                  "2024-01-15T10:30:00.1234567Z"]
    for dates in (to_the_microsecond, valid):
        for column in (dates, dates + ["2024-01-15 10:30:00Z"], dates + ["2023-02-29T00:00:00Z"], dates + ["2024-01-15T10:30:00"], []):
            assert contract.instants_ns(column) == [contract.instant_ns(text) for text in column], column
    assert contract.instants_ns(["2024-01-15T10:30:00.123456+00:00"]) == [1705314600123456000]
    assert contract.instants_ns(["2024-01-15T10:30:00.1234567Z"]) == [1705314600123456700]


@pytest.mark.parametrize("field, value, message", [
    ("id", "a b", "id: must be 1-64 characters"),
    ("startDate", "1999-12-31T23:59:59Z", "startDate: must not be before 2000-01-01T00:00:00Z"),
    ("endDate", "2024-02-30T00:00:00Z", "endDate: must be an RFC 3339 date-time"),
    ("endDate", "2024-01-01T00:00:00Z", "endDate: must not be before startDate"),
    ("endDate", "2033-06-01T00:00:00Z", "endDate: must not be more than 24 hours after the server's time"),
    ("endDate", "2024-01-20T00:00:00Z", "endDate: must be at most 48 hours after startDate"),
    ("count", 1.0005, "count: must have at most three decimals"),
    ("sourceBundleId", "x\u0000", "sourceBundleId: must be a string of 1-512 UTF-8 bytes"),
    ("sourceDeviceName", "\u00e9" * 257, "sourceDeviceName: must be null or a string of 0-512 UTF-8 bytes"),
])
def test_a_body_names_its_first_bad_sample_and_rule(field, value, message):
    """The rules are checked over a body's columns at once; where one fails, the answer still names the
    first sample that breaks a rule, and its first rule in SampleContract's order (sample 37 here, though
    sample 80 breaks one too)."""
    samples = make_samples(100)
    samples[37][field] = value
    samples[80]["id"] = "also bad"
    assert refusal(json.dumps({"samples": samples}).encode()).startswith(f"samples[37].{message}")

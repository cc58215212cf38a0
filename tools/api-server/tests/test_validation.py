"""Invalid bodies and parameters: HTTP 400 with a one-line JSON "error" naming the problem and where
(the sample contract of the README). Nothing is written. Runs against both backends."""

from __future__ import annotations

import http.client
import json
from datetime import datetime, timedelta, timezone

import pytest

from conftest import make_sample

LATER = (datetime.now(timezone.utc) + timedelta(hours=25)).strftime("%Y-%m-%dT%H:%M:%SZ")
SOON = (datetime.now(timezone.utc) + timedelta(hours=23)).strftime("%Y-%m-%dT%H:%M:%SZ")


def with_field(**fields) -> dict:
    return {"samples": [make_sample(0), make_sample(1), make_sample(2, **fields)]}


def without_field(name: str) -> dict:
    sample = make_sample(2)
    del sample[name]
    return {"samples": [make_sample(0), make_sample(1), sample]}


ID_RULE = "must be 1-64 characters from A-Z a-z 0-9 . _ : -"
BUNDLE_RULE = "samples[2].sourceBundleId: must be a string of 1-512 UTF-8 bytes without U+0000"
DEVICE_RULE = "samples[2].sourceDeviceName: must be null or a string of 0-512 UTF-8 bytes without U+0000"

BAD_BODIES = [
    # (case name, body, expected substring of the error)
    ("missing samples", {"items": []}, "samples: field required"),
    ("samples not a list", {"samples": {"id": "x"}}, "samples: expected array, got object"),
    ("samples is a string", {"samples": "abc"}, "samples: expected array, got str"),
    ("body is an array", [make_sample(0)], "body: expected object, got array"),
    ("body is a number", 42, "body: expected object, got int"),
    ("sample not an object", {"samples": [make_sample(0), 7]}, "samples[1]: expected object, got int"),
    ("too many samples", {"samples": [make_sample(n) for n in range(10_001)]}, "samples: expected array of length <= 10000"),
    ("missing id", without_field("id"), "samples[2].id: field required"),
    ("missing startDate", without_field("startDate"), "samples[2].startDate: field required"),
    ("missing endDate", without_field("endDate"), "samples[2].endDate: field required"),
    ("missing count", without_field("count"), "samples[2].count: field required"),
    ("missing sourceBundleId", without_field("sourceBundleId"), "samples[2].sourceBundleId: field required"),
    ("empty id", with_field(id=""), "samples[2].id: expected str of length >= 1"),
    ("numeric id", with_field(id=12), "samples[2].id: expected str, got int"),
    ("null id", with_field(id=None), "samples[2].id: expected str, got null"),
    ("id of 65 characters", with_field(id="a" * 65), "samples[2].id: expected str of length <= 64"),
    ("id of a megabyte", with_field(id="a" * 1_000_000), "samples[2].id: expected str of length <= 64"),
    ("id with NUL", with_field(id="a\u0000b"), f"samples[2].id: {ID_RULE}"),
    ("id with a space", with_field(id="a b"), f"samples[2].id: {ID_RULE}"),
    ("id with a final newline", with_field(id="abc\n"), f"samples[2].id: {ID_RULE}"),
    ("id with a slash", with_field(id="a/b"), f"samples[2].id: {ID_RULE}"),
    ("count is a string", with_field(count="12"), "samples[2].count: expected int | float, got str"),
    ("count with four decimals", with_field(count=1.2345), "samples[2].count: must have at most three decimals (got float 1.2345)"),
    ("negative fractional count", with_field(count=-0.5), "samples[2].count: expected float >= 0.0"),
    ("fractional count too large", with_field(count=1_000_000.5), "samples[2].count: expected float <= 1000000.0"),
    ("count is a boolean", with_field(count=True), "samples[2].count: expected int | float, got bool"),
    ("count is null", with_field(count=None), "samples[2].count: expected int | float, got null"),
    ("negative count", with_field(count=-1), "samples[2].count: expected int >= 0"),
    ("count too large", with_field(count=1_000_001), "samples[2].count: expected int <= 1000000"),
    ("count of 2^63-1", with_field(count=2**63 - 1), "samples[2].count: expected int <= 1000000"),
    ("date without zone", with_field(startDate="2024-01-15T10:30:00"), "samples[2].startDate: must be an RFC 3339 date-time"),
    ("date only", with_field(endDate="2024-01-15"), "samples[2].endDate: must be an RFC 3339 date-time"),
    ("date with space", with_field(startDate="2024-01-15 10:30:00Z"), "samples[2].startDate: must be an RFC 3339"),
    ("date with final newline", with_field(startDate="2024-01-15T10:30:00Z\n"), "samples[2].startDate: must be an RFC 3339"),
    ("date garbage", with_field(startDate="yesterday"), "samples[2].startDate: must be an RFC 3339 date-time with Z or an offset, e.g. 2024-01-15T10:30:00Z, on a real calendar day"),
    ("ten fraction digits", with_field(startDate="2024-01-15T10:30:00.0000000001Z"), "samples[2].startDate: must be an RFC 3339"),
    ("date month 13", with_field(startDate="2024-13-01T00:00:00Z"), "samples[2].startDate: must be an RFC 3339 date-time with Z or an offset, e.g. 2024-01-15T10:30:00Z, on a real calendar day"),
    ("date February 30", with_field(endDate="2024-02-30T00:00:00Z"), "samples[2].endDate: must be an RFC 3339 date-time with Z or an offset, e.g. 2024-01-15T10:30:00Z, on a real calendar day"),
    ("date hour 24", with_field(startDate="2024-01-15T24:00:00Z"), "samples[2].startDate: must be an RFC 3339"),
    ("date is a number", with_field(startDate=1705314600), "samples[2].startDate: expected str, got int"),
    ("year 0001", with_field(startDate="0001-01-01T00:00:00Z", endDate="0001-01-01T00:01:00Z"), "samples[2].startDate: must not be before 2000-01-01T00:00:00Z"),
    ("just before 2000 across an offset", with_field(startDate="2000-01-01T00:30:00+01:00", endDate="2000-01-01T00:31:00Z"), "samples[2].startDate: must not be before 2000-01-01T00:00:00Z"),
    ("year 2099", with_field(startDate="2099-01-01T00:00:00Z", endDate="2099-01-01T00:01:00Z"), "samples[2].endDate: must not be more than 24 hours after the server's time"),
    ("25 hours ahead", with_field(startDate=SOON, endDate=LATER), "samples[2].endDate: must not be more than 24 hours after the server's time"),
    ("longer than 48 hours", with_field(startDate="2024-01-15T10:30:00Z", endDate="2024-01-17T10:30:00.001Z"), "samples[2].endDate: must be at most 48 hours after startDate"),
    ("end before start", with_field(startDate="2024-01-15T10:30:00Z", endDate="2024-01-15T10:29:59.999Z"), "samples[2].endDate: must not be before startDate"),
    ("end before start across offsets", with_field(startDate="2024-01-15T10:30:00Z", endDate="2024-01-15T11:29:00+01:00"), "samples[2].endDate: must not be before startDate"),
    ("end before start by a nanosecond", with_field(startDate="2024-01-15T10:30:00.000000002Z", endDate="2024-01-15T10:30:00.000000001Z"), "samples[2].endDate: must not be before startDate"),
    ("empty bundle id", with_field(sourceBundleId=""), "samples[2].sourceBundleId: expected str of length >= 1"),
    ("bundle id is a list", with_field(sourceBundleId=["a"]), "samples[2].sourceBundleId: expected str, got array"),
    ("bundle id of 513 bytes", with_field(sourceBundleId="b" * 513), "samples[2].sourceBundleId: expected str of length <= 512"),
    ("bundle id of 257 two-byte characters", with_field(sourceBundleId="\u00e9" * 257), BUNDLE_RULE),
    ("bundle id with NUL", with_field(sourceBundleId="com.\u0000x"), BUNDLE_RULE),
    ("device name is a number", with_field(sourceDeviceName=5), "samples[2].sourceDeviceName: expected str | null, got int"),
    ("device name of 513 bytes", with_field(sourceDeviceName="d" * 513), "samples[2].sourceDeviceName: expected str of length <= 512"),
    ("device name with NUL", with_field(sourceDeviceName="\u0000"), DEVICE_RULE),
]


@pytest.mark.parametrize("name, body, expected", BAD_BODIES, ids=[case[0] for case in BAD_BODIES])
def test_bad_body_is_400_naming_the_field(shared_server, name, body, expected):
    response = shared_server.post_raw(json.dumps(body).encode())
    assert response.status_code == 400, response.text
    assert response.headers["content-type"].startswith("application/json")
    error = response.json()["error"]
    assert expected in error, error
    assert "\n" not in error


GOOD_EDGES = [
    ("id of 64 characters", make_sample(0, id="A" * 32 + "z9._:-" + "b" * 26)),
    ("2000-01-01 exactly", make_sample(1, startDate="2000-01-01T00:00:00Z", endDate="2000-01-01T00:00:00Z")),
    ("48 hours exactly", make_sample(2, startDate="2024-01-15T10:30:00Z", endDate="2024-01-17T10:30:00Z")),
    ("23 hours ahead", make_sample(3, startDate=SOON, endDate=SOON)),
    ("bundle id of 512 bytes", make_sample(4, sourceBundleId="\u00e9" * 256)),
    ("device name empty", make_sample(5, sourceDeviceName="")),
    ("control characters", make_sample(6, sourceDeviceName="tab\there\u0001", sourceBundleId="b\u007f")),
]


@pytest.mark.parametrize("name, sample", GOOD_EDGES, ids=[case[0] for case in GOOD_EDGES])
def test_values_at_the_bounds_are_accepted(server, name, sample):
    response = server.post([sample])
    assert response.status_code == 200, response.text
    assert [record["id"] for record in server.all_samples()] == [sample["id"]]


BAD_RAW_BODIES = [
    ("not JSON", b'{"samples": [', "body is not valid JSON: Input data was truncated"),
    ("JSON error on line 2", b'{"samples": [\n  {"id": "a",, }]}', "body is not valid JSON: object keys must be strings (byte 27)"),
    ("trailing garbage", b'{"samples": []} x', "body is not valid JSON: trailing characters (byte 17)"),
    ("empty body", b"", "body is empty"),
    ("not UTF-8", b'{"samples": [], "x": "\xff"}', "body is not valid UTF-8 (byte offset 22)"),
    ("NaN", b'{"samples": [{"id": "a", "startDate": "2024-01-15T10:30:00Z", "endDate": "2024-01-15T10:30:00Z", "count": NaN, "sourceBundleId": "b"}]}', "body is not valid JSON: invalid character (byte 106)"),
    ("count of 5001 digits", b'{"samples": [{"id": "a", "startDate": "2024-01-15T10:30:00Z", "endDate": "2024-01-15T10:30:00Z", "count": ' + b"7" * 5001 + b', "sourceBundleId": "b"}]}', "samples[0].count: integer value out of range"),
    ("lone surrogate", b'{"samples": [{"id": "a", "startDate": "2024-01-15T10:30:00Z", "endDate": "2024-01-15T10:30:00Z", "count": 1, "sourceBundleId": "b", "sourceDeviceName": "x\\ud800"}]}', "body is not valid JSON: Input data was truncated"),
    ("deeply nested", b'{"samples": ' + b"[" * 100000 + b"]" * 100000 + b"}", "samples[0]: expected object, got array"),
    ("millions of tiny objects", b'{"samples": [' + b"{}," * 2_000_000 + b'{}]}', "samples[0].id: field required"),
]


@pytest.mark.parametrize("name, body, expected", BAD_RAW_BODIES, ids=[case[0] for case in BAD_RAW_BODIES])
def test_bad_raw_body_is_400(shared_server, name, body, expected):
    response = shared_server.post_raw(body)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert expected in error, error
    assert "\n" not in error
    assert "int_max_str_digits" not in error


def test_wrong_content_type_is_400(shared_server):
    body = json.dumps({"samples": [make_sample(0)]}).encode()
    response = shared_server.post_raw(body, content_type="text/plain")
    assert response.status_code == 400
    assert response.json()["error"] == 'Content-Type must be application/json (got "text/plain")'
    response = shared_server.post_raw(body, content_type="application/json; charset=latin-1")
    assert response.status_code == 400
    assert "charset must be utf-8" in response.json()["error"]


@pytest.mark.parametrize(
    "query, expected",
    [
        ("limit=abc", 'limit: must be digits only, at most 18 (got "abc")'),
        ("limit=100001", "limit: must be at most 100000 (got 100001)"),
        ("limit=-1", 'limit: must be digits only'),
        ("offset=-5", 'offset: must be digits only'),
        ("offset=1.5", 'offset: must be digits only'),
        ("limit=2_0", 'limit: must be digits only, at most 18 (got "2_0")'),
        ("limit=%2B5", 'limit: must be digits only'),
        ("limit=+5", 'limit: must be digits only'),
        ("limit=%32", 'limit: must be digits only'),
        ("limit=1&limit=2", "limit: given more than once"),
        ("limit=", "limit: a value is required"),
        ("limit", "limit: a value is required"),
        ("offset=1234567890123456789", "offset: must be digits only, at most 18"),
        ("lmit=5", 'query parameter "lmit" is not known here (known: limit, offset, versions)'),
        ("versions=some", 'versions: must be all or current (got "some")'),
    ],
)
def test_bad_query_parameters_are_400(shared_server, query, expected):
    # http.client sends the query byte for byte (requests would normalize "%32" to "2").
    connection = http.client.HTTPConnection("127.0.0.1", shared_server.port, timeout=30)
    connection.request("GET", "/steps?" + query, headers=dict(shared_server.session.headers))
    response = connection.getresponse()
    body = json.loads(response.read())
    connection.close()
    assert response.status == 400, body
    assert expected in body["error"]


def test_query_on_post_is_refused(shared_server):
    response = shared_server.session.post(shared_server.url + "/steps?limit=5", json={"samples": []}, timeout=30)
    assert response.status_code == 400
    assert 'query parameter "limit" is not known here' in response.json()["error"]


BAD_DELETIONS = [
    ("ids missing", {"samples": []}, "ids: field required"),
    ("ids not a list", {"ids": "abc"}, "ids: expected array, got str"),
    ("an id not a string", {"ids": ["a", 5]}, "ids[1]: expected str, got int"),
    ("an id too long", {"ids": ["a" * 65]}, "ids[0]: expected str of length <= 64"),
    ("over 1000 ids", {"ids": [f"id-{n}" for n in range(1001)]}, "ids: expected array of length <= 1000"),
    ("body an array", ["a"], "body: expected object, got array"),
]


@pytest.mark.parametrize("name, body, expected", BAD_DELETIONS, ids=[case[0] for case in BAD_DELETIONS])
def test_bad_deletions_are_400(shared_server, name, body, expected):
    response = shared_server.post_raw(json.dumps(body).encode(), path="/steps/deletions")
    assert response.status_code == 400, response.text
    assert expected in response.json()["error"]


def test_bodies_over_the_limit_are_413(shared_server):
    body = b'{"samples": [], "pad": "' + b"x" * (8 * 1024 * 1024) + b'"}'
    for path in ("/steps", "/steps/deletions"):
        response = shared_server.post_raw(body, path=path)
        assert response.status_code == 413, response.text
        assert response.json()["error"].startswith("body too large")


def test_nothing_was_written_by_any_bad_request(shared_server):
    # Runs after the cases above in this module: none of them may have stored anything.
    body = {"samples": [make_sample(0), make_sample(1), make_sample(2, count=-3)]}
    assert shared_server.post_raw(json.dumps(body).encode()).status_code == 400
    assert shared_server.get().json() == {"samples": [], "total": 0}
    assert shared_server.get(versions="all").json() == {"samples": [], "total": 0}
    assert shared_server.history() == []


def test_valid_body_still_accepted_by_the_same_server(shared_server):
    # Guards the tests above against a server that rejects everything.
    response = shared_server.post_raw(json.dumps({"samples": [make_sample(99)]}).encode(), content_type=None)
    assert response.status_code == 200, response.text
    assert response.json() == {"saved": 1, "message": "Success"}

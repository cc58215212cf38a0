"""Invalid bodies and parameters: HTTP 400 with a one-line JSON "error" naming the problem and where.
Never FastAPI's 422, and nothing is written."""

from __future__ import annotations

import json

import pytest

from conftest import make_sample, read_lines


def with_field(**fields) -> dict:
    return {"samples": [make_sample(0), make_sample(1), make_sample(2, **fields)]}


def without_field(name: str) -> dict:
    sample = make_sample(2)
    del sample[name]
    return {"samples": [make_sample(0), make_sample(1), sample]}


BAD_BODIES = [
    # (case name, body, expected substring of the error)
    ("missing samples", {"items": []}, "samples: field required"),
    ("samples not a list", {"samples": {"id": "x"}}, "samples: must be an array (got object)"),
    ("samples is a string", {"samples": "abc"}, "samples: must be an array (got string"),
    ("body is an array", [make_sample(0)], "body must be a JSON object"),
    ("body is a number", 42, "body must be a JSON object"),
    ("sample not an object", {"samples": [make_sample(0), 7]}, "samples[1]: must be an object (got number 7)"),
    ("missing id", without_field("id"), "samples[2].id: field required"),
    ("missing startDate", without_field("startDate"), "samples[2].startDate: field required"),
    ("missing endDate", without_field("endDate"), "samples[2].endDate: field required"),
    ("missing count", without_field("count"), "samples[2].count: field required"),
    ("missing sourceBundleId", without_field("sourceBundleId"), "samples[2].sourceBundleId: field required"),
    ("empty id", with_field(id=""), "samples[2].id: must be a non-empty string"),
    ("numeric id", with_field(id=12), "samples[2].id: must be a non-empty string (got number 12)"),
    ("null id", with_field(id=None), "samples[2].id: must be a non-empty string (got null)"),
    ("count is a string", with_field(count="12"), 'samples[2].count: must be an integer (got string "12")'),
    ("count is a float", with_field(count=1.5), "samples[2].count: must be an integer (got number 1.5)"),
    ("count is 1.0", with_field(count=1.0), "samples[2].count: must be an integer (got number 1.0)"),
    ("count is a boolean", with_field(count=True), "samples[2].count: must be an integer (got boolean true)"),
    ("count is null", with_field(count=None), "samples[2].count: must be an integer (got null)"),
    ("negative count", with_field(count=-1), "samples[2].count: must be between 0 and"),
    ("count too large", with_field(count=2**63), "samples[2].count: must be between 0 and"),
    ("date without zone", with_field(startDate="2024-01-15T10:30:00"), "samples[2].startDate: must be an ISO 8601 date-time"),
    ("date only", with_field(endDate="2024-01-15"), "samples[2].endDate: must be an ISO 8601 date-time"),
    ("date with space", with_field(startDate="2024-01-15 10:30:00Z"), "samples[2].startDate: must be an ISO 8601"),
    ("date garbage", with_field(startDate="yesterday"), 'samples[2].startDate: must be an ISO 8601 date-time with a UTC designator or offset, e.g. 2024-01-15T10:30:00Z (got string "yesterday")'),
    ("date month 13", with_field(startDate="2024-13-01T00:00:00Z"), "samples[2].startDate: not a valid calendar date-time"),
    ("date February 30", with_field(endDate="2024-02-30T00:00:00Z"), "samples[2].endDate: not a valid calendar date-time"),
    ("date hour 24", with_field(startDate="2024-01-15T24:00:00Z"), "samples[2].startDate: must be an ISO 8601"),
    ("date is a number", with_field(startDate=1705314600), "samples[2].startDate: must be an ISO 8601 date-time"),
    ("end before start", with_field(startDate="2024-01-15T10:30:00Z", endDate="2024-01-15T10:29:59.999Z"), "samples[2].endDate: must not be before startDate"),
    ("end before start across offsets", with_field(startDate="2024-01-15T10:30:00Z", endDate="2024-01-15T11:29:00+01:00"), "samples[2].endDate: must not be before startDate"),
    ("end before start by a nanosecond", with_field(startDate="2024-01-15T10:30:00.000000002Z", endDate="2024-01-15T10:30:00.000000001Z"), "samples[2].endDate: must not be before startDate"),
    ("empty bundle id", with_field(sourceBundleId=""), "samples[2].sourceBundleId: must be a non-empty string"),
    ("bundle id is a list", with_field(sourceBundleId=["a"]), "samples[2].sourceBundleId: must be a non-empty string (got array)"),
    ("device name is a number", with_field(sourceDeviceName=5), "samples[2].sourceDeviceName: must be a string or null (got number 5)"),
]


@pytest.mark.parametrize("name, body, expected", BAD_BODIES, ids=[case[0] for case in BAD_BODIES])
def test_bad_body_is_400_naming_the_field(shared_server, name, body, expected):
    response = shared_server.post_raw(json.dumps(body).encode())
    assert response.status_code == 400, response.text
    assert response.headers["content-type"].startswith("application/json")
    error = response.json()["error"]
    assert expected in error, error
    assert "\n" not in error


BAD_RAW_BODIES = [
    ("not JSON", b'{"samples": [', "body is not valid JSON (line 1, column 14)"),
    ("JSON error on line 2", b'{"samples": [\n  {"id": "a",, }]}', "body is not valid JSON (line 2, column 14)"),
    ("trailing garbage", b'{"samples": []} x', "body is not valid JSON (line 1, column 17)"),
    ("empty body", b"", "body is empty"),
    ("not UTF-8", b'{"samples": [], "x": "\xff"}', "body is not valid UTF-8 (byte offset 22)"),
    ("NaN", b'{"samples": [{"id": "a", "startDate": "2024-01-15T10:30:00Z", "endDate": "2024-01-15T10:30:00Z", "count": NaN, "sourceBundleId": "b"}]}', "body is not valid JSON: NaN"),
    ("lone surrogate", b'{"samples": [{"id": "a", "startDate": "2024-01-15T10:30:00Z", "endDate": "2024-01-15T10:30:00Z", "count": 1, "sourceBundleId": "b", "sourceDeviceName": "x\\ud800"}]}', "samples[0].sourceDeviceName: contains an unpaired UTF-16 surrogate"),
    ("deeply nested", b'{"samples": ' + b"[" * 100000 + b"]" * 100000 + b"}", "body is not valid JSON"),
]


@pytest.mark.parametrize("name, body, expected", BAD_RAW_BODIES, ids=[case[0] for case in BAD_RAW_BODIES])
def test_bad_raw_body_is_400(shared_server, name, body, expected):
    response = shared_server.post_raw(body)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert expected in error, error
    assert "\n" not in error


def test_wrong_content_type_is_400(shared_server):
    body = json.dumps({"samples": [make_sample(0)]}).encode()
    response = shared_server.post_raw(body, content_type="text/plain")
    assert response.status_code == 400
    assert response.json()["error"] == 'Content-Type must be application/json (got "text/plain")'
    response = shared_server.post_raw(body, content_type="application/json; charset=latin-1")
    assert response.status_code == 400
    assert "charset must be utf-8" in response.json()["error"]


@pytest.mark.parametrize(
    "params, expected",
    [
        ({"limit": "abc"}, "limit: Input should be a valid integer"),
        ({"limit": "100001"}, "limit: Input should be less than or equal to 100000"),
        ({"limit": "-1"}, "limit: Input should be greater than or equal to 0"),
        ({"offset": "-5"}, "offset: Input should be greater than or equal to 0"),
        ({"offset": "1.5"}, "offset: Input should be a valid integer"),
    ],
)
def test_bad_query_parameters_are_400(shared_server, params, expected):
    response = shared_server.get(**params)
    assert response.status_code == 400, response.text
    assert expected in response.json()["error"]


def test_a_bad_sample_rejects_the_whole_body_and_nothing_was_written(shared_server):
    # Runs after the cases above in this module: none of them may have stored anything.
    body = {"samples": [make_sample(0), make_sample(1), make_sample(2, count=-3)]}
    assert shared_server.post_raw(json.dumps(body).encode()).status_code == 400
    assert read_lines(shared_server.data) == []
    assert shared_server.get().json() == {"samples": [], "total": 0}


def test_valid_body_still_accepted_by_the_same_server(shared_server):
    # Guards the tests above against a server that rejects everything.
    response = shared_server.post_raw(json.dumps({"samples": [make_sample(99)]}).encode(), content_type=None)
    assert response.status_code == 200, response.text
    assert response.json() == {"saved": 1, "message": "Success"}

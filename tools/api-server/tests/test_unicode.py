"""Non-ASCII text is stored as UTF-8, byte-exact, never as \\u escapes, and served back unchanged."""

from __future__ import annotations

import json
import sqlite3

from conftest import make_sample

NAMES = [
    "Anna\u2019s\u00a0iPhone",  # curly apostrophe + no-break space, as iOS names devices
    "J\u00fcrgens Apple\u00a0Watch",
    "\u5c0f\u660e\u7684 iPhone \U0001f3c3",  # CJK + an astral-plane emoji
    "tab\tquote\"backslash\\",  # characters JSON must escape
]


def test_non_ascii_names_are_served_unchanged(server):
    samples = [make_sample(n, sourceDeviceName=name) for n, name in enumerate(NAMES)]
    samples.append(make_sample(99, sourceBundleId="com.\u00e9xample.app"))
    assert server.post(samples).json()["saved"] == len(samples)
    served = server.all_samples()
    assert [sample["sourceDeviceName"] for sample in served] == [s["sourceDeviceName"] for s in samples]
    assert served[-1]["sourceBundleId"] == "com.\u00e9xample.app"
    assert server.post(samples).json()["saved"] == 0
    server.restart()
    assert server.post(samples).json()["saved"] == 0
    # A different normalization of the same visible text is different content.
    assert server.post([make_sample(0, sourceDeviceName=NAMES[0].replace("\u00a0", " "))]).json()["saved"] == 1


def test_non_ascii_names_are_stored_byte_exact(sqlite_server):
    """In the database as UTF-8 text, byte for byte what was sent (read with sqlite3 as a person would)."""
    server = sqlite_server
    samples = [make_sample(n, sourceDeviceName=name) for n, name in enumerate(NAMES)]
    assert server.post(samples).json()["saved"] == len(samples)
    with sqlite3.connect(server.sqlite_path().resolve().as_uri() + "?mode=ro", uri=True) as connection:
        stored = connection.execute("SELECT CAST(source_device_name AS BLOB) FROM samples ORDER BY seq").fetchall()
    assert [row[0] for row in stored] == [name.encode("utf-8") for name in NAMES]
    assert stored[0][0] == b"Anna\xe2\x80\x99s\xc2\xa0iPhone"


def test_non_ascii_body_sent_raw_as_utf8_and_answered_raw(server):
    body = '{"samples":[{"id":"u1","startDate":"2024-01-15T10:30:00Z","endDate":"2024-01-15T10:31:00Z",' \
        '"count":3,"sourceBundleId":"com.apple.health","sourceDeviceName":"Anna\u2019s\u00a0iPhone"}]}'
    response = server.post_raw(body.encode("utf-8"), content_type="application/json; charset=utf-8")
    assert response.status_code == 200, response.text
    answer = server.get().content
    assert b'"sourceBundleId":"com.apple.health","sourceDeviceName":"Anna\xe2\x80\x99s\xc2\xa0iPhone","receivedAt":"' in answer


def test_escaped_characters_are_served_as_json_dumps_writes_them(server):
    """Control characters are escaped, everything else non-ASCII is kept raw, exactly as
    json.dumps(record, ensure_ascii=False, separators=(",", ":")) writes it."""
    names = ["unit\x1f del\x7f", "line\u2028para\u2029", "slash/ back\\ quote\" nl\n cr\r"]
    samples = [make_sample(n, sourceDeviceName=name, sourceBundleId="b\u00e9" + name) for n, name in enumerate(names)]
    assert server.post(samples).json()["saved"] == 3
    answer = server.get().content
    page = json.loads(answer)
    assert [record["sourceDeviceName"] for record in page["samples"]] == names
    assert answer == json.dumps(page, ensure_ascii=False, separators=(",", ":")).encode("utf-8")

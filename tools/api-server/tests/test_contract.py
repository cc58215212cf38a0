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
    assert contract.Sample.__struct_fields__ == contract.SampleFields.__struct_fields__
    schema = msgspec.json.schema(contract.Sample)
    assert "Sample" in json.dumps(schema)

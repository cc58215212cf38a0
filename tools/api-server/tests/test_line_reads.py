"""The embedded backend's reads of lines at known offsets (user_log._read_lines): every line whole,
whatever its length (longer than the read's guess of a line, across windows) and however sparse the
offsets; a line without its end is an error naming the offset."""

from __future__ import annotations

import os
import random
import sys
from array import array
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from stepserver.storage import user_log  # noqa: E402


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_lines_at_offsets_come_back_whole(tmp_path, seed):
    rng = random.Random(seed)
    lengths = [rng.choice([0, 1, 50, 200, 300, 5_000, user_log.LINE_GUESS_BYTES + 1, 20_000]) for _ in range(3_000)]
    lines = [bytes([65 + n % 26]) * length for n, length in enumerate(lengths)]
    path = tmp_path / "h.jsonl"
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    offsets, position = [], 0
    for line in lines:
        offsets.append(position)
        position += len(line) + 1
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        for fraction in (1.0, 0.3, 0.01):
            chosen = sorted(rng.sample(range(len(lines)), max(1, int(len(lines) * fraction))))
            got = user_log._read_lines(fd, array("q", [offsets[k] for k in chosen]), size)
            assert got == [lines[k] for k in chosen], fraction
        assert user_log._read_lines(fd, array("q"), size) == []
    finally:
        os.close(fd)


def test_a_line_without_its_end_is_named(tmp_path):
    path = tmp_path / "h.jsonl"
    path.write_bytes(b"first\n" + b"x" * (user_log.LINE_GUESS_BYTES * 2))
    fd = os.open(path, os.O_RDONLY)
    try:
        with pytest.raises(RuntimeError, match="no line end after byte offset 6"):
            user_log._read_lines(fd, array("q", [0, 6]), os.fstat(fd).st_size)
    finally:
        os.close(fd)


def test_the_dates_of_stored_lines_come_from_one_decode_and_a_bad_line_is_named():
    lines = [b'{"id":"a","startDate":"2024-01-01T00:00:00Z","endDate":"2024-01-01T00:01:00Z","count":1,'
             b'"sourceBundleId":"b","sourceDeviceName":null,"receivedAt":"2026-11-27T00:00:00Z"}',
             b'{"id":"b","startDate":"2024-01-02T00:00:00.250Z","endDate":"2024-01-02T00:01:00Z","count":2,'
             b'"sourceBundleId":"b\xc3\xa9","receivedAt":"2026-11-27T00:00:00Z"}']
    assert user_log._line_dates(lines) == ["2024-01-01T00:00:00Z", "2024-01-01T00:01:00Z",
                                           "2024-01-02T00:00:00.250Z", "2024-01-02T00:01:00Z"]
    with pytest.raises(ValueError, match="startDate"):
        user_log._line_dates(lines + [b'{"id":"c","endDate":"2024-01-01T00:01:00Z"}'])

"""The import of the earlier embedded layout (DIR/users/NAME.jsonl, DIR/tokens.sqlite) into a new
DIR/stepsync.sqlite, once, inside the transaction that creates its schema: a crash midway leaves no
schema, and the next start imports again.

A history line is a version of a sample (the sample's fields and receivedAt) or a deletion
({"deleted": id, "receivedAt": …}); replayed in order they give the live samples. Every version is
kept (sample_versions, samples), every deletion (deletions), in the order of the file (seq), and every
token with its hash, user, dates and revocation. A last line without its newline is a write the
earlier server never acknowledged: left out, and said. Any other line that is not one of the two
shapes refuses the import with one line naming the file, line and byte offset. The files are left
where they are; nothing reads them afterwards.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Optional

import msgspec

from ..contract import COUNT_SCALE, instant_ns
from ..errors import StartupError
from ..log import log
from . import sample_digests
from .database import Transaction
from .schema import SEQ_PER_REQUEST
from .store import SAMPLE_COLUMNS, Store

PROGRESS_LINES = 200_000
_STORED = "user_name, seq, id, start_date, end_date, count_thousandths, source_bundle_id, source_device_name, received_at"


class _Line(msgspec.Struct):
    id: Optional[str] = None
    startDate: Optional[str] = None
    endDate: Optional[str] = None
    count: Optional[int] = None
    sourceBundleId: Optional[str] = None
    sourceDeviceName: Optional[str] = None
    receivedAt: Optional[str] = None
    deleted: Optional[str] = None


_decode_line = msgspec.json.Decoder(_Line).decode


def earlier_layout(directory: Path) -> bool:
    return (directory / "users").is_dir() or (directory / "tokens.sqlite").is_file()


def import_layout(directory: Path, tx: Transaction, store: Store) -> None:
    histories = sorted((directory / "users").glob("*.jsonl")) if (directory / "users").is_dir() else []
    log(f"importing the JSONL layout of {directory} ({len(histories)} histories) into {directory / 'stepsync.sqlite'}")
    totals = [0, 0, 0]
    for path in histories:
        live, versions, deletions = _import_history(path, path.stem, tx)
        store.rebuild_daily_totals(tx, path.stem)
        sample_digests.rebuild(tx, path.stem)
        totals = [totals[0] + live, totals[1] + versions, totals[2] + deletions]
    tokens = _import_tokens(directory / "tokens.sqlite", tx)
    log(f"imported {len(histories)} users ({totals[0]} live samples, {totals[1]} earlier versions, {totals[2]} "
        f"deletions) and {tokens} tokens; the JSONL files and tokens.sqlite are left where they are and no longer read")


def _import_history(path: Path, user: str, tx: Transaction) -> tuple[int, int, int]:
    live: dict[str, tuple] = {}  # id -> its samples row (store.SAMPLE_COLUMNS)
    versions: list[tuple] = []
    deletions: list[tuple] = []
    base, position, offset = tx.next_request() * SEQ_PER_REQUEST, 0, 0
    with open(path, "rb") as handle:
        for number, line in enumerate(handle, 1):
            if not line.endswith(b"\n"):
                log(f"{path}: line {number} (byte offset {offset}) has no end: a write never acknowledged, left out")
                break
            if position == SEQ_PER_REQUEST:
                base, position = tx.next_request() * SEQ_PER_REQUEST, 0
            seq = base + position
            position += 1
            record = _record(line, path, number, offset)
            offset += len(line)
            if record.deleted is not None:
                gone = live.pop(record.deleted, None)
                if gone is not None:
                    versions.append(_version(gone))
                    deletions.append((user, seq, record.deleted, record.receivedAt))
            else:
                start, end = instant_ns(record.startDate), instant_ns(record.endDate)
                if start is None or end is None:
                    raise StartupError(f"cannot import {path}: line {number} (byte offset {offset - len(line)}): "
                                       "a date is not an RFC 3339 date-time")
                before = live.get(record.id)
                if before is not None:
                    versions.append(_version(before))
                live[record.id] = (user, record.id, seq, record.startDate, record.endDate, start, end, record.count * COUNT_SCALE,
                                   record.sourceBundleId, record.sourceDeviceName, record.receivedAt)
            if number % PROGRESS_LINES == 0:
                log(f"importing {path.name}: {number} lines")
    tx.insert("samples", SAMPLE_COLUMNS, list(live.values()))
    tx.insert("sample_versions", _STORED, versions)
    tx.insert("deletions", "user_name, seq, id, received_at", deletions)
    return len(live), len(versions), len(deletions)


def _record(line: bytes, path: Path, number: int, offset: int) -> _Line:
    try:
        record = _decode_line(line)
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError) as error:
        raise StartupError(f"cannot import {path}: line {number} (byte offset {offset}): {error}") from None
    sample = None not in (record.id, record.startDate, record.endDate, record.count, record.sourceBundleId)
    if record.receivedAt is None or (record.deleted is None) == (not sample):
        raise StartupError(f"cannot import {path}: line {number} (byte offset {offset}): neither a sample nor a deletion")
    return record


def _version(row: tuple) -> tuple:
    """A samples row (SAMPLE_COLUMNS) as a sample_versions row."""
    user, sample_id, seq, start_date, end_date, _, _, count, bundle, device, received_at = row
    return (user, seq, sample_id, start_date, end_date, count, bundle, device, received_at)


def _import_tokens(path: Path, tx: Transaction) -> int:
    if not path.is_file():
        return 0
    try:
        source = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True)
        try:
            rows = source.execute("SELECT id, user, hash, created_at, revoked_at FROM tokens").fetchall()
        finally:
            source.close()
    except sqlite3.Error as error:
        raise StartupError(f"cannot import {path}: {error}") from None
    tx.insert("tokens", "id, user_name, hash, created_at, revoked_at", rows)
    return len(rows)


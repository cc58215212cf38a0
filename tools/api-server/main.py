#!/usr/bin/env python3
"""StepSync receiving API server: stores uploaded step samples in a JSONL file.

Run:  python3 main.py [--host 127.0.0.1] [--port 8000] [--data PATH] [--log-level warning]

Endpoints (see README.md):
  GET    /health                       -> {"status":"ok"}
  POST   /steps  {"samples":[...]}     -> {"saved":N,"message":"Success"}
  GET    /steps?limit=L&offset=O       -> {"samples":[...],"total":N}
  DELETE /steps                        -> {"deleted":true,"message":"All samples deleted"}
  anything invalid                     -> 4xx {"error":"<one line naming the problem and where>"}

On-disk state, all beside the data file PATH:
  PATH                    the JSONL history, the only source of truth. One compact JSON object per line,
                          keys in the order id, startDate, endDate, count, sourceBundleId,
                          sourceDeviceName, receivedAt; UTF-8; appended, fsynced before any 200.
  PATH.index.sqlite       a derived index (id -> content digest, record number -> byte offset, and how
                          many bytes of PATH it covers). Rebuilt or caught up from PATH at start whenever
                          it is missing, corrupt, behind, or does not match PATH. Deleting it is safe.
  PATH.lock               holds an exclusive flock while a server uses PATH; names the owner's pid.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import re
import signal
import socket
import sqlite3
import sys
import threading
from datetime import datetime, timezone
from json.encoder import encode_basestring
from pathlib import Path
from typing import Any, Optional

import uvicorn
from fastapi import FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

HERE = Path(__file__).resolve().parent
DEFAULT_DATA = HERE / "data" / "steps.jsonl"

INDEX_SUFFIX = ".index.sqlite"
LOCK_SUFFIX = ".lock"
INDEX_FORMAT = 1  # bump when the index schema or the digest definition changes (forces a rebuild)

DEFAULT_LIMIT = 1000
MAX_LIMIT = 100_000
MAX_BODY_BYTES = 64 * 1024 * 1024
MAX_COUNT = 2**63 - 1  # the client's Int is 64-bit
TAIL_CHECK_BYTES = 4096  # the index keeps a digest of the last bytes it covers, to detect a replaced file
SQL_IN_CHUNK = 900  # ids per "WHERE id IN (...)" lookup
CATCH_UP_BATCH = 50_000  # JSONL lines per index transaction while rebuilding
MAX_REPORTED_BAD_LINES = 20


def log(message: str) -> None:
    """Diagnostics and progress go to stderr, one line each."""
    print(f"api-server: {message}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------------


class ApiError(Exception):
    """An error answered to the client as {"error": message} with the given HTTP status."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def bad_request(message: str) -> ApiError:
    return ApiError(400, message)


class StartupError(Exception):
    """The server cannot start (data file in use, unreadable, ...). Printed as one line, exit 1."""


# --------------------------------------------------------------------------------------------------
# Request validation (hand-written: exact one-line messages, and no per-sample pydantic overhead)
# --------------------------------------------------------------------------------------------------

# RFC 3339 date-time: the UTC designator "Z" or a "+HH:MM"/"-HH:MM" offset is required.
_DATE_RE = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}T(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]"
    r"(?:\.([0-9]{1,9}))?(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])",
    re.ASCII,
)
_DATE_HINT = "must be an ISO 8601 date-time with a UTC designator or offset, e.g. 2024-01-15T10:30:00Z"

# One shared encoder (json.dumps with keyword arguments builds a new encoder per call).
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
_json_string = encode_basestring  # str -> JSON string literal, non-ASCII kept as is (the C implementation)


def _describe(value: Any) -> str:
    """A short, single-line description of a JSON value for error messages."""
    if value is None:
        return "null"
    if value is True or value is False:
        return "boolean " + ("true" if value else "false")
    if isinstance(value, str):
        shown = json.dumps(value[:60]) + ("..." if len(value) > 60 else "")
        return "string " + shown
    if isinstance(value, (int, float)):
        text = repr(value)
        return "number " + (text if len(text) <= 40 else text[:40] + "...")
    if isinstance(value, list):
        return "array"
    return "object"


def _date_key(value: Any, index: int, field: str) -> tuple[str, int]:
    """Validates an RFC 3339 timestamp. Returns (UTC "YYYY-MM-DDTHH:MM:SS", nanoseconds), a key that
    orders instants exactly (fromisoformat alone would drop digits beyond microseconds)."""
    match = _DATE_RE.fullmatch(value) if type(value) is str else None
    if match is None:
        raise bad_request(f"samples[{index}].{field}: {_DATE_HINT} (got {_describe(value)})")
    try:
        instant = datetime.fromisoformat(value)  # checks the calendar (e.g. no February 30)
        fraction = match.group(1)
        nanoseconds = int(fraction.ljust(9, "0")) if fraction else 0
        if value[-1] == "Z":
            return value[:19], nanoseconds  # already UTC; this prefix sorts chronologically
        utc = instant.astimezone(timezone.utc).replace(microsecond=0, tzinfo=None)
        return utc.isoformat(), nanoseconds
    except ValueError:
        raise bad_request(f"samples[{index}].{field}: not a valid calendar date-time (got {_describe(value)})") from None
    except OverflowError:
        raise bad_request(f"samples[{index}].{field}: outside years 1-9999 in UTC (got {_describe(value)})") from None


def content_json(start: Any, end: Any, count: Any, bundle: Any, device: Any) -> str:
    """The five content fields, compact, in file order. Its digest is what idempotency compares.
    Same text as _ENCODER.encode({...}); the fast path skips building a C encoder per call."""
    if type(start) is str and type(end) is str and type(count) is int and type(bundle) is str:
        if device is None:
            device_json = "null"
        elif type(device) is str:
            device_json = _json_string(device)
        else:
            device_json = None
        if device_json is not None:
            return (
                f'{{"startDate":{_json_string(start)},"endDate":{_json_string(end)},"count":{count},'
                f'"sourceBundleId":{_json_string(bundle)},"sourceDeviceName":{device_json}}}'
            )
    return _ENCODER.encode(
        {"startDate": start, "endDate": end, "count": count, "sourceBundleId": bundle, "sourceDeviceName": device}
    )


def content_digest(content: bytes) -> bytes:
    return hashlib.blake2b(content, digest_size=16).digest()


class Sample:
    """One validated sample: its id and the UTF-8 JSON pieces needed to write its line."""

    __slots__ = ("id", "id_json", "content", "digest")

    def __init__(self, sample_id: str, id_json: bytes, content: bytes) -> None:
        self.id = sample_id
        self.id_json = id_json  # the JSON string literal of the id, UTF-8
        self.content = content  # content_json(...) as UTF-8: b'{"startDate":...,"sourceDeviceName":...}'
        self.digest = content_digest(content)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def parse_body(body: bytes) -> list[Sample]:
    """Parses and validates a POST /steps body. Raises ApiError(400) naming the first problem found."""
    if not body.strip():
        raise bad_request('body is empty; expected a JSON object like {"samples":[...]}')
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as error:
        raise bad_request(f"body is not valid UTF-8 (byte offset {error.start})") from None
    try:
        document = json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as error:
        raise bad_request(f"body is not valid JSON (line {error.lineno}, column {error.colno}): {error.msg}") from None
    except RecursionError:
        raise bad_request("body is not valid JSON: nested too deeply") from None
    except ValueError as error:  # NaN/Infinity, or an integer literal with too many digits
        raise bad_request(f"body is not valid JSON: {str(error).splitlines()[0]}") from None

    if type(document) is not dict:
        raise bad_request(f'body must be a JSON object like {{"samples":[...]}} (got {_describe(document)})')
    if "samples" not in document:
        raise bad_request("samples: field required")
    raw_samples = document["samples"]
    if type(raw_samples) is not list:
        raise bad_request(f"samples: must be an array (got {_describe(raw_samples)})")

    samples: list[Sample] = []
    append = samples.append
    for index, raw in enumerate(raw_samples):
        if type(raw) is not dict:
            raise bad_request(f"samples[{index}]: must be an object (got {_describe(raw)})")
        try:
            sample_id = raw["id"]
            start = raw["startDate"]
            end = raw["endDate"]
            count = raw["count"]
            bundle = raw["sourceBundleId"]
        except KeyError as missing:
            raise bad_request(f"samples[{index}].{missing.args[0]}: field required") from None
        device = raw.get("sourceDeviceName")

        if type(sample_id) is not str or not sample_id:
            raise bad_request(f"samples[{index}].id: must be a non-empty string (got {_describe(sample_id)})")
        start_key = _date_key(start, index, "startDate")
        end_key = _date_key(end, index, "endDate")
        if end_key < start_key:
            raise bad_request(f"samples[{index}].endDate: must not be before startDate ({end} < {start})")
        if type(count) is not int:
            raise bad_request(f"samples[{index}].count: must be an integer (got {_describe(count)})")
        if count < 0 or count > MAX_COUNT:
            raise bad_request(f"samples[{index}].count: must be between 0 and {MAX_COUNT} (got {_describe(count)})")
        if type(bundle) is not str or not bundle:
            raise bad_request(f"samples[{index}].sourceBundleId: must be a non-empty string (got {_describe(bundle)})")
        if device is not None and type(device) is not str:
            raise bad_request(f"samples[{index}].sourceDeviceName: must be a string or null (got {_describe(device)})")

        try:
            id_json = _json_string(sample_id).encode("utf-8")
            content = content_json(start, end, count, bundle, device).encode("utf-8")
        except UnicodeEncodeError:
            # Only the free-text fields can hold a lone surrogate (the dates matched an ASCII pattern).
            for field, text in (("id", sample_id), ("sourceBundleId", bundle), ("sourceDeviceName", device or "")):
                try:
                    text.encode("utf-8")
                except UnicodeEncodeError:
                    raise bad_request(
                        f"samples[{index}].{field}: contains an unpaired UTF-16 surrogate, which cannot be stored as UTF-8"
                    ) from None
            raise
        append(Sample(sample_id, id_json, content))
    return samples


def parse_stored_line(line: bytes) -> tuple[str, bytes]:
    """Returns (id, content digest) of one stored JSONL line (without its newline); ValueError if unusable."""
    record = json.loads(line.decode("utf-8"))  # ValueError (UnicodeDecodeError, JSONDecodeError) on bad bytes
    if type(record) is not dict:
        raise ValueError(f"not a JSON object ({_describe(record)})")
    sample_id = record.get("id")
    if type(sample_id) is not str or not sample_id:
        raise ValueError(f"id is not a non-empty string ({_describe(sample_id)})")
    content = content_json(
        record.get("startDate"),
        record.get("endDate"),
        record.get("count"),
        record.get("sourceBundleId"),
        record.get("sourceDeviceName"),
    )
    # surrogatepass: a hand-edited line may hold an escaped lone surrogate; POST never stores one.
    return sample_id, content_digest(content.encode("utf-8", "surrogatepass"))


# --------------------------------------------------------------------------------------------------
# Syscall helpers
# --------------------------------------------------------------------------------------------------


def sync_file(fd: int) -> None:
    """Makes written data durable: F_FULLFSYNC on Apple platforms (plain fsync is not durable across
    power loss there), fdatasync on Linux (covers the size change of an append), fsync elsewhere."""
    full_fsync = getattr(fcntl, "F_FULLFSYNC", None)
    if full_fsync is not None:
        try:
            fcntl.fcntl(fd, full_fsync)
            return
        except OSError:
            pass  # filesystem without F_FULLFSYNC support: fall back to fsync
    if hasattr(os, "fdatasync"):
        os.fdatasync(fd)
    else:
        os.fsync(fd)


def sync_directory(path: Path) -> None:
    """fsync a directory so that a file created, renamed or deleted in it stays so after a crash."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def make_directories(path: Path) -> None:
    """mkdir -p, fsyncing the parent of every directory created."""
    missing = []
    current = path
    while not current.exists():
        missing.append(current)
        current = current.parent
    for directory in reversed(missing):
        try:
            directory.mkdir()
        except FileExistsError:
            continue
        sync_directory(directory.parent)


def pwrite_all(fd: int, data: bytes, offset: int) -> None:
    """pwrite(2) until every byte is written (a write may be partial)."""
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset)
        if written <= 0:
            raise OSError(f"pwrite wrote {written} bytes")
        view = view[written:]
        offset += written


def pread_exact(fd: int, length: int, offset: int) -> bytes:
    """pread(2) until `length` bytes are read; fewer only at end of file."""
    chunks = []
    while length > 0:
        chunk = os.pread(fd, length, offset)
        if not chunk:
            break
        chunks.append(chunk)
        length -= len(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def remove_file(path: Path) -> bool:
    try:
        path.unlink()
        return True
    except FileNotFoundError:
        return False


# --------------------------------------------------------------------------------------------------
# The store: JSONL history + SQLite index
# --------------------------------------------------------------------------------------------------

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS ids (id TEXT PRIMARY KEY, digest BLOB NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS records (n INTEGER PRIMARY KEY, offset INTEGER NOT NULL);
"""


class StepStore:
    """Append-only JSONL history of step samples, deduplicated by id and content digest.

    Guarantees:
    - An append returns only after its lines are written and synced (fdatasync/F_FULLFSYNC).
    - Appends, their dedupe check and the index update happen under one lock: lines never interleave.
    - The index (id -> digest, record number -> byte offset, covered byte length) lives in SQLite beside
      the JSONL and is derived from it: on open it is rebuilt or caught up from the JSONL, so a crash
      between the JSONL sync and the index commit loses nothing.
    - A torn last line (the writer died mid-write; never acknowledged) is truncated on open, before any
      append.
    - After a failed write or sync, further writes are refused with the same error until restart.
    - One process per data file, enforced with an flock on PATH.lock.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.index_path = Path(str(path) + INDEX_SUFFIX)
        self.lock_path = Path(str(path) + LOCK_SUFFIX)
        self._lock = threading.Lock()
        self._fd = -1
        self._lock_fd = -1
        self._db: Optional[sqlite3.Connection] = None
        self._failure: Optional[str] = None
        self._generation = 0  # bumped by delete_all, so readers can tell their byte range went away
        self.size = 0  # bytes of the JSONL covered by the index (always ends on a line boundary)
        self.records = 0  # indexed lines
        self.ids = 0  # distinct ids

    # -- opening -------------------------------------------------------------------------------------

    def open(self) -> None:
        make_directories(self.path.parent)
        self._acquire_owner_lock()
        try:
            self._open_jsonl()
            self._open_index()
        except BaseException:
            self.close()
            raise

    def _acquire_owner_lock(self) -> None:
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            owner = os.pread(fd, 200, 0).decode("utf-8", "replace").strip() or "unknown owner"
            os.close(fd)
            raise StartupError(f"{self.path} is in use by another api-server ({owner}; lock {self.lock_path})")
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()}\n".encode(), 0)
        self._lock_fd = fd

    def _open_jsonl(self) -> None:
        flags = os.O_RDWR | os.O_CLOEXEC
        try:
            self._fd = os.open(self.path, flags | os.O_CREAT | os.O_EXCL, 0o644)
            os.fsync(self._fd)
            sync_directory(self.path.parent)
        except FileExistsError:
            self._fd = os.open(self.path, flags)
        self.size = self._truncate_torn_tail(os.fstat(self._fd).st_size)

    def _truncate_torn_tail(self, size: int) -> int:
        """If the file does not end with a newline, the writer died mid-append: cut back to the last one."""
        if size == 0 or os.pread(self._fd, 1, size - 1) == b"\n":
            return size
        keep = 0
        position = size
        while position > 0:
            start = max(0, position - 65536)
            newline = pread_exact(self._fd, position - start, start).rfind(b"\n")
            if newline >= 0:
                keep = start + newline + 1
                break
            position = start
        os.ftruncate(self._fd, keep)
        sync_file(self._fd)
        log(f"{self.path}: dropped {size - keep} bytes of a partial last line at byte offset {keep} (torn write)")
        return keep

    def _connect_index(self) -> sqlite3.Connection:
        created = not self.index_path.exists()
        db = sqlite3.connect(self.index_path, isolation_level=None, check_same_thread=False)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            # NORMAL may lose the last commits on power loss; the index is then behind and caught up.
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute("PRAGMA cache_size=-65536")
            db.execute("PRAGMA temp_store=MEMORY")
            db.executescript(_SCHEMA)
        except BaseException:
            db.close()
            raise
        if created:
            sync_directory(self.index_path.parent)
        return db

    def _remove_index_files(self) -> None:
        removed = False
        for suffix in ("", "-wal", "-shm", "-journal"):
            removed |= remove_file(Path(str(self.index_path) + suffix))
        if removed:
            sync_directory(self.index_path.parent)

    def _fresh_index(self) -> sqlite3.Connection:
        """Drops the index files and starts an empty index, durably (synchronous=FULL for its first commit),
        so that an older index can never reappear after a crash."""
        if self._db is not None:
            self._db.close()
            self._db = None
        self._remove_index_files()
        db = self._connect_index()
        db.execute("PRAGMA synchronous=FULL")
        db.execute("BEGIN")
        db.execute(
            "INSERT OR REPLACE INTO meta(key, value) VALUES ('format', ?), ('covered', 0), ('records', 0), "
            "('ids', 0), ('tail', x'')",
            (INDEX_FORMAT,),
        )
        db.execute("COMMIT")
        db.execute("PRAGMA synchronous=NORMAL")
        return db

    def _tail_digest(self, covered: int) -> bytes:
        start = max(0, covered - TAIL_CHECK_BYTES)
        return hashlib.blake2b(pread_exact(self._fd, covered - start, start), digest_size=16).digest()

    def _open_index(self) -> None:
        reason = None
        meta: dict[str, Any] = {}
        if not self.index_path.exists():
            # A -wal left beside a deleted index would be replayed into the new, empty database.
            self._remove_index_files()
        try:
            self._db = self._connect_index()
            meta = dict(self._db.execute("SELECT key, value FROM meta"))
            if meta.get("format") != INDEX_FORMAT:
                reason = "missing" if not meta else f"format {meta.get('format')!r}, expected {INDEX_FORMAT}"
            elif not {"covered", "records", "ids", "tail"} <= meta.keys():
                reason = "incomplete (meta keys missing)"
        except sqlite3.DatabaseError as error:
            reason = f"unreadable ({error})"
            if self._db is not None:
                self._db.close()
                self._db = None

        if reason is None:
            covered = int(meta["covered"])
            if covered > self.size:
                reason = f"covers {covered} bytes but the JSONL has only {self.size}"
            elif covered > 0 and meta["tail"] != self._tail_digest(covered):
                reason = f"does not match the JSONL bytes before offset {covered} (file replaced?)"

        jsonl_size = self.size
        if reason is None:
            self.size = int(meta["covered"])
            self.records = int(meta["records"])
            self.ids = int(meta["ids"])
            try:
                if self.size < jsonl_size:
                    self._catch_up(jsonl_size)
                return
            except sqlite3.DatabaseError as error:  # e.g. "database disk image is malformed"
                reason = f"failed while catching up ({error})"
        if jsonl_size > 0 or reason != "missing":
            log(f"index {self.index_path} {reason}; rebuilding it from {self.path}")
        self._db = self._fresh_index()
        self.size = self.records = self.ids = 0
        if jsonl_size > 0:
            self._catch_up(jsonl_size)

    def _catch_up(self, end: int) -> None:
        """Indexes the JSONL lines between self.size and end (a line boundary)."""
        start = self.size
        total_mb = (end - start) / 1e6
        loud = total_mb >= 64
        if loud:
            log(f"indexing {total_mb:.0f} MB of {self.path} from byte offset {start}")
        bad_lines = 0
        next_report = start + 256_000_000
        with open(self.path, "rb", buffering=1 << 20) as stream:
            stream.seek(start)
            position = start
            entries: list[tuple[str, bytes, int]] = []
            while position < end:
                line = stream.readline()
                if not line:
                    break
                line_start = position
                position += len(line)
                if position > end or not line.endswith(b"\n"):
                    position = line_start  # cannot happen while we hold the owner lock; stop to be safe
                    break
                try:
                    sample_id, digest = parse_stored_line(line[:-1])
                except (ValueError, RecursionError) as error:
                    bad_lines += 1
                    if bad_lines <= MAX_REPORTED_BAD_LINES:
                        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
                        log(f"{self.path}: skipping unreadable line at byte offset {line_start} "
                            f"({len(line)} bytes): {reason}")
                else:
                    entries.append((sample_id, digest, line_start))
                if len(entries) >= CATCH_UP_BATCH:
                    self._index_append(entries, None, position)
                    entries = []
                    if loud and position >= next_report:
                        log(f"indexed {(position - start) / 1e6:.0f} of {total_mb:.0f} MB")
                        next_report = position + 256_000_000
            self._index_append(entries, None, position)
        if bad_lines:
            log(f"{self.path}: {bad_lines} unreadable lines skipped (left in the file, not served)")
        if loud:
            log(f"indexed {self.path}: {self.records} records, {self.ids} ids")

    # -- index updates (caller holds self._lock or is still opening) --------------------------------

    def _lookup(self, ids: list[str]) -> dict[str, bytes]:
        """Stored digests of those ids that are known."""
        assert self._db is not None
        found: dict[str, bytes] = {}
        for first in range(0, len(ids), SQL_IN_CHUNK):
            chunk = ids[first : first + SQL_IN_CHUNK]
            query = "SELECT id, digest FROM ids WHERE id IN (" + ",".join("?" * len(chunk)) + ")"
            found.update(self._db.execute(query, chunk))
        return found

    def _index_append(self, entries: list[tuple[str, bytes, int]], known: Optional[dict[str, bytes]], covered: int) -> None:
        """One transaction: records for `entries` (id, digest, byte offset; file order), their ids
        (last digest wins), and the covered length. `known` holds the stored digests of those ids."""
        db = self._db
        assert db is not None
        if known is None:
            known = self._lookup(list(dict.fromkeys(entry[0] for entry in entries)))
        new_ids = len({entry[0] for entry in entries if entry[0] not in known})
        records = self.records
        db.execute("BEGIN")
        try:
            db.executemany(
                "INSERT INTO records(n, offset) VALUES (?, ?)",
                [(records + k, entry[2]) for k, entry in enumerate(entries)],
            )
            db.executemany(
                "INSERT INTO ids(id, digest) VALUES (?, ?) ON CONFLICT(id) DO UPDATE SET digest = excluded.digest",
                [(entry[0], entry[1]) for entry in entries],
            )
            db.execute(
                "INSERT OR REPLACE INTO meta(key, value) VALUES ('covered', ?), ('records', ?), ('ids', ?), ('tail', ?)",
                (covered, records + len(entries), self.ids + new_ids, self._tail_digest(covered)),
            )
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
        self.size = covered
        self.records = records + len(entries)
        self.ids += new_ids

    def _drop_corrupt_index(self) -> None:
        """The index is corrupt (not merely full or busy): delete it so that the next start rebuilds it
        from the JSONL instead of finding a well-formed header and trusting it."""
        log(f"index {self.index_path} is corrupt; removing it, it is rebuilt on restart")
        if self._db is not None:
            self._db.close()
            self._db = None
        try:
            self._remove_index_files()
        except OSError as error:
            log(f"cannot remove {self.index_path}: {error}; delete it before restarting")

    def _fail(self, message: str) -> ApiError:
        self._failure = message
        log(f"store failed, refusing writes until restart: {message}")
        return ApiError(503, f"store failed, refusing writes until the server restarts: {message}")

    def _check_writable(self) -> None:
        if self._failure is not None:
            raise ApiError(503, f"store failed, refusing writes until the server restarts: {self._failure}")
        if self._fd < 0:
            raise ApiError(503, "store is closed")

    @property
    def failure(self) -> Optional[str]:
        return self._failure

    # -- public operations ---------------------------------------------------------------------------

    def append(self, samples: list[Sample]) -> int:
        """Stores the samples not already stored with identical content; returns how many were written.
        Within one call, a repeated id counts once and its last occurrence wins."""
        batch: dict[str, Sample] = {}
        for sample in samples:
            batch[sample.id] = sample
        with self._lock:
            self._check_writable()
            known = self._lookup(list(batch))
            fresh = [sample for sample in batch.values() if known.get(sample.id) != sample.digest]
            if not fresh:
                return 0
            received_at = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
            suffix = b',"receivedAt":"' + received_at.encode() + b'"}\n'
            offset = self.size
            lines = []
            entries = []
            for sample in fresh:
                line = b'{"id":' + sample.id_json + b"," + sample.content[1:-1] + suffix
                entries.append((sample.id, sample.digest, offset))
                lines.append(line)
                offset += len(line)
            try:
                pwrite_all(self._fd, b"".join(lines), self.size)
                sync_file(self._fd)
            except OSError as error:
                raise self._fail(f"writing {self.path} at byte offset {self.size}: {error}") from None
            try:
                self._index_append(entries, known, offset)
            except sqlite3.Error as error:
                failure = self._fail(f"updating {self.index_path}: {error}")
                if isinstance(error, sqlite3.DatabaseError) and not isinstance(error, sqlite3.OperationalError):
                    self._drop_corrupt_index()
                raise failure from None
            return len(fresh)

    def read(self, offset: int, limit: int) -> tuple[list[bytes], int]:
        """Stored lines [offset, offset+limit) in the order received, and the number of records."""
        while True:
            with self._lock:
                total = self.records
                if self._db is None:
                    raise ApiError(503, f"index unavailable after an earlier failure: {self._failure}")
                if limit <= 0 or offset >= total:
                    return [], total
                stop = min(total, offset + limit)
                generation = self._generation
                rows = self._db.execute(
                    "SELECT offset FROM records WHERE n >= ? AND n <= ? ORDER BY n", (offset, stop)
                ).fetchall()
                end = rows.pop()[0] if stop < total else self.size
            start = rows[0][0]
            # Read outside the lock: lines below self.size never change, except through delete_all,
            # which bumps the generation; then the range is read again.
            data = pread_exact(self._fd, end - start, start)
            lines = []
            try:
                for (line_offset,) in rows:
                    relative = line_offset - start
                    lines.append(data[relative : data.index(b"\n", relative)])
            except ValueError:
                lines = None
            if generation == self._generation:
                if lines is None:
                    raise RuntimeError(f"{self.path}: record bytes {start}..{end} are not complete lines")
                return lines, total

    def delete_all(self) -> None:
        """Truncates the JSONL to zero bytes (synced) and starts a fresh index."""
        with self._lock:
            self._check_writable()
            self._generation += 1
            try:
                os.ftruncate(self._fd, 0)
                sync_file(self._fd)
            except OSError as error:
                raise self._fail(f"truncating {self.path}: {error}") from None
            # A crash from here on leaves an index covering more than the (empty) JSONL: rebuilt on open.
            try:
                self._db = self._fresh_index()
            except (OSError, sqlite3.Error) as error:
                raise self._fail(f"recreating {self.index_path}: {error}") from None
            self.size = self.records = self.ids = 0

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                try:
                    self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                except sqlite3.Error:
                    pass
                self._db.close()
                self._db = None
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
            if self._lock_fd >= 0:
                os.close(self._lock_fd)  # releases the flock; the file stays (unlinking would race)
                self._lock_fd = -1


# --------------------------------------------------------------------------------------------------
# HTTP layer
# --------------------------------------------------------------------------------------------------


def _format_location(location: tuple) -> str:
    """('body', 'samples', 3, 'count') -> 'samples[3].count'; ('query', 'limit') -> 'limit'."""
    parts = list(location)
    if parts and parts[0] in ("body", "query", "path", "header", "cookie"):
        parts = parts[1:]
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "body"


def create_app(store: StepStore) -> FastAPI:
    app = FastAPI(title="StepSync API server", docs_url=None, redoc_url=None, openapi_url=None)

    def error_response(status: int, message: str, headers: Optional[dict] = None) -> JSONResponse:
        return JSONResponse({"error": message}, status_code=status, headers=headers)

    @app.exception_handler(ApiError)
    async def api_error_handler(request: Request, error: ApiError) -> JSONResponse:
        return error_response(error.status, error.message)

    @app.exception_handler(RequestValidationError)
    async def validation_error_handler(request: Request, error: RequestValidationError) -> JSONResponse:
        # Not reached by POST /steps (validated by hand); kept so FastAPI's 422 can never leak out.
        first = error.errors()[0] if error.errors() else {}
        if first.get("type") == "json_invalid":
            message = f"body is not valid JSON: {first.get('ctx', {}).get('error', 'parse error')}"
        else:
            message = f"{_format_location(tuple(first.get('loc', ())))}: {first.get('msg', 'invalid value')}"
            if "input" in first and first.get("type") != "missing":
                message += f" (got {_describe(first['input'])})"
        return error_response(400, message.splitlines()[0] if message else "invalid request")

    @app.exception_handler(StarletteHTTPException)
    async def http_error_handler(request: Request, error: StarletteHTTPException) -> JSONResponse:
        message = f"{error.detail}: {request.method} {request.url.path}"
        headers = dict(error.headers or {})
        if error.status_code == 405:
            # Starlette names only the first route matching the path; list the methods of all of them.
            methods = set()
            for route in app.routes:
                if route.matches(request.scope)[0] is not Match.NONE:
                    methods |= set(getattr(route, "methods", None) or ())
            if methods:
                headers["Allow"] = ", ".join(sorted(methods))
        if headers.get("Allow"):
            message += f" (allowed: {headers['Allow']})"
        return error_response(error.status_code, message, headers or None)

    @app.exception_handler(Exception)
    async def internal_error_handler(request: Request, error: Exception) -> JSONResponse:
        first_line = (str(error).splitlines() or [""])[0]
        log(f"internal error on {request.method} {request.url.path}: {type(error).__name__}: {first_line}")
        return error_response(500, f"internal error: {type(error).__name__}: {first_line}")

    @app.get("/health")
    async def health() -> JSONResponse:
        if store.failure is not None:
            return JSONResponse({"status": "error", "error": store.failure}, status_code=503)
        return JSONResponse({"status": "ok"})

    def check_content_type(value: Optional[str]) -> None:
        if value is None:
            return  # tolerate clients that send none
        media_type, _, parameters = value.partition(";")
        media_type = media_type.strip().lower()
        if media_type != "application/json" and not (media_type.startswith("application/") and media_type.endswith("+json")):
            raise bad_request(f"Content-Type must be application/json (got {json.dumps(value)})")
        for parameter in parameters.split(";"):
            name, _, charset = parameter.partition("=")
            if name.strip().lower() == "charset" and charset.strip().strip('"').lower() not in ("utf-8", "utf8"):
                raise bad_request(f"Content-Type charset must be utf-8 (got {json.dumps(value)})")

    async def read_body(request: Request) -> bytes:
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > MAX_BODY_BYTES:
            raise ApiError(413, f"body too large: {declared} bytes (max {MAX_BODY_BYTES})")
        chunks = []
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > MAX_BODY_BYTES:
                raise ApiError(413, f"body too large: more than {MAX_BODY_BYTES} bytes")
            chunks.append(chunk)
        return b"".join(chunks)

    def store_samples(body: bytes) -> Optional[int]:
        samples = parse_body(body)
        if not samples:
            return None
        return store.append(samples)

    @app.post("/steps")
    async def post_steps(request: Request) -> JSONResponse:
        check_content_type(request.headers.get("content-type"))
        body = await read_body(request)
        saved = await run_in_threadpool(store_samples, body)
        if saved is None:
            return JSONResponse({"saved": 0, "message": "No samples provided"})
        return JSONResponse({"saved": saved, "message": "Success"})

    @app.get("/steps")
    def get_steps(
        limit: int = Query(DEFAULT_LIMIT, ge=0, le=MAX_LIMIT),
        offset: int = Query(0, ge=0),
    ) -> Response:
        lines, total = store.read(offset, limit)
        body = b'{"samples":[' + b",".join(lines) + b'],"total":' + str(total).encode() + b"}"
        return Response(content=body, media_type="application/json")

    @app.delete("/steps")
    def delete_steps() -> JSONResponse:
        store.delete_all()
        return JSONResponse({"deleted": True, "message": "All samples deleted"})

    return app


# --------------------------------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------------------------------


def parse_arguments(argv: Optional[list[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="main.py", description="StepSync receiving API server (JSONL storage).")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="TCP port (default 8000; 0 picks a free one)")
    parser.add_argument(
        "--data",
        default=None,
        help=f"JSONL data file (default {DEFAULT_DATA.relative_to(HERE)} beside main.py; "
        "a relative PATH is resolved against the current directory)",
    )
    parser.add_argument(
        "--log-level",
        default="warning",
        choices=["critical", "error", "warning", "info", "debug", "trace"],
        help="uvicorn log level (default warning: no per-request access logs)",
    )
    return parser.parse_args(argv)


def listen_socket(host: str, port: int) -> socket.socket:
    family, kind, protocol, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    sock = socket.socket(family, kind, protocol)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(2048)
    except BaseException:
        sock.close()
        raise
    sock.set_inheritable(False)
    return sock


def main(argv: Optional[list[str]] = None) -> int:
    arguments = parse_arguments(argv)
    data_path = DEFAULT_DATA if arguments.data is None else Path(arguments.data).expanduser().resolve()

    store = StepStore(data_path)
    try:
        store.open()
    except StartupError as error:
        log(f"error: {error}")
        return 1
    except (OSError, sqlite3.Error) as error:
        log(f"error: cannot open {data_path}: {type(error).__name__}: {error}")
        return 1

    try:
        try:
            sock = listen_socket(arguments.host, arguments.port)
        except OSError as error:
            log(f"error: cannot listen on {arguments.host}:{arguments.port}: {error}")
            return 1

        host, port = sock.getsockname()[:2]
        config = uvicorn.Config(
            create_app(store),
            host=host,
            port=port,
            log_level=arguments.log_level,
            lifespan="off",
            http="h11",
            ws="none",
            loop="asyncio",
            server_header=False,
        )
        server = uvicorn.Server(config)

        # While serving, uvicorn handles SIGINT/SIGTERM itself (graceful shutdown); afterwards it restores
        # the previous handlers and re-raises the signal. These handlers cover the moments before and after:
        # a stop requested before serving starts makes uvicorn skip its main loop, and the re-raise is
        # absorbed so that a requested stop exits with status 0.
        def request_stop(number: int, frame: Any) -> None:
            server.should_exit = True

        for stop_signal in (signal.SIGINT, signal.SIGTERM):
            signal.signal(stop_signal, request_stop)

        shown_host = f"[{host}]" if ":" in host else host
        print(
            f"api-server listening on http://{shown_host}:{port}, data {data_path} "
            f"({store.records} records, {store.ids} ids)",
            file=sys.stderr,
            flush=True,
        )
        with sock:
            server.run(sockets=[sock])
        return 0
    finally:
        store.close()


if __name__ == "__main__":
    sys.exit(main())

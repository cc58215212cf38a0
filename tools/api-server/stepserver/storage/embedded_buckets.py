"""Where the embedded backend keeps the daily buckets between runs (stepserver/daily_buckets.py):
DIR/users/NAME.buckets, written when the server stops (write NAME.buckets.PID.tmp, fsync, rename, fsync the
directory). Its layout: MAGIC, the save's id (16 bytes), the header's length (4 bytes, little-endian),
the header, the sums. The header is read when the user is first used, the sums a range of days at a
time (a read checks the id first: a file replaced since is not mixed in). Its state is the history's
size and modification time: the history only grows or is truncated, so any write since the file was
saved (a crash after it, a line added by hand while stopped) changes them, and the file is then not used."""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import Optional

from .embedded import EmbeddedStorage
from .files import sync_directory, sync_file

SUFFIX = ".buckets"
MAGIC = b"stepbkt\x03"  # the last byte: the layout's version
_PREFIX = struct.Struct("<8s16sI")  # MAGIC, the save's id, the header's length
MAX_HEADER = 1 << 30


class EmbeddedBucketStore:
    def __init__(self, storage: EmbeddedStorage) -> None:
        self.storage = storage

    def _path(self, user: str) -> Path:
        return self.storage.users_directory / (user + SUFFIX)

    def state(self, user: str) -> Optional[str]:
        """The history's size and modification time, or None when the user has none."""
        return self.storage.history_state(user)

    def _open(self, user: str) -> Optional[tuple[int, bytes, int]]:
        """An open descriptor, the save's id and the header's length; None when there is no file."""
        try:
            fd = os.open(self._path(user), os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        try:
            prefix = os.pread(fd, _PREFIX.size, 0)
            if len(prefix) < _PREFIX.size:
                raise ValueError(f"{self._path(user)}: {len(prefix)} bytes, shorter than its prefix ({_PREFIX.size})")
            magic, saved_id, length = _PREFIX.unpack(prefix)
            if magic != MAGIC:
                raise ValueError(f"{self._path(user)}: not a buckets file of this layout (its first 8 bytes {magic!r})")
            if length > MAX_HEADER:
                raise ValueError(f"{self._path(user)}: a header of {length} bytes")
            return fd, saved_id, length
        except BaseException:
            os.close(fd)
            raise

    def load_header(self, user: str) -> Optional[bytes]:
        opened = self._open(user)
        if opened is None:
            return None
        fd, _, length = opened
        try:
            header = os.pread(fd, length, _PREFIX.size)
            if len(header) != length:
                raise ValueError(f"{self._path(user)}: a header of {length} bytes, {len(header)} there")
            return header
        finally:
            os.close(fd)

    def load_sums(self, user: str, saved_id: bytes, offset: int, length: int) -> Optional[bytes]:
        opened = self._open(user)
        if opened is None:
            return None
        fd, found_id, header_length = opened
        try:
            if found_id != saved_id:
                return None
            return os.pread(fd, length, _PREFIX.size + header_length + offset)
        finally:
            os.close(fd)

    def save(self, user: str, saved_id: bytes, header: bytes, sums: bytes) -> None:
        path = self._path(user)
        temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")  # workers save side by side
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        try:
            for part in (_PREFIX.pack(MAGIC, saved_id, len(header)), header, sums):
                view = memoryview(part)
                while view:
                    view = view[os.write(fd, view):]
            sync_file(fd)
        finally:
            os.close(fd)
        os.replace(temporary, path)
        sync_directory(path.parent)

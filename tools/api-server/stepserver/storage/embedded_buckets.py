"""Where the embedded backend keeps the daily buckets between runs (stepserver/daily_buckets.py):
DIR/users/NAME.buckets, written when the server stops (write NAME.buckets.tmp, fsync, rename, fsync the
directory) and read when the user is first used. Its state is the history's size and modification
time: the history only grows or is truncated, so any write since the file was saved (a crash after
it, a line added by hand while stopped) changes them, and the file is then not used."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

from .embedded import JSONL_SUFFIX, EmbeddedStorage
from .files import sync_directory, sync_file

SUFFIX = ".buckets"


class EmbeddedBucketStore:
    def __init__(self, storage: EmbeddedStorage) -> None:
        self.storage = storage

    def _path(self, user: str) -> Path:
        return self.storage.users_directory / (user + SUFFIX)

    def state(self, user: str) -> Optional[str]:
        """The history's size and modification time, or None when the user has none."""
        path = self.storage.users_directory / (user + JSONL_SUFFIX)
        try:
            status = os.stat(path)
        except FileNotFoundError:
            return None
        return f"{status.st_size}:{status.st_mtime_ns}"

    def load(self, user: str) -> Optional[bytes]:
        try:
            return self._path(user).read_bytes()
        except FileNotFoundError:
            return None

    def save(self, user: str, blob: bytes) -> None:
        path = self._path(user)
        temporary = path.with_name(path.name + ".tmp")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        try:
            view = memoryview(blob)
            while view:
                view = view[os.write(fd, view):]
            sync_file(fd)
        finally:
            os.close(fd)
        os.replace(temporary, path)
        sync_directory(path.parent)

"""Whether the SQLite database's directory takes writes: before a write fails, by its free space (looked
at once a second); after one failed, by DIR/.probe rewritten (4 KiB, fsync) until it takes writes again."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Optional

from ..log import log

PROBE_BYTES = 4096
PROBE_BACKOFF_FIRST_S = 0.25
PROBE_BACKOFF_MAX_S = 5.0
MIN_FREE_BYTES = 1024 * 1024  # less than this free (a batch's pages and WAL frames), and /health says no
SPACE_CHECK_S = 1.0


class WritabilityProbe:
    """Tells whether the data directory takes writes, probing by rewriting a small file and syncing it.
    While storage fails, probes are spaced by a doubling back-off; while it works, by a fixed interval."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / ".probe"
        self.lock = threading.Lock()
        self.failure: Optional[str] = None
        self.next_probe = float("inf")  # no probe until a write failed
        self.backoff = PROBE_BACKOFF_FIRST_S
        self.space_checked = float("-inf")
        self.low_space: Optional[str] = None

    def failed(self, reason: str) -> None:
        with self.lock:
            if self.failure is None:
                log(f"storage refuses writes: {reason}")
                self.backoff = PROBE_BACKOFF_FIRST_S
            self.failure = reason
            self.next_probe = time.monotonic() + self.backoff

    def status(self) -> Optional[str]:
        """The last probe's answer, at once; a probe that is due runs in the background. While no write
        failed: whether the filesystem has MIN_FREE_BYTES free."""
        if time.monotonic() >= self.next_probe and self.lock.acquire(blocking=False):
            self.lock.release()
            threading.Thread(target=self.check, name="storage-probe", daemon=True).start()
        return self.failure or self._low_space()

    def _low_space(self) -> Optional[str]:
        now = time.monotonic()
        if now >= self.space_checked + SPACE_CHECK_S:
            self.space_checked = now
            try:
                found = os.statvfs(self.path.parent)
                free = found.f_bavail * found.f_frsize
            except OSError:
                free = MIN_FREE_BYTES
            low = f"storage nearly full ({free} bytes free in {self.path.parent})" if free < MIN_FREE_BYTES else None
            if low != self.low_space:
                log(low or "storage has space again")
            self.low_space = low
        return self.low_space

    def check(self) -> Optional[str]:
        """None if writable. Probes when one is due; otherwise answers from the last probe."""
        with self.lock:
            now = time.monotonic()
            if now < self.next_probe:
                return self.failure
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
                try:
                    os.ftruncate(fd, 0)
                    os.write(fd, b"\0" * PROBE_BYTES)
                    os.fsync(fd)
                    os.ftruncate(fd, 0)
                finally:
                    os.close(fd)
            except OSError as error:
                reason = f"storage refuses writes ({self.path}: {os.strerror(error.errno) if error.errno else error})"
                if self.failure is None:
                    log(reason)
                    self.backoff = PROBE_BACKOFF_FIRST_S
                else:
                    self.backoff = min(self.backoff * 2, PROBE_BACKOFF_MAX_S)
                self.failure = reason
                self.next_probe = now + self.backoff
                return self.failure
            if self.failure is not None:
                log("storage takes writes again")
            self.failure = None
            self.backoff = PROBE_BACKOFF_FIRST_S
            self.next_probe = float("inf")  # until the next failed write
            return None

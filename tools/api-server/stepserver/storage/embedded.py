"""The embedded backend: one append-only JSONL history per user (the source of truth, user_log.py),
indexed in memory, under one data directory.

Layout of the data directory DIR:
  DIR/LOCK                 flock held while a server uses DIR (its supervisor, with --workers); names the owner's pid
  DIR/tokens.sqlite        API tokens (hashes only), see auth.py and sqlite_tokens.py
  DIR/users/NAME.jsonl     NAME's history (user_log.py)
  DIR/users/NAME.lock      flock the workers of --workers share NAME's history through (user_log.py)
  DIR/users/NAME.buckets   NAME's daily buckets saved at the last stop (embedded_buckets.py)
  DIR/.probe               rewritten (4 KiB, fdatasync) to learn whether the disk takes writes again (writability.py)

Several workers (--workers N): the supervisor holds DIR/LOCK for its workers, and cuts torn last lines
and removes the temporary files a killed save left (_remove_stale_temporaries) before forking them;
each worker indexes a user's history when it first serves that user (EmbeddedStorage's role "worker";
how the workers share a history: user_log.py).
"""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path
from typing import Iterator, Optional

from ..contract import SampleFields
from ..errors import StartupError, StorageUnavailable
from ..log import log
from ..sample_columns import SampleColumns, empty_columns
from .base import DaySample, ForeignWrite
from .files import lock_owner, make_directories, sync_directory
from .sqlite_tokens import SqliteTokenStore
from .user_log import JSONL_SUFFIX, UserLog, cut_torn_tail, history_state, storage_failure
from .writability import WritabilityProbe

USERS_DIRECTORY = "users"
USER_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
_USER_RE = re.compile(USER_NAME_PATTERN[1:-1], re.ASCII)
_STALE_TEMPORARY = re.compile(USER_NAME_PATTERN[1:-1] + r"(?:\.buckets\.[0-9]+\.tmp|\.jsonl\.[0-9]+\.new)", re.ASCII)


def valid_user_name(name: str) -> bool:
    return _USER_RE.fullmatch(name) is not None


class EmbeddedStorage:
    """Users' JSONL histories under one data directory, one server at a time.

    `role`: "alone" (one process: opens and indexes every history at start), "supervisor" (the parent
    of --workers: holds DIR/LOCK for them and cuts torn last lines, indexes nothing) or "worker" (one of
    its children: DIR/LOCK is the supervisor's; a history is indexed when first used, and shared with
    the other workers through NAME.lock, see UserLog)."""

    def __init__(self, directory: Path, role: str = "alone") -> None:
        if role not in ("alone", "supervisor", "worker"):
            raise ValueError(f"role {role!r}")
        self.directory = directory
        self.users_directory = directory / USERS_DIRECTORY
        self.role = role
        self._lock = threading.Lock()
        self._logs: dict[str, UserLog] = {}
        self._lock_fd = -1
        self.probe = WritabilityProbe(directory)
        self.tokens = SqliteTokenStore(directory / "tokens.sqlite")
        # Told what another worker wrote (user, samples, replaced texts; (user, None, None): anything),
        # when a history applies it: the daily totals' caches follow (app.Context).
        self.on_foreign: Optional[ForeignWrite] = None

    def open(self) -> None:
        if self.directory.exists() and not self.directory.is_dir():
            raise StartupError(f"--data {self.directory} is a file; it must be a directory (a JSONL file of an "
                               f"earlier version goes to DIR/{USERS_DIRECTORY}/local.jsonl)")
        make_directories(self.users_directory)
        if self.role != "worker":
            try:
                self._lock_fd = lock_owner(self.directory / "LOCK", str(self.directory))
            except BlockingIOError as error:
                raise StartupError(str(error)) from None
        try:
            if self.role != "worker":
                self._remove_stale_temporaries()
            self.tokens.open()
            for path in sorted(self.users_directory.glob("*" + JSONL_SUFFIX)):
                user = path.name[: -len(JSONL_SUFFIX)]
                if not valid_user_name(user):
                    continue
                if self.role == "alone":
                    self._open_user(user)
                elif self.role == "supervisor":  # no worker runs yet: a torn last line is a crash's
                    fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
                    try:
                        cut_torn_tail(fd, path, os.fstat(fd).st_size)
                    finally:
                        os.close(fd)
            self.probe.check()
        except BaseException:
            self.close()
            raise

    def _remove_stale_temporaries(self) -> None:
        """Removes what a process killed mid-save left in DIR/users: NAME.buckets.PID.tmp (a save of the
        daily buckets, embedded_buckets.py) and NAME.jsonl.PID.new (the empty history of a DELETE /steps
        under --workers, user_log.py). Called holding DIR/LOCK before any worker starts, so no save is
        under way; each would otherwise stay for ever, since the next save has another pid."""
        removed = False
        for path in sorted(self.users_directory.iterdir()):
            if _STALE_TEMPORARY.fullmatch(path.name) is None or not path.is_file():
                continue
            try:
                path.unlink()
            except FileNotFoundError:
                continue
            except OSError as error:  # garbage, not a reason to refuse to start
                log(f"{path}: left by a save that did not finish; cannot remove it: {error.strerror or error}")
                continue
            removed = True
            log(f"{path}: removed, left by a save that did not finish")
        if removed:
            try:
                sync_directory(self.users_directory)
            except OSError as error:
                log(f"{self.users_directory}: fsync after removing temporary files: {error.strerror or error}")

    def keep_lock_for_workers(self) -> int:
        """The supervisor: the descriptor holding DIR/LOCK, which close() then leaves open (the workers
        are forked with it; the lock lasts while any of them lives)."""
        fd, self._lock_fd = self._lock_fd, -1
        return fd

    def _open_user(self, user: str) -> UserLog:
        user_log = UserLog(user, self.users_directory / (user + JSONL_SUFFIX), shared=self.role == "worker",
                           on_foreign=self._foreign)
        user_log.open()
        self._logs[user] = user_log
        return user_log

    def _foreign(self, user: str, samples: Optional[list], replaced: Optional[list[str]]) -> None:
        if self.on_foreign is not None:
            self.on_foreign(user, samples, replaced)

    def _log(self, user: str, create: bool) -> Optional[UserLog]:
        user_log = self._logs.get(user)
        if user_log is None and (create or self.role == "worker"):
            with self._lock:
                user_log = self._logs.get(user)
                if user_log is None:
                    if not create and not (self.users_directory / (user + JSONL_SUFFIX)).exists():
                        return None  # (a worker: another may have created it since the start)
                    if create:
                        self._writable()
                    try:
                        user_log = self._open_user(user)
                    except OSError as error:
                        self.probe.failed(f"creating the history of {user}: {os.strerror(error.errno or 0)}")
                        raise storage_failure(f"creating the history of {user}", error) from None
        return user_log

    def refresh(self, user: str) -> None:
        """A worker: applies what the other workers wrote to this user's history (before an answer
        from memory, the daily totals'); nothing to do alone."""
        if self.role == "worker":
            user_log = self._log(user, create=False)
            if user_log is not None:
                user_log.refresh()

    def history_state(self, user: str) -> Optional[str]:
        """The history's size and modification time (the daily buckets' saved state), None without one."""
        user_log = self._log(user, create=False) if self.role == "worker" else None
        if user_log is not None:
            return user_log.state()
        try:
            return history_state(os.stat(self.users_directory / (user + JSONL_SUFFIX)))
        except FileNotFoundError:
            return None

    def _writable(self) -> None:
        failure = self.probe.check() if self.probe.failure is not None else None
        if failure is not None:
            raise StorageUnavailable(failure + "; retry later")

    def _write(self, user: str, action):
        self._writable()
        user_log = self._log(user, create=True)
        try:
            return action(user_log)
        except StorageUnavailable as error:
            self.probe.failed(error.message)
            raise

    def describe(self) -> str:
        if self.role != "alone":
            users = sum(1 for path in self.users_directory.glob("*" + JSONL_SUFFIX) if valid_user_name(path.name[: -len(JSONL_SUFFIX)]))
            return f"data {self.directory} ({users} users)"
        samples = sum(user_log.live_count for user_log in self._logs.values())
        return f"data {self.directory} ({len(self._logs)} users, {samples} samples)"

    def save(self, user: str, samples: list[SampleFields], received_at: str, replaced: Optional[list[str]] = None) -> int:
        return self._write(user, lambda user_log: user_log.save(samples, received_at, replaced))

    def delete_ids(self, user: str, ids: list[str], received_at: str, removed: Optional[list[str]] = None) -> int:
        return self._write(user, lambda user_log: user_log.delete_ids(ids, received_at, removed))

    def delete_all(self, user: str) -> None:
        self._writable()
        user_log = self._log(user, create=False)
        if user_log is not None:
            try:
                user_log.delete_all()
            except StorageUnavailable as error:
                self.probe.failed(error.message)
                raise

    def read(self, user: str, offset: int, limit: int, all_versions: bool) -> tuple[list[bytes], int]:
        user_log = self._log(user, create=False)
        if user_log is None:
            return [], 0
        return user_log.read(offset, limit, all_versions)

    def samples_between(self, user: str, start_ns: int, end_ns: int) -> Iterator[DaySample]:
        user_log = self._log(user, create=False)
        if user_log is None:
            return iter(())
        return user_log.samples_between(start_ns, end_ns)

    def sample_columns_between(self, user: str, start_ns: int, end_ns: int) -> SampleColumns:
        user_log = self._log(user, create=False)
        if user_log is None:
            return empty_columns()
        return user_log.sample_columns_between(start_ns, end_ns)

    def latest_end_ns(self, user: str) -> Optional[int]:
        user_log = self._log(user, create=False)
        return None if user_log is None else user_log.latest_end_ns()

    def health(self) -> Optional[str]:
        return self.probe.status()

    def close(self) -> None:
        for user_log in self._logs.values():
            user_log.close()
        self.tokens.close()
        if self._lock_fd >= 0:
            os.close(self._lock_fd)  # releases the flock; the file stays (unlinking would race)
            self._lock_fd = -1

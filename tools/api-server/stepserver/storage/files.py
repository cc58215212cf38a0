"""Thin wrappers over the syscalls the embedded backend needs; each says which call it makes."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path


def sync_file(fd: int) -> None:
    """Makes written data durable: F_FULLFSYNC on Apple platforms (plain fsync is not durable across
    power loss there), fdatasync on Linux (covers the size change of an append), fsync elsewhere."""
    full_fsync = getattr(fcntl, "F_FULLFSYNC", None)
    if full_fsync is not None:
        try:
            fcntl.fcntl(fd, full_fsync)
            return
        except OSError:
            pass  # a filesystem without F_FULLFSYNC: fall back to fsync
    if hasattr(os, "fdatasync"):
        os.fdatasync(fd)
    else:
        os.fsync(fd)


def sync_directory(path: Path) -> None:
    """fsync(2) a directory, so that a file created, renamed or deleted in it stays so after a crash."""
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


def lock_owner(lock_path: Path, what: str) -> int:
    """Takes an exclusive flock(2) on lock_path (created if needed) and writes our pid into it.
    Returns the descriptor (closing it releases the lock). Raises BlockingIOError naming the owner."""
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        owner = os.pread(fd, 200, 0).decode("utf-8", "replace").strip() or "unknown owner"
        os.close(fd)
        raise BlockingIOError(f"{what} is in use by another api-server ({owner}; lock {lock_path})") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"pid {os.getpid()}\n".encode(), 0)
    return fd

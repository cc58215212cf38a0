"""What a client compares to prove that the server holds what it acknowledged (docs/RECONCILE.md).

A live sample's content hash is XXH64 (seed 0) of its canonical bytes:

    content := idLen:u8 id start:i64 end:i64 count:i64 bundleLen:u16 bundle device [countFraction:u16]
    device  := 00 | 01 deviceLen:u16 device          (null, or the name)

little-endian, instants in nanoseconds since 1970 UTC, strings as their UTF-8 bytes; count is the
whole steps and countFraction the thousandths past them (1-999), present only when there are any:
a whole count's bytes are what they were before counts had fractions, so digests kept then still
match. The Swift
`SampleDigest` computes the same; Tests/Fixtures/digest/vectors.json pins both. A digest of a set of
samples is their count and the sum of their hashes mod 2^64: it does not depend on order, and a
sample's hash is added when it arrives and subtracted when it is replaced or deleted. The table
sample_digests keeps one per (user, uploader, UTC day of startDate), written in the transaction of
the write that changes it (storage/store.py)."""

from __future__ import annotations

import struct
from itertools import groupby, repeat
from operator import floordiv, itemgetter
from typing import Iterable, Optional

import xxhash

from .daily_totals import DAY_NS, day_text

MASK = (1 << 64) - 1
_HEAD = struct.Struct("<qqqH")
_xxh64 = xxhash.xxh64_intdigest


def content_hash(sample_id: str, start_ns: int, end_ns: int, count_thousandths: int, bundle: str,
                 device: Optional[str]) -> int:
    """The sample's content hash (unsigned 64-bit); its count in thousandths of a step."""
    count, fraction = divmod(count_thousandths, 1000)
    identity = sample_id.encode("ascii")
    bundle_bytes = bundle.encode("utf-8")
    if device is None:
        tail = b"\x00"
    else:
        device_bytes = device.encode("utf-8")
        tail = b"\x01" + len(device_bytes).to_bytes(2, "little") + device_bytes
    if fraction:
        tail += fraction.to_bytes(2, "little")
    return _xxh64(bytes((len(identity),)) + identity + _HEAD.pack(start_ns, end_ns, count, len(bundle_bytes))
                  + bundle_bytes + tail)


def day_of(start_ns: int) -> int:
    """The UTC day (days since 1970) a sample's digest is kept under: its start's."""
    return start_ns // DAY_NS


def to_signed(value: int) -> int:
    """An unsigned 64-bit value as the BIGINT column holds it (two's complement)."""
    value &= MASK
    return value - (1 << 64) if value >= 1 << 63 else value


def hex_digest(value: int) -> str:
    """The wire's spelling of a hash or digest: 16 lowercase hex digits."""
    return f"{value & MASK:016x}"


class Changes:
    """What a write does to the digests: per (uploader, day), a count and a sum to add."""

    def __init__(self) -> None:
        self.deltas: dict[tuple[str, int], list[int]] = {}

    def add(self, uploader: str, start_ns: int, content: int) -> None:
        delta = self.deltas.setdefault((uploader, day_of(start_ns)), [0, 0])
        delta[0] += 1
        delta[1] = (delta[1] + content) & MASK

    def add_all(self, uploader: str, starts_ns: list[int], contents: list[int]) -> None:
        """add() of each (start_ns, content), a run of samples on one day at a time."""
        for day, run in groupby(zip(map(floordiv, starts_ns, repeat(DAY_NS)), contents), key=itemgetter(0)):
            hashes = list(map(itemgetter(1), run))
            delta = self.deltas.setdefault((uploader, day), [0, 0])
            delta[0] += len(hashes)
            delta[1] = (delta[1] + sum(hashes)) & MASK

    def remove(self, uploader: str, start_ns: int, content: int) -> None:
        delta = self.deltas.setdefault((uploader, day_of(start_ns)), [0, 0])
        delta[0] -= 1
        delta[1] = (delta[1] - content) & MASK

    def nonzero(self) -> dict[tuple[str, int], list[int]]:
        return {key: delta for key, delta in self.deltas.items() if delta != [0, 0]}


def combine(rows: Iterable[tuple[int, int]]) -> tuple[int, int]:
    """(count, digest) of rows of (count, signed digest): the digest of their union."""
    count = total = 0
    for n, digest in rows:
        count += n
        total += digest
    return count, total & MASK


def day_answer(day: int, count: int, digest: int) -> dict:
    return {"day": day_text(day), "count": count, "digest": hex_digest(digest)}

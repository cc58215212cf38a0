"""Samples as columns (numpy arrays) for the daily buckets' vectorised merge (quarter_hour_merge.py):
built from a backend's stored fields in a few C passes instead of one Python object per sample, which
was most of the time a run of days took (a year of 300,000 samples: seconds of DaySample tuples and
per-sample date parsing).

Date texts are those the contract took (contract.DATE_PATTERN): the usual shapes, YYYY-MM-DDTHH:MM:SSZ
and YYYY-MM-DDTHH:MM:SS+HH:MM (or -HH:MM), and the same with milliseconds (.fff, what stepsync sends),
are read as digits from a byte matrix; any other (another fraction of a second) through
contract.instant_ns. Instants are whole milliseconds, floored, as the
store keeps them.
"""

from __future__ import annotations

from typing import Iterable, NamedTuple, Optional, Sequence

import numpy as np

from .contract import instant_ns, instants
from .storage.base import DaySample

_MS = 1_000_000
_ZERO = ord("0")
LONGEST_DATE_TEXT = 35  # YYYY-MM-DDTHH:MM:SS.fffffffff+HH:MM (contract.DATE_PATTERN)
_DIGIT_COLUMNS = [0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18]  # YYYY-MM-DDTHH:MM:SS
_YEAR_WEIGHTS = np.array([1000, 100, 10, 1], dtype=np.int64)
_PAIR_WEIGHTS = np.array([10, 1], dtype=np.int64)
_FRACTION_WEIGHTS = np.array([100, 10, 1], dtype=np.int64)


class SampleColumns(NamedTuple):
    """Samples as columns: start and end in ms since 1970 UTC, count (int64 arrays), and `source`,
    an index (int64 array) into `sources`, the (bundle id, device name) pairs."""

    start: np.ndarray
    end: np.ndarray
    count: np.ndarray
    source: np.ndarray
    sources: list[tuple[str, Optional[str]]]

    @classmethod
    def from_samples(cls, samples: Iterable[DaySample]) -> "SampleColumns":
        """From DaySample values (a backend without a columnar read; the tests' in-memory store)."""
        listed = list(samples)
        if not listed:
            return empty_columns()
        starts, ends, counts, bundles, devices = zip(*listed)
        return cls(np.array(starts, dtype=np.int64) // _MS, np.array(ends, dtype=np.int64) // _MS,
                   np.array(counts, dtype=np.int64), *_source_indexes(bundles, devices))

    @classmethod
    def from_texts(cls, starts: Sequence[str], ends: Sequence[str], counts: Sequence[int], bundles: Sequence[str],
                   devices: Sequence[Optional[str]], usual_dates: Optional[bytes] = None) -> "SampleColumns":
        """From stored fields: date-time texts, counts, bundle ids and device names (None when absent).
        `usual_dates`, when given, are the starts' then the ends' bytes, each YYYY-MM-DDTHH:MM:SSZ or
        YYYY-MM-DDTHH:MM:SS.fffZ and a newline (contract.ParsedSamples): read from there, without
        joining the texts again."""
        if not starts:
            return empty_columns()
        both = None if usual_dates is None else _usual_ms(usual_dates, 2 * len(starts))
        if both is None:
            both = instants_ms(tuple(starts) + tuple(ends))  # one parse for both
        return cls(both[: len(starts)], both[len(starts) :], np.array(counts, dtype=np.int64), *_source_indexes(bundles, devices))

    def where(self, keep: np.ndarray) -> "SampleColumns":
        return SampleColumns(self.start[keep], self.end[keep], self.count[keep], self.source[keep], self.sources)


def _usual_ms(dates: bytes, count: int) -> Optional[np.ndarray]:
    """Milliseconds since 1970 of `count` texts that are all YYYY-MM-DDTHH:MM:SSZ or all
    YYYY-MM-DDTHH:MM:SS.fffZ, each followed by a newline (their digits checked by the contract); None
    when they are not that."""
    for width, fraction in ((21, False), (25, True)):
        if len(dates) != width * count:
            continue
        rows = np.frombuffer(dates, dtype=np.uint8).reshape(count, width)
        if not (rows[:, width - 2] == ord("Z")).all() or (fraction and not (rows[:, 19] == ord(".")).all()):
            return None
        ms = _paired_seconds(np.ascontiguousarray(rows[:, :20]), count) * 1000  # byte 19 ('Z' or '.') unread
        if fraction:
            ms += (rows[:, 20:23].astype(np.int64) - _ZERO) @ _FRACTION_WEIGHTS
        return ms
    return None


def empty_columns() -> SampleColumns:
    nothing = np.empty(0, dtype=np.int64)
    return SampleColumns(nothing, nothing, nothing, nothing, [])


def concatenate(parts: list[SampleColumns]) -> SampleColumns:
    """One SampleColumns from several (their sources renumbered into one list)."""
    parts = [part for part in parts if len(part.start)]
    if not parts:
        return empty_columns()
    if len(parts) == 1:
        return parts[0]
    numbers: dict[tuple[str, Optional[str]], int] = {}
    renumbered = []
    for part in parts:
        mapping = np.array([numbers.setdefault(key, len(numbers)) for key in part.sources], dtype=np.int64)
        renumbered.append(mapping[part.source])
    return SampleColumns(np.concatenate([part.start for part in parts]), np.concatenate([part.end for part in parts]),
                         np.concatenate([part.count for part in parts]), np.concatenate(renumbered), list(numbers))


def _source_indexes(bundles: Sequence[str], devices: Sequence[Optional[str]]) -> tuple[np.ndarray, list]:
    count = len(bundles)
    if count and bundles.count(bundles[0]) == count and devices.count(devices[0]) == count:
        # One source (an upload's batch usually): two passes in C instead of a key a sample.
        return np.zeros(count, dtype=np.int64), [(bundles[0], devices[0])]
    keys = list(zip(bundles, devices))
    sources = list(dict.fromkeys(keys))  # a few distinct ones, in order of first appearance
    numbers = {key: number for number, key in enumerate(sources)}
    return np.fromiter(map(numbers.__getitem__, keys), dtype=np.int64, count=len(keys)), sources


def instants_ms(texts: Sequence[str]) -> np.ndarray:
    """Milliseconds since 1970 UTC (floored) of date-time texts the contract took."""
    seconds = _plain_utc_seconds(texts)
    if seconds is not None:
        return seconds * 1000
    read = _read_ms(texts)
    if read is None:  # not a date the contract takes; instant_ns says what is wrong
        return np.array([instant_ns(text) // _MS for text in texts], dtype=np.int64)
    result, exact = read
    for index in np.flatnonzero(~exact).tolist():  # another fraction of a second: the contract's parser
        result[index] = instant_ns(texts[index]) // _MS
    return result


def whole_ms(texts: Sequence[str]) -> Optional[np.ndarray]:
    """Milliseconds since 1970 UTC of texts whose instants are all whole milliseconds read as digits
    (YYYY-MM-DDTHH:MM:SS, then .fff or nothing, then Z or +HH:MM/-HH:MM): their instants in ns are
    these times 1,000,000 exactly (the PostgreSQL backend's COPY data); None when any is another."""
    if not texts:
        return None
    seconds = _plain_utc_seconds(texts)
    if seconds is not None:
        return seconds * 1000
    read = _read_ms(texts)
    return read[0] if read is not None and read[1].all() else None


def _read_ms(texts: Sequence[str]) -> Optional[tuple[np.ndarray, np.ndarray]]:
    """(ms, which were read exactly) of contract date texts, from one byte matrix: whole seconds or
    milliseconds (.fff, what stepsync sends), in UTC (Z) or with an offset; any other fraction is
    marked not read. None when a text is not ASCII."""
    count = len(texts)
    width = LONGEST_DATE_TEXT + 1  # a longer text (not one the contract takes) shows as a byte past it
    try:
        matrix = np.array(texts, dtype=f"S{width}").view(np.uint8).reshape(count, width)
    except UnicodeEncodeError:
        return None

    def number(*columns: int) -> np.ndarray:
        value = matrix[:, columns[0]].astype(np.int64) - _ZERO
        for column in columns[1:]:
            value = value * 10 + (matrix[:, column].astype(np.int64) - _ZERO)
        return value

    seconds = _seconds(matrix, count)
    marker = matrix[:, 19]
    # .fff then Z or an offset: the marker after the fraction at 23
    millis_form = (marker == ord(".")) & (((matrix[:, 23] == ord("Z")) & (matrix[:, 24] == 0))
                                          | (((matrix[:, 23] == ord("+")) | (matrix[:, 23] == ord("-"))) & (matrix[:, 29] == 0)))
    zone = np.where(millis_form, matrix[:, 23], marker)
    at = np.where(millis_form, 4, 0)  # the offset's digits start 4 bytes later after .fff
    exact = ((zone == ord("Z")) & (matrix[np.arange(count), 20 + at] == 0)) | millis_form
    offset_form = ((zone == ord("+")) | (zone == ord("-"))) & (matrix[np.arange(count), 25 + at] == 0)
    if offset_form.any():
        rows = np.arange(count)
        hours = (matrix[rows, 20 + at].astype(np.int64) - _ZERO) * 10 + matrix[rows, 21 + at] - _ZERO
        minutes = (matrix[rows, 23 + at].astype(np.int64) - _ZERO) * 10 + matrix[rows, 24 + at] - _ZERO
        offset = hours * 3600 + minutes * 60
        seconds = np.where(offset_form, seconds - np.where(zone == ord("+"), offset, -offset), seconds)
        exact = exact | offset_form
    result = seconds * 1000
    if millis_form.any():
        result = result + np.where(millis_form, number(20, 21, 22), 0)
    return result, exact


def instants_ns(texts: Sequence[str]) -> list[int]:
    """contract.instants (nanoseconds since 1970 UTC, exact) of date texts the contract took: when every
    one has the usual shape YYYY-MM-DDTHH:MM:SSZ, read as digits from one byte matrix (a fifth of the
    time of one datetime parse a text: 0.24 ms instead of 1.1 ms for a 1,000-sample save's 2,000 dates),
    otherwise contract.instants."""
    seconds = _plain_utc_seconds(texts) if texts else None
    if seconds is not None:
        return (seconds * 1_000_000_000).tolist()
    return instants(list(texts))


def _plain_utc_seconds(texts: Sequence[str]) -> Optional[np.ndarray]:
    """Seconds since 1970 of texts that are all YYYY-MM-DDTHH:MM:SSZ (the usual case), read as digits from
    one string of them all; None when any is not. A contract text has a Z only at its end, so a Z at
    every 20th place means every text is 20 long."""
    count = len(texts)
    joined = "".join(texts)
    if len(joined) == 20 * count and joined.isascii():
        data = joined.encode("ascii")
        matrix = np.frombuffer(data, dtype=np.uint8).reshape(count, 20)
        if (matrix[:, 19] == ord("Z")).all():
            return _paired_seconds(data, count) if count else _seconds(matrix, count)
    return None


# Two ASCII digits read as one little-endian uint16 -> their value (-1 when either is not a digit).
_PAIRS = np.full(1 << 16, -1, dtype=np.int32)
for _tens in range(10):
    for _units in range(10):
        _PAIRS[(_ZERO + _tens) | ((_ZERO + _units) << 8)] = 10 * _tens + _units
_HUNDREDS = _PAIRS * 100
_FIRST_YEAR, _LAST_YEAR = 1900, 2399
# Days from 1970-01-01 to the first of each month of _FIRST_YEAR.._LAST_YEAR (12 a year).


def _paired_seconds(data, count: int) -> np.ndarray:
    """_seconds of `count` texts YYYY-MM-DDTHH:MM:SSZ joined in `data`, in fewer array passes: each
    two-digit field is one uint16 read (the aligned ones from the rows, the others from the bytes
    one further on) turned into its value by a table, and a date's day number is a table's (the first
    of its month) plus its day. A year outside the table or a digit that is not one: _seconds."""
    # `data`: bytes, or a C-contiguous uint8 array of count rows of 20.
    aligned = np.frombuffer(data, dtype="<u2").reshape(count, 10)  # bytes 0-1, 2-3, ..., 18-19 of each row
    shifted = np.frombuffer(data, dtype="<u2", offset=1, count=10 * count - 1)  # bytes 1-2, 3-4, ...
    month = _PAIRS[shifted[2::10]] - 1  # bytes 5-6
    months = (_HUNDREDS[aligned[:, 0]] + _PAIRS[aligned[:, 1]] - _FIRST_YEAR) * 12 + month
    day, hour, minute, second = (_PAIRS[aligned[:, 4]], _PAIRS[shifted[5::10]], _PAIRS[aligned[:, 7]],
                                 _PAIRS[shifted[8::10]])
    if (int(months.min()) < 0 or int(months.max()) >= len(_MONTH_DAYS)
            or int((month | day | hour | minute | second).min()) < 0):
        return _seconds(np.frombuffer(data, dtype=np.uint8).reshape(count, 20), count)
    seconds = (_MONTH_DAYS[months] + (day - 1)).astype(np.int64)
    seconds *= 86400
    seconds += hour * 3600 + minute * 60 + second
    return seconds


def _seconds(matrix: np.ndarray, count: int) -> np.ndarray:
    """Seconds since 1970 of the YYYY-MM-DDTHH:MM:SS at the start of each row (as UTC)."""
    digits = matrix[:, _DIGIT_COLUMNS].astype(np.int64) - _ZERO
    year = digits[:, :4] @ _YEAR_WEIGHTS
    month, day, hour, minute, second = (digits[:, 4:].reshape(count, 5, 2) @ _PAIR_WEIGHTS).T
    return _days_since_1970(year, month, day) * 86400 + hour * 3600 + minute * 60 + second


def _days_since_1970(year: np.ndarray, month: np.ndarray, day: np.ndarray) -> np.ndarray:
    """Days from 1970-01-01 of proleptic Gregorian dates (H. Hinnant's days_from_civil)."""
    year = year - (month <= 2)
    era = year // 400
    year_of_era = year - era * 400
    day_of_year = (153 * (month + np.where(month > 2, -3, 9)) + 2) // 5 + day - 1
    day_of_era = year_of_era * 365 + year_of_era // 4 - year_of_era // 100 + day_of_year
    return era * 146097 + day_of_era - 719468


_MONTH_DAYS = _days_since_1970(np.repeat(np.arange(_FIRST_YEAR, _LAST_YEAR + 1), 12),
                               np.tile(np.arange(1, 13), _LAST_YEAR - _FIRST_YEAR + 1), 1).astype(np.int32)

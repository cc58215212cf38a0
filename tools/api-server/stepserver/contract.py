"""The wire contract: what a request may hold, its limits, and the one-line error for each violation.

This module is the one definition ("the one sample contract", documented in tools/api-server/README.md; the Swift
`SampleContract` carries the same numbers). The OpenAPI schema is generated from the msgspec types
below (see openapi.py), the error messages come from the checks below, and both storage backends
receive only `SampleFields` values that passed them.

Two paths parse a POST /steps body, and they accept exactly the same bodies:
- the fast path decodes with msgspec straight into `SampleFields` structs (the constraints the structs carry)
  and then runs the checks msgspec cannot express (UTF-8 byte lengths, date bounds, duplicate keys);
- when the fast path refuses anything, the exact path (plain `json` with hooks) parses the body again
  and names the first problem, e.g. `samples[3].count: must be an integer (got number 1.5)`.
The exact path is the authority: a body it accepts is accepted even if msgspec refused it.
"""

from __future__ import annotations

import codecs
import json
import operator
import re
import urllib.parse
from datetime import date, datetime, timezone
from itertools import compress
from typing import Annotated, Any, Optional, Union

import msgspec
import numpy

from .errors import ApiError, bad_request

# --------------------------------------------------------------------------------------------------
# Limits (never change one without the Swift SampleContract and the shared vectors)
# --------------------------------------------------------------------------------------------------

ID_MAX_LENGTH = 64
ID_PATTERN = r"^[A-Za-z0-9._:-]{1,64}$"
ID_CHARACTERS = "A-Z a-z 0-9 . _ : -"
MIN_DATE_TEXT = "2000-01-01T00:00:00Z"
MAX_FUTURE_SECONDS = 24 * 3600  # endDate <= the server's receive time + 24 h
MAX_DURATION_SECONDS = 48 * 3600  # endDate - startDate <= 48 h
MAX_COUNT = 1_000_000
MAX_SOURCE_BYTES = 512  # sourceBundleId 1..512, sourceDeviceName 0..512 UTF-8 bytes, no U+0000
MAX_SAMPLES_PER_REQUEST = 10_000
MAX_IDS_PER_REQUEST = 1_000
MAX_BODY_BYTES = 8 * 1024 * 1024  # 1,000 samples of maximal size (~6.4 KB each, escaped) fit
DEFAULT_LIMIT = 1000
MAX_LIMIT = 100_000
MAX_OFFSET_DIGITS = 18
MAX_DAILY_DAYS = 3700  # GET /steps/daily: ten years and a bit per request
# The exact path builds Python objects for the whole body (json.loads); bodies that would build far
# more of them than a request of samples needs are refused first (an 8 MiB body of "[{},{},…]" would
# be 2.8 million dicts, over 170 MB).
MAX_JSON_VALUES = 40 * MAX_SAMPLES_PER_REQUEST

# RFC 3339 date-time, seconds required, 0-9 fraction digits, Z or +-HH:MM.
DATE_PATTERN = (
    r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]"
    r"(?:\.[0-9]{1,9})?(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])$"
)
_DATE_RE = re.compile(DATE_PATTERN[1:-1], re.ASCII)  # used with fullmatch: "$" would allow a final newline
_ID_RE = re.compile(ID_PATTERN[1:-1], re.ASCII)
_DATE_HINT = "must be an RFC 3339 date-time with Z or an offset, e.g. 2024-01-15T10:30:00Z"
_NS = 1_000_000_000
_EPOCH_DAY = date(1970, 1, 1).toordinal()
MIN_DATE_NS = (date(2000, 1, 1).toordinal() - _EPOCH_DAY) * 86400 * _NS

# --------------------------------------------------------------------------------------------------
# Wire types (the OpenAPI schema is generated from these)
# --------------------------------------------------------------------------------------------------

SampleId = Annotated[str, msgspec.Meta(pattern=ID_PATTERN, description=f"1-64 characters from {ID_CHARACTERS}")]
DateTime = Annotated[
    str,
    msgspec.Meta(
        pattern=DATE_PATTERN,
        description="RFC 3339 date-time (fraction up to 9 digits, Z or +-HH:MM); stored as sent. "
        f"{MIN_DATE_TEXT} <= startDate <= endDate <= the server's time + 24 h; endDate - startDate <= 48 h",
    ),
]
Count = Annotated[int, msgspec.Meta(ge=0, le=MAX_COUNT, description="steps; a JSON integer (no fraction, no exponent)")]
BundleId = Annotated[
    str, msgspec.Meta(min_length=1, max_length=MAX_SOURCE_BYTES, description="1-512 UTF-8 bytes, no U+0000")
]
DeviceName = Annotated[str, msgspec.Meta(max_length=MAX_SOURCE_BYTES, description="0-512 UTF-8 bytes, no U+0000")]


class Sample(msgspec.Struct):
    """One step sample, as the schema documents it (SampleFields below is the same without the two
    patterns, for decoding, and with the receivedAt a backend sets). Field order is the stored line's
    key order; unknown fields are ignored."""

    id: SampleId
    startDate: DateTime
    endDate: DateTime
    count: Count
    sourceBundleId: BundleId
    sourceDeviceName: Union[Optional[DeviceName], msgspec.UnsetType] = msgspec.UNSET


class SampleFields(msgspec.Struct, gc=False):
    """What parse_samples returns and the backends store: Sample's fields and bounds, but ids and
    dates are checked once a body (see _parse_samples_fast) instead of by msgspec's one `re` call a
    field, the largest cost of decoding. tests/test_contract.py holds the two to the same fields.
    Not tracked by the garbage collector (gc=False: texts and numbers only, so never in a cycle): the
    1,000 of a request made young collections trace them and older ones run sooner (8 clients at
    once: ~0.6 ms of server CPU a request).

    receivedAt is never the client's: the parse leaves it unset (a body that names it goes to the
    exact path, which ignores it), and the embedded backend sets it as it writes a sample's line, so
    that one encode makes the whole line (an unset field is not encoded)."""

    id: Annotated[str, msgspec.Meta(min_length=1, max_length=ID_MAX_LENGTH)]
    startDate: str
    endDate: str
    count: Count
    sourceBundleId: BundleId
    sourceDeviceName: Union[Optional[DeviceName], msgspec.UnsetType] = msgspec.UNSET
    receivedAt: Union[str, msgspec.UnsetType] = msgspec.UNSET


class StepsBody(msgspec.Struct):
    samples: Annotated[list[Sample], msgspec.Meta(max_length=MAX_SAMPLES_PER_REQUEST)]


class DeletionsBody(msgspec.Struct):
    ids: Annotated[list[SampleId], msgspec.Meta(max_length=MAX_IDS_PER_REQUEST)]


class StoredSample(msgspec.Struct):
    """A sample as GET /steps returns it: the sample plus when the server received it."""

    id: str
    startDate: str
    endDate: str
    count: int
    sourceBundleId: str
    sourceDeviceName: Optional[str]
    receivedAt: Annotated[str, msgspec.Meta(description="UTC, whole seconds, e.g. 2024-01-20T15:00:00Z")]


class StepsPage(msgspec.Struct):
    samples: list[StoredSample]
    total: Annotated[int, msgspec.Meta(description="what this query returns over all pages")]


class SavedAnswer(msgspec.Struct):
    saved: Annotated[int, msgspec.Meta(description="samples new or changed (written)")]
    message: str


class DeletedAnswer(msgspec.Struct):
    deleted: Annotated[int, msgspec.Meta(description="ids that were live and are now deleted")]
    message: str


class ClearedAnswer(msgspec.Struct):
    deleted: bool
    message: str


class SourceDay(msgspec.Struct):
    bundleId: str
    deviceName: Optional[str]
    merged: int
    raw: int


class DayRow(msgspec.Struct):
    date: Annotated[str, msgspec.Meta(description="YYYY-MM-DD, a local calendar day")]
    merged: Annotated[int, msgspec.Meta(description="the total the Health app would show (docs/TOTALS.md)")]
    raw: Annotated[int, msgspec.Meta(description="the plain sum, prorated over days the same way")]
    sources: Union[list[SourceDay], msgspec.UnsetType] = msgspec.UNSET


class DailyDocument(msgspec.Struct):
    """GET /steps/daily: the document of docs/TOTALS.md section 5 (the same as `stepsync daily --json`)."""

    timeZone: str
    from_: Annotated[str, msgspec.Meta(description="YYYY-MM-DD")] = msgspec.field(name="from")
    to: Annotated[str, msgspec.Meta(description="YYYY-MM-DD")]
    priority: list[str]
    days: Annotated[list[DayRow], msgspec.Meta(description="one row per date from `from` to `to`")]


class HealthAnswer(msgspec.Struct):
    status: str
    error: Optional[str] = None


class ErrorAnswer(msgspec.Struct):
    error: Annotated[str, msgspec.Meta(description="one line naming the field or problem")]
    requestId: Optional[str] = None


class _FastStepsBody(msgspec.Struct):
    samples: Annotated[list[SampleFields], msgspec.Meta(max_length=MAX_SAMPLES_PER_REQUEST)]


_steps_decoder = msgspec.json.Decoder(_FastStepsBody)
_ID_ALPHABET = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:-"
_DIGIT_MASK = bytes.maketrans(b"0123456789", b"0000000000")
_USUAL_DATE_MASK = b"0000-00-00T00:00:00Z\n"
_USUAL_DATE_BYTES = len(_USUAL_DATE_MASK)
_MILLIS_DATE_MASK = b"0000-00-00T00:00:00.000Z\n"  # what stepsync sends: milliseconds (.000 added to whole seconds)
_MILLIS_DATE_BYTES = len(_MILLIS_DATE_MASK)
_day_of = operator.itemgetter(slice(0, 10))
# For the hours 20-23: 1 where an hour's tens digit is 2, and where its units digit is above 3.
_TENS_TWO = bytes(int(byte == ord("2")) for byte in range(256))
_UNITS_OVER_THREE = bytes(int(ord("4") <= byte <= ord("9")) for byte in range(256))
_QUOTE = ord('"')
_QUOTE_BLOCK_BYTES = 256 * 1024
_ALL_DATES_RE = re.compile(r"(?:" + DATE_PATTERN[1:-1] + r"\n)*", re.ASCII)


class _FastDeletionsBody(msgspec.Struct):
    """DeletionsBody without the ids' pattern (one `re` call an id): parse_deletions checks their
    characters in one pass over them all."""

    ids: Annotated[list[Annotated[str, msgspec.Meta(min_length=1, max_length=ID_MAX_LENGTH)]],
                   msgspec.Meta(max_length=MAX_IDS_PER_REQUEST)]


_deletions_decoder = msgspec.json.Decoder(_FastDeletionsBody)
_sample_encoder = msgspec.json.Encoder()

# --------------------------------------------------------------------------------------------------
# Descriptions of bad values, for messages
# --------------------------------------------------------------------------------------------------


class _BigNumber(str):
    """An integer literal too long to convert (kept as text, so that no Python limit message leaks)."""


def describe(value: Any) -> str:
    """A short, single-line description of a JSON value for error messages."""
    if value is None:
        return "null"
    if value is True or value is False:
        return "boolean " + ("true" if value else "false")
    if isinstance(value, _BigNumber):
        return f"number {value[:20]}... ({len(value)} digits)"
    if isinstance(value, str):
        return "string " + json.dumps(value[:60]) + ("..." if len(value) > 60 else "")
    if isinstance(value, (int, float)):
        text = repr(value)
        return "number " + (text if len(text) <= 40 else text[:40] + "...")
    if isinstance(value, list):
        return "array"
    return "object"


# --------------------------------------------------------------------------------------------------
# Dates
# --------------------------------------------------------------------------------------------------

_valid_days: dict[str, int] = {}  # "YYYY-MM-DD" -> days since 1970-01-01, for days seen valid


def _day_number(day: str) -> int:
    number = _valid_days.get(day)
    if number is None:
        number = date.fromisoformat(day).toordinal() - _EPOCH_DAY  # ValueError for February 30
        if len(_valid_days) > 100_000:
            _valid_days.clear()
        _valid_days[day] = number
    return number


def instant_ns(text: str) -> int:
    """Nanoseconds since 1970 UTC of a date-time that matched DATE_PATTERN; ValueError if not a real date."""
    seconds = _day_number(text[:10]) * 86400 + int(text[11:13]) * 3600 + int(text[14:16]) * 60 + int(text[17:19])
    rest = text[19:]
    nanoseconds = 0
    if rest[0] == ".":
        end = 1
        while end < len(rest) and rest[end].isdigit():
            end += 1
        nanoseconds = int(rest[1:end].ljust(9, "0"))
        rest = rest[end:]
    if rest != "Z":
        offset = int(rest[1:3]) * 3600 + int(rest[4:6]) * 60
        seconds += -offset if rest[0] == "+" else offset
    return seconds * _NS + nanoseconds


def instants(texts: list[str]) -> list[int]:
    """instant_ns of each date; the usual shape (YYYY-MM-DDTHH:MM:SSZ) through datetime's C parser."""
    parse = datetime.fromisoformat
    return [int(parse(text).timestamp()) * _NS if len(text) == 20 and text[19] == "Z" else instant_ns(text)
            for text in texts]


def utc_text(nanoseconds: int) -> str:
    return datetime.fromtimestamp(nanoseconds // _NS, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class DateWindow:
    """The bounds of one request: dates are checked against the server's receive time."""

    __slots__ = ("max_ns", "max_prefix", "max_text")

    def __init__(self, now_ns: int) -> None:
        self.max_ns = now_ns + MAX_FUTURE_SECONDS * _NS
        self.max_text = utc_text(self.max_ns)
        self.max_prefix = self.max_text[:19]


def _check_dates(start: str, end: str, where: str, window: DateWindow) -> None:
    """Calendar, bounds and order of two date-times that matched DATE_PATTERN."""
    # Fast path: both in UTC, the same shape and the same day (the usual sample of a few minutes):
    # text order is time order, the duration is under 24 h, and only the day needs the calendar.
    if (
        start[-1] == "Z"
        and end[-1] == "Z"
        and len(start) == len(end)
        and start[:10] == end[:10]
        and start <= end
        and start >= MIN_DATE_TEXT
        and end[:19] < window.max_prefix
        and start[:10] in _valid_days
    ):
        return
    try:
        start_ns = instant_ns(start)
    except ValueError:
        raise bad_request(f"{where}.startDate: not a valid calendar date-time (got {describe(start)})") from None
    try:
        end_ns = instant_ns(end)
    except ValueError:
        raise bad_request(f"{where}.endDate: not a valid calendar date-time (got {describe(end)})") from None
    if start_ns < MIN_DATE_NS:
        raise bad_request(f"{where}.startDate: must not be before {MIN_DATE_TEXT} (got {describe(start)})")
    if end_ns < start_ns:
        raise bad_request(f"{where}.endDate: must not be before startDate ({end} < {start})")
    if end_ns > window.max_ns:
        raise bad_request(
            f"{where}.endDate: must not be more than 24 hours after the server's time, {window.max_text} (got {describe(end)})"
        )
    if end_ns - start_ns > MAX_DURATION_SECONDS * _NS:
        raise bad_request(f"{where}.endDate: must be at most 48 hours after startDate ({start} .. {end})")


def _source_ok(text: str, minimum: int) -> bool:
    if "\x00" in text:
        return False
    size = len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
    return minimum <= size <= MAX_SOURCE_BYTES


# --------------------------------------------------------------------------------------------------
# POST /steps
# --------------------------------------------------------------------------------------------------



class ParsedSamples(list):
    """The samples of a body the fast path took, with what it built of them on the way: the lists of
    their startDate, endDate, sourceBundleId and sourceDeviceName (the same objects, in order;
    msgspec.UNSET for a device name the body left out), when every date has the usual shape
    YYYY-MM-DDTHH:MM:SSZ, or when every one is in UTC with milliseconds or whole seconds, the bytes of
    the startDates then the endDates, each followed by a newline, all as YYYY-MM-DDTHH:MM:SSZ or all as
    YYYY-MM-DDTHH:MM:SS.fffZ (".000" added to whole seconds) (else None), and the least startDate
    and greatest endDate texts. The daily buckets (before_write) take the lists and bytes instead of
    passing over the samples again, and drop them (take_fields): a save may free the samples before
    its sync, and these must not keep their texts alive meanwhile. When every date has one of the usual shapes, also the date (first ten characters)
    of each startDate, and whether each sample's endDate has its startDate's date (the embedded
    backend's time index takes them instead of slicing the texts again). Otherwise a list like any
    other."""

    __slots__ = ("fields", "usual_dates", "least_start", "greatest_end", "start_days", "same_day")

    def take_fields(self) -> Optional[tuple[list, list, list, list, Optional[bytes]]]:
        fields, self.fields = self.fields, None
        dates, self.usual_dates = self.usual_dates, None
        return None if fields is None else (*fields, dates)


# A sample's fields, one C call each (the backends take them a list at a time with map).
id_of = operator.attrgetter("id")
start_of = operator.attrgetter("startDate")
end_of = operator.attrgetter("endDate")
count_of = operator.attrgetter("count")
bundle_of = operator.attrgetter("sourceBundleId")
device_of = operator.attrgetter("sourceDeviceName")


def date_bounds(samples: list[SampleFields]) -> tuple[str, str]:
    """The least startDate and the greatest endDate text of samples (not empty)."""
    if isinstance(samples, ParsedSamples):
        return samples.least_start, samples.greatest_end
    return min(map(start_of, samples)), max(map(end_of, samples))


def parse_samples(body: bytes, window: DateWindow) -> list[SampleFields]:
    """Parses and validates a POST /steps body. Raises ApiError(400) naming the first problem."""
    samples = _parse_samples_fast(body, window)
    if samples is None:
        samples = _parse_samples_exact(body, window)
    return samples


def _parse_samples_fast(body: bytes, window: DateWindow) -> Optional[list[SampleFields]]:
    """None when anything is unusual: the exact path then decides and names the problem."""
    if b"\\" in body:
        # Any escape (a key spelled with \u, a surrogate, a NUL, a "\n" that a pattern's "$" would
        # let through): the exact path decides. Without escapes no string can hold a control
        # character (JSON forbids them raw), so NUL and newlines are impossible below. UTF-8 needs
        # no pass of its own: msgspec checks every string it decodes, and the key count below
        # leaves no string undecoded (an unknown key goes to the exact path).
        return None
    try:
        fast = _steps_decoder.decode(body).samples
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    # Duplicate keys (msgspec keeps the last one silently) and unknown keys: without escapes every
    # '"' delimits a string, and the decode found every required key and string value at least once;
    # exactly that many quotes means each once and nothing else (an unknown field or a repeated key
    # adds a string: the exact path accepts the one and names the other).
    count = len(fast)
    unset = msgspec.UNSET
    devices = [sample.sourceDeviceName for sample in fast]
    with_device = count - devices.count(unset)
    device_strings = with_device - devices.count(None)
    if _quotes(body) != 2 * (1 + 9 * count + with_device + device_strings):
        return None
    if not count:
        return []
    ids = [sample.id for sample in fast]
    starts = [sample.startDate for sample in fast]
    ends = [sample.endDate for sample in fast]
    # ids: every character from the alphabet (msgspec bounded the length to 1-64).
    if not _plain_ids(ids):
        return None
    # dates: the usual shape YYYY-MM-DDTHH:MM:SSZ by a digit mask, or every date in UTC with
    # milliseconds or whole seconds (what stepsync sends), compared as YYYY-MM-DDTHH:MM:SS.fffZ;
    # anything else by the pattern.
    dates = ("\n".join(starts) + "\n" + "\n".join(ends) + "\n").encode()
    stride, low, high, first, last = _USUAL_DATE_BYTES, MIN_DATE_TEXT, window.max_text, starts, ends
    usual = dates.translate(_DIGIT_MASK) == _USUAL_DATE_MASK * (2 * count)
    if not usual and len(dates) <= _MILLIS_DATE_BYTES * 2 * count:
        if len(dates) == _MILLIS_DATE_BYTES * 2 * count:
            # As long as every text with milliseconds: if the mask agrees, each is (no copy made).
            millis = dates
        else:
            # The same times with .000 added to whole seconds (a text with Z elsewhere fails the mask).
            first = [text if len(text) == 24 else text.replace("Z", ".000Z") for text in starts]
            last = [text if len(text) == 24 else text.replace("Z", ".000Z") for text in ends]
            millis = ("\n".join(first) + "\n" + "\n".join(last) + "\n").encode()
        if millis.translate(_DIGIT_MASK) == _MILLIS_DATE_MASK * (2 * count):
            usual, dates, stride = True, millis, _MILLIS_DATE_BYTES
            low, high = MIN_DATE_TEXT[:19] + ".000Z", window.max_text[:19] + ".000Z"
    if usual:
        # Every date is `stride` bytes: a digit of every time is one strided slice. Hours 00-23,
        # minutes and seconds 00-59.
        tens = dates[11::stride]
        if (tens.translate(None, b"012") or dates[14::stride].translate(None, b"012345")
                or dates[17::stride].translate(None, b"012345")):
            usual = False
        elif b"2" in tens:  # hours 20-23: no units digit above 3 where the tens are 2 (one AND of two big ints)
            usual = not (int.from_bytes(tens.translate(_TENS_TWO), "little")
                         & int.from_bytes(dates[12::stride].translate(_UNITS_OVER_THREE), "little"))
    if not usual and _ALL_DATES_RE.fullmatch(("\n".join(starts) + "\n" + "\n".join(ends) + "\n")) is None:
        return None
    if usual:
        # All in UTC, of one shape: text order is time order, so the bounds and the order are
        # compared as text in C (an end in the last second before the window's end, with a
        # fraction, goes to the exact path); the calendar is checked once a day; the 48-hour limit
        # only where a sample crosses midnight (found by comparing the days' digits, one strided
        # slice a digit). The bounds handed on (their dates) are those texts'.
        least, greatest = min(first), max(last)
        if least < low or greatest > high or not all(map(operator.le, first, last)):
            return None
        half = stride * count
        same_day = all(dates[k:half:stride] == dates[half + k :: stride] for k in range(10))
        try:
            start_days = list(map(_day_of, starts))
            days = set(start_days)
            if not same_day:
                days.update(map(_day_of, ends))
            for day in days.difference(_valid_days):
                _day_number(day)
            if not same_day:
                for index in compress(range(count), map(operator.ne, map(_day_of, starts), map(_day_of, ends))):
                    _check_dates(starts[index], ends[index], "", window)
        except (ValueError, ApiError):
            return None
    else:
        for start, end in zip(starts, ends):
            try:
                _check_dates(start, end, "", window)
            except ApiError:
                return None
    # UTF-8 byte lengths: msgspec bounded the characters to 512; only longer than 128 characters
    # can a string exceed 512 bytes.
    bundles = [sample.sourceBundleId for sample in fast]
    if max(map(len, bundles)) > 128 and any(len(b.encode()) > MAX_SOURCE_BYTES for b in bundles):
        return None
    present = [d for d in devices if d is not None and d is not unset]
    if present and max(map(len, present)) > 128 and any(len(d.encode()) > MAX_SOURCE_BYTES for d in present):
        return None
    if with_device < count:
        for sample in fast:
            if sample.sourceDeviceName is unset:
                sample.sourceDeviceName = None
    parsed = ParsedSamples(fast)
    parsed.fields = (starts, ends, bundles, devices)
    # Whole seconds or milliseconds (the daily buckets read them at either stride).
    parsed.usual_dates = dates if usual else None
    if not usual:
        least, greatest = min(starts), max(ends)
    parsed.least_start, parsed.greatest_end = least, greatest
    parsed.start_days, parsed.same_day = (start_days, same_day) if usual else (None, False)
    return parsed


def _plain_ids(ids: list[str]) -> bool:
    """Whether every id is made of the alphabet's characters only (one pass over them all in C; their
    lengths msgspec bounded). Not empty."""
    return ("\n".join(ids)).encode().translate(None, _ID_ALPHABET) == b"\n" * (len(ids) - 1)


def _quotes(body: bytes) -> int:
    """The '"' bytes in body, counted by numpy a block at a time: a sixth of bytes.count's time, and a
    compare's scratch of at most _QUOTE_BLOCK_BYTES (a whole 8 MiB body's would be 8 MiB a request)."""
    view = numpy.frombuffer(body, numpy.uint8)
    return sum(int(numpy.count_nonzero(view[start : start + _QUOTE_BLOCK_BYTES] == _QUOTE))
               for start in range(0, len(view), _QUOTE_BLOCK_BYTES))


def _is_utf8(body: bytes) -> bool:
    """Checked a MiB at a time, so that no str of the whole body is built."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    view = memoryview(body)
    try:
        for start in range(0, len(view), 1 << 20):
            decoder.decode(view[start : start + (1 << 20)])
        decoder.decode(b"", final=True)
        return True
    except UnicodeDecodeError:
        return False


class _DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _pairs_without_duplicates(pairs: list[tuple[str, Any]]) -> dict:
    result = {}
    for key, value in pairs:
        if key in result:
            raise _DuplicateKey(key)
        result[key] = value
    return result


def _parse_int(text: str) -> Any:
    return int(text) if len(text) <= 30 else _BigNumber(text)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def load_json(body: bytes) -> Any:
    """json.loads with exact one-line errors: bad UTF-8, syntax (line, column), duplicate keys
    (named, with where they are found by the caller), NaN/Infinity, nesting."""
    if not body.strip():
        raise bad_request("body is empty; expected a JSON object")
    values = body.count(b",") + body.count(b":") // 2 + 1
    if values > MAX_JSON_VALUES or body.count(b"{") + body.count(b"[") > MAX_JSON_VALUES // 2:
        raise bad_request(f"body has too many JSON values for one request (at most {MAX_JSON_VALUES})")
    try:
        text = body.decode("utf-8")  # (a bytearray decodes in place: no copy of the body first)
    except UnicodeDecodeError as error:
        raise bad_request(f"body is not valid UTF-8 (byte offset {error.start})") from None
    try:
        return json.loads(
            text, object_pairs_hook=_pairs_without_duplicates, parse_int=_parse_int, parse_constant=_reject_constant
        )
    except _DuplicateKey as error:
        raise bad_request(f"body has a duplicate key {json.dumps(error.key)} in an object") from None
    except json.JSONDecodeError as error:
        raise bad_request(f"body is not valid JSON (line {error.lineno}, column {error.colno}): {error.msg}") from None
    except RecursionError:
        raise bad_request("body is not valid JSON: nested too deeply") from None
    except ValueError as error:  # NaN/Infinity
        raise bad_request(f"body is not valid JSON: {str(error).splitlines()[0]}") from None


def _check_text(value: Any, where: str) -> None:
    """A str that cannot be stored as UTF-8 (a lone surrogate from a \\ud800 escape)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise bad_request(f"{where}: contains an unpaired UTF-16 surrogate, which cannot be stored as UTF-8") from None


def check_id(value: Any, where: str) -> str:
    if type(value) is not str or _ID_RE.fullmatch(value) is None:
        raise bad_request(f"{where}: must be 1-{ID_MAX_LENGTH} characters from {ID_CHARACTERS} (got {describe(value)})")
    return value


def _parse_samples_exact(body: bytes, window: DateWindow) -> list[SampleFields]:
    document = load_json(body)
    if type(document) is not dict:
        raise bad_request(f'body must be a JSON object like {{"samples":[...]}} (got {describe(document)})')
    if "samples" not in document:
        raise bad_request("samples: field required")
    raw_samples = document["samples"]
    if type(raw_samples) is not list:
        raise bad_request(f"samples: must be an array (got {describe(raw_samples)})")
    if len(raw_samples) > MAX_SAMPLES_PER_REQUEST:
        raise bad_request(f"samples: at most {MAX_SAMPLES_PER_REQUEST} samples a request (got {len(raw_samples)})")
    samples = []
    for index, raw in enumerate(raw_samples):
        where = f"samples[{index}]"
        if type(raw) is not dict:
            raise bad_request(f"{where}: must be an object (got {describe(raw)})")
        for field in ("id", "startDate", "endDate", "count", "sourceBundleId"):
            if field not in raw:
                raise bad_request(f"{where}.{field}: field required")
        sample_id = check_id(raw["id"], f"{where}.id")
        start, end = raw["startDate"], raw["endDate"]
        for field, value in (("startDate", start), ("endDate", end)):
            if type(value) is not str or _DATE_RE.fullmatch(value) is None:
                raise bad_request(f"{where}.{field}: {_DATE_HINT} (got {describe(value)})")
        _check_dates(start, end, where, window)
        count = raw["count"]
        if type(count) is not int and not isinstance(count, _BigNumber):
            raise bad_request(f"{where}.count: must be an integer (got {describe(count)})")
        if isinstance(count, _BigNumber) or not 0 <= count <= MAX_COUNT:
            raise bad_request(f"{where}.count: must be between 0 and {MAX_COUNT} (got {describe(count)})")
        bundle = raw["sourceBundleId"]
        if type(bundle) is str:
            _check_text(bundle, f"{where}.sourceBundleId")
        if type(bundle) is not str or not _source_ok(bundle, 1):
            raise bad_request(
                f"{where}.sourceBundleId: must be a string of 1-{MAX_SOURCE_BYTES} UTF-8 bytes without U+0000 "
                f"(got {describe(bundle)})"
            )
        device = raw.get("sourceDeviceName")
        if type(device) is str:
            _check_text(device, f"{where}.sourceDeviceName")
        if device is not None and (type(device) is not str or not _source_ok(device, 0)):
            raise bad_request(
                f"{where}.sourceDeviceName: must be null or a string of 0-{MAX_SOURCE_BYTES} UTF-8 bytes without "
                f"U+0000 (got {describe(device)})"
            )
        samples.append(SampleFields(sample_id, start, end, count, bundle, device))
    return samples


def encode_sample(sample: SampleFields) -> bytes:
    """The sample's compact JSON, keys in stored order: b'{"id":...,"sourceDeviceName":...}'.
    The same bytes as json.dumps(..., ensure_ascii=False, separators=(",", ":"))."""
    return _sample_encoder.encode(sample)


def decode_stored_sample(line: bytes) -> SampleFields:
    """A stored line (or any JSON object with the sample's fields) as a Sample; ValueError if unusable.
    Unknown keys (receivedAt) are ignored. No bounds are checked: what was stored is served."""
    try:
        sample = _stored_decoder.decode(line)
    except (msgspec.DecodeError, msgspec.ValidationError) as error:
        raise ValueError(str(error).splitlines()[0]) from None
    if sample.sourceDeviceName is msgspec.UNSET:
        sample.sourceDeviceName = None
    return sample


class _LooseSample(msgspec.Struct):
    id: str
    startDate: str
    endDate: str
    count: int
    sourceBundleId: str
    sourceDeviceName: Union[Optional[str], msgspec.UnsetType] = msgspec.UNSET


_stored_decoder = msgspec.json.Decoder(_LooseSample)


# --------------------------------------------------------------------------------------------------
# POST /steps/deletions
# --------------------------------------------------------------------------------------------------


def parse_deletions(body: bytes) -> list[str]:
    """Parses and validates a POST /steps/deletions body. Raises ApiError(400) naming the first problem.
    Fast when every id is plain (no escapes, ASCII): one decode, the characters of all ids in one pass;
    anything else by the exact path, which names the problem."""
    if b"\\" not in body and body.isascii() and body.count(b'"ids"') == 1:
        try:
            ids = _deletions_decoder.decode(body).ids
        except (msgspec.DecodeError, msgspec.ValidationError):
            ids = None
        if ids is not None and (not ids or _plain_ids(ids)):
            return ids
    document = load_json(body)
    if type(document) is not dict:
        raise bad_request(f'body must be a JSON object like {{"ids":[...]}} (got {describe(document)})')
    if "ids" not in document:
        raise bad_request("ids: field required")
    ids = document["ids"]
    if type(ids) is not list:
        raise bad_request(f"ids: must be an array (got {describe(ids)})")
    if len(ids) > MAX_IDS_PER_REQUEST:
        raise bad_request(f"ids: at most {MAX_IDS_PER_REQUEST} ids a request (got {len(ids)})")
    return [check_id(value, f"ids[{index}]") for index, value in enumerate(ids)]


# --------------------------------------------------------------------------------------------------
# Query strings: strict (known names, each at most once, digits only)
# --------------------------------------------------------------------------------------------------


def parse_query(query: str, allowed: dict[str, str]) -> dict[str, str]:
    """`allowed` maps a parameter name to its kind: "digits", "bool", "date", "zone".
    Unknown names, repeats, empty values and anything percent-encoded or malformed are a 400."""
    values: dict[str, str] = {}
    if not query:
        return values
    for part in query.split("&"):
        name, equals, value = part.partition("=")
        if name not in allowed:
            shown = json.dumps(name[:40])
            raise bad_request(f"query parameter {shown} is not known here (known: {', '.join(sorted(allowed))})")
        if name in values:
            raise bad_request(f"{name}: given more than once")
        kind = allowed[name]
        if not equals or not value:
            raise bad_request(f"{name}: a value is required")
        if kind == "digits":
            if not (value.isascii() and value.isdigit()) or len(value) > MAX_OFFSET_DIGITS:
                raise bad_request(f"{name}: must be digits only, at most {MAX_OFFSET_DIGITS} (got {json.dumps(value[:40])})")
        elif kind == "bool":
            if value not in ("true", "false"):
                raise bad_request(f"{name}: must be true or false (got {json.dumps(value[:40])})")
        elif kind == "date":
            if not re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", value, re.ASCII):
                raise bad_request(f"{name}: must be a date YYYY-MM-DD (got {json.dumps(value[:40])})")
        elif kind == "zone":
            value = urllib.parse.unquote(value)
            if not re.fullmatch(r"[A-Za-z0-9_+\-/]{1,64}", value, re.ASCII):
                raise bad_request(f"{name}: must be an IANA time zone like Europe/Zurich (got {json.dumps(value[:40])})")
        elif kind == "text":
            value = urllib.parse.unquote_plus(value)
        elif kind == "word":
            if value not in ("all", "current"):
                raise bad_request(f"{name}: must be all or current (got {json.dumps(value[:40])})")
        values[name] = value
    return values


def bounded_int(values: dict[str, str], name: str, default: int, maximum: Optional[int]) -> int:
    if name not in values:
        return default
    number = int(values[name])
    if maximum is not None and number > maximum:
        raise bad_request(f"{name}: must be at most {maximum} (got {number})")
    return number

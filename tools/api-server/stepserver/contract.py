"""The wire contract: what a request may hold, its limits, and the one-line error for each violation.

One definition, one parser. The msgspec types below decode every body (strictly: a boolean or a
string is not a number) and the OpenAPI schema is generated from the same types
(routes/openapi.py). What msgspec cannot express is checked right after the decode, in field order,
as the Swift `SampleContract` (Sources/StepSync/Contract) checks a sample: the id's alphabet, the
dates' grammar, calendar and bounds (to the nanosecond), a count's three decimals at most, UTF-8 byte
lengths and U+0000. The shared
vectors (Tests/Fixtures/contract/samples.json) hold both sides to the same answers, and a property
test (tests/test_contract_fuzz.py) looks for a body where they differ.

A body that is not UTF-8, not JSON or nested too deeply is a 400 like any other bad body: nothing but
ApiError(400) leaves parse_samples and parse_deletions for any input.

Beside it: answers.py (the response bodies' types) and query.py (query strings).
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone
from itertools import repeat
from operator import floordiv, mul, sub
from typing import Annotated, NamedTuple, Optional, Union

import msgspec

from .errors import bad_request

# Limits (never change one without the Swift SampleContract and the shared vectors).
ID_MAX_LENGTH = 64
ID_PATTERN = r"^[A-Za-z0-9._:-]{1,64}$"
ID_CHARACTERS = "A-Z a-z 0-9 . _ : -"
MIN_DATE_TEXT = "2000-01-01T00:00:00Z"
MAX_FUTURE_SECONDS = 24 * 3600  # endDate <= the server's receive time + 24 h
MAX_DURATION_SECONDS = 48 * 3600  # endDate - startDate <= 48 h
MAX_COUNT = 1_000_000
# A count is kept in thousandths of a step (2741.7 -> 2_741_700). A JSON number is read as the
# nearest double d; it has at most three decimals when d * 1000 is within COUNT_TOLERANCE of a whole
# number (the double's rounding is under 1.2e-7 up to MAX_COUNT; a fourth decimal is at least 1e-1 away
# once scaled). The Swift SampleContract.thousandths(ofCount:) is the same rule.
COUNT_SCALE = 1000
COUNT_TOLERANCE = 1e-6
MAX_SOURCE_BYTES = 512  # sourceBundleId 1..512, sourceDeviceName 0..512 UTF-8 bytes, no U+0000
MAX_SAMPLES_PER_REQUEST = 10_000
MAX_IDS_PER_REQUEST = 1_000
MAX_BODY_BYTES = 8 * 1024 * 1024  # 1,000 samples of maximal size (~6.4 KB each, escaped) fit
DEFAULT_LIMIT = 1000
MAX_LIMIT = 100_000
MAX_DIGITS = 18
MAX_DAILY_DAYS = 3700  # GET /steps/daily: ten years and a bit per request
MIN_DAILY_YEAR, MAX_DAILY_YEAR = 1990, 9998
MAX_PRIORITY_PATTERNS = 16
MAX_PRIORITY_PATTERN_BYTES = 200

# RFC 3339 date-time, seconds required, 1-9 fraction digits, Z or +-HH:MM (uppercase T and Z).
DATE_PATTERN = (
    r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]"
    r"(?:\.[0-9]{1,9})?(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])$"
)
# Checked with fullmatch: a pattern's "$" would let a final newline through.
_DATE_RE = re.compile(DATE_PATTERN[1:-1].replace(r"(?:\.[0-9]{1,9})?", r"(?:\.([0-9]{1,9}))?"), re.ASCII)
ID_RE = re.compile(ID_PATTERN[1:-1], re.ASCII)
_NS = 1_000_000_000
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MICROSECOND = timedelta(microseconds=1)
MIN_DATE_NS = 946_684_800 * _NS

# --------------------------------------------------------------------------------------------------
# Wire types (the OpenAPI schema is generated from these; patterns are checked by check_sample)
# --------------------------------------------------------------------------------------------------

SampleId = Annotated[str, msgspec.Meta(min_length=1, max_length=ID_MAX_LENGTH, extra_json_schema={"pattern": ID_PATTERN},
                                       description=f"1-64 characters from {ID_CHARACTERS}")]
DateTime = Annotated[str, msgspec.Meta(
    extra_json_schema={"pattern": DATE_PATTERN},
    description="RFC 3339 date-time (fraction up to 9 digits, Z or +-HH:MM); stored as sent. "
    f"{MIN_DATE_TEXT} <= startDate <= endDate <= the server's time + 24 h; endDate - startDate <= 48 h")]
# The type of a count on the wire: an integer as ever, or a number with up to three decimals. In
# storage it is thousandths (storage/schema.py's COUNT_TYPE is its column).
_COUNT_TEXT = "steps; an integer, or a number with at most three decimals (2741.7)"
Count = Union[Annotated[int, msgspec.Meta(ge=0, le=MAX_COUNT, description=_COUNT_TEXT)],
              Annotated[float, msgspec.Meta(ge=0, le=MAX_COUNT, description=_COUNT_TEXT,
                                            extra_json_schema={"multipleOf": 1 / COUNT_SCALE})]]
BundleId = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_SOURCE_BYTES, description="1-512 UTF-8 bytes, no U+0000")]
DeviceName = Annotated[str, msgspec.Meta(max_length=MAX_SOURCE_BYTES, description="0-512 UTF-8 bytes, no U+0000")]


class Sample(msgspec.Struct, gc=False):
    """One step sample. Unknown fields are ignored; an absent sourceDeviceName is null."""

    id: SampleId
    startDate: DateTime
    endDate: DateTime
    count: Count
    sourceBundleId: BundleId
    sourceDeviceName: Optional[DeviceName] = None


UploaderId = Annotated[str, msgspec.Meta(
    min_length=1, max_length=ID_MAX_LENGTH, extra_json_schema={"pattern": ID_PATTERN},
    description="the client's store that sends this (its random id, e.g. a UUID): the server records it as the "
    "writer of each sample or deletion, and keeps digests per uploader (GET /steps/digest)")]


class StepsBody(msgspec.Struct):
    samples: Annotated[list[Sample], msgspec.Meta(max_length=MAX_SAMPLES_PER_REQUEST)]
    uploader: Optional[UploaderId] = None


class DeletionsBody(msgspec.Struct):
    ids: Annotated[list[SampleId], msgspec.Meta(max_length=MAX_IDS_PER_REQUEST)]
    uploader: Optional[UploaderId] = None


class LookupBody(msgspec.Struct):
    ids: Annotated[list[SampleId], msgspec.Meta(max_length=MAX_IDS_PER_REQUEST)]


class ValidSample(msgspec.Struct, gc=False):
    """A sample that passed every check, with its instants (ns since 1970 UTC): what storage keeps
    (made in C, as the wire types are)."""

    id: str
    start_date: str
    end_date: str
    start_ns: int
    end_ns: int
    count_thousandths: int
    bundle: str
    device: Optional[str]


_steps_decoder = msgspec.json.Decoder(StepsBody)
_deletions_decoder = msgspec.json.Decoder(DeletionsBody)
_lookup_decoder = msgspec.json.Decoder(LookupBody)


def describe(value: object) -> str:
    """A short, single-line description of a value for error messages."""
    if value is None:
        return "null"
    if isinstance(value, str):
        return "string " + json.dumps(value[:60]) + ("..." if len(value) > 60 else "")
    return f"{type(value).__name__} {value!r}"[:80]


def instant_ns(text: str) -> Optional[int]:
    """Nanoseconds since 1970 UTC of a contract date-time (DATE_PATTERN, a real calendar date, year
    1 or later); None for anything else."""
    match = _DATE_RE.fullmatch(text)
    if match is None:
        return None
    try:
        moment = datetime.fromisoformat(text)  # the calendar; fractions past microseconds are cut
    except ValueError:
        return None
    return (moment - _EPOCH) // _MICROSECOND * 1000 + _past_microseconds(match[1])


def instants_ns(texts: list[str]) -> list[Optional[int]]:
    """instant_ns of each text, a column at a time through C functions (the pattern, fromisoformat,
    timedelta's arithmetic) when every text is a date-time the calendar has; one by one otherwise."""
    matches = list(map(_DATE_RE.fullmatch, texts))
    if None not in matches:
        try:
            microseconds = list(map(floordiv, map(sub, map(datetime.fromisoformat, texts), repeat(_EPOCH)), repeat(_MICROSECOND)))
        except ValueError:  # a day the calendar does not have
            pass
        else:
            return [micro * 1000 + _past_microseconds(match[1]) for micro, match in zip(microseconds, matches)]
    return [instant_ns(text) for text in texts]


def _past_microseconds(fraction: Optional[str]) -> int:
    """The nanoseconds of a date's fraction of a second past its microseconds, which fromisoformat cuts."""
    return int(fraction[6:].ljust(3, "0")) if fraction and len(fraction) > 6 else 0


def count_thousandths(count: Union[int, float]) -> Optional[int]:
    """A wire count in thousandths of a step; None when it has more than three decimals."""
    if type(count) is int:
        return count * COUNT_SCALE
    scaled = count * COUNT_SCALE
    whole = round(scaled)
    return whole if abs(scaled - whole) < COUNT_TOLERANCE else None


def count_value(thousandths: int) -> Union[int, float]:
    """A stored count for the wire: the integer when whole (as it always was), else the number with up
    to three decimals (msgspec writes the shortest text that reads back as it: 2741.7)."""
    whole, fraction = divmod(thousandths, COUNT_SCALE)
    return whole if fraction == 0 else thousandths / COUNT_SCALE


def utc_text(nanoseconds: int) -> str:
    return datetime.fromtimestamp(nanoseconds // _NS, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _source_ok(text: str, least: int) -> bool:
    size = len(text) if text.isascii() else len(text.encode("utf-8"))
    return least <= size <= MAX_SOURCE_BYTES and "\x00" not in text


def id_problem(value: str, where: str) -> str:
    return f"{where}: must be 1-{ID_MAX_LENGTH} characters from {ID_CHARACTERS} (got {describe(value)})"


def _date_problem(text: str, where: str) -> str:
    return (f"{where}: must be an RFC 3339 date-time with Z or an offset, e.g. 2024-01-15T10:30:00Z, on a real "
            f"calendar day (got {describe(text)})")


def check_sample(sample: Sample, index: int, now_ns: int, names: dict[str, str], id_ok: bool,
                 start: Optional[int], end: Optional[int]) -> ValidSample:
    """The checks msgspec's types cannot make, in SampleContract's order; ApiError(400) names the first.
    `id_ok`: whether the id matches ID_PATTERN; `start`, `end`: instant_ns of the dates. `names` keeps
    each source's names once, however many samples of the body carry them."""
    if not id_ok:
        raise bad_request(id_problem(sample.id, f"samples[{index}].id"))
    if start is None:
        raise bad_request(_date_problem(sample.startDate, f"samples[{index}].startDate"))
    if start < MIN_DATE_NS:
        raise bad_request(f"samples[{index}].startDate: must not be before {MIN_DATE_TEXT} (got {describe(sample.startDate)})")
    if end is None:
        raise bad_request(_date_problem(sample.endDate, f"samples[{index}].endDate"))
    if end < start:
        raise bad_request(f"samples[{index}].endDate: must not be before startDate ({sample.endDate} < {sample.startDate})")
    latest = now_ns + MAX_FUTURE_SECONDS * _NS
    if end > latest:
        raise bad_request(f"samples[{index}].endDate: must not be more than 24 hours after the server's time, "
                          f"{utc_text(latest)} (got {describe(sample.endDate)})")
    if end - start > MAX_DURATION_SECONDS * _NS:
        raise bad_request(f"samples[{index}].endDate: must be at most 48 hours after startDate "
                          f"({sample.startDate} .. {sample.endDate})")
    thousandths = count_thousandths(sample.count)
    if thousandths is None:
        raise bad_request(f"samples[{index}].count: must have at most three decimals (got {describe(sample.count)})")
    bundle, device = sample.sourceBundleId, sample.sourceDeviceName
    if not _source_ok(bundle, 1):
        raise bad_request(f"samples[{index}].sourceBundleId: must be a string of 1-{MAX_SOURCE_BYTES} UTF-8 bytes "
                          f"without U+0000 (got {describe(bundle)})")
    if device is not None and not _source_ok(device, 0):
        raise bad_request(f"samples[{index}].sourceDeviceName: must be null or a string of 0-{MAX_SOURCE_BYTES} UTF-8 "
                          f"bytes without U+0000 (got {describe(device)})")
    return ValidSample(sample.id, sample.startDate, sample.endDate, start, end, thousandths,
                       names.setdefault(bundle, bundle), device if device is None else names.setdefault(device, device))


def _decode(decoder: msgspec.json.Decoder, body: bytes):
    """The body through the decoder; every way it can fail is a 400 naming where."""
    if not body.isascii():
        try:
            body.decode("utf-8")  # unknown fields are skipped by msgspec without a look at their bytes
        except UnicodeDecodeError as error:
            raise bad_request(f"body is not valid UTF-8 (byte offset {error.start})") from None
    try:
        return decoder.decode(body)
    except msgspec.ValidationError as error:
        message, _, where = str(error).partition(" - at `$")
        where = where.rstrip("`").lstrip(".")
        message = message.replace("`", "")
        if message.startswith("Object missing required field "):
            field = message.rsplit(" ", 1)[1]
            where, message = (f"{where}.{field}" if where else field), "field required"
        raise bad_request(f"{where or 'body'}: {message[0].lower()}{message[1:]}") from None
    except msgspec.DecodeError as error:
        if not body.strip():
            raise bad_request("body is empty; expected a JSON object") from None
        raise bad_request(f"body is not valid JSON: {str(error).removeprefix('JSON is malformed: ')}") from None
    except RecursionError:
        raise bad_request("body is not valid JSON: nested too deeply") from None


class Upload(NamedTuple):
    """A write's body: its samples (or ids) and the uploader that sent it ('' when it did not say)."""

    items: list
    uploader: str


def parse_upload(body: bytes, now_ns: int) -> Upload:
    """A POST /steps body: its samples, each checked against the server's receive time `now_ns`.

    The rules are checked column by column (the body's ids, dates and counts; each distinct source
    once). Where one fails, check_sample goes through the samples in order to name the first sample
    and rule that fails, as SampleContract does."""
    decoded = _decode(_steps_decoder, body)
    _check_uploader(decoded.uploader)
    samples = decoded.samples
    uploader = decoded.uploader or ""
    if not samples:
        return Upload([], uploader)
    ids = [sample.id for sample in samples]
    start_texts = [sample.startDate for sample in samples]
    end_texts = [sample.endDate for sample in samples]
    starts, ends = instants_ns(start_texts), instants_ns(end_texts)
    counts = [sample.count for sample in samples]
    thousandths = (list(map(mul, counts, repeat(COUNT_SCALE))) if set(map(type, counts)) == {int}
                   else list(map(count_thousandths, counts)))
    bundles = [sample.sourceBundleId for sample in samples]
    devices = [sample.sourceDeviceName for sample in samples]
    names = dict(zip(bundles + devices, bundles + devices))  # each source's names kept once
    if _columns_valid(ids, starts, ends, thousandths, set(bundles), set(devices), now_ns):
        return Upload(list(map(ValidSample, ids, start_texts, end_texts, starts, ends, thousandths,
                               map(names.__getitem__, bundles), map(names.__getitem__, devices))), uploader)
    for index, (sample, start, end) in enumerate(zip(samples, starts, ends)):
        check_sample(sample, index, now_ns, names, ID_RE.fullmatch(sample.id) is not None, start, end)
    raise AssertionError("a body failed a rule that none of its samples fails")


def _columns_valid(ids: list[str], starts: list[Optional[int]], ends: list[Optional[int]], thousandths: list[Optional[int]],
                   bundles: set[str], devices: set[Optional[str]], now_ns: int) -> bool:
    """Whether every sample of a body passes check_sample's rules, from its columns (not empty)."""
    if not all(map(ID_RE.fullmatch, ids)) or None in starts or None in ends or None in thousandths:
        return False
    durations = list(map(sub, ends, starts))
    return (min(starts) >= MIN_DATE_NS and max(ends) <= now_ns + MAX_FUTURE_SECONDS * _NS
            and min(durations) >= 0 and max(durations) <= MAX_DURATION_SECONDS * _NS
            and all(_source_ok(bundle, 1) for bundle in bundles)
            and all(_source_ok(device, 0) for device in devices if device is not None))


def parse_samples(body: bytes, now_ns: int) -> list[ValidSample]:
    """A POST /steps body's samples (parse_upload without the uploader)."""
    return parse_upload(body, now_ns).items


def parse_deletion_upload(body: bytes) -> Upload:
    """A POST /steps/deletions body: its ids."""
    decoded = _decode(_deletions_decoder, body)
    _check_uploader(decoded.uploader)
    _check_ids(decoded.ids)
    return Upload(decoded.ids, decoded.uploader or "")


def parse_deletions(body: bytes) -> list[str]:
    """A POST /steps/deletions body's ids."""
    return parse_deletion_upload(body).items


def parse_lookup(body: bytes) -> list[str]:
    """A POST /steps/digest/lookup body's ids."""
    ids = _decode(_lookup_decoder, body).ids
    _check_ids(ids)
    return ids


def _check_ids(ids: list[str]) -> None:
    for index, value in enumerate(ids):
        if ID_RE.fullmatch(value) is None:
            raise bad_request(id_problem(value, f"ids[{index}]"))


def _check_uploader(uploader: Optional[str]) -> None:
    if uploader is not None and ID_RE.fullmatch(uploader) is None:
        raise bad_request(id_problem(uploader, "uploader"))


# --------------------------------------------------------------------------------------------------
# Query strings: strict (known names, each at most once, digits only)
# --------------------------------------------------------------------------------------------------

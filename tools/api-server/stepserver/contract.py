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
"""

from __future__ import annotations

import json
import re
import urllib.parse
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
_ID_RE = re.compile(ID_PATTERN[1:-1], re.ASCII)
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


Hash = Annotated[str, msgspec.Meta(pattern="^[0-9a-f]{16}$", description="64 bits as 16 hex digits (docs/RECONCILE.md)")]
Day = Annotated[str, msgspec.Meta(description="YYYY-MM-DD, a UTC day")]


class UploaderDigest(msgspec.Struct):
    """GET /steps/digest: who answers, and the digest of what an uploader holds here."""

    serverId: Annotated[str, msgspec.Meta(description="random, made with the database (a restored backup keeps it)")]
    user: str
    uploader: str
    count: Annotated[int, msgspec.Meta(description="live samples this uploader last wrote")]
    digest: Annotated[Hash, msgspec.Meta(description="the sum of their content hashes mod 2^64")]
    days: Annotated[int, msgspec.Meta(description="UTC days holding them")]


class DayDigest(msgspec.Struct):
    day: Day
    count: int
    digest: Hash


class DayDigestsPage(msgspec.Struct):
    days: list[DayDigest]
    next: Annotated[Optional[str], msgspec.Meta(description="the `after` of the next page; null on the last")]


class SampleHash(msgspec.Struct):
    id: str
    hash: Hash


class DaySamplesPage(msgspec.Struct):
    samples: list[SampleHash]
    next: Annotated[Optional[str], msgspec.Meta(description="the `after` of the next page; null on the last")]


class LookupEntry(msgspec.Struct, omit_defaults=True):
    id: str
    state: Annotated[str, msgspec.Meta(description="live, or deleted (its last word was a deletion)")]
    uploader: Annotated[str, msgspec.Meta(description="who wrote the live version, or the deletion ('' for unknown)")]
    day: Optional[Day] = None
    hash: Optional[Hash] = None


class LookupAnswer(msgspec.Struct):
    samples: Annotated[list[LookupEntry], msgspec.Meta(description="the ids the server knows, in id order")]


class StoredSample(msgspec.Struct):
    """A sample as GET /steps returns it: the sample plus when the server received it."""

    id: str
    startDate: str
    endDate: str
    count: Annotated[Union[int, float], msgspec.Meta(description="an integer when whole, else up to three decimals")]
    sourceBundleId: str
    sourceDeviceName: Optional[str]
    receivedAt: Annotated[str, msgspec.Meta(description="UTC, whole seconds, e.g. 2024-01-20T15:00:00Z")]

    @classmethod
    def from_row(cls, id: str, start_date: str, end_date: str, count_thousandths: int, bundle: str,
                 device: Optional[str], received_at: str) -> "StoredSample":
        return cls(id, start_date, end_date, count_value(count_thousandths), bundle, device, received_at)


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


def _id_problem(value: str, where: str) -> str:
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
        raise bad_request(_id_problem(sample.id, f"samples[{index}].id"))
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
        check_sample(sample, index, now_ns, names, _ID_RE.fullmatch(sample.id) is not None, start, end)
    raise AssertionError("a body failed a rule that none of its samples fails")


def _columns_valid(ids: list[str], starts: list[Optional[int]], ends: list[Optional[int]], thousandths: list[Optional[int]],
                   bundles: set[str], devices: set[Optional[str]], now_ns: int) -> bool:
    """Whether every sample of a body passes check_sample's rules, from its columns (not empty)."""
    if not all(map(_ID_RE.fullmatch, ids)) or None in starts or None in ends or None in thousandths:
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
        if _ID_RE.fullmatch(value) is None:
            raise bad_request(_id_problem(value, f"ids[{index}]"))


def _check_uploader(uploader: Optional[str]) -> None:
    if uploader is not None and _ID_RE.fullmatch(uploader) is None:
        raise bad_request(_id_problem(uploader, "uploader"))


# --------------------------------------------------------------------------------------------------
# Query strings: strict (known names, each at most once, digits only)
# --------------------------------------------------------------------------------------------------


def parse_query(query: str, allowed: dict[str, str]) -> dict[str, str]:
    """`allowed` maps a parameter name to its kind: "digits", "bool", "date", "zone", "text", "word", "id".
    Unknown names, repeats, empty values and anything percent-encoded or malformed are a 400."""
    values: dict[str, str] = {}
    if not query:
        return values
    for part in query.split("&"):
        name, equals, value = part.partition("=")
        if name not in allowed:
            shown = json.dumps(name[:40])
            raise bad_request(f"query parameter {shown} is not known here (known: {', '.join(sorted(allowed)) or 'none'})")
        if name in values:
            raise bad_request(f"{name}: given more than once")
        kind = allowed[name]
        if not equals or not value:
            raise bad_request(f"{name}: a value is required")
        if kind == "digits":
            if not (value.isascii() and value.isdigit()) or len(value) > MAX_DIGITS:
                raise bad_request(f"{name}: must be digits only, at most {MAX_DIGITS} (got {json.dumps(value[:40])})")
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
        elif kind == "id":
            if _ID_RE.fullmatch(value) is None:
                raise bad_request(_id_problem(value, name))
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


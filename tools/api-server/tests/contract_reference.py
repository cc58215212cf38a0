"""The Swift side of the sample contract, transcribed line by line for the tests: SampleContract.check
(Sources/StepSync/Contract/SampleContract.swift) behind the JSON type rules of the Swift test that
reads the shared vectors (ExportContractTests.violation(of:)). The shared vectors hold this
transcription and the Swift code to the same answers; the property test (test_contract_fuzz.py)
holds the server to this transcription.

Two rules belong to JSON itself, not to the contract, and are applied to a whole body: it is UTF-8
(RFC 8259 section 8.1), and no string holds a lone UTF-16 surrogate (section 8.2: not interoperable;
a Swift String cannot hold one, so no Swift client sends one)."""

from __future__ import annotations

from typing import Any, Optional

ID_BYTES = set(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:-")
EARLIEST_NS = 946_684_800 * 10**9
FUTURE_NS = 24 * 3600 * 10**9
DURATION_NS = 48 * 3600 * 10**9
INT64 = 2**63


def days_in_month(year: int, month: int) -> int:
    if month == 2:
        return 29 if (year % 4 == 0 and year % 100 != 0) or year % 400 == 0 else 28
    return 30 if month in (4, 6, 9, 11) else 31


def days_from_civil(year: int, month: int, day: int) -> int:
    year -= month <= 2
    era = year // 400
    yoe = year - era * 400
    doy = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def parse_timestamp(text: str) -> Optional[int]:
    """SampleContract.parseTimestamp, in nanoseconds since 1970; None where it answers nil."""
    b = text.encode("utf-8")

    def number(start: int, count: int) -> Optional[int]:
        if start + count > len(b):
            return None
        value = 0
        for byte in b[start : start + count]:
            if not 0x30 <= byte <= 0x39:
                return None
            value = value * 10 + byte - 0x30
        return value

    if len(b) < 20 or b[4] != ord("-") or b[7] != ord("-") or b[10] != ord("T") or b[13] != ord(":") or b[16] != ord(":"):
        return None
    year, month, day = number(0, 4), number(5, 2), number(8, 2)
    hour, minute, second = number(11, 2), number(14, 2), number(17, 2)
    if None in (year, month, day, hour, minute, second):
        return None
    if not 1 <= month <= 12 or not 1 <= day <= days_in_month(year, month) or hour > 23 or minute > 59 or second > 59:
        return None
    i, nanoseconds = 19, 0
    if b[i] == ord("."):
        i += 1
        digits, scale = 0, 100_000_000
        while i < len(b) and 0x30 <= b[i] <= 0x39:
            digits += 1
            if digits > 9:
                return None
            nanoseconds += (b[i] - 0x30) * scale
            scale //= 10
            i += 1
        if digits == 0:
            return None
    if i >= len(b):
        return None
    offset = 0
    if b[i] == ord("Z"):
        i += 1
    elif b[i] in (ord("+"), ord("-")):
        if i + 6 > len(b) or b[i + 3] != ord(":"):
            return None
        hours, minutes = number(i + 1, 2), number(i + 4, 2)
        if hours is None or minutes is None or hours > 23 or minutes > 59:
            return None
        offset = (hours * 3600 + minutes * 60) * (-1 if b[i] == ord("-") else 1)
        i += 6
    else:
        return None
    if i != len(b):
        return None
    seconds = days_from_civil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second - offset
    return seconds * 10**9 + nanoseconds


def _utf8(text: str) -> Optional[bytes]:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate
        return None


def violation(sample: Any, now_ns: int) -> Optional[str]:
    """The field SampleContract refuses (after the test's JSON type rules), or None when it accepts."""
    if not isinstance(sample, dict):
        return "sample"

    def string(field: str) -> Optional[str]:
        value = sample.get(field)
        return value if isinstance(value, str) and _utf8(value) is not None else None

    sample_id, start_text, end_text = string("id"), string("startDate"), string("endDate")
    if sample_id is None:
        return "id"
    if start_text is None:
        return "startDate"
    if end_text is None:
        return "endDate"
    count = sample.get("count")
    if type(count) not in (int, float):
        return "count"
    thousandths = thousandths_of_count(float(count) if type(count) is float or abs(count) >= 2**53 else count)
    bundle = string("sourceBundleId")
    if bundle is None:
        return "sourceBundleId"
    device = sample.get("sourceDeviceName")
    if device is not None and string("sourceDeviceName") is None:
        return "sourceDeviceName"
    # SampleContract.check(id:startDate:endDate:countThousandths:sourceBundleId:sourceDeviceName:now:)
    id_bytes = sample_id.encode()
    if not id_bytes or len(id_bytes) > 64 or any(byte not in ID_BYTES for byte in id_bytes):
        return "id"
    start = parse_timestamp(start_text)
    if start is None or start < EARLIEST_NS:
        return "startDate"
    end = parse_timestamp(end_text)
    if end is None or end < start or end > now_ns + FUTURE_NS or end > start + DURATION_NS:
        return "endDate"
    if thousandths is None or not 0 <= thousandths <= 1_000_000_000:
        return "count"
    bundle_bytes = bundle.encode()
    if not 1 <= len(bundle_bytes) <= 512 or 0 in bundle_bytes:
        return "sourceBundleId"
    if device is not None and (len(device.encode()) > 512 or "\x00" in device):
        return "sourceDeviceName"
    return None


def thousandths_of_count(count: Any) -> Optional[int]:
    """SampleContract.thousandths(ofCount:): the number read as a double (Swift's Double(literal): a
    JSON integer as exactly as a double holds it), thousandths when it has at most three decimals."""
    if type(count) is int:
        return count * 1000
    scaled = count * 1000
    if scaled != scaled or abs(scaled) >= 9e15:
        return None
    whole = round(scaled)
    return whole if abs(scaled - whole) < 1e-6 else None


def has_lone_surrogate(value: Any) -> bool:
    """Whether any string in a decoded JSON value (keys included) holds a lone surrogate."""
    if isinstance(value, str):
        return _utf8(value) is None
    if isinstance(value, dict):
        return any(has_lone_surrogate(key) or has_lone_surrogate(item) for key, item in value.items())
    if isinstance(value, list):
        return any(has_lone_surrogate(item) for item in value)
    return False


def body_violation(body: Any, now_ns: int) -> Optional[str]:
    """What refuses a decoded POST /steps body: "json" for a lone surrogate, "body" for its shape,
    "samples[i].field" for the first sample SampleContract refuses; None when it is accepted."""
    if has_lone_surrogate(body):
        return "json"
    if not isinstance(body, dict) or not isinstance(body.get("samples"), list) or len(body["samples"]) > 10_000:
        return "body"
    for index, sample in enumerate(body["samples"]):
        field = violation(sample, now_ns)
        if field is not None:
            return f"samples[{index}].{field}"
    return None

"""What the server answers: the wire types of every response body, from which routes/openapi.py
generates the OpenAPI schema beside the request types of contract.py. A count goes out as
contract.count_value gives it (an integer when whole)."""

from __future__ import annotations

from typing import Annotated, Optional, Union

import msgspec

from .contract import count_value

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

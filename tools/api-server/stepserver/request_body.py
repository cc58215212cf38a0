"""Request bodies: read within the per-request cap (413) and within a budget of the bytes held at once,
in all and by each user (503 with Retry-After beyond either), so that one user cannot hold what every
other user's writes need. A body is read only after its request is authenticated, and its bytes are
counted as they arrive, not as its Content-Length announces them: a client that announces 8 MiB and
sends nothing holds nothing."""

from __future__ import annotations

import json
import threading
from collections import Counter
from typing import Optional

from starlette.requests import Request

from . import contract
from .errors import ApiError, bad_request

RETRY_AFTER_BUSY_S = 1


class BodyBudget:
    """Bytes of request bodies held at once: at most `capacity` in all and `per_user` by one user."""

    def __init__(self, capacity: int, per_user: int) -> None:
        self.capacity = capacity
        self.per_user = per_user
        self.used = 0
        self.by_user: Counter[str] = Counter()
        self._lock = threading.Lock()

    def reserve(self, user: str, size: int) -> Optional[str]:
        """None when `size` more bytes may be held for `user`; else why not (one line)."""
        with self._lock:
            if self.by_user[user] + size > self.per_user:
                return f"server busy: this user's request bodies in flight would pass {self.per_user} bytes, retry later"
            if self.used + size > self.capacity:
                return "server busy: too many request bodies in flight, retry later"
            self.used += size
            self.by_user[user] += size
            return None

    def release(self, user: str, size: int) -> None:
        with self._lock:
            self.used -= size
            self.by_user[user] -= size
            if self.by_user[user] <= 0:
                del self.by_user[user]


def check_content_type(value: Optional[str]) -> None:
    if value is None:
        return  # tolerate clients that send none
    media_type, _, parameters = value.partition(";")
    media_type = media_type.strip().lower()
    if media_type != "application/json" and not (media_type.startswith("application/") and media_type.endswith("+json")):
        raise bad_request(f"Content-Type must be application/json (got {json.dumps(value[:80])})")
    for parameter in parameters.split(";"):
        name, _, charset = parameter.partition("=")
        if name.strip().lower() == "charset" and charset.strip().strip('"').lower() not in ("utf-8", "utf8"):
            raise bad_request(f"Content-Type charset must be utf-8 (got {json.dumps(value[:80])})")


async def read_body(request: Request, budget: BodyBudget, user: str) -> tuple[bytearray, int]:
    """The JSON body of `user`'s request, read within the per-request cap (413) and the budget (503);
    returns it and the bytes reserved, which the caller releases once it no longer holds the body."""
    check_content_type(request.headers.get("content-type"))
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.isdigit():
            raise bad_request("Content-Length: must be digits")
        if int(declared) > contract.MAX_BODY_BYTES:
            raise ApiError(413, f"body too large: {declared} bytes (at most {contract.MAX_BODY_BYTES})")
    body = bytearray()
    try:
        async for chunk in request.stream():
            if len(body) + len(chunk) > contract.MAX_BODY_BYTES:
                raise ApiError(413, f"body too large: more than {contract.MAX_BODY_BYTES} bytes")
            refusal = budget.reserve(user, len(chunk))
            if refusal is not None:
                raise ApiError(503, refusal, {"Retry-After": str(RETRY_AFTER_BUSY_S)})
            body += chunk
        return body, len(body)
    except BaseException:
        budget.release(user, len(body))
        raise

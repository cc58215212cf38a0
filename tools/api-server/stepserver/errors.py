"""Errors answered to the client as {"error": message} with an HTTP status."""

from __future__ import annotations

from typing import Optional


class ApiError(Exception):
    """An error answered as {"error": message} (one line) with the given HTTP status."""

    def __init__(self, status: int, message: str, headers: Optional[dict[str, str]] = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers

    def __reduce__(self):  # raised in a reading process (expensive_reads.py), answered by the server
        return ApiError, (self.status, self.message, self.headers)


def bad_request(message: str) -> ApiError:
    return ApiError(400, message)


class StorageUnavailable(ApiError):
    """Storage cannot take writes right now (disk full, database down): 503 with Retry-After."""

    def __init__(self, message: str, retry_after: int = 5) -> None:
        super().__init__(503, message, {"Retry-After": str(retry_after)})


class StartupError(Exception):
    """The server cannot start (data in use, unreadable, bad settings). One line, exit 1."""

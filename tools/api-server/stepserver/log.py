"""Diagnostics go to stderr, one line each, prefixed "api-server:". Never a token or a request body."""

from __future__ import annotations

import sys


def log(message: str) -> None:
    print(f"api-server: {message}", file=sys.stderr, flush=True)

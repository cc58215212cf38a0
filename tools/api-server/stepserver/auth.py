"""API tokens: random, shown once, stored as hashes, compared in constant time, never logged.

A token is "sst_" followed by 43 URL-safe base64 characters (256 random bits from `secrets`). The
server stores SHA-256(token) (a fast hash is enough for a secret of that entropy: there is nothing to
guess) and a public token id (`tok_` + 12 hex digits) that `tokens list` shows and `tokens revoke`
takes. Every request looks its token's hash up again, so a revocation takes effect on the next request.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import datetime, timezone
from typing import Callable, Optional

from .errors import ApiError

TOKEN_PREFIX = "sst_"
TOKEN_RANDOM_BYTES = 32
SINGLE_USER = "local"
MAX_AUTHORIZATION_BYTES = 200


def new_token() -> tuple[str, str, bytes]:
    """(token id, token, its hash)."""
    token = TOKEN_PREFIX + secrets.token_urlsafe(TOKEN_RANDOM_BYTES)
    return "tok_" + secrets.token_hex(6), token, token_hash(token)


def token_hash(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8")).digest()


def now_text() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def unauthorized(message: str) -> ApiError:
    return ApiError(401, message, {"WWW-Authenticate": 'Bearer realm="stepsync"'})


class Authenticator:
    """Resolves the user of a request from its Authorization header (or the single user)."""

    def __init__(self, lookup: Callable[[bytes], Optional[tuple[str, bytes]]], single_user: bool) -> None:
        self.lookup = lookup  # a token's hash -> (user, stored hash), for tokens that exist and are not revoked
        self.single_user = single_user

    def user(self, authorization: Optional[str]) -> str:
        if self.single_user:
            return SINGLE_USER
        if not authorization:
            raise unauthorized("missing token: send Authorization: Bearer <token>")
        scheme, _, presented = authorization.partition(" ")
        presented = presented.strip()
        if scheme.lower() != "bearer" or not presented or len(presented) > MAX_AUTHORIZATION_BYTES:
            raise unauthorized("malformed Authorization header: expected Bearer <token>")
        digest = token_hash(presented)
        found = self.lookup(digest)
        # The lookup is by hash (its timing tells nothing about any stored token); the final check
        # of the stored hash against the presented one is constant-time.
        if found is None or not hmac.compare_digest(found[1], digest):
            raise unauthorized("unknown or revoked token")
        return found[0]

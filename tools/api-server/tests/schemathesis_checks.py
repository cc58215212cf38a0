"""schemathesis hooks of ours (loaded by test_schema_fuzz.py through SCHEMATHESIS_HOOKS): a check that,
without a token, every endpoint but the open ones answers 401, whatever else is wrong with the
request; and the token, when STEPSYNC_FUZZ_TOKEN holds one, sent with every request (so that it is
never on a command line)."""

import os

import schemathesis

OPEN_PATHS = ("/health", "/openapi.json", "/")


@schemathesis.hook
def before_call(ctx, case, **kwargs):
    token = os.environ.get("STEPSYNC_FUZZ_TOKEN")
    if token:
        case.headers = {**(case.headers or {}), "Authorization": f"Bearer {token}"}


@schemathesis.check
def no_400_for_401(ctx, response, case):
    sent = response.request.headers.get("Authorization")
    if case.path not in OPEN_PATHS and not sent and response.status_code != 401:
        raise AssertionError(f"{response.status_code} without a token (expected 401)")

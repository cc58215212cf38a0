"""Tokens and isolation (#16): no token, a wrong token, a revoked token; one user never sees, deletes
or changes another's samples; tokens never reach a log or the token store in clear; the server will
not listen beyond loopback without tokens. Both backends."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from conftest import MAIN, ServerProcess, make_samples

ENDPOINTS = [("GET", "/steps"), ("POST", "/steps"), ("DELETE", "/steps"), ("POST", "/steps/deletions")]


def call(server, method, path, token=None, raw_header=None):
    headers = {}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    if raw_header is not None:
        headers["Authorization"] = raw_header
    body = {"samples": make_samples(1)} if path == "/steps" else {"ids": ["x"]}
    import requests

    return requests.request(method, server.url + path, headers=headers, json=body if method == "POST" else None, timeout=30)


@pytest.mark.parametrize("method, path", ENDPOINTS)
def test_no_token_is_401_and_reveals_nothing(server, method, path):
    server.post(make_samples(3))
    response = call(server, method, path)
    assert response.status_code == 401
    assert response.json() == {"error": "missing token: send Authorization: Bearer <token>"}
    assert response.headers["WWW-Authenticate"].startswith("Bearer")
    assert server.total() == 3  # nothing happened


@pytest.mark.parametrize("method, path", ENDPOINTS)
def test_wrong_and_malformed_tokens_are_401(server, method, path):
    server.post(make_samples(3))
    wrong = server.tokens["alice"][:-4] + "AAAA"
    for header in (f"Bearer {wrong}", "Bearer ", "Basic YWxpY2U6cHc=", server.tokens["alice"], "Bearer " + "x" * 5000):
        response = call(server, method, path, raw_header=header)
        assert response.status_code == 401, header
        assert response.json()["error"] in ("unknown or revoked token", "malformed Authorization header: expected Bearer <token>")
    assert server.total() == 3


def test_health_needs_no_token(server):
    import requests

    assert requests.get(server.url + "/health", timeout=10).json() == {"status": "ok"}


def test_revocation_takes_effect_on_the_next_request(server):
    assert server.post(make_samples(2)).status_code == 200
    listing = server.admin("list")
    assert listing.returncode == 0
    (token_id,) = re.findall(r"^(tok_[0-9a-f]{12})  alice  created \S+  active$", listing.stdout, re.M)
    assert server.tokens["alice"] not in listing.stdout
    revoked = server.admin("revoke", token_id)
    assert revoked.returncode == 0, revoked.stderr
    response = server.get()
    assert response.status_code == 401
    assert response.json() == {"error": "unknown or revoked token"}
    assert f"{token_id}  alice" in server.admin("list").stdout and "revoked" in server.admin("list").stdout
    assert server.admin("revoke", token_id).returncode == 1  # already revoked
    # A new token for the same user sees the same data.
    server.tokens["alice"] = server.create_token("alice")
    server.session = server.new_session("alice")
    assert server.total() == 2


def test_users_are_isolated_on_every_endpoint(server):
    server.tokens["bob"] = server.create_token("bob")
    alice, bob = server.new_session("alice"), server.new_session("bob")
    shared_ids = make_samples(5)  # the same ids under both users are two sets of samples
    assert server.post(shared_ids, session=alice).json()["saved"] == 5
    bobs = [dict(sample, count=1) for sample in shared_ids]
    assert server.post(bobs, session=bob).json()["saved"] == 5
    assert {s["count"] for s in server.all_samples(session=bob)} == {1}
    assert [s["count"] for s in server.all_samples(session=alice)] == [s["count"] for s in shared_ids]
    # bob deletes his copies of two ids and then all his data: alice keeps hers.
    assert server.delete_ids([shared_ids[0]["id"], shared_ids[1]["id"]], session=bob).json()["deleted"] == 2
    assert len(server.all_samples(session=alice)) == 5
    assert server.delete(session=bob).status_code == 200
    assert server.all_samples(session=bob) == []
    assert len(server.all_samples(session=alice)) == 5
    assert server.get(session=alice, versions="all").json()["total"] == 5


def test_tokens_never_reach_logs_or_storage_in_clear(tmp_path, request):
    instance = ServerProcess(tmp_path, extra=("--log-level", "info"))
    instance.start()
    token = instance.tokens["alice"]
    instance.post(make_samples(2))
    instance.get()
    call(instance, "GET", "/steps", token=token + "x")
    instance.session.get(instance.url + f"/steps?limit=1&token={token}", timeout=10)  # even in a query string
    assert instance.stop() == 0
    log = instance.stderr()
    assert "GET /steps" in log  # the access log is on
    assert token not in log and token[4:] not in log
    stored = b"".join(path.read_bytes() for path in instance.data.glob("stepsync.sqlite*"))
    assert stored and token.encode() not in stored and token[4:].encode() not in stored


def test_token_is_not_a_command_line_argument():
    result = subprocess.run([sys.executable, str(MAIN), "--token", "x"], capture_output=True, text=True, timeout=30)
    assert result.returncode == 2


def test_no_tokens_on_a_public_address_is_refused(tmp_path):
    result = subprocess.run([sys.executable, str(MAIN), "--host", "0.0.0.0", "--port", "0", "--data", str(tmp_path / "d")],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 1
    assert "refusing to listen on 0.0.0.0 without tokens" in result.stderr


def test_single_user_on_a_public_address_is_a_usage_error(tmp_path):
    result = subprocess.run([sys.executable, str(MAIN), "--host", "0.0.0.0", "--single-user", "--data", str(tmp_path / "d")],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 2
    assert "--single-user is allowed on a loopback address only" in result.stderr


def test_single_user_mode_needs_no_token(tmp_path):
    instance = ServerProcess(tmp_path, single_user=True).start()
    try:
        assert instance.post(make_samples(2)).json()["saved"] == 2
        assert "single user, no tokens" in instance.stderr()
        assert instance.history("local")
    finally:
        instance.finish()


def test_bad_user_names_and_database_passwords_are_usage_errors(tmp_path):
    for arguments, expected in [
        (["tokens", "create", "--user", "../etc", "--data", str(tmp_path)], "--user must match"),
        (["tokens", "create", "--user", "a", "--database", "postgresql://u:secret@/db"], "the URL holds a password"),
        (["--database", "postgresql://u:secret@/db"], "the URL holds a password"),
    ]:
        result = subprocess.run([sys.executable, str(MAIN), *arguments], capture_output=True, text=True, timeout=30)
        assert result.returncode == 2, result.stderr
        assert expected in result.stderr
        assert "secret" not in result.stderr

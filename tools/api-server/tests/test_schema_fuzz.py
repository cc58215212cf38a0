"""schemathesis against the OpenAPI schema, on SQLite and PostgreSQL, with a token and without one: no
answer is a 5xx, and without a token every endpoint that needs one answers 401 (not a 400 for what it
would refuse next). A bounded run here (SCHEMATHESIS_EXAMPLES, default 25 examples an operation, a
fixed seed); `tools/bench schema` runs it long. Prints the cases and failures of each run."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ServerProcess, _server

EXAMPLES = int(os.environ.get("SCHEMATHESIS_EXAMPLES", "25"))
HERE = Path(__file__).resolve().parent


def schemathesis(server: ServerProcess, token: str | None, work: Path) -> tuple[int, str]:
    """schemathesis run against the server (in `work`: it keeps a cache of its findings where it runs)."""
    command = [str(Path(sys.executable).with_name("schemathesis")), "run", server.url + "/openapi.json",
               "--checks", "not_a_server_error,no_400_for_401", "--max-examples", str(EXAMPLES), "--seed", "36",
               "--request-timeout", "60"]
    env = {**os.environ, "SCHEMATHESIS_HOOKS": "schemathesis_checks", "PYTHONPATH": str(HERE), "NO_COLOR": "1"}
    if token:
        env["STEPSYNC_FUZZ_TOKEN"] = token  # schemathesis_checks.py sends it
    result = subprocess.run(command, capture_output=True, text=True, timeout=1800, env=env, cwd=work)
    return result.returncode, result.stdout + result.stderr


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_no_5xx_and_no_400_for_401(tmp_path, backend, request):
    server = _server(tmp_path, backend, request).start()
    try:
        server.post([])  # the user exists; the fuzz writes and deletes beside it
        for token in (server.tokens["alice"], None):
            status, output = schemathesis(server, token, tmp_path)
            cases = re.search(r"(\d+) generated, (.*)", output)
            print(f"schemathesis {backend}, {'with' if token else 'without'} a token, {EXAMPLES} examples an operation: "
                  f"{cases.group(0) if cases else '?'}")
            assert status == 0 and cases, output[-4000:]
            assert ("Authentication failed" in output) == (token is None), output[-4000:]
            assert "internal error" not in server.stderr()
    finally:
        server.finish()

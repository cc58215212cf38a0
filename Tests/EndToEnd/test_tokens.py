"""`stepsync upload` against a server that requires tokens: the token comes from --token-file or
STEPSYNC_TOKEN, a missing or refused one is a one-line error without retries, and the token never
appears in anything stepsync prints."""
import os
import shlex
import signal
import subprocess

from conftest import STEPSYNC, TOKEN_ENV, LineReader, assert_exactly_once, ingest, status, wait_until


def upload(store, url, *extra, env=None):
    """`stepsync upload` with exactly the environment given (no STEPSYNC_TOKEN unless `env` has it)."""
    base = {k: v for k, v in os.environ.items() if k != "STEPSYNC_TOKEN"}
    return subprocess.run([STEPSYNC, "upload", "--store", str(store), "--api-url", url, *extra],
                          capture_output=True, text=True, timeout=300, env={**base, **(env or {})})


def test_no_token_is_a_clear_error_and_nothing_is_marked(token_server, tmp_path):
    store = tmp_path / "store"
    ingest(store, days=5)
    result = upload(store, token_server.url)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "the server requires a token" in lines[0] and "--token-file" in lines[0] and "STEPSYNC_TOKEN" in lines[0]
    assert "retrying" not in result.stderr
    assert status(store)["syncedSamples"] == 0
    assert token_server.records() == []


def test_a_wrong_token_is_refused_once_without_retries(token_server, tmp_path):
    store = tmp_path / "store"
    ingest(store, days=5)
    wrong = "sst_" + "A" * 43
    result = upload(store, token_server.url, env={"STEPSYNC_TOKEN": wrong})
    assert result.returncode == 1
    assert result.stderr.startswith("stepsync upload: the server refused the token"), result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "retrying" not in result.stderr
    assert wrong not in result.stderr + result.stdout
    assert status(store)["syncedSamples"] == 0


def test_a_wrong_token_is_refused_even_with_nothing_to_upload(token_server, tmp_path):
    store = tmp_path / "store"
    ingest(store, days=3)
    assert upload(store, token_server.url, env=TOKEN_ENV).returncode == 0
    assert status(store)["unsyncedSamples"] == 0
    wrong = "sst_" + "B" * 43
    result = upload(store, token_server.url, env={"STEPSYNC_TOKEN": wrong})
    assert result.returncode == 1
    assert result.stderr.startswith("stepsync upload: the server refused the token"), result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert wrong not in result.stderr + result.stdout
    assert "upload complete" not in result.stdout


def token_in_a_file(tmp_path):
    """The server's token, and a file only its owner reads holding it (with a trailing newline)."""
    token = TOKEN_ENV["STEPSYNC_TOKEN"]
    token_file = tmp_path / "token"
    token_file.write_text(token + "\n")
    token_file.chmod(0o600)
    return token, token_file


def test_a_token_file_with_a_trailing_newline_works_and_the_token_is_never_printed(token_server, tmp_path):
    store = tmp_path / "store"
    ingest(store, days=20)
    token, token_file = token_in_a_file(tmp_path)
    result = upload(store, token_server.url, "--token-file", str(token_file), "--json")
    assert result.returncode == 0, result.stderr
    assert token not in result.stdout and token not in result.stderr
    assert_exactly_once(token_server, store)
    assert "warning" not in result.stderr  # mode 600: nothing to say
    # A token file others can read works, with a warning naming the file, not the token.
    token_file.chmod(0o644)
    shared = upload(store, token_server.url, "--token-file", str(token_file))
    assert shared.returncode == 0 and token not in shared.stdout + shared.stderr
    assert f"warning: --token-file {token_file} can be read by other users (mode 644); chmod 600 it" in shared.stderr
    # The environment variable works as well (here with nothing left to send).
    again = upload(store, token_server.url, "--json", env={"STEPSYNC_TOKEN": token})
    assert again.returncode == 0 and token not in again.stdout + again.stderr


def test_a_token_on_the_command_line_is_refused_without_echoing_it(token_server, tmp_path):
    store = tmp_path / "store"
    ingest(store, days=2)
    token = TOKEN_ENV["STEPSYNC_TOKEN"]
    result = upload(store, token_server.url, "--token", token)
    assert result.returncode == 2
    assert "--token is not accepted" in result.stderr and "--token-file" in result.stderr
    assert token not in result.stdout + result.stderr


def test_an_empty_or_unreadable_token_file_is_a_usage_error(token_server, tmp_path):
    store = tmp_path / "store"
    ingest(store, days=2)
    empty = tmp_path / "empty"
    empty.write_text("\n")
    result = upload(store, token_server.url, "--token-file", str(empty))
    assert result.returncode == 2 and f"--token-file {empty}: the token is empty" in result.stderr
    missing = tmp_path / "missing"
    result = upload(store, token_server.url, "--token-file", str(missing))
    assert result.returncode == 2 and f"--token-file {missing}: cannot read it" in result.stderr


def test_the_line_to_continue_after_ctrl_c_carries_every_option_and_works_as_printed(token_server, tmp_path):
    """Ctrl-C pauses an upload with "To continue: stepsync upload …": that line, run as printed (with
    no STEPSYNC_TOKEN in the environment), finishes the upload; it names the token's file, not the token."""
    store = tmp_path / "my store"
    ingest(store, days=300)
    token, token_file = token_in_a_file(tmp_path)
    base = {k: v for k, v in os.environ.items() if k != "STEPSYNC_TOKEN"}
    child = subprocess.Popen([STEPSYNC, "upload", "--store", str(store), "--api-url", token_server.url, "--token-file", str(token_file),
                              "--in-flight", "2", "--timeout", "20"], env=base, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    errors = LineReader(child.stderr)
    wait_until(lambda: len(token_server.records()) >= 2_000, "a few batches")
    child.send_signal(signal.SIGINT)
    child.wait(timeout=120)
    errors.thread.join(timeout=10)
    assert child.returncode == 130, errors.lines
    line = next(line for line in errors.lines if "To continue: " in line)
    again = shlex.split(line.split("To continue: ", 1)[1])
    assert again[:2] == ["stepsync", "upload"] and token not in line
    assert again[2:] == ["--store", str(store), "--api-url", token_server.url, "--token-file", str(token_file),
                         "--in-flight", "2", "--timeout", "20"]
    result = subprocess.run([STEPSYNC, *again[1:]], capture_output=True, text=True, timeout=300, env=base)
    assert result.returncode == 0, result.stderr
    assert_exactly_once(token_server, store)

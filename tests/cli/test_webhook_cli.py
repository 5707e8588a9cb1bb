"""Webhook hooks through the CLI (``limno hook add --webhook``), against a real HTTP
server on loopback (tests/webhook_receiver.py), on a lake's path and behind ``limno
serve`` (where the server is the process that commits, so it POSTs and holds the
signing key): vetoes that change nothing, the signed event, validation, and a post
hook's failure on the committing process's stderr.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from bounded import DEFAULT_TIMEOUT
from git_scenarios import Lk, error_line
from lake_modes import local_only
from webhook_receiver import Receiver, receiving

pytestmark = pytest.mark.usefixtures("isolated_home")

KEY = "k3y-for-the-webhook-tests"


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with receiving() as r:
        yield r


@pytest.fixture
def signing_key(monkeypatch: pytest.MonkeyPatch) -> str:
    """The webhook's key in the environment, set before any server starts (a served
    lake's hooks run in the server: the key must be in its environment)."""
    monkeypatch.setenv("LIMNO_TEST_HOOK_KEY", KEY)
    return "LIMNO_TEST_HOOK_KEY"


@pytest.fixture
def signed(signing_key: str, forked: Lk) -> Lk:
    return forked


def add(lk: Lk, event: str, name: str, url: str, *options: str) -> None:
    r = lk.ok("hook", "add", "-p", "logs", "--event", event, "--webhook", url, *options, name)
    assert f"added {event} hook {name!r}" in r.err


def test_webhook_vetoes_and_allows(forked: Lk, receiver: Receiver) -> None:
    lk = forked
    receiver.status, receiver.answer = 403, b"loads are frozen until 18:00\n<details>"
    url = f"{receiver.url}/gate"
    add(lk, "pre-commit", "gate", url, "--header", "X-Team=data", "--timeout", "5")
    assert lk.ok("hook", "ls", "-p", "logs").rows() == [
        {"name": "gate", "event": "pre-commit", "run": f"webhook {url}", "branches": "*"}
    ]
    head, n = lk.head("main"), len(lk.log("logs"))
    r = lk.fail("load", "-p", "logs", lk.file([{"ts": 9}]))
    assert r.text == ""
    assert error_line(r) == (
        f"error: pre-commit hook 'gate' vetoed: webhook {url} answered"
        " 403 Forbidden: loads are frozen until 18:00"
    )
    assert lk.head("main") == head and len(lk.log("logs")) == n and lk.ts("logs") == [1, 2, 3]
    [got] = receiver.requests
    assert got.path == "/gate" and got.headers["x-team"] == "data"
    event = got.json()
    assert event["event"] == "pre-commit" and event["pool"] == "logs"
    assert event["branch"] == "main" and event["parents"] == [head]
    receiver.status = 204
    commit = lk.load("logs", [9], "-m", "now")
    assert lk.head("main") == commit and lk.ts("logs") == [1, 2, 3, 9]
    assert receiver.requests[-1].json()["message"] == "now"
    lk.ok("hook", "rm", "-p", "logs", "gate")
    lk.load("logs", [10])
    assert len(receiver.requests) == 2


def test_signed_pre_merge_webhook(signed: Lk, receiver: Receiver, signing_key: str) -> None:
    lk = signed
    add(lk, "pre-merge", "review", receiver.url, "--secret-env", signing_key, "--branch", "main")
    dev = lk.load("logs@dev", [10])
    lk.ok("merge", "-p", "logs", "dev")
    assert lk.head("main") == dev
    [got] = receiver.requests
    expected = hmac.new(KEY.encode(), got.body, hashlib.sha256).hexdigest()
    assert got.headers["x-limno-signature"] == f"sha256={expected}"
    event = got.json()
    assert event["event"] == "pre-merge" and event["source"] == "dev"
    assert event["source_commit"] == dev and event["hook"] == "review"
    assert KEY not in lk.ok("hook", "ls", "-p", "logs", "-f", "json").text


def test_stalled_webhook_times_out(forked: Lk, receiver: Receiver) -> None:
    lk = forked
    receiver.stall = True
    add(lk, "pre-commit", "slow", receiver.url, "--timeout", "1")
    head = lk.head("main")
    r = lk.fail("load", "-p", "logs", lk.file([{"ts": 9}]))
    assert error_line(r) == (
        f"error: pre-commit hook 'slow' vetoed: webhook {receiver.url} timed out after 1 s"
    )
    assert lk.head("main") == head and lk.ts("logs") == [1, 2, 3]
    receiver.release.set()
    assert len(receiver.requests) == 1


def test_webhook_add_validation(forked: Lk) -> None:
    lk = forked
    hook_add = ("hook", "add", "-p", "logs", "--event", "pre-commit")
    cases = [
        (("--webhook", "ftp://example.com/x"), "http:// or https://"),
        (("--webhook", "http://h", "--run", "true"), "exactly one"),
        (("--webhook", "http://h", "--header", "X-A"), "NAME=VALUE"),
        (("--webhook", "http://h", "--header", "Host=evil"), "sets header 'Host' itself"),
        (("--webhook", "http://h", "--timeout", "-1"), "positive number"),
        (("--webhook", "http://h", "--secret-env", "A-B"), "environment variable name"),
        (("--run", "true", "--timeout", "3"), "for webhooks"),
    ]
    for options, complaint in cases:
        assert complaint in error_line(lk.fail(*hook_add, *options, "w")), options
    assert lk.ok("hook", "ls", "-p", "logs").rows() == []


@local_only("a post hook's failure goes to the stderr of the process that commits: the server")
def test_failing_post_webhook_is_reported_on_stderr(forked: Lk, receiver: Receiver) -> None:
    lk = forked
    receiver.status, receiver.answer = 500, b"database is down"
    add(lk, "post-commit", "notify", receiver.url)
    source = lk.file([{"ts": 9}])
    proc = subprocess.run(
        [sys.executable, "-m", "limno", "--lake", lk.lake, "load", "-p", "logs", source],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        timeout=DEFAULT_TIMEOUT,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    commit = proc.stdout.strip()
    assert lk.head("main") == commit and lk.ts("logs") == [1, 2, 3, 9]
    assert (
        f"post-commit hook 'notify' failed: webhook {receiver.url} answered"
        " 500 Internal Server Error: database is down"
    ) in proc.stderr
    assert receiver.requests[0].json()["commit"] == commit

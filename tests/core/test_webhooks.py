"""Webhook hooks against a real HTTP server on loopback (tests/webhook_receiver.py):
what is POSTed (method, headers, the event's JSON, the HMAC signature), and how each
refusal (non-2xx, a stall past the timeout, a refused connection, a missing secret)
vetoes a pre hook with nothing changed, or is only logged for a post hook.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import json
import logging
import socket
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from limno import HookSpec, HookVetoError, InvalidInputError, Lake, Pool
from limno.api import wire
from limno.core.hooks import Hooks
from limno.ksuid import is_ksuid
from webhook_receiver import Receiver, receiving


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with receiving() as r:
        yield r


@pytest.fixture
def logs(tmp_path: Path) -> Pool:
    """Pool ``logs`` (key ts) with [1, 2] on main and branch dev at main."""
    lake = Lake.init(str(tmp_path / "lake"))
    pool = lake.create_pool("logs", key="ts")
    pool.load([rows(1, 2)], message="first")
    pool.branch("dev")
    return pool


def rows(*ts: int) -> pa.Table:
    return pa.table({"ts": list(ts)})


def keys(pool: Pool, ref: str = "main") -> list[int]:
    return [int(t) for t in pool.scan(ref).column("ts").to_pylist()]


def refused_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_pre_commit_webhook_posts_the_event(logs: Pool, receiver: Receiver) -> None:
    url = f"{receiver.url}/hooks/audit?team=data"
    logs.add_hook(
        HookSpec("audit", "pre-commit", webhook=url, headers=(("X-Team", "data"),), timeout=5)
    )
    head = logs.resolve("main")
    commit = logs.load([rows(3)], message="more", author="ann", meta={"ticket": "T-1"})
    assert keys(logs) == [1, 2, 3]
    [got] = receiver.requests
    assert got.method == "POST" and got.path == "/hooks/audit?team=data"
    assert got.headers["content-type"] == "application/json"
    assert got.headers["user-agent"].startswith("limno/")
    assert got.headers["x-team"] == "data"
    assert got.headers["x-limno-event"] == "pre-commit"
    assert "x-limno-signature" not in got.headers
    event = got.json()
    assert got.headers["x-limno-event-id"] == event["event_id"] and is_ksuid(event["event_id"])
    assert event["event"] == "pre-commit" and event["hook"] == "audit"
    assert event["pool"] == "logs" and event["pool_id"] == logs.id
    assert event["branch"] == "main" and event["parents"] == [head]
    assert event["message"] == "more" and event["author"] == "ann"
    assert event["meta"]["ticket"] == "T-1"
    assert event["actions"] == sum(event["action_counts"].values()) >= 1
    assert set(event["action_counts"]) <= {"add", "create", "delete"}
    assert "commit" not in event  # a pre hook runs before there is one
    assert dt.datetime.fromisoformat(event["time"]).tzinfo is not None
    assert commit.parents == (head,)


def test_post_commit_and_merge_webhooks(logs: Pool, receiver: Receiver) -> None:
    logs.add_hook(HookSpec("c", "post-commit", webhook=f"{receiver.url}/c"))
    logs.add_hook(HookSpec("m", "post-merge", webhook=f"{receiver.url}/m", branches=("main",)))
    dev_head = logs.resolve("dev")
    commit = logs.load([rows(7)], branch="dev")
    main_head = logs.resolve("main")
    result = logs.merge("dev", "main", meta={"why": "release"})
    posted, merged = receiver.requests
    assert posted.path == "/c" and merged.path == "/m"
    event = posted.json()
    assert event["event"] == "post-commit" and event["branch"] == "dev"
    assert event["commit"] == commit.id and event["parents"] == [dev_head]
    done = merged.json()
    assert done["event"] == "post-merge" and done["kind"] == result.kind == "fast-forward"
    assert done["commit"] == result.commit == commit.id and done["previous"] == main_head
    assert done["source"] == "dev" and done["source_commit"] == commit.id
    assert done["meta"] == {"why": "release"} and done["strategy"] == "fail"
    assert posted.json()["event_id"] != done["event_id"]


def test_signature_is_hmac_sha256_of_the_body(
    logs: Pool, receiver: Receiver, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AUDIT_HOOK_KEY", "s3cret-k3y")
    logs.add_hook(
        HookSpec("signed", "pre-commit", webhook=receiver.url, secret_env="AUDIT_HOOK_KEY")
    )
    logs.load([rows(3)])
    [got] = receiver.requests
    expected = hmac.new(b"s3cret-k3y", got.body, hashlib.sha256).hexdigest()
    assert got.headers["x-limno-signature"] == f"sha256={expected}"
    # the lake stores the variable's name, never the key
    assert logs.hook_specs()[0].secret_env == "AUDIT_HOOK_KEY"
    stored = [p.read_bytes() for p in (tmp_path / "lake").rglob("*") if p.is_file()]
    assert not any(b"s3cret-k3y" in data for data in stored)
    assert any(b"AUDIT_HOOK_KEY" in data for data in stored)
    # without the key there is no signature to send: the hook refuses
    monkeypatch.delenv("AUDIT_HOOK_KEY")
    head = logs.resolve("main")
    with pytest.raises(HookVetoError, match="AUDIT_HOOK_KEY is not set"):
        logs.load([rows(4)])
    assert logs.resolve("main") == head and len(receiver.requests) == 1


@pytest.mark.parametrize(
    ("status", "answer", "said"),
    [
        (
            403,
            b"frozen: release in progress\nsecond line",
            "403 Forbidden: frozen: release in progress",
        ),
        (500, b"", "500 Internal Server Error"),
        (302, b"elsewhere", "302 Found: elsewhere"),  # redirects are not followed
    ],
)
def test_non_2xx_answer_vetoes(
    logs: Pool, receiver: Receiver, status: int, answer: bytes, said: str
) -> None:
    receiver.status, receiver.answer = status, answer
    logs.add_hook(HookSpec("gate", "pre-commit", webhook=f"{receiver.url}/gate"))
    head, n = logs.resolve("main"), len(logs.log("main"))
    with pytest.raises(HookVetoError) as caught:
        logs.load([rows(3)])
    message = str(caught.value)
    assert message.startswith(f"pre-commit hook 'gate' vetoed: webhook {receiver.url}/gate")
    assert message.endswith(f"answered {said}") and "second line" not in message
    assert logs.resolve("main") == head and len(logs.log("main")) == n
    assert keys(logs) == [1, 2]
    assert len(receiver.requests) == 1


def test_long_answer_is_cut_short(logs: Pool, receiver: Receiver) -> None:
    receiver.status, receiver.answer = 422, b"<html>" + b"x" * 10_000
    logs.add_hook(HookSpec("gate", "pre-commit", webhook=receiver.url))
    with pytest.raises(HookVetoError) as caught:
        logs.load([rows(3)])
    said = str(caught.value).partition("422 Unprocessable Entity: ")[2]
    assert said.startswith("<html>xxx") and said.endswith("...")
    assert len(said) == 203


def test_stalled_webhook_times_out_and_vetoes(logs: Pool, receiver: Receiver) -> None:
    receiver.stall = True
    logs.add_hook(HookSpec("slow", "pre-merge", webhook=receiver.url, timeout=1))
    logs.load([rows(5)], branch="dev")
    head = logs.resolve("main")
    with pytest.raises(HookVetoError, match=r"webhook http://127\.0\.0\.1:\d+ timed out after 1 s"):
        logs.merge("dev", "main")
    assert logs.resolve("main") == head and keys(logs) == [1, 2]
    assert len(receiver.requests) == 1  # it was asked, and did not answer in time
    receiver.release.set()


def test_refused_connection_vetoes() -> None:
    port = refused_port()
    spec = HookSpec("down", "pre-commit", webhook=f"http://127.0.0.1:{port}/x")
    hooks = _hooks(spec)
    with pytest.raises(HookVetoError) as caught:
        hooks.fire("pre-commit", {"pool": "p", "branch": "main"})
    message = str(caught.value)
    assert message.startswith(f"pre-commit hook 'down' vetoed: webhook http://127.0.0.1:{port}/x")
    assert "refused" in message.lower()


def test_failing_post_hook_is_logged_not_raised(
    logs: Pool, receiver: Receiver, caplog: pytest.LogCaptureFixture
) -> None:
    receiver.status, receiver.answer = 503, b"maintenance"
    logs.add_hook(HookSpec("notify", "post-commit", webhook=receiver.url))
    with caplog.at_level(logging.WARNING, logger="limno.hooks"):
        commit = logs.load([rows(3)])
    assert logs.resolve("main") == commit.id and keys(logs) == [1, 2, 3]
    [record] = [r for r in caplog.records if r.name == "limno.hooks"]
    assert record.getMessage() == (
        f"post-commit hook 'notify' failed: webhook {receiver.url} answered"
        " 503 Service Unavailable: maintenance"
    )


def test_credentials_in_the_url_stay_out_of_messages() -> None:
    port = refused_port()
    hooks = _hooks(HookSpec("h", "pre-commit", webhook=f"http://bob:pw@127.0.0.1:{port}/x"))
    with pytest.raises(HookVetoError) as caught:
        hooks.fire("pre-commit", {"branch": "main"})
    assert f"http://***@127.0.0.1:{port}/x" in str(caught.value)
    assert "pw" not in str(caught.value)


def test_webhook_spec_round_trips_through_the_wire() -> None:
    spec = HookSpec(
        "w",
        "pre-merge",
        webhook="https://hooks.example/x",
        timeout=2.5,
        headers=(("Authorization", "Bearer t"), ("X-A", "1")),
        secret_env="KEY",
        branches=("main",),
    )
    doc = json.loads(json.dumps(wire.hook_to_json(spec)))
    assert doc["headers"] == {"Authorization": "Bearer t", "X-A": "1"} and doc["timeout"] == 2.5
    assert wire.hook_from_json(doc) == spec
    assert spec.kind == "webhook" and HookSpec("s", "pre-commit", run="true").kind == "shell"


@pytest.mark.parametrize(
    ("fields", "complaint"),
    [
        ({"webhook": "ftp://example.com/x"}, "http:// or https://"),
        ({"webhook": "file:///etc/passwd"}, "http:// or https://"),
        ({"webhook": "example.com/x"}, "http:// or https://"),
        ({"webhook": "http:///x"}, "is not a webhook URL"),
        ({"webhook": "http://a b/"}, "is not a webhook URL"),
        ({"webhook": "http://h", "run": "true"}, "exactly one"),
        ({"webhook": "http://h", "timeout": 0}, "positive number"),
        ({"webhook": "http://h", "timeout": "10"}, "number of seconds"),
        ({"webhook": "http://h", "headers": {"Bad Name": "1"}}, "not a header name"),
        ({"webhook": "http://h", "headers": {"User-Agent": "x"}}, "sets header"),
        ({"webhook": "http://h", "headers": {"X-A": "1\r\nX-B: 2"}}, "line break"),
        ({"webhook": "http://h", "secret_env": "1KEY"}, "environment variable name"),
        ({"webhook": "http://h", "secret_env": "KEY-X"}, "environment variable name"),
        ({"run": "true", "timeout": 5}, "for webhooks"),
        ({"python": "m:f", "secret_env": "KEY"}, "for webhooks"),
    ],
)
def test_invalid_webhook_specs(fields: dict[str, object], complaint: str) -> None:
    with pytest.raises(InvalidInputError, match=complaint):
        HookSpec.from_json({"name": "w", "event": "pre-commit", **fields})


def _hooks(spec: HookSpec) -> Hooks:
    return Hooks([spec])

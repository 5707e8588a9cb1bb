"""``limno auth``: every subcommand on a lake opened directly and through a server, in
the output formats, with its error lines and exit codes; a secret is printed by
create-user and create-key only, and never on stderr."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from clirunner import fail, ok, run
from git_scenarios import init_lake
from lake_modes import local_only, located
from limno.auth.store import AuthStore
from limno.auth.verify import Authenticator
from limno.storage import open_storage

SERVER = "server-secret-for-tests-0123456789"


@pytest.fixture(autouse=True)
def _env(isolated_home: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LIMNO_AUTH_SECRET", SERVER)


@pytest.fixture
def lake(lake_path: str, mode: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A fresh lake, or a server on it with the same secret (``mode``): one without
    auth, or the lake would hold the server's admin too; ``limno auth`` works the same."""
    with located(init_lake(lake_path), mode, monkeypatch, auth=False) as location:
        yield location


def _object(*args: str) -> dict[str, Any]:
    r = ok(*args)
    obj = json.loads(r.text)
    assert isinstance(obj, dict), r.text
    assert obj["secret_access_key"] not in r.err
    return obj


def test_create_user_and_key_print_one_object_with_the_secret(lake: str, lake_path: str) -> None:
    alice = _object(
        "--lake", lake, "auth", "create-user", "alice", "--role", "Developer", "-f", "json"
    )
    assert set(alice) == {"user", "role", "access_key_id", "secret_access_key"}
    assert (alice["user"], alice["role"]) == ("alice", "developer")
    assert alice["access_key_id"].startswith("LKIA") and len(alice["secret_access_key"]) == 40
    key = _object("--lake", lake, "-f", "json", "auth", "create-key", "alice")
    assert set(key) == {"user", "access_key_id", "secret_access_key"} and key["user"] == "alice"
    # ndjson (the default off a terminal): the same object on one line
    r = ok("--lake", lake, "auth", "create-user", "bob", "--role", "analyst")
    assert len(r.text.splitlines()) == 1 and r.rows()[0]["role"] == "analyst"
    assert "save the secret now" in r.err and r.rows()[0]["secret_access_key"] not in r.err
    # the printed secrets are the real ones
    checker = Authenticator(AuthStore(open_storage(lake_path)))
    for made in (alice, key, r.rows()[0]):
        user = checker.authenticate(made["access_key_id"], made["secret_access_key"])
        assert user.name == made["user"]


def test_create_in_the_other_formats(lake: str) -> None:
    table = ok("--lake", lake, "auth", "create-user", "t", "--role", "admin", "-f", "table").text
    assert table.splitlines()[0].split() == ["user", "role", "access_key_id", "secret_access_key"]
    csv = ok("--lake", lake, "auth", "create-key", "t", "-f", "csv").text.splitlines()
    assert csv[0] == '"user","access_key_id","secret_access_key"' and len(csv) == 2
    raw = ok("--lake", lake, "auth", "create-key", "t", "-f", "parquet").out
    assert pq.read_table(io.BytesIO(raw)).column_names == [
        "user",
        "access_key_id",
        "secret_access_key",
    ]
    bare = ok(
        "--lake",
        lake,
        "-f",
        "json",
        "auth",
        "create-user",
        "nokey",
        "--role",
        "analyst",
        "--no-key",
    )
    assert json.loads(bare.text) == {"user": "nokey", "role": "analyst"}


def test_ls_lists_users_keys_and_grants_never_secrets(lake: str) -> None:
    ok("--lake", lake, "create", "logs", "-k", "ts")
    secrets = []
    for name, role in [("root", "admin"), ("ann", "analyst"), ("dev", "developer")]:
        secrets.append(
            _object("--lake", lake, "-f", "json", "auth", "create-user", name, "--role", role)
        )
    secrets.append(_object("--lake", lake, "-f", "json", "auth", "create-key", "ann"))
    r = ok("--lake", lake, "auth", "grant", "ann", "logs", "write")
    assert r.err.strip() == "granted write on pool logs to ann"
    ok("--lake", lake, "auth", "grant", "dev", "logs", "READ")
    rows = {
        row["user"]: row for row in json.loads(ok("--lake", lake, "auth", "ls", "-f", "json").text)
    }
    assert list(rows) == ["ann", "dev", "root"]
    assert rows["ann"]["role"] == "analyst"
    assert sorted(rows["ann"]["keys"]) == sorted(
        [secrets[1]["access_key_id"], secrets[3]["access_key_id"]]
    )
    assert [(g["pool"], g["level"]) for g in rows["ann"]["grants"]] == [("logs", "write")]
    assert [(g["pool"], g["level"]) for g in rows["dev"]["grants"]] == [("logs", "read")]
    assert rows["root"]["grants"] == []
    one = ok("--lake", lake, "auth", "ls", "dev").rows()
    assert [row["user"] for row in one] == ["dev"]
    table = ok("--lake", lake, "-f", "table", "auth", "ls").text
    assert "logs:write" in table and secrets[0]["access_key_id"] in table
    outputs = [table, ok("--lake", lake, "auth", "ls").text]
    outputs += [ok("--lake", lake, "auth", "ls", "-f", f).text for f in ("json", "csv")]
    arrow = ok("--lake", lake, "auth", "ls", "-f", "arrow").out
    listed = pa.ipc.open_stream(arrow).read_all()
    assert listed.column_names == ["user", "role", "created", "keys", "grants"]
    for made in secrets:
        assert all(made["secret_access_key"] not in text for text in outputs)
        assert made["secret_access_key"].encode() not in arrow


def test_revoke_delete_key_and_delete_user(lake: str) -> None:
    ok("--lake", lake, "create", "logs", "-k", "ts")
    ok("--lake", lake, "auth", "create-user", "root", "--role", "admin", "--no-key")
    ann = _object("--lake", lake, "-f", "json", "auth", "create-user", "ann", "--role", "analyst")
    ok("--lake", lake, "auth", "grant", "ann", "logs", "none")
    r = ok("--lake", lake, "auth", "revoke", "ann", "logs")
    assert r.err.strip() == "revoked none on pool logs from ann" and r.out == b""
    assert ok("--lake", lake, "auth", "ls", "ann").rows()[0]["grants"] == []
    r = ok("--lake", lake, "auth", "delete-key", ann["access_key_id"])
    assert r.err.strip() == f"deleted key {ann['access_key_id']} of ann"
    assert ok("--lake", lake, "auth", "ls", "ann").rows()[0]["keys"] == []
    r = ok("--lake", lake, "auth", "delete-user", "ann")
    assert "deleted user ann (analyst)" in r.err
    assert [row["user"] for row in ok("--lake", lake, "auth", "ls").rows()] == ["root"]


def test_errors_are_one_line_and_change_nothing(lake: str) -> None:
    ok("--lake", lake, "create", "logs", "-k", "ts")
    ok("--lake", lake, "auth", "create-user", "root", "--role", "admin")
    before = ok("--lake", lake, "auth", "ls").text
    failures = [
        (("create-user", "root", "--role", "analyst"), "error: user 'root' already exists"),
        (("create-key", "nobody"), "error: user 'nobody' not found"),
        (("delete-user", "nobody"), "error: user 'nobody' not found"),
        (("delete-key", "LKIANOPE"), "error: access key 'LKIANOPE' not found"),
        (("grant", "nobody", "logs", "read"), "error: user 'nobody' not found"),
        (("grant", "root", "logs", "read"), "error: user 'root' is an admin: grants do not apply"),
        (("grant", "root", "nope", "read"), "error: pool 'nope' not found"),
        (("revoke", "root", "logs"), "error: user 'root' has no grant on pool logs"),
        (("delete-user", "root"), "error: user 'root' is the last admin: create another first"),
        (("ls", "nobody"), "error: user 'nobody' not found"),
        (("create-user", "a/b", "--role", "analyst"), "error: invalid user name 'a/b'"),
    ]
    for args, line in failures:
        r = fail("--lake", lake, "auth", *args)
        assert r.code == 1, args
        assert r.err.strip().startswith(line), (args, r.err)
        assert len(r.err.strip().splitlines()) == 1
    for args in [
        ("create-user", "x", "--role", "owner"),
        ("grant", "root", "logs", "all"),
        ("create-user", "x"),
    ]:
        r = run("--lake", lake, "auth", *args)
        assert r.code == 2 and r.err.startswith("error: "), (args, r.err)
    assert ok("--lake", lake, "auth", "ls").text == before


@local_only("a served lake's keys are sealed with the server's secret, not the client's")
def test_keys_need_the_server_secret(lake: str, monkeypatch: pytest.MonkeyPatch) -> None:
    ok("--lake", lake, "auth", "create-user", "root", "--role", "admin")
    before = ok("--lake", lake, "auth", "ls").text
    monkeypatch.delenv("LIMNO_AUTH_SECRET")
    r = fail("--lake", lake, "auth", "create-user", "x", "--role", "analyst")
    assert "LIMNO_AUTH_SECRET is not set" in r.err and r.out == b""
    fail("--lake", lake, "auth", "create-key", "root")
    monkeypatch.setenv("LIMNO_AUTH_SECRET", "a-different-server-secret-000")
    r = fail("--lake", lake, "auth", "create-key", "root")
    assert "not the server secret this lake's keys are encrypted with" in r.err
    assert ok("--lake", lake, "auth", "ls").text == before


def test_auth_on_a_lake_without_users(lake: str) -> None:
    assert ok("--lake", lake, "auth", "ls", "-f", "json").text.strip() == "[]"
    assert "(no rows)" in ok("--lake", lake, "-f", "table", "auth", "ls").text
    help_text = ok("auth", "--help").text
    for name in ("create-user", "delete-user", "create-key", "delete-key", "grant", "revoke", "ls"):
        assert f"  {name} " in help_text, name

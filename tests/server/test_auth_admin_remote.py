"""``limno auth`` against a server: an admin manages users, keys and grants remotely;
anyone else gets 403 and changes nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from clirunner import fail, ok
from limno import Lake
from limno.api.remote_auth import RemoteAuth
from server_support import Served, served_user, start_server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    lake = str(tmp_path_factory.mktemp("auth-admin") / "lake")
    Lake.init(lake).create_pool("logs", key="ts")
    proc = start_server(lake)
    try:
        yield proc
    finally:
        assert proc.stop() == 0, proc.lines


def _as(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)


def test_an_admin_manages_users_remotely(
    server: Served, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    _as(server.env, monkeypatch)
    url = server.url
    made = ok("--lake", url, "-f", "json", "auth", "create-user", "bob", "--role", "Analyst")
    key = json.loads(made.out)
    assert key["user"] == "bob" and key["role"] == "analyst"
    assert key["access_key_id"].startswith("LKIA") and len(key["secret_access_key"]) == 40
    assert "save the secret now" in made.err and key["secret_access_key"] not in made.err
    # the new key works at once, with the analyst's rights
    bob = httpx.BasicAuth(key["access_key_id"], key["secret_access_key"])
    assert httpx.get(f"{url}/v1/pools", auth=bob, timeout=60).status_code == 200
    second = json.loads(ok("--lake", url, "-f", "json", "auth", "create-key", "bob").out)
    ok("--lake", url, "auth", "grant", "bob", "logs", "write")
    listed = ok("--lake", url, "-f", "ndjson", "auth", "ls", "bob").rows()
    assert listed[0]["keys"] == sorted([key["access_key_id"], second["access_key_id"]])
    assert [(g["pool"], g["level"]) for g in listed[0]["grants"]] == [("logs", "write")]
    # what the server did is in the lake, as a lake opened directly lists it
    local = Lake.open(server.lake).auth()
    assert local.user("bob").role == "analyst"
    assert [(g.pool, g.level) for g in local.grants("bob")] == [("logs", "write")]
    revoked = ok("--lake", url, "auth", "revoke", "bob", "logs")
    assert revoked.err == "revoked write on pool logs from bob\n"
    ok("--lake", url, "auth", "delete-key", key["access_key_id"])
    assert httpx.get(f"{url}/v1/pools", auth=bob, timeout=60).status_code == 401
    ok("--lake", url, "auth", "delete-user", "bob")
    assert "bob" not in {u.name for u in local.users()}
    missing = fail("--lake", url, "auth", "delete-user", "bob")
    assert missing.err == "error: user 'bob' not found\n"


def test_the_python_client_manages_users(server: Served, monkeypatch: pytest.MonkeyPatch) -> None:
    _as(server.env, monkeypatch)
    remote = Lake.open(server.url)
    admin = remote.auth()
    assert isinstance(admin, RemoteAuth)
    user, key = admin.create_user("carol", "developer", key=False)
    assert key is None and user.role == "developer"
    granted = admin.grant("carol", "logs", "read")
    assert (granted.pool, granted.level) == ("logs", "read")
    local = Lake.open(server.lake).auth()
    assert admin.users() == local.users()
    assert admin.grants("carol") == local.grants("carol")
    assert admin.access_keys() == local.access_keys()


def test_a_developer_may_not_manage_users(
    server: Served, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    _as(served_user(server, "dave", "developer"), monkeypatch)
    before = Path(server.lake, "auth")
    snapshot = sorted(p.name for p in before.rglob("*"))
    refused = "error: user 'dave' (developer) may not administer the lake\n"
    for args in (
        ("auth", "create-user", "mallory", "--role", "admin"),
        ("auth", "create-key", "dave"),
        ("auth", "grant", "dave", "logs", "write"),
        ("auth", "revoke", "dave", "logs"),
        ("auth", "delete-user", "dave"),
        ("auth", "ls"),
    ):
        assert fail("--lake", server.url, *args).err == refused, args
    assert sorted(p.name for p in before.rglob("*")) == snapshot
    # what a developer may do still works
    assert ok("--lake", server.url, "branch", "-p", "logs", "dave-was-here").code == 0

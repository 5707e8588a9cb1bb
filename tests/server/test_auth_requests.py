"""Auth through real requests to a real ``limno serve``: 401 without valid credentials,
403 for what a role (and its grants) does not allow, and a forbidden write that
leaves every byte of the lake as it was."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pytest

from clirunner import fail, ok
from limno import Lake
from limno.api.local import LocalLake
from limno.api.local_auth import LocalAuth
from server_support import AUTH_SECRET, Served, served_user, start_server


@dataclass
class World:
    """A served lake with pools ``logs`` and ``other``, and one client env per user."""

    server: Served
    lake: str
    users: dict[str, dict[str, str]]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    lake = str(tmp_path_factory.mktemp("auth") / "lake")
    local = Lake.init(lake)
    for name in ("logs", "other"):
        local.create_pool(name, key="ts").load([pa.table({"ts": [1, 2, 3]})])
    server = start_server(lake)
    try:
        users = {"admin": server.env}
        for name, role in (
            ("dev", "developer"),
            ("ana", "analyst"),
            ("narrow", "developer"),
            ("wide", "analyst"),
            ("hidden", "analyst"),
        ):
            users[name] = served_user(server, name, role)
        admin = local.auth()
        admin.grant("narrow", "logs", "read")  # a developer who may only read logs
        admin.grant("wide", "logs", "write")  # an analyst who may write logs
        admin.grant("hidden", "other", "none")  # an analyst who may not even see other
        yield World(server, lake, users)
    finally:
        assert server.stop() == 0, server.lines
    # the server's log (stderr) never shows a secret, even after failed attempts
    logged = "\n".join(server.lines)
    assert not any(env["LIMNO_SECRET_ACCESS_KEY"] in logged for env in users.values())


def _auth(env: dict[str, str] | None) -> httpx.BasicAuth | None:
    if env is None:
        return None
    return httpx.BasicAuth(env["LIMNO_ACCESS_KEY_ID"], env["LIMNO_SECRET_ACCESS_KEY"])


def _call(
    w: World, who: str | None, method: str, path: str, body: Any = None, **kw: Any
) -> httpx.Response:
    env = None if who is None else w.users[who]
    return httpx.request(method, w.server.url + path, json=body, auth=_auth(env), timeout=60, **kw)


#: one operation of each kind: (method, path, body)
READ = ("GET", "/v1/pools/logs/log", None)
WRITE = ("POST", "/v1/pools/logs/branches", {"name": "b-{who}"})
LAKE_READ = ("GET", "/v1/pools", None)
LAKE_WRITE = ("POST", "/v1/pools", {"name": "new-{who}", "key": "ts"})
ADMIN = ("GET", "/v1/auth/users", None)
QUERY = ("POST", "/v1/query", {"sql": "SELECT count(*) AS n FROM logs"})
SCAN = ("GET", "/v1/pools/logs/scan", None)
LOAD = ("POST", "/v1/pools/logs/load?name=x.ndjson", None)
KINDS = [READ, WRITE, LAKE_READ, LAKE_WRITE, ADMIN, QUERY, SCAN, LOAD]


def _body(body: Any, who: str) -> Any:
    if isinstance(body, dict):
        return {k: v.format(who=who) if isinstance(v, str) else v for k, v in body.items()}
    return body


@pytest.mark.parametrize(("method", "path", "body"), KINDS)
def test_no_or_bad_credentials_are_401(world: World, method: str, path: str, body: Any) -> None:
    key = world.users["dev"]["LIMNO_ACCESS_KEY_ID"]
    attempts: list[httpx.BasicAuth | None] = [
        None,
        httpx.BasicAuth(key, "wrong-secret"),
        httpx.BasicAuth("LKIANOSUCHKEY0000000", world.users["dev"]["LIMNO_SECRET_ACCESS_KEY"]),
    ]
    for auth in attempts:
        r = httpx.request(
            method, world.server.url + path, json=_body(body, "x"), auth=auth, timeout=60
        )
        assert r.status_code == 401, r.text
        assert r.headers["www-authenticate"] == 'Basic realm="limno"'
        assert r.headers["content-type"] == "application/problem+json"
        assert r.json()["error"] == "UnauthenticatedError"
        assert "wrong-secret" not in r.text
    bearer = httpx.request(
        method, world.server.url + path, headers={"Authorization": "Bearer abc"}, timeout=60
    )
    assert bearer.status_code == 401


def test_health_and_docs_need_no_credentials(world: World) -> None:
    for path in ("/health", "/openapi.json", "/docs"):
        assert httpx.get(world.server.url + path, timeout=60).status_code == 200, path


#: who -> the statuses of READ, WRITE, LAKE_READ, LAKE_WRITE, ADMIN (no grant involved)
ROLES = {
    "admin": (200, 201, 200, 201, 200),
    "dev": (200, 201, 200, 201, 403),
    "ana": (200, 403, 200, 403, 403),
}


@pytest.mark.parametrize("who", list(ROLES))
def test_each_role_gets_what_it_may(world: World, who: str) -> None:
    ops = (READ, WRITE, LAKE_READ, LAKE_WRITE, ADMIN)
    got = tuple(_call(world, who, m, p, _body(b, who)).status_code for m, p, b in ops)
    assert got == ROLES[who]


def test_grants_widen_and_narrow_a_role(world: World) -> None:
    # an analyst with write on logs writes logs, and only logs
    assert _call(world, "wide", "POST", "/v1/pools/logs/branches", {"name": "w"}).status_code == 201
    assert (
        _call(world, "wide", "POST", "/v1/pools/other/branches", {"name": "w"}).status_code == 403
    )
    # a developer with read on logs reads it, writes other but not logs
    assert _call(world, "narrow", *READ).status_code == 200
    assert (
        _call(world, "narrow", "POST", "/v1/pools/logs/branches", {"name": "n"}).status_code == 403
    )
    assert (
        _call(world, "narrow", "POST", "/v1/pools/other/branches", {"name": "n"}).status_code == 201
    )
    # none hides a pool: not listed, not readable, not queryable
    listed = [p["name"] for p in _call(world, "hidden", "GET", "/v1/pools").json()]
    assert "other" not in listed and "logs" in listed
    assert _call(world, "hidden", "GET", "/v1/pools/other/log").status_code == 403
    sql = {"sql": "SELECT count(*) AS n FROM other"}
    r = _call(world, "hidden", "POST", "/v1/query", sql)
    assert r.status_code == 403 and "other" in r.json()["detail"]
    pools = _call(
        world, "hidden", "GET", "/v1/meta?name=pools", headers={"Accept": "application/json"}
    ).json()
    assert "other" not in [p["name"] for p in pools] and "logs" in [p["name"] for p in pools]
    assert (
        _call(world, "hidden", "POST", "/v1/query", {"sql": "SELECT 1 AS x FROM logs"}).status_code
        == 200
    )


def _files(root: str) -> dict[str, bytes]:
    """Every file of the lake and its bytes."""
    found = {}
    for base, _, names in os.walk(root):
        for name in names:
            path = os.path.join(base, name)
            found[os.path.relpath(path, root)] = Path(path).read_bytes()
    return found


def test_a_forbidden_write_changes_nothing(world: World) -> None:
    before = _files(world.lake)
    attempts = [
        ("POST", "/v1/pools/logs/load?name=x.ndjson", None, b'{"ts": 9}\n'),
        ("POST", "/v1/pools/logs/add?name=x.ndjson", None, b'{"ts": 9}\n'),
        ("POST", "/v1/pools/logs/commit", {"branch": "main"}, None),
        ("POST", "/v1/pools", {"name": "sneaky", "key": "ts"}, None),
        ("DELETE", "/v1/pools/logs", None, None),
        ("POST", "/v1/pools/logs/rename", {"name": "renamed"}, None),
        ("POST", "/v1/pools/logs/merge", {"source": "main", "into": "main"}, None),
        ("POST", "/v1/pools/logs/delete-where", {"predicate": "ts > 0"}, None),
        ("POST", "/v1/pools/logs/compact", {}, None),
        ("POST", "/v1/pools/logs/vacuum", {"grace": 0}, None),
        ("POST", "/v1/pools/logs/tags", {"name": "t"}, None),
        ("POST", "/v1/pools/logs/hooks", {"name": "h", "event": "pre-commit", "run": "true"}, None),
        ("POST", "/v1/auth/users", {"name": "eve", "role": "admin"}, None),
        ("DELETE", "/v1/auth/users/dev", None, None),
    ]
    for method, path, body, content in attempts:
        kw: dict[str, Any] = {} if content is None else {"content": content}
        r = httpx.request(
            method,
            world.server.url + path,
            json=body,
            auth=_auth(world.users["ana"]),
            timeout=60,
            **kw,
        )
        assert r.status_code == 403, (path, r.text)
        assert r.json()["error"] == "ForbiddenError"
    # a developer may not add hooks (they run commands on the server) nor manage users
    hook = {"name": "h", "event": "pre-commit", "run": "true"}
    assert _call(world, "dev", "POST", "/v1/pools/logs/hooks", hook).status_code == 403
    assert _call(world, "dev", "DELETE", "/v1/auth/users/ana").status_code == 403
    assert _files(world.lake) == before


def test_commit_author_is_the_caller(world: World) -> None:
    load = "/v1/pools/other/load?name=x.ndjson&branch={branch}"
    dev = _call(world, "admin", "POST", "/v1/pools/other/branches", {"name": "authors"})
    assert dev.status_code == 201
    made = _call(world, "dev", "POST", load.format(branch="authors"), content=b'{"ts": 7}\n')
    assert made.status_code == 200, made.text
    assert made.json()["author"] == "dev"
    # a developer may not commit as someone else; nothing is loaded
    before = _files(world.lake)
    posed = _call(
        world, "dev", "POST", load.format(branch="authors") + "&author=ana", content=b'{"ts": 8}\n'
    )
    assert posed.status_code == 403, posed.text
    assert _files(world.lake) == before
    same = _call(
        world, "dev", "POST", load.format(branch="authors") + "&author=dev", content=b'{"ts": 9}\n'
    )
    assert same.json()["author"] == "dev"
    # an admin may name any author (a service committing for someone)
    body = {"branch": "authors", "author": "robot", "message": "m"}
    staged = _call(
        world,
        "admin",
        "POST",
        "/v1/pools/other/add?name=y.ndjson&branch=authors",
        content=b'{"ts": 10}\n',
    )
    assert staged.status_code == 200, staged.text
    committed = _call(world, "admin", "POST", "/v1/pools/other/commit", body)
    assert committed.json()["author"] == "robot"
    log = Lake.open(world.lake).pool("other").log("authors")
    assert [c.author for c in log[:3]] == ["robot", "dev", "dev"]


def test_the_cli_uses_the_credentials_file(
    world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = world.server.url
    monkeypatch.delenv("LIMNO_ACCESS_KEY_ID", raising=False)
    monkeypatch.delenv("LIMNO_SECRET_ACCESS_KEY", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    missing = fail("--lake", url, "ls")
    creds = tmp_path / "config" / "limno" / "credentials"
    assert missing.err == (
        f"error: {url}: no credentials: set LIMNO_ACCESS_KEY_ID and LIMNO_SECRET_ACCESS_KEY"
        f" or write {creds}\n"
    )
    creds.parent.mkdir(parents=True)
    env = world.users["ana"]
    creds.write_text(
        f"[default]\naccess_key_id = {env['LIMNO_ACCESS_KEY_ID']}\n"
        f"secret_access_key = {env['LIMNO_SECRET_ACCESS_KEY']}\n"
    )
    assert {r["name"] for r in ok("--lake", url, "-f", "ndjson", "ls").rows()} >= {"logs"}
    refused = fail("--lake", url, "branch", "-p", "logs", "nope")
    assert refused.err.startswith("error: user 'ana' (analyst) may not write to pool logs")
    creds.write_text(
        f"[default]\naccess_key_id = {env['LIMNO_ACCESS_KEY_ID']}\nsecret_access_key = wrong\n"
    )
    bad = fail("--lake", url, "ls")
    assert bad.err.startswith(f"error: {url}: unknown key or wrong secret")
    assert "wrong" not in bad.err.replace("wrong secret", "")


def test_a_deleted_key_stops_working_at_once(world: World) -> None:
    env = served_user(world.server, "temp", "analyst")
    key_id = env["LIMNO_ACCESS_KEY_ID"]
    auth = _auth(env)
    url = world.server.url + "/v1/pools"
    assert httpx.get(url, auth=auth, timeout=60).status_code == 200
    gone = _call(world, "admin", "DELETE", f"/v1/auth/keys/{key_id}")
    assert gone.status_code == 200, gone.text
    assert httpx.get(url, auth=auth, timeout=60).status_code == 401


def _serve(lake: str, secret: str | None) -> subprocess.CompletedProcess[str]:
    """``limno serve`` that is expected to refuse to start."""
    env = {k: v for k, v in os.environ.items() if k != "LIMNO_AUTH_SECRET"}
    if secret is not None:
        env["LIMNO_AUTH_SECRET"] = secret
    return subprocess.run(
        [sys.executable, "-m", "limno", "--lake", lake, "serve", "--port", "0"],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_serve_needs_the_right_auth_secret(tmp_path: Path) -> None:
    lake = str(tmp_path / "lake")
    Lake.init(lake)
    missing = _serve(lake, None)
    assert missing.returncode == 1
    assert missing.stderr.startswith("error: LIMNO_AUTH_SECRET is not set")
    assert "--no-auth" in missing.stderr
    assert len(missing.stderr.splitlines()) == 1
    LocalAuth(LocalLake.open(lake), server_secret=AUTH_SECRET).create_user("root", "admin")
    wrong = _serve(lake, "another-secret-of-enough-length")
    assert wrong.returncode == 1
    assert wrong.stderr == (
        "error: LIMNO_AUTH_SECRET is not the server secret this lake's keys are encrypted with\n"
    )


def test_no_auth_serves_everyone_and_says_so(tmp_path: Path) -> None:
    lake = str(tmp_path / "lake")
    Lake.init(lake).create_pool("logs", key="ts")
    server = start_server(lake, "--no-auth")
    try:
        assert server.env == {}
        r = httpx.post(f"{server.url}/v1/pools/logs/branches", json={"name": "b"}, timeout=60)
        assert r.status_code == 201, r.text
    finally:
        assert server.stop() == 0
    assert any(line.startswith("limno serve: warning: --no-auth:") for line in server.lines)


def test_every_route_has_a_rule(tmp_path: Path) -> None:
    """A route missing from the table would need admin: each one is decided on purpose."""
    from limno.server.app import create_app
    from limno.server.authorization import RULES

    app = create_app(str(tmp_path / "lake"), lake=LocalLake.init(str(tmp_path / "lake")))
    paths = app.openapi()["paths"].values()
    operations = {op["operationId"] for path in paths for op in path.values()}
    assert operations - {"health"} <= set(RULES), operations - set(RULES)
    assert {"create_pool", "drop_pool", "add_hook", "auth_create_user", "query"} <= operations

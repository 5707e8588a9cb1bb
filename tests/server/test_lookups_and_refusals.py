"""Through a real ``limno serve``: lookups of any number of keys, 404 (not 403) for a
pool that is gone, names with an encoded ``/`` answered as the lake answers them, and
a load of one table sent alone (unframed) that ends early commits nothing."""

from __future__ import annotations

import json
import random
import socket
from urllib.parse import urlsplit

import httpx
import pyarrow as pa
import pyarrow.ipc as ipc
import pytest

from limno import Lake
from limno.api import remote_lookup
from limno.errors import NotFoundError
from limno.server.guard import KEYS_BODY, MB
from server_support import Served, served_user

#: rows of pool ``many``; lookups ask for KEYS keys, ROWS of them there (a many-key
#: lookup matches each object against all its keys at once: found or not, keys are cheap)
ROWS = 2_000
KEYS = 200_000


@pytest.fixture(scope="module")
def many(server: Served) -> str:
    """Pool ``many`` (key k) holding keys 0 .. ROWS-1, loaded through the server."""
    lake = Lake.open(server.url)
    pool = lake.create_pool("many", key="k")
    pool.load([pa.table({"k": range(ROWS), "v": [f"v{i}" for i in range(ROWS)]})])
    return pool.id


def _keys(n: int) -> list[int]:
    """``n`` keys in no order: every key of the pool and ``n - ROWS`` it does not have."""
    keys = list(range(ROWS)) + list(range(10**6, 10**6 + n - ROWS))
    random.Random(7).shuffle(keys)
    return keys


def test_a_lookup_of_200000_keys(server: Served, many: str) -> None:
    """One request (its JSON is over the 1 MB of other bodies): every row, in key
    order, as a lookup in process gives them."""
    keys = _keys(KEYS)
    assert len(json.dumps(keys)) > MB
    remote = Lake.open(server.url).pool("many").get(keys)
    local = Lake.open(server.lake).pool("many").get(keys)
    assert remote.num_rows == ROWS
    assert remote.equals(local)


def test_a_longer_key_list_goes_in_batches(
    server: Served, many: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past what one request carries, several requests on one commit: the same rows in
    the same order; keys that match nothing give an empty table, as in process."""
    monkeypatch.setattr(remote_lookup, "BATCH", 50_000)  # about 10 requests, not 64 MB
    keys = _keys(60_000)
    pool = Lake.open(server.url).pool("many")
    local = Lake.open(server.lake).pool("many")
    got = pool.get(keys, "main")
    assert got.num_rows == ROWS
    assert got.equals(local.get(keys, "main"))
    missing = [ROWS + i for i in range(20_000)]
    assert pool.get(missing).num_rows == local.get(missing).num_rows == 0


def test_only_a_lookup_takes_a_long_json_body(server: Served, many: str) -> None:
    """2 MB of keys is a lookup; 2 MB of ids is no commit (413); past its own cap a
    lookup is 413 too."""
    keys = _keys(150_000)
    assert len(json.dumps(keys)) > MB
    ok = httpx.post(
        f"{server.url}/v1/pools/many/get",
        json={"keys": keys},
        headers={"Accept": "application/vnd.apache.arrow.stream"},
        auth=server.auth,
        timeout=120,
    )
    assert ok.status_code == 200, ok.text
    assert ipc.open_stream(ok.content).read_all().num_rows == ROWS
    ids = {"ids": [f"id{i:07d}" for i in range(200_000)]}
    refused = httpx.post(f"{server.url}/v1/pools/many/commit", json=ids, auth=server.auth)
    assert refused.status_code == 413
    huge = b'{"keys": [' + b"1," * (KEYS_BODY // 2) + b"1]}"
    over = httpx.post(
        f"{server.url}/v1/pools/many/get",
        content=huge,
        headers={"Content-Type": "application/json"},
        auth=server.auth,
        timeout=120,
    )
    assert over.status_code == 413
    assert over.json()["detail"].startswith(f"key list of {len(huge)} bytes is over the limit")


def _as(env: dict[str, str]) -> httpx.BasicAuth:
    return httpx.BasicAuth(env["LIMNO_ACCESS_KEY_ID"], env["LIMNO_SECRET_ACCESS_KEY"])


def test_a_dropped_pool_is_404_even_when_its_id_was_seen(server: Served) -> None:
    """A caller refused a pool (403) asks again after it was dropped: 404, as for any
    pool that does not exist; a 403 names the pool only to who may read it."""
    gone = Lake.open(server.url).create_pool("gone", key="k")
    blind = served_user(server, "blind", "analyst")
    reader = served_user(server, "reader", "analyst")
    Lake.open(server.lake).auth().grant("blind", "gone", "none")
    by_id = f"{server.url}/v1/pools/{gone.id}/log"
    refused = httpx.get(by_id, auth=_as(blind))
    assert refused.status_code == 403
    assert refused.json()["detail"] == f"user 'blind' (analyst) may not read pool {gone.id}"
    write = f"{server.url}/v1/pools/{gone.id}/branches"
    named = httpx.post(write, json={"name": "b"}, auth=_as(reader))
    assert named.json()["detail"] == "user 'reader' (analyst) may not write to pool gone"
    Lake.open(server.url).drop_pool("gone")
    for who in (blind, reader, server.env):
        missing = httpx.get(by_id, auth=_as(who))
        assert missing.status_code == 404, missing.text
        assert missing.json()["detail"] == f"pool {gone.id!r} not found"


@pytest.mark.parametrize(
    ("method", "path", "detail"),
    [
        ("GET", "/v1/auth/users/a%2Fb", "user 'a/b' not found"),
        ("DELETE", "/v1/auth/users/a%2Fb", "user 'a/b' not found"),
        ("POST", "/v1/auth/users/slash%2Fkeys", "user 'slash/keys' not found"),
        ("DELETE", "/v1/auth/keys/a%2Fb", "access key 'a/b' not found"),
        ("PUT", "/v1/auth/users/slash/grants/x%2Fy", "pool 'x/y' not found"),
        ("DELETE", "/v1/auth/users/a%2Fb/grants/logs", "user 'a/b' not found"),
    ],
)
def test_auth_names_with_a_slash_are_missing(
    server: Served, method: str, path: str, detail: str
) -> None:
    """No user, key or pool name holds a ``/``: 404 in the lake's words, as for a pool
    (never routed elsewhere: ``slash%2Fkeys`` makes no key for user ``slash``)."""
    auth = Lake.open(server.url).auth()
    try:
        auth.user("slash")
    except NotFoundError:
        auth.create_user("slash", "analyst", key=False)
    r = httpx.request(method, server.url + path, json={"level": "read"}, auth=server.auth)
    assert r.status_code == 404, r.text
    assert r.json() == {**r.json(), "detail": detail, "error": "NotFoundError"}
    assert auth.access_keys("slash") == []


def test_the_client_says_what_the_lake_says(server: Served) -> None:
    """The same error, remotely and on the lake itself."""
    remote = Lake.open(server.url).auth()
    local = Lake.open(server.lake).auth()
    for call in (
        lambda a: a.user("a/b"),
        lambda a: a.delete_user("a/b"),
        lambda a: a.delete_key("a/b"),
        lambda a: a.revoke("a/b", "many"),
    ):
        with pytest.raises(NotFoundError) as there:
            call(local)
        with pytest.raises(NotFoundError, match=f"^{there.value}$"):
            call(remote)


def test_one_table_sent_alone(server: Served) -> None:
    """One small table goes unframed; two go framed: both load all their rows."""
    pool = Lake.open(server.url).create_pool("alone", key="k")
    one = pool.load([pa.table({"k": [1, 2]})])
    two = pool.load([pa.table({"k": [3]}), pa.table({"k": [4, 5]})])
    assert (one.message, two.message) == ("load 2 record(s)", "load 3 record(s)")
    assert pool.scan().column("k").to_pylist() == [1, 2, 3, 4, 5]
    # half of a table's body, then the connection closes: nothing is committed
    sink = pa.BufferOutputStream()
    with ipc.new_stream(sink, pa.schema([("k", pa.int64())])) as writer:
        writer.write_table(pa.table({"k": list(range(10, 5000))}))
    body = sink.getvalue().to_pybytes()
    url = urlsplit(server.url)
    with socket.create_connection((url.hostname, url.port)) as sock:
        head = (
            f"POST /v1/pools/alone/load HTTP/1.1\r\nHost: {url.netloc}\r\n"
            f"Content-Type: application/vnd.apache.arrow.stream\r\n"
            f"Content-Length: {len(body)}\r\n{server.authorization}\r\n"
        )
        sock.sendall(head.encode() + body[: len(body) // 2])
    assert httpx.get(f"{server.url}/health").status_code == 200
    assert server.commits("alone") == 3  # the pool's first commit and the two loads


def test_a_kept_pool_sees_what_was_done_next_to_the_lake(server: Served) -> None:
    """The server keeps a pool's object between requests (its journals remember what
    they read), yet a commit or a new hook made next to the lake counts at once."""
    from limno.core.hooks import HookSpec
    from limno.errors import HookVetoError

    remote = Lake.open(server.url).create_pool("kept", key="k")
    remote.load([pa.table({"k": [1]})])
    local = Lake.open(server.lake).pool("kept")
    theirs = local.load([pa.table({"k": [2]})])  # another writer's commit
    done = remote.load([pa.table({"k": [3]})])
    assert done.parents == (theirs.id,)
    assert remote.scan().column("k").to_pylist() == [1, 2, 3]
    local.add_hook(HookSpec("no", "pre-commit", run="exit 3"))  # the pool's configuration
    with pytest.raises(HookVetoError):
        remote.load([pa.table({"k": [4]})])
    assert remote.scan().column("k").to_pylist() == [1, 2, 3]

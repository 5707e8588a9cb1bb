"""The merge-request routes over HTTP with auth: who may do what (authorization.py's
table), the answers' JSON, and the Python client (RemotePool) against the lake itself."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pyarrow as pa
import pytest

from limno import Lake
from limno.api.remote import RemotePool
from server_support import Served, served_user, start_server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    lake = str(tmp_path_factory.mktemp("reviews") / "lake")
    local = Lake.init(lake)
    pool = local.create_pool("logs", key="ts")
    pool.load([pa.table({"ts": [1, 2, 3]})])
    pool.branch("dev")
    pool.load([pa.table({"ts": [4]})], branch="dev")
    served = start_server(lake)
    try:
        yield served
    finally:
        assert served.stop() == 0, served.lines


def _auth(env: dict[str, str]) -> httpx.BasicAuth:
    return httpx.BasicAuth(env["LIMNO_ACCESS_KEY_ID"], env["LIMNO_SECRET_ACCESS_KEY"])


def test_readers_read_writers_write(server: Served) -> None:
    ana = _auth(served_user(server, "ana", "analyst"))
    dev = _auth(served_user(server, "dev", "developer"))
    base = f"{server.url}/v1/pools/logs"
    with httpx.Client(timeout=60) as client:
        new = {"source": "dev", "title": "four"}
        assert client.post(f"{base}/merge-requests", json=new, auth=ana).status_code == 403
        made = client.post(f"{base}/merge-requests", json=new, auth=dev)
        assert made.status_code == 201, made.text
        mr = made.json()
        assert (mr["author"], mr["state"], mr["pool"]) == ("dev", "open", "logs")
        listed = client.get(f"{base}/merge-requests", params={"state": "open"}, auth=ana)
        assert [m["id"] for m in listed.json()] == [mr["id"]]
        compared = client.get(f"{base}/compare", params={"source": "dev"}, auth=ana).json()
        assert (compared["kind"], compared["counts"]["added"]) == ("fast-forward", 1)
        assert compared["sample"][0]["rows"] == [{"ts": 4}]
        for op in ("merge", "close"):
            url = f"{base}/merge-requests/{mr['id']}/{op}"
            assert client.post(url, json={}, auth=ana).status_code == 403
        other = client.post(
            f"{base}/merge-requests/{mr['id']}/merge", json={"author": "someone"}, auth=dev
        )
        assert other.status_code == 403  # only an admin may act as another author
        merged = client.post(f"{base}/merge-requests/{mr['id']}/merge", json={}, auth=dev)
        assert merged.status_code == 200, merged.text
        assert (merged.json()["state"], merged.json()["done_by"]) == ("merged", "dev")
        missing = client.get(f"{base}/merge-requests/3McpXLfnkyHHksrykXHJTVs4AgZ", auth=ana)
        assert missing.status_code == 404
        assert "has no merge request" in missing.json()["detail"]


def test_the_python_client_sees_what_the_lake_holds(
    server: Served, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name, value in server.env.items():
        monkeypatch.setenv(name, value)
    remote = Lake.open(server.url).versioned_pool("logs")
    assert isinstance(remote, RemotePool)
    mr = remote.open_merge_request("dev", "main", "again", "nothing left to bring")
    local = Lake.open(server.lake).versioned_pool("logs")
    assert local.merge_request(mr.id) == mr
    assert remote.compare("dev").kind == local.compare("dev").kind
    closed = remote.close_merge_request(mr.id)
    assert closed == local.merge_request(mr.id) and closed.state == "closed"
    assert remote.merge_requests("closed") == local.merge_requests("closed")

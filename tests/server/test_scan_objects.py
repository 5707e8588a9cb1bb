"""A full scan through the server answered with the stored objects (limno.api.wire_objects).

Whichever form the server picks (the objects of a snapshot that needs no merging,
Arrow IPC otherwise), a remote scan gives what the same scan gives in process: the
same rows, order and schema. The tests check the form too, by asking as the client
asks and reading the answer's Content-Type.
"""

from __future__ import annotations

import datetime as dt
import os
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pytest

from limno import Lake
from limno.api import remote_scan, wire_ranges
from limno.api.local import LocalLake
from limno.api.local_pool import LocalPool
from limno.api.remote import RemoteLake, RemotePool
from limno.api.wire_objects import MEDIA
from limno.data.objects import data_path
from limno.errors import DamagedObjectError, NotFoundError, StorageError
from limno.server.guard import Options
from limno.server.run import serving
from server_support import served, served_user, start_server
from tls_support import self_signed

ARROW = "application/vnd.apache.arrow.stream"


@pytest.fixture
def lake(tmp_path: Path) -> str:
    return str(tmp_path / "lake")


@pytest.fixture
def url(lake: str) -> Iterator[str]:
    Lake.init(lake)
    with served(lake) as at:
        yield at


def _apart(lake: str) -> LocalPool:
    """Pool ``apart``: keys in three loads that do not overlap, cut into many small
    objects; its schema grows (a column ``w``) and widens (``n``: int32, then int64)."""
    pool = LocalLake.open(lake).create_pool("apart", key="k", target_size=1 << 12)
    n32 = pa.array(range(600), pa.int32())
    pool.load([pa.table({"k": list(range(600)), "n": n32, "s": [f"s{i}" for i in range(600)]})])
    pool.load([pa.table({"k": list(range(600, 900)), "n": list(range(300)), "w": [0.5] * 300})])
    pool.load([pa.table({"k": list(range(-300, 0)), "s": ["neg"] * 300})])
    assert len(pool.objects()) > 6
    return pool


def _overlapping(lake: str) -> LocalPool:
    """Pool ``mixed``: two loads whose keys interleave, with a repeated key."""
    pool = LocalLake.open(lake).create_pool("mixed", key="k")
    pool.load([pa.table({"k": list(range(0, 200, 2)), "v": ["a"] * 100})])
    pool.load([pa.table({"k": list(range(1, 201, 2)) + [4], "v": ["b"] * 101})])
    return pool


def _remote(url: str, name: str) -> RemotePool:
    return RemoteLake(url).pool(name)


def _form(url: str, pool: LocalPool, **params: Any) -> str:
    """The media type the server answers a scan with when asked as the client asks."""
    query = {k: v for k, v in params.items() if v is not None}
    with httpx.Client() as client:
        r = client.get(
            f"{url}/v1/pools/{pool.name}/scan",
            params=query,
            headers={"Accept": remote_scan.ACCEPT},
        )
    assert r.status_code == 200, r.text
    media = r.headers["content-type"].split(";")[0]
    if media == MEDIA:  # a local lake's objects: a body of known length, not chunked
        assert r.headers["content-length"] == str(len(r.content))
    return media


def _same(remote: pa.Table, local: pa.Table) -> None:
    assert remote.schema == local.schema
    assert remote.equals(local)


@pytest.mark.parametrize("order", ["asc", "desc"])
def test_objects_that_do_not_overlap_come_as_stored(url: str, lake: str, order: str) -> None:
    pool = _apart(lake)
    assert _form(url, pool, order=order) == MEDIA
    remote = _remote(url, "apart")
    local = pool.scan(order=order)
    _same(remote.scan(order=order), local)
    keys = local.column("k").to_pylist()
    assert keys == sorted(keys, reverse=order == "desc") and len(keys) == 1200
    # every table of the stream has the snapshot's unified schema, and none is empty
    tables = list(remote.iter_scan(order=order))
    assert len(tables) > 1
    assert all(t.schema == local.schema and t.num_rows for t in tables)
    assert local.schema.field("n").type == pa.int64() and "w" in local.schema.names


def test_an_older_commit_and_as_of_come_as_stored(url: str, lake: str) -> None:
    pool = _apart(lake)
    assert _form(url, pool, ref="main~1") == MEDIA
    remote = _remote(url, "apart")
    _same(remote.scan("main~1"), pool.scan("main~1"))
    then = dt.datetime.now(dt.UTC)
    pool.load([pa.table({"k": [5000]})])
    _same(remote.scan(as_of=then), pool.scan(as_of=then))
    _same(remote.scan(), pool.scan())


def test_overlapping_objects_are_merged_by_the_server(url: str, lake: str) -> None:
    pool = _overlapping(lake)
    assert _form(url, pool) == ARROW
    remote = _remote(url, "mixed")
    for order in ("asc", "desc"):
        _same(remote.scan(order=order), pool.scan(order=order))
    assert remote.scan().column("k").to_pylist()[:6] == [0, 1, 2, 3, 4, 4]


@pytest.mark.parametrize(
    "bounds",
    [
        {"start": 100},
        {"end": 5},
        {"start": -10, "end": 650},
        {"limit": 7},
        {"limit": 700, "order": "desc"},
        {"start": 50, "end": 890, "order": "desc", "limit": 300},
        {"ranges": [(-300, -290), (10, 20), (895, None)]},
        {"ranges": [(None, 3), (598, 603)], "order": "desc"},
    ],
)
def test_bounds_ranges_and_limits_give_what_they_give_in_process(
    url: str, lake: str, bounds: dict[str, Any]
) -> None:
    apart = _apart(lake)
    mixed = _overlapping(lake)
    wire = {k: v for k, v in bounds.items() if k in ("start", "end", "limit", "order")}
    wire["ranges"] = wire_ranges.ranges_to_json(bounds.get("ranges"))
    assert _form(url, apart, **wire) == ARROW  # cut by the server
    for pool in (apart, mixed):
        got = _remote(url, pool.name).scan(**bounds)
        want = pool.scan(**bounds)
        _same(got, want)
        assert got.num_rows  # every case selects rows


def test_scans_the_server_must_rewrite_come_as_arrow(url: str, lake: str) -> None:
    """Keyless rows (a scan moves them last), iterators, an empty pool."""
    opened = LocalLake.open(lake)
    keyless = opened.create_pool("keyless", key="k")
    keyless.load([pa.table({"k": [3, 1, None, 2], "v": [1, 2, 3, 4]})])
    keyless.load([pa.table({"k": [10, 11], "v": [5, 6]})])
    dedup = opened.create_pool("dedup", key="k", iterators=["dedup"])
    dedup.load([pa.table({"k": [1, 2], "v": [1, 2]})])
    dedup.load([pa.table({"k": [3], "v": [3]})])
    empty = opened.create_pool("empty", key="k")
    for pool in (keyless, dedup):
        assert _form(url, pool) == ARROW
        for order in ("asc", "desc"):
            _same(_remote(url, pool.name).scan(order=order), pool.scan(order=order))
    assert _form(url, empty) == MEDIA  # nothing to merge: a schema and the end
    assert _remote(url, "empty").scan().equals(empty.scan())
    assert list(_remote(url, "empty").iter_scan()) == []


def test_a_missing_object_is_the_error_of_the_scan_in_process(url: str, lake: str) -> None:
    pool = _apart(lake)
    victim = pool.objects()[3]
    os.remove(os.path.join(lake, data_path(pool.id, victim.id)))
    with pytest.raises(NotFoundError) as local:
        pool.scan()
    with pytest.raises(NotFoundError) as remote:
        _remote(url, "apart").scan()
    assert str(remote.value) == str(local.value) and victim.id in str(remote.value)


def test_an_object_removed_by_vacuum_says_so(url: str, lake: str) -> None:
    pool = Lake.open(lake).create_pool("kept", key="k", retention={"main": dt.timedelta(0)})
    pool.load([pa.table({"k": [1, 2]})])
    pool.load([pa.table({"k": [3, 4]})])
    pool.delete_where("k >= 3")
    assert pool.vacuum(grace=dt.timedelta(0)).removed
    assert _remote(url, "kept").scan().equals(pool.scan())
    with pytest.raises(NotFoundError, match="removed by vacuum") as local:
        pool.scan("main~1")
    with pytest.raises(NotFoundError, match="removed by vacuum") as remote:
        _remote(url, "kept").scan("main~1")
    assert str(remote.value) == str(local.value)


def test_a_damaged_object_names_itself(url: str, lake: str) -> None:
    pool = _apart(lake)
    victim = pool.objects()[2]
    path = os.path.join(lake, data_path(pool.id, victim.id))
    with open(path, "r+b") as f:  # the first page's bytes, not the footer
        f.seek(4)
        f.write(b"\xff" * 64)
    with pytest.raises(DamagedObjectError) as local:
        pool.scan()
    with pytest.raises(DamagedObjectError) as remote:
        _remote(url, "apart").scan()
    assert remote.value.path == local.value.path and remote.value.pool == "apart"
    assert "limno verify --deep apart" in str(remote.value)


def test_an_object_gone_midway_ends_the_stream_with_its_error(tmp_path: Path) -> None:
    """On a store that is not a local directory the server checks objects as it
    sends them: an error midway comes as an error frame, raised by the client."""
    lake = f"memory://{tmp_path.name}-scan-objects"
    Lake.init(lake)
    pool = _apart(lake)
    victim = max(pool.objects(), key=lambda o: o.min_key or ())  # the last one sent
    pool.storage.delete(data_path(pool.id, victim.id))
    with served(lake) as url:
        tables = _remote(url, "apart").iter_scan()
        first = next(tables)
        assert first.num_rows
        with pytest.raises(NotFoundError, match=victim.id):
            list(tables)


def test_an_unreadable_object_midway_on_a_local_lake_is_its_error(url: str, lake: str) -> None:
    """The answer's length counts every object: one that cannot be read when its turn
    comes (here a directory in its place) is an error frame, then the body stops."""
    pool = _apart(lake)
    victim = max(pool.objects(), key=lambda o: o.min_key or ())
    path = os.path.join(lake, data_path(pool.id, victim.id))
    os.remove(path)
    os.mkdir(path)
    tables = _remote(url, "apart").iter_scan()
    assert next(tables).num_rows
    with pytest.raises(StorageError, match=victim.id):
        list(tables)


def test_a_scan_left_early_lets_go_of_its_answer(url: str, lake: str) -> None:
    pool = _apart(lake)
    remote = _remote(url, "apart")
    tables = remote.iter_scan()
    assert isinstance(tables, types.GeneratorType)
    assert next(tables).num_rows
    tables.close()  # the receiving thread stops, the connection is let go
    _same(remote.scan(), pool.scan())  # and the next scan is whole


def test_the_other_formats_are_unchanged(url: str, lake: str) -> None:
    pool = _apart(lake)
    with httpx.Client(base_url=url) as client:
        scan = f"/v1/pools/{pool.name}/scan"
        assert client.get(scan).headers["content-type"].startswith("application/x-ndjson")
        r = client.get(scan, headers={"Accept": ARROW})
        assert r.headers["content-type"] == ARROW
        r = client.get(scan, headers={"Accept": "text/csv"})
        assert r.headers["content-type"].startswith("text/csv")
        assert r.text.splitlines()[0] == '"k","n","s","w"' and len(r.text.splitlines()) == 1201
        r = client.get(scan, headers={"Accept": MEDIA}, params={"limit": 3})
        assert r.status_code == 406  # only objects asked for, and the scan needs cutting


def test_a_caller_who_may_not_read_the_pool_gets_403(lake: str) -> None:
    Lake.init(lake)
    pool = _apart(lake)
    served_ = start_server(lake)
    try:
        env = served_user(served_, "nosy", "analyst")
        Lake.open(lake).auth().grant("nosy", "apart", "none")
        auth = httpx.BasicAuth(env["LIMNO_ACCESS_KEY_ID"], env["LIMNO_SECRET_ACCESS_KEY"])
        scan = f"{served_.url}/v1/pools/{pool.name}/scan"
        with httpx.Client() as client:
            denied = client.get(scan, auth=auth, headers={"Accept": remote_scan.ACCEPT})
            allowed = client.get(scan, auth=served_.auth, headers={"Accept": remote_scan.ACCEPT})
        assert denied.status_code == 403, denied.text
        assert b"PAR1" not in denied.content
        assert allowed.status_code == 200 and allowed.headers["content-type"] == MEDIA
    finally:
        assert served_.stop() == 0, served_.lines


def test_objects_over_https_are_read_through_httpx(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over TLS the client cannot read the socket itself: the same answer, read as
    httpx hands it over."""
    lake = str(tmp_path / "lake")
    Lake.init(lake)
    pool = _apart(lake)
    cert, key = self_signed(tmp_path)
    monkeypatch.setenv("LIMNO_CA_BUNDLE", cert)
    with serving(lake, options=Options(tls_cert=cert, tls_key=key)) as url:
        assert url.startswith("https://")
        remote = RemoteLake(url)
        try:
            for order in ("asc", "desc"):
                _same(remote.pool("apart").scan(order=order), pool.scan(order=order))
        finally:
            remote.close()

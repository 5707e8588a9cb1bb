"""The Python API against a served lake answers what it answers in process.

Each test opens one lake twice, by its path and by the URL of a server on it, and
compares the two: results, model objects and errors (class and message).
"""

from __future__ import annotations

import datetime as dt
import io
import sys
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from limno import Lake
from limno.api.remote import RemoteLake
from limno.errors import InvalidInputError, LimnoError, NotFoundError
from server_support import served

ROWS = [{"ts": i, "msg": f"m{i}"} for i in range(10)]


@pytest.fixture
def lakes(tmp_path: Path) -> Iterator[tuple[Lake, RemoteLake]]:
    """(the lake in process, the same lake through a server)."""
    path = str(tmp_path / "lake")
    local = Lake.init(path)
    with served(path) as url:
        remote = Lake.open(url)
        assert isinstance(remote, RemoteLake)
        with remote:
            yield local, remote


def _same_error(
    local: object, remote: object, call: str, *args: object, **kwargs: object
) -> LimnoError:
    with pytest.raises(LimnoError) as here:
        getattr(local, call)(*args, **kwargs)
    with pytest.raises(LimnoError) as there:
        getattr(remote, call)(*args, **kwargs)
    assert type(there.value) is type(here.value)
    assert str(there.value) == str(here.value)
    return there.value


def test_pools_refs_and_history(lakes: tuple[Lake, RemoteLake], tmp_path: Path) -> None:
    local, remote = lakes
    pool = remote.create_pool("logs", key="ts", retention={"dev*": dt.timedelta(days=3)})
    assert local.pool("logs").config == pool.config
    data = tmp_path / "logs.ndjson"
    data.write_text("".join(f'{{"ts": {r["ts"]}, "msg": "{r["msg"]}"}}\n' for r in ROWS[:5]))
    first = pool.load([str(data)], message="first", meta={"k": "v"})
    second = pool.load([pa.Table.from_pylist(ROWS[5:])], message="second")
    here = local.pool("logs")
    assert pool.log() == here.log() and pool.log()[0] == second
    assert first.meta == {"k": "v"}
    assert pool.scan() == here.scan()
    assert pool.scan().to_pylist() == ROWS
    assert pool.scan(start=3, end=6).to_pylist() == ROWS[3:6]
    assert pool.scan(start="3", order="desc", limit=2) == here.scan(
        start="3", order="desc", limit=2
    )
    assert [t.to_pylist() for t in pool.iter_scan()] == [t.to_pylist() for t in here.iter_scan()]
    assert pool.get([4, 7]) == here.get([4, 7])
    assert pool.objects() == here.objects()
    as_of = dt.datetime.now(dt.UTC)
    assert pool.resolve("main", as_of) == here.resolve("main", as_of) == second.id

    assert pool.branch("dev") == second.id
    pool.tag("v1", "main~1")
    assert pool.branches() == here.branches() and pool.tags() == {"v1": first.id}
    dev = pool.load([pa.table({"ts": [100]})], branch="dev")
    assert pool.diff("main", "dev") == here.diff("main", "dev")
    merged = pool.merge("dev", "main", fast_forward=False, message="m", meta={"x": 1})
    assert merged.kind == "merge" and pool.log(limit=1)[0].id == merged.commit
    assert pool.log("main", 2, first_parent=True) == here.log("main", 2, first_parent=True)
    reverted = pool.revert(dev.id)
    assert pool.scan().num_rows == 10 and reverted == here.log(limit=1)[0]
    picked = pool.cherry_pick(dev.id)
    assert picked == here.log(limit=1)[0]
    assert pool.reset("main", reverted.id) == (picked.id, reverted.id)
    assert pool.delete_tag("v1") == first.id and pool.delete_branch("dev") == dev.id
    assert local.list_pools() == remote.list_pools()
    assert remote.meta_table("", "pools") == local.meta_table("", "pools")
    assert pool.meta_table("commits") == here.meta_table("commits")
    assert remote.meta_table("logs", "objects") == local.meta_table("logs", "objects")

    renamed = remote.rename_pool("logs", "events")
    assert renamed.id == pool.id and pool.scan().num_rows == 10  # by id: renames keep it
    assert remote.drop_pool("events").id == pool.id
    assert remote.list_pools() == []


def test_staging_deletes_hooks_and_maintenance(lakes: tuple[Lake, RemoteLake]) -> None:
    local, remote = lakes
    pool = remote.create_pool("logs", key="ts")
    here = local.pool("logs")
    staged = pool.add([pa.Table.from_pylist(ROWS[:5])]) + pool.add([pa.Table.from_pylist(ROWS[5:])])
    assert pool.staged() == here.staged()
    assert sorted(o.id for o in pool.staged()) == sorted(o.id for o in staged)
    pool.unstage([staged[1].id])
    made = pool.commit(message="staged")
    assert pool.scan().to_pylist() == ROWS[:5] and made == here.log(limit=1)[0]
    pool.load([pa.Table.from_pylist(ROWS[5:])])
    gone = pool.delete_where("ts >= 8")
    assert gone.meta["deleted_rows"] == 2 and pool.scan().num_rows == 8
    assert pool.delete_objects([made.actions[0].key]).actions

    pool.load([pa.Table.from_pylist(ROWS[:2])])
    assert pool.compact(strategy="size-ratio") == (None, [])
    commit, results = pool.compact([o.id for o in pool.objects()])
    assert commit is not None and commit == here.log(limit=1)[0]
    assert sum(r.rows_out for r in results) == pool.scan().num_rows == 5
    assert len(pool.objects()) == 1
    report = pool.vacuum(dt.timedelta(0), dry_run=True)
    assert report.dry_run and report.removed
    assert report == here.vacuum(dt.timedelta(0), dry_run=True)
    assert set(pool.status()) == set(here.status())
    assert pool.status()["files"] == here.status()["files"]
    assert list(remote.verify()) == [] and list(remote.verify("logs", deep=True)) == []

    from limno import HookSpec

    pool.add_hook(HookSpec("audit", "post-commit", run="true"))
    specs = [HookSpec("audit", "post-commit", "true")]
    assert pool.hook_specs() == local.pool("logs").hook_specs() == specs
    pool.remove_hook("audit")
    assert pool.hook_specs() == []


def test_transactions_and_queries(lakes: tuple[Lake, RemoteLake]) -> None:
    local, remote = lakes
    pool = remote.create_pool("logs", key="ts")
    with pool.transaction(message="tx") as view:
        view.load([pa.Table.from_pylist(ROWS)])
    assert pool.scan().to_pylist() == ROWS
    sql = "SELECT count(*) AS n, max(ts) AS top FROM logs"
    assert remote.query(sql) == local.query(sql)
    assert remote.query(sql).to_pylist() == [{"n": 10, "top": 9}]
    empty = remote.query("SELECT ts FROM logs WHERE ts < 0")
    assert empty == local.query("SELECT ts FROM logs WHERE ts < 0") and empty.num_rows == 0
    from limno.engines.query_limits import QueryLimits

    _same_error(local, remote, "query", "SELECT * FROM logs", limits=QueryLimits(max_rows=3))
    with pytest.raises(InvalidInputError, match="a server decides"):
        remote.query("SELECT 1", readable=lambda pool: True)


def test_errors_come_back_as_raised(lakes: tuple[Lake, RemoteLake], tmp_path: Path) -> None:
    local, remote = lakes
    local.create_pool("logs", key="ts")
    _same_error(local, remote, "pool", "nope")
    _same_error(local, remote, "create_pool", "logs")
    _same_error(local, remote, "drop_pool", "nope")
    pool, here = remote.pool("logs"), local.pool("logs")
    assert isinstance(_same_error(here, pool, "log", "nobranch"), NotFoundError)
    _same_error(here, pool, "merge", "nobranch")
    bad = tmp_path / "bad.ndjson"
    bad.write_text('{"ts": 1}\n{"ts": \n')
    _same_error(here, pool, "load", [str(bad)])
    _same_error(here, pool, "load", [str(tmp_path / "missing.csv")])
    _same_error(here, pool, "load", [str(tmp_path)])
    assert len(pool.log()) == 1  # nothing was committed
    with pytest.raises(InvalidInputError, match="manage runs next to the lake"):
        remote.manage(once=True)
    with pytest.raises(InvalidInputError):
        RemoteLake.init(remote.uri)


def test_load_streams_stdin(
    lakes: tuple[Lake, RemoteLake], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, remote = lakes
    pool = remote.create_pool("logs", key="ts")
    text = "".join(f'{{"ts": {r["ts"]}, "msg": "{r["msg"]}"}}\n' for r in ROWS)
    stdin = io.TextIOWrapper(io.BytesIO(text.encode()))
    monkeypatch.setattr(sys, "stdin", stdin)
    pool.load(["-"])
    assert pool.scan().to_pylist() == ROWS


def test_an_unreachable_server_is_one_error(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens on: bound, never listening
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
        with RemoteLake(url) as lake, pytest.raises(LimnoError, match="cannot reach limno server"):
            lake.list_pools()


def test_a_scan_read_in_part_lets_go(lakes: tuple[Lake, RemoteLake]) -> None:
    """A client that stops reading a long scan closes its answer; the server goes on."""
    _, remote = lakes
    pool = remote.create_pool("big", key="k")
    for start in range(0, 400_000, 100_000):
        pool.load([pa.table({"k": range(start, start + 100_000), "v": ["x" * 20] * 100_000})])
    scan = pool.iter_scan()
    first = next(scan)
    assert 0 < first.num_rows < 400_000
    scan.close()  # type: ignore[attr-defined]
    assert pool.scan(start=399_998).to_pylist() == [
        {"k": 399_998, "v": "x" * 20},
        {"k": 399_999, "v": "x" * 20},
    ]
    assert sum(t.num_rows for t in pool.iter_scan()) == 400_000


def test_the_client_implements_the_whole_interface() -> None:
    import inspect

    from limno.api.base import Lake as LakeInterface
    from limno.api.base import Pool as PoolInterface
    from limno.api.remote import RemotePool

    for interface, impl in ((LakeInterface, RemoteLake), (PoolInterface, RemotePool)):
        assert issubclass(impl, interface)
        assert not getattr(impl, "__abstractmethods__", ())
        for name in getattr(interface, "__abstractmethods__", ()):
            if isinstance(inspect.getattr_static(interface, name), property):
                continue
            have = inspect.signature(getattr(impl, name)).parameters
            for p in inspect.signature(getattr(interface, name)).parameters.values():
                assert p.name in have, f"{impl.__name__}.{name} lacks {p.name}"

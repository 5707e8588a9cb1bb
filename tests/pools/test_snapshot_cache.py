"""Decoded snapshots kept per process (pools/records/snapshot_cache.py): a load decodes
only what it adds, and what is kept always equals decoding the stored snapshot afresh."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from limno.core.committed import _LRU
from limno.data.objects import DataObject
from limno.lake import Lake
from limno.pools.records import snapshot_cache
from limno.pools.records.pool import RecordPool


def _rows(start: int, n: int = 10) -> pa.Table:
    keys = list(range(start, start + n))
    return pa.table({"k": keys, "v": [f"v{k}" for k in keys]})


def _fresh(pool: RecordPool, monkeypatch: pytest.MonkeyPatch) -> tuple[list[Any], Any]:
    """The pool's main snapshot decoded from storage, nothing kept from before."""
    monkeypatch.setattr(snapshot_cache, "_snapshots", _LRU(snapshot_cache.SNAPSHOTS))
    objs, tree = pool.snapshot()
    return objs, tree.parts


def test_a_load_decodes_only_the_objects_it_adds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pool = Lake.init(str(tmp_path / "lake")).create_pool("p", key="k")
    for i in range(4):
        pool.load([_rows(i * 10)])
    real = DataObject.from_json
    decoded: list[str] = []

    def counting(cls: type[DataObject], d: Any, path: str = "") -> DataObject:
        obj = real(d, path)
        decoded.append(obj.id)
        return obj

    monkeypatch.setattr(DataObject, "from_json", classmethod(counting))
    added = [pool.load([_rows(100 + i * 10)]).actions[0].key for i in range(3)]
    assert decoded == added
    assert pool.get([105]).column("v").to_pylist() == ["v105"]
    assert decoded == added  # a lookup decodes nothing either


def test_what_is_kept_equals_a_fresh_decode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two handles in one process load in turns, with a split and a delete (objects
    whose write order ties with their source's) in between: the snapshot each load
    derives is the one stored."""
    uri = str(tmp_path / "lake")
    one = Lake.init(uri).create_pool("p", key="k")
    two = Lake.open(uri).pool("p")
    one.load([_rows(0, 100)])
    two.load([_rows(100)])
    assert one.split("root", at="50") is not None
    one.delete_where("k % 7 = 0")
    for i in range(3):
        (one if i % 2 else two).load([_rows(200 + i * 10)])
    kept = one.snapshot()
    assert len(kept[0]) > 4
    assert kept[0] == two.snapshot()[0]
    assert _fresh(one, monkeypatch) == (kept[0], kept[1].parts)
    assert one.table().num_rows == 140 - len(range(0, 110, 7))  # k = 0, 7 ... 105 deleted

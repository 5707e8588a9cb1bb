"""Compaction on Spark: the same jobs as the local engine, merged in Spark tasks,
committed with the same protocol — identical results, on split partitions and with
iterators."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from limno.api.local import LocalLake as Lake
from limno.engines import spark as ls
from spark_support import module_session

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def spark() -> Any:
    yield from module_session()


@pytest.mark.parametrize("iterators", [[], ["sum(n)"]])
def test_spark_compaction_matches_local(spark: Any, tmp_path: Any, iterators: list[str]) -> None:
    lake = Lake.init(str(tmp_path / "lake"))
    pool = lake.create_pool("p", key="k", iterators=iterators)
    for i in range(5):
        keys = list(range(i, 400, 3))
        pool.load([pa.table({"k": keys, "n": [i] * len(keys)})])
    assert pool.split("root", at=200) is not None
    pool.branch("spark")
    ids = [o.id for o in pool.snapshot()[0]]
    local, local_jobs = pool.compact(ids, branch="main")
    remote, remote_jobs = pool.compact(ids, branch="spark", runner=ls.compaction_runner)
    assert local is not None and remote is not None
    assert len(local_jobs) == len(remote_jobs) == 2  # one job per leaf partition
    assert pool.scan("spark").equals(pool.scan("main"))
    assert [r.rows_in for r in remote_jobs] == [r.rows_in for r in local_jobs]
    assert [r.rows_out for r in remote_jobs] == [r.rows_out for r in local_jobs]
    # the outputs belong to their leaves, and every input is gone
    objs, tree = pool.snapshot("spark")
    assert not set(ids) & {o.id for o in objs}
    assert sorted(len(tree.leaves_of(o)) for o in objs) == [1] * len(objs)
    assert list(lake.verify()) == []

"""``pool.load(x)`` and ``pool.add(x)`` take one source or a list of them, in process and
through a server alike: a Table is one source (not its columns), a ``Path`` is a path,
a data frame with the Arrow stream interface (a DuckDB relation, an Arrow reader) is
read as Arrow, and anything else is one clear InvalidInputError that changes nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from git_fixtures import lake, lake_path, mode
from lake_modes import reap
from limno import InvalidInputError, Lake
from limno.api.base import Pool

__all__ = ["lake", "lake_path", "mode"]


@pytest.fixture(scope="module", autouse=True)
def _servers_exit() -> Iterator[None]:
    yield
    reap()


@pytest.fixture
def pool(lake: str) -> Pool:
    return Lake.open(lake).create_pool("p", key="k")


def rows(pool: Pool) -> list[tuple[int, str]]:
    got = pool.scan().sort_by("k")
    return list(zip(got["k"].to_pylist(), got["v"].to_pylist(), strict=True))


def table(*keys: int) -> pa.Table:
    return pa.table({"k": pa.array(keys, pa.int64()), "v": [f"v{k}" for k in keys]})


def test_one_table_one_batch_and_lists(pool: Pool) -> None:
    pool.load(table(1, 2))
    pool.load(table(3).to_batches()[0])
    pool.load([table(4), table(5).to_batches()[0]])
    assert rows(pool) == [(k, f"v{k}") for k in range(1, 6)]
    assert len(pool.log()) == 4  # "pool created" and one commit per load


def test_paths_as_path_objects(pool: Pool, tmp_path: Path) -> None:
    one, two = tmp_path / "one.parquet", tmp_path / "two.parquet"
    pq.write_table(table(1), one)
    pq.write_table(table(2), two)
    pool.load(one)
    pool.load([two])
    assert rows(pool) == [(1, "v1"), (2, "v2")]


def test_frames_with_the_arrow_stream_interface(pool: Pool) -> None:
    reader = pa.RecordBatchReader.from_batches(table(2, 1).schema, table(2, 1).to_batches())
    pool.load(reader)  # an Arrow stream, as pandas, Polars and others hand one over
    pool.load(duckdb.sql("SELECT 3::BIGINT AS k, 'v3' AS v"))
    assert rows(pool) == [(1, "v1"), (2, "v2"), (3, "v3")]


def test_add_takes_one_table_too(pool: Pool) -> None:
    staged = pool.add(table(7, 8))
    assert sum(o.rows for o in staged) == 2
    pool.commit()
    assert rows(pool) == [(7, "v7"), (8, "v8")]


@pytest.mark.parametrize("bad", [42, b"/tmp/x.parquet", {"k": [1]}, [table(1), 3.5]])
def test_other_things_are_one_clear_error(pool: Pool, bad: object) -> None:
    before = len(pool.log())
    with pytest.raises(InvalidInputError, match=r"cannot load a (int|bytes|dict|float):"):
        pool.load(bad)
    assert len(pool.log()) == before
    assert pool.scan().num_rows == 0

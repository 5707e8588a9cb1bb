"""A pool's view hands DuckDB the statistics of every object it scans in place.

DuckDB's optimizer orders joins by the column statistics (min/max, nulls) and row
counts of its scans; over several Parquet files it has them only when it reads every
file's footer for them. A snapshot of several objects must plan as one file of the
same rows would (TPC-H Q21 chose a slower join order without them), and past
:data:`~limno.engines.local.STATS_FILES` objects it goes without, with the same answers.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from limno.api.local import LocalLake as Lake
from limno.data.sql_ranges import key_conditions
from limno.engines import local
from limno.engines.local import query
from limno.pools.records.sql_source import snapshot_source


@pytest.fixture
def lake(tmp_path: Path) -> Lake:
    """A pool ``t`` of three non-overlapping objects: ids 0..299, ``v`` = id % 7."""
    lake = Lake.init(str(tmp_path / "lake"))
    lake.create_pool("t", key="id")
    for start in (0, 100, 200):
        ids = list(range(start, start + 100))
        lake.pool("t").load([pa.table({"id": ids, "v": [i % 7 for i in ids]})])
    assert len(snapshot_source(lake.pool("t")).files) == 3
    return lake


def column_stats(lake: Lake, column: str) -> dict[str, object]:
    """DuckDB's statistics of ``column`` of the pool view ``t``, as it plans with them."""
    got = query(lake, f"SELECT CAST(stats({column}) AS JSON) AS s FROM t LIMIT 1")
    parsed: dict[str, object] = json.loads(got.column("s")[0].as_py())
    return parsed


def estimated_rows(lake: Lake) -> str:
    plan = query(lake, "EXPLAIN SELECT * FROM t").column("explain_value")[0].as_py()
    return str(plan)


def test_a_view_over_several_objects_has_their_merged_statistics(lake: Lake) -> None:
    assert column_stats(lake, "id") == {
        "has_no_null": True,
        "has_null": False,
        "min": 0,
        "max": 299,
    }
    assert column_stats(lake, "v")["max"] == 6
    assert "~300 rows" in estimated_rows(lake)  # the exact count, not the first file's x3


def test_a_pruned_view_has_the_statistics_of_what_it_reads(lake: Lake) -> None:
    got = query(lake, "SELECT CAST(stats(id) AS JSON) AS s FROM t WHERE id >= 150 LIMIT 1")
    stats = json.loads(got.column("s")[0].as_py())
    # the two objects that may hold rows give the max; DuckDB narrows the min by the filter
    assert (stats["min"], stats["max"]) == (150, 299)
    pruned = key_conditions("SELECT * FROM t WHERE id >= 150", "t", "id")
    assert len(snapshot_source(lake.pool("t"), conditions=pruned).files) == 2


def test_past_the_limit_the_scan_goes_without_statistics(
    lake: Lake, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(local, "STATS_FILES", 2)
    stats = column_stats(lake, "id")
    assert "min" not in stats and "max" not in stats
    counts = query(lake, "SELECT count(*) AS n, sum(v) AS s FROM t WHERE id BETWEEN 50 AND 249")
    assert counts.to_pylist() == [{"n": 200, "s": sum(i % 7 for i in range(50, 250))}]


def test_a_join_over_views_with_statistics_answers_as_before(lake: Lake) -> None:
    lake.create_pool("u", key="k")
    lake.pool("u").load([pa.table({"k": list(range(0, 300, 3)), "w": ["x"] * 100})])
    lake.pool("u").load([pa.table({"k": list(range(300, 400, 3)), "w": ["y"] * 34})])
    got = query(
        lake,
        "SELECT count(*) AS n FROM t WHERE EXISTS (SELECT 1 FROM u WHERE k = id)"
        " AND NOT EXISTS (SELECT 1 FROM u WHERE k = id + 1)",
    )
    want = sum(1 for i in range(300) if i % 3 == 0 and (i + 1) % 3 != 0)
    assert got.to_pylist() == [{"n": want}]

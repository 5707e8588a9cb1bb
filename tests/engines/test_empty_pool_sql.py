"""SQL over a pool that was created and has nothing loaded yet: an empty table of its
key fields (DuckDB refuses a table without columns: "Provided table/dataframe must
have at least one column")."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from clirunner import ok
from limno.api.local import LocalLake as Lake
from limno.engines.local import query


@pytest.fixture(autouse=True)
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "home" / ".config"))
    monkeypatch.delenv("LIMNO_LAKE", raising=False)
    monkeypatch.delenv("LIMNO_SQL_SAFE", raising=False)


@pytest.mark.parametrize("safe", [False, True])
def test_sql_on_a_pool_with_nothing_loaded(safe: bool, tmp_path: Path) -> None:
    lake = Lake.init(str(tmp_path / "lake"))
    lake.create_pool("p", key="ts")
    count = query(lake, "select count(*) AS n from p", safe=safe)
    assert count.to_pylist() == [{"n": 0}]
    everything = query(lake, "select * from p", safe=safe)
    assert everything.num_rows == 0 and everything.column_names == ["ts"]
    assert query(lake, "select ts from p where ts > 3", safe=safe).num_rows == 0
    # the CLI: as reported
    args = ["--lake", lake.uri, "query"] + (["--safe"] if safe else [])
    assert ok(*args, "select count(*) from p").rows() == [{"count_star()": 0}]
    assert ok(*args, "select * from p").rows() == []
    # once loaded, the pool reads as usual
    lake.pool("p").load([pa.table({"ts": [5], "v": ["a"]})])
    assert query(lake, "select * from p", safe=safe).to_pylist() == [{"ts": 5, "v": "a"}]

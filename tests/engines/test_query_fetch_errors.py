"""A damaged object named while the answer is fetched is still a damaged-object error.

DuckDB reports a page that fails to decode either when the statement runs
(``duckdb.Error``) or, when another thread decodes it first, while pyarrow's batch
reader fetches the answer: then as an ``OSError`` without errno. Both must name the
object (``limno verify --deep``), never surface as an internal error. Which one
happens depends on thread timing, so the fetch is made to fail here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from limno.api import Lake
from limno.engines import local
from limno.errors import DamagedObjectError, InvalidInputError


@pytest.mark.parametrize("safe", [False, True])
def test_a_fetch_error_naming_an_object_is_a_damaged_object(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, safe: bool
) -> None:
    lake = Lake.init(str(tmp_path / "lake"))
    pool = lake.create_pool("logs", key="ts")
    pool.load([pa.table({"ts": [1, 2, 3]})])
    (obj,) = pool.objects()
    path = next((tmp_path / "lake").rglob(f"{obj.id}.parquet"))

    def fetch_fails(*args: Any, **kwargs: Any) -> pa.Table:
        raise OSError(
            f'Invalid Input Error: Failed to read file "{path}": LZ4 decompression failure'
        )

    monkeypatch.setattr(local, "_answer", fetch_fails)
    with pytest.raises(DamagedObjectError) as caught:
        lake.query("SELECT sum(ts) FROM logs", safe=safe)
    assert caught.value.pool == "logs" and obj.id in caught.value.path
    assert "LZ4 decompression failure" in caught.value.reason


def test_a_fetch_error_naming_no_object_is_the_sqls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lake = Lake.init(str(tmp_path / "lake"))
    lake.create_pool("logs", key="ts").load([pa.table({"ts": [1]})])

    def fetch_fails(*args: Any, **kwargs: Any) -> pa.Table:
        raise OSError("Conversion Error: could not convert")

    monkeypatch.setattr(local, "_answer", fetch_fails)
    with pytest.raises(InvalidInputError, match="^SQL: Conversion Error: could not convert$"):
        lake.query("SELECT sum(ts) FROM logs")

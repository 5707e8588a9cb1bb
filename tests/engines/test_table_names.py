"""SQL table names parse alike for every use: a pool snapshot or a meta table."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from limno.api.local import LocalLake as Lake
from limno.engines.local import query_size, resolve_table
from limno.engines.table_names import MetaTableName, PoolTableName, parse_table_name
from limno.errors import InvalidInputError


@pytest.mark.parametrize(
    ("name", "parsed"),
    [
        ("logs", PoolTableName("logs", None)),
        ("logs@dev", PoolTableName("logs", "dev")),
        ("logs@main~2", PoolTableName("logs", "main~2")),
        ("logs:objects", MetaTableName("logs", "objects")),
        ("logs@dev:commits", MetaTableName("logs@dev", "commits")),
        (":pools", MetaTableName("", "pools")),
    ],
)
def test_names_parse(name: str, parsed: object) -> None:
    assert parse_table_name(name) == parsed


def test_a_ref_with_nothing_after_its_at_is_refused() -> None:
    with pytest.raises(InvalidInputError, match="nothing after '@'"):
        parse_table_name("logs@")


def test_engines_read_names_as_parsed(tmp_path: Path) -> None:
    lake = Lake.init(str(tmp_path / "lake"))
    lake.create_pool("logs", key="id")
    lake.pool("logs").load([pa.table({"id": [1, 2, 3]})])
    lake.pool("logs").branch("dev")
    lake.pool("logs").load([pa.table({"id": [4]})], branch="dev")
    assert resolve_table(lake, "logs").num_rows == 3
    assert resolve_table(lake, "logs@dev").num_rows == 4
    commits = resolve_table(lake, "logs:commits").num_rows
    assert resolve_table(lake, "logs@dev:commits").num_rows == commits + 1
    assert resolve_table(lake, ":pools").column("name").to_pylist() == ["logs"]
    assert lake.query('SELECT count(*) AS n FROM "logs@dev"').column("n")[0].as_py() == 4
    objects = lake.query('SELECT count(*) AS n FROM "logs@dev:objects"')
    assert objects.column("n")[0].as_py() == 2
    assert query_size(lake, 'SELECT * FROM ":pools", "logs:objects"') == 0
    assert query_size(lake, 'SELECT * FROM "logs@dev"') > query_size(lake, "SELECT * FROM logs")

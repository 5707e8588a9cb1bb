"""One conformance suite for both engines of ``limno etl``: local (DuckDB) and Spark
(Spark keeps the new and pending records, DuckDB runs the rules). Same answers,
derived by hand. The Spark leg is marked ``spark`` and shares one session."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from etl_support import CONFIG, EXPECTED, batch, records_after
from limno.api.local import LocalLake as Lake
from limno.errors import InvalidInputError
from limno.etl.config import load_config, parse_config
from limno.etl.run import run_etl

ENGINES = ["local", pytest.param("spark", marks=pytest.mark.spark)]


@pytest.fixture(scope="module")
def spark_session() -> Iterator[None]:
    from spark_support import module_session

    for _ in module_session():
        yield


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest) -> str:
    if request.param == "spark":
        request.getfixturevalue("spark_session")
    return str(request.param)


def test_the_demo(engine: str, tmp_path: Path) -> None:
    lake = Lake.init(str(tmp_path / "lake"))
    lake.create_pool("Raw", "kafka.offset")
    config = load_config(CONFIG)
    for n in range(1, len(EXPECTED) + 1):
        lake.pool("Raw").load([batch(n)])
        report = run_etl(lake, config, engine=engine)
        assert report.engine == engine
        assert report.pending == (1 if n == 2 else 0)
        assert lake.pool("Staging").scan().to_pylist() == records_after(n)
    assert run_etl(lake, config, engine=engine).commit is None


PARTITIONED = """
inputs:
  - {topic: orders, pool: raw}
  - {topic: payments, pool: raw}
outputs:
  - {topic: paid, pool: out@dev}
transforms:
  - type: denorm
    left: orders
    right: payments
    join-on: left.value.id = right.value.order_id
    select: |
      left.key AS key, {'id': left.value.id, 'amount': right.value.amount} AS value
    out: paid
  - type: stateless
    in: payments
    where: value.amount > 100
    select: |
      key, {'big': value.amount} AS value
    out: paid
"""
T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def _records(topic: str, rows: list[tuple[int, int, str, dict[str, Any]]]) -> pa.Table:
    return pa.Table.from_pylist(
        [
            {
                "kafka": {"topic": topic, "partition": p, "offset": o, "timestamp": T0},
                "key": k,
                "value": v,
            }
            for p, o, k, v in rows
        ]
    )


def test_partitions_pending_and_order(engine: str, tmp_path: Path) -> None:
    """Two partitions with equal offsets; a payment before its order (pending on the
    right side) and an order whose payment comes two runs later."""
    lake = Lake.init(str(tmp_path / "lake"))
    raw = lake.create_pool("raw", "kafka.offset")
    lake.create_pool("out", "kafka.offset").branch("dev")
    config = parse_config(PARTITIONED, "p.yaml")
    raw.load([_records("orders", [(0, 0, "o1", {"id": 1}), (1, 0, "o2", {"id": 2})])])
    raw.load([_records("payments", [(0, 0, "p9", {"order_id": 3, "amount": 500})])])
    assert run_etl(lake, config, engine=engine).pending == 3
    out = lake.pool("out")
    assert [(r["key"], r["value"]) for r in out.scan("dev").to_pylist()] == [
        ("p9", {"id": None, "amount": None, "big": 500})
    ]
    raw.load([_records("orders", [(1, 1, "o3", {"id": 3})])])
    raw.load([_records("payments", [(1, 0, "p1", {"order_id": 1, "amount": 7})])])
    report = run_etl(lake, config, engine=engine)
    assert report.pending == 1  # o2 waits
    rows = out.scan("dev").to_pylist()
    assert [(r["kafka"]["offset"], r["key"], r["value"]["id"]) for r in rows] == [
        (0, "p9", None),
        # pending first: o1 (orders p0) pairs with the new p1 at p1's place, o3 (new,
        # orders before payments) pairs with pending p9 at o3's place
        (1, "o3", 3),
        (2, "o1", 1),
    ]
    assert all(r["kafka"]["timestamp"] == T0 for r in rows)
    assert lake.pool("out").scan().num_rows == 0  # main untouched: the output is dev


def test_sql_errors_name_the_field(tmp_path: Path) -> None:
    lake = Lake.init(str(tmp_path / "lake"))
    raw = lake.create_pool("raw", "kafka.offset")
    lake.create_pool("out", "kafka.offset").branch("dev")
    raw.load([_records("orders", [(0, 0, "o1", {"id": 1})])])
    raw.load([_records("payments", [(0, 0, "p1", {"order_id": 1, "amount": 1})])])
    bad = PARTITIONED.replace("value.amount > 100", "value.nope > 100")
    with pytest.raises(InvalidInputError, match=r"^p.yaml line 17: transforms\[1\].where: "):
        run_etl(lake, parse_config(bad, "p.yaml"), engine="local")
    bad = PARTITIONED.replace("right.value.order_id", "right.value.nope")
    with pytest.raises(InvalidInputError, match=r"^p.yaml line 11: transforms\[0\].join-on: "):
        run_etl(lake, parse_config(bad, "p.yaml"), engine="local")

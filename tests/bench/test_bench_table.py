"""The bench's tables show every peer a result has, named in PEERS or not."""

from __future__ import annotations

from bench.harness import Result, markdown, table


def test_a_peer_outside_the_known_list_gets_its_column() -> None:
    results = [
        Result("etl_denorm_1m", "events", "events/s", 1.0, {"duckdb-by-hand": 2.0}),
        Result("tpch_load", "rows", "rows/s", 3.0, {"duckdb": 4.0}),
    ]
    head = table(results).splitlines()[0].split()
    assert head == ["benchmark", "metric", "unit", "limno", "duckdb", "duckdb-by-hand", "ratio"]
    assert "| 1.00 | - | 2.00 | 0.50x |" in markdown(results)

"""The TPC-H benchmark: its smoke run at a tiny scale factor, and the answer check it relies on.

``test_tpch_smoke`` runs ``python -m bench --quick --only tpch`` as CI would: tpchgen-cli
generates scale factor 0.01, limno loads it, and the 22 queries run on DuckDB, limno's
API and limno's CLI; the run fails if any answer differs from DuckDB's. The other tests
hold that check to what it must accept (row order, float jitter) and reject.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest
from bench.tpch import check_same
from bench.tpch_queries import queries

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_tpch_smoke(tmp_path: Path) -> None:
    out = tmp_path / "results"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "bench", "--quick", "--only", "tpch", "--repeat", "1"]
    proc = subprocess.run(
        [*cmd, "--out", str(out), "--workdir", str(tmp_path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    # a disagreement between limno and DuckDB fails the run
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "tpch: done" in proc.stderr, proc.stderr[-4000:]
    results = json.loads((out / "latest.json").read_text())
    lines = {(r["benchmark"], r["metric"]): r for r in results}
    ways = ("api", "cli")
    expected = {(f"tpch_q{n:02d}", f"latency_{w}") for n in range(1, 23) for w in ways}
    expected |= {("tpch", f"{m}_{w}") for m in ("sum_of_medians", "geomean") for w in ways}
    expected.add(("tpch_load", "lineitem_throughput"))
    assert set(lines) == expected
    for r in results:
        assert set(r["peers"]) == {"duckdb"}, r
        for value in [r["limno"], *r["peers"].values()]:
            assert isinstance(value, float) and math.isfinite(value) and value > 0, r
    total = lines[("tpch", "sum_of_medians_api")]["limno"]
    per_query = sum(lines[(f"tpch_q{n:02d}", "latency_api")]["limno"] for n in range(1, 23))
    assert math.isclose(total, per_query)
    assert "tpch_q22" in proc.stdout
    assert not list(tmp_path.glob("limno-bench-*")), "the work directory was left behind"


def test_queries_are_the_22_with_q11_scaled() -> None:
    at_sf1, small = queries(1.0), queries(0.01)
    assert sorted(at_sf1) == list(range(1, 23))
    assert "* 0.0001\n" in at_sf1[11] and "* 0.01\n" in small[11]
    assert all(at_sf1[n] == small[n] for n in range(1, 23) if n != 11)


def _table(**columns: list[object]) -> pa.Table:
    return pa.table({name: pa.array(values) for name, values in columns.items()})


def test_check_same_accepts_row_order_and_float_jitter() -> None:
    expected = _table(k=["a", "b", "c"], n=[1, 2, 3], x=[0.1, 1e9, None])
    got = _table(k=["c", "a", "b"], n=[3, 1, 2], x=[None, 0.1 + 1e-12, 1e9 * (1 + 1e-9)])
    check_same(expected, got, "jitter")
    decimals = pa.table({"d": pa.array([Decimal("1.25"), Decimal("3.50")], pa.decimal128(15, 2))})
    as_floats = _table(d=[3.5, 1.25])
    check_same(decimals, as_floats, "decimal against float")


@pytest.mark.parametrize(
    ("got", "reason"),
    [
        (_table(k=["a", "b"], x=[1.0, 2.001]), "row 1"),  # a float beyond the tolerance
        (_table(k=["a", "c"], x=[1.0, 2.0]), "row 1"),  # another string
        (_table(k=["a"], x=[1.0]), "1 rows, expected 2"),
        (_table(k=["a", "b"], y=[1.0, 2.0]), "columns"),
        (_table(k=["a", "b"], x=[1.0, None]), "row 1"),
    ],
)
def test_check_same_rejects_other_answers(got: pa.Table, reason: str) -> None:
    expected = _table(k=["a", "b"], x=[1.0, 2.0])
    with pytest.raises(RuntimeError, match=reason):
        check_same(expected, got, "Q0")

"""TPC-H: the 22 queries through limno (Python API and CLI) beside DuckDB over the same files.

The data is generated with tpchgen-cli (one Parquet file per table; scale factor 1,
0.01 with ``--quick``) and loaded into a lake, one pool per table keyed on the
table's primary key, so that the pool names are the table names and the query
text (:mod:`bench.tpch_queries`) runs unchanged on both systems. DuckDB queries
the generated files through views, in this process. limno answers through
``lake.query(sql)`` in this process and through ``limno query`` in a new process
per query (so the CLI's figure includes its start-up, as a user's would).

Every query's answer is checked before it is timed: limno's (API and CLI) must
equal DuckDB's up to row order and a float tolerance, else the benchmark fails
(a fast wrong answer is no result). Besides the per-query lines, the suite gets
the sum of the medians and the geometric mean of the latencies (whose ratio is
the geometric mean of the per-query ratios), and the load of lineitem beside
DuckDB's sorted copy of the same file.
"""

from __future__ import annotations

import decimal
import math
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

from bench.harness import Config, Result, median, timed
from bench.peers import DUCKDB_CODEC
from bench.tpch_queries import queries

if TYPE_CHECKING:
    from limno import Lake

#: table -> its primary key, the key of its pool
TABLES = {
    "lineitem": "l_orderkey,l_linenumber",
    "orders": "o_orderkey",
    "customer": "c_custkey",
    "part": "p_partkey",
    "partsupp": "ps_partkey,ps_suppkey",
    "supplier": "s_suppkey",
    "nation": "n_nationkey",
    "region": "r_regionkey",
}
#: relative tolerance for floating-point answers (DuckDB's parallel sums of doubles
#: need not add in the same order twice)
FLOAT_TOLERANCE = 1e-6
#: seconds one CLI query may take before the benchmark gives up on it
CLI_TIMEOUT = 1800


def scale_factor(cfg: Config) -> float:
    return 0.01 if cfg.quick else 1.0


def _executable(name: str) -> str | None:
    """``name`` beside this Python (the virtualenv's scripts), else on PATH."""
    beside = Path(sys.executable).parent / name
    if beside.is_file():
        return str(beside)
    return shutil.which(name)


def tpch_missing() -> str | None:
    if _executable("tpchgen-cli") is None:
        return "tpchgen-cli is not installed (pip install -e '.[dev]')"
    if _executable("limno") is None:
        return "the limno command is not installed (pip install -e .)"
    return None


def generate(scale: float, out: Path) -> dict[str, Path]:
    """Generate every table at ``scale`` as ``out/<table>.parquet``; table -> file."""
    exe = _executable("tpchgen-cli")
    if exe is None:
        raise RuntimeError("tpchgen-cli is not installed")
    cmd = [exe, "parquet", "--scale-factor", f"{scale:g}", "--output-dir", str(out), "--quiet"]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {proc.stderr.strip()}")
    files = {table: out / f"{table}.parquet" for table in TABLES}
    missing = [str(f) for f in files.values() if not f.is_file()]
    if missing:
        raise RuntimeError(f"tpchgen-cli wrote no {', '.join(missing)}")
    return files


# -- answers -----------------------------------------------------------------------------


def _is_number(v: object) -> bool:
    return isinstance(v, int | float | decimal.Decimal) and not isinstance(v, bool)


def _sorted_rows(table: pa.Table) -> list[tuple[Any, ...]]:
    """The rows in a canonical order: by the exact columns first, the floating-point ones
    last (so that jitter in a float cannot reorder rows that differ elsewhere)."""
    floats = [pa.types.is_floating(f.type) for f in table.schema]

    def key(row: tuple[Any, ...]) -> tuple[Any, ...]:
        exact = tuple((v is None, v) for v, f in zip(row, floats, strict=True) if not f)
        inexact = tuple(
            (True, 0.0) if v is None or math.isnan(v) else (False, v)
            for v, f in zip(row, floats, strict=True)
            if f
        )
        return exact + inexact

    rows = zip(*(column.to_pylist() for column in table.columns), strict=True)
    return sorted(rows, key=key)


def _same_value(a: Any, b: Any) -> bool:
    if _is_number(a) and _is_number(b):
        if isinstance(a, float) or isinstance(b, float):
            x, y = float(a), float(b)
            return math.isclose(x, y, rel_tol=FLOAT_TOLERANCE, abs_tol=1e-9) or (
                math.isnan(x) and math.isnan(y)
            )
        return bool(a == b)
    return a == b


def check_same(expected: pa.Table, got: pa.Table, what: str) -> None:
    """Raise unless ``got`` holds the rows of ``expected`` (any order; floats close)."""
    if got.column_names != expected.column_names:
        raise RuntimeError(f"{what}: columns {got.column_names}, expected {expected.column_names}")
    if got.num_rows != expected.num_rows:
        raise RuntimeError(f"{what}: {got.num_rows} rows, expected {expected.num_rows}")
    want, have = _sorted_rows(expected), _sorted_rows(got)
    for i, (w, h) in enumerate(zip(want, have, strict=True)):
        if not all(_same_value(x, y) for x, y in zip(w, h, strict=True)):
            raise RuntimeError(f"{what}: row {i} (sorted) is {h}, expected {w}")


# -- the systems -------------------------------------------------------------------------


class DuckFiles:
    """DuckDB over the generated files: one view per table, one connection."""

    def __init__(self, files: dict[str, Path]) -> None:
        import duckdb

        self.con = duckdb.connect()
        for table, path in files.items():
            self.con.execute(
                f"CREATE VIEW {table} AS SELECT * FROM read_parquet('{_quoted(path)}')"
            )

    def query(self, sql: str) -> pa.Table:
        return self.con.sql(sql).to_arrow_table()

    def close(self) -> None:
        self.con.close()


def _quoted(path: Path) -> str:
    return str(path).replace("'", "''")


def cli_query(lake: Path, sql: str) -> pa.Table:
    """``limno --lake LAKE query --engine local -f arrow SQL`` in a new process."""
    exe = _executable("limno")
    assert exe is not None
    cmd = [exe, "--lake", str(lake), "query", "--engine", "local", "-f", "arrow", sql]
    proc = subprocess.run(cmd, capture_output=True, check=False, timeout=CLI_TIMEOUT)
    if proc.returncode != 0:
        stderr = proc.stderr.decode(errors="replace").strip()
        raise RuntimeError(f"limno query exited with {proc.returncode}: {stderr[-2000:]}")
    return ipc.open_stream(proc.stdout).read_all()


def duckdb_sorted_copy(source: Path, key: str, out: Path) -> None:
    """DuckDB's sorted rewrite of one Parquet file (all cores, limno's codec)."""
    import duckdb

    con = duckdb.connect()
    try:
        con.execute(
            f"COPY (SELECT * FROM read_parquet('{_quoted(source)}') ORDER BY {key})"
            f" TO '{_quoted(out)}' (FORMAT parquet, COMPRESSION {DUCKDB_CODEC})"
        )
    finally:
        con.close()


def _load_pool(lake: Lake, table: str, source: Path) -> None:
    lake.create_pool(table, key=TABLES[table]).load([str(source)])


def load(cfg: Config, files: dict[str, Path], root: Path) -> tuple[Path, Result]:
    """Load every table into a new lake at ``root/lake``; the lineitem load's Result.

    lineitem is loaded ``cfg.repeat`` times (the first into the benchmark's lake,
    the others into scratch lakes), and DuckDB sorts the same file by the same key
    into one Parquet file as many times.
    """
    from limno import Lake

    lake_path = root / "lake"
    lake = Lake.init(str(lake_path))
    limno_times = [timed(partial(_load_pool, lake, "lineitem", files["lineitem"]))]
    for table in TABLES:
        if table != "lineitem":
            _load_pool(lake, table, files[table])
    duck_times = []
    for rep in range(cfg.repeat):
        out = root / f"duck-lineitem-{rep}.parquet"
        try:
            duck_times.append(
                timed(partial(duckdb_sorted_copy, files["lineitem"], TABLES["lineitem"], out))
            )
        finally:
            out.unlink(missing_ok=True)
        if rep == 0:
            continue
        scratch = root / f"load-{rep}"
        try:
            scratch_lake = Lake.init(str(scratch))
            limno_times.append(
                timed(partial(_load_pool, scratch_lake, "lineitem", files["lineitem"]))
            )
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    rows = pq.ParquetFile(files["lineitem"]).metadata.num_rows
    result = Result(
        "tpch_load",
        "lineitem_throughput",
        "rows/s",
        rows / median(limno_times),
        {"duckdb": rows / median(duck_times)},
        True,
        note="limno: create_pool + load of lineitem.parquet; duckdb: COPY ... ORDER BY key",
    )
    return lake_path, result


# -- the benchmark -----------------------------------------------------------------------


def _timed_answer(fn: Callable[[str], pa.Table], sql: str, answers: list[pa.Table]) -> float:
    def once() -> None:
        answers.append(fn(sql))

    return timed(once)


def run_queries(
    cfg: Config, duck: DuckFiles, api: Callable[[str], pa.Table], cli: Callable[[str], pa.Table]
) -> dict[int, dict[str, float]]:
    """Query number -> system -> median seconds; every answer checked against DuckDB's."""
    systems = {"duckdb": duck.query, "api": api, "cli": cli}
    medians: dict[int, dict[str, float]] = {}
    for number, sql in selected(queries(scale_factor(cfg))).items():
        expected = duck.query(sql)  # a warm-up run for each system, its answer checked
        check_same(expected, api(sql), f"TPC-H Q{number}: limno API against DuckDB")
        check_same(expected, cli(sql), f"TPC-H Q{number}: limno CLI against DuckDB")
        times: dict[str, list[float]] = {name: [] for name in systems}
        for _ in range(cfg.repeat):  # systems interleaved, so noise hits them alike
            for name, fn in systems.items():
                answers: list[pa.Table] = []
                times[name].append(_timed_answer(fn, sql, answers))
                if name != "duckdb":
                    check_same(expected, answers[0], f"TPC-H Q{number}: limno {name}")
        medians[number] = {name: median(values) for name, values in times.items()}
    return medians


def selected(all_queries: dict[int, str]) -> dict[int, str]:
    """The queries to run: those ``LIMNO_TPCH_QUERIES`` lists (``4,21``), else all 22
    (the sums and geometric means are then over the queries run)."""
    wanted = os.environ.get("LIMNO_TPCH_QUERIES", "").strip()
    if not wanted:
        return all_queries
    numbers = [int(n) for n in wanted.split(",") if n.strip()]
    unknown = sorted(set(numbers) - set(all_queries))
    if unknown:
        raise ValueError(f"LIMNO_TPCH_QUERIES: no TPC-H query {unknown} (1-22)")
    return {n: all_queries[n] for n in sorted(set(numbers))}


def results(medians: dict[int, dict[str, float]]) -> list[Result]:
    """Per-query lines, then the sums and geometric means, for the API and the CLI."""
    out = []
    for number, by_system in medians.items():
        for system in ("api", "cli"):
            out.append(
                Result(
                    f"tpch_q{number:02d}",
                    f"latency_{system}",
                    "s",
                    by_system[system],
                    {"duckdb": by_system["duckdb"]},
                    False,
                )
            )
    for system in ("api", "cli"):
        mine = [m[system] for m in medians.values()]
        duck = [m["duckdb"] for m in medians.values()]
        out.append(
            Result(
                "tpch",
                f"sum_of_medians_{system}",
                "s",
                sum(mine),
                {"duckdb": sum(duck)},
                False,
            )
        )
        out.append(
            Result(
                "tpch",
                f"geomean_{system}",
                "s",
                _geomean(mine),
                {"duckdb": _geomean(duck)},
                False,
                note="its ratio is the geometric mean of the per-query ratios",
            )
        )
    return out


def _geomean(values: Sequence[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def tpch(cfg: Config) -> list[Result]:
    """Generate, load, then the 22 queries on DuckDB, limno's API and limno's CLI."""
    from limno import Lake

    root = cfg.workdir / "tpch"
    try:
        files = generate(scale_factor(cfg), root / "data")
        lake_path, load_result = load(cfg, files, root)
        lake = Lake.open(str(lake_path))
        duck = DuckFiles(files)
        try:
            medians = run_queries(cfg, duck, lake.query, partial(cli_query, lake_path))
        finally:
            duck.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return [load_result, *results(medians)]

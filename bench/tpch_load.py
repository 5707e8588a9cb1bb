"""tpch_load: the load of TPC-H lineitem beside DuckDB's sorted copy of the same file, alone.

The ``tpch`` benchmark times this load too, amid generating eight tables and running
22 queries three ways; this one generates lineitem only (tpchgen-cli, scale factor 1,
0.01 with ``--quick``) and times the two systems interleaved, repetition by
repetition, so that both meet the same machine: limno's ``create_pool`` + ``load``
into a new lake, and DuckDB's ``COPY (SELECT * ... ORDER BY key) TO parquet`` with
limno's codec (:func:`bench.tpch.duckdb_sorted_copy`), each in this process.

Besides rows per second it reports the CPU seconds (user + system of this process)
each system spent. On a shared machine whose scheduler gives every session an equal
share of the cores (Linux autogroup, as on the development machine), a busy machine
hands each process the same slice whatever its number of threads, so the ratio of
wall times under load tends to the ratio of CPU times; on a quiet machine it is the
CPU time divided by how well each system keeps the cores busy.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq

from bench.harness import Config, Result, median
from bench.tpch import TABLES, _executable, duckdb_sorted_copy, scale_factor

__all__ = ["cpu_seconds", "tpch_load", "tpch_load_missing"]


def tpch_load_missing() -> str | None:
    if _executable("tpchgen-cli") is None:
        return "tpchgen-cli is not installed (pip install -e '.[dev]')"
    return None


def generate_lineitem(scale: float, out: Path) -> Path:
    """``out/lineitem.parquet`` at ``scale``, as the ``tpch`` benchmark generates it."""
    exe = _executable("tpchgen-cli")
    if exe is None:
        raise RuntimeError("tpchgen-cli is not installed")
    cmd = [exe, "parquet", "--scale-factor", f"{scale:g}", "--tables", "lineitem"]
    cmd += ["--output-dir", str(out), "--quiet"]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    path = out / "lineitem.parquet"
    if proc.returncode != 0 or not path.is_file():
        raise RuntimeError(f"{' '.join(cmd)} failed: {proc.stderr.strip()}")
    return path


def cpu_seconds() -> float:
    """User + system CPU seconds this process has spent (every thread), to the
    nanosecond (``os.times`` counts in 10 ms ticks: a quick run's write would read 0)."""
    return time.process_time()


def wall_and_cpu(fn: Callable[[], object]) -> tuple[float, float]:
    """Seconds ``fn`` took, and the CPU seconds this process spent meanwhile."""
    cpu, start = cpu_seconds(), time.perf_counter()
    fn()
    return time.perf_counter() - start, cpu_seconds() - cpu


def tpch_load(cfg: Config) -> list[Result]:
    """lineitem loaded by limno and sorted by DuckDB, interleaved ``cfg.repeat`` times."""
    from limno import Lake

    root = cfg.workdir / "tpch-load"
    key = TABLES["lineitem"]
    walls: dict[str, list[float]] = {"limno": [], "duckdb": []}
    cpus: dict[str, list[float]] = {"limno": [], "duckdb": []}
    try:
        source = generate_lineitem(scale_factor(cfg), root / "data")
        for rep in range(cfg.repeat):
            lake, copy = root / f"lake-{rep}", root / f"duck-{rep}.parquet"

            def limno(lake: Path = lake) -> None:
                Lake.init(str(lake)).create_pool("lineitem", key=key).load([str(source)])

            def duck(copy: Path = copy) -> None:
                duckdb_sorted_copy(source, key, copy)

            for name, fn in (("limno", limno), ("duckdb", duck)):
                try:
                    wall, cpu = wall_and_cpu(fn)
                finally:
                    shutil.rmtree(lake, ignore_errors=True)
                    copy.unlink(missing_ok=True)
                walls[name].append(wall)
                cpus[name].append(cpu)
        rows = pq.ParquetFile(source).metadata.num_rows
    finally:
        shutil.rmtree(root, ignore_errors=True)
    note = "limno: create_pool + load of lineitem.parquet; duckdb: COPY ... ORDER BY key"
    return [
        Result(
            "tpch_load",
            "load_only_throughput",
            "rows/s",
            rows / median(walls["limno"]),
            {"duckdb": rows / median(walls["duckdb"])},
            True,
            note=note + "; interleaved, nothing else running in the benchmark",
        ),
        Result(
            "tpch_load",
            "load_only_cpu",
            "s",
            median(cpus["limno"]),
            {"duckdb": median(cpus["duckdb"])},
            False,
            note="CPU seconds (user + system) of the load; under load the wall ratio tends"
            " to this ratio",
        ),
    ]

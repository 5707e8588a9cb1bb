"""``index_lookup``: a lookup by an indexed non-key field, against DuckDB's filter.

10M rows in 50 objects sorted by ``k`` (the read benchmarks' shape); the looked-up
field is ``s``, a random string of about 10M distinct values uncorrelated with the
key, so no object's min/max statistics can rule a value out. limno answers
``pool.search("s", [value])`` from its search index (one sidecar per object: a probe
reads a footer and one small row group of each, then one row group of the object
that holds the value); DuckDB answers ``SELECT * FROM t WHERE s = ?`` over the very
same Parquet files, with its own statistics, pushdown and threads. Latency
percentiles over all lookups of all repetitions, ms; plus the index build (``limno
index create``) in rows per second, which has no peer.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from functools import partial

import pyarrow as pa
import pyarrow.compute as pc

from bench import peers
from bench.data import parts, rows_table, sample_keys
from bench.harness import Config, Result, Skipped, percentile, timed

__all__ = ["index_lookup"]


def index_lookup(cfg: Config) -> list[Result]:
    """p50 and p99 of a lookup by an indexed non-key field (ms), and the index build."""
    from limno.api.local import LocalLake
    from limno.data.objects import data_path

    rows = cfg.rows(10_000_000, 100_000)
    objects = 50
    table = rows_table(rows, shuffled=False)
    lake = LocalLake.init(str(cfg.workdir / "index-lookup" / "limno"))
    pool = lake.create_pool("b", key="k")
    for piece in parts(table, objects):
        pool.load([piece])
    if len(pool.objects()) != objects:
        raise RuntimeError(f"expected {objects} objects, got {len(pool.objects())}")
    build = timed(lambda: pool.create_index(["s"]))
    lookups = 30 if cfg.quick else 100
    column = table.column("s")
    values = [column[i].as_py() for i in sample_keys(rows, lookups, seed=31)]
    expected = {v: int(pc.sum(pc.equal(column, v)).as_py()) for v in values}
    del table, column
    systems: dict[str, Callable[[str], pa.Table]] = {"limno": lambda v: pool.search("s", [v])}
    duck = None
    if "duckdb" in peers.table_peers():
        files = []
        for o in pool.objects():
            local = pool.storage.local_path(data_path(pool.id, o.id))
            assert local is not None
            files.append(local)
        duck = peers.DuckReader(files)
        con = duck.con
        systems["duckdb"] = lambda v: con.sql(
            "SELECT * FROM t WHERE s = $1", params=[v]
        ).to_arrow_table()
    try:
        p50: dict[str, float] = {}
        p99: dict[str, float] = {}
        for name, lookup in systems.items():
            for v in values[:10]:  # warm up: imports and caches every system keeps
                lookup(v)
            latencies = []
            gc.collect()
            for _ in range(cfg.repeat):
                for v in values:
                    latencies.append(timed(partial(_check, lookup, v, expected[v], name), False))
            p50[name] = percentile(latencies, 50) * 1000
            p99[name] = percentile(latencies, 99) * 1000
    finally:
        if duck is not None:
            duck.close()
    if not p50:
        raise Skipped("no system could run")
    limno50, limno99 = p50.pop("limno"), p99.pop("limno")
    note = f"{rows:,} rows in {objects} objects; a random string field, indexed"
    return [
        Result("index_lookup_p50", "latency", "ms", limno50, p50, False, note),
        Result("index_lookup_p99", "latency", "ms", limno99, p99, False, note),
        Result("index_create", "throughput", "rows/s", rows / build, {}, True, note),
    ]


def _check(lookup: Callable[[str], pa.Table], value: str, rows: int, system: str) -> None:
    found = lookup(value)
    if found.num_rows != rows:
        raise RuntimeError(f"{system} found {found.num_rows} rows of s = {value!r}, not {rows}")

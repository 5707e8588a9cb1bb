"""The benchmarks. Each takes a :class:`Config` and returns :class:`Result` lines.

Every benchmark gives limno and each available peer the same generated input and
reports the median of ``cfg.repeat`` repetitions. A benchmark that cannot run here
raises :class:`Skipped` with the reason; the suite prints it and goes on.

Extension points: a new benchmark is a function registered in :data:`BENCHMARKS`
(name, function, a check that says why it cannot run, or None). Compaction (issue 5)
and the Spark benchmarks (issue 6) are registered already and run as soon as the API
they need exists.
"""

from __future__ import annotations

import datetime as dt
import gc
import importlib
import importlib.util
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pyarrow as pa

from bench import memory, peers
from bench.cdc import cdc_lag, cdc_missing
from bench.cli_start import cli_start
from bench.data import parts, rows_table, sample_keys
from bench.etl import etl_denorm_1m, etl_denorm_1m_spark, etl_incremental_1k
from bench.files import (
    files_commit_100k,
    files_diff_1k_of_1m,
    files_list_1m,
    files_merge_1k_of_1m,
)
from bench.gateway import gateway_get_64mb, gateway_put_64mb, gateway_small_put_p50
from bench.harness import Config, Result, Skipped, median, percentile, timed
from bench.indexes import index_lookup
from bench.kafka import kafka_from, kafka_missing, kafka_to
from bench.kafka_avro import kafka_from_avro
from bench.kafka_connect import kafka_from_connect
from bench.server import server
from bench.spark_streaming import spark_streaming, spark_streaming_missing
from bench.systems import SYSTEMS, available, ingest
from bench.tpch import tpch, tpch_missing
from bench.tpch_load import cpu_seconds, tpch_load, tpch_load_missing
from bench.ui import ui_record_pages
from bench.ui_pages import ui_pages

# -- ingest ------------------------------------------------------------------------------


def ingest_sorted(cfg: Config) -> list[Result]:
    """5M unsorted rows to key-sorted storage; rows/s. Plus peak memory, in subprocesses."""
    rows = cfg.rows(5_000_000, 50_000)
    data = rows_table(rows).combine_chunks()
    systems = [s for s in SYSTEMS if available(s) is None]
    sorted_rate: dict[str, float] = {}
    unsorted_rate: dict[str, float] = {}
    unsorted_cpu: dict[str, float] = {}  # CPU seconds of one write: load-independent
    n = 0
    for system in systems:
        for sort, rates in ((True, sorted_rate), (False, unsorted_rate)):
            if not sort and system == "limno":
                continue  # limno always sorts: its one figure stands in both lines
            cpus: list[float] = []

            def once(system: str = system, sort: bool = sort, cpus: list[float] = cpus) -> float:
                nonlocal n
                n += 1
                root = cfg.workdir / f"ingest-{n}"
                try:
                    gc.collect()
                    cpu = cpu_seconds()
                    wall = timed(lambda: ingest(system, data, root, sort=sort), False)
                    cpus.append(cpu_seconds() - cpu)
                    return rows / wall
                finally:
                    shutil.rmtree(root, ignore_errors=True)

            rates[system] = median(once() for _ in range(cfg.repeat))
            if (not sort or system == "limno") and median(cpus) > 0:
                unsorted_cpu[system] = median(cpus)
    limno = sorted_rate.pop("limno")
    limno_cpu = unsorted_cpu.pop("limno", 0.0)
    out = [
        Result("ingest_sorted", "throughput", "rows/s", limno, sorted_rate, True),
        Result(
            "ingest_sorted",
            "throughput_vs_unsorted_writes",
            "rows/s",
            limno,
            unsorted_rate,
            True,
            note="limno sorts; the peers write the input as it is (no sort)",
        ),
    ]
    if limno_cpu > 0:
        out.append(
            Result(
                "ingest_sorted",
                "cpu_vs_unsorted_writes",
                "s",
                limno_cpu,
                unsorted_cpu,
                False,
                note="CPU seconds (user + system) of one write; limno sorts, the peers do not",
            )
        )
    peaks = {}
    for system in systems:
        root = cfg.workdir / f"memory-{system}"
        try:
            runs = 1 if cfg.quick else 3  # a fresh process each: the median of 3
            peaks[system] = median(memory.measure(system, rows, root / str(i)) for i in range(runs))
        finally:
            shutil.rmtree(root, ignore_errors=True)
    limno_peak = peaks.pop("limno")
    out.append(Result("ingest_sorted", "peak_memory", "MB", limno_peak, peaks, False))
    return out


# -- small commits -----------------------------------------------------------------------


def small_commits(cfg: Config) -> list[Result]:
    """1,000-row appends, each its own commit; commits/s (1 / median time of one).

    Peers: the table formats (delta-rs, pyiceberg). DuckDB and plain pyarrow have no
    commits to compare with.
    """
    count = 10 if cfg.quick else 50
    batches = [rows_table(1000, start=i * 1000) for i in range(count)]
    root = cfg.workdir / "commits"
    rates: dict[str, float] = {}
    try:
        for system in ["limno", *peers.table_peers(include_duckdb=False, include_pyarrow=False)]:
            where = root / system
            append = _appender(system, where, batches[0].schema)
            append(batches[0])  # the first commit creates the table: not measured
            times = [timed(partial(append, b)) for b in batches[1:]]
            rates[system] = 1 / median(times)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    limno = rates.pop("limno")
    return [
        Result(
            "small_commits",
            "throughput",
            "commits/s",
            limno,
            rates,
            True,
        )
    ]


def _appender(system: str, root: Path, schema: pa.Schema) -> Callable[[pa.Table], None]:
    if system == "limno":
        from limno.lake import Lake

        pool = Lake.init(str(root)).create_pool("b", key="k")
        return lambda t: None if pool.load([t]) is None else None
    if system == "delta-rs":
        first = [True]

        def delta(t: pa.Table) -> None:
            peers.delta_write(root, t, mode="error" if first[0] else "append")
            first[0] = False

        return delta
    if system == "pyiceberg":
        ice = peers.Iceberg(root, schema)
        return ice.append
    raise ValueError(system)


# -- reads: point lookups and range scans ---------------------------------------------------


@dataclass
class ReadSetup:
    """The same sorted rows stored by every system as ``objects`` non-overlapping objects."""

    rows: int
    objects: int
    readers: dict[str, Any]


_read_setup: dict[Path, ReadSetup] = {}


def read_setup(cfg: Config) -> ReadSetup:
    """Build (once per run) 10M rows in 50 objects for limno and every peer."""
    if cfg.workdir in _read_setup:
        return _read_setup[cfg.workdir]
    rows = cfg.rows(10_000_000, 100_000)
    objects = 50
    sorted_rows = rows_table(rows, shuffled=False)
    pieces = parts(sorted_rows, objects)
    root = cfg.workdir / "reads"
    readers: dict[str, Any] = {}

    from limno.data.objects import data_path
    from limno.lake import Lake

    pool = Lake.init(str(root / "limno")).create_pool("b", key="k")
    for piece in pieces:  # one load per object: 50 sorted, non-overlapping objects
        pool.load([piece])
    objs = pool.objects()
    if len(objs) != objects:
        raise RuntimeError(f"expected {objects} limno objects, got {len(objs)}")
    readers["limno"] = pool
    files = []
    for o in objs:
        local = pool.storage.local_path(data_path(pool.id, o.id))
        assert local is not None
        files.append(local)
    available_peers = peers.table_peers()
    if "duckdb" in available_peers:
        readers["duckdb"] = peers.DuckReader(files)  # DuckDB over limno's own files
    if "pyarrow" in available_peers:
        where = root / "pyarrow"
        where.mkdir(parents=True)
        for i, piece in enumerate(pieces):
            peers.pyarrow_write(piece, where / f"part-{i:04d}.parquet")
        readers["pyarrow"] = peers.ArrowReader(where)
    if "delta-rs" in available_peers:
        where = root / "delta"
        for i, piece in enumerate(pieces):
            peers.delta_write(where, piece, mode="error" if i == 0 else "append")
        readers["delta-rs"] = peers.DeltaReader(where)
    if "pyiceberg" in available_peers:
        ice = peers.Iceberg(root / "iceberg", sorted_rows.schema)
        for piece in pieces:
            ice.append(piece)
        ice.refresh()
        readers["pyiceberg"] = ice
    setup = ReadSetup(rows, objects, readers)
    _read_setup[cfg.workdir] = setup
    return setup


def point_lookup(cfg: Config) -> list[Result]:
    """``get`` of one random key over 10M rows in 50 objects; p50 and p99 latency, ms."""
    setup = read_setup(cfg)
    lookups = 30 if cfg.quick else 100
    keys = sample_keys(setup.rows, lookups)
    p50: dict[str, float] = {}
    p99: dict[str, float] = {}
    for name, reader in setup.readers.items():
        get = _getter(name, reader)
        for k in keys[:10]:  # warm up: imports, caches every system keeps across calls
            get(k)
        latencies = []
        gc.collect()
        for _ in range(cfg.repeat):
            for k in keys:
                latencies.append(timed(partial(_expect, get, (k,), 1, name), False) * 1000)
        p50[name] = percentile(latencies, 50)
        p99[name] = percentile(latencies, 99)
    limno50, limno99 = p50.pop("limno"), p99.pop("limno")
    return [
        Result("point_lookup_p50", "latency", "ms", limno50, p50, False),
        Result("point_lookup_p99", "latency", "ms", limno99, p99, False),
    ]


def _getter(name: str, reader: Any) -> Callable[[int], pa.Table]:
    if name == "limno":
        return lambda k: reader.get([k])
    return reader.get  # type: ignore[no-any-return,unused-ignore]


def range_scan(cfg: Config) -> list[Result]:
    """A sorted scan of 1% of the key space; rows/s."""
    setup = read_setup(cfg)
    width = setup.rows // 100
    starts = sample_keys(setup.rows - width, max(cfg.repeat, 3), seed=99)
    rates: dict[str, float] = {}
    for name, reader in setup.readers.items():
        scan = _scanner(name, reader)
        scan(starts[0], starts[0] + width)  # warm up
        times = [
            timed(partial(_expect, scan, (s, s + width), width, name, ordered=True)) for s in starts
        ]
        rates[name] = width / median(times)
    limno = rates.pop("limno")
    return [Result("range_scan", "throughput", "rows/s", limno, rates, True)]


def _scanner(name: str, reader: Any) -> Callable[[int, int], pa.Table]:
    if name == "limno":
        return lambda lo, hi: reader.scan(start=lo, end=hi)
    return reader.range  # type: ignore[no-any-return,unused-ignore]


def _extend(into: list[Any], fn: Callable[..., list[Any]], *args: Any) -> None:
    into.extend(fn(*args))


def _expect(
    fn: Callable[..., pa.Table],
    args: tuple[Any, ...],
    rows: int,
    system: str,
    ordered: bool = False,
) -> None:
    _check_rows(fn(*args), rows, system, ordered)


def _check_rows(table: pa.Table, rows: int, system: str, ordered: bool = False) -> None:
    if table.num_rows != rows:
        raise RuntimeError(f"{system} returned {table.num_rows} rows, expected {rows}")
    if ordered and rows > 1:
        k = table.column("k").to_numpy()
        if not bool((k[1:] > k[:-1]).all()):
            raise RuntimeError(f"{system} returned rows out of key order")


# -- compaction (issue 5) ------------------------------------------------------------------


def compaction_missing() -> str | None:
    from limno.pools.records.pool import RecordPool

    if not hasattr(RecordPool, "compact"):
        return "RecordPool has no compact() yet (issue 5)"
    return None


def compaction(cfg: Config) -> list[Result]:
    """10 overlapping objects, 5M rows, compacted into sorted non-overlapping ones; rows/s.

    Peers: DuckDB's sort of the same files into one file, pyarrow's read + sort +
    write, and delta-rs's ``optimize.z_order`` on one column (a sort) of the same rows.
    """
    from limno.data.objects import data_path
    from limno.lake import Lake

    rows = cfg.rows(5_000_000, 50_000)
    pieces = parts(rows_table(rows), 10)  # shuffled keys: every piece spans the key space
    rates: dict[str, float] = {}
    limno_times, duck_times, arrow_times, delta_times = [], [], [], []
    for rep in range(cfg.repeat):
        root = cfg.workdir / f"compaction-{rep}"
        try:
            pool = Lake.init(str(root / "limno")).create_pool("b", key="k")
            for piece in pieces:
                pool.load([piece])
            files = []
            for o in pool.objects():
                local = pool.storage.local_path(data_path(pool.id, o.id))
                assert local is not None
                files.append(local)
            if "duckdb" in peers.table_peers():
                import duckdb

                out = root / "duck.parquet"
                listed = ", ".join(f"'{f}'" for f in files)

                def duck(listed: str = listed, out: Path = out) -> None:
                    con = duckdb.connect()
                    con.execute(
                        f"COPY (SELECT * FROM read_parquet([{listed}]) ORDER BY k) TO '{out}'"
                        f" (FORMAT parquet, COMPRESSION {peers.DUCKDB_CODEC})"
                    )
                    con.close()

                duck_times.append(timed(duck))

            def arrow(files: list[str] = files, root: Path = root) -> None:
                import pyarrow.parquet as pq

                table = pa.concat_tables([pq.read_table(f) for f in files]).sort_by("k")
                peers.pyarrow_write(table, root / "arrow.parquet")

            arrow_times.append(timed(arrow))
            if "delta-rs" in peers.table_peers():
                from deltalake import DeltaTable

                where = root / "delta"
                for i, piece in enumerate(pieces):
                    peers.delta_write(where, piece, mode="error" if i == 0 else "append")
                delta_times.append(timed(partial(_z_order, DeltaTable(str(where)))))
            limno_times.append(timed(pool.compact))
        finally:
            shutil.rmtree(root, ignore_errors=True)
    if duck_times:
        rates["duckdb"] = rows / median(duck_times)
    if delta_times:
        rates["delta-rs"] = rows / median(delta_times)
    rates["pyarrow"] = rows / median(arrow_times)
    return [Result("compaction", "throughput", "rows/s", rows / median(limno_times), rates, True)]


# -- git operations (issue 4) ------------------------------------------------------------------


def git_missing() -> str | None:
    from limno.pools.records.pool import RecordPool

    missing = [m for m in ("branch", "diff", "merge") if not hasattr(RecordPool, m)]
    if missing:
        return f"RecordPool has no {', '.join(missing)}() yet (issue 4)"
    return None


def _fake_actions(first: int, count: int) -> list[Any]:
    """``count`` add actions of made-up objects (nothing written: metadata only)."""
    from limno.core.commits import Action
    from limno.data.objects import DataObject, schema_to_b64
    from limno.ksuid import ksuid

    schema = schema_to_b64(rows_table(1).schema)
    created = dt.datetime.now(dt.UTC).isoformat()
    out = []
    for i in range(first, first + count):
        obj = DataObject(
            id=ksuid(),
            rows=1000,
            size=50_000,
            min_key=(i * 1000,),
            max_key=(i * 1000 + 999,),
            schema_b64=schema,
            key_types=("int64",),
            created=created,
        )
        out.append(Action("add", obj.id, obj.to_json()))
    return out


def git_operations(cfg: Config) -> list[Result]:
    """branch_create, head_open, diff_100 and merge_100 on pools of 100 and 100,000 objects.

    The big pool holds 100,000 objects committed over 10,000 commits, the small one
    100 objects over 100 commits. Both are built cheaply: its objects are metadata committed with
    ``pool.versioned.commit`` (no Parquet is written; these operations never open
    data). ``head_open`` opens the lake and the pool and reads the head commit of
    ``main``; ``diff_100`` compares ``main`` with a branch that added 100 objects;
    ``merge_100`` merges such a branch into ``main`` after ``main`` moved (a true
    three-way merge, no fast-forward). No peer has branches, so there are no peer
    figures: compare the two sizes.
    """
    from limno.lake import Lake

    sizes = (100, 1_000) if cfg.quick else (100, 100_000)
    reps = max(cfg.repeat, 5)
    figures: dict[str, dict[int, float]] = {}
    for size in sizes:
        root = cfg.workdir / f"git-{size}"
        try:
            pool = Lake.init(str(root)).create_pool("b", key="k")
            # history as the issue states it: 100,000 objects over 10,000 commits (the
            # small pool: one object per commit)
            commits = min(size, 10_000)
            batch = size // commits
            for first in range(0, size, batch):
                pool.versioned.commit("main", _fake_actions(first, min(batch, size - first)))
            # then an ordinary small commit: the head is not one of the bulk commits
            pool.versioned.commit("main", _fake_actions(size, 1))
            next_key = size + 1
            bc = [timed(partial(pool.branch, f"bc-{i}", "main"), False) for i in range(reps)]

            def head_open(root: Path = root) -> None:
                p = Lake.open(str(root)).pool("b")
                p.versioned.commits.get(p.resolve("main"))

            ho = [timed(head_open, False) for _ in range(reps)]
            diffs, merges = [], []
            for i in range(reps):
                branch = f"work-{i}"
                pool.branch(branch, "main")
                pool.versioned.commit(branch, _fake_actions(next_key, 100))
                next_key += 100
                changed: list[Any] = []
                diffs.append(timed(partial(_extend, changed, pool.diff, "main", branch)))
                if len(changed) != 100:
                    raise RuntimeError(f"diff_100 found {len(changed)} changes, expected 100")
                pool.versioned.commit("main", _fake_actions(next_key, 1))
                next_key += 1
                merges.append(timed(partial(pool.merge, branch, into="main")))
            for name, times in (
                ("branch_create", bc),
                ("head_open", ho),
                ("diff_100", diffs),
                ("merge_100", merges),
            ):
                figures.setdefault(name, {})[size] = median(times) * 1000
        finally:
            shutil.rmtree(root, ignore_errors=True)
    out = []
    for name, by_size in figures.items():
        for size, ms in by_size.items():
            out.append(Result(name, f"latency_{size}_objects", "ms", ms, {}, False))
    return out


# -- Spark (issue 6) ---------------------------------------------------------------------------


def spark_missing() -> str | None:
    if importlib.util.find_spec("pyspark") is None:
        return "pyspark is not installed"
    if shutil.which("java") is None:
        return "no java on PATH"
    try:
        module = importlib.import_module("limno.engines.spark")
    except Exception as e:  # an engine in progress may not import yet
        return f"limno.engines.spark does not import ({type(e).__name__}: {e})"
    missing = [f for f in ("session", "write", "query") if not hasattr(module, f)]
    if missing:
        return f"limno.engines.spark has no {', '.join(missing)}() yet (issue 6)"
    return None


def spark(cfg: Config) -> list[Result]:
    """Bulk import of 20M rows into a pool vs Spark's own range-sorted Parquet write
    (rows/s), and one aggregation query over each (s)."""
    from pyspark.sql import functions as F

    from limno.engines import spark as ls
    from limno.lake import Lake

    rows = cfg.rows(20_000_000, 200_000)
    # 4 GB of driver heap (the default is 1 GB): the 20M cached rows and the sorts of
    # both writers share it, and with 1 GB a sort could run out of execution memory
    session = ls.session(conf={"spark.driver.memory": "4g"}, remote=False)  # needs sparkContext
    # deterministic rows made in Spark: k is a permutation of 0..rows-1 (a multiplier
    # coprime with rows), the other columns hash k
    mult = 1_000_003
    while _gcd(mult, rows) != 1:
        mult += 2
    df = session.range(rows).select(
        ((F.col("id") * mult) % rows).alias("k"),
        (F.xxhash64("id") % (2**40)).alias("a"),
        (F.abs(F.xxhash64("id", F.lit(1))) % 1_000_000 / 1_000_000.0).alias("b"),
        F.concat(F.lit("val-"), (F.abs(F.xxhash64("id", F.lit(2))) % 10**9).cast("string")).alias(
            "s"
        ),
    )
    df = df.cache()
    df.count()
    imports, writes = [], []
    limno_q: list[float] = []
    spark_q: list[float] = []
    query = "SELECT count(*) AS n, sum(b) AS b, max(s) AS s FROM {t} WHERE k % 7 = 3"
    try:
        for rep in range(min(cfg.repeat, 3)):  # Spark runs are long: at most 3
            root = cfg.workdir / f"spark-{rep}"
            lake = Lake.init(str(root / "lake"))
            lake.create_pool("b", key="k")
            imports.append(timed(partial(ls.write, df, "b", lake=lake)))
            out = str(root / "plain")
            n_parts = max(1, session.sparkContext.defaultParallelism)
            ordered = df.repartitionByRange(n_parts, "k").sortWithinPartitions("k")
            writes.append(timed(partial(ordered.write.parquet, out)))

            def plain(out: str = out) -> None:
                session.read.parquet(out).createOrReplaceTempView("plain")
                session.sql(query.format(t="plain")).collect()

            # each query once untimed (the writes' dirty pages flushed, both plans
            # compiled), then both timed, in alternating order: the query right after
            # a write or first in a rep would otherwise pay for it
            runs: list[tuple[list[float], Callable[[], object]]] = [
                (limno_q, partial(ls.query, lake, query.format(t='"b"'))),
                (spark_q, plain),
            ]
            for _, run in runs:
                run()
            for times, run in runs if rep % 2 == 0 else runs[::-1]:
                times.append(timed(run))
            shutil.rmtree(root, ignore_errors=True)
    finally:
        df.unpersist()
    return [
        Result(
            "spark_bulk_import",
            "throughput",
            "rows/s",
            rows / median(imports),
            {"spark": rows / median(writes)},
            True,
        ),
        Result("spark_query", "latency", "s", median(limno_q), {"spark": median(spark_q)}, False),
    ]


def _z_order(table: Any) -> None:
    table.optimize.z_order(["k"])


def _gcd(a: int, b: int) -> int:
    while b:
        a, b = b, a % b
    return a


# -- the registry ---------------------------------------------------------------------------

Benchmark = tuple[str, Callable[[Config], list[Result]], Callable[[], str | None]]


def _always() -> str | None:
    return None


BENCHMARKS: list[Benchmark] = [
    ("ingest_sorted", ingest_sorted, _always),
    ("small_commits", small_commits, _always),
    ("point_lookup", point_lookup, _always),
    ("range_scan", range_scan, _always),
    ("index_lookup", index_lookup, _always),
    ("compaction", compaction, compaction_missing),
    ("git", git_operations, git_missing),
    ("cli_start", cli_start, _always),
    ("spark", spark, spark_missing),
    ("tpch", tpch, tpch_missing),
    ("tpch_load", tpch_load, tpch_load_missing),
    ("server", server, _always),
    ("files_commit_100k", files_commit_100k, _always),
    ("files_list_1m", files_list_1m, _always),
    ("files_diff_1k_of_1m", files_diff_1k_of_1m, _always),
    ("files_merge_1k_of_1m", files_merge_1k_of_1m, _always),
    ("gateway_get_64mb", gateway_get_64mb, _always),
    ("gateway_put_64mb", gateway_put_64mb, _always),
    ("gateway_small_put_p50", gateway_small_put_p50, _always),
    ("ui_pages", ui_pages, _always),
    ("ui_record_pages", ui_record_pages, _always),
    ("kafka_from", kafka_from, kafka_missing),
    ("kafka_to", kafka_to, kafka_missing),
    ("kafka_from_avro", kafka_from_avro, kafka_missing),
    ("kafka_from_connect", kafka_from_connect, kafka_missing),
    ("spark_streaming", spark_streaming, spark_streaming_missing),
    ("etl_denorm_1m", etl_denorm_1m, _always),
    ("etl_denorm_1m_spark", etl_denorm_1m_spark, spark_missing),
    ("etl_incremental_1k", etl_incremental_1k, _always),
    ("cdc_lag", cdc_lag, cdc_missing),
]


def run(
    cfg: Config, only: set[str] | None, log: Callable[[str], None]
) -> tuple[list[Result], dict[str, str]]:
    """Run the registered benchmarks (or those named in ``only``)."""
    results: list[Result] = []
    skipped: dict[str, str] = {}
    for name, fn, missing in BENCHMARKS:
        if only is not None and name not in only:
            continue
        reason = missing()
        if reason is None:
            start = time.perf_counter()
            try:
                got = fn(cfg)
            except Skipped as e:
                reason = str(e)
            else:
                results.extend(got)
                log(f"{name}: done in {time.perf_counter() - start:.1f}s")
                continue
        skipped[name] = reason
        log(f"{name}: skipped: {reason}")
    for name in peers_missing():
        skipped[f"peer {name}"] = peers.available(name) or ""
    return results, skipped


def peers_missing() -> list[str]:
    return [p for p in ("delta-rs", "pyiceberg", "duckdb") if peers.available(p) is not None]

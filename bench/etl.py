"""``etl_denorm_1m`` (issue 17) and the generated workload of the demo's shape.

:func:`workload` makes ``n`` Debezium-like events of the zync demo's two tables
(examples/cdc): an Invoices create per invoice, its first InvoiceStatus create (in a
shuffled order, so joins wait across batches), status updates, invoice updates and
deletes. :func:`expected` derives the demo rules' outputs from the generator's own
bookkeeping (not from the ETL), for the correctness test at scale
(tests/etl/test_etl_scale.py).

The benchmark: 1M events (quick: 50k) in a pool ``Raw``; events/s of ``limno etl``
with examples/cdc/invoices.yaml into a fresh pool (one commit), against the same
rules written by hand as one DuckDB query over the same events in one Parquet file,
its result written to Parquet (the limit of a one-shot job: no state, no commit).
The two alternate, ``repeat`` times each. ``etl_denorm_1m_spark``: the same with
``--engine spark`` (limno.etl.spark: the rules run on Spark; full runs only), its
JVM started before the clock runs (a running ``limno spark start`` server or a
long-lived session is what a Spark user has; the start-up is not the ETL's cost),
with a second peer: the same rules by hand in Spark SQL over the same Parquet,
written by Spark as Parquet (the limit of a Spark one-shot job).
``etl_incremental_1k``: a run that finds 1,000 new events on a 1M-event raw pool
(what it reads: limno.etl.reads) against a full run of the same pool.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bench.harness import Config, Result, Skipped, median

__all__ = ["etl_denorm_1m", "etl_denorm_1m_spark", "etl_incremental_1k", "expected", "workload"]

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "examples" / "cdc" / "invoices.yaml"
_CUSTOMERS = ["Alice", "Bob", "Charlie", "Dan", "Erin"]
_ITEMS = ["taco", "burrito", "enchilada", "beans"]


def workload(n: int, seed: int = 17) -> pa.Table:
    """About ``n`` events: per invoice, a create of each table; per 2 invoices one
    status update; per 8 an invoice update and a delete. In topic-offset order."""
    m = max(1, n * 4 // 11)  # 2.75 events per invoice
    rng = np.random.default_rng(seed)
    ids = np.arange(m, dtype=np.int64)
    status_order = rng.permutation(m)
    upd_status = ids[::2]
    upd_inv, del_inv = ids[1::8], ids[5::8]
    inv_ids = np.concatenate([ids, upd_inv, del_inv])
    inv_ops = ["c"] * m + ["u"] * len(upd_inv) + ["d"] * len(del_inv)
    st_ids = np.concatenate([status_order, upd_status])
    st_ops = ["c"] * m + ["u"] * len(upd_status)
    st_status = ["pending"] * m + ["paid"] * len(upd_status)

    def table(topic: str, key: np.ndarray, ops: list[str], after: pa.StructArray) -> pa.Table:
        k = len(key)
        kafka = pa.StructArray.from_arrays(
            [pa.array([topic] * k), pa.array(np.arange(k, dtype=np.int64))], ["topic", "offset"]
        )
        value = pa.StructArray.from_arrays([pa.array(ops), after], ["op", "after"])
        keys = pa.StructArray.from_arrays([pa.array(key)], ["ID"])
        return pa.table({"kafka": kafka, "key": keys, "value": value})

    inv_after = pa.StructArray.from_arrays(
        [
            pa.array(inv_ids),
            pa.array([_CUSTOMERS[i % 5] for i in inv_ids.tolist()]),
            pa.array([_ITEMS[i % 4] for i in inv_ids.tolist()]),
            pa.nulls(len(inv_ids), pa.int64()),
            pa.nulls(len(inv_ids), pa.string()),
        ],
        ["ID", "customer", "item", "InvoiceID", "status"],
    )
    st_after = pa.StructArray.from_arrays(
        [
            pa.array(st_ids + 10 * m),
            pa.nulls(len(st_ids), pa.string()),
            pa.nulls(len(st_ids), pa.string()),
            pa.array(st_ids),
            pa.array(st_status),
        ],
        ["ID", "customer", "item", "InvoiceID", "status"],
    )
    return pa.concat_tables(
        [
            table("Invoices", inv_ids, inv_ops, inv_after),
            table("InvoiceStatus", st_ids + 10 * m, st_ops, st_after),
        ]
    )


def expected(events: pa.Table) -> list[tuple[str, Any]]:
    """The demo rules' outputs of ``events`` as sorted (key JSON, value) pairs, from
    the events alone (each invoice has exactly one status create)."""
    rows = events.to_pylist()
    invoices = {}
    out: list[tuple[str, Any]] = []
    for r in rows:
        t, op, a = r["kafka"]["topic"], r["value"]["op"], r["value"]["after"]
        if t == "Invoices" and op == "c":
            invoices[a["ID"]] = a
    for r in rows:
        t, op, a = r["kafka"]["topic"], r["value"]["op"], r["value"]["after"]
        if t == "InvoiceStatus" and op == "c":
            inv = invoices[a["InvoiceID"]]
            value = {**_plain(inv), "invoice_status": a["status"]}
            out.append((f'{{"ID":{inv["ID"]}}}', value))
        elif t == "InvoiceStatus" and op == "u":
            i = a["InvoiceID"]
            out.append((f'{{"ID":{i}}}', {"ID": i, "invoice_status": a["status"]}))
        elif t == "Invoices" and op == "u":
            out.append((f'{{"ID":{a["ID"]}}}', _plain(a)))
        elif t == "Invoices" and op == "d":
            out.append((f'{{"ID":{a["ID"]}}}', None))
    return sorted(out, key=repr)


def _plain(after: dict[str, Any]) -> dict[str, Any]:
    return {k: after[k] for k in ("ID", "customer", "item")}


#: the rules of examples/cdc/invoices.yaml by hand, one query (the peer)
_BY_HAND = """
WITH ev AS (SELECT * FROM read_parquet('{path}')),
inv AS (SELECT * FROM ev WHERE kafka.topic = 'Invoices'),
st AS (SELECT * FROM ev WHERE kafka.topic = 'InvoiceStatus')
SELECT to_json(l.key) AS key,
       {{'ID': l.value.after.ID, 'customer': l.value.after.customer,
        'item': l.value.after.item, 'invoice_status': r.value.after.status}} AS value
FROM inv l JOIN st r ON l.value.after.ID = r.value.after.InvoiceID
WHERE l.value.op IN ('c', 'r') AND r.value.op IN ('c', 'r')
UNION ALL BY NAME
SELECT to_json({{'ID': value.after.InvoiceID}}) AS key,
       {{'ID': value.after.InvoiceID, 'invoice_status': value.after.status}} AS value
FROM st WHERE value.op = 'u'
UNION ALL BY NAME
SELECT to_json(key) AS key, value.after AS value FROM inv WHERE value.op = 'u'
UNION ALL BY NAME
SELECT to_json(key) AS key, NULL AS value FROM inv WHERE value.op = 'd'
"""


#: the same rules by hand in Spark SQL (the limit of a Spark one-shot job): one value
#: struct type for all four parts (Spark's UNION has no BY NAME for nested fields)
_BY_HAND_SPARK = """
WITH ev AS (SELECT * FROM parquet.`{path}`),
inv AS (SELECT * FROM ev WHERE kafka.topic = 'Invoices'),
st AS (SELECT * FROM ev WHERE kafka.topic = 'InvoiceStatus')
SELECT to_json(l.key) AS key,
  named_struct('ID', l.value.after.ID, 'customer', l.value.after.customer,
   'item', l.value.after.item, 'invoice_status', r.value.after.status,
   'InvoiceID', CAST(NULL AS BIGINT), 'status', CAST(NULL AS STRING)) AS value
FROM inv l JOIN st r ON l.value.after.ID = r.value.after.InvoiceID
WHERE l.value.op IN ('c', 'r') AND r.value.op IN ('c', 'r')
UNION ALL
SELECT to_json(named_struct('ID', value.after.InvoiceID)) AS key,
  named_struct('ID', value.after.InvoiceID, 'customer', CAST(NULL AS STRING),
   'item', CAST(NULL AS STRING), 'invoice_status', value.after.status,
   'InvoiceID', CAST(NULL AS BIGINT), 'status', CAST(NULL AS STRING)) AS value
FROM st WHERE value.op = 'u'
UNION ALL
SELECT to_json(key) AS key,
  named_struct('ID', value.after.ID, 'customer', value.after.customer,
   'item', value.after.item, 'invoice_status', CAST(NULL AS STRING),
   'InvoiceID', value.after.InvoiceID, 'status', value.after.status) AS value
FROM inv WHERE value.op = 'u'
UNION ALL
SELECT to_json(key) AS key, CAST(NULL AS STRUCT<ID: BIGINT, customer: STRING, item: STRING,
  invoice_status: STRING, InvoiceID: BIGINT, status: STRING>) AS value
FROM inv WHERE value.op = 'd'
"""


def _spark_by_hand(path: Path, out: Path) -> int:
    """The rules by hand on the running Spark session, written by Spark as Parquet."""
    from limno.engines import spark

    spark.session().sql(_BY_HAND_SPARK.format(path=path)).write.mode("overwrite").parquet(str(out))
    return sum(pq.read_metadata(f).num_rows for f in out.glob("*.parquet"))


def _by_hand(path: Path, out: Path) -> int:
    import duckdb

    con = duckdb.connect()
    try:
        query = _BY_HAND.format(path=path)
        con.execute(f"COPY ({query}) TO '{out}' (FORMAT parquet)")
        return int(con.execute(f"SELECT count(*) FROM read_parquet('{out}')").fetchone()[0])  # type: ignore[index]
    finally:
        con.close()


def etl_denorm_1m(cfg: Config) -> list[Result]:
    """Events/s through the demo rule set: limno etl (local) vs DuckDB by hand."""
    return _measure(cfg, "local", cfg.rows(1_000_000, 50_000))


def etl_denorm_1m_spark(cfg: Config) -> list[Result]:
    """The same on the Spark engine (the rules run on Spark, a session of ``local[*]``
    started before timing). Not in ``--quick`` runs: Spark's start-up alone would
    dominate."""
    if cfg.quick:
        raise Skipped("not in --quick runs (Spark's start-up alone is slow)")
    return _measure(cfg, "spark", 1_000_000)


def etl_incremental_1k(cfg: Config) -> list[Result]:
    """Seconds of a run that finds 1,000 new events on top of a 1M-event raw pool
    (quick: 50k), against a full run of the same pool (limno.etl.reads: a run reads
    what it needs). The two alternate; the output branch is reset before each."""
    from limno.api.local import LocalLake
    from limno.etl.config import load_config
    from limno.etl.run import run_etl

    events = workload(cfg.rows(1_000_000, 50_000))
    topic = pc.struct_field(events["kafka"], "topic")
    topics = [events.filter(pc.equal(topic, t)) for t in ("Invoices", "InvoiceStatus")]
    base = [t.slice(0, t.num_rows - 500) for t in topics]
    new = [t.slice(t.num_rows - 500) for t in topics]
    lake = LocalLake.init(str(cfg.workdir / "etl-incremental" / "lake"))
    raw = lake.create_pool("Raw", "kafka.offset")
    raw.load([pa.concat_tables(base)])
    config = load_config(CONFIG)
    done = run_etl(lake, config, engine="local").commit
    assert done is not None
    staging = lake.pool("Staging")
    empty = staging.log("main")[-1].id  # the pool as the ETL created it
    raw.load([pa.concat_tables(new)])
    inc_s: list[float] = []
    full_s: list[float] = []
    for _ in range(cfg.repeat):
        staging.reset("main", done.id)
        start = time.perf_counter()
        report = run_etl(lake, config, engine="local")
        inc_s.append(time.perf_counter() - start)
        assert report.new_events == 1000, report
        staging.reset("main", empty)
        start = time.perf_counter()
        full = run_etl(lake, config, engine="local")
        full_s.append(time.perf_counter() - start)
        assert full.new_events == events.num_rows, full
    return [
        Result(
            "etl_incremental_1k",
            f"1,000 new events on {events.num_rows} (local engine)",
            "s",
            median(inc_s),
            {"full-run": median(full_s)},
            higher_is_better=False,
        )
    ]


def _measure(cfg: Config, engine: str, n: int) -> list[Result]:
    from limno.api.local import LocalLake
    from limno.errors import NotFoundError
    from limno.etl.config import load_config
    from limno.etl.run import run_etl

    events = workload(n)
    root = cfg.workdir / f"etl-{engine}"
    lake = LocalLake.init(str(root / "lake"))
    lake.create_pool("Raw", "kafka.offset").load([events])
    parquet = root / "events.parquet"
    pq.write_table(events, parquet)
    config = load_config(CONFIG)
    if engine == "spark":  # the JVM is up before the clock runs (see the module's docstring)
        from limno.engines import spark

        spark.session()
    limno_s: list[float] = []
    hand_s: list[float] = []
    spark_s: list[float] = []  # Spark SQL by hand (engine spark only)
    cpu: dict[str, list[float]] = {"limno": [], "by-hand": []}  # this process's CPU seconds
    if engine == "spark":
        cpu["spark-sql-by-hand"] = []
    for rep in range(cfg.repeat):
        with contextlib.suppress(NotFoundError):  # the first repetition has none
            lake.drop_pool("Staging")
        # with the CPU of the Spark session's JVM, most of a Spark run's
        start, used = time.perf_counter(), _cpu() + _children_cpu()
        report = run_etl(lake, config, engine=engine)
        limno_s.append(time.perf_counter() - start)
        cpu["limno"].append(_cpu() + _children_cpu() - used)
        start, used = time.perf_counter(), _cpu()
        count = _by_hand(parquet, root / f"out-{rep}.parquet")
        hand_s.append(time.perf_counter() - start)
        cpu["by-hand"].append(_cpu() - used)
        assert sum(report.outputs.values()) == count, (report.outputs, count)
        if engine == "spark":
            start, used = time.perf_counter(), _cpu() + _children_cpu()
            assert _spark_by_hand(parquet, root / f"spark-{rep}") == count
            spark_s.append(time.perf_counter() - start)
            cpu["spark-sql-by-hand"].append(_cpu() + _children_cpu() - used)
    rate = events.num_rows / median(limno_s)
    peer = events.num_rows / median(hand_s)
    peers = {"duckdb-by-hand": peer}
    if spark_s:
        peers["spark-sql-by-hand"] = events.num_rows / median(spark_s)
    name = "etl_denorm_1m" if engine == "local" else f"etl_denorm_1m_{engine}"
    note = ", ".join(f"{k} {median(v):.2f}" for k, v in cpu.items())
    return [
        Result(
            name,
            f"{events.num_rows} events, demo rules ({engine} engine)",
            "events/s",
            rate,
            peers,
            note=f"CPU seconds (median, with the JVM's for Spark; load-independent): {note}",
        )
    ]


def _cpu() -> float:
    """User and system CPU seconds of this process so far (all of its threads)."""
    t = os.times()
    return t.user + t.system


def _children_cpu() -> float:
    """CPU seconds so far of this process's running children (Linux ``/proc``; 0
    elsewhere)."""
    total, me, tick = 0.0, str(os.getpid()), os.sysconf("SC_CLK_TCK")
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if fields[1] == me:  # ppid; then utime, stime at 11, 12
                total += (int(fields[11]) + int(fields[12])) / tick
    return total

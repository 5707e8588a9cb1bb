"""One conformance suite for both engines of ``limno etl``: local (DuckDB) and Spark
(limno.etl.spark: the same rules on Spark). Each scenario's answers are derived by
hand, and the Spark leg also replays the scenario on the local engine and requires
the very same outcome: output records (values and schema), offsets, and the
completion records of every commit. The Spark leg is marked ``spark`` and shares
one session per module (small data: about a minute on 2 cores)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from bench.etl import expected, workload

from etl_support import CONFIG, EXPECTED, PARTITIONED, batch, records_after
from limno.api.local import LocalLake as Lake
from limno.errors import InvalidInputError
from limno.etl.config import Config, load_config, parse_config
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


Scenario = Callable[[Path, str], tuple[Lake, Config]]


def _outcome(lake: Lake, config: Config) -> tuple[pa.Schema, list[Any], list[Any]]:
    """What a scenario left: the output branch's records, their schema, and the
    completion records of each of its commits."""
    name, branch = config.output_pool
    pool = lake.pool(name)
    table = pool.scan(branch)
    return table.schema, table.to_pylist(), [c.meta.get("etl") for c in pool.log(branch)]


def _agree(scenario: Scenario, engine: str, tmp_path: Path) -> None:
    """``scenario`` on ``engine``; on Spark, also on the local engine: same outcome."""
    lake, config = scenario(tmp_path / engine, engine)
    if engine != "local":
        twin, _ = scenario(tmp_path / "local", "local")
        assert _outcome(lake, config) == _outcome(twin, config)


def _demo(root: Path, engine: str) -> tuple[Lake, Config]:
    lake = Lake.init(str(root))
    lake.create_pool("Raw", "kafka.offset")
    config = load_config(CONFIG)
    for n in range(1, len(EXPECTED) + 1):
        lake.pool("Raw").load([batch(n)])
        report = run_etl(lake, config, engine=engine)
        assert report.engine == engine
        assert report.pending == (1 if n == 2 else 0)
        assert lake.pool("Staging").scan().to_pylist() == records_after(n)
    assert run_etl(lake, config, engine=engine).commit is None  # a rerun commits nothing
    return lake, config


def test_the_demo(engine: str, tmp_path: Path) -> None:
    _agree(_demo, engine, tmp_path)


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


def _partitioned(root: Path, engine: str) -> tuple[Lake, Config]:
    lake = Lake.init(str(root))
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
    return lake, config


def test_partitions_pending_and_order(engine: str, tmp_path: Path) -> None:
    """Two partitions with equal offsets; a payment before its order (pending on the
    right side) and an order whose payment comes two runs later."""
    _agree(_partitioned, engine, tmp_path)


def _generated(root: Path, engine: str) -> tuple[Lake, Config]:
    """bench/etl.py's workload of the demo's shape in three batches: joins waiting
    across runs, status and invoice updates, deletes (tombstones)."""
    events = workload(400)
    topic = pc.struct_field(events["kafka"], "topic")
    topics = [events.filter(pc.equal(topic, t)) for t in ("Invoices", "InvoiceStatus")]
    lake = Lake.init(str(root))
    raw = lake.create_pool("Raw", "kafka.offset")
    config = load_config(CONFIG)
    waited = 0
    for b in range(3):
        batch_of = [
            t.slice(b * len(t) // 3, (b + 1) * len(t) // 3 - b * len(t) // 3) for t in topics
        ]
        raw.load([pa.concat_tables(batch_of)])
        waited = max(waited, run_etl(lake, config, engine=engine).pending)
    assert waited > 0, "some joins waited across runs"
    assert run_etl(lake, config, engine=engine).commit is None
    rows = lake.pool("Staging").scan().to_pylist()
    assert [r["kafka"]["offset"] for r in rows] == list(range(len(rows)))
    assert any(r["value"] is None for r in rows), "tombstones"

    def plain(value: dict[str, Any] | None) -> dict[str, Any] | None:
        return None if value is None else {k: v for k, v in value.items() if v is not None}

    got = sorted(((r["key"], plain(r["value"])) for r in rows), key=repr)
    assert got == sorted(((k, plain(v)) for k, v in expected(events)), key=repr)
    return lake, config


def test_a_generated_workload(engine: str, tmp_path: Path) -> None:
    _agree(_generated, engine, tmp_path)


_ONE_SIDE = PARTITIONED.replace("in: payments\n    where: value.amount > 100", "in: orders")


def _one_side(root: Path, engine: str) -> tuple[Lake, Config]:
    """A run where a denorm side has no records (its events consumed, none pending):
    the other side's records wait, and a join-on that does not bind is not run (the
    local engine joins only two sides with records)."""
    lake = Lake.init(str(root))
    raw = lake.create_pool("raw", "kafka.offset")
    lake.create_pool("out", "kafka.offset").branch("dev")
    config = parse_config(_ONE_SIDE, "p.yaml")
    raw.load([_records("orders", [(0, 0, "o1", {"id": 1})])])
    raw.load([_records("payments", [(0, 0, "p1", {"order_id": 1, "amount": 7})])])
    assert run_etl(lake, config, engine=engine).pending == 0
    raw.load([_records("orders", [(0, 1, "o2", {"id": 2})])])
    bad = parse_config(_ONE_SIDE.replace("right.value.order_id", "right.value.nope"), "p.yaml")
    assert run_etl(lake, bad, engine=engine).pending == 1  # o2 waits: no payment to join
    assert [r["key"] for r in lake.pool("out").scan("dev").to_pylist()] == ["o1", "o1", "o2"]
    return lake, config


def test_a_side_without_records(engine: str, tmp_path: Path) -> None:
    _agree(_one_side, engine, tmp_path)


def _all_wait(root: Path, engine: str) -> tuple[Lake, Config]:
    """A run whose new records make no output at all (every order waits for its
    payment, the stateless rule has no payments): it commits nothing, and the next run
    takes those orders again with the payment that came since."""
    lake = Lake.init(str(root))
    raw = lake.create_pool("raw", "kafka.offset")
    lake.create_pool("out", "kafka.offset").branch("dev")
    config = parse_config(PARTITIONED, "p.yaml")
    raw.load([_records("orders", [(0, 0, "o1", {"id": 1}), (0, 1, "o2", {"id": 2})])])
    report = run_etl(lake, config, engine=engine)
    assert (report.commit, report.pending) == (None, 2)
    assert lake.pool("out").log("dev", limit=1)[0].meta.get("etl") is None
    raw.load([_records("payments", [(0, 0, "p1", {"order_id": 1, "amount": 7})])])
    report = run_etl(lake, config, engine=engine)
    assert report.commit is not None and report.pending == 1  # o2 still waits
    rows = lake.pool("out").scan("dev").to_pylist()
    assert [(r["kafka"]["offset"], r["key"], r["value"]["id"]) for r in rows] == [(0, "o1", 1)]
    assert run_etl(lake, config, engine=engine).commit is None  # o2 alone: no new input
    return lake, config


def test_a_run_without_output_commits_nothing(engine: str, tmp_path: Path) -> None:
    _agree(_all_wait, engine, tmp_path)


def _errors_lake(root: Path) -> Lake:
    lake = Lake.init(str(root))
    raw = lake.create_pool("raw", "kafka.offset")
    lake.create_pool("out", "kafka.offset").branch("dev")
    raw.load([_records("orders", [(0, 0, "o1", {"id": 1})])])
    raw.load([_records("payments", [(0, 0, "p1", {"order_id": 1, "amount": 1})])])
    return lake


def test_sql_errors_name_the_field(engine: str, tmp_path: Path) -> None:
    lake = _errors_lake(tmp_path / "lake")
    bad = PARTITIONED.replace("value.amount > 100", "value.nope > 100")
    with pytest.raises(InvalidInputError, match=r"^p.yaml line 17: transforms\[1\].where: "):
        run_etl(lake, parse_config(bad, "p.yaml"), engine=engine)
    bad = PARTITIONED.replace("right.value.order_id", "right.value.nope")
    with pytest.raises(InvalidInputError, match=r"^p.yaml line 11: transforms\[0\].join-on: "):
        run_etl(lake, parse_config(bad, "p.yaml"), engine=engine)
    bad = PARTITIONED.replace("right.value.amount} AS value", "right.value.amount AS value")
    with pytest.raises(InvalidInputError, match=r"^p.yaml line 12: transforms\[0\].select: "):
        run_etl(lake, parse_config(bad, "p.yaml"), engine=engine)
    assert lake.pool("out").log("dev", limit=1)[0].meta.get("etl") is None  # nothing committed


@pytest.mark.spark
def test_duckdb_sql_that_spark_cannot_run(spark_session: None, tmp_path: Path) -> None:
    """DuckDB-only SQL runs locally; on Spark the error names the fragment's field."""
    lake = _errors_lake(tmp_path / "lake")
    only = PARTITIONED.replace("value.amount > 100", "regexp_full_match(key, 'p.*')")
    config = parse_config(only, "p.yaml")
    with pytest.raises(
        InvalidInputError,
        match=r"^p.yaml line 17: transforms\[1\].where: Spark: .*REGEXP_FULL_MATCH",
    ):
        run_etl(lake, config, engine="spark")
    assert run_etl(lake, config, engine="local").outputs == {"paid": 2}


@pytest.mark.spark
def test_auto_picks_spark_from_the_threshold(
    spark_session: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lake = _errors_lake(tmp_path / "lake")
    config = parse_config(PARTITIONED, "p.yaml")
    monkeypatch.setenv("LIMNO_SPARK_THRESHOLD", "1TiB")
    assert run_etl(lake, config, engine="auto").engine == "local"
    monkeypatch.setenv("LIMNO_SPARK_THRESHOLD", "1")
    report = run_etl(lake, config, engine="auto")
    assert (report.engine, report.commit) == ("spark", None)  # the local run consumed all


@pytest.mark.spark
def test_a_served_lake(spark_session: None, tmp_path: Path) -> None:
    """Through a server: its DuckDB keeps the new and pending records, Spark here
    runs the rules, and the commit goes through the server. Same records."""
    from limno.api.remote import RemoteLake
    from server_support import served

    path = str(tmp_path / "lake")
    Lake.init(path).create_pool("Raw", "kafka.offset")
    config = load_config(CONFIG)
    with served(path) as url, RemoteLake(url) as remote:
        for n in (1, 2, 3):
            remote.pool("Raw").load([batch(n)])
            report = run_etl(remote, config, engine="spark")
            assert (report.engine, report.pending) == ("spark", 1 if n == 2 else 0)
    assert Lake.open(path).pool("Staging").scan().to_pylist() == records_after(3)


def _debezium(topic: str, offset: int, key: int, op: str | None, after: Any) -> dict[str, Any]:
    value = None if op is None else {"op": op, "after": after}  # None: a Kafka tombstone
    return {"kafka": {"topic": topic, "offset": offset}, "key": {"ID": key}, "value": value}


def _odd(root: Path, engine: str) -> tuple[Lake, Config]:
    """The demo's rules over odd events: unicode and null fields, one invoice created,
    updated, deleted and tombstoned in one batch while its status arrives after them
    (its pending create then joins: the rules in words), a status that waits for its
    invoice two runs."""
    inv, st = "Invoices", "InvoiceStatus"
    batches = [
        [
            _debezium(inv, 1, 1, "c", {"ID": 1, "customer": "Zoë 山田", "item": None}),
            _debezium(st, 1, 9, "c", {"ID": 9, "InvoiceID": 2, "status": "pending"}),
        ],
        [
            _debezium(inv, 2, 1, "u", {"ID": 1, "customer": "Zoë", "item": "🌮"}),
            _debezium(inv, 3, 1, "d", None),
            _debezium(inv, 4, 1, None, None),
            _debezium(st, 2, 8, "c", {"ID": 8, "InvoiceID": 1, "status": "late"}),
        ],
        [
            _debezium(inv, 5, 2, "c", {"ID": 2, "customer": None, "item": "x"}),
            _debezium(st, 3, 9, "u", {"ID": 9, "InvoiceID": 2, "status": "paid"}),
        ],
    ]
    lake = Lake.init(str(root))
    raw = lake.create_pool("Raw", "kafka.offset")
    config = load_config(CONFIG)
    runs = []
    for events in batches:
        raw.load([pa.Table.from_pylist(events)])
        report = run_etl(lake, config, engine=engine)
        runs.append((report.new_events, report.outputs, report.pending))
    # run 1 makes no output (both wait): nothing committed, read again by run 2
    assert runs == [(0, {}, 2), (6, {"NewInvoices": 3}, 1), (2, {"NewInvoices": 2}, 0)]

    def full(i: int, customer: str | None, item: str | None, status: str | None) -> Any:
        fields = {"ID": i, "customer": customer, "item": item, "invoice_status": status}
        return {**fields, "InvoiceID": None, "status": None}  # Raw's after has both tables'

    rows = lake.pool("Staging").scan().to_pylist()
    assert [(r["kafka"]["offset"], r["key"], r["value"]) for r in rows] == [
        (0, '{"ID":1}', full(1, "Zoë", "🌮", None)),  # the update
        (1, '{"ID":1}', None),  # the delete; the Kafka tombstone makes nothing
        (2, '{"ID":1}', full(1, "Zoë 山田", None, "late")),  # the create, joined at last
        (3, '{"ID":2}', full(2, None, "x", "pending")),  # status 9 waited two runs
        (4, '{"ID":2}', full(2, None, None, "paid")),
    ]
    return lake, config


def test_odd_debezium_events(engine: str, tmp_path: Path) -> None:
    _agree(_odd, engine, tmp_path)

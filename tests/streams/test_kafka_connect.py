"""``--format connect``: Kafka Connect JSON envelopes (as Debezium's PostgreSQL connector
emits them through JsonConverter with schemas.enable) into typed records, and back
(from -> to -> from gives the same records), against a real broker."""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
from typing import Any

import pyarrow as pa
import pytest

from clirunner import Result
from git_scenarios import error_line, fail, init_lake, ok
from kafka_support import Broker, Topics

pytestmark = [pytest.mark.kafka, pytest.mark.usefixtures("isolated_home")]

FAST = ("--batch-interval", "100ms", "--exit-after", "1500ms")
DBZ = "io.debezium.time."
CONNECT = "org.apache.kafka.connect.data."


def _f(field: str, typ: str, optional: bool = True, **more: Any) -> dict[str, Any]:
    return {"type": typ, "optional": optional, "field": field, **more}


ROW = [
    _f("id", "int32", False),
    _f("name", "string"),
    _f("qty", "int16"),
    _f("price", "bytes", name=CONNECT + "Decimal", version=1,
       parameters={"scale": "2", "connect.decimal.precision": "10"}),
    _f("born", "int32", name=DBZ + "Date", version=1),
    _f("seen", "int64", name=DBZ + "MicroTimestamp", version=1),
    _f("changed", "string", name=DBZ + "ZonedTimestamp", version=1),
    _f("ratio", "float"),
    _f("blob", "bytes"),
    {"type": "array", "items": {"type": "string", "optional": False}, "optional": True,
     "field": "tags"},
    {"type": "map", "keys": {"type": "string", "optional": False},
     "values": {"type": "int64", "optional": True}, "optional": True, "field": "counts"},
]  # fmt: skip
SOURCE = [
    _f("version", "string", False), _f("connector", "string", False),
    _f("name", "string", False), _f("ts_ms", "int64", False),
    _f("snapshot", "string", name="io.debezium.data.Enum", version=1, default="false"),
    _f("db", "string", False), _f("schema", "string", False), _f("table", "string", False),
    _f("txId", "int64"), _f("lsn", "int64"),
]  # fmt: skip
VALUE_SCHEMA = {
    "type": "struct",
    "optional": False,
    "name": "pg.public.items.Envelope",
    "version": 1,
    "fields": [
        {"type": "struct", "fields": ROW, "optional": True, "name": "pg.public.items.Value",
         "field": "before"},
        {"type": "struct", "fields": ROW, "optional": True, "name": "pg.public.items.Value",
         "field": "after"},
        {"type": "struct", "fields": SOURCE, "optional": False,
         "name": "io.debezium.connector.postgresql.Source", "field": "source"},
        _f("op", "string", False),
        _f("ts_ms", "int64"),
    ],
}  # fmt: skip
KEY_SCHEMA = {
    "type": "struct",
    "fields": [_f("id", "int32", False)],
    "optional": False,
    "name": "pg.public.items.Key",
}


def row(i: int, name: str) -> dict[str, Any]:
    return {
        "id": i,
        "name": name,
        "qty": 3,
        "price": base64.b64encode((1250 + i).to_bytes(2, "big", signed=True)).decode(),
        "born": 19_000 + i,  # days since 1970-01-01
        "seen": 1_700_000_000_123_456,
        "changed": "2026-11-26T05:00:00.5Z",
        "ratio": 0.5,
        "blob": base64.b64encode(b"\x00\xff").decode(),
        "tags": ["a", "b"],
        "counts": {"x": 1},
    }


def change(op: str, before: dict[str, Any] | None, after: dict[str, Any] | None) -> bytes:
    source = {
        "version": "3.0.0.Final", "connector": "postgresql", "name": "pg",
        "ts_ms": 1_764_133_200_000, "snapshot": None, "db": "shop", "schema": "public",
        "table": "items", "txId": 771, "lsn": 24_023_128,
    }  # fmt: skip
    payload = {"before": before, "after": after, "source": source, "op": op, "ts_ms": 17}
    return json.dumps({"schema": VALUE_SCHEMA, "payload": payload}).encode()


def key(i: int) -> str:
    return json.dumps({"schema": KEY_SCHEMA, "payload": {"id": i}})


def produce_changes(topics: Topics, topic: str) -> None:
    values = [
        change("c", None, row(1, "ann")),
        change("u", row(1, "ann"), row(1, "bea")),
        change("d", row(1, "bea"), None),
        None,  # the tombstone after a delete
    ]
    topics.produce(topic, values, raw=True, keys=lambda i: key(1))


def sync(lake: str, kafka: Broker, topic: str, pool: str, *extra: str) -> Result:
    return ok(
        "--lake", lake, "kafka", "from", "--topic", topic, "--pool", pool, "--format", "connect",
        "--bootstrap", kafka.bootstrap, *FAST, *extra,
    )  # fmt: skip


def scan(lake: str, pool: str) -> pa.Table:
    out = ok("--lake", lake, "-f", "arrow", "scan", "-p", pool).out
    return pa.ipc.open_stream(out).read_all()


def test_debezium_change_events_are_typed(lake: str, kafka: Broker, topics: Topics) -> None:
    topic = topics.create()
    produce_changes(topics, topic)
    sync(lake, kafka, topic, "items")
    table = scan(lake, "items")
    value = table.schema.field("value").type
    after = value.field("after").type
    assert after.field("qty").type == pa.int16()
    assert after.field("price").type == pa.decimal128(10, 2)
    assert after.field("born").type == pa.date32()
    assert after.field("seen").type == pa.timestamp("us")
    assert after.field("changed").type == pa.timestamp("us", tz="UTC")
    assert after.field("ratio").type == pa.float32()
    assert after.field("blob").type == pa.binary()
    assert after.field("counts").type == pa.map_(pa.string(), pa.int64())
    assert table.schema.field("key").type == pa.struct([("id", pa.int32())])
    rows = table.to_pylist()
    assert [r["value"] and r["value"]["op"] for r in rows] == ["c", "u", "d", None]
    assert [r["key"] for r in rows] == [{"id": 1}] * 4
    created = rows[0]["value"]["after"]
    assert created["price"] == decimal.Decimal("12.51")
    assert created["born"] == dt.date(2022, 1, 9)
    assert created["seen"] == dt.datetime(2023, 11, 14, 22, 13, 20, 123456)
    assert created["changed"] == dt.datetime(2026, 11, 26, 5, 0, 0, 500000, tzinfo=dt.UTC)
    assert created["blob"] == b"\x00\xff" and created["counts"] == [("x", 1)]
    assert (
        rows[1]["value"]["before"]["name"] == "ann" and rows[1]["value"]["after"]["name"] == "bea"
    )
    assert rows[2]["value"]["after"] is None
    assert rows[0]["value"]["source"]["snapshot"] == "false"  # the schema's default


def test_round_trip_from_to_from(lake_path: str, kafka: Broker, topics: Topics) -> None:
    lake = init_lake(lake_path)
    source, target = topics.create(), topics.create()
    produce_changes(topics, source)
    sync(lake, kafka, source, "first")
    r = ok(
        "--lake", lake, "kafka", "to", "--pool", "first", "--topic", target, "--format", "connect",
        "--bootstrap", kafka.bootstrap,
    )  # fmt: skip
    assert r.text.strip() == "4"
    written = topics.messages(target)
    envelope = json.loads(written[0]["value"])
    assert set(envelope) == {"schema", "payload"} and envelope["schema"]["type"] == "struct"
    assert json.loads(written[0]["key"])["payload"] == {"id": 1}
    assert written[3]["value"] is None  # the tombstone stays one
    sync(lake, kafka, target, "second")
    first, second = scan(lake, "first"), scan(lake, "second")
    assert second.schema.field("value").type == first.schema.field("value").type
    assert second.column("value").to_pylist() == first.column("value").to_pylist()
    assert second.column("key").to_pylist() == first.column("key").to_pylist()


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (b'{"n": 1}', "not a Kafka Connect envelope"),
        (b'{"schema": {"type": "int8"}, "payload": 300}', "300 does not fit a Connect int8"),
        (b'{"schema": {"type": "bytes"}, "payload": "%%"}', "bytes that are not base64"),
        (b'{"schema": {"type": "nope"}, "payload": 1}', "unknown Connect type 'nope'"),
    ],
)
def test_bad_envelope_fails_the_batch(
    lake_path: str, kafka: Broker, topics: Topics, value: bytes, reason: str
) -> None:
    topic = topics.create()
    good = b'{"schema": {"type": "int32"}, "payload": 5}'
    topics.produce(topic, [good, value], raw=True)
    r = fail(
        "--lake", init_lake(lake_path), "kafka", "from", "--topic", topic, "--pool", "p",
        "--format", "connect", "--bootstrap", kafka.bootstrap, *FAST,
    )  # fmt: skip
    assert error_line(r).startswith(f"error: kafka topic {topic} partition 0 offset 1: {reason}")


def test_key_format_connect_makes_text_keys_structs(
    lake_path: str, kafka: Broker, topics: Topics
) -> None:
    """``limno etl`` keeps a struct key as its JSON text; ``--key-format connect`` sends
    it as a Connect struct envelope (what the JDBC sink's record_key mode needs), a
    tombstone's key too; without it the key goes as its text, as before."""
    lake = init_lake(lake_path)
    source, text, typed = topics.create(), topics.create(), topics.create()
    keys = ['{"ID": 100}', '{"ID": 101}', '{"ID": 100}']
    topics.produce(source, [{"n": 1}, {"n": 2}, None], keys=lambda i: keys[i])
    ok("--lake", lake, "kafka", "from", "--topic", source, "--pool", "staged",
       "--bootstrap", kafka.bootstrap, *FAST)  # fmt: skip
    to = ("--lake", lake, "kafka", "to", "--pool", "staged", "--format", "connect")
    ok(*to, "--topic", text, "--bootstrap", kafka.bootstrap)
    assert [m["key"] for m in topics.messages(text)] == [k.encode() for k in keys]
    ok(*to, "--topic", typed, "--key-format", "connect", "--bootstrap", kafka.bootstrap)
    written = topics.messages(typed)
    schema = {"type": "struct", "optional": True,
              "fields": [{"type": "int64", "optional": True, "field": "ID"}]}  # fmt: skip
    assert [json.loads(m["key"]) for m in written] == [
        {"schema": schema, "payload": {"ID": i}} for i in (100, 101, 100)
    ]
    assert written[2]["value"] is None  # the tombstone, keyed like the others
    sync(lake, kafka, typed, "back")
    assert scan(lake, "back").column("key").to_pylist() == [{"ID": 100}, {"ID": 101}, {"ID": 100}]


def test_key_format_refuses_keys_it_cannot_type(
    lake_path: str, kafka: Broker, topics: Topics
) -> None:
    """Keys of one run that mix JSON objects and other text, or a key that starts like
    an object but is not JSON: one error line naming the record, nothing produced."""
    lake = init_lake(lake_path)
    for bad, reason in [
        ("plain", "its key 'plain' is not a JSON object or array, as other keys of the run are"),
        ('{"ID": ', "its key: invalid JSON"),
    ]:
        source, target = topics.create(), topics.create()
        topics.produce(source, [{"n": 1}, {"n": 2}], keys=['{"ID": 1}', bad].__getitem__)
        pool = f"p{len(bad)}"
        ok("--lake", lake, "kafka", "from", "--topic", source, "--pool", pool,
           "--bootstrap", kafka.bootstrap, *FAST)  # fmt: skip
        r = fail("--lake", lake, "kafka", "to", "--pool", pool, "--topic", target,
                 "--key-format", "connect", "--bootstrap", kafka.bootstrap)  # fmt: skip
        assert error_line(r).startswith(
            f"error: pool {pool} record of partition 0 offset 1: {reason}"
        ), error_line(r)
        assert topics.count(target) == 0

"""``--format avro``: Confluent wire-format Avro both ways, against a real broker and the
schema registry of one real ``limno serve`` (for the module), which also serves the
lake: messages produced with confluent-kafka's AvroSerializer synced into a pool, and
``kafka to`` read back with its AvroDeserializer."""

from __future__ import annotations

import datetime as dt
import decimal
import json
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import Producer
from confluent_kafka.serialization import MessageField, SerializationContext

from git_scenarios import error_line, fail, ok
from kafka_support import KAFKA_TIMEOUT, Broker, Topics
from registry_support import (
    AvroDeserializer,
    AvroSerializer,
    SchemaRegistryClient,
    registry_client,
    serving_registry,
)
from server_support import Served

pytestmark = [pytest.mark.kafka, pytest.mark.usefixtures("isolated_home")]

FAST = ("--batch-interval", "100ms", "--exit-after", "1500ms")

V1 = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "item", "type": "string"},
        {"name": "price", "type": {"type": "bytes", "logicalType": "decimal",
                                   "precision": 9, "scale": 2}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "state", "type": {"type": "enum", "name": "State", "symbols": ["NEW", "PAID"]}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "note", "type": ["null", "string"], "default": None},
    ],
}  # fmt: skip
V2 = {**V1, "fields": [*V1["fields"], {"name": "qty", "type": "int", "default": 1}]}
KEY = {"type": "record", "name": "OrderKey", "fields": [{"name": "id", "type": "long"}]}
AT = dt.datetime(2026, 11, 26, 6, 0, tzinfo=dt.UTC)


def order(i: int, **more: Any) -> dict[str, Any]:
    return {
        "id": i,
        "item": f"item-{i}",
        "price": decimal.Decimal(f"{i}.25"),
        "at": AT + dt.timedelta(seconds=i),
        "state": "PAID" if i % 2 else "NEW",
        "tags": ["a"] * (i % 3),
        "note": None if i % 2 else f"note {i}",
        **more,
    }


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serving_registry(tmp_path_factory.mktemp("avro")) as served:
        yield served


@pytest.fixture
def lake(server: Served, monkeypatch: pytest.MonkeyPatch) -> str:
    """The served lake's URL, with the admin's credentials (lake and registry) in the env."""
    for name, value in server.env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("LIMNO_SCHEMA_REGISTRY", f"{server.url}/registry")
    return server.url


def produce_avro(kafka: Broker, topic: str, sr: SchemaRegistryClient) -> list[dict[str, Any]]:
    """Orders 0-3 under V1, then 4-5 under V2 (a field added), keys Avro too."""
    values = AvroSerializer(sr, json.dumps(V1)), AvroSerializer(sr, json.dumps(V2))
    keys = AvroSerializer(sr, json.dumps(KEY))
    sent = [order(i) for i in range(4)] + [order(i, qty=i) for i in range(4, 6)]
    producer = Producer({"bootstrap.servers": kafka.bootstrap, "log_level": 0})
    for i, value in enumerate(sent):
        serialize = values[1] if "qty" in value else values[0]
        producer.produce(
            topic,
            key=keys({"id": i}, SerializationContext(topic, MessageField.KEY)),
            value=serialize(value, SerializationContext(topic, MessageField.VALUE)),
        )
    assert producer.flush(KAFKA_TIMEOUT) == 0
    return sent


def scan(lake: str, pool: str) -> pa.Table:
    return pa.ipc.open_stream(ok("--lake", lake, "-f", "arrow", "scan", "-p", pool).out).read_all()


def test_avro_from_serializer_and_back(
    lake: str, server: Served, kafka: Broker, topics: Topics
) -> None:
    source, target = topics.create(), topics.create()
    with registry_client(server) as sr:
        sent = produce_avro(kafka, source, sr)
    ok("--lake", lake, "kafka", "from", "--topic", source, "--pool", "orders",
       "--format", "avro", "--bootstrap", kafka.bootstrap, *FAST)  # fmt: skip
    table = scan(lake, "orders")
    value = table.schema.field("value").type
    assert value.field("price").type == pa.decimal128(9, 2)
    assert value.field("at").type == pa.timestamp("ms", tz="UTC")
    assert value.field("qty").type == pa.int32()  # from V2, null in V1's messages
    got = table.column("value").to_pylist()
    assert got == [{**v, "qty": v.get("qty")} for v in sent]
    assert table.column("key").to_pylist() == [{"id": i} for i in range(6)]

    r = ok("--lake", lake, "kafka", "to", "--pool", "orders", "--topic", target,
           "--format", "avro", "--bootstrap", kafka.bootstrap)  # fmt: skip
    assert r.text.strip() == "6"
    with registry_client(server) as sr:
        assert sr.get_latest_version(f"{target}-value").schema_id > 0
        deserialize = AvroDeserializer(sr)
        ctx = SerializationContext(target, MessageField.VALUE)
        back = [deserialize(m["value"], ctx) for m in topics.messages(target)]
    assert back == [{**v, "qty": v.get("qty")} for v in sent]
    assert topics.messages(target)[0]["key"] == b'{"id":0}'  # by default: its JSON text

    # --key-format avro: the keys in the wire format too, their schema as TOPIC-key
    keyed = topics.create()
    ok("--lake", lake, "kafka", "to", "--pool", "orders", "--topic", keyed, "--format", "avro",
       "--key-format", "avro", "--bootstrap", kafka.bootstrap)  # fmt: skip
    with registry_client(server) as sr:
        assert sr.get_latest_version(f"{keyed}-key").schema_id > 0
        deserialize = AvroDeserializer(sr)
        ctx = SerializationContext(keyed, MessageField.KEY)
        keys = [deserialize(m["key"], ctx) for m in topics.messages(keyed)]
    assert keys == [{"id": i} for i in range(6)]


def test_bad_avro_fails_the_batch(lake: str, kafka: Broker, topics: Topics) -> None:
    for raw, reason in [
        (b'{"id": 1}', "not Confluent's Avro wire format (magic byte 0x7b, not 0x00)"),
        (b"\x00\x00\x0f\x42\x40\x02", "unknown schema id 1000000"),
    ]:
        topic = topics.create()
        topics.produce(topic, [raw], raw=True)
        r = fail("--lake", lake, "kafka", "from", "--topic", topic, "--pool", f"p{raw[0]}",
                 "--format", "avro", "--bootstrap", kafka.bootstrap, *FAST)  # fmt: skip
        assert error_line(r) == f"error: kafka topic {topic} partition 0 offset 0: {reason}"

"""``kafka_from_connect`` (issues 16, 17): ``kafka from --format connect`` against
confluent-kafka, on Debezium-shaped change events.

Like ``kafka_from_avro`` (:mod:`bench.kafka_avro`: same broker, partitions and batch
sizes): a topic of Debezium change events of a PostgreSQL table as Kafka Connect's
JsonConverter writes them (``schemas.enable``: each message carries the whole schema
of the change event, some 3 kB, and its key an envelope too; creates and updates, a
decimal, a MicroTimestamp, a Date, a ZonedTimestamp, Debezium's ``source`` block),
100k messages (quick: 10k), consumed by limno into a fresh pool against
confluent-kafka's Consumer alone reading the same topic. Messages/s, and limno's CPU
seconds per 100k messages in the note (load-independent, unlike the rate: the
figure the batch decoding of the format is judged by).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

from bench.harness import Config, Result, median
from bench.kafka import PARTITIONS, _broker, _consume_all, _produce
from bench.kafka_avro import _sync
from bench.tpch_load import cpu_seconds

__all__ = ["change_events", "kafka_from_connect"]

_TIME, _DATA = "io.debezium.time.", "org.apache.kafka.connect.data."


def _field(name: str, kind: str, logical: str | None = None, **more: Any) -> dict[str, Any]:
    named = {} if logical is None else {"name": logical, "version": 1}
    return {"type": kind, "optional": name != "id", **named, **more, "field": name}


_ROW = {
    "type": "struct",
    "optional": True,
    "name": "pg.public.invoices.Value",
    "fields": [
        _field("id", "int32"),
        _field("customer", "string"),
        _field("amount", "bytes", _DATA + "Decimal", parameters={"scale": "2"}),
        _field("issued", "int32", _TIME + "Date"),
        _field("created", "int64", _TIME + "MicroTimestamp"),
        _field("updated", "string", _TIME + "ZonedTimestamp"),
        _field("status", "string"),
        _field("lines", "int16"),
    ],
}
_SOURCE = [
    _field("version", "string"),
    _field("connector", "string"),
    _field("name", "string"),
    _field("ts_ms", "int64"),
    _field("snapshot", "string", "io.debezium.data.Enum", parameters={"allowed": "true,false"}),
    _field("db", "string"),
    _field("sequence", "string"),
    _field("schema", "string"),
    _field("table", "string"),
    _field("txId", "int64"),
    _field("lsn", "int64"),
    _field("xmin", "int64"),
]
VALUE_SCHEMA = {
    "type": "struct",
    "optional": False,
    "name": "pg.public.invoices.Envelope",
    "version": 1,
    "fields": [
        {**_ROW, "field": "before"},
        {**_ROW, "field": "after"},
        {"type": "struct", "optional": False, "fields": _SOURCE, "field": "source"},
        _field("op", "string"),
        _field("ts_ms", "int64"),
    ],
}
KEY_SCHEMA = {"type": "struct", "name": "pg.public.invoices.Key", "fields": [_field("id", "int32")]}


def _row(i: int, version: int) -> dict[str, Any]:
    cents = 1_000 + i % 99_991 + version
    return {
        "id": i,
        "customer": f"c{i % 1000}",
        "amount": base64.b64encode(cents.to_bytes(4, "big", signed=True)).decode(),
        "issued": 20_000 + i % 365,
        "created": 1_764_000_000_000_000 + i,
        "updated": f"2026-11-26T10:{i % 60:02d}:{version:02d}.123456Z",
        "status": "open" if version == 0 else "paid",
        "lines": i % 50,
    }


def _text(schema: dict[str, Any], payload: Any) -> bytes:
    return json.dumps({"schema": schema, "payload": payload}, separators=(",", ":")).encode()


def change_events(count: int) -> Iterator[dict[str, Any]]:
    """``count`` Debezium change events (a create, then an update of the same row)."""
    for i in range(count):
        row, update = i // 2, i % 2
        source = {
            "version": "2.7.3.Final",
            "connector": "postgresql",
            "name": "pg",
            "ts_ms": 1_764_000_000_000 + i,
            "snapshot": "false",
            "db": "shop",
            "sequence": f'["{i}","{i + 1}"]',
            "schema": "public",
            "table": "invoices",
            "txId": 700 + i,
            "lsn": 24_000_000 + i,
            "xmin": None,
        }
        payload = {
            "before": _row(row, 0) if update else None,
            "after": _row(row, update),
            "source": source,
            "op": "u" if update else "c",
            "ts_ms": 1_764_000_000_100 + i,
        }
        yield {
            "partition": row % PARTITIONS,
            "key": _text(KEY_SCHEMA, {"id": row}),
            "value": _text(VALUE_SCHEMA, payload),
        }


def kafka_from_connect(cfg: Config) -> list[Result]:
    """Debezium messages/s into a pool against confluent-kafka consuming the same."""
    with _broker(cfg) as setup:
        topic = setup.topic()
        count = _produce(setup.bootstrap, topic, change_events(cfg.rows(100_000, 10_000)))
        limno, peer, cpus = [], [], []
        for _ in range(cfg.repeat):
            peer.append(count / _consume_all(setup.bootstrap, topic, count))
            cpu = cpu_seconds()
            limno.append(
                count / _sync(setup.lake(), topic, setup.bootstrap, None, count, "connect")
            )
            cpus.append(cpu_seconds() - cpu)
    return [
        Result(
            "kafka_from_connect",
            "throughput",
            "msgs/s",
            median(limno),
            {"confluent-kafka": median(peer)},
            True,
            note=f"limno {median(cpus) / count * 100_000:.2f} CPU s per 100k messages",
        )
    ]

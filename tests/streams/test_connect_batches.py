"""``kafka from --format connect`` reads a batch's envelopes at once (each distinct
schema parsed once, the payloads sharing it in one pass of pyarrow's JSON reader:
``formats_connect.Batches``) and message by message only when that does not fit. The
two paths must give the same records, types included, and the same bad messages: each
case here decodes one batch both ways (the message-by-message one is ConnectDecoder
with its batch reading switched off). The messages are stand-ins with
confluent-kafka's Message methods (tests/streams/test_kafka_connect.py runs the format
against a real broker)."""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pytest

from kafka_stand_ins import Msg
from limno.errors import InvalidInputError
from limno.streams.formats import ConnectDecoder, Decoder
from limno.streams.kafka_records import decode_records

DBZ, CONNECT = "io.debezium.time.", "org.apache.kafka.connect.data."


class OneByOne(ConnectDecoder):
    """The message-by-message path alone (what every batch took before)."""

    fast_values = Decoder.fast_values
    fast_keys = Decoder.fast_keys


def text(doc: Any) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()  # as JsonConverter writes


def envelope(schema: dict[str, Any], payload: Any) -> bytes:
    return text({"schema": schema, "payload": payload})


def field(name: str, kind: str, logical: str | None = None, **more: Any) -> dict[str, Any]:
    return {"type": kind, "optional": True, "field": name, **more} | (
        {} if logical is None else {"name": logical}
    )


ROW_FIELDS = [
    field("id", "int32", optional=False),
    field("small", "int16"),
    field("name", "string"),
    field("ratio", "float"),
    field("score", "double"),
    field("paid", "boolean"),
    field("state", "string", "io.debezium.data.Enum"),
    field("blob", "bytes"),
    field("amount", "bytes", CONNECT + "Decimal", parameters={"scale": "2"}),
    field("day", "int32", DBZ + "Date"),
    field("at", "int64", DBZ + "MicroTimestamp"),
    field("at_ms", "int64", CONNECT + "Timestamp"),
    field("at_ns", "int64", DBZ + "NanoTimestamp"),
    field("clock", "int64", DBZ + "MicroTime"),
    field("zoned", "string", DBZ + "ZonedTimestamp"),
    field("tags", "array", items={"type": "string", "optional": True}),
]
ROW = {"type": "struct", "optional": True, "fields": ROW_FIELDS}
VALUE_SCHEMA = {
    "type": "struct",
    "name": "dbz.public.invoices.Envelope",
    "fields": [
        {**ROW, "field": "before"},
        {**ROW, "field": "after"},
        {
            "type": "struct",
            "field": "source",
            "fields": [field("db", "string"), field("lsn", "int64")],
        },
        field("op", "string"),
        field("ts_ms", "int64"),
        field("ts_ns", "int64"),
    ],
}
KEY_SCHEMA = {"type": "struct", "name": "k", "fields": [field("id", "int32", optional=False)]}


def row(i: int) -> dict[str, Any]:
    cents = (-1) ** i * (123_456 + i)
    return {
        "id": i,
        "small": -300 + i % 1000,
        "name": f"é{i}" if i % 3 else None,
        "ratio": 0.1 * i,
        "score": i / 7,
        "paid": i % 2 == 0,
        "state": "open",
        "blob": base64.b64encode(bytes([i % 256, 255])).decode(),
        "amount": base64.b64encode(cents.to_bytes(4, "big", signed=True)).decode(),
        "day": 20_000 - i,
        "at": 1_764_000_000_123_456 + i,
        "at_ms": 1_764_000_000_123 + i,
        "at_ns": 1_764_000_000_123_456_789 + i,
        "clock": 3_600_000_001 + i,
        "zoned": f"2026-11-26T10:0{i % 10}:00.5+02:00",
        "tags": ["a", None] if i % 2 else [],
        "ignored": {"by": "the schema"},
    }


def change(i: int, op: str = "u", schema: dict[str, Any] = VALUE_SCHEMA) -> bytes:
    payload = {
        "before": None if op == "c" else row(i),
        "after": None if op == "d" else row(i + 1),
        "source": {"db": "shop", "lsn": 10_000 + i},
        "op": op,
        "ts_ms": 1_764_000_000_000 + i,
        "ts_ns": 1_764_000_000_000_000_000 + i,
    }
    return envelope(schema, payload)


def key(i: int) -> bytes:
    return envelope(KEY_SCHEMA, {"id": i})


def debezium(count: int) -> list[tuple[bytes | None, bytes | None]]:
    """(value, key) of creates, updates, a delete and its tombstone."""
    out: list[tuple[bytes | None, bytes | None]] = []
    for i in range(count):
        out.append((change(i, "cru"[i % 3]), key(i)))
    out += [(change(count, "d"), key(count)), (None, key(count))]
    return out


def both(pairs: list[tuple[bytes | None, bytes | None]]) -> tuple[pa.Table, list[Any]]:
    """The batch decoded both ways (which must agree): its table and bad messages."""
    messages: list[Any] = [
        Msg(value, i, k, "dbz.public.invoices") for i, (value, k) in enumerate(pairs)
    ]
    fast, fast_bad = decode_records(messages, ConnectDecoder(), keep_bad=True)
    slow, slow_bad = decode_records(messages, OneByOne(), keep_bad=True)
    assert fast.schema == slow.schema
    assert fast.to_pylist() == slow.to_pylist()
    assert fast.equals(slow)
    assert [(m.offset(), why) for m, why in fast_bad] == [(m.offset(), w) for m, w in slow_bad]
    if not slow_bad:
        return fast, []
    with pytest.raises(InvalidInputError) as fails_fast:
        decode_records(messages, ConnectDecoder())
    with pytest.raises(InvalidInputError) as fails_slow:
        decode_records(messages, OneByOne())
    assert str(fails_fast.value) == str(fails_slow.value)
    return fast, fast_bad


def batched(raws: Sequence[bytes | None]) -> bool:
    """Whether the values are read at once (not message by message)."""
    return ConnectDecoder().fast_values(raws) is not None


def test_debezium_changes_at_once_equal_one_by_one() -> None:
    pairs = debezium(12)
    assert batched([v for v, _ in pairs]) and batched([k for _, k in pairs])
    table, _ = both(pairs)
    after = table.column("value").type.field("after").type
    assert after.field("amount").type == pa.decimal128(38, 2)
    assert after.field("at").type == pa.timestamp("us")
    assert after.field("zoned").type == pa.timestamp("us", tz="UTC")
    assert table.column("key").to_pylist()[-1] == {"id": 12}
    assert table.column("value").to_pylist()[-1] is None  # the tombstone
    assert table.num_rows == 14


def test_schemas_of_one_type_share_a_pass_of_other_types_are_unified() -> None:
    renamed = {**VALUE_SCHEMA, "name": "other.Envelope", "version": 2}
    same_type = [change(0), change(1, schema=renamed), None, change(2)]
    assert batched(same_type)
    both([(v, None) for v in same_type])
    wider = {**VALUE_SCHEMA, "fields": [*VALUE_SCHEMA["fields"], field("extra", "int64")]}
    mixed = [change(0), change(1, schema=wider), None, change(2)]
    assert batched(mixed)
    table, _ = both([(v, None) for v in mixed])
    assert table.column("value").type.get_field_index("extra") >= 0


@pytest.mark.parametrize(
    "bad",
    [
        b'{"schema":{"type":"int16"},"payload":70000}',  # out of an int16
        b'{"schema":{"type":"int32"},"payload":"1"}',  # text for a number
        b'{"schema":{"type":"int32"},"payload":1.0}',  # a float for an int
        b'{"schema":{"type":"int32"},"payload":1,"extra":2}',  # not an envelope
        b'{"schema":{"type":"int32"},"payload":1',  # not JSON
        b'{"schema":{"type":"nope"},"payload":1}',  # not a Connect type
        b'{"schema":{"type":"int32"},"payload":1}}',  # trailing bytes
        b'{"schema":{"type":"int32"},"payload":1} {"schema":{"type":"int32"},"payload":2}',
        b'{"schema":{"type":"int32"},"payload":"\xff"}',  # not UTF-8
        b'{"schema":{"type":"bytes"},"payload":"not base64!"}',
        b'{"schema":{"type":"string"},"payload":"a\nraw line break"}',  # not JSON
        b"[" * 40 + b"]" * 40,  # too deep
    ],
)
def test_a_bad_message_among_good_ones_is_named_as_before(bad: bytes) -> None:
    good = envelope({"type": "int32"}, 7)
    _, found = both([(good, None), (bad, b"k"), (good, key(3)), (None, None)])
    assert len(found) == 1 and found[0][0].offset() == 1


@pytest.mark.parametrize(
    "raw",
    [
        envelope({"type": "map", "keys": {"type": "string"}, "values": {"type": "int32"}}, {}),
        envelope({"type": "int32", "name": CONNECT + "Date"}, 10**9),  # out of Python's dates
        b'{"schema": {"type": "int32"}, "payload": 5}',  # spaces: not JsonConverter's text
        b'{"payload":5,"schema":{"type":"int32"}}',
    ],
)
def test_what_a_pass_does_not_read_goes_one_by_one(raw: bytes) -> None:
    assert not batched([raw, raw])
    _, bad = both([(raw, b"plain key"), (raw, key(1))])
    if b"1000000000" in raw:  # out of Python's dates: a bad message, named, both paths
        assert [(m.offset(), "out of range for a Date" in why) for m, why in bad] == [
            (0, True),
            (1, True),
        ]


def test_keys_of_a_batch_mixing_envelopes_and_text_stay_text() -> None:
    value = envelope({"type": "string"}, "v")
    table, _ = both([(value, key(1)), (value, b"plain"), (value, None)])
    assert table.column("key").type == pa.string()


@pytest.mark.parametrize(
    ("logical", "kind", "numbers"),
    [
        (DBZ + "MicroTime", "int64", [90_000_000_000, 1]),  # beyond a day: wrapped
        (CONNECT + "Time", "int32", [86_399_999, None]),
        (DBZ + "NanoTime", "int64", [1_999, 86_399_999_999_999]),
        (DBZ + "NanoTimestamp", "int64", [-1_500, 2_500]),  # cut toward the past
        (DBZ + "Timestamp", "int64", [-62_135_596_800_000, 0]),  # the first of year 1
        (CONNECT + "Date", "int32", [None, None]),
    ],
)
def test_logical_numbers_at_once_as_one_by_one(
    logical: str, kind: str, numbers: list[int | None]
) -> None:
    raws: list[bytes | None] = [envelope({"type": kind, "name": logical}, n) for n in numbers]
    assert batched(raws)
    both([(raw, None) for raw in raws])


def test_defaults_fill_nulls_where_their_struct_is_there() -> None:
    """Debezium's ``source.snapshot`` has a default: a null or missing field takes it,
    a field of a null struct stays hidden; a struct's own default likewise."""
    snapshot = field("snapshot", "string", "io.debezium.data.Enum", default="false")
    inner = {"type": "struct", "optional": True, "field": "s", "fields": [snapshot]}
    stamp = field("day", "int32", CONNECT + "Date", default=3)
    whole = {**inner, "field": "w", "default": {"snapshot": "last"}}
    schema = {"type": "struct", "fields": [inner, stamp, whole]}
    payloads = [
        {"s": {"snapshot": None}, "day": None, "w": None},
        {"s": {}, "w": {"snapshot": None}},
        {"s": None, "day": 9, "w": {"snapshot": "true"}},
    ]
    raws = [envelope(schema, p) for p in payloads]
    assert batched(raws)
    table, _ = both([(raw, None) for raw in raws])
    assert table.column("value").to_pylist()[1]["s"] == {"snapshot": "false"}

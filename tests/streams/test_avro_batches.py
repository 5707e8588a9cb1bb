"""``kafka from --format avro`` decodes a batch whose values carry one schema id in one
tight loop, and its keys at once when none is in the wire format
(limno.streams.formats_avro, ``fast_values`` and ``fast_keys``); anything else is
read message by message. Each batch here must get exactly the answer of the
message-by-message path, which names a bad message. Schemas come from the registry
of a real ``limno serve``; the messages are stand-ins with confluent-kafka's Message
methods (a unit test of the decoding; test_kafka_avro.py runs it on a real broker)."""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import fastavro
import pyarrow as pa
import pytest

from limno.errors import InvalidInputError
from limno.streams.formats import Decoder
from limno.streams.formats_avro import AvroDecoder
from limno.streams.kafka_records import decode_records
from registry_support import Schema, registry_client, serving_registry

SCHEMA = {
    "type": "record",
    "name": "Payment",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "user", "type": ["null", "string"], "default": None},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    ],
}
#: the same record with a field added (a second schema id)
WIDER = {**SCHEMA, "fields": [*SCHEMA["fields"], {"name": "n", "type": "int", "default": 0}]}


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int, int]]:
    """The registry's URL, and the ids of SCHEMA and WIDER in it."""
    with serving_registry(tmp_path_factory.mktemp("registry")) as served:
        client = registry_client(served)
        first = client.register_schema("p-value", Schema(json.dumps(SCHEMA), "AVRO"))
        second = client.register_schema("p-value", Schema(json.dumps(WIDER), "AVRO"))
        with pytest.MonkeyPatch.context() as mp:
            for k, v in served.env.items():
                mp.setenv(k, v)
            yield f"{served.url}/registry", first, second


def wire(schema_id: int, i: int, schema: dict[str, Any] = SCHEMA) -> bytes:
    out = io.BytesIO()
    out.write(b"\x00" + schema_id.to_bytes(4, "big"))
    value = {"id": i, "user": None if i % 2 else f"u{i}", "at": 1_700_000_000_000 + i, "n": i}
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), value)
    return out.getvalue()


def Msg(value: bytes | None, at: int, key: bytes | None = b"k") -> Any:  # noqa: N802
    """A stand-in of a consumed message (confluent-kafka's Message methods)."""
    return SimpleNamespace(
        value=lambda: value, key=lambda: key, headers=lambda: None, topic=lambda: "t",
        partition=lambda: 0, offset=lambda: at, timestamp=lambda: (1, 1_700_000_000_000 + at),
    )  # fmt: skip


class ByMessage(AvroDecoder):
    """The message-by-message path alone: what each batch must equal."""

    def fast_values(self, raws: Any) -> pa.Array | None:
        return None

    def fast_keys(self, raws: Any) -> pa.Array | None:
        return None


Batch = Callable[[int, int], list[Any]]
BATCHES: dict[str, Batch] = {
    "one schema": lambda a, b: [Msg(wire(a, i), i, f"k{i}".encode()) for i in range(6)],
    "tombstones, no keys": lambda a, b: [
        Msg(None if i % 3 == 0 else wire(a, i), i, None) for i in range(6)
    ],
    "two schema ids": lambda a, b: [
        Msg(wire(b, i, WIDER) if i > 2 else wire(a, i), i) for i in range(6)
    ],
    "wire-format key": lambda a, b: [Msg(wire(a, i), i, wire(a, 100 + i)) for i in range(4)],
}
BAD: dict[str, Batch] = {
    "bytes over": lambda a, b: [Msg(wire(a, i) + (b"x" if i == 2 else b""), i) for i in range(4)],
    "short body": lambda a, b: [Msg(wire(a, i)[: -1 if i == 1 else None], i) for i in range(4)],
    "unknown id": lambda a, b: [Msg(wire(a if i else 99_999, i), i) for i in range(4)],
    "key not UTF-8": lambda a, b: [
        Msg(wire(a, i), i, b"\xff" if i == 3 else b"k") for i in range(4)
    ],
}


@pytest.mark.parametrize("name", list(BATCHES))
def test_a_batch_read_at_once_equals_message_by_message(
    registry: tuple[str, int, int], name: str
) -> None:
    url, first, second = registry
    messages = BATCHES[name](first, second)
    table, bad = decode_records(messages, AvroDecoder(url))
    expected, _ = decode_records(messages, ByMessage(url))
    assert not bad
    assert table.equals(expected), (table.to_pylist(), expected.to_pylist())
    if name == "one schema":  # the one-loop paths are taken
        assert AvroDecoder(url).fast_values([m.value() for m in messages]) is not None
        assert Decoder().fast_keys([m.key() for m in messages]) is not None


@pytest.mark.parametrize("name", list(BAD))
def test_a_bad_message_is_named_as_message_by_message(
    registry: tuple[str, int, int], name: str
) -> None:
    url, first, second = registry
    messages = BAD[name](first, second)
    with pytest.raises(InvalidInputError) as fast:
        decode_records(messages, AvroDecoder(url))
    with pytest.raises(InvalidInputError) as slow:
        decode_records(messages, ByMessage(url))
    assert str(fast.value) == str(slow.value)
    kept = decode_records(messages, AvroDecoder(url), keep_bad=True)
    expected = decode_records(messages, ByMessage(url), keep_bad=True)
    assert kept[0].equals(expected[0])
    assert [(m.offset(), why) for m, why in kept[1]] == [
        (m.offset(), why) for m, why in expected[1]
    ]
    assert len(kept[1]) == 1

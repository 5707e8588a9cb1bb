"""Kafka messages as pool records: ``{kafka:{topic,partition,offset,timestamp}, key,
value, headers}``.

* ``kafka``: where the message was (``partition`` int32, ``offset`` int64) and its
  timestamp (``timestamp[ms, UTC]``; null when the broker has none).
* ``key``: the key's bytes as UTF-8 text, not parsed (null when absent): keys are
  mostly ids, and text keeps keys of different shapes in one column (``--format
  connect``: a key that is a Connect envelope is decoded, see :mod:`.formats`).
* ``value``: the value as its format says (:mod:`.formats`; null for a tombstone).
  JSON by default: an object becomes a struct, typed like ``limno load`` types an
  ndjson file.
* ``headers``: a list of ``{key, value}`` text pairs, in the message's order.

A message that does not fit (invalid JSON, a key or header that is not UTF-8, JSON
nested too deep) fails its whole batch with :class:`~limno.errors.InvalidInputError`
naming the topic, partition and offset: nothing of the batch is committed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import pyarrow as pa

from limno.errors import InvalidInputError
from limno.streams.formats import Decoder, Undecodable

if TYPE_CHECKING:
    from confluent_kafka import Message

__all__ = [
    "KAFKA_TYPE",
    "Bad",
    "batch_ranges",
    "decode_records",
    "position",
    "records_table",
    "where",
]

KAFKA_TYPE = pa.struct(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.timestamp("ms", tz="UTC")),
    ]
)
_HEADERS_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.string())]))


def where(message: Message) -> str:
    """``topic T partition P offset O``: how errors name a message."""
    return f"topic {message.topic()} partition {message.partition()} offset {message.offset()}"


def position(message: Message) -> tuple[int, int]:
    """(partition, offset) of a consumed message (the client types both optional)."""
    partition, offset = message.partition(), message.offset()
    assert partition is not None and offset is not None, "a consumed message has both"
    return partition, offset


def records_table(messages: Sequence[Message], *, decoder: Decoder | None = None) -> pa.Table:
    """One table of the records of ``messages`` (see the module docstring), their keys
    and values read by ``decoder`` (JSON by default); a message that does not decode
    fails the batch (InvalidInputError naming it)."""
    return decode_records(messages, decoder)[0]


#: a message that did not decode, and why
Bad = tuple["Message", str]


def decode_records(
    messages: Sequence[Message], decoder: Decoder | None = None, *, keep_bad: bool = False
) -> tuple[pa.Table, list[Bad]]:
    """The records of the messages that decode, and (``keep_bad``) those that do not
    with the reason; without ``keep_bad`` the first that does not fails the batch."""
    decoder = decoder or Decoder()
    whole = decoder.fast_values([m.value() for m in messages])  # None: value by value
    keys, values, headers, good, bad = [], [], [], [], []
    for m in messages:
        try:
            key, value = m.key(), m.value()
            parsed = (
                None if key is None else decoder.parse_key(key),
                None if value is None or whole is not None else decoder.parse(value),
                _headers(m),
            )
        except Undecodable as e:
            if not keep_bad:
                raise InvalidInputError(f"kafka {where(m)}: {e}") from None
            bad.append((m, str(e)))
            continue
        keys.append(parsed[0])
        values.append(parsed[1])
        headers.append(parsed[2])
        good.append(m)
    topic = messages[0].topic() if messages else ""
    if whole is not None and bad:  # keys or headers set some aside: their values too
        kept = {id(m) for m in good}
        whole = whole.filter(pa.array([id(m) in kept for m in messages]))
    table = pa.table(
        {
            "kafka": _kafka_column(good),
            "key": decoder.key_column(keys),
            "value": whole
            if whole is not None
            else decoder.column(values, [position(m)[1] for m in good], str(topic))
            if good
            else pa.nulls(0),  # every message bad: the table is not committed
            "headers": pa.array(headers, _HEADERS_TYPE),
        }
    )
    return table, bad


def batch_ranges(messages: Sequence[Message]) -> dict[str, dict[int, tuple[int, int]]]:
    """``{topic: {partition: (first, last) offset}}`` of a batch of messages."""
    ranges: dict[str, dict[int, tuple[int, int]]] = {}
    for m in messages:
        p, o = position(m)
        spans = ranges.setdefault(str(m.topic()), {})
        first, last = spans.get(p, (o, o))
        spans[p] = (min(first, o), max(last, o))
    return ranges


def _kafka_column(messages: Sequence[Message]) -> pa.StructArray:
    stamps = []
    for m in messages:
        kind, ms = m.timestamp()
        stamps.append(ms if kind != 0 and ms >= 0 else None)  # 0: TIMESTAMP_NOT_AVAILABLE
    return pa.StructArray.from_arrays(
        [
            pa.array([m.topic() for m in messages], pa.string()),
            pa.array([m.partition() for m in messages], pa.int32()),
            pa.array([m.offset() for m in messages], pa.int64()),
            pa.array(stamps, pa.int64()).cast(KAFKA_TYPE.field("timestamp").type),
        ],
        fields=list(KAFKA_TYPE),
    )


def _text(raw: bytes | str | None, what: str) -> str | None:
    if raw is None or isinstance(raw, str):
        return raw
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise Undecodable(f"its {what} is not UTF-8") from None


def _headers(message: Message) -> list[dict[str, str | None]]:
    headers = message.headers() or []
    pairs = headers.items() if isinstance(headers, dict) else headers  # consumed: a list
    return [{"key": name, "value": _text(value, f"header {name!r}")} for name, value in pairs]

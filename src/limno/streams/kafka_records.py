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
from typing import TYPE_CHECKING, Any

import numpy as np
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
    with the reason; without ``keep_bad`` the first that does not fails the batch.

    A batch is read whole first (values, keys and headers each one column at once,
    when the format can: :meth:`Decoder.fast_values`, :meth:`Decoder.fast_keys`):
    per message, Python work is the slowest part of a sync. When any part does not
    fit, the messages are read one by one, which names the one at fault."""
    decoder = decoder or Decoder()
    keys = [m.key() for m in messages]
    values = [m.value() for m in messages]
    heads = [m.headers() for m in messages]
    whole = decoder.fast_values(values)  # None: value by value
    if whole is not None and not any(heads):
        key_column = decoder.fast_keys(keys)
        if key_column is not None:  # every message decoded: none is bad
            return pa.table(
                {
                    "kafka": _kafka_column(messages),
                    "key": key_column,
                    "value": whole,
                    "headers": _no_headers(len(messages)),
                }
            ), []
    parsed_keys, parsed_values, headers, good, bad = [], [], [], [], []
    for m, key, value, head in zip(messages, keys, values, heads, strict=True):
        try:
            parsed = (
                None if key is None else decoder.parse_key(key),
                None if value is None or whole is not None else decoder.parse(value),
                _headers(head),
            )
        except Undecodable as e:
            if not keep_bad:
                raise InvalidInputError(f"kafka {where(m)}: {e}") from None
            bad.append((m, str(e)))
            continue
        parsed_keys.append(parsed[0])
        parsed_values.append(parsed[1])
        headers.append(parsed[2])
        good.append(m)
    topic = messages[0].topic() if messages else ""
    if whole is not None and bad:  # keys or headers set some aside: their values too
        kept = {id(m) for m in good}
        whole = whole.filter(pa.array([id(m) in kept for m in messages]))
    table = pa.table(
        {
            "kafka": _kafka_column(good),
            "key": decoder.key_column(parsed_keys),
            "value": whole
            if whole is not None
            else decoder.column(parsed_values, [position(m)[1] for m in good], str(topic))
            if good
            else pa.nulls(0),  # every message bad: the table is not committed
            "headers": pa.array(headers, _HEADERS_TYPE),
        }
    )
    return table, bad


def batch_ranges(messages: Sequence[Message]) -> dict[str, dict[int, tuple[int, int]]]:
    """``{topic: {partition: (first, last) offset}}`` of a batch of messages (grouped
    by Arrow: a batch holds up to hundreds of thousands)."""
    if not messages:
        return {}
    positions = pa.table(
        {
            "t": pa.array([m.topic() for m in messages], pa.string()),
            "p": pa.array([m.partition() for m in messages], pa.int32()),
            "o": pa.array([m.offset() for m in messages], pa.int64()),
        }
    )
    spans = positions.group_by(["t", "p"]).aggregate([("o", "min"), ("o", "max")]).to_pydict()
    ranges: dict[str, dict[int, tuple[int, int]]] = {}
    for topic, p, first, last in zip(
        spans["t"], spans["p"], spans["o_min"], spans["o_max"], strict=True
    ):
        assert p is not None and first is not None, "a consumed message has both"
        ranges.setdefault(str(topic), {})[p] = (first, last)
    return ranges


def _kafka_column(messages: Sequence[Message]) -> pa.StructArray:
    stamps = [m.timestamp() for m in messages]
    return pa.StructArray.from_arrays(
        [
            pa.array([m.topic() for m in messages], pa.string()),
            pa.array([m.partition() for m in messages], pa.int32()),
            pa.array([m.offset() for m in messages], pa.int64()),
            # kind 0: TIMESTAMP_NOT_AVAILABLE
            pa.array(
                [ms if kind != 0 and ms >= 0 else None for kind, ms in stamps], pa.int64()
            ).cast(KAFKA_TYPE.field("timestamp").type),
        ],
        fields=list(KAFKA_TYPE),
    )


def _no_headers(count: int) -> pa.Array:
    """``count`` empty header lists (what :func:`_headers` gives a message without)."""
    offsets = pa.array(np.zeros(count + 1, np.int32))
    return pa.ListArray.from_arrays(
        offsets, pa.array([], _HEADERS_TYPE.value_type), type=_HEADERS_TYPE
    )


def _text(raw: bytes | str | None, what: str) -> str | None:
    if raw is None or isinstance(raw, str):
        return raw
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise Undecodable(f"its {what} is not UTF-8") from None


def _headers(headers: Any) -> list[dict[str, str | None]]:
    """A message's headers (``Message.headers()``) as ``{key, value}`` text pairs."""
    headers = headers or []
    pairs = headers.items() if isinstance(headers, dict) else headers  # consumed: a list
    return [{"key": name, "value": _text(value, f"header {name!r}")} for name, value in pairs]

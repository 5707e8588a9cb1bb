"""Kafka messages as pool records: ``{kafka:{topic,partition,offset,timestamp}, key,
value, headers}``.

* ``kafka``: where the message was (``partition`` int32, ``offset`` int64) and its
  timestamp (``timestamp[ms, UTC]``; null when the broker has none).
* ``key``: the key's bytes as UTF-8 text, not parsed (null when absent): keys are
  mostly ids, and text keeps keys of different shapes in one column.
* ``value``: the value parsed as JSON (an object becomes a struct; null for a
  tombstone), typed like ``limno load`` types an ndjson file: pyarrow's JSON reader,
  else, when values disagree in type, limno's widening rule
  (:func:`limno.data.python_rows.python_table`).
* ``headers``: a list of ``{key, value}`` text pairs, in the message's order.

A message that does not fit (invalid JSON, a key or header that is not UTF-8, JSON
nested too deep) fails its whole batch with :class:`~limno.errors.InvalidInputError`
naming the topic, partition and offset: nothing of the batch is committed.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.json as pjson

from limno.data.input_checks import check_json_nesting
from limno.data.python_rows import python_table
from limno.errors import InvalidInputError

if TYPE_CHECKING:
    from confluent_kafka import Message

__all__ = ["KAFKA_TYPE", "position", "records_table", "where"]

KAFKA_TYPE = pa.struct(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.timestamp("ms", tz="UTC")),
    ]
)
_HEADERS_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.string())]))
#: 19 digits or more: an integer pyarrow's JSON reader would round to a float
_LONG_INTEGER = re.compile(rb"\d{19}")
_LINE_BREAKS = bytes.maketrans(b"\r\n", b"  ")  # JSON whitespace: safe to flatten


def where(message: Message) -> str:
    """``topic T partition P offset O``: how errors name a message."""
    return f"topic {message.topic()} partition {message.partition()} offset {message.offset()}"


def position(message: Message) -> tuple[int, int]:
    """(partition, offset) of a consumed message (the client types both optional)."""
    partition, offset = message.partition(), message.offset()
    assert partition is not None and offset is not None, "a consumed message has both"
    return partition, offset


def records_table(messages: Sequence[Message]) -> pa.Table:
    """One table of the records of ``messages`` (see the module docstring)."""
    return pa.table(
        {
            "kafka": _kafka_column(messages),
            "key": pa.array([_text(m, m.key(), "key") for m in messages], pa.string()),
            "value": _values(messages),
            "headers": pa.array([_headers(m) for m in messages], _HEADERS_TYPE),
        }
    )


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


def _text(message: Message, raw: bytes | str | None, what: str) -> str | None:
    if raw is None or isinstance(raw, str):
        return raw
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidInputError(f"kafka {where(message)}: its {what} is not UTF-8") from None


def _headers(message: Message) -> list[dict[str, str | None]]:
    headers = message.headers() or []
    pairs = headers.items() if isinstance(headers, dict) else headers  # consumed: a list
    return [
        {"key": name, "value": _text(message, value, f"header {name!r}")} for name, value in pairs
    ]


def _values(messages: Sequence[Message]) -> pa.Array | pa.ChunkedArray:
    """The values parsed as JSON, one column: each is checked here first (an error
    names its message), then the block of all is read by pyarrow, or in Python when
    pyarrow would type it differently from ``limno load``."""
    parsed: list[Any] = []
    lines: list[bytes] = []
    for m in messages:
        raw = m.value()
        if raw is None:
            parsed.append(None)
            lines.append(b'{"v":null}\n')
            continue
        data = raw.encode() if isinstance(raw, str) else raw
        try:
            parsed.append(json.loads(data))
        except json.JSONDecodeError as e:
            raise InvalidInputError(f"kafka {where(m)}: invalid JSON ({e.msg})") from None
        except UnicodeDecodeError:
            raise InvalidInputError(f"kafka {where(m)}: its value is not UTF-8") from None
        except RecursionError:
            raise InvalidInputError(f"kafka {where(m)}: JSON nested too deep") from None
        # valid JSON, hence one value: it cannot break out of the wrapping object
        lines.append(b'{"v":' + data.translate(_LINE_BREAKS) + b"}\n")
    block = b"".join(lines)
    try:
        check_json_nesting("kafka", block, 1)  # deep JSON crashes pyarrow's parser
    except InvalidInputError as e:
        found = re.search(r"line (\d+)", str(e))
        line = int(found.group(1)) if found else 1
        raise InvalidInputError(
            f"kafka {where(messages[min(line, len(messages)) - 1])}: JSON nested too deep"
        ) from None
    if _LONG_INTEGER.search(block) is None:
        try:
            opts = pjson.ReadOptions(block_size=len(block) + 1)  # one block: one inference
            return pjson.read_json(io.BytesIO(block), read_options=opts).column("v")
        except (pa.ArrowInvalid, KeyError):
            pass  # values of disagreeing types: widened below
    first = messages[0]
    table = python_table(
        f"kafka topic {first.topic()}",
        [{"v": v} for v in parsed],
        [position(m)[1] for m in messages],
    )
    return table.column("v")

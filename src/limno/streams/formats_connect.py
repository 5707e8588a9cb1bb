"""The Kafka Connect JSON envelope (``{"schema": ..., "payload": ...}``), both ways.

What Kafka Connect's JsonConverter writes with ``schemas.enable=true`` (and Debezium's
change events through it): the payload is typed by the schema, so a value keeps the
types its source had (an ``int16`` stays ``int16``, a decimal stays exact) instead of
what JSON alone can say. Reading (:func:`arrow_type`, :func:`from_payload`):

* ``int8``..``int64`` -> ``int8``..``int64``; ``float`` -> ``float32``; ``double`` ->
  ``float64``; ``boolean``, ``string``; ``bytes`` (base64) -> ``binary``;
  ``struct`` -> struct; ``array`` -> list; ``map`` -> map (a JSON object when its keys
  are strings, else a list of ``[key, value]`` pairs, as JsonConverter writes them).
* Logical types by the schema's ``name``: Connect's ``Decimal`` (base64 of the
  big-endian unscaled integer, ``parameters.scale``) -> ``decimal128``; ``Date`` (days)
  -> ``date32``; ``Time`` (ms of the day) -> ``time32[ms]``; ``Timestamp`` (ms) ->
  ``timestamp[ms, UTC]``; Debezium's ``io.debezium.time.Date``, ``Time``,
  ``MicroTime``, ``NanoTime``, ``Timestamp``, ``MicroTimestamp``, ``NanoTimestamp``
  (local date-times, no zone) and ``ZonedTimestamp`` (ISO text -> ``timestamp[us,
  UTC]``). Other names keep their base type.

Writing (:func:`connect_schema`, :func:`to_payload`) is the reverse, from an Arrow
type: every field ``optional`` (Arrow columns are nullable); unsigned integers take
the next wider signed type (``uint64`` -> ``int64``); a timestamp with a zone in s/ms
is a Connect ``Timestamp``, in us/ns Debezium's ``ZonedTimestamp``; one without a zone
Debezium's ``Timestamp``/``MicroTimestamp``/``NanoTimestamp`` by unit; other types
(durations, unions, ...) go as their JSON text in a ``string``. So what ``kafka from
--format connect`` read goes back with the schema it came with, up to names and
``optional`` flags.

A payload that does not fit its schema raises :class:`Undecodable` with the reason.
:class:`Batches` reads a whole batch at once to the same values (each distinct schema
parsed once), and says when only the message-by-message path above can.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import decimal
import json
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.types as pt

from limno.data.input_checks import MAX_NESTING, check_json_nesting
from limno.data.json_text import text_of
from limno.errors import InvalidInputError

__all__ = [
    "Batches",
    "BlockReader",
    "Undecodable",
    "arrow_type",
    "connect_schema",
    "from_payload",
    "to_payload",
]

_CONNECT = "org.apache.kafka.connect.data."
_DEBEZIUM = "io.debezium.time."
_EPOCH_DAY = dt.date(1970, 1, 1)
_EPOCH = dt.datetime(1970, 1, 1)
_EPOCH_UTC = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_INTS = {"int8": pa.int8(), "int16": pa.int16(), "int32": pa.int32(), "int64": pa.int64()}
_PLAIN: dict[str, pa.DataType] = {
    **_INTS,
    "float": pa.float32(),
    "float32": pa.float32(),
    "double": pa.float64(),
    "float64": pa.float64(),
    "boolean": pa.bool_(),
    "string": pa.string(),
    "bytes": pa.binary(),
}
#: logical types (by name) whose payload is a number: Arrow type, units per second
_NUMERIC_LOGICAL: dict[str, tuple[pa.DataType, int]] = {
    _CONNECT + "Date": (pa.date32(), 0),
    _CONNECT + "Time": (pa.time32("ms"), 1_000),
    _CONNECT + "Timestamp": (pa.timestamp("ms", tz="UTC"), 1_000),
    _DEBEZIUM + "Date": (pa.date32(), 0),
    _DEBEZIUM + "Time": (pa.time32("ms"), 1_000),
    _DEBEZIUM + "MicroTime": (pa.time64("us"), 1_000_000),
    _DEBEZIUM + "NanoTime": (pa.time64("ns"), 1_000_000_000),
    _DEBEZIUM + "Timestamp": (pa.timestamp("ms"), 1_000),
    _DEBEZIUM + "MicroTimestamp": (pa.timestamp("us"), 1_000_000),
    _DEBEZIUM + "NanoTimestamp": (pa.timestamp("ns"), 1_000_000_000),
}
_ZONED = _DEBEZIUM + "ZonedTimestamp"
_DECIMAL = _CONNECT + "Decimal"


class Undecodable(ValueError):
    """A message that is not what its format says (the reason as the text)."""


def _kind(schema: Any) -> tuple[str, str | None]:
    if not isinstance(schema, dict) or not isinstance(schema.get("type"), str):
        raise Undecodable(f"not a Connect schema: {str(schema)[:80]}")
    name = schema.get("name")
    return schema["type"], name if isinstance(name, str) else None


def _decimal_params(schema: dict[str, Any]) -> tuple[int, int]:
    params = schema.get("parameters") or {}
    try:
        scale = int(params.get("scale", 0))
        precision = int(params.get("connect.decimal.precision", 38))
    except (TypeError, ValueError):
        raise Undecodable(f"a Decimal's parameters are not numbers: {params}") from None
    return max(precision, scale, 1), scale


def arrow_type(schema: Any) -> pa.DataType:
    """The Arrow type of a Connect schema."""
    kind, name = _kind(schema)
    if name == _DECIMAL:
        precision, scale = _decimal_params(schema)
        return (
            pa.decimal128(precision, scale) if precision <= 38 else pa.decimal256(precision, scale)
        )
    if name in _NUMERIC_LOGICAL:
        return _NUMERIC_LOGICAL[name][0]
    if name == _ZONED:
        return pa.timestamp("us", tz="UTC")
    if kind in _PLAIN:
        return _PLAIN[kind]
    if kind == "struct":
        fields = schema.get("fields")
        if not isinstance(fields, list):
            raise Undecodable("a struct schema without a fields list")
        return pa.struct([(_field_name(f), arrow_type(f)) for f in fields])
    if kind == "array":
        return pa.list_(arrow_type(schema.get("items")))
    if kind == "map":
        return pa.map_(arrow_type(schema.get("keys")), arrow_type(schema.get("values")))
    raise Undecodable(f"unknown Connect type {kind!r}")


def _field_name(field: Any) -> str:
    name = field.get("field") if isinstance(field, dict) else None
    if not isinstance(name, str):
        raise Undecodable("a struct field without a name")
    return name


def from_payload(schema: dict[str, Any], payload: Any) -> Any:
    """The payload as the Python value Arrow builds :func:`arrow_type` from."""
    if payload is None:
        default = schema.get("default")
        return None if default is None else from_payload({**schema, "default": None}, default)
    kind, name = _kind(schema)
    if name is not None and (name in (_DECIMAL, _ZONED) or name in _NUMERIC_LOGICAL):
        return _logical(schema, name, payload)
    reader = _READERS.get(kind)
    if reader is None:
        raise Undecodable(f"unknown Connect type {kind!r}")
    return reader(schema, payload)


def _expect(payload: Any, types: type | tuple[type, ...], kind: str) -> Any:
    if not isinstance(payload, types) or (isinstance(payload, bool) and types is not bool):
        raise Undecodable(f"{str(payload)[:40]!r} is not a Connect {kind}")
    return payload


def _int(schema: dict[str, Any], payload: Any) -> int:
    value: int = _expect(payload, int, schema["type"])
    bits = int(schema["type"][3:])
    if not -(2 ** (bits - 1)) <= value < 2 ** (bits - 1):
        raise Undecodable(f"{value} does not fit a Connect {schema['type']}")
    return value


def _bytes(payload: Any) -> bytes:
    try:
        return base64.b64decode(_expect(payload, str, "bytes (base64)"), validate=True)
    except binascii.Error:
        raise Undecodable("bytes that are not base64") from None


def _struct(schema: dict[str, Any], payload: Any) -> dict[str, Any]:
    _expect(payload, dict, "struct")
    return {_field_name(f): from_payload(f, payload.get(_field_name(f))) for f in schema["fields"]}


def _map(schema: dict[str, Any], payload: Any) -> list[tuple[Any, Any]]:
    keys, values = schema.get("keys"), schema.get("values")
    pairs = payload.items() if isinstance(payload, dict) else _expect(payload, list, "map")
    out = []
    for pair in pairs:
        if not isinstance(pair, tuple | list) or len(pair) != 2:
            raise Undecodable("a map entry that is not a [key, value] pair")
        out.append((from_payload(keys or {}, pair[0]), from_payload(values or {}, pair[1])))
    return out


_READERS: dict[str, Callable[[dict[str, Any], Any], Any]] = {
    **{k: _int for k in _INTS},
    "float": lambda s, p: float(_expect(p, (int, float), "float")),
    "float32": lambda s, p: float(_expect(p, (int, float), "float")),
    "double": lambda s, p: float(_expect(p, (int, float), "double")),
    "float64": lambda s, p: float(_expect(p, (int, float), "double")),
    "boolean": lambda s, p: _expect(p, bool, "boolean"),
    "string": lambda s, p: _expect(p, str, "string"),
    "bytes": lambda s, p: _bytes(p),
    "struct": _struct,
    "array": lambda s, p: [
        from_payload(s.get("items") or {}, v) for v in _expect(p, list, "array")
    ],
    "map": _map,
}


def _logical(schema: dict[str, Any], name: str, payload: Any) -> Any:
    if name == _DECIMAL:
        _, scale = _decimal_params(schema)
        if isinstance(payload, int | float) and not isinstance(payload, bool):
            return decimal.Decimal(str(payload))  # decimal.format=NUMERIC
        unscaled = int.from_bytes(_bytes(payload), "big", signed=True)
        return decimal.Decimal(unscaled).scaleb(-scale)
    if name == _ZONED:
        try:
            return dt.datetime.fromisoformat(_expect(payload, str, "ZonedTimestamp"))
        except ValueError:
            raise Undecodable(f"{payload[:40]!r} is not an ISO 8601 timestamp") from None
    typ, per_second = _NUMERIC_LOGICAL[name]
    number: int = _expect(payload, int, name.rsplit(".", 1)[-1])
    try:
        if pt.is_date(typ):
            return _EPOCH_DAY + dt.timedelta(days=number)
        micros = number * 1_000_000 // per_second
        if pt.is_time(typ):
            return (dt.datetime.min + dt.timedelta(microseconds=micros)).time()
        start = _EPOCH_UTC if typ.tz else _EPOCH
        return start + dt.timedelta(microseconds=micros)
    except OverflowError:  # past year 9999 (or before 1): what Python's dates hold
        raise Undecodable(
            f"{number} is out of range for a {name.rsplit('.', 1)[-1]} (years 1-9999)"
        ) from None


# -- writing ---------------------------------------------------------------------------


def connect_schema(typ: pa.DataType) -> dict[str, Any]:
    """The Connect schema of an Arrow type (every level optional)."""
    return {**_schema(typ), "optional": True}


def _schema(typ: pa.DataType) -> dict[str, Any]:
    if pt.is_dictionary(typ):
        return _schema(typ.value_type)
    if pt.is_boolean(typ):
        return {"type": "boolean"}
    if pt.is_signed_integer(typ):
        return {"type": f"int{typ.bit_width}"}
    if pt.is_unsigned_integer(typ):
        return {"type": f"int{min(typ.bit_width * 2, 64)}"}
    if pt.is_floating(typ):
        return {"type": "double" if typ.bit_width == 64 else "float"}
    if pt.is_string(typ) or pt.is_large_string(typ) or pt.is_string_view(typ):
        return {"type": "string"}
    if pt.is_binary(typ) or pt.is_large_binary(typ) or pt.is_fixed_size_binary(typ):
        return {"type": "bytes"}
    if pt.is_decimal(typ):
        params = {"scale": str(typ.scale), "connect.decimal.precision": str(typ.precision)}
        return {"type": "bytes", "name": _DECIMAL, "version": 1, "parameters": params}
    if pt.is_date(typ):
        return {"type": "int32", "name": _CONNECT + "Date", "version": 1}
    if pt.is_time(typ):
        unit = {"s": "Time", "ms": "Time", "us": "MicroTime", "ns": "NanoTime"}[typ.unit]
        base = "int32" if unit == "Time" else "int64"
        return {"type": base, "name": (_CONNECT if unit == "Time" else _DEBEZIUM) + unit}
    if pt.is_timestamp(typ):
        return _timestamp_schema(typ)
    if pt.is_struct(typ):
        fields = [{**connect_schema(f.type), "field": f.name} for f in typ]
        return {"type": "struct", "fields": fields}
    if pt.is_map(typ):
        return {
            "type": "map",
            "keys": connect_schema(typ.key_type),
            "values": connect_schema(typ.item_type),
        }
    if pt.is_list(typ) or pt.is_large_list(typ) or pt.is_fixed_size_list(typ):
        return {"type": "array", "items": connect_schema(typ.value_type)}
    return {"type": "string"}  # anything else: its JSON text


def _timestamp_schema(typ: pa.TimestampType) -> dict[str, Any]:
    if typ.tz is not None:
        if typ.unit in ("s", "ms"):
            return {"type": "int64", "name": _CONNECT + "Timestamp", "version": 1}
        return {"type": "string", "name": _ZONED}
    unit = {"s": "Timestamp", "ms": "Timestamp", "us": "MicroTimestamp", "ns": "NanoTimestamp"}
    return {"type": "int64", "name": _DEBEZIUM + unit[typ.unit]}


def to_payload(schema: dict[str, Any], value: Any) -> Any:
    """A Python value (as ``to_pylist`` gives it) as the payload of ``schema``."""
    if value is None:
        return None
    kind, name = schema["type"], schema.get("name")
    if name == _DECIMAL:
        unscaled = int(decimal.Decimal(value).scaleb(int(schema["parameters"]["scale"])))
        size = max(1, (unscaled.bit_length() + 8) // 8)
        return base64.b64encode(unscaled.to_bytes(size, "big", signed=True)).decode("ascii")
    if name == _ZONED:
        return value.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")
    if name in _NUMERIC_LOGICAL:
        return _logical_number(name, value)
    if kind == "struct":
        return {f["field"]: to_payload(f, value.get(f["field"])) for f in schema["fields"]}
    if kind == "array":
        return [to_payload(schema["items"], v) for v in value]
    if kind == "map":
        pairs = [(to_payload(schema["keys"], k), to_payload(schema["values"], v)) for k, v in value]
        return dict(pairs) if schema["keys"]["type"] == "string" else [list(p) for p in pairs]
    if kind == "bytes":
        return base64.b64encode(value).decode("ascii")
    if kind == "string":
        return text_of(value)
    return value


def _logical_number(name: str, value: Any) -> int:
    typ, per_second = _NUMERIC_LOGICAL[name]
    if pt.is_date(typ):
        return (value - _EPOCH_DAY).days
    if pt.is_time(typ):
        delta = dt.datetime.combine(dt.date.min, value) - dt.datetime.min
    else:
        start = _EPOCH_UTC if value.tzinfo is not None else _EPOCH
        delta = value - start
    micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    return micros * per_second // 1_000_000


# -- reading a batch at once -------------------------------------------------------------

#: what reads the payloads of a batch at once: their JSON texts (None: a tombstone)
#: read as one column of the given Arrow type, or None when one does not fit it
BlockReader = Callable[[Sequence[bytes | None], pa.DataType], "pa.Array | None"]
_HEAD = b'{"schema":'
_PAYLOAD = b',"payload":'
_SCHEMAS_KEPT = 64  # distinct schemas remembered (a topic's schema changes rarely)
_JSON_DECODER = json.JSONDecoder()
_MIN_DAY, _MAX_DAY = (dt.date.min - _EPOCH_DAY).days, (dt.date.max - _EPOCH_DAY).days


class _Plan:
    """How the payloads of one schema are read: as JSON of ``json_type``, then made
    into ``typ`` (:func:`arrow_type`)."""

    def __init__(self, schema: dict[str, Any], json_type: pa.DataType) -> None:
        self.schema, self.json_type, self.typ = schema, json_type, arrow_type(schema)


class Batches:
    """Connect envelopes read a batch at a time (``kafka from --format connect``).

    Debezium sends the same schema with every message: parsing it, and the payload
    value by value, in Python, was most of a sync's time. Here each distinct schema
    (its JSON text, as the message's bytes start with it) is parsed once and kept with
    its Arrow type; the payloads that share it are read in one pass of pyarrow's JSON
    reader (``read``: the one ``--format json`` uses) as the JSON types of the schema,
    then made into its Arrow types column by column: integers and dates by a cast,
    other logical types (decimals, times, zoned text), bytes, arrays and maps value by
    value with :func:`from_payload`, so the values are those of the message-by-message
    path exactly; schemas of different types in one batch (two topics, a column added)
    are unified as that path does. :meth:`column` gives None whenever anything does
    not fit (an envelope not as JsonConverter writes it, a payload off its schema,
    types that do not unify, a value out of Python's range): the caller then decodes
    message by message, which names the message at fault.
    """

    def __init__(self, read: BlockReader) -> None:
        self._read = read
        self._plans: dict[bytes, _Plan | None] = {}  # by the envelope's head

    def column(self, raws: Sequence[bytes | str | None]) -> pa.Array | None:
        """The values of a batch's envelopes (None: a tombstone) as one column, or None."""
        groups: dict[bytes, tuple[list[int], list[bytes | None]]] = {}
        head = b""
        for i, raw in enumerate(raws):
            if raw is None:
                continue
            data = raw.encode() if isinstance(raw, str) else raw
            if not (head and data.startswith(head)):
                head = self._head(data, groups) or b""
                if not head or self._plans.get(head) is None:
                    return None
            if data[-1:] != b"}" or b"\n" in data or b"\r" in data:
                return None  # (line breaks: the block reader flattens them)
            rows, payloads = groups.setdefault(head, ([], []))
            rows.append(i)
            payloads.append(data[len(head) : -1])
        columns = []
        for head, (_, payloads) in groups.items():
            plan = self._plans.get(head)
            block = None if plan is None else self._read(payloads, plan.json_type)
            if plan is None or block is None:
                return None
            try:
                columns.append(_typed(block, plan.schema))
            except (Undecodable, pa.ArrowException, OverflowError):
                return None
        return _in_order(columns, [rows for rows, _ in groups.values()], len(raws))

    def _head(self, data: bytes, batch: dict[bytes, Any]) -> bytes | None:
        """The known head ``data`` starts with (of this batch first), else learnt."""
        for heads in (batch, self._plans):
            found = next((h for h in heads if data.startswith(h)), None)
            if found is not None:
                return found
        return self._learn(data)

    def _learn(self, data: bytes) -> bytes | None:
        """The head (``{"schema":...,"payload":``) of a message whose schema is not
        known yet, its plan kept (None: not an envelope this reads)."""
        if not data.startswith(_HEAD):
            return None
        try:
            if data.count(b"{") + data.count(b"[") > MAX_NESTING:
                check_json_nesting("kafka", data, 1, outer=1)
            text = data.decode()
            schema, end = _JSON_DECODER.raw_decode(text, len(_HEAD))
        except (ValueError, InvalidInputError, RecursionError):
            return None
        head = text[:end].encode() + _PAYLOAD
        if not data.startswith(head):
            return None
        if head not in self._plans:
            if len(self._plans) >= _SCHEMAS_KEPT:
                self._plans.clear()
            try:
                json_type = _json_type(schema)
                self._plans[head] = None if json_type is None else _Plan(schema, json_type)
            except Undecodable:
                self._plans[head] = None
        return head


def _json_type(schema: Any) -> pa.DataType | None:
    """The Arrow type pyarrow's JSON reader reads a payload of ``schema`` as (None: a
    schema whose payloads are read message by message: maps)."""
    kind, name = _kind(schema)
    if kind == "map":
        return None
    if name in (_DECIMAL, _ZONED) or kind in ("string", "bytes"):
        return pa.string()
    if name in _NUMERIC_LOGICAL or kind in _INTS:
        return pa.int64()
    if kind == "array":
        items = _json_type(schema.get("items"))
        return None if items is None else pa.list_(items)
    if kind == "struct":
        arrow_type(schema)  # a struct that is not one: Undecodable
        names = [_field_name(f) for f in schema["fields"]]
        types = [_json_type(f) for f in schema["fields"]]
        if len(set(names)) < len(names) or any(t is None for t in types):
            return None
        return pa.struct(list(zip(names, types, strict=True)))
    return _PLAIN[kind] if kind in ("boolean", "double", "float64") else pa.float64()


def _typed(block: pa.Array, schema: dict[str, Any], shown: pa.Array | None = None) -> pa.Array:
    """A column read as :func:`_json_type` says, made into :func:`arrow_type`, its
    nulls where ``shown`` (the enclosing structs are not null; None: everywhere) the
    schema's default, as :func:`from_payload` gives them."""
    column = _converted(block, schema, shown)
    default = schema.get("default")
    if default is None or not column.null_count:
        return column
    value = pa.scalar(from_payload({**schema, "default": None}, default), column.type)
    nulls = column.is_null()
    return pc.if_else(nulls if shown is None else pc.and_(nulls, shown), value, column)


def _converted(block: pa.Array, schema: dict[str, Any], shown: pa.Array | None) -> pa.Array:
    kind, name = _kind(schema)
    typ = arrow_type(schema)
    if kind == "struct":
        inner = block.is_valid() if shown is None else pc.and_(block.is_valid(), shown)
        children = [_typed(block.field(_field_name(f)), f, inner) for f in schema["fields"]]
        return pa.StructArray.from_arrays(
            children, fields=list(typ), mask=block.is_null() if block.null_count else None
        )
    if name in _NUMERIC_LOGICAL:
        cast = _logical_cast(block, name)
        if cast is not None:
            return cast
    if not (name in _NUMERIC_LOGICAL or name in (_DECIMAL, _ZONED)):
        if kind in _INTS or kind in ("boolean", "string", "double", "float64"):
            return block.cast(typ)  # a safe cast: an int out of its range fails
        if kind in ("float", "float32"):
            return block.cast(typ, safe=False)  # as Arrow rounds a Python float
    return pa.array([from_payload(schema, v) for v in block.to_pylist()], typ)


def _logical_cast(block: pa.Array, name: str) -> pa.Array | None:
    """Numbers of a logical type (dates, times, timestamps) as their Arrow type by a
    cast, as :func:`from_payload` makes them (nanoseconds cut to microseconds); None
    where only it says (a time beyond a day, negative nanoseconds). Out of Python's
    dates: OverflowError, as message by message."""
    typ, per_second = _NUMERIC_LOGICAL[name]
    low, high = pc.min_max(block).as_py().values()
    if low is None:
        return pa.nulls(len(block), typ)
    if pt.is_time(typ) and not 0 <= low <= high < 86_400 * per_second:
        return None  # from_payload wraps it to a time of the day
    if pt.is_date(typ) and not _MIN_DAY <= low <= high <= _MAX_DAY:
        raise OverflowError("a date out of Python's")
    if pt.is_timestamp(typ):
        first, last = (d - _EPOCH for d in (dt.datetime.min, dt.datetime.max))
        if not first.days * 86_400 * per_second <= low <= high < last.days * 86_400 * per_second:
            raise OverflowError("a timestamp out of Python's")
    if per_second == 1_000_000_000:
        if low < 0:
            return None  # cut toward the past, not toward zero
        block = pc.multiply(pc.divide(block, 1_000), 1_000)
    return block.cast(pa.int32() if typ.bit_width == 32 else pa.int64()).cast(typ)


def _in_order(columns: list[pa.Array], rows: list[list[int]], count: int) -> pa.Array | None:
    """The columns of the groups of a batch as one, each value back at its row (the
    rows no group holds: tombstones, null), their types unified as
    :func:`~limno.streams.formats.typed_column` does (None: they do not unify)."""
    types = list(dict.fromkeys(c.type for c in columns))
    if len(columns) == 1 and len(rows[0]) == count:
        return columns[0]
    typ = types[0] if types else pa.null()
    if len(types) > 1:
        try:
            schemas = [pa.schema([("v", t)]) for t in types]
            typ = pa.unify_schemas(schemas, promote_options="permissive").field("v").type
            columns = [c.cast(typ) for c in columns]
        except pa.ArrowException:
            return None  # message by message: it says why
    where = np.full(count, -1, np.int64)
    start = 0
    for found in rows:
        where[found] = np.arange(start, start + len(found))
        start += len(found)
    whole = pa.concat_arrays([*columns, pa.nulls(1, typ)])
    return whole.take(pa.array(np.where(where < 0, start, where)))

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
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import decimal
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.types as pt

from limno.data.json_text import text_of

__all__ = ["Undecodable", "arrow_type", "connect_schema", "from_payload", "to_payload"]

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
    if pt.is_date(typ):
        return _EPOCH_DAY + dt.timedelta(days=number)
    micros = number * 1_000_000 // per_second
    if pt.is_time(typ):
        return (dt.datetime.min + dt.timedelta(microseconds=micros)).time()
    start = _EPOCH_UTC if typ.tz else _EPOCH
    return start + dt.timedelta(microseconds=micros)


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

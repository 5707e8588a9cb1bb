"""Avro in Confluent's wire format (``--format avro``): magic byte 0, the schema's id
in the registry (4 bytes, big-endian), then the Avro body (no container, no schema).

Reading (:class:`AvroDecoder`): the schema of each id is fetched from the registry
once (:mod:`.registry_client`), typed as ``limno load`` types an Avro file
(:func:`limno.data.schema.from_avro`: records -> structs, logical types -> their Arrow
types, unions widened); messages of a batch written with different schemas (a
schema that evolved) share one column of their types unified. A message whose first
byte is not 0, whose id the registry does not know, or whose body does not decode
(or leaves bytes over) is undecodable. A key is decoded likewise when it is in the
wire format; other keys stay text.

Writing (:func:`avro_schema`, :class:`AvroEncoder`): the Avro schema is derived from
the value column's Arrow type (every field a union with null, default null: readers
of older data keep working) and registered under ``<topic>-value`` (Confluent's
TopicNameStrategy); keys go as text. Types Avro lacks go as the nearest: unsigned
integers widen, nanosecond times and timestamps go in microseconds, maps with keys
that are not text as arrays of ``{key, value}`` records, anything else as its JSON
text in a string.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Sequence
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.types as pt

from limno.data.json_text import text_of
from limno.data.schema import from_avro
from limno.errors import InvalidInputError, NotFoundError
from limno.streams.formats import Decoder, coerced_array, typed_column, utf8_column
from limno.streams.formats_connect import Undecodable
from limno.streams.registry_client import RegistryClient

__all__ = ["AvroDecoder", "AvroEncoder", "avro_schema"]

_MAGIC = 0


class AvroDecoder(Decoder):
    """Confluent wire-format Avro, its schemas from the registry at ``url``."""

    name = "avro"

    def __init__(self, url: str) -> None:
        self.registry = RegistryClient(url)
        self.readers: dict[int, tuple[Any, pa.DataType]] = {}

    def _reader(self, schema_id: int) -> tuple[Any, pa.DataType]:
        found = self.readers.get(schema_id)
        if found is None:
            try:
                text = self.registry.schema(schema_id)
            except NotFoundError:
                raise Undecodable(f"unknown schema id {schema_id}") from None
            try:
                doc = json.loads(text)
                found = fastavro.parse_schema(doc), from_avro(doc)
            except (ValueError, TypeError, KeyError, InvalidInputError) as e:
                raise Undecodable(
                    f"schema id {schema_id} is not a usable Avro schema ({e})"
                ) from None
            self.readers[schema_id] = found
        return found

    def parse(self, raw: bytes | str) -> Any:
        data = raw.encode() if isinstance(raw, str) else raw
        if len(data) < 5 or data[0] != _MAGIC:
            first = f"0x{data[0]:02x}" if data else "none"
            raise Undecodable(f"not Confluent's Avro wire format (magic byte {first}, not 0x00)")
        schema_id = int.from_bytes(data[1:5], "big")
        schema, typ = self._reader(schema_id)
        body = io.BytesIO(data[5:])
        try:
            value = fastavro.schemaless_reader(body, schema, None)
        except Exception as e:  # fastavro raises whatever the bytes lead it to
            raise Undecodable(
                f"Avro body does not decode with schema id {schema_id} ({e})"
            ) from None
        if body.tell() != len(data) - 5:
            raise Undecodable(f"Avro body longer than what schema id {schema_id} reads")
        return value, typ, value

    def column(self, parsed: list[Any], offsets: list[int], topic: str) -> pa.Array:
        return typed_column(parsed, topic, coerce=True)

    def fast_values(self, raws: Sequence[bytes | str | None]) -> pa.Array | None:
        """The column of a batch whose values (None: a tombstone) all carry ONE schema
        id (the common case: a topic's producer writes one schema), decoded in one
        tight loop with no per-message checks but the body's length; None when the
        batch mixes schema ids, or any value does not decode (then :meth:`parse`, value
        by value, names the one at fault), or all are tombstones."""
        prefixes = {r[:5] for r in raws if r is not None}
        if len(prefixes) != 1:
            return None
        prefix = prefixes.pop()
        if not isinstance(prefix, bytes) or len(prefix) < 5 or prefix[0] != _MAGIC:
            return None
        try:
            schema, typ = self._reader(int.from_bytes(prefix[1:5], "big"))
        except Undecodable:
            return None
        read, values = fastavro.schemaless_reader, list[Any]()
        try:
            for raw in raws:
                if raw is None:
                    values.append(None)
                    continue
                # all bytes: a str's prefix would have been a second one
                body = io.BytesIO(raw.encode() if isinstance(raw, str) else raw)
                body.seek(5)
                values.append(read(body, schema, None))
                if body.tell() != len(raw):
                    return None
        except Exception:  # fastavro raises whatever the bytes lead it to
            return None
        return coerced_array(values, typ)

    def fast_keys(self, raws: Sequence[bytes | str | None]) -> pa.Array | None:
        """Keys as text at once when none is in the wire format (else key by key, as
        when all are missing: a null column)."""
        wire = any(isinstance(r, bytes) and len(r) >= 5 and r[0] == _MAGIC for r in raws)
        if wire or all(r is None for r in raws):
            return None
        return utf8_column(raws)

    def parse_key(self, raw: bytes | str) -> Any:
        if isinstance(raw, bytes) and len(raw) >= 5 and raw[0] == _MAGIC:
            return self.parse(raw)
        return super().parse_key(raw)

    def key_column(self, parsed: list[Any]) -> pa.Array:
        if all(p is None or isinstance(p, tuple) for p in parsed):
            return typed_column(parsed, "keys", coerce=True)
        return super().key_column([text_of(p[2]) if isinstance(p, tuple) else p for p in parsed])


# -- writing ---------------------------------------------------------------------------


def _name(path: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", path) or "value"


def avro_schema(typ: pa.DataType, name: str = "value") -> Any:
    """The Avro schema (as JSON) of values of Arrow type ``typ``; ``name`` names records."""
    if pt.is_dictionary(typ):
        return avro_schema(typ.value_type, name)
    if pt.is_null(typ):
        return "null"
    if pt.is_boolean(typ):
        return "boolean"
    if pt.is_integer(typ):
        small = typ.bit_width < 32 or (pt.is_signed_integer(typ) and typ.bit_width == 32)
        return "int" if small else "long"
    if pt.is_floating(typ):
        return "double" if typ.bit_width == 64 else "float"
    if pt.is_string(typ) or pt.is_large_string(typ) or pt.is_string_view(typ):
        return "string"
    if pt.is_binary(typ) or pt.is_large_binary(typ) or pt.is_fixed_size_binary(typ):
        return "bytes"
    if pt.is_decimal(typ):
        return {
            "type": "bytes",
            "logicalType": "decimal",
            "precision": typ.precision,
            "scale": typ.scale,
        }
    if pt.is_date(typ):
        return {"type": "int", "logicalType": "date"}
    if pt.is_time(typ):
        if typ.unit in ("s", "ms"):
            return {"type": "int", "logicalType": "time-millis"}
        return {"type": "long", "logicalType": "time-micros"}
    if pt.is_timestamp(typ):
        unit = "millis" if typ.unit in ("s", "ms") else "micros"
        local = "" if typ.tz is not None else "local-"
        return {"type": "long", "logicalType": f"{local}timestamp-{unit}"}
    if pt.is_struct(typ):
        fields = [
            {"name": f.name, "type": _nullable(avro_schema(f.type, f"{name}_{f.name}")),
             "default": None}
            for f in typ
        ]  # fmt: skip
        return {"type": "record", "name": _name(name), "fields": fields}
    if pt.is_map(typ):
        if pt.is_string(typ.key_type) or pt.is_large_string(typ.key_type):
            return {"type": "map", "values": _nullable(avro_schema(typ.item_type, f"{name}_v"))}
        entry = pa.struct([("key", typ.key_type), ("value", typ.item_type)])
        return {"type": "array", "items": avro_schema(entry, f"{name}_entry")}
    if pt.is_list(typ) or pt.is_large_list(typ) or pt.is_fixed_size_list(typ):
        return {"type": "array", "items": _nullable(avro_schema(typ.value_type, f"{name}_item"))}
    return "string"  # anything else: its JSON text


def _nullable(schema: Any) -> Any:
    if schema == "null":
        return "null"
    return ["null", schema] if not isinstance(schema, list) else schema


def _values(typ: pa.DataType) -> Any:
    """How a Python value of ``typ`` becomes what fastavro writes (None: as it is)."""
    if pt.is_dictionary(typ):
        return _values(typ.value_type)
    if pt.is_struct(typ):
        inner = {f.name: _values(f.type) for f in typ}
        if not any(inner.values()):
            return None
        return lambda v: {k: _apply(inner[k], x) for k, x in v.items()}
    if pt.is_map(typ):
        key, item = _values(typ.key_type), _values(typ.item_type)
        if pt.is_string(typ.key_type) or pt.is_large_string(typ.key_type):
            return lambda v: {k: _apply(item, x) for k, x in v}
        return lambda v: [{"key": _apply(key, k), "value": _apply(item, x)} for k, x in v]
    if pt.is_list(typ) or pt.is_large_list(typ) or pt.is_fixed_size_list(typ):
        each = _values(typ.value_type)
        return None if each is None else (lambda v: [_apply(each, x) for x in v])
    if avro_schema(typ) == "string" and not (pt.is_string(typ) or pt.is_large_string(typ)):
        return text_of
    return None


def _apply(convert: Any, value: Any) -> Any:
    return value if convert is None or value is None else convert(value)


class AvroEncoder:
    """Values of one Arrow type as Confluent wire-format Avro under one schema id."""

    def __init__(self, typ: pa.DataType, schema_id: int, schema: Any) -> None:
        self.prefix = bytes([_MAGIC]) + schema_id.to_bytes(4, "big")
        self.schema = fastavro.parse_schema(schema)
        self.convert = _values(typ)

    def __call__(self, value: Any) -> bytes | None:
        if value is None:
            return None  # a tombstone stays one
        out = io.BytesIO()
        out.write(self.prefix)
        fastavro.schemaless_writer(out, self.schema, _apply(self.convert, value))
        return out.getvalue()


def avro_encoder(typ: pa.DataType, topic: str, url: str, *, key: bool = False) -> AvroEncoder:
    """The encoder of values (``key``: keys) of ``typ`` to ``topic``: their schema
    registered under ``<topic>-value`` (``<topic>-key``) at the registry ``url`` first."""
    part = "key" if key else "value"
    schema = avro_schema(typ, _name(topic) + ("_key" if key else ""))
    schema_id = RegistryClient(url).register(f"{topic}-{part}", json.dumps(schema))
    return AvroEncoder(typ, schema_id, schema)

"""Message formats of ``kafka from`` (decoders) and ``kafka to`` (encoders).

A decoder turns a batch into columns in two steps: :meth:`Decoder.parse` of each
message's bytes (raising :class:`Undecodable` with the reason for one that does not
fit, so a caller can fail the batch naming it, or set it aside as a dead letter), then
:meth:`Decoder.column` of the parsed values of the messages kept. Formats:

* ``json``: the value parsed as JSON, typed like ``limno load`` types an ndjson file
  (pyarrow's JSON reader over the batch, else limno's widening rule); keys are text.
* ``connect``: the Kafka Connect JSON envelope (:mod:`.formats_connect`): the payload
  typed by its schema; a key that is an envelope too is decoded likewise (keys of a
  batch that are not all envelopes stay text).
* ``avro``: Confluent's wire format, schemas from a registry (:mod:`.formats_avro`).
"""

from __future__ import annotations

import io
import json
import math
import re
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pjson

from limno.data.input_checks import MAX_NESTING, check_json_nesting
from limno.data.json_text import json_text
from limno.data.python_rows import BUILD_ERRORS, python_table
from limno.data.schema import coerce as to_type
from limno.errors import InvalidInputError
from limno.streams import formats_connect as connect
from limno.streams.formats_connect import Undecodable

__all__ = [
    "FORMATS",
    "ConnectDecoder",
    "Decoder",
    "Encoder",
    "JsonDecoder",
    "Undecodable",
    "decoder_for",
    "encoded",
    "encoder_for",
    "json_keys",
    "coerced_array",
    "typed_column",
    "utf8_column",
]

#: the names of the formats, as ``--format`` takes them
FORMATS = ("json", "connect", "avro")
#: 19 digits or more: an integer pyarrow's JSON reader would round to a float
_LONG_INTEGER = re.compile(rb"\d{19}")
_LINE_BREAKS = bytes.maketrans(b"\r\n", b"  ")  # JSON whitespace: safe to flatten
#: what Python's and pyarrow's JSON readers take that JSON has not (NaN, Infinity)
_NOT_JSON_CONSTANT = re.compile(rb"NaN|Infinity")
#: a number that may be past a double's range (1e400 would read as inf)
_MAYBE_HUGE = re.compile(rb"[eE]\+?\d{3}|\d{300}")


def _bytes(raw: bytes | str) -> bytes:
    return raw.encode() if isinstance(raw, str) else raw


def _text_column(raws: Sequence[bytes | str | None]) -> pa.Array:
    return pa.array([r.decode() if isinstance(r, bytes) else r for r in raws], pa.string())


def parse_json(raw: bytes | str) -> Any:
    """A message's bytes as JSON (Undecodable: not JSON, not UTF-8, too deep)."""
    data = _bytes(raw)
    try:
        if data.count(b"{") + data.count(b"[") > MAX_NESTING:  # else it cannot be too deep
            check_json_nesting("kafka", data, 1, outer=1)
        if _MAYBE_HUGE.search(data) is None:
            return json.loads(data, parse_constant=_not_json)
        return json.loads(data, parse_constant=_not_json, parse_float=_finite_float)
    except json.JSONDecodeError as e:
        raise Undecodable(f"invalid JSON ({e.msg})") from None
    except UnicodeDecodeError:
        raise Undecodable("its value is not UTF-8") from None
    except (RecursionError, InvalidInputError):
        raise Undecodable("JSON nested too deep") from None


def _not_json(constant: str) -> Any:
    """``NaN``, ``Infinity``: Python's json reads them, but they are not JSON (and would
    be written back as text no JSON reader takes)."""
    raise Undecodable(f"invalid JSON ({constant} is not a JSON number)")


def _finite_float(text: str) -> float:
    """A JSON number as a float, refusing one past a double's range (it would be inf)."""
    value = float(text)
    if math.isinf(value):
        raise Undecodable(f"invalid JSON (number {text[:40]} is out of range)")
    return value


class Decoder:
    """JSON values, text keys (the default); subclasses override what differs."""

    name = "json"

    def parse(self, raw: bytes | str) -> Any:
        """One value's bytes, parsed (not called for a tombstone: null)."""
        data = _bytes(raw)
        return parse_json(data), data

    def column(self, parsed: list[Any], offsets: list[int], topic: str) -> pa.Array:
        """One column of the parsed values (None: a tombstone); ``offsets`` for errors."""
        found = _json_column([None if p is None else p[1] for p in parsed])
        if found is not None:
            return found
        values = [{"v": None if p is None else p[0]} for p in parsed]  # widened types
        return python_table(f"kafka topic {topic}", values, offsets).column("v")

    def fast_values(self, raws: Sequence[bytes | str | None]) -> pa.Array | None:
        """The column of a whole batch's raw values (None: a tombstone) read at once,
        when every value is plain JSON of one inferred type: pyarrow's JSON reader
        checks the syntax of all of them in one pass. None when any does not fit (not
        JSON, not UTF-8, deeper than MAX_NESTING, an integer of 19 digits or more,
        types that disagree): then each message is parsed on its own (:meth:`parse`),
        which names the one at fault. Formats whose bytes are not plain JSON: None."""
        if type(self).parse is not Decoder.parse:
            return None
        return _json_column([None if r is None else _bytes(r) for r in raws], checked=False)

    def fast_keys(self, raws: Sequence[bytes | str | None]) -> pa.Array | None:
        """The column of a whole batch's raw keys (None: no key) at once, when they are
        all UTF-8 (Arrow checks them in one pass); None when one is not, or the format
        reads keys otherwise: then each key is read on its own (:meth:`parse_key`)."""
        if type(self).parse_key is not Decoder.parse_key:
            return None
        return utf8_column(raws)

    def parse_key(self, raw: bytes | str) -> Any:
        """One key (not called for a missing key)."""
        if isinstance(raw, bytes):
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError:
                raise Undecodable("its key is not UTF-8") from None
        return raw

    def key_column(self, parsed: list[Any]) -> pa.Array:
        return _text_column(parsed)


JsonDecoder = Decoder


def utf8_column(raws: Sequence[bytes | str | None]) -> pa.Array | None:
    """Raw bytes (None: null) as one text column, or None when one is not UTF-8 (or
    is not bytes)."""
    try:
        return pa.array(raws, pa.binary()).cast(pa.string())
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return None


def _json_column(
    raws: Sequence[bytes | None], *, checked: bool = True, typ: pa.DataType | None = None
) -> pa.Array | None:
    """Values (None: a tombstone) as one column by pyarrow's JSON reader, or None.

    ``checked``: each value was parsed alone already; else the block must also be
    UTF-8, read into exactly one row per value and one column (a value such as
    ``1, "w": 2`` would add a column, ``1} {"v": 2`` a row), and no deeper than
    :data:`MAX_NESTING`. ``typ``: the values are read as that type (fields it does
    not name inferred), a value that is not of it failing the read.

    Line breaks become spaces so that each value is one line: between tokens that
    changes nothing, but a raw line break inside a string is not JSON, so unchecked
    values with one are left to the value-by-value path (which names them)."""
    if not checked and any(r is not None and (b"\n" in r or b"\r" in r) for r in raws):
        return None
    block = b"".join(
        b'{"v":null}\n' if r is None else b'{"v":' + r.translate(_LINE_BREAKS) + b"}\n"
        for r in raws
    )
    if typ is None and _LONG_INTEGER.search(block) is not None:
        return None  # pyarrow would round it to a float (an int64 it reads exactly)
    maybe_not_finite = not checked and (
        _NOT_JSON_CONSTANT.search(block) is not None or _MAYBE_HUGE.search(block) is not None
    )
    if not checked:
        try:
            block.decode("utf-8")
        except UnicodeDecodeError:
            return None
    try:
        opts = pjson.ReadOptions(block_size=len(block) + 1)  # one block: one inference
        parse = pjson.ParseOptions(explicit_schema=None if typ is None else pa.schema({"v": typ}))
        table = pjson.read_json(io.BytesIO(block), read_options=opts, parse_options=parse)
    except (pa.ArrowInvalid, KeyError):
        return None  # values of disagreeing types (or, unchecked, not JSON)
    if not checked and (
        table.num_rows != len(raws)
        or table.column_names != ["v"]
        or _depth(table.schema.field("v").type) + 1 >= MAX_NESTING
    ):
        return None
    column = table.column("v").combine_chunks()
    if maybe_not_finite and _not_finite(column):
        return None  # pyarrow reads NaN, Infinity and 1e400 (as inf): the value path refuses them
    return column


def _not_finite(values: pa.Array) -> bool:
    """Whether a float anywhere in ``values`` (structs and lists too) is NaN or infinite
    (the texts that may give one are often only names: ``"Infinity War"``, ``e123``)."""
    typ = values.type
    if pa.types.is_floating(typ):
        return bool(pc.any(pc.invert(pc.is_finite(values))).as_py())
    if pa.types.is_struct(typ):
        return any(_not_finite(values.field(i)) for i in range(typ.num_fields))
    if pa.types.is_list(typ) or pa.types.is_large_list(typ):
        return _not_finite(values.flatten())
    return False


def _depth(typ: pa.DataType) -> int:
    """How many objects or arrays deep a value of ``typ`` is (0: a scalar)."""
    if pa.types.is_struct(typ):
        return 1 + max((_depth(f.type) for f in typ), default=0)
    if pa.types.is_list(typ) or pa.types.is_large_list(typ):
        return 1 + _depth(typ.value_type)
    return 0


class ConnectDecoder(Decoder):
    """The Kafka Connect JSON envelope (see :mod:`.formats_connect`)."""

    name = "connect"

    def __init__(self) -> None:
        # payloads of a batch read as one JSON block, as typed as their schema says
        self._batches = connect.Batches(
            lambda raws, typ: _json_column(raws, checked=False, typ=typ)
        )

    def fast_values(self, raws: Sequence[bytes | str | None]) -> pa.Array | None:
        return self._batches.column(raws)

    def fast_keys(self, raws: Sequence[bytes | str | None]) -> pa.Array | None:
        return self._batches.column(raws)  # None also when one is plain text

    def parse(self, raw: bytes | str) -> Any:
        return _envelope(parse_json(raw))

    def column(self, parsed: list[Any], offsets: list[int], topic: str) -> pa.Array:
        return typed_column(parsed, topic)

    def parse_key(self, raw: bytes | str) -> Any:
        text = super().parse_key(raw)
        try:
            return _envelope(parse_json(text))
        except Undecodable:
            return text  # a plain key

    def key_column(self, parsed: list[Any]) -> pa.Array:
        if all(p is None or isinstance(p, tuple) for p in parsed):
            return typed_column(parsed, "keys")
        return _text_column(
            [p if p is None or not isinstance(p, tuple) else _original(p) for p in parsed]
        )


def _original(parsed: tuple[Any, pa.DataType, Any]) -> str:
    """A decoded envelope's text again (keys of a batch that mixes envelopes and text)."""
    return json_text(parsed[2])


def _envelope(doc: Any) -> tuple[Any, pa.DataType, Any]:
    """(value, its Arrow type, the envelope) of a Connect envelope."""
    if not isinstance(doc, dict) or set(doc) != {"schema", "payload"}:
        raise Undecodable("not a Kafka Connect envelope ({schema, payload})")
    schema = doc["schema"]
    return connect.from_payload(schema, doc["payload"]), connect.arrow_type(schema), doc


def typed_column(parsed: list[Any], topic: str, *, coerce: bool = False) -> pa.Array:
    """Values of (value, type, ...) tuples as one column: their types unified (a field
    added by a newer schema is null in the older messages); ``coerce``: values made to
    fit the unified type first (limno's widening rule: Avro unions)."""
    # by identity first: a decoder hands out one type object per schema (hashing an
    # Arrow type per message would cost more than building the column)
    distinct = {id(p[1]): p[1] for p in parsed if p is not None}
    types = list(dict.fromkeys(distinct.values()))  # equal types of two schemas: once
    if not types:
        return pa.nulls(len(parsed), pa.null())
    typ = types[0]
    if len(types) > 1:
        try:
            typ = (
                pa.unify_schemas(
                    [pa.schema([("v", t)]) for t in types], promote_options="permissive"
                )
                .field("v")
                .type
            )
        except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
            raise InvalidInputError(
                f"kafka topic {topic}: the messages' Connect schemas disagree ({e})"
            ) from None
    values = [None if p is None else p[0] for p in parsed]
    return coerced_array(values, typ) if coerce else pa.array(values, typ)


def coerced_array(values: list[Any], typ: pa.DataType) -> pa.Array:
    """Values as an array of ``typ``, made to fit it first when they do not as they
    are (limno's widening rule: Avro unions)."""
    try:
        return pa.array(values, typ)  # mostly they fit as they are: no pass over them
    except BUILD_ERRORS:
        return pa.array([to_type(v, typ) for v in values], typ)


def decoder_for(fmt: str, registry: str | None = None) -> Decoder:
    """The decoder of a ``--format`` (``avro``: its schemas from ``registry``, else
    ``$LIMNO_SCHEMA_REGISTRY``)."""
    if fmt == "connect":
        return ConnectDecoder()
    if fmt == "json":
        return Decoder()
    if fmt == "avro":
        from limno.streams.formats_avro import AvroDecoder
        from limno.streams.registry_client import registry_url

        return AvroDecoder(registry_url(registry))
    raise InvalidInputError(f"unknown format {fmt!r} (one of {', '.join(FORMATS)})")


def json_keys(column: pa.ChunkedArray | pa.Array, where: Callable[[int], str]) -> pa.Array:
    """Text keys that are JSON objects or arrays (``limno etl`` keeps a struct key as
    its JSON text) as the values they say, typed like ``kafka from`` types JSON
    (``{"ID":100}``: a struct of an int64), so that a format can give them a schema;
    when no key is, the keys as they are (text). A key that starts like one but is not
    JSON, or a run whose keys mix the two: InvalidInputError naming the record
    (``where(i)``: the i-th key's record)."""
    raws: list[str | None] = column.to_pylist()
    shaped = [r is not None and r.lstrip()[:1] in ("{", "[") for r in raws]
    if not any(shaped):
        return column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    odd = next((i for i, (r, s) in enumerate(zip(raws, shaped, strict=True)) if r and not s), None)
    if odd is not None:
        raise InvalidInputError(
            f"{where(odd)}: its key {raws[odd]!r:.60} is not a JSON object or array, as other "
            "keys of the run are (a key format gives the run's keys one schema)"
        )
    data = [None if r is None else r.encode() for r in raws]
    found = _json_column(data, checked=False)
    if found is not None:
        return found
    decoder, parsed = Decoder(), []
    for i, raw in enumerate(data):
        try:
            parsed.append(None if raw is None else decoder.parse(raw))
        except Undecodable as e:
            raise InvalidInputError(f"{where(i)}: its key: {e}") from None
    return decoder.column(parsed, list(range(len(parsed))), "keys")


#: a value (as ``to_pylist`` gives it) as a message's bytes (None: a tombstone)
Encoder = Callable[[Any], "str | bytes | None"]


def _json_value(value: Any) -> str | None:
    return None if value is None else (value if isinstance(value, str) else json_text(value))


def encoded(encoder: Encoder, column: pa.ChunkedArray | pa.Array) -> list[Any]:
    """A column's values as messages' bytes: text taken as it is, without a call per
    value, when the encoder writes text as its text (JSON and text keys)."""
    values = column.to_pylist()
    typ = column.type
    if encoder is _json_value and (pa.types.is_string(typ) or pa.types.is_large_string(typ)):
        return values
    return [encoder(v) for v in values]


def encoder_for(
    fmt: str,
    typ: pa.DataType,
    *,
    key: bool = False,
    topic: str = "",
    registry: str | None = None,
    key_schema: bool = False,
) -> Encoder:
    """How ``kafka to`` writes values (or, ``key``: keys) of Arrow type ``typ`` to
    ``topic`` in format ``fmt``. A text key goes as its text in every format; in
    ``connect`` a key of another type (one ``kafka from`` decoded from an envelope) as
    an envelope; in ``avro`` keys go as text (JSON text when not text) and values in
    Confluent's wire format, their schema registered at ``registry`` first.

    ``key_schema`` (``kafka to --key-format connect|avro``): keys of every type, text
    included, go in the format with their schema, as values do (Avro: registered as
    ``<topic>-key``), for a consumer that needs a typed key (a Connect struct)."""
    if fmt not in FORMATS:
        raise InvalidInputError(f"unknown format {fmt!r} (one of {', '.join(FORMATS)})")
    text = pa.types.is_string(typ) or pa.types.is_large_string(typ)
    as_text = pa.types.is_null(typ) or (not key_schema and (text or fmt == "avro"))
    if fmt == "json" or (key and as_text):
        return _json_value
    if fmt == "avro":
        from limno.streams.formats_avro import avro_encoder
        from limno.streams.registry_client import registry_url

        return avro_encoder(typ, topic, registry_url(registry), key=key)
    schema = connect.connect_schema(typ)

    def envelope(value: Any) -> str | None:
        if value is None:
            return None  # a tombstone stays one
        return json_text({"schema": schema, "payload": connect.to_payload(schema, value)})

    return envelope

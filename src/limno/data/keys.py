"""Pool keys: which fields order a record pool, and how key values compare.

A pool key is one or more field paths (``tenant,ts:desc``, ``kafka.offset``), each
ascending or descending; later fields break ties. Records lacking the key (or with
a null key field) are *keyless*: they sort after every keyed record, whatever the
direction, and key-range scans skip them.

Key values leave Arrow in two places: object metadata (min/max key, stored as
JSON) and bounds typed by a user (``--from 2024-01-01``). :func:`encode_value` and
:func:`decode_value` give key values a JSON form that keeps their type, and
:class:`SortKey` makes Python tuples compare exactly like Arrow sorts rows.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import functools
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from limno.data.nanos import (
    NanoDatetime,
    NanoTime,
    NanoTimedelta,
    micro,
    nanos,
    parse_datetime,
    python_value,
)
from limno.errors import InvalidInputError
from limno.lazy import lazy_module

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.compute as pc
else:
    pa = lazy_module("pyarrow")
    pc = lazy_module("pyarrow.compute")

__all__ = [
    "KeyField",
    "PoolKey",
    "SortKey",
    "decode_value",
    "encode_value",
    "is_sortable",
    "lookup_keys",
]


@dataclass(frozen=True)
class KeyField:
    """One field of a pool key: a dotted path and a direction."""

    path: tuple[str, ...]
    descending: bool = False

    @property
    def name(self) -> str:
        return ".".join(self.path)

    def __str__(self) -> str:
        return self.name + (":desc" if self.descending else "")


@dataclass(frozen=True)
class PoolKey:
    """The ordered fields of a pool key."""

    fields: tuple[KeyField, ...]

    @classmethod
    def parse(cls, text: str) -> PoolKey:
        """Parse ``"tenant,ts:desc"`` (``:asc`` is the default)."""
        if not isinstance(text, str):  # a list from Python would fail deep inside
            raise InvalidInputError(
                f"a pool key is text such as 'tenant,ts:desc', not a {type(text).__name__}"
            )
        fields = []
        for part in text.split(","):
            part = part.strip()
            name, _, direction = part.partition(":")
            direction = direction.strip().lower() or "asc"
            if direction not in ("asc", "desc"):
                raise InvalidInputError(f"key {part!r}: direction must be asc or desc")
            path = tuple(p.strip() for p in name.split("."))
            if not name or any(not p for p in path):
                raise InvalidInputError(f"invalid pool key {text!r}: empty field path")
            fields.append(KeyField(path, direction == "desc"))
        if not fields:
            raise InvalidInputError("a pool key needs at least one field")
        names = [f.name for f in fields]
        if len(set(names)) != len(names):
            raise InvalidInputError(f"invalid pool key {text!r}: a field appears twice")
        return cls(tuple(fields))

    def __str__(self) -> str:
        return ",".join(str(f) for f in self.fields)

    @property
    def names(self) -> list[str]:
        return [f.name for f in self.fields]

    @property
    def column_names(self) -> list[str]:
        """Names of the extracted key columns (positional, never clash with data)."""
        return [f"__k{i}" for i in range(len(self.fields))]

    def sort_keys(self) -> list[tuple[str, str]]:
        """Arrow ``sort_keys`` over the columns of :meth:`key_table`."""
        return [
            (c, "descending" if f.descending else "ascending")
            for c, f in zip(self.column_names, self.fields, strict=True)
        ]

    def key_columns(self, table: pa.Table | pa.RecordBatch) -> list[pa.ChunkedArray | pa.Array]:
        """Each key field's values (null where a record lacks the field)."""
        return [_extract(table, f.path) for f in self.fields]

    def key_table(self, table: pa.Table | pa.RecordBatch) -> pa.Table:
        """A table of just the key columns, named by :attr:`column_names`."""
        cols = self.key_columns(table)
        for f, col in zip(self.fields, cols, strict=True):
            if not is_sortable(col.type):
                raise InvalidInputError(
                    f"key field {f.name!r} has type {col.type}, which cannot be sorted"
                )
        if len(cols) > 1 and any(c.null_count for c in cols):
            # A record missing any key field is keyless: null out its other fields too, so
            # that it sorts after every keyed record (Arrow would otherwise order
            # ``(1, null)`` before ``(2, x)``) and ties with every other keyless record.
            keyed = self.keyed_mask(table)
            cols = [pc.if_else(keyed, c, pa.scalar(None, c.type)) for c in cols]
        return pa.table(dict(zip(self.column_names, cols, strict=True)))

    def sort_indices(self, table: pa.Table | pa.RecordBatch) -> pa.Array:
        """Indices that sort ``table`` by the key (stable; keyless rows last)."""
        keys = self.key_table(table)
        # nulls sort at the end by default (passing null_placement warns since Arrow 25)
        return pc.sort_indices(keys, sort_keys=self.sort_keys())

    def sort(self, table: pa.Table) -> pa.Table:
        """``table`` sorted by the key."""
        if table.num_rows <= 1:
            return table
        return table.take(self.sort_indices(table))

    def keyed_mask(self, table: pa.Table | pa.RecordBatch) -> pa.Array:
        """True for rows that have every key field."""
        mask = None
        for col in self.key_columns(table):
            valid = pc.is_valid(col)
            mask = valid if mask is None else pc.and_(mask, valid)
        assert mask is not None
        return mask

    def row_key(self, keys: pa.Table, i: int) -> tuple[Any, ...] | None:
        """The key of row ``i`` of a :meth:`key_table` (None when keyless)."""
        values = tuple(python_value(keys.column(c)[i]) for c in self.column_names)
        return None if any(v is None for v in values) else values

    def sort_key(self, key: Sequence[Any] | None) -> SortKey:
        """A Python value that orders keys as the pool sorts them."""
        return SortKey(None if key is None else tuple(key), self)

    def parse_bound(self, text: str, types: Sequence[pa.DataType]) -> tuple[Any, ...]:
        """Parse a user bound (``--from``/``--to``) into the key's types.

        A JSON array gives several fields (``'["acme", 5]'``); otherwise the text is
        split at commas, one part per key field; fewer parts than fields give a
        prefix bound.
        """
        parts: list[Any]
        stripped = text.strip()
        if stripped.startswith("["):
            try:
                parts = list(json.loads(stripped))
            except ValueError as e:
                raise InvalidInputError(f"bound {text!r}: invalid JSON array") from e
        elif len(self.fields) == 1:
            parts = [text]
        else:
            parts = text.split(",")
        if not parts or len(parts) > len(self.fields):
            raise InvalidInputError(
                f"bound {text!r}: expected 1 to {len(self.fields)} value(s) for key {self}"
            )
        out = []
        for f, part, typ in zip(self.fields, parts, types, strict=False):
            out.append(_parse_scalar(f.name, part, typ))
        return tuple(out)


def _extract(table: pa.Table | pa.RecordBatch, path: tuple[str, ...]) -> pa.Array:
    names = table.schema.names
    if path[0] not in names:
        return pa.nulls(table.num_rows)
    col = table.column(path[0])
    for part in path[1:]:
        if not pa.types.is_struct(col.type) or col.type.get_field_index(part) < 0:
            return pa.nulls(table.num_rows)
        col = pc.struct_field(col, part)
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    return col


def lookup_keys(keys: Any) -> list[Any]:
    """The keys of a point lookup as a list: a str or bytes would be read as a sequence
    of one-character keys (``get("12")`` looking up ``1`` and ``2``), and a lone number
    is not iterable at all, so both are refused naming the form wanted."""
    if isinstance(keys, str | bytes) or not isinstance(keys, Iterable):
        raise InvalidInputError(
            f"get takes a list of keys, not a {type(keys).__name__}: get([{keys!r}])"
        )
    return list(keys)


def is_sortable(t: pa.DataType) -> bool:
    """Whether values of type ``t`` can order a pool."""
    return bool(
        pa.types.is_null(t)
        or pa.types.is_boolean(t)
        or pa.types.is_integer(t)
        or pa.types.is_floating(t)
        or pa.types.is_decimal(t)
        or pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_fixed_size_binary(t)
        or pa.types.is_timestamp(t)
        or pa.types.is_date(t)
        or pa.types.is_time(t)
        or pa.types.is_duration(t)
    )


_FAMILIES = (
    ("number", ("int", "uint", "float", "double", "halffloat", "decimal", "bool")),
    ("text", ("string", "large_string", "utf8", "large_utf8")),
    ("binary", ("binary", "large_binary", "fixed_size_binary")),
    ("date or timestamp", ("timestamp", "date")),
    ("time of day", ("time",)),
    ("duration", ("duration",)),
)


@functools.lru_cache(maxsize=1024)  # a load asks it of every object of the pool
def key_family(type_text: str) -> str | None:
    """Which values a key type's values sort with (None for ``null``: any).

    Keys of one family compare by value across objects (an int64 key and a double
    key interleave); keys of different families have no common order.
    """
    if type_text.startswith("dictionary<values="):
        type_text = type_text[len("dictionary<values=") :]
    if type_text == "null":
        return None
    for family, prefixes in _FAMILIES:
        if any(type_text.startswith(p) for p in prefixes):
            return family
    return type_text


def _parse_scalar(name: str, text: Any, typ: pa.DataType) -> Any:
    if not isinstance(text, str):
        return text
    try:
        if pa.types.is_integer(typ):
            return int(text)
        if pa.types.is_floating(typ):
            return float(text)
        if pa.types.is_decimal(typ):
            return decimal.Decimal(text)
        if pa.types.is_boolean(typ):
            low = text.strip().lower()
            if low not in ("true", "false"):
                raise ValueError("expected true or false")
            return low == "true"
        if pa.types.is_timestamp(typ):
            value = parse_datetime(text.strip())
            if typ.tz and value.tzinfo is None:
                value = value.replace(tzinfo=dt.UTC)
            if not typ.tz and value.tzinfo is not None:
                value = value.astimezone(dt.UTC).replace(tzinfo=None)
            return value
        if pa.types.is_date(typ):
            return dt.date.fromisoformat(text.strip())
    except ValueError as e:
        raise InvalidInputError(f"bound {text!r} is not a valid {typ} for key {name!r}") from e
    return text


# -- JSON form of key values ---------------------------------------------------


def encode_value(v: Any) -> Any:
    """A JSON-safe form of a key value that :func:`decode_value` restores exactly."""
    if v is None or isinstance(v, bool | int | str):
        return v
    if isinstance(v, float):
        if v != v or v in (float("inf"), float("-inf")):
            return {"float": repr(v)}
        return v
    if isinstance(v, dt.datetime | dt.time | dt.timedelta) and nanos(v):
        return _encode_nanos(v)
    if isinstance(v, dt.datetime):
        return {"datetime": v.isoformat()}
    if isinstance(v, dt.date):
        return {"date": v.isoformat()}
    if isinstance(v, dt.time):
        return {"time": v.isoformat()}
    if isinstance(v, dt.timedelta):
        return {"timedelta_us": v // dt.timedelta(microseconds=1)}
    if isinstance(v, decimal.Decimal):
        return {"decimal": str(v)}
    if isinstance(v, bytes):
        return {"bytes": base64.b64encode(v).decode()}
    raise InvalidInputError(f"key value {v!r} of type {type(v).__name__} cannot be stored")


def _encode_nanos(v: dt.datetime | dt.time | dt.timedelta) -> Any:
    """The JSON form of a temporal value with nanoseconds (:mod:`.nanos`)."""
    base, ns = micro(v), nanos(v)
    if isinstance(base, dt.timedelta):
        return {"timedelta_ns": base // dt.timedelta(microseconds=1) * 1000 + ns}
    return {"datetime_ns" if isinstance(base, dt.datetime) else "time_ns": [base.isoformat(), ns]}


def decode_value(v: Any) -> Any:
    """Inverse of :func:`encode_value`."""
    if not isinstance(v, dict):
        return v
    ((kind, raw),) = v.items()
    if kind == "datetime_ns":
        return NanoDatetime(dt.datetime.fromisoformat(raw[0]), raw[1])
    if kind == "time_ns":
        return NanoTime(dt.time.fromisoformat(raw[0]), raw[1])
    if kind == "timedelta_ns":
        us, ns = divmod(raw, 1000)
        return NanoTimedelta(dt.timedelta(microseconds=us), ns)
    if kind == "float":
        return float(raw)
    if kind == "datetime":
        return dt.datetime.fromisoformat(raw)
    if kind == "date":
        return dt.date.fromisoformat(raw)
    if kind == "time":
        return dt.time.fromisoformat(raw)
    if kind == "timedelta_us":
        return dt.timedelta(microseconds=raw)
    if kind == "decimal":
        return decimal.Decimal(raw)
    if kind == "bytes":
        return base64.b64decode(raw)
    raise InvalidInputError(f"unknown key value encoding {kind!r}")


def encode_key(key: Sequence[Any] | None) -> list[Any] | None:
    return None if key is None else [encode_value(v) for v in key]


def decode_key(key: Sequence[Any] | None) -> tuple[Any, ...] | None:
    return None if key is None else tuple(decode_value(v) for v in key)


# -- Python ordering that matches Arrow's ---------------------------------------


def _rank(v: Any) -> int:
    """Values of different Python types order by a fixed rank (numbers, then text...)."""
    if isinstance(v, bool | int | float | decimal.Decimal):
        return 0
    if isinstance(v, str):
        return 1
    if isinstance(v, bytes):
        return 2
    if isinstance(v, dt.datetime):
        return 3
    if isinstance(v, dt.date):
        return 4
    return 5


def _cmp_values(a: Any, b: Any) -> int:
    ra, rb = _rank(a), _rank(b)
    if ra != rb:
        return -1 if ra < rb else 1
    if isinstance(a, dt.datetime | dt.time | dt.timedelta) and (nanos(a) or nanos(b)):
        na, nb = nanos(a), nanos(b)  # compared to the microsecond, then by nanoseconds
        return _cmp_values(micro(a), micro(b)) or (na > nb) - (na < nb)
    if isinstance(a, dt.datetime) and (a.tzinfo is None) != (b.tzinfo is None):
        a = a if a.tzinfo else a.replace(tzinfo=dt.UTC)
        b = b if b.tzinfo else b.replace(tzinfo=dt.UTC)
    if a != a:  # NaN sorts after every number, like Arrow
        return 0 if b != b else 1
    if b != b:
        return -1
    return -1 if a < b else (1 if a > b else 0)


#: types whose values of one type compare in Python exactly as _cmp_values orders them
_PLAIN = frozenset({int, str, bytes})


@functools.total_ordering
class SortKey:
    """A key (or key prefix) wrapped so Python comparisons follow the pool's order.

    Comparing a prefix with a longer key compares only the common fields, then the
    shorter one first, which is what range bounds need.
    """

    __slots__ = ("key", "pool_key")

    def __init__(self, key: tuple[Any, ...] | None, pool_key: PoolKey) -> None:
        self.key = key
        self.pool_key = pool_key

    def _cmp(self, other: SortKey) -> int:
        a, b = self.key, other.key
        if a is None or b is None:
            return (a is None) - (b is None)
        for f, x, y in zip(self.pool_key.fields, a, b, strict=False):
            if x.__class__ is y.__class__ and x.__class__ in _PLAIN:
                c = (x > y) - (x < y)  # what _cmp_values says for these, sooner
            else:
                c = _cmp_values(x, y)
            if c:
                # Arrow puts NaN after every number in both directions
                flip = f.descending and x == x and y == y
                return -c if flip else c
        return (len(a) > len(b)) - (len(a) < len(b))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SortKey) and self._cmp(other) == 0

    def __lt__(self, other: SortKey) -> bool:
        return self._cmp(other) < 0

    def __hash__(self) -> int:
        return hash(self.key)

    def __repr__(self) -> str:
        return f"SortKey({self.key!r})"

"""Search indexes on non-key fields: the entry that declares one, and its sidecar files.

A pool key orders a pool, so a lookup by key opens only the objects and row groups
whose key range holds it. A lookup by any other field (``status = 'failed'``,
``user_id = 'u-42'``) would read every object. A *search index* on that field (the
Zed lake's ``AddIndex``) says, for each data object, which row groups hold each value.

The design, and why:

* **One sidecar Parquet file per (object, index)**, at
  ``<pool-id>/data/<object-id>.<index-id>.idx``: the field's distinct non-null values
  of the object, sorted, each with the object's row groups holding it: one row per
  (value, row group), columns ``value`` and ``group`` (flat columns decode faster than
  a list per value, and a value is mostly in one row group). Objects are immutable, so
  an index on existing data cannot live inside them; a sidecar is written beside each
  object, by whoever commits the object (see :mod:`limno.pools.records.indexing`), and
  read with the object's own Parquet machinery (ranged reads on S3).
* **Both cardinalities.** A low-cardinality field (``status``) gives a sidecar of a
  few rows: one read answers. A high-cardinality field (an id) gives a sidecar of about
  as many rows as the object, written in row groups of :data:`SIDECAR_GROUP_ROWS`
  sorted values; the sidecar's own min/max statistics then say which of its row groups
  can hold a value, so a probe reads the footer (once per process for a local lake)
  and one small row group.
* **Exact, not probabilistic.** Parquet Bloom filters were the alternative: pyarrow 26
  writes them (``bloom_filter_options``) but offers no API to read them, they live
  inside the data file (so existing objects would have to be rewritten to get one),
  and a false positive costs a row-group read. A sorted value list answers "no" for
  certain and names the row groups to read.
* The sidecar's name carries the index's id (a KSUID, new for every ``index create``),
  not the field: a dropped and re-created index never mistakes an old sidecar for its
  own, and vacuum frees the sidecars of an index no retained commit holds anymore.

A missing or unreadable sidecar never changes an answer: the object is then read
whole, as without an index (:func:`probe` returns None). Nulls are not indexed (a
null equals nothing). Values of a type that cannot be sorted (lists, structs) are
not indexed either: the sidecar says so and readers read the object.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from limno.data.keys import PoolKey, is_sortable
from limno.data.objects import DataObject, data_path
from limno.errors import CorruptError, InvalidInputError, NotFoundError
from limno.lazy import lazy_module
from limno.storage import Storage

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from limno.data import parquet
else:
    pa = lazy_module("pyarrow")
    pc = lazy_module("pyarrow.compute")
    pq = lazy_module("pyarrow.parquet")
    parquet = lazy_module("limno.data.parquet")

__all__ = [
    "INDEX_PREFIX",
    "SIDECAR_GROUP_ROWS",
    "IndexSpec",
    "build_sidecar",
    "check_field",
    "coerce",
    "entry_key",
    "is_index_key",
    "matching",
    "probe",
    "read_groups",
    "sidecar_path",
    "sql_values",
]

#: snapshot entries that declare indexes: ``~index/<field>`` (``~`` sorts after every
#: object id, before the partitions' ``~partition/``)
INDEX_PREFIX = "~index/"
#: the first key after every index entry (``0`` follows ``/``)
INDEX_END = "~index0"
#: sorted values per row group of a sidecar: what one probe of a high-cardinality
#: index reads (plus the footer)
SIDECAR_GROUP_ROWS = 2048
#: the sidecar footer's key-value metadata entry describing it
_META = b"limno.index"
_FORBIDDEN = set(",:/\\")


def entry_key(field: str) -> str:
    return f"{INDEX_PREFIX}{field}"


def is_index_key(key: str) -> bool:
    return key.startswith(INDEX_PREFIX)


def check_field(field: str) -> str:
    """``field`` as an index names it: a dotted path (``status``, ``user.id``); no commas,
    colons, slashes or control characters (an index's entry key and the pool key's
    syntax hold it)."""
    text = field.strip() if isinstance(field, str) else ""
    parts = text.split(".")
    if (
        not text
        or len(text) > 256
        or any(c in _FORBIDDEN or ord(c) < 32 for c in text)
        or any(not p or p != p.strip() for p in parts)
    ):
        raise InvalidInputError(
            f"invalid index field {field!r}: a dotted field path without , : / or"
            " control characters"
        )
    return text


def sidecar_path(pool_id: str, object_id: str, index_id: str) -> str:
    """Where index ``index_id``'s sidecar of object ``object_id`` lives: beside the
    object, named after it (vacuum removes an object's files together)."""
    return f"{pool_id}/data/{object_id}.{index_id}.idx"


@dataclass(frozen=True)
class IndexSpec:
    """One search index: its field and id (the entry ``~index/<field>`` of a snapshot)."""

    field: str
    id: str
    created: str = ""

    @property
    def key(self) -> str:
        return entry_key(self.field)

    def to_json(self) -> dict[str, Any]:
        return {"field": self.field, "id": self.id, "created": self.created}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> IndexSpec:
        try:
            field, ident, created = d["field"], d["id"], d.get("created", "")
            if not all(isinstance(v, str) for v in (field, ident, created)):
                raise TypeError("field, id and created must be text")
        except (LookupError, TypeError) as e:
            raise CorruptError(f"unreadable index entry {dict(d)!r:.120} ({e})") from e
        return cls(field, ident, created)


# -- writing ---------------------------------------------------------------------------


def build_sidecar(storage: Storage, pool_id: str, obj: DataObject, spec: IndexSpec) -> int:
    """Write ``spec``'s sidecar of ``obj`` (reading only the field's column); its size."""
    pf = parquet.open_parquet(storage, data_path(pool_id, obj.id), size=obj.size or None)
    path = PoolKey.parse(spec.field).fields[0].path
    pieces: list[pa.Table] = []
    value_type: pa.DataType = pa.null()
    unindexed = False
    if path[0] in pf.schema_arrow.names:
        for group in range(pf.metadata.num_row_groups):
            col = _column(pf.read_row_group(group, columns=[path[0]]), spec.field)
            if not is_sortable(col.type):
                unindexed = True
                pieces = []
                break
            value_type = col.type
            distinct = pc.unique(col.drop_null())
            groups = pa.array([group] * len(distinct), pa.int32())
            pieces.append(pa.table({"value": distinct, "group": groups}))
    if pieces and not pa.types.is_null(value_type):
        table = pa.concat_tables(pieces).sort_by([("value", "ascending"), ("group", "ascending")])
    else:
        table = pa.table({"value": pa.array([], pa.null()), "group": pa.array([], pa.int32())})
    info = {
        "version": 1,
        "object": obj.id,
        "field": spec.field,
        "index": spec.id,
        "row_groups": pf.metadata.num_row_groups,
        "unindexed": unindexed,
    }
    table = table.replace_schema_metadata({_META: json.dumps(info).encode()})
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, row_group_size=SIDECAR_GROUP_ROWS, compression="zstd")
    data = sink.getvalue().to_pybytes()
    storage.put(sidecar_path(pool_id, obj.id, spec.id), data)
    return len(data)


def _column(table: pa.Table, field: str) -> pa.Array:
    """The values of ``field`` (a dotted path) in ``table``, dictionaries decoded."""
    col = PoolKey.parse(field).key_columns(table)[0]
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    if pa.types.is_dictionary(col.type):
        col = col.dictionary_decode()
    return col


# -- reading ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Sidecar:
    """What a probe needs of a sidecar before reading any of its rows (kept per process:
    a sidecar is never rewritten with other content, so this never goes stale)."""

    size: int
    metadata: Any  # pq.FileMetaData
    type: Any  # pa.DataType of ``value``
    unindexed: bool
    #: (min, max) of ``value`` per row group (None: no statistics)
    ranges: tuple[tuple[Any, Any] | None, ...]


#: sidecars described so far, by store and path (cleared when full)
_sidecars: dict[str, _Sidecar] = {}
_SIDECARS = 1 << 16


def _sidecar(storage: Storage, path: str) -> _Sidecar:
    key = f"{storage.uri}/{path}"
    found = _sidecars.get(key)
    if found is not None:
        return found
    size = storage.head(path).size
    pf = parquet.open_parquet(storage, path, size=size, small_reads=True)
    info = json.loads((pf.schema_arrow.metadata or {}).get(_META, b"{}"))
    ranges = []
    for g in range(pf.metadata.num_row_groups):
        stats = pf.metadata.row_group(g).column(0).statistics
        ranges.append((stats.min, stats.max) if stats is not None and stats.has_min_max else None)
    found = _Sidecar(
        size,
        pf.metadata,
        pf.schema_arrow.field("value").type,
        not isinstance(info, dict) or bool(info.get("unindexed")),
        tuple(ranges),
    )
    if len(_sidecars) >= _SIDECARS:
        _sidecars.clear()
    _sidecars[key] = found
    return found


def probe(
    storage: Storage,
    pool_id: str,
    object_id: str,
    index_id: str,
    values: Sequence[Any],
    sql: bool = False,
) -> list[int] | None:
    """The row groups of object ``object_id`` that hold one of ``values`` (``[]``: none),
    by index ``index_id``'s sidecar; None when the sidecar cannot tell (missing,
    unreadable, an unindexed type, or, with ``sql``, constants SQL may compare
    otherwise than by value: :func:`sql_values`).

    A sidecar's footer is read once per process; then a probe reads one small row
    group, or nothing when no row group's value range covers a value."""
    path = sidecar_path(pool_id, object_id, index_id)
    try:
        car = _sidecar(storage, path)
        if car.unindexed:
            return None
        wanted = sql_values(values, car.type) if sql else coerce(values, car.type)
        if wanted is None:
            return None
        candidates = [g for g, r in enumerate(car.ranges) if _may_hold(r, wanted)]
        if not wanted or not candidates or car.metadata.num_rows == 0:
            return []
        pf = parquet.open_parquet(
            storage, path, size=car.size, metadata=car.metadata, small_reads=True
        )
        table = pf.read_row_groups(candidates, use_threads=False)
    except (NotFoundError, CorruptError, ValueError, KeyError):
        return None
    values_set = pa.array(wanted, car.type)
    hits = table.filter(pc.is_in(table.column("value"), value_set=values_set))
    return sorted({int(g) for g in hits.column("group").to_pylist()})


def _may_hold(bounds: tuple[Any, Any] | None, wanted: Sequence[Any]) -> bool:
    """Whether a sidecar row group whose values lie in ``bounds`` can hold one of
    ``wanted`` (unknown or incomparable bounds: it can; so can a NaN, which Parquet's
    statistics leave out)."""
    if bounds is None:
        return True
    try:
        lo, hi = bounds
        return any(w != w or lo <= w <= hi for w in wanted)
    except TypeError:
        return True


def read_groups(
    storage: Storage, pool_id: str, obj: DataObject, groups: Sequence[int] | None
) -> pa.Table:
    """Row groups ``groups`` of ``obj`` (None: all of them), every column."""
    pf = parquet.open_parquet(
        storage, data_path(pool_id, obj.id), size=obj.size or None, small_reads=True
    )
    if groups is None:
        return pf.read()
    return pf.read_row_groups(list(groups))


def matching(table: pa.Table, field: str, values: Sequence[Any]) -> pa.Table:
    """The rows of ``table`` whose ``field`` equals one of ``values``."""
    if not table.num_rows:
        return table
    col = _column(table, field)
    wanted = coerce(values, col.type)
    if not wanted:
        return table.slice(0, 0)
    return table.filter(pc.is_in(col, value_set=pa.array(wanted, col.type)))


_NUMBER = (int, float, decimal.Decimal)


def coerce(values: Sequence[Any], typ: pa.DataType) -> list[Any]:
    """``values`` in type ``typ``, those that have an exact equal there; text is parsed
    (the CLI's values are text), other values only meet values of their own kind:
    numbers numbers, times times, bytes bytes."""
    if pa.types.is_dictionary(typ):
        typ = typ.value_type
    if pa.types.is_null(typ):
        return []
    out = []
    for v in values:
        if v is None or not _same_kind(v, typ):
            continue
        try:
            value = _one(v, typ).cast(typ, safe=True)[0].as_py()
        except (pa.ArrowException, OverflowError, ValueError, TypeError):
            continue
        out.append(value)
        if isinstance(value, float) and value == 0:
            out.append(-value)  # -0.0 equals 0.0, but Arrow's is_in tells them apart
    return out


def _one(v: Any, typ: pa.DataType) -> pa.Array:
    """``v`` as a one-value array to cast to ``typ``: an integer as a decimal for a
    decimal type (an int64 fits only a decimal of precision 19 + scale), one beyond
    int64 as a uint64 (pyarrow infers int64 and overflows)."""
    if isinstance(v, int) and not isinstance(v, bool):
        if pa.types.is_decimal(typ):
            return pa.array([decimal.Decimal(v)])
        if v > 2**63 - 1:
            return pa.array([v], pa.uint64())
    return pa.array([v])


def _same_kind(v: Any, typ: pa.DataType) -> bool:
    if isinstance(v, str):
        return True
    if isinstance(v, bool):
        return bool(pa.types.is_boolean(typ))
    if isinstance(v, _NUMBER):
        return bool(
            pa.types.is_integer(typ) or pa.types.is_floating(typ) or pa.types.is_decimal(typ)
        )
    if isinstance(v, dt.datetime | dt.date):
        return bool(pa.types.is_timestamp(typ) or pa.types.is_date(typ))
    if isinstance(v, bytes):
        return bool(
            pa.types.is_binary(typ)
            or pa.types.is_large_binary(typ)
            or pa.types.is_fixed_size_binary(typ)
        )
    return True


def sql_values(values: Sequence[Any], typ: pa.DataType) -> list[Any] | None:
    """SQL constants (:mod:`limno.data.sql_ranges`) as values of type ``typ`` that equal
    exactly the column values SQL finds equal; None when SQL may compare otherwise
    (text against a number, floats, times with a zone): then no pruning."""
    if pa.types.is_dictionary(typ):
        typ = typ.value_type
    out = []
    for v in values:
        if isinstance(v, bool) or v is None:
            return None
        if pa.types.is_string(typ) or pa.types.is_large_string(typ):
            if not isinstance(v, str):
                return None
            out.append(v)
        elif pa.types.is_integer(typ) or pa.types.is_decimal(typ):
            if not isinstance(v, int | decimal.Decimal):
                return None
            out += coerce([v], typ)  # an inexact one equals no value of the column
        elif pa.types.is_date(typ) or (pa.types.is_timestamp(typ) and typ.tz is None):
            if not isinstance(v, dt.date) or (isinstance(v, dt.datetime) and v.tzinfo):
                return None
            if pa.types.is_date(typ) and isinstance(v, dt.datetime):
                return None
            out += coerce([v], typ)
        elif pa.types.is_null(typ):
            out = []
        else:
            return None
    return out

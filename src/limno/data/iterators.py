"""Sleeper-style iterators: dedup, per-key aggregation and age-off on a key-ordered stream.

Why a module of its own: a pool's iterators must give *the same answer* wherever
rows are read — scans (both directions), point lookups, SQL queries, and compaction
— or results would depend on whether compaction has run. So there is exactly one
implementation, and every reader pipes its key-ordered stream through
:func:`apply` (or a :class:`Combiner`). It is self-contained: it only needs the
pool key, the stream, and the :class:`IteratorSpec` stored in the pool config.

Semantics (the contract every caller relies on):

* Input: Arrow tables in the pool's key order; rows with equal keys are adjacent
  and, among equal keys, in write order, oldest first — or the exact reverse
  (``reverse=True``, a descending scan: newest first). Tables may differ in schema;
  they are unified by :mod:`._schema`'s widening rule.
* ``age-off(F,D)``: a row is dropped when ``F`` is older than ``now - D`` (strictly).
  ``F`` may be a timestamp (any unit; any zone; naive means UTC), a date (midnight
  UTC), an integer or float holding epoch *milliseconds*, or ISO 8601 text. Rows
  where ``F`` is null, missing, or of another type are kept: nothing is dropped
  without evidence that it is old. Age-off runs before dedup and aggregation, so an
  aged-off newest version does not hide an older live one. ``now`` is fixed when the
  stream starts. Since ``now`` only grows, compaction never drops a row a later
  query would keep.
* ``dedup``: one row per key, the newest (last write wins: upsert).
* ``sum(F)``, ``min(F)``, ``max(F)``: one row per key; each named field is
  aggregated over the group with SQL's null rule (nulls ignored; all null gives
  null); every other field comes from the newest row. ``sum`` takes numbers and
  widens like SQL (integers to int64, floats to float64, decimals to precision 38);
  ``min``/``max`` keep the type. Aggregation is associative, so a group split over
  several tables (or already compacted) gives the same answer: a pending group is
  held as one partially combined row.
* Keyless rows (a key field missing or null; see :meth:`PoolKey.keyed_mask`) are
  never grouped: each passes through on its own (age-off still applies).
* Field names are dotted paths into structs, like pool keys (``value.count``).
* ``python(CLASS,k=v,...)``: the pool's own iterator class, run after the built-in
  ones on their output (:mod:`limno.data.user_iterators`, which states its protocol).

Everything is vectorized with ``pyarrow.compute``: group boundaries come from
comparing each key row with the previous one, the newest row of each group is taken
by index, and aggregates come from ``Table.group_by`` over a group-number column
(``use_threads=False`` keeps groups in stream order).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from limno.data import user_iterators
from limno.data.user_iterators import UserIterator, attach_file, parse_user
from limno.errors import InvalidInputError
from limno.lazy import lazy_module
from limno.units import parse_duration

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.types as pt

    from limno.data import kway
    from limno.data.keys import PoolKey
else:
    pa = lazy_module("pyarrow")
    pc = lazy_module("pyarrow.compute")
    pt = lazy_module("pyarrow.types")
    kway = lazy_module("limno.data.kway")

__all__ = [
    "AGGREGATES",
    "AgeOff",
    "Aggregation",
    "Combiner",
    "IteratorSpec",
    "apply",
    "needs_grouping",
    "parse_iterators",
]

#: the aggregation functions an iterator may name
AGGREGATES = ("sum", "min", "max")
_ITEM = re.compile(r"([A-Za-z][A-Za-z0-9_-]*)\s*(?:\((.*)\))?", re.DOTALL)
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_USAGE = "expected dedup, sum(F), min(F), max(F), age-off(F,DURATION) or python(CLASS)"


# -- the spec ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Aggregation:
    """``op(field)``: ``op`` one of :data:`AGGREGATES`, ``field`` a dotted path."""

    op: str
    field: str

    @property
    def path(self) -> tuple[str, ...]:
        return tuple(self.field.split("."))

    def __str__(self) -> str:
        return f"{self.op}({self.field})"


@dataclass(frozen=True)
class AgeOff:
    """``age-off(field,duration)``: drop rows whose ``field`` is older than ``duration``."""

    field: str
    duration: str  # as written, e.g. "30d" or "1d12h"

    @property
    def path(self) -> tuple[str, ...]:
        return tuple(self.field.split("."))

    @property
    def seconds(self) -> int:
        return age_off_seconds(self.duration)

    def __str__(self) -> str:
        return f"age-off({self.field},{self.duration})"


@dataclass(frozen=True)
class IteratorSpec:
    """A pool's iterators (empty by default, and then falsy); ``user`` runs last."""

    dedup: bool = False
    aggregations: tuple[Aggregation, ...] = ()
    age_offs: tuple[AgeOff, ...] = ()
    user: UserIterator | None = None

    def __bool__(self) -> bool:
        return self.dedup or bool(self.aggregations) or bool(self.age_offs) or bool(self.user)

    @property
    def needs_order(self) -> bool:
        """Rows are grouped by key and the newest row matters: readers must keep write
        order among equal keys (compaction takes objects consecutive in write order)."""
        return needs_grouping(self)

    def texts(self) -> list[str]:
        """The canonical iterator items; :func:`parse_iterators` reads them back."""
        items = ["dedup"] if self.dedup else []
        items += [str(a) for a in self.aggregations] + [str(a) for a in self.age_offs]
        return items + ([str(self.user)] if self.user else [])

    def describe(self) -> str:
        """One line for ``limno ls`` and ``status``: ``dedup, age-off(ts,30d)``."""
        texts = self.texts()
        if self.user:
            texts[-1] = self.user.describe()
        return ", ".join(texts) or "none"

    def to_json(self) -> dict[str, Any]:
        """The form stored in the pool config (``{}`` when empty)."""
        out: dict[str, Any] = {}
        if self.dedup:
            out["dedup"] = True
        if self.aggregations:
            out["aggregations"] = [{"op": a.op, "field": a.field} for a in self.aggregations]
        if self.age_offs:
            out["age_off"] = [{"field": a.field, "duration": a.duration} for a in self.age_offs]
        if self.user:
            out["user"] = self.user.to_json()
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> IteratorSpec:
        """Inverse of :meth:`to_json`, validated as :func:`parse_iterators` validates."""
        if not data:
            return cls()
        try:
            unknown = set(data) - {"dedup", "aggregations", "age_off", "user"}
            if unknown:
                raise ValueError(f"unknown entry {sorted(unknown)[0]!r}")
            texts = ["dedup"] if data.get("dedup") else []
            texts += [f"{a['op']}({a['field']})" for a in data.get("aggregations", ())]
            texts += [f"age-off({a['field']},{a['duration']})" for a in data.get("age_off", ())]
        except (KeyError, TypeError, ValueError) as e:
            raise InvalidInputError(f"invalid iterator settings {dict(data)!r}: {e}") from e
        spec = parse_iterators(texts) if texts else cls()
        if data.get("user"):
            spec = dataclasses.replace(spec, user=UserIterator.from_json(data["user"]))
        return spec


def needs_grouping(spec: IteratorSpec) -> bool:
    """Whether ``spec`` combines rows of equal keys (dedup, aggregation, or a user
    iterator, which gets whole key groups), so its input must be in key order with
    write order among ties; age-off alone is a row-by-row filter that needs neither."""
    return spec.dedup or bool(spec.aggregations) or spec.user is not None


# -- parsing -------------------------------------------------------------------------------
def age_off_seconds(text: str) -> int:
    """Whole seconds of an age-off duration (limno.units' notation, longer than zero)."""
    seconds = int(parse_duration(text).total_seconds())
    if seconds <= 0:
        raise InvalidInputError(f"invalid duration {text!r}: must be longer than zero")
    return seconds


def _split_items(text: str) -> list[str]:
    """Split at commas outside parentheses."""
    items, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth < 0:
                raise InvalidInputError(f"invalid iterator {text!r}: unbalanced ')'")
        elif ch == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    if depth:
        raise InvalidInputError(f"invalid iterator {text!r}: unclosed '('")
    items.append(text[start:])
    return [item.strip() for item in items]


def _field(item: str, text: str) -> str:
    parts = [p.strip() for p in text.split(".")]
    if not text.strip() or any(not p for p in parts) or any(c in text for c in "()"):
        raise InvalidInputError(f"invalid iterator {item!r}: {text.strip()!r} is not a field")
    return ".".join(parts)


def _overlap(a: str, b: str) -> bool:
    """``a`` and ``b`` are the same field or one contains the other."""
    return a == b or a.startswith(b + ".") or b.startswith(a + ".")


def parse_iterators(
    texts: Sequence[str] | str,
    key_fields: Sequence[str] = (),
    *,
    file_text: str | None = None,
    file_name: str | None = None,
) -> IteratorSpec:
    """Parse ``--iterator`` values (each may list several items, comma-separated).

    ``key_fields`` are the pool key's field names: aggregating one is an error.
    ``file_text`` is an iterator file (named ``file_name``) whose class a
    ``python(CLASS)`` item names. Errors raise :class:`InvalidInputError` naming
    the offending item. Nothing is imported or run here.
    """
    if isinstance(texts, str):
        texts = [texts]
    dedup: str | None = None
    user: UserIterator | None = None
    aggs: list[tuple[str, Aggregation]] = []
    ages: list[AgeOff] = []
    for text in texts:
        for item in _split_items(text):
            if not item:
                raise InvalidInputError(f"invalid iterator {text!r}: empty item ({_USAGE})")
            m = _ITEM.fullmatch(item)
            name = m.group(1).lower() if m else ""
            args = m.group(2) if m else None
            if name == "dedup" and args is None:
                if dedup is not None:
                    raise InvalidInputError(f"iterator {item!r} is given twice")
                dedup = item
            elif name in AGGREGATES and args is not None:
                if "," in args:
                    raise InvalidInputError(f"invalid iterator {item!r}: {name} takes one field")
                aggs.append((item, Aggregation(name, _field(item, args))))
            elif name in ("age-off", "ageoff", "age_off") and args is not None:
                field, comma, duration = args.partition(",")
                if not comma:
                    raise InvalidInputError(
                        f"invalid iterator {item!r}: expected age-off(FIELD,DURATION),"
                        " as in age-off(ts,30d)"
                    )
                try:
                    age_off_seconds(duration)
                except InvalidInputError as e:
                    raise InvalidInputError(f"invalid iterator {item!r}: {e}") from None
                age = AgeOff(_field(item, field), duration.strip().lower())
                if any(a.field == age.field for a in ages):
                    raise InvalidInputError(f"iterator {item!r}: {age.field!r} is aged off twice")
                ages.append(age)
            elif name == "python" and args is not None:
                if user is not None:
                    raise InvalidInputError(f"iterator {item!r}: a pool has one python iterator")
                user = parse_user(item, args)
            else:
                raise InvalidInputError(f"unknown iterator {item!r}: {_USAGE}")
    if dedup is not None and aggs:
        raise InvalidInputError(
            f"iterators {dedup!r} and {aggs[0][0]!r} cannot be combined: an aggregation"
            " already keeps one row per key (other fields from the newest row)"
        )
    for i, (item, agg) in enumerate(aggs):
        for other_item, other in aggs[:i]:
            if _overlap(agg.field, other.field):
                raise InvalidInputError(
                    f"iterator {item!r}: field {agg.field!r} is already aggregated"
                    f" by {other_item!r}"
                )
        for key in key_fields:
            if _overlap(agg.field, key):
                raise InvalidInputError(
                    f"iterator {item!r}: {agg.field!r} is (part of) the pool key {key!r},"
                    " which cannot be aggregated"
                )
    user = attach_file(user, file_text, file_name)
    return IteratorSpec(dedup is not None, tuple(a for _, a in aggs), tuple(ages), user)


# -- columns -------------------------------------------------------------------------------
def _column(table: pa.Table, path: Sequence[str]) -> pa.Array | None:
    """The values at a dotted path (dictionaries decoded), or None when absent."""
    if path[0] not in table.column_names:
        return None
    col = table.column(path[0])
    col = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    for part in path[1:]:
        if not pt.is_struct(col.type) or col.type.get_field_index(part) < 0:
            return None
        col = pc.struct_field(col, part)
    if pt.is_dictionary(col.type):
        col = col.dictionary_decode()
    return col


def _with_child(arr: pa.StructArray, path: Sequence[str], values: pa.Array) -> pa.StructArray:
    """``arr`` with the child at ``path`` replaced; a null struct becomes valid where the
    new child has a value (an aggregate of older rows under a newest null parent)."""
    children = arr.flatten()
    fields = list(arr.type)
    i = arr.type.get_field_index(path[0])
    child = values if len(path) == 1 else _with_child(children[i], path[1:], values)
    children[i] = child
    fields[i] = pa.field(fields[i].name, child.type, True, fields[i].metadata)
    mask = pc.and_(arr.is_null(), child.is_null()) if arr.null_count else None
    return pa.StructArray.from_arrays(children, fields=fields, mask=mask)


def _replace(table: pa.Table, path: Sequence[str], values: pa.Array) -> pa.Table:
    i = table.schema.get_field_index(path[0])
    if len(path) > 1:
        col = table.column(i)
        col = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
        values = _with_child(col, path[1:], values)
    return table.set_column(i, pa.field(path[0], values.type), values)


# -- age-off -------------------------------------------------------------------------------
def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _epoch_us(value: dt.datetime) -> int:
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    return (value - _EPOCH) // dt.timedelta(microseconds=1)


def _parse_times(col: pa.Array) -> pa.Array:
    """ISO 8601 text as int64 epoch microseconds (null where it is not a time)."""
    for typ in (pa.timestamp("us", "UTC"), pa.timestamp("us")):
        try:
            return pc.cast(pc.cast(col, typ), pa.int64())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            pass
    # mixed zones or some values that are not times: the rare path, value by value
    out: list[int | None] = []
    for v in col.to_pylist():
        try:
            out.append(_epoch_us(dt.datetime.fromisoformat(v.replace("Z", "+00:00"))))
        except (AttributeError, TypeError, ValueError):
            out.append(None)
    return pa.array(out, pa.int64())


def _older(col: pa.Array, cutoff_us: int) -> pa.Array | None:
    """True where ``col`` lies before the cutoff; None when its type holds no time."""
    t = col.type
    if pt.is_timestamp(t):
        per_unit = {"s": 1_000_000, "ms": 1000, "us": 1}
        bound = cutoff_us * 1000 if t.unit == "ns" else _ceil_div(cutoff_us, per_unit[t.unit])
        old = pc.less(pc.cast(col, pa.int64()), bound)
    elif pt.is_date32(t):
        old = pc.less(pc.cast(col, pa.int32()), _ceil_div(cutoff_us, 86_400_000_000))
    elif pt.is_date64(t) or (pt.is_integer(t) and not pt.is_uint64(t)):  # epoch ms
        old = pc.less(pc.cast(col, pa.int64()), _ceil_div(cutoff_us, 1000))
    elif pt.is_integer(t) or pt.is_floating(t) or pt.is_decimal(t):
        old = pc.less(pc.cast(col, pa.float64(), safe=False), cutoff_us / 1000)
    elif pt.is_string(t) or pt.is_large_string(t) or pt.is_string_view(t):
        old = pc.less(_parse_times(col), cutoff_us)
    else:
        return None
    return pc.fill_null(old, False)


# -- grouping ------------------------------------------------------------------------------
def _group_starts(table: pa.Table, key: PoolKey) -> tuple[pa.Array, pa.Array, bool]:
    """(first row of each group, per-row "starts a group" flags, last row keyed?).

    A row starts a group unless it is keyed and its key equals the previous row's;
    keyless rows (all key columns null, see :meth:`PoolKey.key_table`) start their own.
    """
    n = table.num_rows
    keys = key.key_table(table)
    cols = [c.combine_chunks() if c.num_chunks != 1 else c.chunk(0) for c in keys.columns]
    last_keyed = all(c[n - 1].is_valid for c in cols)
    same: pa.Array | None = None
    if n > 1 and not any(pt.is_null(c.type) for c in cols):
        for c in cols:
            a, b = c.slice(1), c.slice(0, n - 1)
            eq = pc.equal(a, b)
            if pt.is_floating(c.type):  # NaN keys sort together, so they group together
                eq = pc.or_(eq, pc.and_(pc.is_nan(a), pc.is_nan(b)))
            same = eq if same is None else pc.and_(same, eq)
    if same is None:
        flags = pa.repeat(pa.scalar(True), n)
    else:
        flags = pa.concat_arrays([pa.array([True]), pc.invert(pc.fill_null(same, False))])
    return pc.indices_nonzero(flags), flags, last_keyed


def _check_type(agg: Aggregation, t: pa.DataType) -> None:
    if agg.op == "sum":
        ok = pt.is_integer(t) or pt.is_floating(t) or pt.is_decimal(t)
    else:
        ok = not (pt.is_nested(t) or pt.is_dictionary(t))
    if not ok:
        what = "summed" if agg.op == "sum" else "compared"
        raise InvalidInputError(
            f"iterator {agg}: field {agg.field!r} holds {t}, which cannot be {what}"
        )


class Combiner:
    """Apply an :class:`IteratorSpec` to a key-ordered stream, one table at a time.

    :meth:`feed` returns the rows that are complete (the key group at the end of a
    table may continue in the next one and is held back, already combined into one
    row); :meth:`finish` returns what is held. ``now`` (default: the time of
    construction) fixes age-off's cutoff for the whole stream; ``reverse`` says the
    stream runs newest first among equal keys (a descending scan), which gives
    exactly the reverse of the forward output. Built-in iterators only: a user
    iterator (``spec.user``) runs in :func:`apply`, on a Combiner's output.
    """

    def __init__(
        self,
        key: PoolKey,
        spec: IteratorSpec,
        now: dt.datetime | None = None,
        reverse: bool = False,
    ) -> None:
        self.key = key
        self.spec = spec
        self.reverse = reverse
        now_us = _epoch_us(now if now is not None else dt.datetime.now(dt.UTC))
        self._cutoffs = [(a.path, now_us - a.seconds * 1_000_000) for a in spec.age_offs]
        self._grouping = spec.dedup or bool(spec.aggregations)  # a user iterator: apply's
        self._held: pa.Table | None = None

    def feed(self, table: pa.Table | pa.RecordBatch) -> pa.Table:
        """The next table of the stream in; the completed output rows out."""
        if isinstance(table, pa.RecordBatch):
            table = pa.Table.from_batches([table])
        table = self._age_off(table)
        if not self._grouping:
            return table
        if self._held is not None:
            if not table.num_rows:
                return table
            table = kway.concat_unified([self._held, table])
            self._held = None
        if not table.num_rows:
            return table
        starts, flags, last_keyed = _group_starts(table, self.key)
        out = self._combine(table, starts, flags)
        if last_keyed:  # the last group may go on in the next table
            self._held = out.slice(out.num_rows - 1)
            out = out.slice(0, out.num_rows - 1)
        return out

    def finish(self) -> pa.Table:
        """The group held back at the end of the stream (empty when none)."""
        held, self._held = self._held, None
        return held if held is not None else pa.table({})

    def _age_off(self, table: pa.Table) -> pa.Table:
        for path, cutoff_us in self._cutoffs:
            if not table.num_rows:
                break
            col = _column(table, path)
            old = None if col is None else _older(col, cutoff_us)
            if old is not None and old.true_count:
                table = table.filter(pc.invert(old))
        return table

    def _combine(self, table: pa.Table, starts: pa.Array, flags: pa.Array) -> pa.Table:
        """One row per group: the newest row, aggregated fields replaced."""
        n, groups = table.num_rows, len(starts)
        if groups == n and not self.spec.aggregations:
            return table
        if self.reverse:
            newest = starts
        else:
            ends = pc.subtract(starts.slice(1), pa.scalar(1, starts.type))
            newest = pa.concat_arrays([ends, pa.array([n - 1], starts.type)])
        out = table.take(newest)
        if not self.spec.aggregations:
            return out
        gid = pc.subtract(pc.cumulative_sum(pc.cast(flags, pa.int64())), 1)
        columns: dict[str, pa.Array] = {"__g": gid}
        wanted: list[tuple[str, str]] = []
        paths: list[tuple[str, ...]] = []
        for i, agg in enumerate(self.spec.aggregations):
            col = _column(table, agg.path)
            if col is None or pt.is_null(col.type):
                continue  # nothing to aggregate: the newest row's value (null) stands
            _check_type(agg, col.type)
            columns[f"v{i}"] = col
            wanted.append((f"v{i}", agg.op))
            paths.append(agg.path)
        if not wanted:
            return out
        result = pa.table(columns).group_by("__g", use_threads=False).aggregate(wanted)
        for (name, op), path in zip(wanted, paths, strict=True):
            values = result.column(f"{name}_{op}")
            values = values.combine_chunks() if values.num_chunks != 1 else values.chunk(0)
            out = _replace(out, path, values)
        return out


def apply(
    tables: Iterable[pa.Table],
    key: PoolKey,
    spec: IteratorSpec,
    now: dt.datetime | None = None,
    reverse: bool = False,
) -> Iterator[pa.Table]:
    """``tables`` (a key-ordered stream) with ``spec`` applied; only non-empty tables
    are yielded. An empty spec passes the stream through."""
    if not spec:
        yield from (t for t in tables if t.num_rows)
        return
    if spec.user is not None:  # the built-in iterators first, the pool's class on their output
        built_in = apply(tables, key, dataclasses.replace(spec, user=None), now, reverse)
        yield from user_iterators.run(spec.user, key, built_in, reverse)
        return
    combiner = Combiner(key, spec, now=now, reverse=reverse)
    for table in tables:
        out = combiner.feed(table)
        if out.num_rows:
            yield out
    out = combiner.finish()
    if out.num_rows:
        yield out

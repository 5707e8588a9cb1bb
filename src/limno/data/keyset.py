"""The keys of a many-key lookup as one sorted Arrow table, matched a whole object at a time.

A point lookup of a few keys binary-searches each one in the rows of an object
(``scan.py``): a handful of Python comparisons a key, the fastest way for a few.
For thousands of keys that is most of the cost, so :func:`key_set` sorts and dedupes
the keys once in Arrow and :func:`matching` picks an object's rows holding any of
them with one vectorized membership test (``is_in`` for one key field, a semi join
for several).

Both must agree exactly with :class:`~limno.data.keys.SortKey`, which defines key
order and equality everywhere else. They do only where Arrow compares values the way
SortKey does: integers, booleans, text, bytes, decimals, dates, times and timestamps
of plain Python values (no floats: NaN and -0.0; no nanosecond values, which Arrow
would truncate), compared within one type family. Anything else makes
:func:`key_set` or :func:`matching` return None, and the caller looks those keys up
one at a time as before.
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from limno.data.keys import PoolKey, SortKey
from limno.lazy import lazy_module

if TYPE_CHECKING:
    import pyarrow.compute as pc
else:
    pc = lazy_module("pyarrow.compute")  # 40 ms to import: a lookup of a few keys needs none

__all__ = ["KeySet", "key_set", "matching"]

#: Python classes (exactly: subclasses such as NanoDatetime carry what Arrow drops)
#: whose values Arrow orders and compares as SortKey does
_PLAIN = frozenset({int, bool, str, bytes, decimal.Decimal, dt.date, dt.datetime, dt.time})

#: Arrow type families; values match only within one (a cast across them, such as
#: integer to text, would make ``5`` equal ``"5"``, which SortKey does not)
_FAMILIES: tuple[tuple[str, Callable[[pa.DataType], bool]], ...] = (
    ("integer", pa.types.is_integer),
    ("boolean", pa.types.is_boolean),
    ("text", lambda t: pa.types.is_string(t) or pa.types.is_large_string(t)),
    ("bytes", lambda t: pa.types.is_binary(t) or pa.types.is_large_binary(t)),
    ("decimal", pa.types.is_decimal),
    ("date", pa.types.is_date),
    ("time", pa.types.is_time),
    ("timestamp", pa.types.is_timestamp),
)


@dataclass(frozen=True)
class KeySet:
    """Distinct wanted keys in key order, twice: as SortKeys (to bisect object and row
    group ranges) and as a table of :attr:`PoolKey.column_names` (to match rows)."""

    sort_keys: list[SortKey]
    table: pa.Table


def key_set(keys: Sequence[tuple[Any, ...]], key: PoolKey) -> KeySet | None:
    """``keys`` (full keys) sorted and deduplicated by Arrow, or None when their values
    are not all of types Arrow compares as SortKey does (see the module docstring).

    A key with a null field is dropped: it is keyless, and lookups never return those.
    """
    full = [k for k in keys if None not in k]
    columns: list[list[Any]] = [list(c) for c in zip(*full, strict=True)] if full else []
    if len(columns) != len(key.fields) or not all(_plain(c) for c in columns):
        return None
    try:
        arrays = [pa.array(c) for c in columns]
    except (pa.ArrowException, OverflowError, TypeError, ValueError):
        return None
    if any(_family(a.type) is None for a in arrays):
        return None
    table = pa.table(dict(zip(key.column_names, arrays, strict=True)))
    order = pc.sort_indices(table, sort_keys=key.sort_keys())
    table = table.take(order)
    n = table.num_rows
    if n > 1:
        fresh = np.zeros(n, dtype=bool)
        fresh[0] = True
        for col in table.columns:
            fresh[1:] |= pc.not_equal(col.slice(1), col.slice(0, n - 1)).to_numpy(
                zero_copy_only=False
            )
        table = table.filter(pa.array(fresh))
        order = order.filter(pa.array(fresh))
    sort_keys = [key.sort_key(full[i]) for i in order.to_pylist()]
    return KeySet(sort_keys, table)


def _plain(values: list[Any]) -> bool:
    """Whether ``values`` are all of one :data:`_PLAIN` class (datetimes and times all
    naive or all aware: SortKey compares a naive one as UTC, Arrow would not mix them)."""
    cls = values[0].__class__
    if cls not in _PLAIN or any(v.__class__ is not cls for v in values):
        return False
    if cls is dt.time:
        return all(v.tzinfo is None for v in values)
    if cls is dt.datetime:
        aware = values[0].tzinfo is not None
        return all((v.tzinfo is not None) == aware for v in values)
    return True


def _family(typ: pa.DataType) -> str | None:
    return next((name for name, check in _FAMILIES if check(typ)), None)


def matching(table: pa.Table, keys: pa.Table, wanted: pa.Table) -> pa.Table | None:
    """The rows of ``table`` (its key table: ``keys``) whose key is one of ``wanted``
    (a :attr:`KeySet.table`, or a slice of one), in table order; None when a key column
    of ``table`` cannot be matched exactly (see the module docstring)."""
    cast = []
    for have, want in zip(keys.columns, wanted.columns, strict=True):
        family = _family(have.type)
        if family is None or family != _family(want.type):
            return None
        try:
            cast.append(want.cast(have.type))  # a safe cast: fails rather than round
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            return None
    if len(cast) == 1:
        # a null key (keyless row) is never in a set without nulls
        return table.filter(pc.is_in(keys.column(0), value_set=cast[0]))
    names = keys.column_names
    rows = "__row"
    left = keys.append_column(rows, pa.array(np.arange(keys.num_rows, dtype=np.int64)))
    right = pa.table(dict(zip(names, cast, strict=True)))
    try:
        # a semi join leaves rows with a null key (keyless) out, as lookups must
        joined = left.join(right, keys=names, join_type="left semi", use_threads=False)
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError):
        return None
    found = np.sort(joined.column(rows).to_numpy())
    return table.take(pa.array(found))

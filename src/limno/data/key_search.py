"""Two shortcuts of a point lookup's search within one data object
(:meth:`limno.data.scan._Reader.matches`), each giving the general path's answer
sooner. A lookup of one key took about 5 ms in process, of which some 0.4 ms went to
rebuilding every row group's key range from the footer's statistics and 0.3 ms to a
binary search of the row group comparing Python :class:`~limno.data.keys.SortKey`
objects; the server and every client paid both on every ``get``.

- :func:`remembered_ranges`: an object's row-group key ranges, kept per object. A
  data object is never rewritten (a new one gets a new id), so what its footer says
  holds for good.
- :func:`spans`: the rows of each wanted key found by numpy's binary search, when
  the key is one ascending integer field (where numeric order is the pool's order).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import TypeVar

import numpy as np
import pyarrow as pa

from limno.data.keys import PoolKey, SortKey
from limno.data.numpy_view import fixed_values

__all__ = ["remembered_ranges", "spans"]

T = TypeVar("T")

#: objects whose ranges are kept at most (the least recently used forgotten first)
MOST_OBJECTS = 4096

_ranges: OrderedDict[tuple[str, str, int, str], object] = OrderedDict()
_lock = threading.Lock()


def remembered_ranges(ident: tuple[str, str, int, str], compute: Callable[[], T]) -> T:
    """The ranges of the object ``ident`` (store, path, size, key), computed once."""
    with _lock:
        found = _ranges.get(ident, _ranges)
        if found is not _ranges:
            _ranges.move_to_end(ident)
            return found  # type: ignore[return-value]
    made = compute()
    with _lock:
        _ranges[ident] = made
        while len(_ranges) > MOST_OBJECTS:
            _ranges.popitem(last=False)
    return made


def spans(keys: pa.Table, key: PoolKey, n: int, wanted: list[SortKey]) -> list[range] | None:
    """For each of ``wanted`` (sorted, distinct), the rows holding it among the first
    ``n`` rows of ``keys`` (a :meth:`~limno.data.keys.PoolKey.key_table`, sorted), by
    numpy's binary search; None when the key is not one ascending integer field, or
    a wanted value is not an integer the column's type holds (the caller then
    compares SortKeys)."""
    if len(key.fields) != 1 or key.fields[0].descending or keys.num_columns != 1:
        return None
    column = keys.column(0).slice(0, n)
    if not pa.types.is_integer(column.type) or column.null_count:
        return None
    kind = "i" if pa.types.is_signed_integer(column.type) else "u"
    dtype = np.dtype(f"{kind}{column.type.bit_width // 8}")
    low, high = np.iinfo(dtype).min, np.iinfo(dtype).max
    values: list[int] = []
    for w in wanted:
        v = w.key[0] if w.key is not None and len(w.key) == 1 else None
        if v.__class__ is not int or not low <= v <= high:
            return None
        values.append(v)
    whole = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    held = fixed_values(whole, dtype)
    probe = np.array(values, dtype=dtype)
    starts = np.searchsorted(held, probe, "left").tolist()
    ends = np.searchsorted(held, probe, "right").tolist()
    return [range(a, b) for a, b in zip(starts, ends, strict=True)]

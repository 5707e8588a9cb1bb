"""What a load or an add reads, as a caller may give it: one source or several.

``pool.load(table)`` must load the table, not iterate its columns: a Table, a
record batch, a path and a ``pathlib.Path`` are each ONE source; a list (or any
other iterable) of them is several. Data frames of other libraries (pandas,
Polars, DuckDB relations, Arrow readers) that speak the Arrow C stream interface
(``__arrow_c_stream__``) are read into an Arrow table. pyarrow is only touched when
the caller has already imported it or hands over such a frame, so that the CLI's
start stays free of it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, TypeAlias

from limno.errors import InvalidInputError

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["Source", "Sources", "source_list"]

#: what a load reads: a file path (``-``: stdin), or Arrow data
Source: TypeAlias = "str | pa.Table | pa.RecordBatch"
#: one source or several, as :func:`source_list` accepts them
Sources: TypeAlias = "Source | os.PathLike[str] | Iterable[Source | os.PathLike[str]]"


def _arrow(obj: object) -> bool:
    pa = sys.modules.get("pyarrow")
    return pa is not None and isinstance(obj, pa.Table | pa.RecordBatch)


def _one(obj: Any) -> Source | None:
    """``obj`` as one source, or None when it is not one."""
    if isinstance(obj, str) or _arrow(obj):
        return obj
    if isinstance(obj, os.PathLike):
        path = os.fspath(obj)
        return path if isinstance(path, str) else None
    if hasattr(obj, "__arrow_c_stream__"):
        import pyarrow as pa

        try:
            return pa.table(obj)
        except (TypeError, ValueError, pa.ArrowException) as e:
            raise InvalidInputError(f"cannot read a {type(obj).__name__} as Arrow: {e}") from e
    return None


def source_list(sources: Sources) -> list[Source]:
    """``sources`` as a list of sources: one alone, or each of an iterable."""
    one = _one(sources)
    if one is not None:
        return [one]
    if isinstance(sources, bytes | bytearray | dict) or not isinstance(sources, Iterable):
        raise InvalidInputError(_unknown(sources))
    out: list[Source] = []
    for item in sources:
        found = _one(item)
        if found is None:
            raise InvalidInputError(_unknown(item))
        out.append(found)
    return out


def _unknown(obj: object) -> str:
    return (
        f"cannot load a {type(obj).__name__}: give a file path, an Arrow table or record"
        " batch, a data frame with the Arrow stream interface, or a list of them"
    )

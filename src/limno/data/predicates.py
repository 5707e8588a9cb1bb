"""Row predicates: ``delete --where PRED``'s SQL condition, applied to Arrow tables.

A predicate is one SQL expression over a row's columns. It is parsed and checked as
such (:func:`~limno.data.sql_safety.check_predicate`), never pasted into a statement,
and evaluated by DuckDB on a locked connection (no files, network or settings).
"""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from limno.data.sql_safety import check_predicate, lock_down
from limno.errors import InvalidInputError

__all__ = ["filter_rows"]


def filter_rows(table: pa.Table, predicate: str) -> tuple[pa.Table, int]:
    """``(rows where predicate is not true, number of rows where it is)``; order kept.

    The predicate is one SQL expression over the row's columns, parsed and
    checked as such (:func:`~limno.data.sql_safety.check_predicate`), never
    pasted into a statement, and evaluated on a locked connection. NULL counts
    as false. A predicate naming a column this table lacks matches none of its
    rows (objects of one pool may have different shapes).
    """
    expression = check_predicate(predicate)
    con = duckdb.connect()
    try:
        rows = con.from_arrow(table)
        lock_down(con)
        try:
            mask = rows.select(expression).to_arrow_table().column(0)
        except duckdb.BinderException:
            return table, 0
    except duckdb.Error as e:
        raise InvalidInputError(f"SQL: predicate {predicate!r}: {str(e).splitlines()[0]}") from e
    finally:
        con.close()
    if pa.types.is_null(mask.type):
        return table, 0
    if not pa.types.is_boolean(mask.type):
        raise InvalidInputError(
            f"SQL: predicate {predicate!r}: not a condition (gives {mask.type})"
        )
    if len(mask) != table.num_rows:
        raise InvalidInputError(f"SQL: predicate {predicate!r}: not a condition on each row")
    mask = pc.fill_null(mask, False)
    count = int(pc.sum(mask).as_py() or 0)
    if not count:
        return table, 0
    return table.filter(pc.invert(mask)), count

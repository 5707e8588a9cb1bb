"""``kafka from --shaper SQL``: one DuckDB query over each batch's records, whose
answer is what the batch commits.

The query reads the batch as the table ``records`` (``{kafka, key, value, headers}``,
as :mod:`.kafka_records` makes them) and may reshape, filter, or compute columns:
``SELECT kafka, value.id AS id, value.total * 100 AS cents FROM records WHERE value.ok``.
Its answer must keep the ``kafka`` column (the pool's key, ``kafka.offset``, and the
way back to Kafka are in it): a query without it is refused before anything is
consumed. The offsets a commit records are those of the batch's messages, kept or
filtered out alike, so a record a shaper drops is not read again on a restart.

The SQL is checked like a safe-mode query (:mod:`limno.data.sql_safety`: one
read-only query, no file, network or settings access) and runs on a locked DuckDB
connection. A query that fails on a batch fails that batch: nothing of it is
committed, and the error names the shaper.
"""

from __future__ import annotations

import duckdb
import pyarrow as pa

from limno.data import sql_safety
from limno.errors import InvalidInputError, LimnoError
from limno.streams.kafka_records import KAFKA_TYPE

__all__ = ["TABLE", "Shaper"]

#: the name the shaper's SQL reads a batch's records by
TABLE = "records"


class Shaper:
    """A checked shaper query; calling it shapes one batch's table."""

    def __init__(self, sql: str) -> None:
        try:
            sql_safety.check_query(sql)
        except LimnoError as e:
            raise type(e)(f"kafka --shaper: {e}") from None
        self.sql = sql
        self._probe()

    def _probe(self) -> None:
        """Refuse a query whose answer has no ``kafka`` column, on an empty batch
        (values typed null: a query that only binds to real values is checked on
        each batch instead)."""
        empty = pa.table(
            {
                "kafka": pa.array([], KAFKA_TYPE),
                "key": pa.array([], pa.string()),
                "value": pa.array([], pa.null()),
                "headers": pa.array([], pa.list_(pa.struct([("key", pa.string())]))),
            }
        )
        try:
            names = self._answer(empty).column_names
        except duckdb.BinderException:
            return  # e.g. a function of a value's field: the batches will tell
        except duckdb.Error as e:
            raise _error(e) from None
        self._check(names)

    def _check(self, names: list[str]) -> None:
        if "kafka" not in names:
            raise InvalidInputError(
                f"kafka --shaper: its answer must keep the kafka column (it has "
                f"{', '.join(names) or 'none'})"
            )

    def _answer(self, table: pa.Table) -> pa.Table:
        con = duckdb.connect()
        try:
            con.register(TABLE, table)
            sql_safety.lock_down(con)
            return con.sql(self.sql).to_arrow_table()
        finally:
            con.close()

    def __call__(self, table: pa.Table) -> pa.Table:
        """The batch's records as the query answers them."""
        try:
            shaped = self._answer(table)
        except duckdb.Error as e:
            raise _error(e) from None
        self._check(shaped.column_names)
        return shaped


def _error(e: duckdb.Error) -> InvalidInputError:
    return InvalidInputError(f"kafka --shaper: {str(e).splitlines()[0]}")

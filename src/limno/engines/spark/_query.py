"""``query --engine spark``: the local engine's SQL surface, run by Spark SQL.

A table name is a pool ref (``logs``, ``"logs@dev"``, ``"logs@main~1"``) or a meta
table (``"logs:objects"``, ``"logs:commits"``, ``"logs:branches"``, ``":pools"``),
exactly as for the local engine. Each query runs in a fresh Spark session of the
shared SparkContext (``SparkSession.newSession``: its own temporary views and SQL
conf), where:

* double-quoted names are identifiers, as in DuckDB and standard SQL
  (``spark.sql.ansi.doubleQuotedIdentifiers``; ANSI mode, Spark 4's default);
* every name the statement mentions is registered as a temporary view of that
  snapshot, read as a native Parquet scan of its object list
  (:func:`._read.read`), or of the meta table (built by the local engine's code,
  so both engines show the same rows). Names are found by DuckDB's parser, and
  any it missed by Spark's analyzer (a name Spark reports as not found is
  resolved and the statement analyzed again).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

from limno.errors import InvalidInputError

from ._read import read
from ._session import session, translate_errors

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from limno.lake import Lake

__all__ = ["query", "sql", "table"]

#: SQL settings of every query session (identical answers on every machine)
QUERY_CONF = {
    "spark.sql.ansi.enabled": "true",
    "spark.sql.ansi.doubleQuotedIdentifiers": "true",
    "spark.sql.session.timeZone": "UTC",
}


def table(lake: Lake, name: str, spark: SparkSession | None = None) -> DataFrame:
    """The DataFrame a SQL table name stands for (see the module docstring)."""
    from limno.core.refs import parse_pool_ref
    from limno.engines.local import meta_table

    spark = session(spark=spark)
    ref, sep, meta = name.rpartition(":")
    if sep:
        arrow = meta_table(lake, ref, meta)
        return spark.createDataFrame(arrow)
    pool_name, at = parse_pool_ref(name)
    return read(lake.pool(pool_name), at, spark=spark)


def _view(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def sql(lake: Lake, statement: str, spark: SparkSession | None = None) -> DataFrame:
    """A Spark DataFrame of ``statement`` over the lake's pools."""
    base = session(spark=spark)
    s = base.newSession()
    for k, v in QUERY_CONF.items():
        s.conf.set(k, v)
    registered: set[str] = set()

    def register(name: str) -> None:
        table(lake, name, s).createOrReplaceTempView(_view(name))
        registered.add(name.lower())

    for name in _duckdb_names(statement):
        register(name)
    for _ in range(100):
        try:
            return s.sql(statement)
        except Exception as e:
            missing = _missing_table(e)
            if missing is None or missing.lower() in registered:
                translated = _translate(e)
                if translated is e:
                    raise
                raise translated from e
        register(missing)
    raise InvalidInputError("SQL: too many tables")


def _translate(e: Exception) -> Exception:
    """A Spark SQL failure as limno's error: the task's own, else InvalidInputError."""
    from pyspark.errors import PySparkException

    from ._session import task_error

    found = task_error(e)
    if found is not None:
        return found
    if isinstance(e, PySparkException):
        return InvalidInputError(f"SQL: {_short(str(e))}")
    return e


def query(lake: Lake, statement: str, spark: SparkSession | None = None) -> pa.Table:
    """Run ``statement`` on Spark; the answer as an Arrow table (like the local engine)."""
    df = sql(lake, statement, spark)
    try:
        with translate_errors("SQL"):
            return df.toArrow()
    except InvalidInputError:
        raise
    except Exception as e:
        translated = _translate(e)
        if translated is e:
            raise
        raise translated from e


def _duckdb_names(statement: str) -> list[str]:
    try:
        import duckdb

        return sorted(duckdb.get_table_names(statement))
    except Exception:
        return []


def _missing_table(e: BaseException) -> str | None:
    """The table name Spark's analyzer could not find, if that is the error."""
    get = getattr(e, "getCondition", None) or getattr(e, "getErrorClass", None)
    params = getattr(e, "getMessageParameters", None)
    if get is None or params is None or get() != "TABLE_OR_VIEW_NOT_FOUND":
        return None
    name = (params() or {}).get("relationName", "")
    parts = _split_identifier(name)
    return parts[-1] if len(parts) == 1 else None


def _split_identifier(text: str) -> list[str]:
    """```a`.`b` `` → ``["a", "b"]`` (backquoted parts, doubled backquotes inside)."""
    parts: list[str] = []
    i = 0
    while i < len(text):
        if text[i] == "`":
            j = i + 1
            buf = []
            while j < len(text):
                if text[j] == "`":
                    if j + 1 < len(text) and text[j + 1] == "`":
                        buf.append("`")
                        j += 2
                        continue
                    break
                buf.append(text[j])
                j += 1
            parts.append("".join(buf))
            i = j + 1
        elif text[i] == ".":
            i += 1
        else:
            j = text.find(".", i)
            j = len(text) if j < 0 else j
            parts.append(text[i:j])
            i = j
    return parts


def _short(text: str) -> str:
    """One line, without Spark's trailing SQLSTATE and plan context."""
    first = text.splitlines()[0] if text else text
    return first.split(" SQLSTATE:")[0].rstrip()

"""``query --engine spark``: the local engine's SQL surface, run by Spark SQL.

A table name is a pool ref (``logs``, ``"logs@dev"``, ``"logs@main~1"``) or a meta
table (``"logs:objects"``, ``"logs:commits"``, ``"logs:branches"``, ``":pools"``),
exactly as for the local engine. Each query runs in a fresh Spark session of the
shared SparkContext (``SparkSession.newSession``; over Spark Connect a new session
of the same server: its own temporary views and SQL conf), where:

* double-quoted names are identifiers, as in DuckDB and standard SQL
  (``spark.sql.ansi.doubleQuotedIdentifiers``; ANSI mode, Spark 4's default);
* every name the statement mentions is registered as a temporary view of that
  snapshot, read as a native Parquet scan of its object list
  (:func:`._read.read`), or of the meta table (built by the local engine's code,
  so both engines show the same rows). Names are found by DuckDB's parser, and
  any it missed by Spark's analyzer (a name Spark reports as not found is
  resolved and the statement analyzed again).

In safe mode (``safe=True`` of :func:`query` and :func:`sql`; the CLI's
``query --safe``; what a server must use) the statement must parse, by Spark's
own parser, as exactly one query, and its parse tree may not name a file
(``parquet.`/path```), a catalog table, a script (``TRANSFORM ... USING``), a
table function that is not one of :data:`SAFE_TABLE_FUNCTIONS` or a function
that calls JVM methods by name (:data:`JVM_CALL_FUNCTIONS`). The query session also runs with
``spark.sql.runSQLOnFiles=false`` and without those functions, so nothing the
analyzer resolves later can reach them either. These checks need the JVM in this
process: a safe query runs in a classic session, never through Spark Connect.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from limno.core.refs import parse_pool_ref
from limno.data.sql_safety import NO_ACCESS, QUERY_FORMS, refuse, tree_nodes
from limno.engines.query_limits import QueryLimits
from limno.engines.table_names import check_readable, readable_pools
from limno.errors import InvalidInputError

from ._connect import query_session, release
from ._read import read
from ._session import session, spark_error, translate_errors

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

#: SQL settings of a safe query's session: no ``format.`path``` tables
SAFE_CONF = {"spark.sql.runSQLOnFiles": "false"}

#: table-valued functions a safe query may call: they make rows from values only
SAFE_TABLE_FUNCTIONS = frozenset(
    {
        "range",
        "explode",
        "explode_outer",
        "inline",
        "inline_outer",
        "posexplode",
        "posexplode_outer",
        "stack",
        "json_tuple",
        "variant_explode",
        "variant_explode_outer",
    }
)

#: functions that call a JVM method named in the SQL: refused and dropped in safe mode
JVM_CALL_FUNCTIONS = ("reflect", "java_method", "try_reflect")

_ANALYSIS = "org.apache.spark.sql.catalyst.analysis."
#: words a query may start with (a statement starting so and not a query: INSERT after WITH)
_QUERY_WORDS = frozenset({"", "WITH", "SELECT", "FROM", "VALUES", "TABLE"})


def table(
    lake: Lake,
    name: str,
    spark: SparkSession | None = None,
    readable: Callable[[str], bool] | None = None,
    as_of: dt.datetime | None = None,
) -> DataFrame:
    """The DataFrame a SQL table name stands for (see the module docstring);
    ``readable`` filters the lake's ``":pools"``; a branch is read as of ``as_of``."""

    spark = session(spark=spark)
    ref, sep, meta = name.rpartition(":")
    if sep:
        rows = lake.meta_table(ref, meta)
        if readable is not None:
            rows = readable_pools(name, rows, readable)
        return spark.createDataFrame(rows)
    pool_name, at = parse_pool_ref(name)
    pool = lake.pool(pool_name)
    return read(pool, at, spark=spark, as_of=pool.branch_time(at, as_of))


def _view(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def sql(
    lake: Lake,
    statement: str,
    spark: SparkSession | None = None,
    *,
    safe: bool = False,
    readable: Callable[[str], bool] | None = None,
    as_of: dt.datetime | None = None,
) -> DataFrame:
    """A Spark DataFrame of ``statement`` over the lake's pools.

    ``safe`` (for SQL that may come from someone else) allows exactly one query
    that reads pools and meta tables only (see the module docstring);
    ``readable(pool)`` which pools it may name, and ``as_of``, as for the local engine.
    """
    return _frame(lake, statement, spark, safe, readable, as_of)[0]


def _frame(
    lake: Lake,
    statement: str,
    spark: SparkSession | None,
    safe: bool,
    readable: Callable[[str], bool] | None = None,
    as_of: dt.datetime | None = None,
) -> tuple[DataFrame, SparkSession]:
    """The DataFrame of ``statement`` and the session it was made from."""
    # safe mode's checks need Spark's parser, in a JVM of this process: never Connect
    base = session(spark=spark, remote=False if safe else None)
    s = query_session(base)
    try:
        return _sql(lake, statement, s, safe, readable, as_of), base
    except BaseException:
        release(s, base)
        raise


def _sql(
    lake: Lake,
    statement: str,
    s: SparkSession,
    safe: bool,
    readable: Callable[[str], bool] | None = None,
    as_of: dt.datetime | None = None,
) -> DataFrame:
    for k, v in QUERY_CONF.items():
        s.conf.set(k, v)
    if safe:
        _lock(s)
        _check_safe(s, statement)
    registered: set[str] = set()

    def register(name: str) -> None:
        if readable is not None:
            check_readable(name, readable)
        table(lake, name, s, readable, as_of).createOrReplaceTempView(_view(name))
        registered.add(name.lower())

    for name in _duckdb_names(statement):
        register(name)
    for _ in range(100):
        try:
            return s.sql(statement)
        except Exception as e:
            missing = _missing_table(e)
            if missing is None or missing.lower() in registered:
                translated = spark_error(e, "SQL", sql=True)
                if translated is e:
                    raise
                raise translated from e
        register(missing)
    raise InvalidInputError("SQL: too many tables")


def query(
    lake: Lake,
    statement: str,
    spark: SparkSession | None = None,
    *,
    safe: bool = False,
    limits: QueryLimits | None = None,
    readable: Callable[[str], bool] | None = None,
    as_of: dt.datetime | None = None,
) -> pa.Table:
    """Run ``statement`` on Spark; the answer as an Arrow table (like the local engine).

    ``safe``, ``readable`` and ``as_of`` as for :func:`sql`. Of ``limits`` only ``max_rows``
    and ``max_bytes`` apply (no more than ``max_rows + 1`` rows are collected);
    Spark queries have no time limit.
    """
    df, base = _frame(lake, statement, spark, safe, readable, as_of)
    try:
        with translate_errors("SQL", sql=True):
            if limits is not None and limits.max_rows is not None:
                answer = df.limit(limits.max_rows + 1).toArrow()
            else:
                answer = df.toArrow()
        if limits is not None:
            limits.check_answer(answer.num_rows, answer.nbytes)
        return answer
    finally:
        release(df.sparkSession, base)


def _lock(s: SparkSession) -> None:
    """Make a query session safe: no SQL on files, no JVM method calls by name."""
    if getattr(s, "_jsparkSession", None) is None:
        raise InvalidInputError("SQL: safe mode needs a classic Spark session, not Spark Connect")
    for k, v in SAFE_CONF.items():
        s.conf.set(k, v)
    jvm: Any = s._jvm
    registry = s._jsparkSession.sessionState().functionRegistry()
    ident = jvm.org.apache.spark.sql.catalyst.FunctionIdentifier
    for name in JVM_CALL_FUNCTIONS:
        registry.dropFunction(ident.apply(name))


def _check_safe(s: SparkSession, statement: str) -> None:
    """Refuse ``statement`` unless Spark's parser reads it as one query that stays inside.

    Parsing runs with ``s`` as the active session, so its SQL settings
    (double-quoted identifiers) apply; nothing is analyzed or run.
    """
    jvm: Any = s._jvm
    sessions = jvm.org.apache.spark.sql.classic.SparkSession
    before = sessions.getActiveSession()
    sessions.setActiveSession(s._jsparkSession)
    try:
        parser = s._jsparkSession.sessionState().sqlParser()
        with translate_errors("SQL", sql=True):
            plan = parser.parsePlan(statement)
        command = jvm.java.lang.Class.forName("org.apache.spark.sql.catalyst.plans.logical.Command")
        try:
            parser.parseQuery(re.sub(r"[\s;]+$", "", statement))
            is_query = not command.isInstance(plan)
        except Exception:
            is_query = False
        if not is_query:
            raise refuse(_first_word(statement), QUERY_FORMS)
        tree = json.loads(plan.toJSON())
    finally:
        if before.isDefined():
            sessions.setActiveSession(before.get())
        else:
            sessions.clearActiveSession()
    for node in tree_nodes(tree):
        _check_node(node)


def _check_node(node: dict[str, Any]) -> None:
    """Refuse one node of a parsed plan (as JSON) that reaches outside the query."""
    kind = str(node.get("class", ""))
    if kind.endswith(".ScriptTransformation"):
        raise refuse("TRANSFORM ... USING", "no scripts or programs")
    if kind == _ANALYSIS + "UnresolvedRelation":
        parts = _name_parts(node.get("multipartIdentifier"))
        if len(parts) != 1:
            raise refuse(f"table {'.'.join(parts)}", "a table is a pool ref or a meta table")
        if "/" in parts[0] or "\\" in parts[0]:
            raise refuse(f"file path {parts[0]!r}", "a table is a pool ref or a meta table")
    elif kind == _ANALYSIS + "UnresolvedTableValuedFunction":
        name = ".".join(_name_parts(node.get("name"))).lower()
        if name not in SAFE_TABLE_FUNCTIONS:
            allowed = ", ".join(sorted(SAFE_TABLE_FUNCTIONS))
            raise refuse(f"table function {name}()", f"{NO_ACCESS} (allowed: {allowed})")
    elif kind == _ANALYSIS + "UnresolvedFunction":
        parts = _name_parts(node.get("nameParts"))
        if parts and parts[-1].lower() in JVM_CALL_FUNCTIONS:
            raise refuse(f"function {parts[-1].lower()}()", "no JVM method calls")


def _name_parts(value: object) -> list[str]:
    """A name's parts as a plan's JSON shows them: ``"[a, b]"`` (or a list)."""
    if isinstance(value, list):
        return [str(v) for v in value]
    text = str(value or "")
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    return text.split(", ") if text else []


def _first_word(statement: str) -> str:
    """The first word of a statement (``SET``, ``INSERT``...), comments skipped."""
    m = re.match(r"(?:\s|--[^\n]*(?:\n|$)|/\*.*?\*/)*([A-Za-z_]+)", statement, re.DOTALL)
    word = m.group(1).upper() if m else ""
    return word if word not in _QUERY_WORDS else "a statement that is not a query"


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

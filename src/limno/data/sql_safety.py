"""What SQL from someone else may do: row predicates and safe-mode queries on DuckDB.

SQL text reaches limno from users (``delete --where``, ``query``) and, later,
from anything served over a network. Two rules keep such text from doing more
than reading the pools it names:

* A **row predicate** is parsed as exactly one expression
  (``duckdb.SQLExpression``) and applied through DuckDB's relation API, never
  pasted into a statement. It may use the row's own columns, constants,
  operators and scalar functions; subqueries, aggregates, window functions,
  ``*`` and functions that read settings are refused. It is evaluated on a
  locked connection (below).
* A **safe-mode query** is exactly one read-only query (``SELECT``, ``WITH``,
  ``VALUES``, ``TABLE``, ``FROM``, ``DESCRIBE``...). Its parse tree may name
  pools and meta tables, CTEs and a few table functions that make rows
  (:data:`ROW_SOURCES`); never a file path, a schema-qualified table or a
  function that reads files, settings or the environment. It runs on a locked
  connection.

A locked connection (:func:`lock_down`) has no file system or network access, no
extension installs or loads, no Python replacement scans, and a locked
configuration, so nothing the SQL holds can change that.

A statement that is well-formed but not allowed is refused with
:class:`~limno.errors.ForbiddenError` (403) ``SQL: ... not allowed in safe mode:
...``; one that does not parse, and a predicate that is not a row condition, with
:class:`~limno.errors.InvalidInputError` (400).
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Iterator, Sequence
from typing import Any

import duckdb

from limno.errors import ForbiddenError, InvalidInputError

__all__ = [
    "LOCKED_SETTINGS",
    "NO_ACCESS",
    "QUERY_FORMS",
    "ROW_SOURCES",
    "SAFE_ENV",
    "check_predicate",
    "check_query",
    "lock_down",
    "parse_tree",
    "refuse",
    "safe_from_env",
    "sql_error",
    "tree_nodes",
]

#: the environment variable that turns the CLI's ``query --safe`` on
SAFE_ENV = "LIMNO_SQL_SAFE"

#: DuckDB settings of a locked connection, in order (``lock_configuration`` last)
LOCKED_SETTINGS = (
    ("enable_external_access", "false"),
    ("python_enable_replacements", "false"),
    ("autoinstall_known_extensions", "false"),
    ("autoload_known_extensions", "false"),
    ("allow_community_extensions", "false"),
    ("lock_configuration", "true"),
)

#: table functions a safe query may call in FROM: they make rows from values only
ROW_SOURCES = frozenset({"range", "generate_series", "unnest", "json_each", "json_tree"})

#: scalar functions that read settings, variables or the environment, or change state
_DENIED_FUNCTIONS = frozenset({"current_setting", "getenv", "getvariable", "setseed"})

#: the reason a statement that is not one query is refused
QUERY_FORMS = "only one query (SELECT, WITH, VALUES, TABLE, FROM)"
#: the reason a function or table that reaches outside the query is refused
NO_ACCESS = "no file, network, extension or settings access"
#: words a query may start with (a statement starting so and not a query: INSERT after WITH)
_QUERY_WORDS = frozenset({"WITH", "SELECT", "FROM", "VALUES", "TABLE"})
_ROW_RULE = "a predicate is a condition on each row's own columns"


def sql_error(e: Exception) -> InvalidInputError:
    """A DuckDB failure as limno's error: its first line."""
    return InvalidInputError(f"SQL: {str(e).splitlines()[0]}")


def refuse(what: str, why: str) -> ForbiddenError:
    """The error of something safe mode does not allow (well-formed, so 403, not 400)."""
    return ForbiddenError(f"SQL: {what} not allowed in safe mode: {why}")


def safe_from_env() -> bool:
    """Whether ``LIMNO_SQL_SAFE`` asks for safe mode (``1``/``true``/``yes``/``on``)."""
    text = os.environ.get(SAFE_ENV, "").strip().lower()
    if text in ("", "0", "false", "no", "off"):
        return False
    if text in ("1", "true", "yes", "on"):
        return True
    raise InvalidInputError(f"{SAFE_ENV} must be 1 or 0, not {text!r}")


def lock_down(con: duckdb.DuckDBPyConnection, files: Sequence[str] = ()) -> None:
    """Lock ``con``: no files, network, extensions or replacement scans; settings frozen.

    Call it after registering every table the SQL may read: registering is
    limno's own work, and nothing can be changed once this returns. ``files``
    (the snapshots' objects that registered views scan) stay readable, and
    nothing else.
    """
    if files:
        listed = ", ".join("'" + f.replace("'", "''") + "'" for f in files)
        con.execute(f"SET allowed_paths = [{listed}]").fetchall()
    for name, value in LOCKED_SETTINGS:
        con.execute(f"SET {name} = {value}").fetchall()


def check_query(sql: str) -> None:
    """Refuse ``sql`` unless it is exactly one read-only query (see the module docstring)."""
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as e:
        raise sql_error(e) from e
    if len(statements) != 1:
        raise refuse(f"{len(statements)} statements", QUERY_FORMS)
    statement = statements[0]
    try:
        kind = statement.type
    except ValueError as e:  # a statement type this DuckDB's Python API has no name for
        raise refuse(_first_word(statement.query) or "the statement", QUERY_FORMS) from e
    if kind != duckdb.StatementType.SELECT:
        word = _first_word(statement.query)
        shown = word if word.isalpha() and word not in _QUERY_WORDS else kind.name
        if kind == duckdb.StatementType.MULTI:
            shown = "a statement run as several (PIVOT without an IN list)"
        raise refuse(shown, QUERY_FORMS)
    for node in tree_nodes(parse_tree(sql)):
        _check_node(node)


def check_predicate(predicate: str) -> duckdb.Expression:
    """The one expression ``predicate`` is, once checked to be a row condition.

    Refuses (InvalidInputError naming the predicate and the reason) anything
    that is not exactly one expression over the row's own columns.
    """
    try:
        expression = duckdb.SQLExpression(predicate)
    except duckdb.Error as e:
        raise _bad_predicate(predicate, str(e).splitlines()[0]) from e
    _check_predicate_tree(predicate, str(expression))
    return expression


@functools.lru_cache(maxsize=64)
def _check_predicate_tree(predicate: str, text: str) -> None:
    """Check the parse tree of one expression's text (cached: a delete checks it per object)."""
    tree = parse_tree(f"SELECT (\n{text}\n)")
    statements = tree.get("statements") or []
    node = statements[0].get("node", {}) if len(statements) == 1 else {}
    if len(node.get("select_list") or []) != 1 or node.get("from_table", {}).get("type") != "EMPTY":
        raise _bad_predicate(predicate, "not one expression")
    aggregates = _aggregate_names()
    for found in tree_nodes(node["select_list"]):
        kind = found.get("class")
        if kind == "SUBQUERY":
            raise _bad_predicate(predicate, f"a subquery is not allowed ({_ROW_RULE})")
        if kind == "WINDOW":
            raise _bad_predicate(predicate, f"a window function is not allowed ({_ROW_RULE})")
        if kind in ("STAR", "COLUMNS"):
            raise _bad_predicate(predicate, f"* and COLUMNS are not allowed ({_ROW_RULE})")
        if kind == "PARAMETER":
            raise _bad_predicate(predicate, "a parameter is not allowed")
        if kind == "FUNCTION":
            name = str(found.get("function_name", "")).lower()
            if name in aggregates:
                shown = "count(*)" if name == "count_star" else f"{name}()"
                raise _bad_predicate(predicate, f"aggregate {shown} is not allowed ({_ROW_RULE})")
            if name in _DENIED_FUNCTIONS or _reads_files(name):
                raise _bad_predicate(predicate, f"{name}() is not allowed ({NO_ACCESS})")


def _bad_predicate(predicate: str, why: str) -> InvalidInputError:
    return InvalidInputError(f"SQL: predicate {predicate!r}: {why}")


def _check_node(node: dict[str, Any]) -> None:
    """Refuse one parse-tree node of a safe query, if it reaches outside the query."""
    kind = node.get("type")
    if kind == "TABLE_FUNCTION":
        function = node.get("function") or {}
        name = str(function.get("function_name", "")).lower()
        if name not in ROW_SOURCES:
            raise refuse(f"table function {name}()", f"{NO_ACCESS} (allowed: {_row_sources()})")
    elif kind == "BASE_TABLE":
        table = str(node.get("table_name", ""))
        if node.get("schema_name") or node.get("catalog_name"):
            parts = [node.get("catalog_name"), node.get("schema_name"), table]
            name = ".".join(str(p) for p in parts if p)
            raise refuse(f"table {name}", "a table is a pool ref or a meta table")
        if "/" in table or "\\" in table:
            raise refuse(f"file path {table!r}", "a table is a pool ref or a meta table")
        if table.lower() in _catalog_names():  # its views show settings and the views made
            raise refuse(f"DuckDB catalog table {table}", "a table is a pool ref or a meta table")
    elif kind == "SHOW_REF" and node.get("show_type") not in ("DESCRIBE", "SUMMARY"):
        raise refuse("SHOW", "DuckDB's catalog is not shown (DESCRIBE a table instead)")
    elif node.get("class") in ("FUNCTION", "WINDOW"):
        name = str(node.get("function_name", "")).lower()
        if name in _DENIED_FUNCTIONS or _reads_files(name):
            raise refuse(f"function {name}()", NO_ACCESS)


def _reads_files(name: str) -> bool:
    """Whether a function name is DuckDB's only as a table function (files, catalog, state).

    Such a name fails as a scalar anyway; refusing it names the reason.
    """
    return name not in ROW_SOURCES and name in _table_only_names()


def _row_sources() -> str:
    return ", ".join(sorted(ROW_SOURCES))


def parse_tree(sql: str) -> dict[str, Any]:
    """DuckDB's parse tree of ``sql`` as JSON: parsed, never run."""
    con = _parser().cursor()
    try:
        text = con.execute("SELECT json_serialize_sql(?)", [sql]).fetchall()[0][0]
    except duckdb.Error as e:
        raise sql_error(e) from e
    finally:
        con.close()
    tree: dict[str, Any] = json.loads(text)
    if tree.get("error"):
        raise InvalidInputError(f"SQL: {tree.get('error_message') or 'cannot be parsed'}")
    return tree


@functools.cache
def _parser() -> duckdb.DuckDBPyConnection:
    """One DuckDB instance that only parses (a new instance costs tens of milliseconds;
    each call takes a cursor of this one, safe across threads)."""
    return duckdb.connect()


def tree_nodes(tree: Any) -> Iterator[dict[str, Any]]:
    """Every object of a JSON parse tree, depth first."""
    stack = [tree]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            yield item
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


@functools.cache
def _aggregate_names() -> frozenset[str]:
    """Names DuckDB knows only as aggregate functions."""
    kinds = _function_kinds()
    return frozenset(n for n, k in kinds.items() if k == {"aggregate"})


@functools.cache
def _table_only_names() -> frozenset[str]:
    """Names DuckDB knows only as table functions, table macros or pragmas."""
    kinds = _function_kinds()
    return frozenset(n for n, k in kinds.items() if k <= {"table", "table_macro", "pragma"})


@functools.cache
def _catalog_names() -> frozenset[str]:
    """DuckDB's own views an unqualified name can reach (``duckdb_tables``,
    ``pg_settings``...): a safe query may not read them, only what limno made."""
    con = duckdb.connect()
    try:
        rows = con.execute(
            "SELECT lower(view_name) FROM duckdb_views()"
            " WHERE internal AND schema_name IN ('main', 'pg_catalog')"  # on the search path
        ).fetchall()
    finally:
        con.close()
    return frozenset(name for (name,) in rows)


@functools.cache
def _function_kinds() -> dict[str, set[str]]:
    con = duckdb.connect()
    try:
        rows = con.execute(
            "SELECT DISTINCT lower(function_name), function_type FROM duckdb_functions()"
        ).fetchall()
    finally:
        con.close()
    kinds: dict[str, set[str]] = {}
    for name, kind in rows:
        kinds.setdefault(name, set()).add(kind)
    return kinds


def _first_word(text: str) -> str:
    """The first keyword of a statement (``COPY``, ``INSTALL``...), comments skipped."""
    tokens = duckdb.tokenize(text)
    for i, (offset, kind) in enumerate(tokens):
        if kind == duckdb.token_type.comment:
            continue
        end = tokens[i + 1][0] if i + 1 < len(tokens) else len(text)
        return text.encode()[offset:end].decode(errors="replace").strip().upper()
    return ""

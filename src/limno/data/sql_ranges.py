"""Which values of a pool's first key field a SQL statement can read: object pruning.

A SQL engine given every object of a snapshot still opens each one's footer to
learn that most hold no row a ``WHERE id = 42`` wants. limno already knows each
object's key range, so before the engine sees the snapshot, the objects whose
range cannot satisfy the statement's conditions on the first key field are
dropped (:func:`may_hold`).

Only conditions that cannot change the answer are used (:func:`key_conditions`):
top-level ``AND`` terms of the ``WHERE`` of the one ``SELECT`` whose ``FROM`` reads
the table, each comparing the key column with a constant (``=``, ``<``, ``<=``,
``>``, ``>=``, ``BETWEEN``, ``IN (...)``). Every such term rejects a row whose key
is null, so a row it rejects is gone from the answer whatever the joins around it
(an outer join that loses the row's partner yields nulls the same term rejects).
A table named twice in a statement, an ``OR``, a function of the key, a nested key
field or a constant of another type than the key's values: no pruning, the engine
filters as usual.
"""

from __future__ import annotations

import datetime as dt
import decimal
import functools
import math
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any

from limno.data.keys import PoolKey
from limno.data.objects import DataObject
from limno.data.sql_safety import parse_tree
from limno.errors import LimnoError

__all__ = ["Condition", "key_conditions", "may_hold"]

#: (operator, value): ``("<", 5)``, ``("in", (1, 2))``
Condition = tuple[str, Any]

_COMPARE = {
    "COMPARE_EQUAL": "=",
    "COMPARE_LESSTHAN": "<",
    "COMPARE_LESSTHANOREQUALTO": "<=",
    "COMPARE_GREATERTHAN": ">",
    "COMPARE_GREATERTHANOREQUALTO": ">=",
}
#: ``5 > k`` is ``k < 5``
_FLIPPED = {"=": "=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
_CASTS: dict[str, Any] = {
    "date": dt.date.fromisoformat,
    "timestamp": dt.datetime.fromisoformat,
    "datetime": dt.datetime.fromisoformat,
}


def key_conditions(sql: str, table: str, column: str) -> list[Condition]:
    """The conditions on ``column`` of ``table`` that every row read must meet.

    ``[]`` when there are none limno can use (see the module docstring).
    """
    tables = _tables_read(sql)
    if tables is None or tables.total.get(table) != 1:
        return []
    found = [select for select, names in tables.selects if table in names]
    if len(found) != 1:
        return []
    select = found[0]
    base = next(t for t in _tables(select["from_table"]) if _is(t, table))
    names = {table.lower(), (base.get("alias") or "").lower()} - {""}
    out: list[Condition] = []
    for term in _conjuncts(select.get("where_clause")):
        out.extend(_term(term, names, column.lower()))
    return out


class _TablesRead:
    """Which base tables a statement names: in all, and under each ``SELECT``."""

    def __init__(self, tree: dict[str, Any]) -> None:
        #: every node with a ``FROM`` and the base tables named anywhere below it
        self.selects: list[tuple[dict[str, Any], Counter[str]]] = []
        #: base table name -> how many times the statement names it
        self.total = self._walk(tree)

    def _walk(self, item: Any) -> Counter[str]:
        """The base tables named in ``item`` (one pass over the tree: a statement joining
        many tables is walked once, not once per table)."""
        below: Counter[str] = Counter()
        if isinstance(item, dict):
            if item.get("type") == "BASE_TABLE":
                below[str(item.get("table_name", ""))] += 1
            for value in item.values():
                if isinstance(value, dict | list):
                    below.update(self._walk(value))
            if "from_table" in item:
                self.selects.append((item, below))
        elif isinstance(item, list):
            for value in item:
                if isinstance(value, dict | list):
                    below.update(self._walk(value))
        return below


@functools.lru_cache(maxsize=16)
def _tables_read(sql: str) -> _TablesRead | None:
    """The statement's tables (read only: shared by the calls for each of its tables)."""
    try:
        return _TablesRead(parse_tree(sql))
    except LimnoError:
        return None


def may_hold(obj: DataObject, key: PoolKey, conditions: Sequence[Condition]) -> bool:
    """Whether ``obj`` can hold a row whose first key field meets every condition."""
    if not conditions:
        return True
    if obj.keyless_here and len(key.fields) > 1:
        return True  # a keyless row may still carry the first field
    if obj.min_key is None or obj.max_key is None:
        return False  # only rows without the key: no comparison is true of them
    # the whole object's range (a clip only narrows it): ascending or descending
    a, b = obj.min_key[0], obj.max_key[0]
    if not _comparable(a, b):
        return True
    try:
        lo, hi = min(a, b), max(a, b)
        return all(_meets(lo, hi, op, value) for op, value in conditions)
    except TypeError:
        return True


def _meets(lo: Any, hi: Any, op: str, value: Any) -> bool:
    """Whether some value in ``[lo, hi]`` can satisfy ``op value``."""
    if op == "in":
        return any(_meets(lo, hi, "=", v) for v in value)
    if not _comparable(value, lo):
        return True
    if op == "=":
        return bool(lo <= value <= hi)
    if op == "<":
        return bool(lo < value)
    if op == "<=":
        return bool(lo <= value)
    if op == ">":
        return bool(hi > value)
    return bool(hi >= value)  # ">="


def _comparable(a: Any, b: Any) -> bool:
    """Whether Python orders ``a`` and ``b`` as the engine does (numbers, text, times)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return False
    numbers = (int, float, decimal.Decimal)
    if isinstance(a, numbers) and isinstance(b, numbers):
        return not any(isinstance(x, float) and math.isnan(x) for x in (a, b))
    if isinstance(a, dt.datetime) or isinstance(b, dt.datetime):
        return (
            isinstance(a, dt.datetime)
            and isinstance(b, dt.datetime)
            and ((a.tzinfo is None) == (b.tzinfo is None))
        )
    return type(a) is type(b) and isinstance(a, str | dt.date)


def _is(node: dict[str, Any], table: str) -> bool:
    return node.get("type") == "BASE_TABLE" and str(node.get("table_name", "")) == table


def _tables(from_table: Any) -> Iterator[dict[str, Any]]:
    """The base tables of a ``FROM`` (through its joins, not into subqueries)."""
    if not isinstance(from_table, dict):
        return
    if from_table.get("type") == "JOIN":
        yield from _tables(from_table.get("left"))
        yield from _tables(from_table.get("right"))
    elif from_table.get("type") == "BASE_TABLE":
        yield from_table


def _conjuncts(where: Any) -> Iterator[dict[str, Any]]:
    if not isinstance(where, dict):
        return
    if where.get("type") == "CONJUNCTION_AND":
        for child in where.get("children", ()):
            yield from _conjuncts(child)
    else:
        yield where


def _term(term: dict[str, Any], names: set[str], column: str) -> list[Condition]:
    kind = term.get("type")
    if kind in _COMPARE:
        op = _COMPARE[kind]
        left, right = term.get("left"), term.get("right")
        if _is_column(left, names, column):
            value = _constant(right)
        elif _is_column(right, names, column):
            value, op = _constant(left), _FLIPPED[op]
        else:
            return []
        return [] if value is None else [(op, value)]
    if kind == "COMPARE_BETWEEN" and _is_column(term.get("input"), names, column):
        lower, upper = _constant(term.get("lower")), _constant(term.get("upper"))
        out = [] if lower is None else [(">=", lower)]
        return out + ([] if upper is None else [("<=", upper)])
    if kind == "COMPARE_IN":
        first, *rest = term.get("children") or [None]
        values = [_constant(v) for v in rest]
        if rest and _is_column(first, names, column) and all(v is not None for v in values):
            return [("in", tuple(values))]
    return []


def _is_column(node: Any, names: set[str], column: str) -> bool:
    if not isinstance(node, dict) or node.get("class") != "COLUMN_REF":
        return False
    parts = [str(p).lower() for p in node.get("column_names", ())]
    return parts == [column] or (len(parts) == 2 and parts[0] in names and parts[1] == column)


def _constant(node: Any) -> Any:
    """The Python value of a literal (or a cast of a text literal to a date or time)."""
    if not isinstance(node, dict):
        return None
    if node.get("class") == "CAST" and not node.get("try_cast"):
        name = str((node.get("type_expr") or {}).get("type_name", "")).lower()
        text = _constant(node.get("child"))
        parse = _CASTS.get(name)
        if parse is None or not isinstance(text, str):
            return None
        try:
            return parse(text.strip())
        except ValueError:
            return None
    if node.get("class") != "CONSTANT":
        return None
    literal = node.get("literal") or {}
    kind, text = literal.get("kind"), literal.get("text")
    if not isinstance(text, str):
        return None
    try:
        if kind == "INTEGER":
            return int(text)
        if kind == "STRING":
            return text
        if kind in ("NUMERIC", "DECIMAL", "FLOAT", "DOUBLE"):
            return decimal.Decimal(text)
    except (ValueError, ArithmeticError):
        return None
    return None

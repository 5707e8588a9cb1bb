"""The ETL config: a YAML file, checked before anything runs, errors naming line and field.

::

    name: invoices                  # optional (default: the file's stem); names the
                                    # completion records in the output pool
    inputs:                         # topics read, each from a pool[@branch] (branch: main)
      - {topic: Invoices, pool: Raw}
    outputs:                        # topics written; all in ONE pool[@branch] (one commit)
      - {topic: NewInvoices, pool: Staging}
    transforms:                     # in order; the order breaks ties of output order
      - type: denorm                # join two input topics
        left: Invoices
        right: InvoiceStatus
        join-on: left.value.after.ID = right.value.after.InvoiceID
        where: value.op IN ('c', 'r')     # optional, on each side's records
        select: left.key AS key, {'ID': left.value.after.ID} AS value
        out: NewInvoices
      - type: stateless             # one input topic
        in: Invoices
        where: value.op = 'd'
        select: input.key AS key, NULL AS value
        out: NewInvoices

The SQL is DuckDB's. ``where`` is an expression over one record's columns (``kafka``,
``key``, ``value``, ...); ``select`` is a select list over the table ``input``
(stateless) or ``left`` and ``right`` (denorm, joined by ``join-on``), giving
``key`` and ``value`` (and optionally ``headers``). DuckDB reserves ``left`` and
``right``: written ``left.x`` here they are read as the tables (quoted for DuckDB).
Each SQL fragment is parsed (DuckDB's parser) when the config is read, so a syntax
error is reported by any run, with new input or not; a fragment must stand alone
(balanced parentheses, no ``;``) since a run sets it inside its own statements, where
``x) OR (true`` would widen the run's filter of consumed records. Field names are
bound when a run has records for the rule. Pool names are checked as pools are, and
an output topic may not be an input topic of the same pool@branch (the ETL would
read its own output).
Errors are :class:`~limno.errors.InvalidInputError`:
``invoices.yaml line 12: transforms[0].join-on: ...``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import yaml

from limno.errors import InvalidInputError, LimnoError, NotFoundError
from limno.etl.common import quote_tables
from limno.pools.registry import validate_pool_name

__all__ = [
    "Config",
    "Denorm",
    "Input",
    "Output",
    "Place",
    "Rule",
    "Stateless",
    "load_config",
    "parse_config",
    "rule_field",
]

_TOP = {"name", "inputs", "outputs", "transforms"}
_INPUT = {"topic", "pool"}
_DENORM = {"type", "left", "right", "join-on", "where", "select", "out"}
_STATELESS = {"type", "in", "where", "select", "out"}
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]{0,127}$")
#: what is not SQL structure: literals, quoted names, comments (a ``--`` one is kept)
_OPAQUE = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|/\*.*?\*/|(--)[^\n]*", re.S)
#: each field's fragment inside a statement of its shape, for DuckDB's parser
_SHAPES = {
    "where": "SELECT 1 FROM _etl WHERE (\n{}\n)",
    "join-on": "SELECT 1 FROM _l JOIN _r ON (\n{}\n)",
    "select": "SELECT\n{}\nFROM _etl",
}


@dataclass(frozen=True)
class Place:
    """Where a config item is: for error messages."""

    file: str
    line: int
    field: str

    def error(self, problem: str) -> InvalidInputError:
        return InvalidInputError(f"{self.file} line {self.line}: {self.field}: {problem}")


@dataclass(frozen=True)
class Input:
    topic: str
    pool: str
    branch: str

    @property
    def ref(self) -> str:
        return f"{self.pool}@{self.branch}"


@dataclass(frozen=True)
class Output:
    topic: str
    pool: str
    branch: str
    #: where its pool is named (a run's errors about the output pool point there)
    place: Place | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Denorm:
    """Join ``left`` and ``right`` records on ``join_on``; unmatched ones wait."""

    index: int
    left: str
    right: str
    join_on: str
    where: str
    select: str
    out: str
    places: dict[str, Place]
    type: Literal["denorm"] = "denorm"


@dataclass(frozen=True)
class Stateless:
    """Shape each ``source`` record that passes ``where``."""

    index: int
    source: str
    where: str
    select: str
    out: str
    places: dict[str, Place]
    type: Literal["stateless"] = "stateless"


Rule = Denorm | Stateless


@dataclass(frozen=True)
class Config:
    name: str
    inputs: list[Input]
    outputs: list[Output]
    transforms: list[Rule]

    @property
    def output_pool(self) -> tuple[str, str]:
        """(pool, branch) that every output goes to."""
        return self.outputs[0].pool, self.outputs[0].branch

    def input(self, topic: str) -> Input:
        return next(i for i in self.inputs if i.topic == topic)


class _Reader:
    """YAML nodes to Python values, each field's line remembered."""

    def __init__(self, file: str) -> None:
        self.file = file

    def place(self, node: yaml.Node, field: str) -> Place:
        return Place(self.file, node.start_mark.line + 1, field or "(top)")

    def mapping(self, node: yaml.Node, field: str, allowed: set[str]) -> dict[str, yaml.Node]:
        if not isinstance(node, yaml.MappingNode):
            raise self.place(node, field).error("must be a mapping")
        found: dict[str, yaml.Node] = {}
        for k, v in node.value:
            name = k.value if isinstance(k, yaml.ScalarNode) else None
            where = f"{field}.{name}" if field else str(name)
            if name not in allowed:
                known = ", ".join(sorted(allowed))
                raise self.place(k, where).error(f"unknown field (known: {known})")
            if name in found:
                raise self.place(k, where).error("given twice")
            found[name] = v
        return found

    def sequence(self, node: yaml.Node, field: str) -> list[yaml.Node]:
        if not isinstance(node, yaml.SequenceNode) or not node.value:
            raise self.place(node, field).error("must be a non-empty list")
        return list(node.value)

    def text(self, node: yaml.Node, field: str) -> str:
        if not isinstance(node, yaml.ScalarNode) or not str(node.value).strip():
            raise self.place(node, field).error("must be a non-empty text")
        return str(node.value).strip()

    def required(
        self, fields: dict[str, yaml.Node], parent: yaml.Node, field: str, name: str
    ) -> yaml.Node:
        if name not in fields:
            raise self.place(parent, field).error(f"missing field {name!r}")
        return fields[name]


def load_config(path: str | Path) -> Config:
    """Read and check the config file at ``path``."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise NotFoundError(f"etl config {p} not found") from None
    except (OSError, UnicodeDecodeError) as e:
        raise InvalidInputError(f"etl config {p}: cannot read it: {e}") from None
    return parse_config(text, p.name, default_name=p.stem)


def parse_config(text: str, file: str = "config", default_name: str = "etl") -> Config:
    """Check ``text`` (the contents of ``file``) and read it into a :class:`Config`."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark is not None else ""
        raise InvalidInputError(f"{file}{line}: not YAML: {getattr(e, 'problem', e)}") from None
    if root is None:
        raise InvalidInputError(f"{file}: empty config")
    r = _Reader(file)
    top = r.mapping(root, "", _TOP)
    name = default_name
    if "name" in top:
        name = r.text(top["name"], "name")
        if not _NAME.match(name):
            raise r.place(top["name"], "name").error("use letters, digits, '_', '.', '-'")
    inputs = [
        Input(*_topic_ref(r, node, f"inputs[{i}]")[:3])
        for i, node in enumerate(r.sequence(r.required(top, root, "", "inputs"), "inputs"))
    ]
    outputs = [
        Output(*_topic_ref(r, node, f"outputs[{i}]"))
        for i, node in enumerate(r.sequence(r.required(top, root, "", "outputs"), "outputs"))
    ]
    read = {(i.topic, i.pool, i.branch) for i in inputs}
    for i, o in enumerate(outputs):
        if (o.topic, o.pool, o.branch) in read:
            node = top["outputs"]
            assert isinstance(node, yaml.SequenceNode)
            raise r.place(node.value[i], f"outputs[{i}].topic").error(
                f"{o.topic} in {o.pool}@{o.branch} is also an input: the ETL would read "
                "its own output (write it to another topic or pool)"
            )
    _check_topics(r, top, [i.topic for i in inputs], "inputs")
    _check_topics(r, top, [o.topic for o in outputs], "outputs")
    if len({(o.pool, o.branch) for o in outputs}) > 1:
        raise r.place(top["outputs"], "outputs").error(
            "all outputs must be in one pool@branch (a run is one atomic commit)"
        )
    nodes = r.sequence(r.required(top, root, "", "transforms"), "transforms")
    known_in = {i.topic for i in inputs}
    known_out = {o.topic for o in outputs}
    rules = [_rule(r, i, node, known_in, known_out) for i, node in enumerate(nodes)]
    return Config(name, inputs, outputs, rules)


def _topic_ref(r: _Reader, node: yaml.Node, at: str) -> tuple[str, str, str, Place]:
    fields = r.mapping(node, at, _INPUT)
    topic = r.text(r.required(fields, node, at, "topic"), f"{at}.topic")
    pool_node = r.required(fields, node, at, "pool")
    ref = r.text(pool_node, f"{at}.pool")
    place = r.place(pool_node, f"{at}.pool")
    pool, sep, branch = ref.partition("@")
    if not pool or (sep and not branch):
        raise place.error(f"{ref!r} is not POOL[@BRANCH]")
    try:
        validate_pool_name(pool)
    except LimnoError as e:
        raise place.error(str(e)) from None
    return topic, pool, branch or "main", place


def _sql(place: Place, shape: str, sql: str) -> str:
    """``sql`` checked as the fragment of ``shape`` (a :data:`_SHAPES` key): it stands
    alone and DuckDB parses it. A ``--`` comment in it gets a line end after it, so
    that it ends where the fragment does inside a run's statement."""
    structure = _OPAQUE.sub(" ", sql)
    if ";" in structure:
        raise place.error("a ';' outside quotes: one SQL fragment, not statements")
    depth = 0
    for char in structure:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth < 0:
            break
    if depth:
        raise place.error(f"unbalanced parentheses ({'a' if depth < 0 else 'no'} ')' too many)")
    import duckdb  # the parser of the SQL dialect the rules are in; loads with a config

    statement = _SHAPES[shape].format(quote_tables(sql))
    try:
        duckdb.extract_statements(statement)
    except duckdb.Error as e:
        raise place.error(str(e).split("\n", 1)[0]) from None
    if shape == "select" and not _only_a_select_list(statement):
        raise place.error("a select list only (no FROM, WHERE, UNION, DISTINCT, LIMIT ...)")
    return f"{sql}\n" if any(m.group(1) for m in _OPAQUE.finditer(sql)) else sql


def _only_a_select_list(statement: str) -> bool:
    """Whether ``statement`` (``SELECT <fragment> FROM _etl``) parses to one plain
    select of ``_etl``: a fragment that is more than a select list (``* FROM x UNION ALL
    SELECT *``) parses too, but to another shape (DuckDB's syntax tree, as JSON)."""
    import duckdb

    with duckdb.connect() as con:
        found = con.execute("SELECT json_serialize_sql(?)", [statement]).fetchall()
    tree = json.loads(found[0][0])
    if tree.get("error") or len(tree.get("statements", [])) != 1:
        return False
    node = tree["statements"][0].get("node", {})
    source = node.get("from_table") or {}
    return (
        node.get("type") == "SELECT_NODE"
        and source.get("type") == "BASE_TABLE"
        and source.get("table_name") == "_etl"
        and not source.get("alias")
        and not any(node.get(k) for k in ("modifiers", "where_clause", "group_expressions"))
        and not any(node.get(k) for k in ("group_sets", "having", "sample", "qualify"))
        and not (node.get("cte_map") or {}).get("map")
    )


def _check_topics(r: _Reader, top: dict[str, yaml.Node], topics: list[str], field: str) -> None:
    seen: set[str] = set()
    for i, topic in enumerate(topics):
        if topic in seen:
            node = top[field]
            assert isinstance(node, yaml.SequenceNode)
            raise r.place(node.value[i], f"{field}[{i}].topic").error(
                f"topic {topic!r} is listed twice"
            )
        seen.add(topic)


def _rule(r: _Reader, index: int, node: yaml.Node, known_in: set[str], known_out: set[str]) -> Rule:
    field = f"transforms[{index}]"
    if not isinstance(node, yaml.MappingNode):
        raise r.place(node, field).error("must be a mapping")
    kinds = {k.value: v for k, v in node.value if isinstance(k, yaml.ScalarNode)}
    type_node = r.required(kinds, node, field, "type")
    kind = r.text(type_node, f"{field}.type")
    if kind not in ("denorm", "stateless"):
        raise r.place(type_node, f"{field}.type").error(
            f"unknown type {kind!r} (denorm or stateless)"
        )
    fields = r.mapping(node, field, _DENORM if kind == "denorm" else _STATELESS)
    places = {k: r.place(v, f"{field}.{k}") for k, v in fields.items()}
    places["rule"] = r.place(node, field)

    def text(name: str, default: str | None = None) -> str:
        if name not in fields and default is not None:
            return default
        found = r.text(r.required(fields, node, field, name), f"{field}.{name}")
        return _sql(places[name], name, found) if name in _SHAPES else found

    def topic(name: str, known: set[str], what: str) -> str:
        found = text(name)
        if found not in known:
            listed = ", ".join(sorted(known))
            raise places[name].error(f"{found!r} is not one of the {what} ({listed})")
        return found

    out = topic("out", known_out, "outputs")
    where, select = text("where", "true"), text("select")
    if kind == "stateless":
        return Stateless(index, topic("in", known_in, "inputs"), where, select, out, places)
    left, right = topic("left", known_in, "inputs"), topic("right", known_in, "inputs")
    if left == right:
        raise places["right"].error("left and right must be different topics")
    return Denorm(index, left, right, text("join-on"), where, select, out, places)


def rule_field(rule: Rule, name: str) -> Place:
    """Where ``rule``'s field ``name`` is (the rule itself when the field was defaulted)."""
    return rule.places.get(name, rule.places["rule"])

"""The local engine of ``limno etl``: one run's rules evaluated with DuckDB over Arrow.

A run sees, per input topic, its new records (offset above the partition's
``consumed`` mark) and the records pending in some denorm rule. All of them get one
sequence number ``_etl_seq`` in *input order*: pending records first (they are
older), then new ones; within each, by the topic's place in ``inputs``, then
partition, then offset. An output record sits where its input record is in that
order; a denorm output where the later of its two records is (the moment a stream
join would emit it); ties by rule order, then by the earlier record.

Each rule is a few statements, so that an SQL error names the field it is in:
``where`` filters a topic's records, ``join-on`` pairs left and right (an event that
finds partners in a run joins every one there and is complete; one that finds none
waits), ``select`` shapes each record or pair. Nothing is copied into DuckDB: a
topic's records are picked and numbered with Arrow and numpy and registered, the
rules are views, and each rule's outputs are computed once, straight into Arrow.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from limno.errors import InvalidInputError
from limno.etl.config import Config, Denorm, Place, Rule, Stateless, rule_field
from limno.etl.state import State
from limno.streams.kafka_records import KAFKA_TYPE

__all__ = ["Result", "evaluate", "quote_tables"]

#: string literals, quoted identifiers, and the table names DuckDB reserves
#: inputs a run can order (``_etl_seq`` has 6 bits for them)
_MAX_INPUTS = 63
_PARTS = (1 << 12) - 1
_OFFSETS = (1 << 44) - 1
_TOKENS = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|\b(left|right|input)\b(?=\s*\.)", re.I)


@dataclass
class Result:
    """A run's output records (in order, ``kafka`` filled) and how the state moves."""

    records: pa.Table
    consumed: dict[str, dict[int, int]]
    pending: dict[int, list[tuple[str, int, int]]]
    next: dict[str, int]
    new_events: int
    outputs: dict[str, int] = field(default_factory=dict)


def quote_tables(sql: str) -> str:
    """``left.x`` as ``"left".x`` (also ``right``, ``input``), outside literals."""
    return _TOKENS.sub(lambda m: f'"{m.group(1).lower()}"' if m.group(1) else m.group(0), sql)


class _Run:
    def __init__(self, config: Config, state: State, sources: Mapping[str, pa.Table]) -> None:
        self.config, self.state, self.sources = config, state, sources
        self.db = duckdb.connect(config={"threads": 2})
        self.present: set[str] = set()
        #: per input topic, its new records' partitions and offsets (for ``consumed``)
        self.new: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def sql(self, statement: str, place: Place | None = None) -> duckdb.DuckDBPyConnection:
        try:
            return self.db.execute(statement)
        except duckdb.Error as e:
            if place is None:
                raise
            problem = str(e).split("\n", 1)[0]
            raise place.error(problem) from None

    def arrow(self, query: str, place: Place) -> pa.Table:
        """``query``'s rows as Arrow (errors name ``place``)."""
        try:
            return self.db.sql(query).to_arrow_table()
        except duckdb.Error as e:
            raise place.error(str(e).split("\n", 1)[0]) from None

    def load_events(self) -> None:
        """Arrow tables ``ev_<i>`` (registered, not copied into DuckDB) of each input
        topic's new and pending records, numbered.

        ``_etl_seq`` packs the order (new, input, partition, offset) into one BIGINT:
        bit 62 new, 6 bits of input, 12 of partition, 44 of offset (checked)."""
        if len(self.config.inputs) > _MAX_INPUTS:
            raise InvalidInputError(f"etl: at most {_MAX_INPUTS} inputs")
        sources: dict[str, _Source] = {}
        for i, source in enumerate(self.config.inputs):
            table = self.sources[source.ref]
            if "kafka" not in table.schema.names or "key" not in table.schema.names:
                continue
            if source.ref not in sources:
                sources[source.ref] = _Source(table)
            events = sources[source.ref].events(source.topic, i, self.state)
            self.db.register(f"ev_{i}", events)
            new = events.column("_etl_new").to_numpy()
            self.new[source.topic] = (
                events.column("_etl_partition").to_numpy()[new],
                events.column("_etl_offset").to_numpy()[new],
            )
            self.present.add(source.topic)

    def table_of(self, topic: str) -> str | None:
        if topic not in self.present:
            return None
        return f"ev_{next(i for i, s in enumerate(self.config.inputs) if s.topic == topic)}"

    def filtered(self, rule: Rule, name: str, topic: str, pending: bool) -> np.ndarray:
        """View ``name``: the rule's records of ``topic`` passing ``where``; their
        ``_etl_seq`` (what waits when unpaired)."""
        if not self.view(rule, name, topic, pending):
            return np.empty(0, dtype=np.int64)
        return self.seqs(rule, name)

    def view(self, rule: Rule, name: str, topic: str, pending: bool) -> bool:
        """Make view ``name`` (see :meth:`filtered`); False: ``topic`` has no records."""
        source = self.table_of(topic)
        if source is None:
            return False
        waiting = ""
        if pending:
            mine = [(p, o) for t, p, o in self.state.pending.get(rule.index, []) if t == topic]
            if mine:
                pairs = ", ".join(f"({p}, {o})" for p, o in mine)
                waiting = f" OR (_etl_partition, _etl_offset) IN (VALUES {pairs})"
        self.sql(
            f"CREATE TEMP VIEW {name} AS SELECT * FROM {source} "
            f"WHERE (_etl_new{waiting}) AND ({quote_tables(rule.where)})",
            rule_field(rule, "where"),
        )
        return True

    def seqs(self, rule: Rule, name: str) -> np.ndarray:
        """The ``_etl_seq`` of view ``name``'s records (errors name ``where``)."""
        try:
            seqs = self.db.sql(f"SELECT _etl_seq FROM {name}").fetchnumpy()["_etl_seq"]
        except duckdb.Error as e:
            raise rule_field(rule, "where").error(str(e).split("\n", 1)[0]) from None
        return np.asarray(seqs, dtype=np.int64)

    def stateless(self, rule: Stateless) -> pa.Table | None:
        """The rule's outputs (None: no record passes ``where``). The view of the
        records that pass is not run by itself: only when the rule's query fails, to
        tell an error of ``where`` from one of ``select``."""
        name = f"in_{rule.index}"
        if not self.view(rule, name, rule.source, pending=False):
            return None
        try:
            self.sql(
                f"""CREATE TEMP VIEW out_{rule.index} AS SELECT {quote_tables(rule.select)},
                    "input"._etl_seq AS _etl_at, "input"._etl_seq AS _etl_other,
                    "input"._etl_ts AS _etl_time FROM {name} AS "input" """,
                rule_field(rule, "select"),
            )
            table = self.output(rule, f"out_{rule.index}")
        except InvalidInputError:
            if not len(self.seqs(rule, name)):  # as if ``where`` ran first: no rows
                return None
            raise
        return table if table.num_rows else None

    def denorm(
        self, rule: Denorm, pending: dict[int, list[tuple[str, int, int]]]
    ) -> pa.Table | None:
        """The pairs' outputs (one join); the events left without a partner wait."""
        k = rule.index
        sides = [
            (topic, view, seqs)
            for topic, view in ((rule.left, f"l_{k}"), (rule.right, f"r_{k}"))
            if len(seqs := self.filtered(rule, view, topic, pending=True))
        ]
        out = None
        paired: dict[str, np.ndarray] = {}
        if len(sides) == 2:
            on = quote_tables(rule.join_on)
            pair = f'l_{k} AS "left" JOIN r_{k} AS "right" ON ({on})'
            # binds (runs nothing): an error in join-on names join-on
            self.sql(
                f'CREATE TEMP VIEW j_{k} AS SELECT "left"._etl_seq, "right"._etl_seq FROM {pair}',
                rule_field(rule, "join-on"),
            )
            self.sql(
                f"""CREATE TEMP VIEW out_{k} AS SELECT {quote_tables(rule.select)},
                    greatest("left"._etl_seq, "right"._etl_seq) AS _etl_at,
                    least("left"._etl_seq, "right"._etl_seq) AS _etl_other,
                    CASE WHEN "left"._etl_seq > "right"._etl_seq THEN "left"._etl_ts
                         ELSE "right"._etl_ts END AS _etl_time,
                    "left"._etl_seq AS _etl_l, "right"._etl_seq AS _etl_r FROM {pair}""",
                rule_field(rule, "select"),
            )
            out = self.output(rule, f"out_{k}", ", _etl_l, _etl_r")
            paired = {
                f"l_{k}": out.column("_etl_l").to_numpy(),
                f"r_{k}": out.column("_etl_r").to_numpy(),
            }
        waiting: list[tuple[str, int, int]] = []
        for topic, view, seq in sides:
            if view in paired:
                seq = seq[~np.isin(seq, paired[view])]
            parts, offsets = (seq >> 44) & _PARTS, seq & _OFFSETS
            waiting += [
                (topic, p, o) for p, o in zip(parts.tolist(), offsets.tolist(), strict=True)
            ]
        pending[k] = sorted(waiting)
        return out

    def output(self, rule: Rule, view: str, extra: str = "") -> pa.Table:
        """The rule's outputs: ``key`` as text (JSON for other types), ``value``, and
        where each goes in the output order."""
        columns = {
            str(row[0]): str(row[1]) for row in self.db.execute(f"DESCRIBE {view}").fetchall()
        }
        for needed in ("key", "value"):
            if needed not in columns:
                raise rule_field(rule, "select").error(f"gives no column {needed!r}")
        key = "key" if columns["key"] == "VARCHAR" else "to_json(key)::VARCHAR AS key"
        headers = ", headers" if "headers" in columns else ""
        table = self.arrow(
            f"SELECT {key}, value{headers}, _etl_at, _etl_other, _etl_time{extra} FROM {view}",
            rule_field(rule, "select"),
        )
        # the rule's topic and index: constants, made here rather than per row in SQL
        n = table.num_rows
        out = pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, np.int8)), [rule.out])
        table = table.append_column("_etl_out", out)
        return table.append_column("_etl_rule", pa.array(np.full(n, rule.index, np.int32)))

    def consumed(self) -> tuple[dict[str, dict[int, int]], int]:
        marks = {t: dict(parts) for t, parts in self.state.consumed.items()}
        count = 0
        for topic, (parts, offsets) in self.new.items():
            for p in np.unique(parts).tolist():
                marks.setdefault(topic, {})[int(p)] = int(offsets[parts == p].max())
            count += len(offsets)
        return marks, count


class _Source:
    """One input pool@branch's records, read once for all of its topics: each
    record's topic as a code, partition and offset (numpy, no SQL pass).

    A topic's records are then copied out (one filter). Registering the source once
    with topics as DuckDB views of it copies nothing, but every rule's query then
    scans all the records: more CPU in all (measured on the 1M-event benchmark)."""

    def __init__(self, table: pa.Table) -> None:
        self.table = table
        kafka = table.column("kafka")
        self.kinds: pa.StructType = kafka.type
        # topics as codes: one pass over the text, then each topic is an integer test
        topics = pc.dictionary_encode(pc.struct_field(kafka, "topic")).combine_chunks()
        indices = topics.indices
        if indices.null_count:
            indices = pc.fill_null(indices, -1)
        self.codes = indices.to_numpy(zero_copy_only=False)
        self.topics = {t: c for c, t in enumerate(topics.dictionary.to_pylist())}
        offsets = pc.struct_field(kafka, "offset")
        self.null_offsets = offsets.null_count > 0  # refused for an input topic's records
        if self.null_offsets:
            offsets = pc.fill_null(offsets, -1)
        self.offsets = offsets.to_numpy().astype(np.int64, copy=False)
        self._parts: np.ndarray | None = None

    def parts(self) -> np.ndarray:
        if self._parts is None:
            if self.kinds.get_field_index("partition") >= 0:
                part_col = pc.struct_field(self.table.column("kafka"), "partition")
                self._parts = pc.fill_null(part_col, 0).to_numpy().astype(np.int64, copy=False)
            else:
                self._parts = np.zeros(self.table.num_rows, dtype=np.int64)
        return self._parts

    def events(self, topic: str, i: int, state: State) -> pa.Table:
        """The records of ``topic`` that are new (above their partition's mark) or
        pending in some rule, with the columns ``_etl_partition``, ``_etl_offset``,
        ``_etl_ts``, ``_etl_new`` and ``_etl_seq``."""
        code = self.topics.get(topic)
        mine = np.flatnonzero(self.codes == code) if code is not None else np.empty(0, np.int64)
        if (
            self.null_offsets
            and pc.struct_field(_rows(self.table, mine)["kafka"], "offset").null_count
        ):
            raise InvalidInputError(f"etl: topic {topic}: records without kafka.offset")
        offsets, parts = self.offsets[mine], self.parts()[mine]
        marks = state.consumed.get(topic, {})
        new = np.ones(len(mine), dtype=bool)
        for p, last in marks.items():
            new[(parts == p) & (offsets <= last)] = False
        keep = new.copy()
        waits = sorted({(p, o) for ev in state.pending.values() for t, p, o in ev if t == topic})
        if waits:
            wanted = np.array([(p << 44) | o for p, o in waits], dtype=np.int64)
            keep |= np.isin((parts << 44) | offsets, wanted)
        if not keep.all():
            mine, parts, offsets, new = mine[keep], parts[keep], offsets[keep], new[keep]
        rows = _rows(self.table, mine)
        if len(parts) and (parts.max() >= 1 << 12 or offsets.max() >= 1 << 44):
            raise InvalidInputError(
                f"etl: topic {topic}: partition {parts.max()} or offset {offsets.max()} is "
                "beyond what a run orders (partitions below 4096, offsets below 2^44)"
            )
        if self.kinds.get_field_index("timestamp") >= 0:
            ts: pa.ChunkedArray | pa.Array = pc.struct_field(rows.column("kafka"), "timestamp")
        else:
            ts = pa.nulls(rows.num_rows, pa.timestamp("us", tz="UTC"))
        seq = np.where(new, (1 << 62) + (i << 56), i << 56) + (parts << 44) + offsets
        extra = {
            "_etl_partition": parts,
            "_etl_offset": offsets,
            "_etl_ts": ts,
            "_etl_new": new,
            "_etl_seq": seq,
        }
        for name, column in extra.items():
            rows = rows.append_column(
                name, column if not isinstance(column, np.ndarray) else pa.array(column)
            )
        return rows


def _rows(table: pa.Table, rows: np.ndarray) -> pa.Table:
    """``table``'s ``rows`` (ascending indices): a filter by mask, or the table itself."""
    if len(rows) == table.num_rows:
        return table
    mask = np.zeros(table.num_rows, dtype=bool)
    mask[rows] = True
    return table.filter(pa.array(mask))


def evaluate(config: Config, state: State, sources: Mapping[str, pa.Table]) -> Result:
    """One run: ``sources`` are the input pools' records by ``pool@branch``."""
    run = _Run(config, state, sources)
    try:
        run.load_events()
        consumed, new_events = run.consumed()
        pending = {k: v for k, v in state.pending.items() if k < len(config.transforms)}
        made: list[pa.Table] = []
        if new_events:
            for rule in config.transforms:
                table = (
                    run.denorm(rule, pending) if isinstance(rule, Denorm) else run.stateless(rule)
                )
                if table is not None:
                    made.append(table)
        records, counts = _records(made, state.next)
        nexts = {**state.next, **{t: state.next.get(t, 0) + n for t, n in counts.items()}}
        return Result(records, consumed, pending, nexts, new_events, counts)
    finally:
        run.db.close()


def _records(outputs: list[pa.Table], nexts: Mapping[str, int]) -> tuple[pa.Table, dict[str, int]]:
    """The rules' outputs (one table per rule: each engine makes them so) as one table
    of output records (``kafka`` built: offsets from ``nexts`` on, per topic, in output
    order); the records per topic.

    The rows are put in output order, ``(_etl_at, _etl_rule, _etl_other)``, and taken
    once in that order: in output order a topic's records are in offset order, which
    the output pool (keyed on ``kafka.offset``) writes without sorting again."""
    if not outputs:
        return pa.table({"kafka": pa.array([], KAFKA_TYPE)}), {}
    try:
        table = pa.concat_tables(outputs, promote_options="permissive")
    except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
        raise InvalidInputError(f"the rules' outputs do not fit in one table: {e}") from None
    order = _output_order(outputs)
    topics: list[str] = []  # in order of first appearance, as codes: no per-row strings
    codes = np.concatenate([_topic_codes(t.column("_etl_out"), topics) for t in outputs])
    if order is not None:
        codes = codes[order]
    offsets = np.empty(table.num_rows, dtype=np.int64)
    counts: dict[str, int] = {}
    for code, topic in enumerate(topics):
        mine = codes == code
        counts[topic] = int(mine.sum())
        offsets[mine] = np.arange(counts[topic], dtype=np.int64) + nexts.get(topic, 0)
    # only the record columns are taken in output order; ``kafka`` is built in it
    time = pc.cast(table.column("_etl_time"), pa.timestamp("ms", tz="UTC"), safe=False)
    in_order = order is None
    kafka = pa.StructArray.from_arrays(
        [
            pa.array(topics, pa.string()).take(pa.array(codes)),
            pa.array(np.zeros(table.num_rows, dtype=np.int32)),
            pa.array(offsets),
            (time if in_order else time.take(order)).combine_chunks(),
        ],
        fields=list(KAFKA_TYPE),
    )
    rest = [c for c in table.column_names if not c.startswith("_etl_")]
    taken = table.select(rest) if in_order else table.select(rest).take(order)
    records = pa.table({"kafka": kafka, **{c: taken.column(c) for c in rest}})
    return records, counts


def _topic_codes(column: pa.ChunkedArray, topics: list[str]) -> np.ndarray:
    """Each row's topic as its index in ``topics`` (new topics appended)."""
    if not len(column):
        return np.empty(0, dtype=np.int64)
    col = column.combine_chunks()
    if not isinstance(col, pa.DictionaryArray):
        col = pc.dictionary_encode(col)
    names = col.dictionary.to_pylist()
    for name in names:
        if name not in topics:
            topics.append(name)
    remap = np.array([topics.index(n) for n in names], dtype=np.int64)
    return remap[col.indices.to_numpy(zero_copy_only=False)]


def _output_order(outputs: list[pa.Table]) -> np.ndarray | None:
    """The rows of ``outputs`` (concatenated) by ``(_etl_at, _etl_rule, _etl_other)``;
    None when they are in that order already.

    Each table is one rule's rows, usually in order already (a stateless rule's
    follow its records); a table that is not is sorted by itself, and the tables,
    taken in rule order, are merged by ``_etl_at`` alone with a stable sort (sorted
    runs: linear), which leaves ties in rule order. Tables that are not one rule
    each are sorted all together."""
    starts = np.cumsum([0] + [t.num_rows for t in outputs])
    runs: list[tuple[int, np.ndarray, np.ndarray]] = []  # (rule, rows, their _etl_at)
    for start, t in zip(starts.tolist(), outputs, strict=False):
        if not t.num_rows:
            continue
        rules = t.column("_etl_rule").to_numpy()
        at, other = t.column("_etl_at").to_numpy(), t.column("_etl_other").to_numpy()
        if rules.min() != rules.max():
            return _sorted_all(outputs)
        rows = _sorted_rows(at, other)
        runs.append((int(rules[0]), rows + start, at[rows]))
    if len({r for r, _, _ in runs}) != len(runs):
        return _sorted_all(outputs)
    runs.sort(key=lambda r: r[0])
    rows = np.concatenate([r for _, r, _ in runs]) if runs else np.empty(0, np.int64)
    merged = np.argsort(np.concatenate([a for _, _, a in runs]), kind="stable") if runs else rows
    order = rows[merged]
    if len(order) and (order == np.arange(len(order))).all():
        return None
    return order


def _sorted_rows(at: np.ndarray, other: np.ndarray) -> np.ndarray:
    """Row indices of one rule's rows by ``(at, other)`` (``arange`` if in order)."""
    n = len(at)
    if n < 2:
        return np.arange(n)
    step = np.diff(at)
    if ((step > 0) | ((step == 0) & (np.diff(other) > 0))).all():
        return np.arange(n)
    rows = np.argsort(at, kind="stable")
    ats = at[rows]
    if (ats[1:] == ats[:-1]).any():  # a record paired with several: ties by ``other``
        rows = np.lexsort((other, at))
    return rows


def _sorted_all(outputs: list[pa.Table]) -> np.ndarray:
    """The general case: one sort of all rows by the three columns."""
    keys = [
        np.concatenate([t.column(c).to_numpy() for t in outputs])
        for c in ("_etl_other", "_etl_rule", "_etl_at")
    ]
    return np.lexsort(keys)  # the last key sorts first

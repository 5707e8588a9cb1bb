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

from collections.abc import Mapping

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from limno.errors import InvalidInputError
from limno.etl.common import (
    Result,
    check_inputs,
    check_orderable,
    quote_tables,
    records,
    unpack,
)
from limno.etl.config import Config, Denorm, Place, Rule, Stateless, rule_field
from limno.etl.state import State

__all__ = ["evaluate"]


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
        check_inputs(len(self.config.inputs))
        sources: dict[str, _Source] = {}
        for i, source in enumerate(self.config.inputs):
            table = self.sources[source.ref]
            if "kafka" not in table.schema.names or "key" not in table.schema.names:
                continue
            if source.ref not in sources:
                sources[source.ref] = _Source(table)
            events = sources[source.ref].events(source.topic, i, self.state)
            if not events.num_rows:
                # nothing new nor waiting: absent, as a topic never seen is (the pool's
                # schema may not hold this topic's fields yet, which rules name)
                continue
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
        where, place = quote_tables(rule.where), rule_field(rule, "where")
        # DuckDB would cast a number to a boolean and let every record through
        kind = self.sql(f"DESCRIBE SELECT ({where}) AS w FROM {source}", place).fetchall()
        if kind[0][1] not in ("BOOLEAN", '"NULL"'):
            raise place.error(f"is of type {kind[0][1]}, not a BOOLEAN condition")
        self.sql(
            f"CREATE TEMP VIEW {name} AS SELECT * FROM {source} "
            f"WHERE (_etl_new{waiting}) AND ({where})",
            place,
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
            waiting += unpack(topic, seq)
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
        if len(parts):
            check_orderable(topic, int(parts.max()), int(offsets.max()))
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
        out, counts = records(made, state.next)
        nexts = {**state.next, **{t: state.next.get(t, 0) + n for t, n in counts.items()}}
        return Result(out, consumed, pending, nexts, new_events, counts)
    finally:
        run.db.close()

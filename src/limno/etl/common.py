"""What both engines of ``limno etl`` share: the order of a run, its result, its numbering.

The local engine (:mod:`.local`) and the Spark engine (:mod:`.spark`) compute each
rule's output rows their own way and hand them to :func:`records`, which numbers
them into output records the same way for both, so that both write the same records,
offsets and completion records. ``_etl_seq`` packs a record's place in the input
order into one BIGINT: bit 62 new, 6 bits of input, 12 of partition, 44 of offset;
the limits below are what fits (:func:`check_orderable`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from limno.errors import InvalidInputError
from limno.streams.kafka_records import KAFKA_TYPE

__all__ = [
    "MAX_INPUTS",
    "OFFSETS",
    "PARTS",
    "Result",
    "check_inputs",
    "check_orderable",
    "quote_tables",
    "records",
    "unpack",
]

#: inputs a run can order (``_etl_seq`` has 6 bits for them)
MAX_INPUTS = 63
#: the partition and offset bits of ``_etl_seq``
PARTS = (1 << 12) - 1
OFFSETS = (1 << 44) - 1
#: string literals, quoted identifiers, and the table names DuckDB reserves
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


def check_inputs(count: int) -> None:
    """Refuse a config with more inputs than ``_etl_seq`` orders."""
    if count > MAX_INPUTS:
        raise InvalidInputError(f"etl: at most {MAX_INPUTS} inputs")


def check_orderable(topic: str, part: int, offset: int) -> None:
    """Refuse a topic whose highest partition or offset does not fit ``_etl_seq``."""
    if part >= 1 << 12 or offset >= 1 << 44:
        raise InvalidInputError(
            f"etl: topic {topic}: partition {part} or offset {offset} is "
            "beyond what a run orders (partitions below 4096, offsets below 2^44)"
        )


def unpack(topic: str, seqs: np.ndarray) -> list[tuple[str, int, int]]:
    """Events of ``topic`` as ``(topic, partition, offset)`` from their ``_etl_seq``."""
    parts, offsets = ((seqs >> 44) & PARTS).tolist(), (seqs & OFFSETS).tolist()
    return [(topic, p, o) for p, o in zip(parts, offsets, strict=True)]


def records(outputs: list[pa.Table], nexts: Mapping[str, int]) -> tuple[pa.Table, dict[str, int]]:
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

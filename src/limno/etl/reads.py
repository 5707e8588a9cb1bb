"""What a local run reads of its input branches: the records it needs, not the branches.

A run needs, of each input topic, the records above their partition's ``consumed``
mark (a partition without a mark: all of its records) and the pending ones. How
much of a branch that is depends on the input pool's key (README, Kafka section):

* ``kafka.topic,kafka.partition,kafka.offset`` (``kafka from`` of several topics):
  per topic, the key ranges around each marked partition's consumed prefix, so a
  partition without a mark, new or not, is read whole;
* ``kafka.partition,kafka.offset``: the same per partition, below the lowest mark
  of the pool's input topics in it;
* ``kafka.offset`` (one topic, or several in one pool): the key cannot tell
  partitions apart, so a lower bound from the marks would skip a partition that
  appeared since (it starts at offset 0). Each commit of the run records the input
  commits it read (``etl_read``: pool@branch -> commit and the topics read there);
  records no run has seen are in the objects added since that commit (objects are
  immutable), so the run reads from the lowest of the marks and of those objects'
  first keys. A new partition makes that one read long; without a usable record
  (a first run, a topic added to the config, a commit gone) the branch is read whole.

Pending records below the ranges are looked up by key (:meth:`Pool.get`), in one
call. Any other key, or keyless records in the branch (a range scan leaves them out:
a full read names their fault as before) reads the branch whole, as every run did
before. Everything is read at one commit, the one recorded.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from limno.data.schema import conform, unify
from limno.errors import NotFoundError
from limno.etl.config import Config
from limno.etl.state import Read, State

if TYPE_CHECKING:
    from limno.api import Lake, Pool

__all__ = ["read_inputs"]

_SHAPES = {
    ("kafka.offset",): "offset",
    ("kafka.partition", "kafka.offset"): "partition",
    ("kafka.topic", "kafka.partition", "kafka.offset"): "topic",
}
Event = tuple[str, int, int]
Bound = tuple[Any, ...] | None


def read_inputs(lake: Lake, config: Config, state: State) -> tuple[dict[str, pa.Table], Read]:
    """Each input pool@branch's records a run of ``config`` from ``state`` needs (and
    maybe more: the engine filters), and what was read where, for the next run."""
    tables: dict[str, pa.Table] = {}
    read: Read = {}
    for source in config.inputs:
        if source.ref in tables:
            continue
        pool = lake.pool(source.pool)
        topics = sorted(i.topic for i in config.inputs if i.ref == source.ref)
        head = pool.resolve(source.branch)
        tables[source.ref] = _read(pool, head, topics, state, state.read.get(source.ref))
        read[source.ref] = {"commit": head, "topics": topics}
    return tables, read


def _read(
    pool: Pool, head: str, topics: list[str], state: State, seen: dict[str, Any] | None
) -> pa.Table:
    shape = _SHAPES.get(tuple(f.strip() for f in (pool.config.key or "").split(",")))
    if shape is None or any(o.keyless for o in pool.objects(head)):
        return pool.scan(head)
    marks = {t: state.consumed.get(t, {}) for t in topics}
    ranges: list[tuple[Bound, Bound]]
    if shape == "offset":
        start = _offset_start(pool, head, topics, marks, seen)
        if start is False:
            return pool.scan(head)
        ranges = [] if start is None else [((start,), None)]

        def consumed(e: Event) -> bool:
            return start is None or e[2] < start

        def key(e: Event) -> Any:
            return e[2]
    elif shape == "partition":
        lows: dict[int, int] = {}
        for p in sorted({p for m in marks.values() for p in m}):
            low = min(m[p] + 1 if p in m else 0 for m in marks.values())
            if low > 0:
                lows[p] = low
        ranges = _complement(((p,), (p, low)) for p, low in lows.items())

        def consumed(e: Event) -> bool:
            return e[1] in lows and e[2] < lows[e[1]]

        def key(e: Event) -> Any:
            return (e[1], e[2])
    else:
        ranges = []
        for t in topics:
            cut = (((t, p), (t, p, last + 1)) for p, last in sorted(marks[t].items()))
            ranges += _complement(cut, (t,), (t + "\x00",))

        def consumed(e: Event) -> bool:
            return e[1] in marks[e[0]] and e[2] <= marks[e[0]][e[1]]

        def key(e: Event) -> Any:
            return e

    waiting = {e for events in state.pending.values() for e in events if e[0] in marks}
    keys = sorted({key(e) for e in waiting if consumed(e)})
    table = pool.scan(head, ranges=ranges) if ranges else pa.table({})
    if keys:
        found = pool.get(keys, head)
        if not table.num_rows:
            return found
        if found.num_rows and found.schema != table.schema:
            schema = unify([table.schema, found.schema])
            table, found = conform(table, schema), conform(found, schema)
        table = pa.concat_tables([table, found]) if found.num_rows else table
    return table


def _offset_start(
    pool: Pool,
    head: str,
    topics: list[str],
    marks: dict[str, dict[int, int]],
    seen: dict[str, Any] | None,
) -> int | None | bool:
    """The lowest offset a record not read yet can have in a pool keyed on
    ``kafka.offset`` (None: there is none); False: not known (read it all)."""
    if not seen or not set(topics) <= set(seen.get("topics", ())):
        return False
    try:
        changes = pool.diff(str(seen["commit"]), head)
    except NotFoundError:  # the commit read last is gone: the branch was rewritten
        return False
    starts = [last + 1 for m in marks.values() for last in m.values()]
    for change in changes:
        new = change.new or {}
        first = new.get("min_key")
        if change.change != "removed" and first:
            starts.append(first[0])
    return min(starts) if starts else None


def _complement(
    cuts: Iterable[tuple[tuple[Any, ...], tuple[Any, ...]]],
    start: Bound = None,
    end: Bound = None,
) -> list[tuple[Bound, Bound]]:
    """The key ranges from ``start`` to ``end`` around ``cuts`` (ascending,
    disjoint ``[from, to)`` ranges: the consumed prefixes)."""
    out: list[tuple[Bound, Bound]] = []
    for lo, hi in cuts:
        out.append((start, lo))
        start = hi
    out.append((start, end))
    return out

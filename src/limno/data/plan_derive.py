"""A child snapshot's stored scan plan, derived from its parent's and the commit's changes.

Planning a new snapshot of 100,000 objects whole costs seconds (every entry read and
decoded, every key range sorted, every row encoded), though a commit changes a few
objects. :func:`derive` makes the child's :func:`~limno.data.plan_index.plan_table`
from the parent's stored one instead: the parent's rows are kept as they are (their
texts copied, never decoded), the removed objects' rows dropped, the added objects'
rows made, and only the clusters an added or removed object touches are planned
again, from their members (decoded) and the added objects. A cluster no change
touches keeps its members, its order and its bounds: its key range touches no other
cluster's and no added object's. Places in the snapshot's order (``stored``) and in
the plan's (``position``) shift by what is removed and added before them.

The result is exactly the table planning the child whole gives (a Hypothesis test
compares them); where that cannot be made sure, :func:`derive` returns None and the
caller plans whole: too many objects to plan again, an object whose clipped key range
is inverted (read for a partition its keys are not in: the planner then treats it
unlike an interval), a parent plan that does not list its object ids as written.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from limno.data.keys import SortKey
from limno.data.objects import DataObject
from limno.data.plan_index import (
    _SCHEMA,
    FORMAT,
    KEYLESS,
    UNREAD,
    StoredPlan,
    _ints,
    key_text,
    row_texts,
)
from limno.data.scan_plan import _clustered

__all__ = ["MAX_REPLANNED", "derive"]

#: most objects planned again (members of the touched clusters, and the added ones)
MAX_REPLANNED = 20_000
#: an entry's object id (``DataObject.to_json`` writes it first)
_ID = r'^\{"id":"(?P<id>[^"\\]*)"'


def derive(
    parent: StoredPlan,
    removed: Collection[str],
    added: Sequence[tuple[DataObject, Sequence[DataObject]]],
    order: Callable[[DataObject], Any],
    metadata: Mapping[str, str],
) -> pa.Table | None:
    """The plan table of the parent's snapshot without the objects ``removed`` (ids)
    and with ``added`` (each object, whole, with what the plan reads of it: itself, its
    clipped runs, or nothing), or None when it cannot be derived (see the module
    docstring). ``order``: the snapshot's order of objects (a strict total order);
    ``metadata``: as :func:`~limno.data.plan_index.plan_table` takes it."""
    key = parent.key
    table = parent.whole()
    gone = _rows_of(table.column("entry"), removed)
    if gone is None:
        return None
    cluster = _ints(_one(table.column("cluster")))
    position = _ints(_one(table.column("position")))
    stored = _ints(_one(table.column("stored")))
    held = int(parent.metadata["stored_objects"])
    gone_stored = np.unique(stored[gone])
    if len(gone_stored) != len(set(removed)):
        return None  # an object to remove that the parent does not hold

    # -- the snapshot's order: where each added object goes among the parent's
    firsts = np.full(held, -1, np.int64)
    rows = np.arange(len(stored))
    firsts[stored[::-1]] = rows[::-1]  # each object's first row
    news = sorted(added, key=lambda a: order(a[0]))
    at = np.array(
        [
            bisect.bisect_left(
                range(held), order(o), key=lambda s: order(parent.row(int(firsts[s])))
            )
            for o, _ in news
        ],
        np.int64,
    )
    keep = ~gone
    new_stored = (
        stored - np.searchsorted(gone_stored, stored) + np.searchsorted(at, stored, "right")
    )
    added_stored = at - np.searchsorted(gone_stored, at) + np.arange(len(news))

    # -- the plan's order: each object's runs in turn
    runs = [(i, j, r) for i, (_, objs) in enumerate(news) for j, r in enumerate(objs)]
    read = keep & (position >= 0)
    major = np.concatenate([new_stored[read], added_stored[[i for i, _, _ in runs]]])
    minor = np.concatenate([position[read], np.array([j for _, j, _ in runs], np.int64)])
    ranks = np.empty(len(major), np.int64)
    ranks[np.lexsort((minor, major))] = np.arange(len(major))
    new_position = np.full(len(stored), -1, np.int64)
    new_position[read] = ranks[: int(read.sum())]
    run_position = ranks[int(read.sum()) :]

    # -- clusters: those an added or removed object touches are planned again
    count = len(parent._starts)
    dirty = set(np.unique(cluster[gone & (cluster >= 0)]).tolist())
    keyed = [k for k, (_, _, r) in enumerate(runs) if _keyed(r)]
    for k in keyed:
        first, last = _range(runs[k][2], key)
        if last < first:
            return None
        i = bisect.bisect_left(range(count), first, key=lambda c: _reach(parent, c))
        while i < count and not last < parent._starts[i]:
            dirty.add(i)
            i += 1
    offsets = parent._offsets
    members = [r for c in sorted(dirty) for r in range(int(offsets[c]), int(offsets[c + 1]))]
    members = [r for r in members if keep[r]]
    if len(members) + len(keyed) > MAX_REPLANNED:
        return None
    # (position, parent row or -1 - run number, object), in the plan's order
    again = sorted(
        [(int(new_position[r]), r, parent.row(r)) for r in members]
        + [(int(run_position[k]), -1 - k, runs[k][2]) for k in keyed],
        key=lambda item: item[0],
    )
    objs = [o for _, _, o in again]
    if any(last < first for first, last in (_range(o, key) for o in objs)):
        return None
    planned, starts, ends = _clustered(objs, key, None, None)
    # each cluster planned again goes before the first untouched one that starts after it
    at_cluster = []
    for start in starts:
        i = bisect.bisect_left(range(count), start, key=lambda c: parent._starts[c])
        if i < count and i not in dirty and not start < parent._starts[i]:
            return None
        at_cluster.append(i)
    mapping, replanned = _renumbered(count, dirty, np.array(at_cluster, np.int64))

    # -- the rows: the parent's kept (cells copied), then the added ones
    new_cluster = cluster.copy()
    kept_clusters = new_cluster >= 0
    new_cluster[kept_clusters] = mapping[cluster[kept_clusters]]
    run_cluster = np.array(
        [UNREAD if r.keyless_here <= 0 or r.min_key is not None else KEYLESS for _, _, r in runs],
        np.int64,
    )
    for c, members_of in enumerate(planned):
        for m in members_of:
            _, source, _ = again[m]
            if source >= 0:
                new_cluster[source] = replanned[c]
            else:
                run_cluster[-1 - source] = replanned[c]
    unread_objects = [i for i, (_, objs_of) in enumerate(news) if not objs_of]
    fresh = [r for _, _, r in runs] + [news[i][0] for i in unread_objects]
    fresh_cluster = np.concatenate([run_cluster, np.full(len(unread_objects), UNREAD, np.int64)])
    fresh_position = np.concatenate([run_position, np.full(len(unread_objects), -1, np.int64)])
    fresh_stored = np.concatenate(
        [added_stored[[i for i, _, _ in runs]], added_stored[unread_objects]]
    ).astype(np.int64)
    texts = [row_texts(o) for o in fresh]
    fresh_tail = np.array(
        [
            int(c != UNREAD and o.keyless_here > 0)
            for c, o in zip(fresh_cluster, fresh, strict=True)
        ],
        np.int8,
    )

    kept = np.flatnonzero(keep)
    all_cluster = np.concatenate([new_cluster[kept], fresh_cluster])
    all_position = np.concatenate([new_position[kept], fresh_position])
    all_stored = np.concatenate([new_stored[kept], fresh_stored])
    group = np.where(
        all_cluster >= 0, 0, np.where(all_cluster == KEYLESS, 1, np.where(all_position >= 0, 2, 3))
    )
    major_key = np.where(group == 0, all_cluster, np.where(group == 3, all_stored, all_position))
    second = np.where(group == 0, all_position, 0)
    out = np.lexsort((second, major_key, group))

    # bounds: an untouched cluster's from its parent row, a replanned one's made here
    out_cluster = all_cluster[out]
    keyed_rows = int(np.count_nonzero(out_cluster >= 0))  # the keyed clusters come first
    firsts_out = np.flatnonzero(np.diff(out_cluster[:keyed_rows], prepend=-1) != 0)
    bound_of = np.full(len(mapping) - len(dirty) + len(starts), -1, np.int64)
    clean = np.flatnonzero(mapping >= 0)
    bound_of[mapping[clean]] = offsets[clean]  # an untouched cluster: its parent's first row
    bound_of[replanned] = len(stored) + np.arange(len(starts))  # a replanned one: made here
    bound_rows = np.full(len(out), -1, np.int64)
    bound_rows[firsts_out] = bound_of[out_cluster[firsts_out]]
    lo = _taken(table.column("lo"), [key_text(s.key) for s in starts], bound_rows)
    hi = _taken(table.column("hi"), [key_text(e.key) for e in ends], bound_rows)

    # every cell of the kept rows copied once, in the plan's order
    taking = np.concatenate([kept, len(stored) + np.arange(len(fresh))])[out]
    clip = _taken(table.column("clip"), [t[2] for t in texts], taking)
    entry = _taken(table.column("entry"), [t[1] for t in texts], taking)
    schema_column = _schema_cells(_one(table.column("schema")), [t[0] for t in texts], taking)
    all_tail = np.concatenate([_ints(_one(table.column("tail")), np.int8)[kept], fresh_tail])
    positions = all_position[out]
    meta = {
        **metadata,
        "limno.plan": FORMAT,
        "schemas": json.dumps(_schemas(schema_column, positions)),
    }
    columns = [
        pa.array(all_cluster[out], pa.int64()),
        pa.array(positions, pa.int64()),
        pa.array(all_stored[out], pa.int64()),
        pa.array(all_tail[out], pa.int8()),
        lo,
        hi,
        clip,
        schema_column,
        entry,
    ]
    return pa.Table.from_arrays(columns, schema=_SCHEMA.with_metadata(meta))


def _one(column: pa.ChunkedArray) -> pa.Array:
    return column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()


def _rows_of(entries: pa.ChunkedArray, removed: Collection[str]) -> np.ndarray | None:
    """Which rows hold an object of ``removed`` (ids), or None when an entry does not
    start with its id (as ``DataObject.to_json`` writes it). Nothing removed: no entry
    read (most commits only add)."""
    if not removed:
        return np.zeros(len(entries), bool)
    ids = pc.struct_field(pc.extract_regex(entries, _ID), [0])
    if ids.null_count:
        return None
    return np.asarray(pc.is_in(ids, value_set=pa.array(list(removed), pa.string())), bool)


def _renumbered(count: int, dirty: set[int], at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The new numbers of the parent's ``count`` clusters (-1: ``dirty``, planned again)
    and of the clusters planned again, which go (in key order) before the parent's
    cluster ``at`` of each (never decreasing; ``count``: after every one); in numpy,
    as a pool may have a cluster an object."""
    clean = np.ones(count, bool)
    clean[np.array(sorted(dirty), np.int64)] = False
    clean_before = np.concatenate([[0], np.cumsum(clean)])  # untouched clusters before i
    numbers = np.arange(count)
    mapping = clean_before[:-1] + np.searchsorted(at, numbers, "right")
    mapping[~clean] = -1
    return mapping, clean_before[at] + np.arange(len(at))


def _taken(parent: pa.ChunkedArray, made: Sequence[str | None], rows: np.ndarray) -> pa.Array:
    """A string column of ``rows``: below the parent's length its rows, at or above it
    the cells ``made`` (from the parent's length on), -1 a null."""
    values = pa.concat_arrays([_one(parent).cast(pa.string()), pa.array(made, pa.string())])
    return values.take(pa.array(rows, pa.int64(), mask=rows < 0))


def _schema_cells(
    parent: pa.DictionaryArray, made: Sequence[str | None], rows: np.ndarray
) -> pa.DictionaryArray:
    """The ``schema`` column of ``rows`` (as :func:`_taken` numbers them) dictionary
    encoded as ``plan_table`` encodes it (values in first-seen order), from the parent's
    dictionary and indices (no cell decoded: a pool's objects share a few schemas)."""
    texts = parent.dictionary.to_pylist()
    plain = None not in texts and len(set(texts)) == len(texts)  # as dictionary_encode makes
    if parent.null_count or not plain or any(m is None for m in made):
        cells = _taken(pa.chunked_array([parent.cast(pa.string())]), made, rows)
        return cells.dictionary_encode()
    at = {t: i for i, t in enumerate(texts)}
    for m in made:
        at.setdefault(m, len(at))
    codes = np.concatenate(
        [
            _ints(parent.indices, np.int32).astype(np.int64),
            np.array([at[m] for m in made], np.int64),
        ]
    )[rows]
    values, firsts, inverse = np.unique(codes, return_index=True, return_inverse=True)
    order = np.argsort(firsts)  # the values in first-seen order
    renumber = np.empty(len(values), np.int32)
    renumber[order] = np.arange(len(values), dtype=np.int32)
    dictionary = pa.array(list(at), pa.string()).take(pa.array(values[order]))
    return pa.DictionaryArray.from_arrays(pa.array(renumber[inverse], pa.int32()), dictionary)


def _keyed(obj: DataObject) -> bool:
    return obj.min_key is not None and obj.max_key is not None


def _range(obj: DataObject, key: Any) -> tuple[SortKey, SortKey]:
    first, last = obj.first_key(key), obj.last_key(key)
    assert first is not None and last is not None
    return first, last


def _reach(parent: StoredPlan, c: int) -> SortKey:
    """Cluster ``c``'s last key, or its first when that is later (a cluster of one
    object read for a partition past its keys): never decreasing from one cluster to
    the next, so a binary search finds the first cluster a range can touch."""
    start, end = parent._starts[c], parent._ends[c]
    return start if end < start else end


def _schemas(column: pa.DictionaryArray, positions: np.ndarray) -> list[str]:
    """The distinct schemas of the rows the plan reads, first-seen in the plan's order
    (what ``plan_table`` lists)."""
    indices = _ints(column.indices, np.int32)
    read = np.flatnonzero(positions >= 0)
    seq = indices[read[np.argsort(positions[read], kind="stable")]]
    _, firsts = np.unique(seq, return_index=True)
    texts = [column.dictionary[int(i)].as_py() for i in seq[np.sort(firsts)]]
    return [t for t in texts if t]

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
    ids = pc.struct_field(pc.extract_regex(table.column("entry"), _ID), [0])
    if ids.null_count:
        return None
    gone = np.asarray(pc.is_in(ids, value_set=pa.array(list(removed), pa.string())), bool)
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
    places = []
    for c, start in enumerate(starts):
        i = bisect.bisect_left(range(count), start, key=lambda c: parent._starts[c])
        if i < count and i not in dirty and not start < parent._starts[i]:
            return None
        places.append((i, -1, c))
    places += [(i, 0, i) for i in range(count) if i not in dirty]
    places.sort()
    renumber = {(kind, c): n for n, (_, kind, c) in enumerate(places)}

    # -- the rows: the parent's kept (cells copied), then the added ones
    new_cluster = cluster.copy()
    kept_clusters = new_cluster >= 0
    mapping = np.array([renumber.get((0, c), -1) for c in range(count)], np.int64)
    new_cluster[kept_clusters] = mapping[cluster[kept_clusters]]
    run_cluster = np.array(
        [UNREAD if r.keyless_here <= 0 or r.min_key is not None else KEYLESS for _, _, r in runs],
        np.int64,
    )
    for c, members_of in enumerate(planned):
        for m in members_of:
            _, source, _ = again[m]
            if source >= 0:
                new_cluster[source] = renumber[(-1, c)]
            else:
                run_cluster[-1 - source] = renumber[(-1, c)]
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
    parent_lo = table.column("lo").to_pylist()
    parent_hi = table.column("hi").to_pylist()
    lo: list[str | None] = [None] * len(out)
    hi: list[str | None] = [None] * len(out)
    done: set[int] = set()
    for n, row in enumerate(out.tolist()):
        c = int(all_cluster[row])
        if c < 0 or c in done:
            continue
        done.add(c)
        kind, which = places[c][1], places[c][2]
        if kind == 0:
            source = int(offsets[which])
            lo[n], hi[n] = parent_lo[source], parent_hi[source]
        else:
            lo[n], hi[n] = key_text(starts[which].key), key_text(ends[which].key)

    cells = pa.table(
        {
            "clip": pa.concat_arrays(
                [
                    _one(table.column("clip")).take(pa.array(kept)),
                    pa.array([t[2] for t in texts], pa.string()),
                ]
            ),
            "schema": pa.concat_arrays(
                [
                    _one(table.column("schema")).cast(pa.string()).take(pa.array(kept)),
                    pa.array([t[0] for t in texts], pa.string()),
                ]
            ),
            "entry": pa.concat_arrays(
                [
                    _one(table.column("entry")).take(pa.array(kept)),
                    pa.array([t[1] for t in texts], pa.string()),
                ]
            ),
        }
    ).take(pa.array(out))
    all_tail = np.concatenate([_ints(_one(table.column("tail")), np.int8)[kept], fresh_tail])
    schema_column = _one(cells.column("schema")).dictionary_encode()
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
        pa.array(lo, pa.string()),
        pa.array(hi, pa.string()),
        _one(cells.column("clip")),
        schema_column,
        _one(cells.column("entry")),
    ]
    return pa.Table.from_arrays(columns, schema=_SCHEMA.with_metadata(meta))


def _one(column: pa.ChunkedArray) -> pa.Array:
    return column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()


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

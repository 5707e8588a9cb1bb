"""Planning a scan: which objects can hold keys in a range, as clusters in key order.

Objects of an LSM pool overlap. :func:`plan` prunes objects by their recorded key
range and groups the rest into *clusters* of mutually overlapping objects; clusters
do not overlap each other, so a scan (``scan.py``) streams them one after another
and merges only within a cluster. :class:`Plan` is the unbounded plan made once (for
a snapshot: see ``pools/records/snapshot_cache.py``) and cut to any bounds, or to the
keys of a lookup, by binary search.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence
from typing import Any

from limno.data.keys import PoolKey, SortKey
from limno.data.objects import DataObject

__all__ = ["Plan", "plan"]

Key = tuple[Any, ...]


def plan(
    objects: Sequence[DataObject], key: PoolKey, lo: Key | None, hi: Key | None
) -> list[list[DataObject]]:
    """Objects that can hold keys in ``[lo, hi)``, as clusters in key order.

    A cluster is a maximal run of objects whose key ranges overlap (touching ranges
    count: equal keys must be merged). Within a cluster objects keep their order in
    ``objects``, which is the tie order of a scan. A full scan (no bounds) also keeps
    objects holding only keyless rows, as one last cluster.
    """
    lo_key = None if lo is None else key.sort_key(lo)
    hi_key = None if hi is None else key.sort_key(hi)
    if lo_key is not None and hi_key is not None and not lo_key < hi_key:
        return []
    clusters, _, _ = _clustered(objects, key, lo_key, hi_key)
    out = [[objects[i] for i in c] for c in clusters]
    if lo is None and hi is None:
        keyless = _keyless(objects)
        if keyless:
            out.append(keyless)
    return out


def _clustered(
    objects: Sequence[DataObject], key: PoolKey, lo: SortKey | None, hi: SortKey | None
) -> tuple[list[list[int]], list[SortKey], list[SortKey]]:
    """The indices of the objects with keyed rows in ``[lo, hi)`` as :func:`plan`'s
    clusters (in key order; members in index order), with each cluster's first and
    last key. Each object's key range is read once: for a snapshot of many objects
    this is most of the cost of planning."""
    picked: list[tuple[SortKey, SortKey, int]] = []
    for i, o in enumerate(objects):
        first, last = o.first_key(key), o.last_key(key)
        if first is None or last is None:
            continue
        if (hi is None or first < hi) and not (lo is not None and last < lo):
            picked.append((first, last, i))
    picked.sort(key=_first)  # stable: ties keep index order
    clusters: list[list[int]] = []
    starts: list[SortKey] = []
    ends: list[SortKey] = []
    for first, last, i in picked:
        if clusters and not ends[-1] < first:
            clusters[-1].append(i)
            if ends[-1] < last:
                ends[-1] = last
        else:
            clusters.append([i])
            starts.append(first)
            ends.append(last)
    for c in clusters:
        c.sort()
    return clusters, starts, ends


def _first(item: tuple[SortKey, SortKey, int]) -> SortKey:
    return item[0]


class Plan:
    """The unbounded :func:`plan` of a set of objects, made once and cut to any bounds.

    Planning is linear in the objects (their key ranges decoded and sorted), so a
    caller that scans one immutable set of objects again and again (a snapshot's:
    see ``pools/records/snapshot_cache.py``) keeps a Plan; :meth:`clusters` then finds
    the clusters a range overlaps by a binary search over their ends and yields them
    lazily, so a scan that stops after a few rows touches a few clusters only.

    A bounded scan gets each overlapping full cluster cut to its members in range:
    possibly coarser than :func:`plan`'s own clusters of those members, which gives
    the same rows in the same order (clusters never hold equal keys across them).
    """

    #: the objects planned (a stored plan: see ``plan_index.py``, read as needed)
    objects: Sequence[DataObject]
    #: per cluster (in key order), its first and last key
    _starts: Sequence[SortKey]
    _ends: Sequence[SortKey]

    def __init__(self, objects: Sequence[DataObject], key: PoolKey) -> None:
        self.objects = tuple(objects)
        self.key = key
        clusters, self._starts, self._ends = _clustered(self.objects, key, None, None)
        self._clusters = [[self.objects[i] for i in c] for c in clusters]
        keyless = _keyless(self.objects)
        self._keyless = keyless or None
        position = {id(o): i for i, o in enumerate(self.objects)}
        self._position = position
        #: objects with keyless rows, in object order (read after a full scan's keyed rows)
        self.tails = sorted(
            (o for c in [*self._clusters, keyless] for o in c if o.keyless_here),
            key=lambda o: position[id(o)],
        )

    def covering(self, keys: Sequence[SortKey]) -> list[tuple[int, DataObject]]:
        """The objects (with their index) of the clusters whose key range holds one of
        ``keys`` (sorted), in object order: the only ones that can hold rows of those keys.

        Binary search either way round, whichever is fewer searches: each key among
        the clusters, or each cluster among the keys (many keys: a search a cluster)."""
        held: set[int] = set()
        if len(keys) <= len(self._starts):
            for k in keys:
                i = bisect.bisect_left(self._ends, k)
                if i < len(self._ends) and not k < self._starts[i]:
                    held.add(i)
        else:
            for i, (start, end) in enumerate(zip(self._starts, self._ends, strict=True)):
                j = bisect.bisect_left(keys, start)
                if j < len(keys) and not end < keys[j]:
                    held.add(i)
        picked = dict(member for i in held for member in self._members(i))
        return sorted(picked.items(), key=_index)

    def _cluster(self, i: int) -> list[DataObject]:
        """Cluster ``i`` (in key order): its objects, in object order."""
        return self._clusters[i]

    def _members(self, i: int) -> list[tuple[int, DataObject]]:
        """Cluster ``i``'s objects with their index among :attr:`objects`."""
        return [(self._position[id(o)], o) for o in self._clusters[i]]

    def clusters(
        self, lo: Key | None, hi: Key | None, reverse: bool = False
    ) -> Iterator[list[DataObject]]:
        """What ``plan(objects, key, lo, hi)`` holds (backwards with ``reverse``), lazily:
        see the class docstring."""
        key = self.key
        lo_key = None if lo is None else key.sort_key(lo)
        hi_key = None if hi is None else key.sort_key(hi)
        if lo_key is not None and hi_key is not None and not lo_key < hi_key:
            return
        # clusters do not overlap: their starts and their ends both increase
        at = 0 if lo_key is None else bisect.bisect_left(self._ends, lo_key)
        stop = len(self._starts) if hi_key is None else bisect.bisect_left(self._starts, hi_key)
        full = lo is None and hi is None
        if full and reverse and self._keyless is not None:
            yield self._keyless
        for i in reversed(range(at, stop)) if reverse else range(at, stop):
            cluster = self._cluster(i)
            if not full:
                cluster = [o for o in cluster if o.overlaps(key, lo_key, hi_key)]
            if cluster:
                yield cluster
        if full and not reverse and self._keyless is not None:
            yield self._keyless


def _index(item: tuple[int, DataObject]) -> int:
    return item[0]


def _keyless(objects: Sequence[DataObject]) -> list[DataObject]:
    """The objects holding only keyless rows (still to read): a full scan's last cluster."""
    return [o for o in objects if o.min_key is None and o.keyless_here > 0]

"""Committed snapshots: sorted maps of entries stored as content-addressed ranges.

A snapshot maps entry keys (data object ids for record pools, paths for file
pools) to JSON values. It is stored as *ranges* — runs of consecutive entries,
each an immutable object named by the SHA-256 of its bytes — and a *metarange*
listing the ranges with their first and last keys. Range boundaries are chosen by
the keys themselves (an entry ends a range when its key hashes to a boundary), so
the same entries always chunk the same way and two snapshots that differ in a few
keys share every other range byte for byte. Applying a change therefore rewrites
only the ranges it touches, and diffs skip ranges whose ids are equal.

Layout under a pool: ``meta/ranges/<sha256>`` and ``meta/metaranges/<sha256>``.
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import json
import re
import threading
from collections import OrderedDict
from collections.abc import Hashable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from limno.errors import CorruptError, NotFoundError
from limno.storage import Storage

if TYPE_CHECKING:
    from limno.faults import Fault

__all__ = ["EMPTY", "RangeRef", "Snapshots"]

Entry = tuple[str, dict[str, Any]]

#: expected entries per range (a boundary every ~64 keys) and the hard cap
BOUNDARY_MODULUS = 64
MAX_RANGE = 512


def _encode(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@functools.lru_cache(maxsize=16384)  # a commit re-chunks the ranges it changes
def is_boundary(key: str) -> bool:
    """Whether ``key`` ends a range (a function of the key alone)."""
    h = hashlib.blake2b(key.encode(), digest_size=4).digest()
    return int.from_bytes(h, "big") % BOUNDARY_MODULUS == 0


#: the id of the empty snapshot (its metarange is never stored: it is implied)
EMPTY = _digest(_encode({"ranges": []}))
_RANGE_ID = re.compile(r"[0-9a-f]{64}")  # a SHA-256, so also a safe path segment


@dataclass(frozen=True)
class RangeRef:
    """One range as the metarange lists it."""

    id: str
    first: str
    last: str
    count: int

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "first": self.first, "last": self.last, "count": self.count}


def _metarange(path: str, doc: Any) -> list[RangeRef]:
    """The ranges a stored metarange lists, or CorruptError."""
    rows = doc.get("ranges") if isinstance(doc, dict) else None
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise CorruptError(f"{path}: not a metarange")
    refs = [RangeRef(r.get("id"), r.get("first"), r.get("last"), r.get("count")) for r in rows]
    for ref in refs:
        text = isinstance(ref.id, str) and isinstance(ref.first, str) and isinstance(ref.last, str)
        if not text or not _RANGE_ID.fullmatch(ref.id) or type(ref.count) is not int:
            raise CorruptError(f"{path}: malformed range reference {ref.to_json()!r:.120}")
    return refs


def _range_entries(path: str, doc: Any) -> list[Entry]:
    """The entries of a stored range, or CorruptError."""
    rows = doc.get("entries") if isinstance(doc, dict) else None
    if not isinstance(rows, list):
        raise CorruptError(f"{path}: not a range")
    for row in rows:
        if not (isinstance(row, list) and len(row) == 2 and isinstance(row[0], str)):
            raise CorruptError(f"{path}: malformed entry {row!r:.120}")
        if not isinstance(row[1], dict):
            raise CorruptError(f"{path}: entry {row[0]!r:.80} has no object value")
    return [(k, v) for k, v in rows]


class _LRU:
    """A small thread-safe cache of immutable decoded objects."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._data: OrderedDict[Hashable, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> Any:
        with self._lock:
            if key in self._data:
                self._data.move_to_end(key)
                return self._data[key]
        return None

    def put(self, key: Hashable, value: Any) -> None:
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self._size:
                self._data.popitem(last=False)


_ranges = _LRU(8192)
_metaranges = _LRU(256)
#: per snapshot, its ranges and their last keys (what a seek bisects): rebuilding the
#: list for each lookup would cost O(ranges) where the lookup itself is O(log ranges)
_seek_index = _LRU(256)


class Snapshots:
    """Reads and writes the snapshots of one pool."""

    def __init__(self, storage: Storage, pool_id: str) -> None:
        self.storage = storage
        self.pool_id = pool_id
        # the caches also stand for "already stored" when writing, so they are per
        # store: a copy of a lake (same pool ids) must not skip writes the original made
        self._cached = f"{storage.uri}/{pool_id}"

    def _range_path(self, rid: str) -> str:
        return f"{self.pool_id}/meta/ranges/{rid}"

    def _meta_path(self, mid: str) -> str:
        return f"{self.pool_id}/meta/metaranges/{mid}"

    # -- reading -------------------------------------------------------------
    def _load(self, path: str, expect: str) -> Any:
        try:
            data = self.storage.get(path)
        except NotFoundError as e:
            raise NotFoundError(f"snapshot object {path} is missing") from e
        if _digest(data) != expect:
            raise CorruptError(f"{path}: content does not match its hash")
        try:
            return json.loads(data)
        except (ValueError, RecursionError) as e:
            raise CorruptError(f"{path}: not valid JSON") from e

    def ranges(self, snapshot: str) -> list[RangeRef]:
        """The metarange of a snapshot."""
        if snapshot == EMPTY:
            return []
        cached = _metaranges.get(f"{self._cached}/{snapshot}")
        if cached is not None:
            return list(cached)
        path = self._meta_path(snapshot)
        refs = _metarange(path, self._load(path, snapshot))
        _metaranges.put(f"{self._cached}/{snapshot}", tuple(refs))
        return refs

    def _index(self, snapshot: str) -> tuple[tuple[RangeRef, ...], list[str]]:
        """The snapshot's ranges and their last keys (cached: both are immutable)."""
        key = f"{self._cached}/{snapshot}"
        found = _seek_index.get(key)
        if found is None:
            refs = tuple(self.ranges(snapshot))
            found = (refs, [r.last for r in refs])
            _seek_index.put(key, found)
        return found

    def range_entries(self, rid: str) -> list[Entry]:
        cached = _ranges.get(f"{self._cached}/{rid}")
        if cached is not None:
            return list(cached)
        path = self._range_path(rid)
        entries = _range_entries(path, self._load(path, rid))
        _ranges.put(f"{self._cached}/{rid}", tuple(entries))
        return entries

    def range_texts(self, snapshot: str) -> Iterator[tuple[RangeRef, bytes]]:
        """Each range of the snapshot with its stored bytes (checked against its id),
        not decoded: for a reader that parses many entries in bulk (a snapshot's
        whole scan plan: ``data/plan_bulk.py``), where ``json.loads`` of every entry
        costs more than the rest of the work."""
        for ref in self.ranges(snapshot):
            path = self._range_path(ref.id)
            try:
                data = self.storage.get(path)
            except NotFoundError as e:
                raise NotFoundError(f"snapshot object {path} is missing") from e
            if _digest(data) != ref.id:
                raise CorruptError(f"{path}: content does not match its hash")
            yield ref, data

    def entries(self, snapshot: str) -> Iterator[Entry]:
        """Every entry of the snapshot, in key order."""
        for ref in self.ranges(snapshot):
            yield from self.range_entries(ref.id)

    def entries_from(self, snapshot: str, start: str) -> Iterator[Entry]:
        """The entries with key ``>= start``, in key order, read lazily: the metarange
        says (by bisecting on each range's last key) which range holds ``start``, and
        ranges after it are read only as the caller goes on. Listing a prefix, a page
        from a marker, or skipping past a common prefix (a new call) therefore reads
        ranges in proportion to what it returns, not to the snapshot."""
        refs, lasts = self._index(snapshot)
        i = bisect.bisect_left(lasts, start) if start else 0
        for ref in refs[i:]:
            entries = self.range_entries(ref.id)
            if start and ref.first < start:
                lo = bisect.bisect_left([k for k, _ in entries], start)
                entries = entries[lo:]
            yield from entries

    def read(self, snapshot: str) -> dict[str, dict[str, Any]]:
        return dict(self.entries(snapshot))

    def get(self, snapshot: str, key: str) -> dict[str, Any] | None:
        """One entry, reading only the range that can hold it (two bisections)."""
        refs, lasts = self._index(snapshot)
        i = bisect.bisect_left(lasts, key)
        if i == len(refs) or key < refs[i].first:
            return None
        entries = self.range_entries(refs[i].id)
        j = bisect.bisect_left(entries, (key,))
        if j < len(entries) and entries[j][0] == key:
            return entries[j][1]
        return None

    def count(self, snapshot: str) -> int:
        return sum(r.count for r in self.ranges(snapshot))

    # -- writing -------------------------------------------------------------
    def _write_range(self, entries: list[Entry]) -> RangeRef:
        data = _encode({"entries": [[k, v] for k, v in entries]})
        rid = _digest(data)
        path = self._range_path(rid)
        if _ranges.get(f"{self._cached}/{rid}") is None and not self.storage.exists(path):
            self.storage.put(path, data)
        _ranges.put(f"{self._cached}/{rid}", tuple(entries))
        return RangeRef(rid, entries[0][0], entries[-1][0], len(entries))

    def _write_meta(self, refs: list[RangeRef]) -> str:
        data = _encode({"ranges": [r.to_json() for r in refs]})
        mid = _digest(data)
        if mid == EMPTY:
            return EMPTY
        path = self._meta_path(mid)
        if _metaranges.get(f"{self._cached}/{mid}") is None and not self.storage.exists(path):
            self.storage.put(path, data)
        _metaranges.put(f"{self._cached}/{mid}", tuple(refs))
        return mid

    def _chunk(self, entries: list[Entry], final: bool) -> tuple[list[RangeRef], list[Entry]]:
        """Cut entries at boundaries; the unterminated tail is returned unless final."""
        out: list[RangeRef] = []
        start = 0
        for i, (key, _) in enumerate(entries):
            if is_boundary(key) or i + 1 - start >= MAX_RANGE:
                out.append(self._write_range(entries[start : i + 1]))
                start = i + 1
        rest = entries[start:]
        if final and rest:
            out.append(self._write_range(rest))
            rest = []
        return out, rest

    def write(self, entries: Mapping[str, dict[str, Any]]) -> str:
        """Store a whole snapshot; returns its id."""
        refs, _ = self._chunk(sorted(entries.items()), final=True)
        return self._write_meta(refs)

    def apply(self, base: str, changes: Mapping[str, dict[str, Any] | None]) -> str:
        """A new snapshot: ``base`` with each key set (or removed, for None).

        Only ranges that hold a changed key (plus the neighbour needed to end a
        re-chunked run at a boundary) are read and rewritten; the rest are reused.
        """
        if not changes:
            return base
        refs = self.ranges(base)
        if not refs:
            return self.write({k: v for k, v in changes.items() if v is not None})
        lasts = [r.last for r in refs]
        by_range: dict[int, dict[str, dict[str, Any] | None]] = {}
        for key, value in changes.items():
            i = min(bisect.bisect_left(lasts, key), len(refs) - 1)
            by_range.setdefault(i, {})[key] = value
        out: list[RangeRef] = []
        pending: list[Entry] = []
        for i, ref in enumerate(refs):
            if i not in by_range and not pending:
                out.append(ref)
                continue
            merged = dict(self.range_entries(ref.id))
            for key, value in by_range.get(i, {}).items():
                if value is None:
                    merged.pop(key, None)
                else:
                    merged[key] = value
            pending.extend(sorted(merged.items()))
            done, pending = self._chunk(pending, final=False)
            out.extend(done)
        tail, _ = self._chunk(pending, final=True)
        out.extend(tail)
        return self._write_meta(out)

    # -- comparing -----------------------------------------------------------
    def diff(
        self, old: str, new: str
    ) -> Iterator[tuple[str, dict[str, Any] | None, dict[str, Any] | None]]:
        """``(key, old_value, new_value)`` for every key that differs, in key order.

        Ranges present in both snapshots are skipped without being read.
        """
        if old == new:
            return
        a_refs, b_refs = self.ranges(old), self.ranges(new)
        shared = {r.id for r in a_refs} & {r.id for r in b_refs}
        a = dict(e for r in a_refs if r.id not in shared for e in self.range_entries(r.id))
        b = dict(e for r in b_refs if r.id not in shared for e in self.range_entries(r.id))
        for key in sorted(a.keys() | b.keys()):
            va, vb = a.get(key), b.get(key)
            if va != vb:
                yield key, va, vb

    # -- checking ------------------------------------------------------------
    def verify(self, snapshot: str, verified: set[RangeRef] | None = None) -> Iterator[Fault]:
        """Every range present, hashing to its id, sorted, and agreeing with the metarange.

        Ranges in ``verified`` were checked already (ranges are shared between
        snapshots); ranges that pass every check are added to it.
        """
        from limno.faults import Fault  # verify only: reads never load it

        try:
            refs = self.ranges(snapshot)
        except (NotFoundError, CorruptError) as e:
            yield Fault(self._meta_path(snapshot), str(e))
            return
        prev_last: str | None = None
        for ref in refs:
            if verified is not None and ref in verified:
                prev_last = ref.last
                continue
            path = self._range_path(ref.id)
            try:
                keys = [k for k, _ in _range_entries(path, self._load(path, ref.id))]
            except (NotFoundError, CorruptError) as e:
                yield Fault(path, str(e))
                continue
            faults = []
            if keys != sorted(set(keys)):
                faults.append(Fault(path, "range entries are not strictly sorted"))
            if not keys or keys[0] != ref.first or keys[-1] != ref.last or len(keys) != ref.count:
                faults.append(Fault(path, "range disagrees with its metarange entry"))
            if prev_last is not None and keys and keys[0] <= prev_last:
                faults.append(Fault(path, "range overlaps the previous range"))
            yield from faults
            if verified is not None and not faults:
                verified.add(ref)
            prev_last = ref.last

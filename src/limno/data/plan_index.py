"""A scan plan stored as a table, and read back a cluster at a time.

Planning a snapshot of many objects (:class:`~limno.data.scan_plan.Plan`) decodes
and sorts every object's key range: about a second at 100,000 objects, paid again by
each new process, before the first row of any scan. :func:`plan_table` writes a Plan
as an Arrow table, one row per object it reads, in plan order: the clusters in key
order (each cluster's first row carries its first and last key), each cluster's
members in object order, then the objects holding only keyless rows, then any
objects the plan does not read (``unread``: kept so that the table lists a whole
snapshot). :class:`StoredPlan` is such a table read back as a Plan: it finds the
clusters a scan needs by binary search over cluster bounds decoded on demand, and
decodes only the objects of those clusters. A page of first rows decodes a few
objects out of 100,000, and the same ones the full planner would pick, in the same
order (the table is that planner's output).

Objects are stored as their snapshot entries (JSON, as ``DataObject.to_json``
writes them) with the schema apart, in a dictionary column (a pool's objects
share a few), and a clip range when the object is read only in part.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any, overload

import numpy as np
import pyarrow as pa

from limno.data.keys import PoolKey, SortKey, decode_key, encode_key
from limno.data.numpy_view import fixed_values
from limno.data.objects import DataObject
from limno.data.scan_plan import Plan
from limno.errors import CorruptError

__all__ = ["StoredPlan", "key_text", "plan_table", "row_texts"]

#: the format of the table (its schema metadata ``limno.plan``)
FORMAT = "1"
#: the cluster number of objects holding only keyless rows, and of objects not read
KEYLESS, UNREAD = -1, -2

_SCHEMA = pa.schema(
    [
        ("cluster", pa.int64()),
        ("position", pa.int64()),
        ("stored", pa.int64()),
        ("tail", pa.int8()),
        ("lo", pa.string()),
        ("hi", pa.string()),
        ("clip", pa.string()),
        ("schema", pa.dictionary(pa.int32(), pa.string())),
        ("entry", pa.string()),
    ]
)


def key_text(key: Sequence[Any] | None) -> str:
    """A cluster bound's cell (``lo``, ``hi``)."""
    return json.dumps(encode_key(key), separators=(",", ":"))


def plan_table(
    plan: Plan,
    stored: Mapping[str, int],
    unread: Sequence[DataObject] = (),
    metadata: Mapping[str, str] | None = None,
) -> pa.Table:
    """``plan`` as a table (see the module docstring). ``stored``: each object id's
    place in its snapshot's own order (kept per row, so that a reader can list the
    snapshot's first objects); ``unread``: objects of the snapshot the plan does not
    read; ``metadata``: more schema metadata to keep."""
    rows: list[tuple[int, int, DataObject]] = []  # (cluster, position, object)
    bounds: dict[int, tuple[str, str]] = {}
    for i, cluster in enumerate(plan._clusters):
        bounds[len(rows)] = (key_text(plan._starts[i].key), key_text(plan._ends[i].key))
        rows += [(i, plan._position[id(o)], o) for o in cluster]
    rows += [(KEYLESS, plan._position[id(o)], o) for o in plan._keyless or ()]
    planned = {id(o) for _, _, o in rows}
    # objects the plan leaves out (clipped away from their keyless rows), then others
    rows += [(UNREAD, p, o) for p, o in enumerate(plan.objects) if id(o) not in planned]
    rows += [(UNREAD, -1, o) for o in unread]
    entries, schemas, clips = [], [], []
    for _, _, o in rows:
        schema, entry, clip = row_texts(o)
        schemas.append(schema)
        entries.append(entry)
        clips.append(clip)
    firsts = sorted((p, o.schema_b64) for _, p, o in rows if p >= 0 and o.schema_b64)
    seen = dict.fromkeys(text for _, text in firsts)
    meta = {**(metadata or {}), "limno.plan": FORMAT, "schemas": json.dumps(list(seen))}
    columns = [
        pa.array([r[0] for r in rows], pa.int64()),
        pa.array([r[1] for r in rows], pa.int64()),
        pa.array([stored[o.id] for _, _, o in rows], pa.int64()),
        pa.array([int(r[0] != UNREAD and r[2].keyless_here > 0) for r in rows], pa.int8()),
        pa.array([bounds[j][0] if j in bounds else None for j in range(len(rows))], pa.string()),
        pa.array([bounds[j][1] if j in bounds else None for j in range(len(rows))], pa.string()),
        pa.array(clips, pa.string()),
        pa.array(schemas, pa.string()).dictionary_encode(),
        pa.array(entries, pa.string()),
    ]
    return pa.Table.from_arrays(columns, schema=_SCHEMA.with_metadata(meta))


def row_texts(obj: DataObject) -> tuple[str, str, str | None]:
    """An object's ``schema``, ``entry`` and ``clip`` cells, as :func:`plan_table` stores
    them (also what a plan derived from its parent's stores: see ``plan_derive.py``)."""
    doc = obj.to_json()
    schema = doc.pop("schema")
    clip = None if obj.clip is None else json.dumps([encode_key(c) for c in obj.clip])
    return schema, json.dumps(doc, separators=(",", ":")), clip


def to_ipc(table: pa.Table, batch_rows: int | None = None) -> bytes:
    """``table`` as an Arrow IPC file (zstd), in record batches of ``batch_rows``."""
    sink = pa.BufferOutputStream()
    options = pa.ipc.IpcWriteOptions(compression="zstd")
    with pa.ipc.new_file(sink, table.schema, options=options) as writer:
        writer.write_table(table, max_chunksize=batch_rows)
    return bytes(sink.getvalue().to_pybytes())


def plan_ipc(table: pa.Table, batch_rows: int = 0) -> bytes:
    """A :func:`plan_table` as stored: two Arrow IPC files, the first (its length in 8
    bytes ahead of it) of the columns a reader opens with (one batch), the second of
    the entries, in batches of ``batch_rows`` rows (default :data:`BATCH_ROWS`): a
    reader decompresses the entries of the batches it reads only."""
    batch_rows = batch_rows or BATCH_ROWS
    meta = {**(table.schema.metadata or {}), b"batch_rows": str(batch_rows).encode()}
    table = table.replace_schema_metadata(meta)
    small = to_ipc(table.select(list(_SMALL)))
    large = to_ipc(table.select(list(_LARGE)), batch_rows)
    return len(small).to_bytes(8, "little") + small + large


#: rows of a stored plan's record batches of entries (read a batch at a time)
BATCH_ROWS = 1024
#: the columns read whole when a stored plan is opened; the others, a batch at a time
_SMALL = ("cluster", "position", "stored", "tail", "lo", "hi")
_LARGE = ("clip", "schema", "entry")


class StoredPlan(Plan):
    """A :func:`plan_ipc` read back: a :class:`Plan` of the same clusters, objects
    decoded as the scan reaches them (each once: a scan tells objects apart by
    identity), their entries decompressed a batch of :data:`BATCH_ROWS` rows at a
    time. CorruptError when the data is not what :func:`plan_ipc` writes (KeyError,
    ValueError, TypeError when its metadata is damaged)."""

    def __init__(self, data: bytes | memoryview, key: PoolKey) -> None:
        buffer = pa.py_buffer(data)
        try:
            length = int.from_bytes(buffer.slice(0, 8).to_pybytes(), "little")
            table = pa.ipc.open_file(buffer.slice(8, length)).read_all()
            self._large = pa.ipc.open_file(buffer.slice(8 + length))
        except (pa.ArrowException, ValueError) as e:
            raise CorruptError(f"not a stored scan plan ({e})") from e
        meta = table.schema.metadata or {}
        want = pa.schema([_SCHEMA.field(n) for n in _SMALL]).with_metadata(meta)
        if meta.get(b"limno.plan") != FORMAT.encode() or not table.schema.equals(want):
            raise CorruptError("not a stored scan plan of this version")
        if not self._large.schema.equals(pa.schema([_SCHEMA.field(n) for n in _LARGE]), False):
            raise CorruptError("not a stored scan plan of this version")
        self.key = key
        self._small = table
        self.metadata = {k.decode(): v.decode() for k, v in meta.items()}
        #: the distinct schemas (encoded) of the objects read, first-seen in object order
        self.schemas: list[str] = json.loads(self.metadata["schemas"])
        self._cols = {name: _whole(table.column(name)) for name in _SMALL}
        self._batches: dict[int, pa.RecordBatch] = {}
        self._batch_rows = int(self.metadata["batch_rows"])
        cluster = _ints(self._cols["cluster"])
        keyed = int(np.count_nonzero(cluster >= 0))
        # clusters 0, 1, 2 ... in turn, each on consecutive rows, the others after them
        steps = np.diff(cluster[:keyed], prepend=-1)
        if not bool(np.all((steps == 0) | (steps == 1))):
            raise CorruptError("stored scan plan: clusters out of order")
        #: the first row of each cluster, and the end of the last
        self._offsets = np.append(np.flatnonzero(steps), keyed)
        self._decoded: dict[int, DataObject] = {}
        self._starts = _Bounds(self, "lo")
        self._ends = _Bounds(self, "hi")
        self._keyless = [self.row(int(r)) for r in np.flatnonzero(cluster == KEYLESS)] or None
        tails = np.flatnonzero(_ints(self._cols["tail"], np.int8))
        positions = _ints(self._cols["position"])
        self.tails = [self.row(int(r)) for r in sorted(tails, key=lambda r: positions[r])]
        self.objects = _ByPosition(self, positions)

    def _text(self, column: str, row: int) -> Any:
        if column in self._cols:
            return self._cols[column][row].as_py()
        number, at = divmod(row, self._batch_rows)
        batch = self._batches.get(number)
        if batch is None:
            try:
                batch = self._batches[number] = self._large.get_batch(number)
            except (pa.ArrowException, ValueError) as e:
                raise CorruptError(f"stored scan plan: batch {number} unreadable ({e})") from e
        return batch.column(column)[at].as_py()

    def row(self, row: int) -> DataObject:
        """The object of table row ``row``, decoded once."""
        found = self._decoded.get(row)
        if found is None:
            doc = json.loads(self._text("entry", row))
            doc["schema"] = self._text("schema", row)
            found = DataObject.from_json(doc)
            clip = self._text("clip", row)
            if clip is not None:
                lo, hi = json.loads(clip)
                found = replace(found, clip=(decode_key(lo), decode_key(hi)))
            self._decoded[row] = found
        return found

    def bound(self, column: str, cluster: int) -> SortKey:
        """Cluster ``cluster``'s first (``lo``) or last (``hi``) key."""
        text = self._text(column, int(self._offsets[cluster]))
        if text is None:
            raise CorruptError(f"stored scan plan: cluster {cluster} has no bounds")
        return self.key.sort_key(decode_key(json.loads(text)))

    def _rows(self, i: int) -> range:
        return range(int(self._offsets[i]), int(self._offsets[i + 1]))

    def _cluster(self, i: int) -> list[DataObject]:
        return [self.row(r) for r in self._rows(i)]

    def _members(self, i: int) -> list[tuple[int, DataObject]]:
        return [(self._text("position", r), self.row(r)) for r in self._rows(i)]

    def whole(self) -> pa.Table:
        """The stored table, every column (the entries decompressed whole), without its
        metadata: what a child snapshot's plan is derived from (``plan_derive.py``)."""
        try:
            large = self._large.read_all()
        except (pa.ArrowException, ValueError) as e:
            raise CorruptError(f"stored scan plan: entries unreadable ({e})") from e
        columns = [*(self._small.column(n) for n in _SMALL), *(large.column(n) for n in _LARGE)]
        return pa.Table.from_arrays(columns, schema=_SCHEMA)

    @functools.cached_property
    def stored_order(self) -> np.ndarray:
        """The table's rows by their ``stored`` place, ties (clipped parts) in row order."""
        return np.argsort(_ints(self._cols["stored"]), kind="stable")

    def stored_first(self, n: int) -> list[DataObject]:
        """The first ``n`` objects of the snapshot in its own order (``stored``), whole
        (not clipped), each once."""
        out: dict[int, DataObject] = {}
        for r in self.stored_order:
            if len(out) >= n:
                break
            place = self._text("stored", int(r))
            if place not in out:
                out[place] = replace(self.row(int(r)), clip=None)
        return list(out.values())


def _whole(column: pa.ChunkedArray) -> pa.Array:
    """A column as one array (not copied when it is one already)."""
    return column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()


def _ints(array: pa.Array, kind: type[np.generic] = np.int64) -> np.ndarray:
    """An integer array without nulls as numpy's, zero copy (``to_numpy`` would import
    pandas: half a second of a new process's first page)."""
    if array.null_count:
        raise CorruptError("stored scan plan: a null where a number belongs")
    return fixed_values(array, kind)


class _Bounds(Sequence[SortKey]):
    """Each cluster's first or last key, decoded when a binary search looks at it."""

    def __init__(self, plan: StoredPlan, column: str) -> None:
        self._plan = plan
        self._column = column
        self._cache: dict[int, SortKey] = {}

    def __len__(self) -> int:
        return len(self._plan._offsets) - 1

    @overload
    def __getitem__(self, i: int) -> SortKey: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[SortKey]: ...
    def __getitem__(self, i: int | slice) -> SortKey | Sequence[SortKey]:
        if isinstance(i, slice):
            return [self[j] for j in range(len(self))[i]]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        found = self._cache.get(i)
        if found is None:
            found = self._cache[i] = self._plan.bound(self._column, i)
        return found

    def __iter__(self) -> Iterator[SortKey]:
        return (self[i] for i in range(len(self)))


class _ByPosition(Sequence[DataObject]):
    """The plan's objects in object order, each decoded when asked for."""

    def __init__(self, plan: StoredPlan, positions: np.ndarray) -> None:
        self._plan = plan
        self._positions = positions

    @functools.cached_property
    def _rows(self) -> np.ndarray:
        """Table rows in object order (sorted when first asked: a scan never asks)."""
        read = np.flatnonzero(self._positions >= 0)
        return read[np.argsort(self._positions[read], kind="stable")]

    def __len__(self) -> int:
        return int(np.count_nonzero(self._positions >= 0))

    @overload
    def __getitem__(self, i: int) -> DataObject: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[DataObject]: ...
    def __getitem__(self, i: int | slice) -> DataObject | Sequence[DataObject]:
        if isinstance(i, slice):
            return [self._plan.row(int(r)) for r in self._rows[i]]
        return self._plan.row(int(self._rows[i]))

    def __iter__(self) -> Iterator[DataObject]:
        return (self._plan.row(int(r)) for r in self._rows)

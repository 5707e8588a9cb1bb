"""Metadata as tables: every table limno shows about its own state, built in one place.

SQL's meta tables (``"logs:objects"``, ``"logs:commits"``, ``"logs:branches"``,
``"logs:partitions"``, ``"logs:indexes"``, a file pool's ``"imgs:files"``, ``":pools"``),
``limno status``'s reports and the CLI's listings (``ls``, ``stage``, ``log -f ndjson``)
all come from here, so a column means the same everywhere: keys are rendered as JSON
arrays of the key's fields (``[1]``, ``["/blog"]``), a commit's ``actions`` is a list of
``{op, id}``, and lists stay lists (pyiceberg's ``table/inspect.py`` is the model).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from limno.errors import NotFoundError
from limno.lazy import lazy_module

if TYPE_CHECKING:
    import pyarrow as pa

    from limno.core.commits import Commit
    from limno.core.versioning import DiffEntry
    from limno.data import keys
    from limno.data import objects as data_objects
    from limno.data.objects import DataObject
    from limno.pools import jobs
    from limno.pools.files.pool import FilePool
    from limno.pools.jobs import JobRecord
    from limno.pools.records import indexing, snapshot_cache, snapshot_index, splitting
    from limno.pools.records.partitions import PartitionTree
    from limno.pools.records.pool import RecordPool
    from limno.pools.registry import PoolConfig
else:
    pa = lazy_module("pyarrow")
    # what the tables of objects, partitions and jobs need: the listings of ls and log
    # (Python rows of configs and commits) import none of it
    keys = lazy_module("limno.data.keys")
    data_objects = lazy_module("limno.data.objects")
    jobs = lazy_module("limno.pools.jobs")
    splitting = lazy_module("limno.pools.records.splitting")
    indexing = lazy_module("limno.pools.records.indexing")
    snapshot_cache = lazy_module("limno.pools.records.snapshot_cache")
    snapshot_index = lazy_module("limno.pools.records.snapshot_index")

__all__ = [
    "FILE_POOL_TABLES",
    "POOL_TABLES",
    "Rows",
    "branches_rows",
    "branches_table",
    "commits_rows",
    "commits_table",
    "diff_rows",
    "diff_table",
    "file_pool_table",
    "files_table",
    "ingest_table",
    "jobs_table",
    "key_text",
    "objects_rows",
    "objects_table",
    "partitions_table",
    "pool_table",
    "pools_rows",
    "pools_table",
    "status_tables",
    "total_rows",
]

#: the meta tables of a pool (``"<pool>[@ref]:<name>"`` in SQL)
POOL_TABLES = ("objects", "commits", "branches", "partitions", "indexes")
#: the meta tables of a file pool: its paths at the ref (a branch: with its staged
#: changes) instead of objects, partitions and indexes, which it has none of
FILE_POOL_TABLES = ("files", "commits", "branches")


@dataclass(frozen=True)
class Rows:
    """A meta table as Python rows, before it is an Arrow table.

    The listings of commands that read only journals (``limno ls``, ``limno log``)
    are built this way, so that printing them as text or JSON loads no Arrow;
    :meth:`table` is the same table in Arrow, for SQL and the binary formats.
    """

    names: tuple[str, ...]
    rows: list[dict[str, Any]]
    #: the columns' Arrow types, in the order of ``names`` (made only for :meth:`table`)
    types: Callable[[], list[pa.DataType]]
    #: columns of free-form JSON values (a commit's meta): objects in the rows (and so
    #: in ``-f json``), JSON text in the Arrow table, whose columns have one type
    json_columns: tuple[str, ...] = ()

    def table(self) -> pa.Table:
        """Built a column at a time (``Table.from_pylist`` takes about 7x as long)."""
        columns = {}
        for name, kind in zip(self.names, self.types(), strict=True):
            values = [r.get(name) for r in self.rows]
            if name in self.json_columns:
                values = [_json_text(v) for v in values]
            columns[name] = pa.array(values, kind)
        return pa.table(columns)


def _json_text(value: Any) -> str | None:
    return None if value is None else json.dumps(value, sort_keys=True)


def key_text(key: Sequence[Any] | None) -> str | None:
    """A key as JSON text: ``[1]``, ``["eu", 3]`` (None for no key)."""
    return None if key is None else json.dumps(keys.encode_key(key), ensure_ascii=False)


def _strings(n: int) -> Callable[[], list[pa.DataType]]:
    return lambda: [pa.string()] * n


_POOLS = ("name", "id", "kind", "key", "created")


def pools_rows(configs: Iterable[PoolConfig]) -> Rows:
    """``":pools"`` and ``limno ls``: name, id, kind, key, created."""
    rows = [
        {"name": p.name, "id": p.id, "kind": p.kind, "key": p.key, "created": p.created}
        for p in configs
    ]
    return Rows(_POOLS, rows, _strings(len(_POOLS)))


def pools_table(configs: Iterable[PoolConfig]) -> pa.Table:
    return pools_rows(configs).table()


_OBJECTS = ("id", "rows", "size", "min_key", "max_key", "keyless", "partitions", "created")


def _object_types() -> list[pa.DataType]:
    text, count = pa.string(), pa.int64()
    return [text, count, count, text, text, count, pa.list_(text), text]


def objects_rows(objs: Sequence[DataObject], tree: PartitionTree | None = None) -> Rows:
    """``"pool:objects"``, ``limno stage`` and ``status``'s files: one row per object.

    ``partitions`` are the leaf partitions referencing the object (from ``tree``, or
    as the object records them where there is no tree: a staged object).
    """
    rows = [
        {
            "id": o.id,
            "rows": o.rows,
            "size": o.size,
            "min_key": key_text(o.min_key),
            "max_key": key_text(o.max_key),
            "keyless": o.keyless,
            "partitions": [p.id for p in tree.leaves_of(o)]
            if tree is not None
            else list(o.partitions),
            "created": o.created,
        }
        for o in objs
    ]
    return Rows(_OBJECTS, rows, _object_types)


def objects_table(objs: Sequence[DataObject], tree: PartitionTree | None = None) -> pa.Table:
    return objects_rows(objs, tree).table()


_COMMITS = ("id", "parents", "author", "date", "message", "meta", "retries", "actions")


def _commit_types() -> list[pa.DataType]:
    action = pa.struct([("op", pa.string()), ("id", pa.string())])
    text = pa.string()
    return [text, pa.list_(text), text, text, text, text, pa.int64(), pa.list_(action)]


def commits_rows(commits: Sequence[Commit]) -> Rows:
    """``"pool:commits"`` and ``limno log -f ndjson``: newest first, actions as a list,
    meta an object (JSON text in the Arrow table)."""
    rows = [
        {
            "id": c.id,
            "parents": list(c.parents),
            "author": c.author,
            "date": c.date,
            "message": c.message,
            "meta": dict(c.meta),
            "retries": c.retries,
            "actions": [{"op": a.op, "id": a.key} for a in c.actions],
        }
        for c in commits
    ]
    return Rows(_COMMITS, rows, _commit_types, json_columns=("meta",))


def commits_table(commits: Sequence[Commit]) -> pa.Table:
    return commits_rows(commits).table()


_DIFF = ("change", "id", "rows", "size", "min_key", "max_key")


def _diff_types() -> list[pa.DataType]:
    text, count = pa.string(), pa.int64()
    return [text, text, count, count, text, text]


def diff_rows(entries: Sequence[DiffEntry]) -> Rows:
    """``limno diff``: one row per changed object (change, id, rows, size, keys); an
    index's entry (``~index/<field>``, created or dropped) has no rows, size or keys."""
    rows = []
    for e in entries:
        row: dict[str, Any] = dict.fromkeys(_DIFF)
        row.update(change=e.change, id=e.key)
        if not e.key.startswith("~index/"):
            o = data_objects.DataObject.from_json(e.new if e.new is not None else e.old or {})
            row.update(
                rows=o.rows, size=o.size, min_key=key_text(o.min_key), max_key=key_text(o.max_key)
            )
        rows.append(row)
    return Rows(_DIFF, rows, _diff_types)


def diff_table(entries: Sequence[DiffEntry]) -> pa.Table:
    return diff_rows(entries).table()


_BRANCHES = ("kind", "name", "commit", "protected")


def _branch_types() -> list[pa.DataType]:
    return [pa.string(), pa.string(), pa.string(), pa.bool_()]


def branches_rows(
    branches: Mapping[str, str], tags: Mapping[str, str], protected: Iterable[str] = ()
) -> Rows:
    """``"pool:branches"`` and ``limno ls POOL``: kind, name, commit, and whether the
    branch is protected (only merges move it; false for tags, which never move)."""
    rules = set(protected)
    rows = [
        {"kind": "branch", "name": n, "commit": c, "protected": n in rules}
        for n, c in branches.items()
    ]
    rows += [{"kind": "tag", "name": n, "commit": c, "protected": False} for n, c in tags.items()]
    return Rows(_BRANCHES, rows, _branch_types)


def branches_table(
    branches: Mapping[str, str], tags: Mapping[str, str], protected: Iterable[str] = ()
) -> pa.Table:
    return branches_rows(branches, tags, protected).table()


def partitions_table(pool: RecordPool, ref: str | None = None) -> pa.Table:
    """``"pool:partitions"``: id, parent, range, leaf, depth, estimated rows, objects.

    Made once per snapshot and process: it sums over every object of the snapshot."""
    snapshot = pool.versioned.commits.get(pool.resolve(ref)).snapshot

    def make() -> pa.Table:
        found = snapshot_cache.decoded(pool.versioned, pool.key, snapshot)
        return _partitions_table(pool, found.objects, found.tree)

    def stored() -> pa.Table:  # a big snapshot's: stored once (see snapshot_index.py)
        return snapshot_index.partitions(pool.versioned, snapshot, make)

    return snapshot_cache.memo(pool.versioned, pool.key, snapshot, "partitions", stored)


def _partitions_table(
    pool: RecordPool, objects: Sequence[DataObject], tree: PartitionTree
) -> pa.Table:
    rows = splitting.leaf_rows(pool, tree, objects)
    counts: dict[str, int] = {}
    for o in objects:
        for leaf in tree.leaves_of(o):
            counts[leaf.id] = counts.get(leaf.id, 0) + 1
    parts = sorted(tree.parts.values(), key=lambda p: (tree.depth(p.id), p.id))

    def total(pid: str, table: Mapping[str, float]) -> float:
        return sum(table.get(leaf.id, 0) for leaf in tree.leaves_under(pid))

    return pa.table(
        {
            "id": pa.array([p.id for p in parts], pa.string()),
            "parent": pa.array([p.parent for p in parts], pa.string()),
            "lo": pa.array([key_text(p.lo) for p in parts], pa.string()),
            "hi": pa.array([key_text(p.hi) for p in parts], pa.string()),
            "leaf": pa.array([p.leaf for p in parts], pa.bool_()),
            "depth": pa.array([tree.depth(p.id) for p in parts], pa.int64()),
            "rows": pa.array([round(total(p.id, rows)) for p in parts], pa.int64()),
            "objects": pa.array(
                [int(total(p.id, {k: float(v) for k, v in counts.items()})) for p in parts],
                pa.int64(),
            ),
        }
    )


def pool_table(pool: RecordPool, name: str, ref: str | None = None) -> pa.Table:
    """The meta table ``name`` (one of :data:`POOL_TABLES`) of a pool at ``ref``."""
    if name == "objects":
        objs, tree = pool.snapshot(ref)
        return objects_table(objs, tree)
    if name == "commits":
        return commits_table(pool.log(ref))
    if name == "branches":
        return branches_table(pool.branches(), pool.tags(), pool.protected())
    if name == "partitions":
        return partitions_table(pool, ref)
    if name == "indexes":
        return indexing.indexes_table(pool, ref)
    raise NotFoundError(f"no meta table {name!r} (one of {', '.join(POOL_TABLES)})")


def files_table(pool: FilePool, ref: str | None = None) -> pa.Table:
    """``"imgs:files"``: one row per path at ``ref``, in path order (on a branch, with its
    staged changes, as ``limno fs ls -r`` lists them): path, size, etag, content type,
    mtime, user metadata (a JSON object), and the blob (``object``) or imported URI
    (``uri``) holding the bytes."""
    entries = list(pool.iter_list(ref))

    def text(values: Iterable[str | None]) -> pa.Array:
        return pa.array(list(values), pa.string())

    return pa.table(
        {
            "path": text(e.path for e in entries),
            "size": pa.array([e.size for e in entries], pa.int64()),
            "etag": text(e.etag for e in entries),
            "content_type": text(e.content_type for e in entries),
            "mtime": text(e.mtime for e in entries),
            "metadata": text(json.dumps(dict(e.metadata), sort_keys=True) for e in entries),
            "object": text(e.object for e in entries),
            "uri": text(e.uri for e in entries),
        }
    )


def file_pool_table(pool: FilePool, name: str, ref: str | None = None) -> pa.Table:
    """The meta table ``name`` (one of :data:`FILE_POOL_TABLES`) of a file pool at ``ref``."""
    if name == "files":
        return files_table(pool, ref)
    if name == "commits":
        return commits_table(pool.log(ref))
    if name == "branches":
        return branches_table(pool.branches(), pool.tags(), pool.protected())
    raise NotFoundError(
        f"no meta table {name!r} of file pool {pool.name!r} (one of {', '.join(FILE_POOL_TABLES)})"
    )


def jobs_table(records: Sequence[JobRecord]) -> pa.Table:
    """Tracked jobs (compactions, splits, vacuums), as ``limno status`` lists them."""
    return pa.table(
        {
            "id": pa.array([r.id for r in records], pa.string()),
            "kind": pa.array([r.kind for r in records], pa.string()),
            "state": pa.array([r.state for r in records], pa.string()),
            "partition": pa.array([r.partition for r in records], pa.string()),
            "inputs": pa.array([r.inputs for r in records], pa.int64()),
            "rows_in": pa.array([r.rows_in for r in records], pa.int64()),
            "rows_out": pa.array([r.rows_out for r in records], pa.int64()),
            "seconds": pa.array([round(r.seconds, 3) for r in records], pa.float64()),
            "commit": pa.array([r.commit for r in records], pa.string()),
            "error": pa.array([r.error for r in records], pa.string()),
            "created": pa.array([r.created for r in records], pa.string()),
        }
    )


def ingest_table(pool: RecordPool, ref: str | None, limit: int) -> pa.Table:
    """Ingest jobs: the pool's load commits (adds only, one parent), newest first."""
    rows = []
    for c in pool.log(ref, limit=limit * 4):
        if len(c.parents) != 1 or not c.actions or "compaction" in c.meta or "split" in c.meta:
            continue
        if any(a.op != "add" for a in c.actions):
            continue
        rows.append(c)
        if len(rows) >= limit:
            break
    return pa.table(
        {
            "commit": pa.array([c.id for c in rows], pa.string()),
            "date": pa.array([c.date for c in rows], pa.string()),
            "author": pa.array([c.author for c in rows], pa.string()),
            "objects": pa.array([len(c.actions) for c in rows], pa.int64()),
            "rows": pa.array(
                [sum(int(a.value.get("rows", 0)) for a in c.actions) for c in rows], pa.int64()
            ),
            "retries": pa.array([c.retries for c in rows], pa.int64()),
            "message": pa.array([c.message for c in rows], pa.string()),
        }
    )


#: schema metadata of a report cut to its first rows: how many rows it has in all
TOTAL_ROWS = b"total_rows"


def total_rows(report: pa.Table) -> int:
    """How many rows a report of :func:`status_tables` has in all (``rows`` may have
    cut it to its first ones)."""
    total = (report.schema.metadata or {}).get(TOTAL_ROWS)
    return report.num_rows if total is None else int(total)


def _first(report: pa.Table, rows: int | None, total: int | None = None) -> pa.Table:
    if rows is None:
        return report
    meta = {TOTAL_ROWS: str(report.num_rows if total is None else total).encode()}
    return report.slice(0, rows).replace_schema_metadata(meta)


#: a report cut to its first ``rows`` (None: whole), its full count in the metadata
cut_report = _first


def status_tables(
    pool: RecordPool, ref: str | None = None, limit: int = 20, rows: int | None = None
) -> dict[str, pa.Table]:
    """The reports of ``limno status`` (Sleeper's): partitions, files, compaction jobs,
    other jobs, ingest jobs. With ``rows``, the partitions and files reports hold their
    first ``rows`` rows only (:func:`total_rows` tells how many there are): what a page
    shows, made in time proportional to it, not to the snapshot's objects."""
    records = jobs.JobTracker(pool.storage, pool.id).jobs()
    # a big snapshot's first objects come from its stored plan, not from decoding all
    window = None if rows is None else snapshot_index.first_objects(pool, ref, max(rows, 0))
    if window is None:
        objs, tree = pool.snapshot(ref)
        window = (objs if rows is None else objs[: max(rows, 0)]), len(objs), tree
    shown, count, tree = window
    return {
        "partitions": _first(partitions_table(pool, ref), rows),
        "files": _first(objects_table(shown, tree), rows, count),
        "compaction_jobs": jobs_table([r for r in records if r.kind == "compaction"][-limit:]),
        "other_jobs": jobs_table([r for r in records if r.kind != "compaction"][-limit:]),
        "ingest_jobs": ingest_table(pool, ref, limit),
    }

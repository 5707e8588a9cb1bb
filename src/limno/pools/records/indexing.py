"""Search indexes of record pools: creating, keeping, using and checking them.

An index is an entry of the pool's snapshot, ``~index/<field>`` (its value: the
field, the index's id, when it was made; :class:`~limno.data.indexes.IndexSpec`).
``limno index create`` is a commit whose action *creates* that entry (the Zed lake's
``AddIndex``), ``limno index drop`` one that deletes it (``DeleteIndex``). So an index
is versioned with the data: a branch made before it has none, a merge brings it
along, ``revert`` undoes it, and time travel reads the indexes of the commit it reads.

**The invariant.** Every committed snapshot has, for each index it holds, the sidecar
of each of its objects (:mod:`limno.data.indexes`). The commit protocol keeps it:
before each attempt of a commit or merge commit lands, :func:`prepare` (the pool's
:attr:`limno.core.versioning.Versioned.prepare`) looks at the parent the commit is
about to land on and writes what is missing: the sidecars of the objects the commit
adds, for every index of the result, and the sidecars of every object, for an index
the commit adds. Every writer gets it without knowing: loads, staged commits,
compactions, ``delete --where`` rewrites, splits, reverts, cherry-picks, merges and
Spark's writes (the sidecars are written on the driver). A concurrent ``index create``
and load meet in the rebase: whichever lands second sees the other's change in its
new parent and writes what that needs. Fast-forwards and resets move a branch to a
snapshot that already keeps it.

**Using an index.** :func:`search` (``limno get --field F VALUE...``) opens only the
objects whose sidecar holds a value, and in them only those row groups; an object
without a sidecar is read whole, so the answer never depends on the index. It is the
answer of a scan filtered on the field, in the scan's order, with the pool's iterators
applied as a scan applies them: with ``dedup`` or aggregations the keys found are read
again whole (:meth:`RecordPool.get`: a newer version of a row may no longer match),
and an aggregated field is never looked up by index (a sum may equal a value no row
holds). SQL (:func:`prune`): a ``WHERE f = c`` or ``f IN (...)`` on an indexed
top-level field leaves out the objects whose sidecar rules every constant out, on the
local engine, for pools without ``dedup`` or aggregations (where leaving out an object
that holds a key's newer version would change the answer).

Vacuum frees an object's sidecars with the object, and the sidecars of an index no
retained commit holds anymore (:mod:`limno.pools.vacuum`); ``verify`` reports a head's
missing sidecars (:func:`check_sidecars`).
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from limno.core.commits import Action, Commit, now_iso
from limno.core.committed import _LRU
from limno.errors import AlreadyExistsError, InvalidInputError, NotFoundError
from limno.ksuid import ksuid
from limno.lazy import lazy_module

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.compute as pc

    from limno.core.versioning import Versioned
    from limno.data import indexes, iterators
    from limno.data import objects as data_objects
    from limno.data import schema as unification
    from limno.data.indexes import IndexSpec
    from limno.data.keys import PoolKey
    from limno.data.objects import DataObject
    from limno.data.sql_ranges import Condition
    from limno.faults import Fault
    from limno.pools.records import key_bounds, snapshot_cache
    from limno.pools.records.pool import RecordPool
else:
    # a pool's history (``limno log``) and its lookups by key import none of it
    pa = lazy_module("pyarrow")
    pc = lazy_module("pyarrow.compute")
    indexes = lazy_module("limno.data.indexes")
    iterators = lazy_module("limno.data.iterators")
    data_objects = lazy_module("limno.data.objects")
    unification = lazy_module("limno.data.schema")
    key_bounds = lazy_module("limno.pools.records.key_bounds")
    snapshot_cache = lazy_module("limno.pools.records.snapshot_cache")

__all__ = [
    "Indexing",
    "check_sidecars",
    "create",
    "drop",
    "indexes_table",
    "prepare",
    "prune",
    "search",
    "specs_at",
]

#: threads probing sidecars, reading row groups and writing sidecars (I/O on S3)
WORKERS = 8
#: with dedup or aggregations, more distinct keys than this are found by a full scan
#: (filtered) rather than a lookup of each key
MAX_KEY_LOOKUPS = 50_000
#: what to do about a missing sidecar
REBUILD = "drop the index and create it again: limno index drop/create -p POOL FIELD"

#: (store, pool, object, index) whose sidecar this process wrote or saw: a commit's
#: retries (and the next commit re-adding a retargeted object) ask no store again
_known = _LRU(1 << 16)


class Indexing:
    """Mixin of :class:`~limno.pools.records.pool.RecordPool`: its search indexes."""

    def create_index(
        self,
        fields: Sequence[str],
        branch: str = "main",
        message: str = "",
        author: str | None = None,
    ) -> Commit:
        """Index ``fields`` on ``branch``: one commit (AddIndex); every object of the
        branch gets its sidecars first, and every later commit keeps them."""
        return create(cast("RecordPool", self), fields, branch, message, author)

    def drop_index(
        self,
        fields: Sequence[str],
        branch: str = "main",
        message: str = "",
        author: str | None = None,
    ) -> Commit:
        """Drop the indexes on ``fields`` from ``branch``: one commit (DeleteIndex)."""
        return drop(cast("RecordPool", self), fields, branch, message, author)

    def indexes(self, ref: str | None = None) -> list[IndexSpec]:
        """The search indexes of a ref, by field."""
        pool = cast("RecordPool", self)
        return sorted(specs_at(pool, pool.resolve(ref)).values(), key=lambda s: s.field)

    def search(
        self,
        field: str,
        values: Sequence[Any],
        ref: str | None = None,
        *,
        as_of: dt.datetime | None = None,
    ) -> pa.Table:
        """The records whose ``field`` equals one of ``values`` (see :func:`search`)."""
        return search(cast("RecordPool", self), field, values, ref, as_of=as_of)

    def prepare_commit(self, parent: Commit, actions: Sequence[Action]) -> None:
        """The pool's :attr:`~limno.core.versioning.Versioned.prepare`: :func:`prepare`."""
        prepare(cast("RecordPool", self), parent, actions)


# -- the indexes of a snapshot ---------------------------------------------------------


def specs_at(pool: RecordPool, commit_id: str) -> dict[str, IndexSpec]:
    """The indexes of commit ``commit_id``'s snapshot, by field."""
    return _specs(pool.versioned, pool.versioned.commits.get(commit_id).snapshot)


def _specs(versioned: Versioned, snapshot: str) -> dict[str, IndexSpec]:
    """Read only the ranges that can hold index entries (usually the last one, which
    a commit has just read or written)."""
    out: dict[str, IndexSpec] = {}
    snapshots = versioned.snapshots
    for ref in snapshots.ranges(snapshot):
        if ref.last < indexes.INDEX_PREFIX or ref.first >= indexes.INDEX_END:
            continue
        for key, value in snapshots.range_entries(ref.id):
            if indexes.is_index_key(key):
                spec = indexes.IndexSpec.from_json(value)
                out[spec.field] = spec
    return out


def _fields(fields: Sequence[str]) -> list[str]:
    if isinstance(fields, str):
        fields = [fields]
    out = list(dict.fromkeys(indexes.check_field(f) for f in fields))
    if not out:
        raise InvalidInputError("name at least one field to index")
    return out


# -- AddIndex, DeleteIndex ---------------------------------------------------------------


def create(
    pool: RecordPool,
    fields: Sequence[str],
    branch: str = "main",
    message: str = "",
    author: str | None = None,
) -> Commit:
    """Commit new indexes on ``fields``; AlreadyExistsError for an indexed field (two
    racing creates: the second conflicts). The sidecars are written by :func:`prepare`
    while the commit lands, under a lease that keeps vacuum off them."""
    wanted = _fields(fields)
    have = specs_at(pool, pool.versioned.head(branch))
    taken = [f for f in wanted if f in have]
    if taken:
        raise AlreadyExistsError(
            f"{pool.name}@{branch} already has an index on {', '.join(taken)}"
            " (drop it first to build it again)"
        )
    with pool.versioned.writing("index") as since:
        specs = [indexes.IndexSpec(f, ksuid(), now_iso()) for f in wanted]
        return pool.versioned.commit(
            branch,
            [Action("create", s.key, s.to_json()) for s in specs],
            message=message or f"create index on {', '.join(wanted)}",
            author=author,
            meta={"index": {"create": wanted}},
            since=since,
        )


def drop(
    pool: RecordPool,
    fields: Sequence[str],
    branch: str = "main",
    message: str = "",
    author: str | None = None,
) -> Commit:
    """Commit the removal of the indexes on ``fields``; NotFoundError for a field that
    has none. The sidecars stay while a retained commit holds the index (vacuum)."""
    wanted = _fields(fields)
    have = specs_at(pool, pool.versioned.head(branch))
    missing = [f for f in wanted if f not in have]
    if missing:
        raise NotFoundError(f"{pool.name}@{branch} has no index on {', '.join(missing)}")
    return pool.versioned.commit(
        branch,
        [Action("delete", have[f].key, have[f].to_json()) for f in wanted],
        message=message or f"drop index on {', '.join(wanted)}",
        author=author,
        meta={"index": {"drop": wanted}},
    )


def prepare(pool: RecordPool, parent: Commit, actions: Sequence[Action]) -> None:
    """Write the sidecars the snapshot of ``parent`` with ``actions`` applied needs and
    ``parent``'s has not (see the module docstring)."""
    before = _specs(pool.versioned, parent.snapshot)
    after = dict(before)
    final: dict[str, Mapping[str, Any] | None] = {}
    for a in actions:
        if indexes.is_index_key(a.key):
            field = a.key[len(indexes.INDEX_PREFIX) :]
            if a.op == "delete":
                after.pop(field, None)
            else:
                after[field] = indexes.IndexSpec.from_json(a.value)
        elif not a.key.startswith("~"):  # an object (partitions are ~partition/...)
            final[a.key] = None if a.op == "delete" else a.value
    if not after:
        return
    added = [data_objects.DataObject.from_json(v) for v in final.values() if v is not None]
    fresh = [s for s in after.values() if before.get(s.field) != s]
    kept = [s for s in after.values() if before.get(s.field) == s]
    pairs = [(o, s) for s in kept for o in added]
    if fresh:
        decoded = snapshot_cache.decoded(pool.versioned, pool.key, parent.snapshot)
        objs = {o.id: o for o in decoded.objects if o.id not in final}
        objs.update((o.id, o) for o in added)
        pairs += [(o, s) for s in fresh for o in objs.values()]
    _ensure(pool, pairs)


def _ensure(pool: RecordPool, pairs: Sequence[tuple[DataObject, IndexSpec]]) -> None:
    """Write each pair's sidecar unless it exists."""
    storage = pool.storage

    def memo(o: DataObject, s: IndexSpec) -> str:
        return f"{storage.uri}/{pool.id}/{o.id}/{s.id}"

    todo = [(o, s) for o, s in pairs if _known.get(memo(o, s)) is None]
    if not todo:
        return

    def one(pair: tuple[DataObject, IndexSpec]) -> None:
        o, s = pair
        if not storage.exists(indexes.sidecar_path(pool.id, o.id, s.id)):
            indexes.build_sidecar(storage, pool.id, o, s)
        _known.put(memo(o, s), True)

    with pool.reading([o for o, _ in todo]):
        _each(one, todo)


def _each(fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
    """``fn`` of each item, in order; on the process's index threads when there are
    several (started once: a lookup's probes are each a fraction of a millisecond on a
    local lake, less than starting threads would cost)."""
    if len(items) < 2:
        return [fn(i) for i in items]
    return list(_threads().map(fn, items))


_executor: Any = None
_executor_lock = threading.Lock()


def _threads() -> Any:
    """The process's pool of :data:`WORKERS` threads for index I/O."""
    global _executor
    with _executor_lock:
        if _executor is None:
            import concurrent.futures  # lookups by key never get here

            _executor = concurrent.futures.ThreadPoolExecutor(WORKERS, "limno-index")
        return _executor


# -- lookups -------------------------------------------------------------------------------


def search(
    pool: RecordPool,
    field: str,
    values: Sequence[Any],
    ref: str | None = None,
    *,
    as_of: dt.datetime | None = None,
) -> pa.Table:
    """Records of ``ref`` whose ``field`` equals one of ``values`` (text is read in the
    field's type): a scan's answer filtered on the field, in the scan's order and
    columns, iterators applied; only objects and row groups that may hold a value are
    read when the field is indexed (else every object is, as by the scan)."""
    field = indexes.check_field(field)
    if isinstance(values, str | bytes):
        values = [values]
    if not values:
        raise InvalidInputError("name at least one value to look up")
    commit = pool.resolve(ref, as_of)
    objs = pool.objects(commit)
    target = unification.unify(o.schema for o in objs if o.schema_b64)
    wanted = _parse_values(pool, field, list(values), objs)
    spec = specs_at(pool, commit).get(field)
    if not objs or not wanted:
        return target.empty_table()
    spec_iterators = pool.iterators
    if spec_iterators and (spec_iterators.user is not None or _aggregated(spec_iterators, field)):
        # a user iterator may change any value but the key: its output is filtered
        return _filtered_scan(pool, commit, field, wanted, target)
    with pool.reading(objs):
        found = _candidates(pool, objs, spec, field, wanted, target)
    if not found.num_rows or not spec_iterators:
        return found
    if not iterators.needs_grouping(spec_iterators):  # age-off alone: row by row
        return _conformed(list(pool.iterated([found])), target)
    keyed = pool.key.keyed_mask(found)
    keys = pool.key.key_table(found.filter(keyed))
    distinct = list(dict.fromkeys(pool.key.row_key(keys, i) for i in range(keys.num_rows)))
    if len(distinct) > MAX_KEY_LOOKUPS:
        return _filtered_scan(pool, commit, field, wanted, target)
    latest = pool.get([k for k in distinct if k is not None], commit) if distinct else None
    tables = [] if latest is None else [indexes.matching(latest, field, wanted)]
    keyless = found.filter(pc.invert(keyed))
    tables += list(pool.iterated([keyless])) if keyless.num_rows else []
    return _conformed(tables, target)


def _parse_values(
    pool: RecordPool, field: str, values: list[Any], objs: Sequence[DataObject]
) -> list[Any]:
    """Text values parsed into the field's type over ``objs`` (as key bounds are);
    others as they are; nulls dropped (a null equals nothing)."""
    from limno.data.keys import PoolKey

    fkey = PoolKey.parse(field)
    unified = functools.partial(key_bounds.unified_key_types, fkey)
    typ = snapshot_cache.memo_key_types(fkey, objs, unified)[0]
    out = []
    for v in values:
        if isinstance(v, str) and not pa.types.is_string(typ):
            v = fkey.parse_bound(json.dumps([v]), [typ])[0]
        if v is not None:
            out.append(v)
    return out


def _aggregated(spec: Any, field: str) -> bool:
    """Whether an aggregation of ``spec`` touches ``field`` (or a field inside it)."""
    return any(
        a.field == field or a.field.startswith(field + ".") or field.startswith(a.field + ".")
        for a in spec.aggregations
    )


def _candidates(
    pool: RecordPool,
    objs: Sequence[DataObject],
    spec: IndexSpec | None,
    field: str,
    wanted: list[Any],
    target: pa.Schema,
) -> pa.Table:
    """The matching rows of ``objs`` (each clipped to what the snapshot references), in
    key order, ties in write order (the scan's order), before iterators."""
    storage, pool_id = pool.storage, pool.id
    ids = list(dict.fromkeys(o.id for o in objs))
    if spec is None:
        groups: dict[str, list[int] | None] = dict.fromkeys(ids)
    else:
        found = _each(lambda i: indexes.probe(storage, pool_id, i, spec.id, wanted), ids)
        groups = dict(zip(ids, found, strict=True))
    todo = [o for o in objs if groups[o.id] != []]

    def read(o: DataObject) -> pa.Table:
        rows = indexes.read_groups(storage, pool_id, o, groups[o.id])
        return _clipped(indexes.matching(rows, field, wanted), pool.key, o)

    found_rows = _conformed(_each(read, todo), target)
    if found_rows.num_rows > 1:
        found_rows = found_rows.take(pool.key.sort_indices(found_rows))
    return found_rows


def _clipped(table: pa.Table, key: PoolKey, obj: DataObject) -> pa.Table:
    """The rows of ``table`` (read from ``obj``) within its clip range, if it has one:
    keyed rows in ``[lo, hi)``, keyless rows only where the range reaches the end."""
    if obj.clip is None or not table.num_rows:
        return table
    lo, hi = obj.clip
    low = None if lo is None else key.sort_key(lo)
    high = None if hi is None else key.sort_key(hi)
    keys = key.key_table(table)
    keep = []
    for i in range(table.num_rows):
        row = key.row_key(keys, i)
        if row is None:
            keep.append(hi is None)
            continue
        at = key.sort_key(row)
        keep.append((low is None or not at < low) and (high is None or at < high))
    return table.filter(pa.array(keep, pa.bool_()))


def _conformed(tables: Sequence[pa.Table], target: pa.Schema) -> pa.Table:
    tables = [t for t in tables if t.num_rows]
    if not tables:
        return target.empty_table()
    schema = unification.unify([target, *(t.schema for t in tables)])
    return pa.concat_tables([unification.conform(t, schema) for t in tables])


def _filtered_scan(
    pool: RecordPool, commit: str, field: str, wanted: list[Any], target: pa.Schema
) -> pa.Table:
    """The whole scan, filtered: where no index can tell (see :func:`search`)."""
    tables = [indexes.matching(t, field, wanted) for t in pool.iter_scan(commit)]
    return _conformed(tables, target)


# -- SQL --------------------------------------------------------------------------------------


def prune(
    pool: RecordPool,
    objs: Sequence[DataObject],
    commit: str,
    conditions_of: Callable[[str], Sequence[Condition]],
    schema: pa.Schema | None = None,
) -> list[DataObject]:
    """``objs`` (of commit ``commit``) less those whose sidecars rule out a statement's
    equality conditions on indexed fields (``conditions_of(column)``: those of
    :func:`limno.data.sql_ranges.key_conditions`). ``schema``: the objects' unified
    schema, the column types SQL compares (a field it holds in another kind than
    :func:`_exact_in_sql` is not pruned on)."""
    if not objs or iterators.needs_grouping(pool.iterators):
        return list(objs)
    tests: list[tuple[IndexSpec, list[Any]]] = []
    for spec in specs_at(pool, commit).values():
        if "." in spec.field:
            continue  # SQL names a nested field otherwise: no pruning
        if schema is not None and not _exact_in_sql(schema, spec.field):
            continue
        for op, value in conditions_of(spec.field):
            if op == "=":
                tests.append((spec, [value]))
            elif op == "in":
                tests.append((spec, list(value)))
    if not tests:
        return list(objs)
    storage, pool_id = pool.storage, pool.id

    def may_hold(oid: str) -> bool:
        return all(
            indexes.probe(storage, pool_id, oid, spec.id, vals, sql=True) != []
            for spec, vals in tests
        )

    ids = list(dict.fromkeys(o.id for o in objs))
    keep = {i for i, ok in zip(ids, _each(may_hold, ids), strict=True) if ok}
    return [o for o in objs if o.id in keep]


def _exact_in_sql(schema: pa.Schema, field: str) -> bool:
    """Whether SQL compares ``field`` of the unified ``schema`` exactly as the sidecars
    of each object hold it: text, integers, decimals of up to 38 digits, dates and
    naive times. Not a double (an integer or decimal column unified with a float one,
    a decimal wider than DuckDB's 38 digits): a constant may then equal a rounded
    value no sidecar holds; nor a time with a zone (DuckDB reads a naive constant in
    its session's zone)."""
    if schema.get_field_index(field) < 0:
        return False
    typ = schema.field(field).type
    if pa.types.is_dictionary(typ):
        typ = typ.value_type
    return bool(
        pa.types.is_string(typ)
        or pa.types.is_large_string(typ)
        or pa.types.is_integer(typ)
        or pa.types.is_decimal128(typ)
        or pa.types.is_date(typ)
        or (pa.types.is_timestamp(typ) and typ.tz is None)
    )


# -- verify, meta table ------------------------------------------------------------------------


def check_sidecars(
    pool: RecordPool, commit: str, label: str, seen: set[tuple[str, str]]
) -> Iterator[Fault]:
    """A fault for each object of commit ``commit`` (a head: ``label``) without the
    sidecar of an index of its snapshot (``seen``: pairs checked already)."""
    from limno.data.objects import data_path
    from limno.faults import Fault

    specs = specs_at(pool, commit)
    if not specs:
        return
    objs, _ = pool.snapshot(commit)
    for spec in specs.values():
        for o in objs:
            if (o.id, spec.id) in seen:
                continue
            seen.add((o.id, spec.id))
            path = indexes.sidecar_path(pool.id, o.id, spec.id)
            if pool.storage.exists(path) or not pool.storage.exists(data_path(pool.id, o.id)):
                continue  # a missing object is a fault of its own
            yield Fault(
                path,
                f"sidecar of the index on {spec.field!r} is missing for object {o.id}"
                f" ({label} holds both)",
                REBUILD,
            )


def indexes_table(pool: RecordPool, ref: str | None = None) -> pa.Table:
    """``"pool:indexes"`` and ``limno index ls``: field, id, created."""
    specs = sorted(specs_at(pool, pool.resolve(ref)).values(), key=lambda s: s.field)
    return pa.table(
        {
            "field": pa.array([s.field for s in specs], pa.string()),
            "id": pa.array([s.id for s in specs], pa.string()),
            "created": pa.array([s.created for s in specs], pa.string()),
        }
    )

"""What a record pool reads: scans (merge-on-read over a snapshot's objects, clipped
to its partitions, through the pool's iterators), point lookups, whole tables and one
object's rows, each reading only objects vacuum cannot take meanwhile (:meth:`reading`).
A mixin of :class:`~limno.pools.records.pool.RecordPool`, apart from its writes."""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, cast

from limno.data.keys import PoolKey, lookup_keys
from limno.errors import DamagedObjectError, InvalidInputError, NotFoundError, damaged_object
from limno.lazy import lazy_module
from limno.pools.branching import check_limit
from limno.pools.registry import PoolConfig
from limno.storage import Storage

if TYPE_CHECKING:
    import pyarrow as pa

    from limno.core import gc
    from limno.data import objects as data_objects
    from limno.data import parquet, predicates, scan
    from limno.data import schema as unification
    from limno.data.objects import DataObject
    from limno.pools.records import key_bounds, key_ranges, snapshot_cache
    from limno.pools.records.pool import RecordPool
else:
    pa = lazy_module("pyarrow")
    gc = lazy_module("limno.core.gc")
    parquet = lazy_module("limno.data.parquet")
    predicates = lazy_module("limno.data.predicates")  # DuckDB
    scan = lazy_module("limno.data.scan")
    data_objects = lazy_module("limno.data.objects")
    unification = lazy_module("limno.data.schema")
    key_bounds = lazy_module("limno.pools.records.key_bounds")
    key_ranges = lazy_module("limno.pools.records.key_ranges")
    snapshot_cache = lazy_module("limno.pools.records.snapshot_cache")

__all__ = ["RecordReads", "concat_tables"]


class RecordReads:
    """Mixin of :class:`~limno.pools.records.pool.RecordPool`: its reads of data."""

    #: set by RecordPool
    storage: Storage
    config: PoolConfig
    key: PoolKey
    #: RecordPool's: the version graph's view of a ref
    objects: Callable[..., list[DataObject]]
    scan_view: Callable[..., snapshot_cache.ScanView]
    iterated: Callable[..., Iterator[pa.Table]]

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def id(self) -> str:
        return self.config.id

    def key_types(self, objs: Sequence[DataObject]) -> list[pa.DataType]:
        """The unified Arrow type of each key field over ``objs`` (string when none)."""
        unified = functools.partial(key_bounds.unified_key_types, self.key)
        return snapshot_cache.memo_key_types(self.key, objs, unified)

    def iter_scan(
        self,
        ref: str | None = None,
        start: Any = None,
        end: Any = None,
        order: str = "asc",
        limit: int | None = None,
        as_of: dt.datetime | None = None,
        *,
        ranges: Iterable[tuple[Any, Any]] | None = None,
    ) -> Iterator[pa.Table]:
        """Stream a sorted scan: ``start`` inclusive, ``end`` exclusive, in the pool's order;
        or, instead of them, the union of ``ranges`` (``(from, to)`` pairs; see
        :mod:`~limno.pools.records.key_ranges`) in one pass.

        A bound is a value of the first key field, a tuple or list of values of the
        key's first fields (a full key, or a prefix: ``("acme",)`` of key
        ``tenant,ts``), or text parsed into the key's types (``"acme,5"``); a tuple or
        list of no value or of more values than the key has fields is an
        InvalidInputError.
        """
        if order not in ("asc", "desc"):
            raise InvalidInputError(f"order must be asc or desc, not {order!r}")
        check_limit(limit)
        view = self.scan_view(ref, as_of)
        yield from self.scan_objects(
            view.objects, start, end, order, limit, ranges=ranges, view=view
        )

    def scan_objects(
        self,
        objs: Sequence[DataObject],
        start: Any = None,
        end: Any = None,
        order: str = "asc",
        limit: int | None = None,
        *,
        ranges: Iterable[tuple[Any, Any]] | None = None,
        view: snapshot_cache.ScanView | None = None,
    ) -> Iterator[pa.Table]:
        """Stream a sorted scan of ``objs`` (some of a snapshot's :meth:`objects`: those an
        engine cannot read itself), iterators applied; bounds, ``order``, ``limit`` and
        ``ranges`` as in :meth:`iter_scan`. Every chunk has the columns of the objects'
        unified schema, in its order, so a stream's chunks (and two scans of one snapshot)
        line up. ``view``: the :meth:`scan_view` that ``objs`` are the objects of (its
        plan and schema are made once per snapshot, not once per scan)."""
        if ranges is not None:
            pool = cast("RecordPool", self)
            yield from key_ranges.scan(pool, objs, ranges, start, end, order, limit)
            return
        if view is None:
            view = snapshot_cache.ScanView(objs, self.key, self.key_types)
        types = view.key_types
        lo = key_bounds.key_bound(self.key, start, types)
        hi = key_bounds.key_bound(self.key, end, types)

        target = view.schema
        iterating = bool(self.config.settings.iterators)
        with self.reading(objs):
            raw = scan.scan(
                self.storage,
                self.id,
                view.plan,
                self.key,
                lo,
                hi,
                order,
                None if iterating else limit,
            )
            left = limit
            for t in self.iterated(raw, reverse=order == "desc"):
                if not t.schema.equals(target):
                    t = unification.conform(t, unification.unify([target, t.schema]))
                if iterating and left is not None:
                    t = t.slice(0, left)
                    left -= t.num_rows
                if t.num_rows:
                    yield t
                if left == 0:
                    return

    def is_removed(self, object_id: str) -> bool:
        """Whether vacuum removed the object ``object_id`` on purpose (a tombstone)."""
        return self.storage.exists(gc.expired_path(self.id, object_id))

    @contextlib.contextmanager
    def reading(self, objs: Sequence[DataObject] = ()) -> Iterator[None]:
        """Errors of reading this pool's objects, told apart: a missing object that
        vacuum removed on purpose says so, and a damaged one is named with the pool."""
        try:
            yield
        except DamagedObjectError as e:
            if e.pool != self.id:
                raise
            raise damaged_object(e.path, self.name, e.reason) from e
        except NotFoundError as e:
            # the object the error names (one stat), not every object of the snapshot
            # (nor a look at each: a stored plan's are decoded only when looked at)
            named = re.findall(rf"{re.escape(self.id)}/data/([^/\s]+)\.parquet", str(e))
            if not named:
                named = [o.id for o in objs if o.id in str(e)] or [o.id for o in objs]
            for oid in dict.fromkeys(named):
                if self.storage.exists(gc.expired_path(self.id, oid)):
                    raise NotFoundError(
                        f"object {oid} was removed by vacuum: this commit is outside the"
                        " retention window"
                    ) from None
            raise

    def scan(
        self,
        ref: str | None = None,
        start: Any = None,
        end: Any = None,
        order: str = "asc",
        limit: int | None = None,
        as_of: dt.datetime | None = None,
        *,
        ranges: Iterable[tuple[Any, Any]] | None = None,
    ) -> pa.Table:
        """The whole of a scan as one table (see :meth:`iter_scan`).

        Columns come in the order of the snapshot's unified schema whatever the
        bounds and order, so two scans of one snapshot always line up.
        """
        return concat_tables(
            list(self.iter_scan(ref, start, end, order, limit, as_of, ranges=ranges))
        )

    def get(
        self, keys: Sequence[Any], ref: str | None = None, *, as_of: dt.datetime | None = None
    ) -> pa.Table:
        """Point lookup: every record whose key equals one of ``keys`` (in ``ref``, a
        branch as it was at ``as_of``)."""
        view = self.scan_view(ref, as_of)
        objs, types = view.objects, view.key_types
        parsed = []
        key_bound, width = key_bounds.key_bound, len(self.key.fields)  # once, not per key
        for k in lookup_keys(keys):
            bound = key_bound(self.key, k, types, "key")
            if bound is None:  # a null key matches nothing, as NULL = NULL is not true
                continue
            if len(bound) != width:
                raise InvalidInputError(f"get needs a full key of {len(self.key.fields)} field(s)")
            parsed.append(bound)

        with self.reading(objs):
            found = scan.lookup(self.storage, self.id, view.plan, self.key, parsed)
        if found.num_rows and self.config.settings.iterators:
            found = concat_tables(list(self.iterated([found])))
        return found

    def read_object(self, obj: DataObject) -> pa.Table:
        """An object's rows (only its clip range when it is clipped), in key order."""

        if obj.clip is not None:
            return concat_tables(list(scan.scan(self.storage, self.id, [obj], self.key)))
        return parquet.open_parquet(self.storage, data_objects.data_path(self.id, obj.id)).read()

    def table(self, ref: str | None = None, as_of: dt.datetime | None = None) -> pa.Table:
        """Every record of a snapshot (unsorted across objects), schemas unified."""
        objs = self.objects(ref, as_of)
        if self.config.settings.iterators or any(o.clip is not None for o in objs):
            return concat_tables(list(self.scan_objects(objs)))
        with self.reading(objs):
            return concat_tables(
                [self.read_object(o) for o in objs], [o.schema for o in objs if o.schema_b64]
            )


def concat_tables(tables: Sequence[pa.Table], schemas: Sequence[pa.Schema] = ()) -> pa.Table:
    """Concatenate ``tables`` under one schema: ``schemas`` first fix the column order."""

    tables = [t for t in tables if t.num_columns or t.num_rows]
    if not tables:
        return pa.table({})
    schema = unification.unify([*schemas, *(t.schema for t in tables)])
    return pa.concat_tables([unification.conform(t, schema) for t in tables])

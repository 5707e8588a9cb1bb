"""Record pools: the Python API behind ``load``, ``scan``, ``get``, ``delete``, ``revert``...

A :class:`RecordPool` binds a pool config to the versioning core. Writes put data
objects first (sorted by the pool key, cut at the target size), then make exactly
one commit; reads resolve a ref to a commit, take the object list of its snapshot
and merge-on-read. Every method returns Arrow tables (or model objects); the CLI
and the server only format them.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

from limno.core.commits import Action, Commit
from limno.core.versioning import Versioned
from limno.data import iterators
from limno.data.keys import PoolKey
from limno.errors import InvalidInputError, NotFoundError
from limno.lazy import lazy_module
from limno.pools.branching import Branching, check_limit
from limno.pools.records.indexing import Indexing
from limno.pools.records.maintenance import Maintenance
from limno.pools.records.reads import RecordReads, concat_tables
from limno.pools.registry import PoolConfig, PoolRegistry
from limno.storage import Storage

if TYPE_CHECKING:
    import pyarrow as pa

    from limno.core import gc
    from limno.data import ingest, parquet, predicates, scan, writer
    from limno.data import objects as data_objects
    from limno.data import schema as unification
    from limno.data.iterators import IteratorSpec
    from limno.data.objects import DataObject
    from limno.data.typed_schema import TypedSchema
    from limno.pools.records import (
        compaction,
        key_bounds,
        key_ranges,
        snapshot_cache,
        snapshot_index,
    )
    from limno.pools.records.partitions import PartitionTree
else:
    pa = lazy_module("pyarrow")
    ingest = lazy_module("limno.data.ingest")
    parquet = lazy_module("limno.data.parquet")
    predicates = lazy_module("limno.data.predicates")  # DuckDB
    scan = lazy_module("limno.data.scan")
    unification = lazy_module("limno.data.schema")
    writer = lazy_module("limno.data.writer")
    # what reads and writes of data objects need: commands that read only the history
    # (``limno log``) import none of it
    gc = lazy_module("limno.core.gc")
    data_objects = lazy_module("limno.data.objects")
    compaction = lazy_module("limno.pools.records.compaction")
    key_bounds = lazy_module("limno.pools.records.key_bounds")
    key_ranges = lazy_module("limno.pools.records.key_ranges")
    snapshot_cache = lazy_module("limno.pools.records.snapshot_cache")
    snapshot_index = lazy_module("limno.pools.records.snapshot_index")

__all__ = ["RecordPool"]

#: memory used to sort a load before spilling sorted runs to disk
SORT_MEMORY = 512 * 1024 * 1024

Source: TypeAlias = "str | pa.Table | pa.RecordBatch"


class RecordPool(Branching, Indexing, Maintenance, RecordReads):
    """A record pool of a lake (git operations come from :class:`Branching`, search
    indexes from :class:`Indexing`, compaction, splits and vacuum from
    :class:`Maintenance`, scans and lookups from :class:`RecordReads`)."""

    def __init__(self, storage: Storage, config: PoolConfig, registry: PoolRegistry) -> None:
        if config.kind != "records" or not config.key:
            raise InvalidInputError(f"pool {config.name!r} is not a record pool")
        self.storage = storage
        self.config = config
        self.registry = registry
        self.key = PoolKey.parse(config.key)
        self.versioned = Versioned(storage, config.id, config.name)
        self.versioned.hooks.specs = self.hook_specs()
        self.versioned.prepare = self.prepare_commit  # search indexes' sidecars
        self.sort_memory = SORT_MEMORY

    @functools.cached_property
    def schema(self) -> TypedSchema | None:
        """The pool's typed schema, if it has one; parsed on first use, since checking its
        types loads Arrow, which commands that only read history never need."""
        from limno.data.typed_schema import TypedSchema

        return TypedSchema.from_json(self.config.schema) if self.config.schema else None

    # -- reading the version graph -----------------------------------------------
    def resolve(self, ref: str | None = None, as_of: dt.datetime | None = None) -> str:
        """The commit id a ref (default ``main``) names."""
        return self.versioned.resolve(ref, as_of).commit

    def snapshot(
        self, ref: str | None = None, as_of: dt.datetime | None = None
    ) -> tuple[list[DataObject], PartitionTree]:
        """A ref's stored object entries (in write order) and its partition tree."""
        commit = self.versioned.commits.get(self.resolve(ref, as_of))
        found = snapshot_cache.decoded(self.versioned, self.key, commit.snapshot)
        return list(found.objects), found.tree

    def objects(self, ref: str | None = None, as_of: dt.datetime | None = None) -> list[DataObject]:
        """The data objects to read for a ref, in write order (the tie order of scans).

        An object only partly referenced (see partitions.py) appears *clipped* to the
        key ranges still referenced, once per contiguous range.
        """
        objs, tree = self.snapshot(ref, as_of)
        return _clipped(objs, tree)

    def scan_view(
        self, ref: str | None = None, as_of: dt.datetime | None = None
    ) -> snapshot_cache.ScanView:
        """A ref's :meth:`objects` with their scan plan, unified schema and key types,
        worked out once per snapshot and process (see ``snapshot_cache.ScanView``), or
        read from the snapshot's stored plan (``snapshot_index.py``), or derived from an
        ancestor snapshot's."""
        commit = self.versioned.commits.get(self.resolve(ref, as_of))
        snapshot = commit.snapshot

        found = functools.partial(snapshot_index.ancestors, self.versioned, commit)
        parent = functools.cache(found)  # walked once, as far as needed

        def planned() -> tuple[snapshot_cache.ScanView, Sequence[DataObject]]:
            found = snapshot_cache.decoded(self.versioned, self.key, snapshot)
            objs = _clipped(found.objects, found.tree)
            return snapshot_cache.ScanView(objs, self.key, self.key_types), found.objects

        def make() -> snapshot_cache.ScanView:
            return snapshot_index.view(
                self.versioned, self.key, snapshot, self.key_types, planned, parent, _clipped
            )

        return snapshot_cache.scan_view(self.versioned, self.key, snapshot, make)

    def partitions(self, ref: str | None = None) -> PartitionTree:
        return self.snapshot(ref)[1]

    @property
    def iterators(self) -> IteratorSpec:
        """The pool's iterator spec (falsy when it has none)."""
        return self.config.settings.iterators

    def iterated(self, tables: Iterable[pa.Table], reverse: bool = False) -> Iterator[pa.Table]:
        """Apply the pool's iterators to a stream in key order (identity without any)."""
        if not self.config.settings.iterators:
            yield from tables
            return

        yield from iterators.apply(tables, self.key, self.iterators, reverse=reverse)

    def log(
        self,
        ref: str | None = None,
        limit: int | None = None,
        first_parent: bool = False,
        *,
        as_of: dt.datetime | None = None,
    ) -> list[Commit]:
        """Commits reachable from ``ref`` (a branch: where it pointed at ``as_of``), newest
        first."""
        check_limit(limit)
        out: list[Commit] = []
        head = self.resolve(ref, as_of)
        for commit in self.versioned.commits.log([head], first_parent=first_parent):
            if limit is not None and len(out) >= limit:
                break
            out.append(commit)
        return out

    # -- writing -------------------------------------------------------------------
    def write(
        self,
        sources: Iterable[Source],
        fmt: str | None = None,
        branch: str = "main",
        *,
        check_keys: bool = True,
    ) -> list[DataObject]:
        """Write data objects without committing them: sorted, cut at the target size
        and at ``branch``'s leaf partitions' bounds, so that each object lies in one
        leaf (and references it), as Sleeper's ingest writes one file per leaf. With
        ``check_keys``, keys that cannot sort with the branch's are refused
        (:meth:`check_key_types`) and nothing is left written."""

        current, tree = self.snapshot(branch)
        origins: dict[tuple[int, str], str] = {}
        objs = writer.sort_and_write(
            self.storage,
            self.id,
            ingest.checked_batches(sources, fmt, self.key, self.schema, origins),
            self.key,
            self.config.target_size,
            memory_limit=self.sort_memory,
            bounds=tree.lower_bounds(),
            is_removed=self.is_removed,
        )
        if not objs:
            raise InvalidInputError("no records to load")
        if check_keys:
            try:
                self.check_key_types(current, objs, origins)
            except InvalidInputError:
                writer.delete_objects(self.storage, self.id, objs)
                raise
        return tree.referencing(objs)

    def check_key_types(
        self,
        old: Sequence[DataObject],
        new: Sequence[DataObject],
        origins: Mapping[tuple[int, str], str] | None = None,
    ) -> None:
        """Refuse keys that cannot sort with the pool's (see :func:`ingest.check_key_types`)."""
        ingest.check_key_types(self.key, old, new, origins)

    def load(
        self,
        sources: Iterable[Source],
        fmt: str | None = None,
        branch: str = "main",
        message: str = "",
        author: str | None = None,
        meta: Mapping[str, Any] | None = None,
        *,
        expect_head: str | None = None,
    ) -> Commit:
        """Write and commit in one step: one commit per call. With ``expect_head`` the
        commit lands only on that head (PreconditionFailedError if the branch moved)."""
        self.versioned.writable_head(branch)  # a protected branch: refused before any write
        with self.versioned.writing("load") as since:
            objs = self.write(sources, fmt, branch)
            return self.commit_objects(
                objs, branch, message, author, meta, since, expect_head=expect_head
            )

    def commit_objects(
        self,
        objs: Sequence[DataObject],
        branch: str = "main",
        message: str = "",
        author: str | None = None,
        meta: Mapping[str, Any] | None = None,
        since: int | None = None,
        *,
        expect_head: str | None = None,
    ) -> Commit:
        """One commit adding objects already written; ``since`` is the gc ticket read
        before they were written. Their key types are checked against the snapshot the
        commit lands on (again on a rebase). ``expect_head``: on that head only, no
        rebase (PreconditionFailedError if the branch moved)."""
        rows = sum(o.rows for o in objs)
        actions = [Action("add", o.id, o.to_json()) for o in objs]
        commit = self.versioned.commit(
            branch,
            actions,
            message=message or f"load {rows} record(s)",
            author=author,
            meta=meta,
            since=since,
            validate=self.keys_fit(objs),
            expected_head=expect_head,
            rebase=expect_head is None,
        )
        parent = self.versioned.commits.get(commit.parents[0])
        snapshot_cache.remember_added(
            self.versioned, self.key, parent.snapshot, commit.snapshot, actions
        )
        return commit

    def keys_fit(self, objs: Sequence[DataObject]) -> Callable[[Commit], None]:
        """A commit check: ``objs``' key types still sort with those of the snapshot the
        commit lands on (a concurrent first load may have brought another type)."""
        checked: set[str] = set()

        def check(parent: Commit) -> None:
            if parent.snapshot in checked:
                return
            current = snapshot_cache.decoded(self.versioned, self.key, parent.snapshot).objects
            self.check_key_types(current, objs)
            checked.add(parent.snapshot)

        return check

    def add(
        self, sources: Iterable[Source], fmt: str | None = None, branch: str = "main"
    ) -> list[DataObject]:
        """Write objects and stage them on ``branch`` (see :meth:`commit`)."""
        self.versioned.writable_head(branch)
        with self.versioned.writing("add") as since:
            objs = self.write(sources, fmt, branch)
            for o in objs:
                self.versioned.stage(branch, o.id, o.to_json(), since)
        return objs

    def staged(self, branch: str = "main") -> list[DataObject]:
        return [
            data_objects.DataObject.from_json(v) for v in self.versioned.staged(branch).values()
        ]

    def unstage(self, ids: Sequence[str], branch: str = "main") -> None:
        staged = self.versioned.staged(branch)
        missing = [i for i in ids if i not in staged]
        if missing:
            raise NotFoundError(f"not staged on {branch!r}: {', '.join(missing)}")
        self.versioned.unstage(branch, ids)

    def commit(
        self,
        ids: Sequence[str] | None = None,
        branch: str = "main",
        message: str = "",
        author: str | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> Commit:
        """Commit staged objects (all, or ``ids``) in one commit."""
        staged = self.versioned.staged(branch)
        objs = [
            data_objects.DataObject.from_json(v) for k, v in staged.items() if not ids or k in ids
        ]
        return self.versioned.commit_staged(
            branch,
            ids,
            message=message or "commit staged objects",
            author=author,
            meta=meta,
            validate=self.keys_fit(objs),
        )

    def delete_objects(
        self, ids: Sequence[str], branch: str = "main", message: str = "", author: str | None = None
    ) -> Commit:
        """Remove whole objects from the branch (bytes stay until vacuum)."""
        head = self.versioned.writable_head(branch)
        entries = self.versioned.entries_at(head)
        missing = [i for i in ids if i not in entries]
        if missing:
            raise NotFoundError(f"no such object on {self.name}@{branch}: {', '.join(missing)}")
        actions = [Action("delete", i, entries[i]) for i in dict.fromkeys(ids)]
        return self.versioned.commit(
            branch, actions, message=message or f"delete {len(actions)} object(s)", author=author
        )

    def delete_where(
        self, predicate: str, branch: str = "main", message: str = "", author: str | None = None
    ) -> Commit:
        """Delete the rows matching a SQL predicate, rewriting only the objects that hold some."""

        with self.versioned.writing("delete") as since:
            head = self.versioned.writable_head(branch)
            actions: list[Action] = []
            deleted = 0
            pieces: dict[str, list[DataObject]] = {}
            for piece in self.objects(head):
                pieces.setdefault(piece.id, []).append(piece)
            snapshot, tree = self.snapshot(head)
            stored = {o.id: o for o in snapshot}
            for oid, parts in pieces.items():
                obj = stored[oid]
                with self.reading(parts):
                    rows = concat_tables([self.read_object(p) for p in parts])
                kept, matched = predicates.filter_rows(rows, predicate)
                if not matched:
                    continue
                deleted += matched
                actions.append(Action("delete", obj.id, obj.to_json()))
                if kept.num_rows:
                    written = writer.write_sorted(
                        self.storage,
                        self.id,
                        [kept],
                        self.key,
                        self.config.target_size,
                        bounds=tree.lower_bounds(),
                        is_removed=self.is_removed,
                    )
                    for new in tree.referencing(written):
                        extra = {**dict(new.extra), "order": list(compaction.order_key(obj))}
                        new = dataclasses.replace(
                            new, replaces=data_objects.lineage([obj]), extra=extra
                        )
                        actions.append(Action("add", new.id, new.to_json()))
            if not deleted:
                raise InvalidInputError(f"delete: no rows match {predicate!r}; nothing changed")
            return self.versioned.commit(
                branch,
                actions,
                message=message or f"delete {deleted} row(s) where {predicate}",
                author=author,
                meta={"deleted_rows": deleted},
                expected_head=head,
                since=since,
            )

    def revert(
        self, commit_id: str, branch: str = "main", message: str = "", author: str | None = None
    ) -> Commit:
        """A new commit that undoes ``commit_id``'s actions on ``branch``."""
        target = self.versioned.commits.get(self.resolve(commit_id))
        if len(target.parents) != 1:
            raise InvalidInputError(f"cannot revert {target.id}: it is a root or a merge commit")
        if target.id not in self.versioned.commits.ancestors(self.versioned.head(branch)):
            raise InvalidInputError(f"commit {target.id} is not on branch {branch!r}")
        actions = [a.inverse() for a in reversed(target.actions)]
        return self.versioned.commit(
            branch,
            actions,
            message=message or f"revert {target.id}",
            author=author,
            meta={"reverts": target.id},
            since=None,  # it adds objects back from history: check that they still exist
        )


def _clipped(objs: Sequence[DataObject], tree: PartitionTree) -> list[DataObject]:
    """``objs`` as a snapshot with partition tree ``tree`` references them: an object
    only partly referenced appears clipped, once per contiguous range."""
    if not tree.stored:
        return list(objs)
    out: list[DataObject] = []
    for o in objs:
        runs = tree.clip(o)
        if runs is None:
            out.append(o)
        else:
            out.extend(dataclasses.replace(o, clip=run) for run in runs)
    return out

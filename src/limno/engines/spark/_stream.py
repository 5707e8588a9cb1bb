"""``spark.readStream.format("limno")``: a branch's new commits as a stream.

::

    df = (spark.readStream.format("limno").option("lake", "/data/lake")
          .option("startingCommit", "latest").load("orders@main"))
    df.writeStream.format("console").start()

A Python Data Source stream reader (PySpark 4): an offset is a commit of the
branch, ``{"commit": id}``; each micro-batch covers the first-parent commits from the
last offset (excluded) to the branch's head, and returns, for each, the records it
added: the records of the objects it references that its parent did not. A commit
that also removed objects (a compaction, a delete, an overwrite, a merge that
rewrote objects) gives the multiset difference of the records it added minus those
it removed, so a compaction or a partition split gives nothing. Records are the
stored ones: a pool's iterators are not applied (a stream of changes, not of merged
views).

Options: ``lake`` (else ``LIMNO_LAKE`` or the default), the ref as ``load("pool@branch")``
or as the options ``pool`` and ``branch`` (default ``main``), and ``startingCommit``:
``earliest`` (the default: every commit of the branch, from its first), ``latest``
(only commits after the query starts), or a commit id, tag or ``branch~N``; Spark's
checkpoint supersedes it on a restart. The schema is the branch head's unified
schema when the query starts (give ``.schema(...)`` for a pool still empty or whose
schema is to grow): later records are conformed to it. A branch reset to a history
without the last offset fails the query.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition

from limno.data import scan as _scan
from limno.data.objects import DataObject
from limno.data.schema import conform, unify
from limno.errors import InvalidInputError
from limno.lake import Lake

from ._session import LakeSpec

if TYPE_CHECKING:
    from limno.data.keys import PoolKey
    from limno.pools.records.pool import RecordPool

__all__ = ["EARLIEST", "LimnoStreamReader"]

#: the offset before a branch's first commit
EARLIEST = ""


class _Change(InputPartition):
    """Records one commit added: ``added`` objects, less ``removed`` ones' records."""

    def __init__(self, commit: str, added: list[str], removed: list[str]) -> None:
        super().__init__(commit)
        self.commit = commit
        self.added = added
        self.removed = removed


def conformed_batches(t: pa.Table, target: pa.Schema, out: pa.Schema) -> Iterator[pa.RecordBatch]:
    """``t`` under ``target`` (columns it lacks as nulls), cast to Spark's Arrow types."""
    t = conform(t, unify([target, t.schema])).select(target.names)
    yield from t.cast(out, safe=False).to_batches(max_chunksize=65536)


class LimnoStreamReader(DataSourceStreamReader):
    """The stream of ``pool``'s ``branch`` (see the module docstring). Picklable: it
    holds what Spark's Python workers need to open the lake, not the pool."""

    def __init__(
        self, pool: RecordPool, branch: str, starting: str, target: pa.Schema, out: pa.Schema
    ) -> None:
        self.spec = LakeSpec.of(pool.storage)
        self.pool_id = pool.id
        self.branch = branch
        self.key: PoolKey = pool.key
        self.target = target
        self.out = out
        self.start = self._starting(pool, starting)

    def _pool(self) -> RecordPool:
        return Lake(self.spec.open()).pool(self.pool_id)

    def _starting(self, pool: RecordPool, starting: str) -> str:
        if starting == "earliest":
            return EARLIEST
        if starting == "latest":
            return pool.resolve(self.branch)
        return pool.resolve(starting)

    def initialOffset(self) -> dict[str, Any]:
        return {"commit": self.start}

    def latestOffset(self) -> dict[str, Any]:
        return {"commit": self._pool().resolve(self.branch)}

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        pool = self._pool()
        out: list[InputPartition] = []
        chain = _chain(pool, self.branch, str(start["commit"]), str(end["commit"]))
        for commit, parent in chain:
            after = pool.objects(commit)
            before = pool.objects(parent) if parent else []
            old = {_ident(o) for o in before}
            new = {_ident(o) for o in after}
            added = [json.dumps(o.to_json()) for o in after if _ident(o) not in old]
            removed = [json.dumps(o.to_json()) for o in before if _ident(o) not in new]
            if removed:  # a rewrite: its records are compared as a whole
                out.append(_Change(commit, added, removed))
            else:  # only additions: a task per object
                out += [_Change(commit, [a], []) for a in added]
        return out

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, _Change)
        store = self.spec.open()
        added = self._records(store, partition.added)
        if partition.removed and added is not None:
            removed = self._records(store, partition.removed)
            if removed is not None:
                added = _except_all(added, removed)
        if added is not None and added.num_rows:
            yield from conformed_batches(added, self.target, self.out)

    def _records(self, store: Any, objects: list[str]) -> pa.Table | None:
        tables = []
        for text in objects:
            obj = DataObject.from_json(json.loads(text))
            tables += list(_scan.scan(store, self.pool_id, [obj], self.key))
        if not tables:
            return None
        schema = unify(t.schema for t in tables)
        return pa.concat_tables([conform(t, schema) for t in tables])

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to release: offsets are commits, which stay."""


def _ident(o: DataObject) -> tuple[str, str]:
    """An object entry as a snapshot lists it (a clipped object once per range)."""
    return o.id, json.dumps(o.to_json(), sort_keys=True)


def _chain(pool: RecordPool, branch: str, start: str, end: str) -> list[tuple[str, str | None]]:
    """``(commit, first parent)`` from after ``start`` to ``end``, oldest first."""
    out: list[tuple[str, str | None]] = []
    cur: str | None = end
    while cur and cur != start:
        parents = pool.versioned.commits.get(cur).parents
        parent = parents[0] if parents else None
        out.append((cur, parent))
        cur = parent
    if start != EARLIEST and cur != start:
        raise InvalidInputError(
            f"stream of {pool.name}@{branch}: commit {start} is no longer in the branch's "
            "history (was it reset?)"
        )
    out.reverse()
    return out


def _except_all(added: pa.Table, removed: pa.Table) -> pa.Table:
    """The records of ``added`` less those of ``removed``, as multisets."""
    import duckdb

    schema = unify([added.schema, removed.schema])
    a, r = conform(added, schema), conform(removed, schema)
    con = duckdb.connect()
    try:
        con.register("a", a)
        con.register("r", r)
        got = con.sql("SELECT * FROM a EXCEPT ALL SELECT * FROM r").to_arrow_table()
    finally:
        con.close()
    assert got is not None, "a SELECT has a result"
    return conform(got, unify([schema, got.schema]))

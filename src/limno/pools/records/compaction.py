"""LSM compaction: strategies that pick jobs, and the job that runs one.

A compaction job merges the rows that some objects hold *in one leaf partition*
into sorted, non-overlapping objects of the pool's target size, applying the
pool's iterators, and commits once: the inputs lose their reference to the leaf
(an input referenced by no other leaf is deleted) and the outputs are added. The
commit's deletes carry the inputs' exact entries, so if anything else rewrote an
input meanwhile the commit conflicts instead of duplicating rows. A job killed
before its commit leaves only unreferenced output objects, which vacuum reclaims.

Strategies (per leaf partition; configurable per pool in its settings):

* ``size-ratio`` (default; Sleeper's SizeRatioCompactionStrategy with its
  defaults ``ratio=3``, ``batch=12``): the leaf's objects sorted by size,
  smallest first; take the first ``batch`` and, while the largest of them is more
  than ``1/ratio`` of their total (``ratio * largest > total``), drop the largest;
  two or more left form a job; repeat with the rest. Objects of similar size are
  merged, a large object is not rewritten for a small one.
* ``basic``: every ``batch`` objects of a leaf (oldest first) form a job, once a
  leaf has at least ``batch`` objects.
* ``overlap`` (Zed's heuristic): each run of two or more objects whose key ranges
  overlap forms a job (at most ``batch`` objects each), oldest first.

With a ``dedup`` (or aggregating) iterator, the order in which rows were written
matters, so a job's inputs are taken as a run of consecutive objects in write
order; the outputs carry the newest input's order.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from limno.core.commits import Action, Commit
from limno.data.objects import DataObject, lineage
from limno.errors import InvalidInputError
from limno.ksuid import ksuid
from limno.lazy import lazy_module
from limno.pools.records.partitions import PartitionTree, retarget
from limno.pools.settings import COMPACTION_STRATEGIES

if TYPE_CHECKING:
    import pyarrow as pa

    from limno.data import scan, sort, writer
    from limno.pools.records.pool import RecordPool
else:
    pa = lazy_module("pyarrow")
    scan = lazy_module("limno.data.scan")
    sort = lazy_module("limno.data.sort")
    writer = lazy_module("limno.data.writer")

__all__ = ["STRATEGIES", "CompactionJob", "JobResult", "plan_jobs", "run_jobs"]

STRATEGIES = COMPACTION_STRATEGIES

#: bytes (Arrow size) of merged rows that may wait for a job's encoders
MERGE_AHEAD_BYTES = 16 * 2**20
#: output objects of a job encoded at once, each in a thread of its own, when the job
#: is likely to write several (one per core, at most 4)
ENCODERS = max(1, min(os.cpu_count() or 1, 4))


@dataclass(frozen=True)
class CompactionJob:
    """Merge the share of ``inputs`` that lies in leaf ``partition``."""

    id: str
    partition: str
    inputs: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "partition": self.partition, "inputs": list(self.inputs)}


@dataclass(frozen=True)
class JobResult:
    job: CompactionJob
    rows_in: int
    rows_out: int
    outputs: tuple[str, ...]
    seconds: float


def order_key(obj: DataObject) -> tuple[str, str]:
    """Write order of an object: its creation (or, for outputs, the newest input's)."""
    order = obj.extra.get("order") if obj.extra else None
    if order:
        return (str(order[0]), str(order[1]))
    return (obj.created, obj.id)


def plan_jobs(
    tree: PartitionTree,
    objects: Sequence[DataObject],
    strategy: str = "size-ratio",
    ratio: float = 3.0,
    batch: int = 12,
    ordered: bool = False,
) -> list[CompactionJob]:
    """Jobs the strategy picks, leaf by leaf (``ordered``: inputs must be consecutive)."""
    by_leaf: dict[str, list[DataObject]] = {}
    for obj in objects:
        for leaf in tree.leaves_of(obj):
            by_leaf.setdefault(leaf.id, []).append(obj)
    jobs: list[CompactionJob] = []
    for leaf in tree.leaves():
        objs = sorted(by_leaf.get(leaf.id, []), key=order_key)
        for group in _pick(objs, tree, strategy, ratio, batch, ordered):
            jobs.append(CompactionJob(ksuid(), leaf.id, tuple(o.id for o in group)))
    return jobs


def _pick(
    objs: list[DataObject],
    tree: PartitionTree,
    strategy: str,
    ratio: float,
    batch: int,
    ordered: bool,
) -> list[list[DataObject]]:
    if len(objs) < 2:
        return []
    if strategy == "basic":
        return [objs[i : i + batch] for i in range(0, len(objs) - batch + 1, batch)]
    if strategy == "overlap":
        return _overlapping_runs(objs, tree, batch, ordered)
    if ordered:
        # runs consecutive in write order: the longest window start passing the test
        runs: list[list[DataObject]] = []
        i = 0
        while i < len(objs) - 1:
            window = objs[i : i + batch]
            n = len(window)
            while n >= 2 and ratio * max(o.size for o in window[:n]) > sum(
                o.size for o in window[:n]
            ):
                n -= 1
            if n >= 2:
                runs.append(window[:n])
                i += n
            else:
                i += 1
        return runs
    rest = sorted(objs, key=lambda o: (o.size, order_key(o)))
    out: list[list[DataObject]] = []
    while len(rest) >= 2:
        group = _ratio_batch(rest[:batch], ratio)
        if len(group) < 2:
            break
        out.append(group)
        taken = {o.id for o in group}
        rest = [o for o in rest if o.id not in taken]
    return out


def _ratio_batch(candidates: list[DataObject], ratio: float) -> list[DataObject]:
    group = sorted(candidates, key=lambda o: o.size)
    while len(group) >= 2 and ratio * group[-1].size > sum(o.size for o in group):
        group = group[:-1]
    return group if len(group) >= 2 else []


def _overlapping_runs(
    objs: list[DataObject], tree: PartitionTree, batch: int, ordered: bool
) -> list[list[DataObject]]:
    """Runs of overlapping objects (a run is consecutive in key order, whatever
    ``ordered`` says: overlapping objects are exactly the ones merge-on-read merges)."""
    key = tree.key
    keyed = [o for o in objs if o.min_key is not None]
    keyed.sort(key=lambda o: key.sort_key(o.min_key))
    runs: list[list[DataObject]] = []
    end = None
    for o in keyed:
        first, last = key.sort_key(o.min_key), key.sort_key(o.max_key)
        if runs and end is not None and not end < first:
            runs[-1].append(o)
            if end < last:
                end = last
        else:
            runs.append([o])
            end = last
    out: list[list[DataObject]] = []
    for run in runs:
        run.sort(key=order_key)
        out.extend(run[i : i + batch] for i in range(0, len(run), batch))
    return [r for r in out if len(r) >= 2]


#: runs merges: given (pool, groups of clipped inputs), the outputs of each group
Runner = Callable[["RecordPool", list[list[DataObject]]], list[list[DataObject]]]


def local_runner(pool: RecordPool, groups: list[list[DataObject]]) -> list[list[DataObject]]:
    """Run each group's merge here, one after another."""
    return [merge_clipped(pool, g) for g in groups]


def run_jobs(
    pool: RecordPool,
    branch: str,
    jobs: Sequence[CompactionJob],
    message: str = "",
    author: str | None = None,
    runner: Runner = local_runner,
) -> tuple[Commit, list[JobResult]]:
    """Run ``jobs`` against the branch head and commit them all in one commit.

    ``runner`` does the merging (here, or as Spark tasks); everything else — which
    rows each job reads, the outputs' metadata, the commit — happens here.
    """
    with pool.versioned.writing("compact") as since:
        head = pool.versioned.head(branch)
        real, tree = pool.snapshot(head)
        by_id = {o.id: o for o in real}
        groups: list[list[DataObject]] = []
        for job in jobs:
            missing = [i for i in job.inputs if i not in by_id]
            if missing:
                raise InvalidInputError(
                    f"no such object on {pool.name}@{branch}: {', '.join(missing)}"
                )
            leaf = tree.get(job.partition)
            inputs = sorted((by_id[i] for i in job.inputs), key=order_key)
            groups.append(
                [
                    dataclasses.replace(o, clip=(leaf.lo, leaf.hi))
                    for o in inputs
                    if tree.overlaps(leaf, o)
                ]
            )
        started = time.monotonic()
        with pool.reading([o for g in groups for o in g]):
            merged = runner(pool, groups)
        seconds = (time.monotonic() - started) / max(1, len(jobs))
        actions: list[Action] = []
        results: list[JobResult] = []
        refs_left: dict[str, list[str]] = {o.id: [p.id for p in tree.leaves_of(o)] for o in real}
        touched: dict[str, DataObject] = {}
        for job, outputs in zip(jobs, merged, strict=True):
            inputs = [by_id[i] for i in job.inputs]
            rows_in = sum(int(o.extra.get("rows_in", 0)) for o in outputs)
            newest = max(order_key(o) for o in inputs)
            done = []
            for out in outputs:
                extra = {k: v for k, v in out.extra.items() if k != "rows_in"}
                extra["order"] = list(newest)
                out = dataclasses.replace(
                    out, partitions=(job.partition,), extra=extra, replaces=lineage(inputs)
                )
                actions.append(Action("add", out.id, out.to_json()))
                done.append(out)
            for o in inputs:
                refs_left[o.id] = [r for r in refs_left[o.id] if r != job.partition]
                touched[o.id] = o
            rows_out = sum(o.rows for o in done)
            results.append(JobResult(job, rows_in, rows_out, tuple(o.id for o in done), seconds))
        for oid, obj in touched.items():
            actions[:0] = retarget(obj, refs_left[oid])
        commit = pool.versioned.commit(
            branch,
            actions,
            message=message or f"compact {sum(len(j.inputs) for j in jobs)} object(s)",
            author=author,
            meta={
                "compaction": {
                    "jobs": [r.job.to_json() for r in results],
                    "rows_in": sum(r.rows_in for r in results),
                    "rows_out": sum(r.rows_out for r in results),
                }
            },
            expected_head=head,
            since=since,
            maintenance=True,  # the same rows: allowed on a protected branch
        )
        return commit, results


def merge_clipped(pool: RecordPool, inputs: Sequence[DataObject]) -> list[DataObject]:
    """Merge ``inputs`` (clipped to one leaf, oldest first) into new objects with their
    sketches: written, not committed. The rows read are reported in each output's
    ``extra["rows_in"]`` (summed by the caller), so this works as a Spark task too.

    Three stages run at once, mostly outside the GIL: the inputs' row groups are
    decoded a batch ahead of the merge (in threads), the merge runs in a thread of its
    own up to :data:`MERGE_AHEAD_BYTES` ahead of the encoding, and a job whose
    inputs exceed the target size (likely to write several objects) encodes
    consecutive objects in threads of their own (:data:`ENCODERS`). The output is the
    same as one thread's: the same rows, cut into the same objects, encoded alike.
    """
    rows_in = 0

    def counted() -> Iterator[pa.Table]:
        nonlocal rows_in
        for t in scan.scan(pool.storage, pool.id, inputs, pool.key, read_ahead=True):
            rows_in += t.num_rows
            yield t

    target = pool.config.target_size
    encoders = ENCODERS if sum(o.size for o in inputs) > target else 1
    if encoders > 1:  # the encoders' backlog holds the rows that wait
        merged = sort.prefetched(pool.iterated(counted()), "limno-compact")
    else:
        # a deep queue: the merge's pace is uneven (every input refills at about the
        # same round), and so is the encoder's (a row group at a time)
        merged = sort.prefetched(
            pool.iterated(counted()), "limno-compact", depth=64, max_bytes=MERGE_AHEAD_BYTES
        )
    outputs = writer.write_sorted(
        pool.storage,
        pool.id,
        merged,
        pool.key,
        target,
        is_removed=pool.is_removed,
        writers=encoders,
        backlog=MERGE_AHEAD_BYTES,
    )
    done = []
    for i, out in enumerate(outputs):
        done.append(dataclasses.replace(out, extra={"rows_in": rows_in if i == 0 else 0}))
    return done

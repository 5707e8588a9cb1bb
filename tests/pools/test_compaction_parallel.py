"""A compaction's parallel stages write what one thread writes, byte for byte.

A compaction job decodes its inputs ahead of the merge, merges in a thread of its
own and encodes consecutive output objects in threads of their own. The reference
is the plain sequential pipeline (scan, the pool's iterators, one writer): every
output object must have the same Parquet bytes and metadata, in the same order.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from limno.data import scan, writer
from limno.data.objects import DataObject, data_path
from limno.data.sketches import sketch_path
from limno.lake import Lake
from limno.pools.records import compaction
from limno.pools.records.pool import RecordPool

#: a small target size: a compaction of a few hundred rows writes many objects
TARGET_SIZE = 2_000


def sequential(pool: RecordPool, inputs: Sequence[DataObject]) -> list[DataObject]:
    """The reference job: one thread reads, merges, applies iterators and encodes."""
    tables = pool.iterated(scan.scan(pool.storage, pool.id, inputs, pool.key))
    return writer.write_sorted(
        pool.storage, pool.id, tables, pool.key, pool.config.target_size, writers=1
    )


def compacted_twice(pool: RecordPool) -> list[tuple[list[DataObject], list[DataObject]]]:
    """Compact (all objects, per leaf); each job's outputs and the reference's."""
    pairs: list[tuple[list[DataObject], list[DataObject]]] = []

    def runner(pool: RecordPool, groups: list[list[DataObject]]) -> list[list[DataObject]]:
        references = [sequential(pool, g) for g in groups]
        outputs = compaction.local_runner(pool, groups)
        pairs.extend(zip(outputs, references, strict=True))
        return outputs

    pool.compact([o.id for o in pool.objects()], runner=runner)
    return pairs


def same_objects(pool: RecordPool, got: DataObject, want: DataObject) -> None:
    read = pool.storage.get
    assert read(data_path(pool.id, got.id)) == read(data_path(pool.id, want.id))
    assert (got.rows, got.size, got.keyless) == (want.rows, want.size, want.keyless)
    assert (got.min_key, got.max_key) == (want.min_key, want.max_key)
    assert (got.schema_b64, got.key_types) == (want.schema_b64, want.key_types)
    assert read(sketch_path(pool.id, got.id))  # (KLL draws at random: contents may differ)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    loads=st.lists(
        st.lists(st.one_of(st.none(), st.integers(0, 400)), min_size=1, max_size=120),
        min_size=2,
        max_size=5,
    ),
    iterator=st.sampled_from([None, "dedup", "sum(n)"]),
    split_at=st.one_of(st.none(), st.integers(1, 399)),
    ahead_bytes=st.sampled_from([1, 4_000, 2**20]),
    encoders=st.sampled_from([1, 2, 3]),
)
def test_parallel_compaction_writes_what_one_thread_writes(
    tmp_path_factory: pytest.TempPathFactory,
    loads: list[list[int | None]],
    iterator: str | None,
    split_at: int | None,
    ahead_bytes: int,
    encoders: int,
) -> None:
    lake = Lake.init(str(tmp_path_factory.mktemp("lake")))
    pool = lake.create_pool(
        "p", key="k", target_size=TARGET_SIZE, iterators=[iterator] if iterator else []
    )
    with pytest.MonkeyPatch.context() as mp:
        # row groups of 7 rows: each input is read in several batches, read ahead
        defaults = writer.write_sorted.__kwdefaults__
        assert defaults is not None
        mp.setitem(defaults, "row_group_rows", 7)
        mp.setattr(compaction, "MERGE_AHEAD_BYTES", ahead_bytes)
        mp.setattr(compaction, "ENCODERS", encoders)
        for n, keys in enumerate(loads):
            text = [None if k is None else f"v{k}-{n}" * (1 + (k or 0) % 3) for k in keys]
            pool.load(
                [pa.table({"k": pa.array(keys, pa.int64()), "n": [n] * len(keys), "s": text})]
            )
        if split_at is not None:
            pool.split("root", at=split_at)
        before = pool.scan()
        pairs = compacted_twice(pool)
    assert pairs
    for outputs, references in pairs:
        assert len(outputs) == len(references)
        for got, want in zip(outputs, references, strict=True):
            same_objects(pool, got, want)
    # and the compacted pool reads as before
    assert pool.scan().equals(before)


def test_many_output_objects_in_order(tmp_path: Path) -> None:
    """A job cut into many objects: all committed, sorted and non-overlapping."""
    lake = Lake.init(str(tmp_path / "lake"))
    pool = lake.create_pool("p", key="k", target_size=TARGET_SIZE)
    for i in range(4):
        pool.load([pa.table({"k": list(range(i, 2_000, 4)), "s": ["x" * 20] * 500})])
    writers: list[int] = []
    write_sorted = writer.write_sorted

    def spy(*args: Any, **kwargs: Any) -> list[DataObject]:
        writers.append(kwargs.get("writers", 1))
        return write_sorted(*args, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(compaction, "ENCODERS", 2)
        mp.setattr(writer, "write_sorted", spy)
        pairs = compacted_twice(pool)
    assert sorted(writers) == [1, 2]  # the reference's one writer, the job's two
    ((outputs, references),) = pairs
    assert len(outputs) > 20
    for got, want in zip(outputs, references, strict=True):
        same_objects(pool, got, want)
    assert {o.id for o in pool.objects()} == {o.id for o in outputs}
    ranges = [(o.min_key[0], o.max_key[0]) for o in outputs if o.min_key and o.max_key]
    assert len(ranges) == len(outputs)
    assert all(a[1] < b[0] for a, b in zip(ranges, ranges[1:], strict=False))
    assert pool.scan().column("k").to_pylist() == list(range(2_000))

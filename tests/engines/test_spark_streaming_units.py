"""The driver-side logic of Spark Structured Streaming, without a JVM: which batch a
checkpoint will replay, the Kafka offsets a batch's commit records, the commits a
stream of a branch covers, and what a rewriting commit streams."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from limno.engines.spark._kafka import _kafka_meta, _offset_ranges, pending_batch
from limno.engines.spark._stream import EARLIEST, _chain, _except_all
from limno.errors import InvalidInputError
from limno.lake import Lake


def _log(checkpoint: Path, log: str, *batches: int) -> None:
    (checkpoint / log).mkdir(parents=True, exist_ok=True)
    for b in batches:
        (checkpoint / log / str(b)).write_text("v1\n")
        (checkpoint / log / f".{b}.crc").write_text("")


def test_pending_batch_is_the_planned_batch_not_recorded_done(tmp_path: Path) -> None:
    assert pending_batch(str(tmp_path / "none")) is None
    _log(tmp_path, "offsets", 0, 1, 2)
    _log(tmp_path, "commits", 0, 1)
    assert pending_batch(str(tmp_path)) == 2
    assert pending_batch("file://" + str(tmp_path)) == 2
    _log(tmp_path, "commits", 2)
    assert pending_batch(str(tmp_path)) is None
    assert pending_batch("s3a://bucket/chk") is None  # not looked at


def test_offsets_of_a_batch_merge_into_the_topic_map() -> None:
    kafka = pa.array(
        [
            {"topic": "t", "partition": 0, "offset": 7, "timestamp": None},
            {"topic": "t", "partition": 0, "offset": 5, "timestamp": None},
            {"topic": "t", "partition": 2, "offset": 1, "timestamp": None},
        ],
        pa.struct(
            [
                ("topic", pa.string()),
                ("partition", pa.int32()),
                ("offset", pa.int64()),
                ("timestamp", pa.timestamp("ms", tz="UTC")),
            ]
        ),
    )
    ranges = _offset_ranges(pa.table({"kafka": kafka}))
    assert ranges == {"t": {"0": (5, 7), "2": (1, 1)}}
    meta = _kafka_meta(ranges, {"t": {"0": 4, "1": 9}, "other": {"0": 3}})
    assert meta == {
        "batch": {"t": {"0": [5, 7], "2": [1, 1]}},
        "offsets": {"t": {"0": 7, "1": 9, "2": 1}},
    }
    assert _offset_ranges(pa.table({"x": [1]})) == {}


def test_a_stream_covers_first_parent_commits_and_fails_after_a_reset(tmp_path: Path) -> None:
    lake = Lake.init(str(tmp_path / "lake"))
    pool = lake.create_pool("p", key="k")
    first = pool.load([pa.table({"k": [1]})]).id
    second = pool.load([pa.table({"k": [2]})]).id
    assert [c for c, _ in _chain(pool, "main", first, second)] == [second]
    everything = _chain(pool, "main", EARLIEST, second)
    assert [c for c, _ in everything][-2:] == [first, second]
    assert everything[0][1] is None  # the branch's first commit has no parent
    pool.reset("main", everything[0][0])
    with pytest.raises(InvalidInputError, match="no longer in the branch's history"):
        _chain(pool, "main", second, pool.resolve("main"))


def test_a_rewrite_streams_only_records_it_added() -> None:
    removed = pa.table({"k": [1, 2, 2], "v": ["a", "b", "b"]})
    added = pa.table({"k": [2, 1, 3, 2], "v": ["b", "a", "c", "b"]})
    got = _except_all(added, removed)
    assert got.to_pylist() == [{"k": 3, "v": "c"}]
    assert _except_all(removed, added).num_rows == 0

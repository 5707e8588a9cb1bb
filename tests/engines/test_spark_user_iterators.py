"""A user iterator stored in the lake runs in Spark's Python workers as it runs here:
a Spark read and a compaction merged in Spark tasks give the local answer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from limno.api.local import LocalLake as Lake
from limno.engines import spark as ls
from spark_support import module_session

pytestmark = pytest.mark.spark

SUMMED = """
import pyarrow as pa


class Summed:
    def __init__(self, key_fields, options):
        self.keys, self.field = key_fields, options["field"]

    def apply(self, batches):
        for batch in batches:
            table = pa.Table.from_batches([batch])
            numbered = table.append_column("__i", pa.array(range(len(table)), pa.int64()))
            agg = numbered.group_by(self.keys, use_threads=False).aggregate(
                [("__i", "max"), (self.field, "sum")]
            )
            newest = table.take(agg.column("__i_max"))
            i = newest.schema.get_field_index(self.field)
            yield newest.set_column(i, self.field, agg.column(self.field + "_sum"))
"""


@pytest.fixture(scope="module")
def spark() -> Any:
    yield from module_session("local[2]")


def test_spark_reads_and_compacts_through_a_stored_iterator(
    spark: SparkSession, tmp_path: Path
) -> None:
    lake = Lake.init(str(tmp_path / "lake"))
    pool = lake.create_pool("p", key="k")
    pool.set_iterators(["python(Summed,field=n)"], SUMMED, "summed.py")
    for i in range(4):
        keys = list(range(i, 60, 2))
        pool.load([pa.table({"k": keys, "n": [i + 1] * len(keys)})])
    assert pool.split("root", at=30) is not None
    want = pool.scan().to_pylist()
    assert len(want) == 60 and want[3] == {"k": 3, "n": 2 + 4}
    df = spark.read.format("limno").option("lake", lake.uri).load("p")
    got = sorted((r.asDict() for r in df.collect()), key=lambda r: r["k"])
    assert got == want
    pool.branch("spark")
    ids = [o.id for o in pool.snapshot()[0]]
    pool.compact(ids, branch="main")
    pool.compact(ids, branch="spark", runner=ls.compaction_runner)
    assert pool.scan("spark").to_pylist() == pool.scan("main").to_pylist() == want
    stored = sum(o.rows for o in pool.snapshot("spark")[0])
    assert stored == len(want)  # the Spark tasks ran the iterator too
    assert list(lake.verify()) == []

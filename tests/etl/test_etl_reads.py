"""A local ``limno etl`` run reads only what it needs of its input branches
(limno.etl.reads), and gets the very same answers as reading them whole.

The same batches (two topics, a partition that appears later at offset 0, joins
waiting across runs) go into raw pools keyed the three ways README's Kafka section
names, and into one keyed on ``key``, which every run reads whole: after every run
the output records and the completion records agree with that one, while the runs on
the kafka-keyed pools read less than the branch holds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from etl_support import PARTITIONED
from limno.api.local import LocalLake as Lake
from limno.errors import InvalidInputError
from limno.etl.config import Config, parse_config
from limno.etl.reads import read_inputs
from limno.etl.run import run_etl
from limno.etl.state import read_state

CONFIG = "name: paid\n" + PARTITIONED.replace("pool: out@dev", "pool: out")
KEYS = ["kafka.offset", "kafka.partition,kafka.offset", "kafka.topic,kafka.partition,kafka.offset"]


def _records(topic: str, part: int, first: int, values: list[dict[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist(
        [
            {
                "kafka": {"topic": topic, "partition": part, "offset": first + i},
                "key": f"{topic[0]}{part}-{first + i}",
                "value": v,
            }
            for i, v in enumerate(values)
        ]
    )


def _orders(part: int, first: int, ids: range) -> pa.Table:
    return _records("orders", part, first, [{"id": i} for i in ids])


def _payments(part: int, first: int, ids: list[int]) -> pa.Table:
    return _records("payments", part, first, [{"order_id": i, "amount": 7 * i} for i in ids])


BATCHES = [
    [_orders(0, 0, range(10)), _payments(0, 0, [0, 1, 2, 3, 4])],
    # order 30 comes in batch 3, in partition 1, which starts there at offset 0
    [_orders(0, 10, range(10, 20)), _payments(0, 5, [5, 6, 7, 8, 30])],
    [_orders(1, 0, range(30, 35)), _payments(1, 0, [13, 14, 15])],
    [_payments(0, 10, [16, 17, 31, 32]), _orders(0, 20, range(20, 22))],
]


def _outcome(lake: Lake) -> tuple[list[Any], list[Any]]:
    out = lake.pool("out")
    return out.scan().to_pylist(), [c.meta.get("etl") for c in out.log("main")]


def _run(lake: Lake, config: Config) -> int:
    """One run; the rows its reads held (what a run reads, measured on the lake)."""
    state = read_state(lake.pool("out"), "main", config.name) if _has_out(lake) else None
    read = 0
    if state is not None:
        tables, _ = read_inputs(lake, config, state)
        read = sum(t.num_rows for t in tables.values())
    run_etl(lake, config, engine="local")
    return read


def _has_out(lake: Lake) -> bool:
    return any(p.name == "out" for p in lake.list_pools())


@pytest.mark.parametrize("key", KEYS)
def test_reads_by_key_agree_with_whole_reads(key: str, tmp_path: Path) -> None:
    config = parse_config(CONFIG, "paid.yaml")
    lake, whole = Lake.init(str(tmp_path / "ranged")), Lake.init(str(tmp_path / "whole"))
    lake.create_pool("raw", key)
    whole.create_pool("raw", "key")  # no kafka key: every run reads the branch whole
    reads = []
    for batch in BATCHES:
        for one in (lake, whole):
            one.pool("raw").load([pa.concat_tables(batch, promote_options="permissive")])
        reads.append(_run(lake, config))
        run_etl(whole, config, engine="local")
        assert _outcome(lake) == _outcome(whole)
    rows, _ = _outcome(lake)
    assert {r["value"]["id"] for r in rows if r["value"]["id"] is not None} == {
        *range(9),
        13,
        14,
        15,
        16,
        17,
        30,
        31,
        32,
    }  # order 30 (partition 1, offset 0, new in run 3) met its payment waiting since run 2
    held = sum(
        t.num_rows for t in (pa.concat_tables(b, promote_options="permissive") for b in BATCHES)
    )
    # run 2 reads from the marks on; with partitions in the key, so does the last run,
    # while on kafka.offset alone partition 1's low marks (from run 3) hold the start
    assert reads[1] < 30, reads
    if key != "kafka.offset":
        assert reads[-1] < held - 10, reads
    assert run_etl(lake, config, engine="local").commit is None


PAYMENTS_ONLY = """
name: paid
inputs:
  - {topic: payments, pool: raw}
outputs:
  - {topic: paid, pool: out}
transforms:
  - type: stateless
    in: payments
    select: |
      key, {'big': value.amount} AS value
    out: paid
"""


def test_a_topic_added_to_the_config_is_read_whole(tmp_path: Path) -> None:
    """What a run read is recorded with its topics: a topic added to the config
    later is read from its start, not from the other topics' marks."""
    lake = Lake.init(str(tmp_path))
    raw = lake.create_pool("raw", "kafka.offset")
    first = parse_config(PAYMENTS_ONLY, "paid.yaml")
    raw.load([pa.concat_tables(BATCHES[0], promote_options="permissive")])
    run_etl(lake, first, engine="local")
    raw.load([_payments(0, 5, [5])])
    run_etl(lake, first, engine="local")
    raw.load([_payments(0, 6, [2])])  # pays order 2, at offset 2, in the pool all along
    report = run_etl(lake, parse_config(CONFIG, "paid.yaml"), engine="local")
    assert report.pending == 9  # orders 0-9 but 2: their payments went by before
    rows = lake.pool("out").scan().to_pylist()
    assert [r["value"]["id"] for r in rows if r["value"].get("id") is not None] == [2]


def test_a_rewritten_input_branch_and_keyless_records(tmp_path: Path) -> None:
    """The commit read last gone (the raw pool made again): a whole read; a record
    without ``kafka.offset`` is refused as before, whatever the reads."""
    lake = Lake.init(str(tmp_path))
    config = parse_config(CONFIG, "paid.yaml")
    lake.create_pool("raw", "kafka.offset").load(
        [pa.concat_tables(BATCHES[0], promote_options="permissive")]
    )
    run_etl(lake, config, engine="local")
    lake.drop_pool("raw")
    raw = lake.create_pool("raw", "kafka.offset")
    raw.load([pa.concat_tables(BATCHES[0], promote_options="permissive")])
    raw.load([_orders(1, 0, range(40, 41))])
    raw.load([_payments(1, 0, [40])])
    report = run_etl(lake, config, engine="local")
    # order 40 (partition 1, offset 0) and its payment, which is also a big one
    assert report.outputs == {"paid": 2}
    bad = _orders(0, 50, range(50, 51)).to_pylist()
    bad[0]["kafka"]["offset"] = None
    raw.load([pa.Table.from_pylist(bad)])
    with pytest.raises(InvalidInputError, match="records without kafka.offset"):
        run_etl(lake, config, engine="local")

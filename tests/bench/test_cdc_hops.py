"""bench/cdc_hops.py: each change of the ``cdc_lag`` benchmark is found at each hop
from what the hop recorded (real pools and commits; no chain: the benchmark runs that)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
from bench.cdc_hops import Stamps, hop_percentiles, produced_times, raw_times, staged_times

from limno.api import Lake

KAFKA = pa.struct(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.timestamp("ms", tz="UTC")),
    ]
)


def _epoch(date: str) -> float:
    return dt.datetime.fromisoformat(date).timestamp()


def _raw(rows: list[tuple[str, int, int, int | None]]) -> pa.Table:
    """Raw records: (topic, offset, Kafka timestamp ms, change number)."""
    kafka = [
        {
            "topic": t,
            "partition": 0,
            "offset": o,
            "timestamp": dt.datetime.fromtimestamp(ms / 1000, dt.UTC),
        }
        for t, o, ms, _ in rows
    ]
    value = [{"op": "c", "after": {"change": c}} for *_, c in rows]
    return pa.table({"kafka": pa.array(kafka, KAFKA), "value": value})


def _batch(spans: dict[str, tuple[int, int]]) -> dict[str, Any]:
    return {"kafka": {"batch": {t: {"0": list(span)} for t, span in spans.items()}}}


def test_raw_and_staged_times_take_each_record_to_its_commit(tmp_path: Path) -> None:
    lake = Lake.init(str(tmp_path / "lake"))
    raw = lake.create_pool("Raw", "kafka.topic,kafka.partition,kafka.offset")
    # a new invoice (change 5) is two events, the later one landing in the second commit
    first = raw.load(
        _raw([("Invoices", 0, 1_000, None), ("Invoices", 1, 2_000, 5), ("Status", 0, 2_500, 4)]),
        meta=_batch({"Invoices": (0, 1), "Status": (0, 0)}),
    )
    second = raw.load(
        _raw([("Status", 1, 3_000, 5), ("Invoices", 2, 4_000, 6)]),
        meta=_batch({"Invoices": (2, 2), "Status": (1, 1)}),
    )
    assert raw_times(lake) == {
        4: (2.5, _epoch(first.date)),
        5: (3.0, _epoch(second.date)),  # the later of its two events, each
        6: (4.0, _epoch(second.date)),
    }

    staging = lake.create_pool("Staging", "kafka.offset")

    def staged(offsets: list[int], changes: list[int | None], after: int) -> Any:
        table = pa.table(
            {
                "kafka": [{"topic": "NewInvoices", "offset": o} for o in offsets],
                "value": [{"change": c} for c in changes],
            }
        )
        meta = {"etl": {"lag": {"next": {"NewInvoices": after}}, "other": {}}}
        return staging.load(table, meta=meta)

    one = staged([0, 1], [None, 4], 2)
    two = staged([2, 3], [5, 6], 4)
    assert staged_times(lake, "lag", "NewInvoices") == {
        4: _epoch(one.date),
        5: _epoch(two.date),
        6: _epoch(two.date),
    }


def _envelope(change: int | None) -> bytes:
    return json.dumps({"schema": {}, "payload": {"ID": 1, "change": change}}).encode()


def test_produced_times_keep_each_changes_first_message() -> None:
    messages = [(_envelope(5), 1.5), (None, 2.0), (_envelope(None), 2.5), (_envelope(5), 3.0)]
    assert produced_times(messages) == {5: 1.5}


def test_hops_are_differences_of_neighbouring_stamps() -> None:
    fast, slow = Stamps(0, 1, 3, 6, 10, 15), Stamps(0, 2, 5, 9, 14, 20)
    assert fast.hops() == (1, 2, 3, 4, 5)
    assert hop_percentiles({1: fast, 2: slow}, 50) == {
        "debezium": 1.5,
        "kafka_from": 2.5,
        "etl": 3.5,
        "kafka_to": 4.5,
        "sink": 5.5,
    }
    assert hop_percentiles({}, 50) == {}

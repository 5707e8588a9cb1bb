"""Where the time of each change goes in the CDC chain (``cdc_lag``, bench/cdc.py).

After a run, every measured change (a number the driver gave it, carried in both
source tables and through the ETL to the sink) is found at each hop, and each hop's
own time is stamped from what that hop itself recorded, all on this host's one clock:

* source commit: ``changed_at`` (PostgreSQL's ``clock_timestamp()`` in the change's
  transaction);
* in Kafka: the Debezium event's Kafka timestamp (Connect's producer's create time,
  ms), the later of a change's events (a new invoice is two rows);
* in Raw: the date of the ``kafka from`` commit holding the event (the commit's meta
  names its offsets per topic and partition);
* in Staging: the date of the ``limno etl`` commit holding the output record (the
  commit's ``next`` offset per output topic);
* produced: the NewInvoices message's Kafka timestamp (``kafka to``'s producer, ms);
* in the sink table: ``clock_timestamp()`` of the sink's row write (a trigger).

Each hop's time is the difference of two neighbours; their sum is the change's lag.
"""

from __future__ import annotations

import bisect
import datetime as dt
import itertools
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from bench.harness import percentile

__all__ = ["HOPS", "Stamps", "hop_percentiles", "produced_times", "raw_times", "staged_times"]

#: the hops, in chain order, each named by what it spans
HOPS = ("debezium", "kafka_from", "etl", "kafka_to", "sink")


@dataclass
class Stamps:
    """The epoch seconds at which one change reached each point of the chain."""

    committed: float
    kafka: float
    raw: float
    staged: float
    produced: float
    arrived: float

    def hops(self) -> tuple[float, ...]:
        points = (self.committed, self.kafka, self.raw, self.staged, self.produced, self.arrived)
        return tuple(b - a for a, b in itertools.pairwise(points))


def _epoch(date: str) -> float:
    return dt.datetime.fromisoformat(date).timestamp()


def _ms(value: Any) -> float:
    """A Kafka timestamp (a datetime, or milliseconds) as epoch seconds."""
    return value.timestamp() if isinstance(value, dt.datetime) else float(value) / 1000


def raw_times(lake: Any) -> dict[int, tuple[float, float]]:
    """change -> (Kafka timestamp, Raw commit date) of its events, the later of each."""
    import pyarrow.compute as pc

    pool = lake.pool("Raw")
    lasts: dict[tuple[str, int], list[tuple[int, float]]] = {}
    for commit in pool.log("main"):
        for topic, spans in commit.meta.get("kafka", {}).get("batch", {}).items():
            for p, (_, last) in spans.items():
                lasts.setdefault((topic, int(p)), []).append((int(last), _epoch(commit.date)))
    for found in lasts.values():
        found.sort()
    table = pool.scan()
    kafka, value = table.column("kafka"), table.column("value")
    change = pc.struct_field(pc.struct_field(value, "after"), "change")
    columns = [pc.struct_field(kafka, f).to_pylist() for f in ("topic", "partition", "offset")]
    stamps = pc.struct_field(kafka, "timestamp").to_pylist()
    out: dict[int, tuple[float, float]] = {}
    for topic, partition, offset, stamp, number in zip(
        *columns, stamps, change.to_pylist(), strict=True
    ):
        if number is None:
            continue  # the preloaded rows (Debezium's snapshot)
        spans = lasts[(topic, partition)]
        landed = spans[bisect.bisect_left(spans, (offset, float("-inf")))][1]
        was = out.get(number, (0.0, 0.0))
        out[number] = (max(was[0], _ms(stamp)), max(was[1], landed))
    return out


def staged_times(lake: Any, config: str, topic: str) -> dict[int, float]:
    """change -> date of the ETL commit that staged its output record."""
    import pyarrow.compute as pc

    pool = lake.pool("Staging")
    nexts: list[tuple[int, float]] = []
    for commit in pool.log("main"):
        state = commit.meta.get("etl", {}).get(config)
        if state is not None and topic in state.get("next", {}):
            nexts.append((int(state["next"][topic]), _epoch(commit.date)))
    nexts.sort()
    table = pool.scan()
    offsets = pc.struct_field(table.column("kafka"), "offset").to_pylist()
    changes = pc.struct_field(table.column("value"), "change").to_pylist()
    out: dict[int, float] = {}
    for offset, number in zip(offsets, changes, strict=True):
        if number is not None:
            # the first commit whose next offset is past the record's
            out[number] = nexts[bisect.bisect_right(nexts, (offset, float("inf")))][1]
    return out


def produced_times(messages: Iterable[tuple[bytes | None, float]]) -> dict[int, float]:
    """change -> Kafka timestamp of its NewInvoices message (Connect envelopes)."""
    out: dict[int, float] = {}
    for value, stamp in messages:
        if value is None:
            continue
        number = json.loads(value)["payload"].get("change")
        if number is not None:
            out[number] = min(out.get(number, stamp), stamp)
    return out


def hop_percentiles(stamps: Mapping[int, Stamps], q: float) -> dict[str, float]:
    """Each hop's ``q``-th percentile over the changes, seconds."""
    if not stamps:
        return {}
    columns = list(zip(*(s.hops() for s in stamps.values()), strict=True))
    return {hop: percentile(values, q) for hop, values in zip(HOPS, columns, strict=True)}

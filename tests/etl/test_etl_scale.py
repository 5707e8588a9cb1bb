"""The generated workload of the demo's shape (bench/etl.py) through examples/cdc's
rules in batches: every expected output once, offsets 0..n-1, pending events
completed in later runs. Small in the default run, 100k events marked ``slow``."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from bench.etl import CONFIG, expected, workload

from limno.api.local import LocalLake as Lake
from limno.etl.config import load_config
from limno.etl.run import run_etl


def _check(tmp_path: Path, n: int, batches: int) -> None:
    events = workload(n)
    lake = Lake.init(str(tmp_path / "lake"))
    raw = lake.create_pool("Raw", "kafka.offset")
    config = load_config(CONFIG)
    invoices = events.filter(
        pa.compute.equal(events["kafka"].combine_chunks().field("topic"), "Invoices")
    )
    statuses = events.filter(
        pa.compute.equal(events["kafka"].combine_chunks().field("topic"), "InvoiceStatus")
    )
    pending_seen = 0
    for b in range(batches):
        parts = [
            t.slice(
                b * t.num_rows // batches,
                (b + 1) * t.num_rows // batches - b * t.num_rows // batches,
            )
            for t in (invoices, statuses)
        ]
        raw.load([pa.concat_tables(parts)])
        report = run_etl(lake, config, engine="local")
        pending_seen = max(pending_seen, report.pending)
    assert run_etl(lake, config, engine="local").commit is None
    assert pending_seen > 0, "some joins waited across runs"
    assert report.pending == 0
    rows = lake.pool("Staging").scan().to_pylist()
    assert [r["kafka"]["offset"] for r in rows] == list(range(len(rows)))

    def plain(value: dict[str, object] | None) -> dict[str, object] | None:
        return None if value is None else {k: v for k, v in value.items() if v is not None}

    got = sorted(((r["key"], plain(r["value"])) for r in rows), key=repr)
    want = sorted(((k, plain(v)) for k, v in expected(events)), key=repr)
    assert got == want


def test_a_generated_workload_in_batches(tmp_path: Path) -> None:
    _check(tmp_path, 3_000, 3)


@pytest.mark.slow
def test_a_generated_workload_of_100k_events(tmp_path: Path) -> None:
    _check(tmp_path, 100_000, 4)

"""The zync demo's inputs and the NewInvoices records its runs must produce, derived
by hand from the rules in shared/data/zync-demo/README.md (input order: inputs'
order, then offset; a join sits where its later event is; events pending from
earlier runs come before a run's new ones). Shared by tests/cli/test_etl_demo.py and
the engine conformance suite."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "examples" / "cdc" / "invoices.yaml"
DEMO = ROOT / "examples" / "cdc" / "batches"  # a copy of shared/data/zync-demo/

__all__ = ["CONFIG", "DEMO", "EXPECTED", "PARTITIONED", "batch", "records_after"]


def _full(i: int, customer: str, item: str, status: str) -> dict[str, Any]:
    return {"ID": i, "customer": customer, "item": item, "invoice_status": status}


def _status(i: int, status: str) -> dict[str, Any]:
    return {"ID": i, "customer": None, "item": None, "invoice_status": status}


#: per batch: the records (key, value) its run adds to NewInvoices, in offset order
EXPECTED: list[list[tuple[dict[str, int], dict[str, Any] | None]]] = [
    # batch 1: snapshot reads; the status of 101 comes first (InvoiceStatus offset 1),
    # so Bob's join completes before Alice's
    [
        ({"ID": 101}, _full(101, "Bob", "burrito", "pending")),
        ({"ID": 100}, _full(100, "Alice", "taco", "pending")),
    ],
    # batch 2: Charlie joins status 77; Dan (103) has no status yet: pending, no output
    [({"ID": 102}, _full(102, "Charlie", "enchilada", "pending"))],
    # batch 3: status 192 arrives for Dan's pending invoice; status 32 of 100 updated
    [({"ID": 103}, _full(103, "Dan", "beans", "pending")), ({"ID": 100}, _status(100, "closed"))],
    # batch 4: three status updates, in offset order
    [
        ({"ID": 103}, _status(103, "collections")),
        ({"ID": 102}, _status(102, "paid")),
        ({"ID": 101}, _status(101, "paid")),
    ],
]


def batch(n: int) -> str:
    return str(DEMO / f"batch-{n}.ndjson")


def records_after(n: int) -> list[dict[str, Any]]:
    """Every NewInvoices record once batches 1..n have been run, as scanned."""
    made = [pair for step in EXPECTED[:n] for pair in step]
    return [
        {
            "kafka": {"topic": "NewInvoices", "partition": 0, "offset": i, "timestamp": None},
            "key": json.dumps(key, separators=(",", ":")),
            "value": value,
        }
        for i, (key, value) in enumerate(made)
    ]


#: two topics of one raw pool into one output topic: a denorm and a stateless rule
PARTITIONED = """
inputs:
  - {topic: orders, pool: raw}
  - {topic: payments, pool: raw}
outputs:
  - {topic: paid, pool: out@dev}
transforms:
  - type: denorm
    left: orders
    right: payments
    join-on: left.value.id = right.value.order_id
    select: |
      left.key AS key, {'id': left.value.id, 'amount': right.value.amount} AS value
    out: paid
  - type: stateless
    in: payments
    where: value.amount > 100
    select: |
      key, {'big': value.amount} AS value
    out: paid
"""

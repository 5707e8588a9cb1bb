"""Postgres -> Debezium -> Kafka -> limno kafka from -> limno etl -> limno kafka to ->
Debezium JDBC sink -> Postgres, with real parts (tests/cdc_chain.py): after each round
of inserts, updates and deletes the sink table equals the join of the source tables,
also when ``kafka from`` and ``etl`` are killed mid-run and run again. The sink keys
its table on the record key, a Connect struct (``kafka to --key-format connect``), and
deletes the row of a tombstone's key."""

from __future__ import annotations

import pytest

from cdc_chain import ROUNDS, Chain, connectors

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def test_chain_end_to_end_with_kills(cdc: Chain) -> None:
    lines: list[str] = []
    cdc.say = lines.append
    connectors(cdc)

    # round 1: Debezium's snapshot (op r) of two invoices and their statuses, joined
    cdc.round(0)
    assert cdc.pg.rows('SELECT count(*) FROM "NewInvoices"') == [(2,)]

    # round 2: inserts (one invoice still without a status: pending in the ETL),
    # updates of both tables; the sync of Invoices is killed after its first commit
    cdc.change(1)
    cdc.debezium()
    cdc.kafka_from_killed("Invoices")
    cdc.kafka_from()  # runs both syncs again: nothing duplicated or lost (counted)
    staged = cdc.etl()
    cdc.kafka_to()
    assert [r[0] for r in cdc.sink()] == [100, 101, 102]  # 103 waits for its status

    # round 3: Dan's status arrives, updates, a delete; the ETL is killed mid-run
    cdc.change(2)
    cdc.debezium()
    cdc.kafka_from()
    cdc.etl_killed()
    assert cdc.etl() > staged
    again = cdc.etl()  # a rerun with no new input adds nothing
    assert again == cdc.count("Staging", "NewInvoices")
    cdc.kafka_to()
    rows = cdc.sink()  # invoice 100 deleted at the source: its row deleted by its key
    assert rows == [
        (101, "Bobby", "burrito", "paid"),
        (102, "Carol", "salad", "shipped"),
        (103, "Dan", "soup", "pending"),
    ]
    assert len(ROUNDS) == 3
    assert any("killed (SIGKILL)" in line for line in lines)

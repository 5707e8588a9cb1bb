"""``kafka_from_avro`` (issue 16): ``kafka from --format avro`` against confluent-kafka.

Like ``kafka_from`` (:mod:`bench.kafka`: same broker, partitions, batch sizes and
peer), but the topic's 2M messages (quick: 50k) are Confluent wire-format Avro (magic
byte, schema id, Avro body of ``{id, user, amount, ok}``), their schema registered
in the registry of a ``limno serve`` run in a thread of this process (on its own
lake; the shared setup also fills ``kafka_from``'s JSON topic, unused here). limno
decodes each message with the schema fetched from it; the peer is confluent-kafka's
Consumer alone reading the same topic to its end (nothing decoded, nothing stored).
Messages/s; the two alternate, ``repeat`` times each.
"""

from __future__ import annotations

import io
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

from bench.harness import Config, Result, median
from bench.kafka import PARTITIONS, _broker, _consume_all, _produce

__all__ = ["kafka_from_avro"]

SCHEMA = {
    "type": "record",
    "name": "Payment",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "user", "type": "string"},
        {"name": "amount", "type": "double"},
        {"name": "ok", "type": "boolean"},
    ],
}


def _avro_messages(count: int, schema_id: int) -> Iterator[dict[str, Any]]:
    import fastavro

    parsed = fastavro.parse_schema(SCHEMA)
    prefix = b"\x00" + schema_id.to_bytes(4, "big")
    for i in range(count):
        out = io.BytesIO()
        out.write(prefix)
        value = {"id": i, "user": f"u{i % 1000}", "amount": i % 997 / 10, "ok": i % 3 == 0}
        fastavro.schemaless_writer(out, parsed, value)
        yield {"partition": i % PARTITIONS, "key": f"k{i}", "value": out.getvalue()}


def _sync(
    lake: str, topic: str, bootstrap: str, registry: str | None, count: int, fmt: str = "avro"
) -> float:
    """Seconds ``sync_from --format FMT`` takes to commit the whole topic."""
    from limno.api import Lake
    from limno.core.commits import Commit
    from limno.streams.kafka_from import FromOptions, sync_from

    stop = threading.Event()
    synced = 0

    def committed(commit: Commit) -> None:
        nonlocal synced
        offsets = commit.meta["kafka"]["offsets"]
        synced = sum(last + 1 for ranges in offsets.values() for last in ranges.values())
        if synced >= count:
            stop.set()

    opts = FromOptions(
        topic,
        "events",
        bootstrap,
        batch_rows=min(500_000, count // 4),
        batch_interval=10.0,
        exit_after=60.0,
        format=fmt,
        registry=registry,
    )
    start = time.perf_counter()
    sync_from(Lake.open(lake), opts, on_commit=committed, stop=stop)
    took = time.perf_counter() - start
    if synced != count:
        raise RuntimeError(f"kafka from --format {fmt}: {synced} of {count} record(s) synced")
    return took


def kafka_from_avro(cfg: Config) -> list[Result]:
    """Avro messages/s into a pool against confluent-kafka consuming the same topic."""
    from limno.server.run import serving
    from limno.streams.registry_client import RegistryClient

    with _broker(cfg) as setup:
        registry_lake = setup.lake()
        with serving(registry_lake) as url:
            registry = f"{url}/registry"
            schema_id = RegistryClient(registry).register("bench-value", json.dumps(SCHEMA))
            topic = setup.topic()
            count = _produce(setup.bootstrap, topic, _avro_messages(setup.messages, schema_id))
            limno, peer = [], []
            for _ in range(cfg.repeat):
                peer.append(count / _consume_all(setup.bootstrap, topic, count))
                lake = setup.lake()
                limno.append(count / _sync(lake, topic, setup.bootstrap, registry, count))
    return [
        Result(
            "kafka_from_avro",
            "throughput",
            "msgs/s",
            median(limno),
            {"confluent-kafka": median(peer)},
            True,
        )
    ]

"""Change data capture end to end, with real parts (issue 17): the chain of the test
tests/cdc/test_cdc_chain.py and of ``make cdc-demo`` (``python tests/cdc_chain.py``).

    PostgreSQL tables "Invoices" and "InvoiceStatus"
      -> Debezium PostgreSQL source (Kafka Connect) -> topics Invoices, InvoiceStatus
      -> limno kafka from --format connect            -> pool Raw
      -> limno etl examples/cdc/invoices.yaml        -> pool Staging (topic NewInvoices)
      -> limno kafka to --format connect --key-format connect -> topic NewInvoices
      -> Debezium JDBC sink (Kafka Connect)          -> PostgreSQL table "NewInvoices"

The sink table must end equal to the denormalized join of the source tables
(:data:`EXPECTED`). The ETL's rules write partial records (a status update carries
no customer, an invoice update no status) and ``kafka to`` writes the fields a record
lacks as null, while the JDBC sink's upsert sets every column it is given: so the sink
table merges, through a trigger (:data:`SINK_TABLE`), a null column keeping the value
it had (a field that really becomes null is therefore not carried to the sink).

The changes come in rounds (:data:`ROUNDS`), each taken through every hop before the
next starts, so that an update never reaches the ETL in the run that makes the join
it must follow (one run's outputs are ordered by input, not by the database's commit
order across the two tables).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic

from connect_support import Connect, start_connect
from kafka_support import KAFKA_TIMEOUT, ROOT, Broker, Topics, start_broker
from postgres_support import Postgres, postgres

__all__ = ["EXPECTED", "ROUNDS", "Chain", "chain"]

LIMNO = str(Path(sys.executable).with_name("limno"))
CONFIG = str(ROOT / "examples" / "cdc" / "invoices.yaml")
#: how long one hop may take to pass a round's changes on (2 busy cores)
HOP_TIMEOUT = 180.0
#: how long one limno command may run
COMMAND_TIMEOUT = 300.0

SOURCE_TABLES = """
CREATE TABLE "Invoices" ("ID" bigint PRIMARY KEY, customer text, item text);
CREATE TABLE "InvoiceStatus" ("ID" bigint PRIMARY KEY, "InvoiceID" bigint, status text);
"""
#: the sink's table, made before the sink starts: keyed on the field of the record's
#: struct key (see :func:`sink_connector`); an update keeps what a null would replace
SINK_TABLE = """
CREATE TABLE "NewInvoices" ("ID" bigint PRIMARY KEY, customer text, item text,
                            invoice_status text);
CREATE FUNCTION keep_unset() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.customer := COALESCE(NEW.customer, OLD.customer);
  NEW.item := COALESCE(NEW.item, OLD.item);
  NEW.invoice_status := COALESCE(NEW.invoice_status, OLD.invoice_status);
  RETURN NEW;
END $$;
CREATE TRIGGER keep_unset BEFORE UPDATE ON "NewInvoices"
  FOR EACH ROW EXECUTE FUNCTION keep_unset();
"""
#: the sink table's expected content: the join of the source tables
EXPECTED = """
SELECT i."ID", i.customer, i.item, s.status FROM "Invoices" i
JOIN "InvoiceStatus" s ON s."InvoiceID" = i."ID" ORDER BY i."ID"
"""
SINK = 'SELECT "ID", customer, item, invoice_status FROM "NewInvoices" ORDER BY "ID"'

#: the source changes, round by round: (SQL, change events it makes per table); the
#: first round is there before Debezium starts (its snapshot: op r)
ROUNDS: list[tuple[str, dict[str, int]]] = [
    (
        """INSERT INTO "Invoices" VALUES (100, 'Alice', 'taco'), (101, 'Bob', 'burrito');
        INSERT INTO "InvoiceStatus" VALUES (32, 100, 'pending'), (80, 101, 'pending');""",
        {"Invoices": 2, "InvoiceStatus": 2},
    ),
    (
        """INSERT INTO "Invoices" VALUES (102, 'Carol', 'salad'), (103, 'Dan', 'soup');
        INSERT INTO "InvoiceStatus" VALUES (90, 102, 'pending');
        UPDATE "Invoices" SET item = 'nachos' WHERE "ID" = 100;
        UPDATE "InvoiceStatus" SET status = 'paid' WHERE "ID" = 80;""",
        {"Invoices": 3, "InvoiceStatus": 2},
    ),
    (
        """INSERT INTO "InvoiceStatus" VALUES (77, 103, 'pending');
        UPDATE "InvoiceStatus" SET status = 'shipped' WHERE "ID" = 90;
        UPDATE "Invoices" SET customer = 'Bobby' WHERE "ID" = 101;
        DELETE FROM "Invoices" WHERE "ID" = 100;""",
        {"Invoices": 2, "InvoiceStatus": 2},
    ),
]
TOPICS = ("Invoices", "InvoiceStatus")


def source_connector(pg: Postgres) -> dict[str, str]:
    """Debezium's PostgreSQL source: both tables, topics renamed from
    ``pg.public.<table>`` to ``<table>`` (RegexRouter), no tombstone after a delete."""
    return {
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "tasks.max": "1",
        "database.hostname": "127.0.0.1",
        "database.port": str(pg.port),
        "database.user": pg.user,
        "database.password": "",
        "database.dbname": pg.dbname,
        "topic.prefix": "pg",
        "plugin.name": "pgoutput",
        "publication.autocreate.mode": "filtered",
        "table.include.list": "public.Invoices,public.InvoiceStatus",
        "tombstones.on.delete": "false",
        "transforms": "route",
        "transforms.route.type": "org.apache.kafka.connect.transforms.RegexRouter",
        "transforms.route.regex": r"pg\.public\.(.*)",
        "transforms.route.replacement": "$1",
        "topic.creation.default.replication.factor": "1",
        "topic.creation.default.partitions": "1",
    }


def sink_connector(pg: Postgres) -> dict[str, str]:
    """Debezium's JDBC sink: NewInvoices upserted by its key, a tombstone deletes the
    key's row (``delete.enabled`` needs ``primary.key.mode=record_key``).

    The key is a Connect struct (the worker's JsonConverter with schemas): ``limno
    etl`` keeps a record's key as its JSON text (``{"ID":100}``), which ``kafka to
    --key-format connect`` sends as a struct envelope; the sink's primary key is the
    struct's fields (``ID``)."""
    return {
        "connector.class": "io.debezium.connector.jdbc.JdbcSinkConnector",
        "tasks.max": "1",
        "topics": "NewInvoices",
        "connection.url": pg.jdbc_url,
        "connection.username": pg.user,
        "connection.password": "",
        "insert.mode": "upsert",
        "delete.enabled": "true",
        "primary.key.mode": "record_key",
        # Raw holds both tables' events in one schema: an invoice's `after` has the
        # status table's fields too (null), columns the sink adds to its table
        "schema.evolution": "basic",
        "quote.identifiers": "true",
    }


@dataclass
class Chain:
    """The running parts, the lake and the commands between them."""

    pg: Postgres
    broker: Broker
    connect: Connect
    lake: Path
    say: Callable[[str], None] = print
    #: change events each topic should hold by now
    events: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TOPICS, 0))

    @property
    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(LIMNO_LAKE=str(self.lake), LIMNO_KAFKA_BOOTSTRAP=self.broker.bootstrap)
        env["HOME"] = str(self.lake.parent / "home")
        return env

    def limno(self, *args: str) -> str:
        """Run one limno command to its end; its stdout (its failure: stderr too)."""
        done = subprocess.run(
            [LIMNO, *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT,
            stdin=subprocess.DEVNULL,
        )
        if done.returncode:
            raise RuntimeError(f"limno {' '.join(args)}: exit {done.returncode}\n{done.stderr}")
        return done.stdout

    def spawn(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [LIMNO, *args],
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
            text=True,
        )

    def count(self, pool: str, topic: str) -> int:
        """How many records of ``topic`` the pool's main holds."""
        sql = f"SELECT count(*) AS n FROM \"{pool}\" WHERE kafka.topic = '{topic}'"
        out = self.limno("query", "-f", "csv", sql).split()
        return int(out[-1])

    # the hops, one round's worth each

    def change(self, number: int) -> None:
        sql, made = ROUNDS[number]
        self.pg.execute(sql)
        for topic, n in made.items():
            self.events[topic] += n
        self.say(f"postgres: round {number + 1}: {sum(made.values())} change(s) committed")

    def debezium(self) -> None:
        """Wait until Debezium has put every change so far in its topic."""
        topics = Topics(self.broker)
        deadline = time.monotonic() + HOP_TIMEOUT
        got: dict[str, int] = {}
        while time.monotonic() < deadline:
            got = {t: _count_or_zero(topics, t) for t in TOPICS}
            if got == self.events:
                self.say(f"debezium -> kafka: {_show(got)} event(s) in the topics")
                return
            self.connect._pause()
        raise AssertionError(f"kafka holds {got}, not {self.events}:\n{self.connect.log_tail()}")

    def kafka_from(self) -> None:
        for topic in TOPICS:
            # every event is in the topic already: the sync ends 1 s after the last
            commits = self.limno(*_from_args(topic), "--exit-after", "1s").split()
            self.say(f"limno kafka from {topic}: {len(commits)} commit(s) to Raw")
        held = {t: self.count("Raw", t) for t in TOPICS}
        assert held == self.events, f"Raw holds {held}, the topics {self.events}"
        self.say(f"  Raw holds {_show(held)} record(s), one per event")

    def etl(self) -> int:
        self.limno("etl", CONFIG)
        made = self.count("Staging", "NewInvoices")
        self.say(f"limno etl {Path(CONFIG).name}: Staging holds {made} NewInvoices record(s)")
        return made

    def kafka_to(self) -> None:
        out = self.limno(*_to_args())
        self.say(f"limno kafka to NewInvoices: {out.strip()} message(s) produced")

    def sink(self) -> list[tuple[Any, ...]]:
        """Wait until the sink table equals the join of the source tables."""
        expected = self.pg.rows(EXPECTED)
        deadline = time.monotonic() + HOP_TIMEOUT
        got: list[tuple[Any, ...]] = []
        while time.monotonic() < deadline:
            got = self.pg.rows(SINK)
            if got == expected:
                self.say(f'jdbc sink -> postgres: "NewInvoices" = the join, {len(got)} row(s):')
                for row in got:
                    self.say(f"    {row}")
                return got
            self.connect._pause()
        raise AssertionError(f"sink table {got}\n!= expected {expected}\n{self.connect.log_tail()}")

    def round(self, number: int) -> None:
        """One round of changes through every hop (the first: before the connectors),
        then the seconds each hop took, one after the other: its wait or its command,
        with the count that checks it (the lag under steady load: bench/cdc.py)."""
        if number:
            self.change(number)
        hops: list[tuple[str, Callable[[], object]]] = [
            ("debezium", self.debezium),
            ("kafka from", self.kafka_from),
            ("etl", self.etl),
            ("kafka to", self.kafka_to),
            ("sink", self.sink),
        ]
        took = []
        for name, hop in hops:
            start = time.monotonic()
            hop()
            took.append(f"{name} {time.monotonic() - start:.1f}")
        self.say(f"  seconds per hop: {', '.join(took)}")

    # faults

    def kafka_from_killed(self, topic: str) -> None:
        """A sync of ``topic`` killed (SIGKILL) once its first commit has landed (a batch
        of one record each), then run again to the end."""
        # --exit-after bounds the wait for the first line should the sync find nothing
        proc = self.spawn(*_from_args(topic), "--batch-rows", "1", "--exit-after", "60s")
        try:
            assert proc.stdout is not None
            first = proc.stdout.readline()  # a whole line: the first commit's id
            assert first.strip(), "the sync ended before its first commit"
            proc.send_signal(signal.SIGKILL)
        finally:
            _reap(proc)
        self.say(f"limno kafka from {topic}: killed (SIGKILL) after commit {first.strip()}")

    def etl_killed(self) -> None:
        """``limno etl`` killed (SIGKILL) once it has loaded its engine (DuckDB), that is
        while it reads or writes the pools, then run again."""
        proc = self.spawn("etl", CONFIG)
        try:
            deadline = time.monotonic() + COMMAND_TIMEOUT
            maps = Path(f"/proc/{proc.pid}/maps")
            while proc.poll() is None and time.monotonic() < deadline:
                try:
                    if "duckdb" in maps.read_text():
                        break
                except OSError:
                    break  # exited meanwhile
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(0.02)  # between two looks; ends at once should it exit
            state = "running" if proc.poll() is None else f"ended ({proc.returncode})"
            proc.send_signal(signal.SIGKILL)
        finally:
            _reap(proc)
        self.say(f"limno etl: killed (SIGKILL) with DuckDB loaded (was {state})")


def _from_args(topic: str) -> list[str]:
    return ["kafka", "from", "--topic", topic, "--pool", "Raw", "--format", "connect"]


def _to_args() -> list[str]:
    return ["kafka", "to", "--pool", "Staging", "--topic", "NewInvoices"] + [
        "--source-topic",
        "NewInvoices",
        "--format",
        "connect",
        "--key-format",
        "connect",
    ]


def _reap(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait(60)
    if proc.stdout is not None:
        proc.stdout.close()


def _count_or_zero(topics: Topics, topic: str) -> int:
    try:
        return topics.count(topic)
    except Exception:  # KafkaException: the topic does not exist yet
        return 0


def _show(counts: dict[str, int]) -> str:
    return ", ".join(f"{topic} {n}" for topic, n in counts.items())


@contextmanager
def parts(directory: Path, say: Callable[[str], None] = print) -> Iterator[Chain]:
    """PostgreSQL (the source and sink tables, empty), a broker, a Connect worker and
    a lake: started in ``directory``, stopped after; the connectors not yet made."""
    with ExitStack() as stack:
        started = time.monotonic()
        # a directory of its own: under root the server runs as another user
        pg = stack.enter_context(postgres())
        say(f"postgres: port {pg.port} (wal_level=logical)")
        pg.execute(SOURCE_TABLES + SINK_TABLE)
        broker = start_broker(directory / "kafka")
        stack.callback(broker.stop)
        say(f"kafka: bootstrap {broker.bootstrap}")
        admin = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 0})
        admin.create_topics([NewTopic("NewInvoices", 1, 1)])["NewInvoices"].result(KAFKA_TIMEOUT)
        worker = start_connect(directory / "connect", broker.bootstrap)
        stack.callback(worker.stop)
        say(f"kafka connect: {worker.url} ({time.monotonic() - started:.0f} s to start all)")
        made = Chain(pg, broker, worker, directory / "lake", say)
        made.limno("init")
        yield made


def connectors(made: Chain) -> None:
    """The first round in the source tables, then the source and sink connectors."""
    made.change(0)
    made.connect.create("source", source_connector(made.pg))
    made.connect.create("sink", sink_connector(made.pg))
    made.say("kafka connect: Debezium postgres source and JDBC sink running")


@contextmanager
def chain(directory: Path, say: Callable[[str], None] = print) -> Iterator[Chain]:
    with parts(directory, say) as made:
        connectors(made)
        yield made


def main() -> None:
    """``make cdc-demo``: the rounds through the chain, each hop printed."""
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.default_int_handler)
    started = time.monotonic()

    def say(line: str) -> None:
        print(f"[{time.monotonic() - started:6.1f}s] {line}", flush=True)

    try:
        with tempfile.TemporaryDirectory(prefix="limno-cdc-") as tmp, chain(Path(tmp), say) as made:
            for number in range(len(ROUNDS)):
                say(f"--- round {number + 1} ---")
                made.round(number)
    except (RuntimeError, AssertionError) as e:  # a part failed: its reason, no traceback
        say(f"error: {e}")
        raise SystemExit(1) from None
    except KeyboardInterrupt:
        say("interrupted: all parts stopped")
        raise SystemExit(130) from None
    say("all parts stopped; the sink table matched the join of the source tables each round")


if __name__ == "__main__":
    main()

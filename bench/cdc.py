"""``cdc_lag`` (issue 17): seconds from a PostgreSQL commit to the row in the sink
table, through the whole CDC chain, at a steady rate of source changes.

The chain is the demo's (tests/cdc_chain.py: the same PostgreSQL, broker, Kafka
Connect worker and Debezium connectors, started by the same code), run the way a
deployment runs it, continuously:

* ``limno kafka from --topic Invoices,InvoiceStatus --batch-interval 0.5s``: one
  long-running process; a Raw commit half a second after a batch's first event;
* ``limno etl bench/cdc_lag.yaml``: the CLI has no follow mode, so a loop runs it
  again as soon as the previous run has ended and Raw has a new commit (``kafka
  from`` prints each commit's id as it lands: the trigger);
* ``limno kafka to``: a loop likewise, again after each ETL run that committed.

A driver changes the two source tables at :data:`RATE` change events/s (each 20 ms
tick one transaction) for a warm-up and then the measured window: new invoices with
their first status (two events, one sink row), status updates and invoice updates
of preloaded invoices (one event each), half of the events of each kind. Every
change carries its number and ``clock_timestamp()`` ("change", "changed_at") in its
rows; bench/cdc_lag.yaml carries both to the sink table, where an AFTER trigger
records when the row was written (``clock_timestamp()`` again: one clock). The lag
of a change is that minus ``changed_at``. Reported: p50 and p99 over the window's
changes, the rate the sink sustained in the window (change events whose rows arrived
then, per second) and each hop's p50 (bench/cdc_hops.py). A change still missing from
the sink after the drain counts with the lag it had by then (a lower bound; the note
says how many).

The preloaded invoices are Debezium's snapshot; the driver starts once they are all
in the sink. Updates touch only them, whose join was made long before, so an update
never meets the join it must follow in one ETL run (README: CDC end to end).
Everything started is stopped after, even on failure, each with a bounded wait: the
limno processes, then Connect, the broker and PostgreSQL (tests/service_support.py).
One window per run (``--repeat`` does not apply: repeat the run); the note gives the
load average when the driver starts, stops and the drain ends.
"""

from __future__ import annotations

import bisect
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from bench.cdc_hops import (
    Stamps,
    hop_percentiles,
    produced_times,
    raw_times,
    staged_times,
)
from bench.harness import Config, Result, median, percentile
from bench.kafka import _support, kafka_missing

if TYPE_CHECKING:
    from cdc_chain import Chain
    from postgres_support import Postgres

__all__ = ["cdc_lag", "cdc_missing"]

#: change events per second the driver commits (quick: :data:`QUICK_RATE`); the
#: environment variable LIMNO_CDC_LAG_RATE sets another (to find the rate that keeps up)
RATE = 1000
QUICK_RATE = 200
#: invoices (with their status) in the tables before Debezium starts: full, quick
PRELOAD = (1000, 100)
#: seconds of changes before the window (not measured), and of the window
WARM = (10.0, 2.0)
WINDOW = (60.0, 4.0)
TICK = 0.02
BATCH_INTERVAL = "0.5s"
CONFIG = Path(__file__).with_name("cdc_lag.yaml")
ETL_NAME = "invoices_lag"
#: how long the preload may take to reach the sink, and the window's changes after it
READY_TIMEOUT = 300.0
DRAIN_TIMEOUT = 300.0
#: how long one limno command may run; how long a stopped process may take to exit
COMMAND_TIMEOUT = 300.0
STOP_TIMEOUT = 60.0

_NOW = "extract(epoch FROM clock_timestamp())::float8"
#: the benchmark's columns in the demo's tables, and the sink's arrival log
_SQL = f"""
ALTER TABLE "Invoices" ADD COLUMN change bigint, ADD COLUMN changed_at float8;
ALTER TABLE "InvoiceStatus" ADD COLUMN change bigint, ADD COLUMN changed_at float8;
ALTER TABLE "NewInvoices" ADD COLUMN change bigint, ADD COLUMN changed_at float8;
CREATE TABLE arrivals (change bigint, changed_at float8, arrived float8);
CREATE FUNCTION arrived() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO arrivals VALUES (NEW.change, NEW.changed_at, {_NOW});
  RETURN NULL;
END $$;
CREATE TRIGGER arrived AFTER INSERT OR UPDATE ON "NewInvoices"
  FOR EACH ROW EXECUTE FUNCTION arrived();
"""


def cdc_missing() -> str | None:
    """Why the chain cannot run here (None: it can)."""
    reason = kafka_missing()
    if reason is not None:
        return reason
    _support()  # tests/ on sys.path
    try:
        import connect_support
        import postgres_support

        postgres_support.bin_dir()
    except (ImportError, RuntimeError) as e:
        return str(e)
    jars = connect_support.jars_dir()
    if not any(jars.glob("connect-runtime-*.jar")) or not connect_support.plugins_dir().is_dir():
        return "no Kafka Connect jars: run 'make cdc-setup' (scripts/jars.sh connect)"
    return None


# -- the driver --------------------------------------------------------------------------


@dataclass
class _Window:
    """What the driver did in the measured window."""

    start: float
    end: float
    first: int  # change numbers, both included
    last: int
    events: int
    #: (first change of a transaction, its commit time) of every transaction
    commits: list[tuple[int, float]] = field(default_factory=list)


def events_of(change: int) -> int:
    """Source change events of change number ``change``: 2 for a new invoice (a row in
    each table), 1 for an update."""
    return 2 if change % 3 == 1 else 1


class _Driver:
    """Changes at a steady rate of events, one transaction per tick."""

    def __init__(self, pg: Postgres, rate: int, preload: int) -> None:
        self.pg, self.rate, self.preload = pg, rate, preload
        self.change = 1
        self.events = 0
        self.invoice = preload  # the last invoice id used

    def _statements(self, change: int) -> str:
        target = (change // 3) % self.preload + 1  # a preloaded invoice
        stamp = f"{change}, {_NOW}"
        if change % 3 == 1:
            self.invoice += 1
            i = self.invoice
            return (
                'INSERT INTO "Invoices" ("ID", customer, item, change, changed_at) '
                f"VALUES ({i}, 'c{i}', 'taco', {stamp}); "
                'INSERT INTO "InvoiceStatus" ("ID", "InvoiceID", status, change, changed_at) '
                f"VALUES ({i}, {i}, 'pending', {stamp})"
            )
        table, column = ("InvoiceStatus", "status") if change % 3 == 2 else ("Invoices", "item")
        return (
            f"UPDATE \"{table}\" SET {column} = 'v{change}', change = {change}, "
            f'changed_at = {_NOW} WHERE "ID" = {target}'
        )

    def drive(self, warm: float, window: float, check: Callable[[], None]) -> _Window:
        """Changes for ``warm`` + ``window`` seconds; the window's part of them."""
        start = time.time()
        measured = _Window(start + warm, start + warm + window, 0, 0, 0)
        with self.pg.connect() as conn:
            tick = start
            while (now := time.time()) < measured.end:
                if not measured.first and now >= measured.start:
                    measured.first, measured.events = self.change, -self.events
                due = int(self.rate * (now - start))
                first, sql = self.change, []
                while self.events < due:
                    sql.append(self._statements(self.change))
                    self.events += events_of(self.change)
                    self.change += 1
                if sql:
                    conn.execute("; ".join(sql))
                    conn.commit()
                    if measured.first:
                        measured.commits.append((first, time.time()))
                check()
                tick += TICK
                time.sleep(max(0.0, tick - time.time()))
        measured.last, measured.events = self.change - 1, measured.events + self.events
        measured.end = time.time()
        return measured


# -- the limno processes -----------------------------------------------------------------


@dataclass
class _Run:
    start: float
    end: float
    out: str


class _Loop:
    """A limno command run again each time ``trigger`` is set (once the previous run
    has ended), until ``stop``; sets ``then`` after a run that printed something."""

    def __init__(
        self,
        argv: list[str],
        env: dict[str, str],
        log: Path,
        trigger: threading.Event,
        stop: threading.Event,
        then: threading.Event | None = None,
    ) -> None:
        self.argv, self.env, self.log = argv, env, log
        self.trigger, self.stop, self.then = trigger, stop, then
        self.runs: list[_Run] = []
        self.error: str | None = None
        self.proc: subprocess.Popen[str] | None = None
        self.thread = threading.Thread(target=self._main, name=argv[1], daemon=True)
        self.thread.start()

    def _main(self) -> None:
        try:
            while not self.stop.is_set():
                if self.trigger.wait(0.1):
                    self.trigger.clear()
                    self._once()
        except Exception as e:  # reported by check(); the other parts stop
            self.error = f"limno {' '.join(self.argv[1:3])}: {e}"
            self.stop.set()

    def _once(self) -> None:
        start = time.time()
        with open(self.log, "ab") as err:
            self.proc = subprocess.Popen(
                self.argv, env=self.env, stdout=subprocess.PIPE, stderr=err, text=True
            )
        try:
            out, _ = self.proc.communicate(timeout=COMMAND_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()
            raise RuntimeError(f"did not end in {COMMAND_TIMEOUT:.0f}s") from None
        if self.proc.returncode:
            raise RuntimeError(f"exit {self.proc.returncode}: {_tail(self.log)}")
        self.runs.append(_Run(start, time.time(), out.strip()))
        if self.then is not None and out.strip():
            self.then.set()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(STOP_TIMEOUT)
        if self.thread.is_alive() and self.proc is not None:
            self.proc.kill()
            self.thread.join(STOP_TIMEOUT)


def _tail(log: Path, lines: int = 15) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


class _Limno:
    """``kafka from`` running, the ETL and ``kafka to`` loops behind it."""

    def __init__(self, chain: Chain, directory: Path, stack: ExitStack) -> None:
        from cdc_chain import LIMNO

        env = chain.env
        self.stop = threading.Event()
        raw, staged = threading.Event(), threading.Event()
        self.from_log = directory / "kafka-from.log"
        with open(self.from_log, "ab") as err:
            self.follow = subprocess.Popen(
                [LIMNO, "kafka", "from", "--topic", "Invoices,InvoiceStatus", "--pool", "Raw"]
                + ["--format", "connect", "--batch-interval", BATCH_INTERVAL],
                env=env,
                stdout=subprocess.PIPE,
                stderr=err,
                stdin=subprocess.DEVNULL,
                text=True,
            )
        stack.callback(self._close_follow)
        self.raw_commits: list[float] = []
        self.reader = threading.Thread(target=self._read, args=(raw,), daemon=True)
        self.reader.start()
        etl = [LIMNO, "etl", "--engine", "local", str(CONFIG)]
        self.etl = _Loop(etl, env, directory / "etl.log", raw, self.stop, staged)
        stack.callback(self.etl.close)
        to = [LIMNO, "kafka", "to", "--pool", "Staging", "--topic", "NewInvoices"]
        to += ["--source-topic", "NewInvoices", "--format", "connect"]
        self.to = _Loop(to, env, directory / "kafka-to.log", staged, self.stop)
        stack.callback(self.to.close)

    def _read(self, raw: threading.Event) -> None:
        out: IO[str] | None = self.follow.stdout
        assert out is not None
        for line in out:  # one commit id per line
            if line.strip():
                self.raw_commits.append(time.time())
                raw.set()

    def check(self) -> None:
        """Fails should a limno process have failed."""
        if self.follow.poll() is not None:
            raise RuntimeError(
                f"limno kafka from exited ({self.follow.returncode}): {_tail(self.from_log)}"
            )
        for loop in (self.etl, self.to):
            if loop.error is not None:
                raise RuntimeError(loop.error)

    def _close_follow(self) -> None:
        """SIGTERM (it commits what it gathered), a bounded wait, SIGKILL if needed."""
        self.stop.set()
        if self.follow.poll() is None:
            self.follow.send_signal(signal.SIGTERM)
            try:
                self.follow.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.follow.kill()
                self.follow.wait(STOP_TIMEOUT)
        self.reader.join(STOP_TIMEOUT)
        if self.follow.stdout is not None:
            self.follow.stdout.close()


# -- the run -----------------------------------------------------------------------------


class _TooLong(RuntimeError):
    """A wait's bound passed (its parts all running)."""


def _wait(what: str, done: Callable[[], bool], timeout: float, chain: Chain, limno: _Limno) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        limno.check()
        if time.monotonic() > deadline:
            raise _TooLong(f"cdc_lag: {what} not done in {timeout:.0f}s")
        chain.connect.pause(0.2)  # fails at once should Connect exit


def _count(pg: Postgres, sql: str, *params: Any) -> int:
    return int(pg.rows(sql, params or None)[0][0])


def _produced(bootstrap: str) -> list[tuple[bytes | None, float]]:
    """(value, Kafka timestamp in epoch seconds) of every NewInvoices message."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "cdc-lag", "log_level": 0})
    try:
        end = consumer.get_watermark_offsets(TopicPartition("NewInvoices", 0), 60)[1]
        consumer.assign([TopicPartition("NewInvoices", 0, OFFSET_BEGINNING)])
        got: list[tuple[bytes | None, float]] = []
        deadline = time.monotonic() + 120
        while len(got) < end and time.monotonic() < deadline:
            for m in consumer.consume(10_000, timeout=1.0):
                if m.error() is None:
                    got.append((m.value(), m.timestamp()[1] / 1000))
        return got
    finally:
        consumer.close()


def cdc_lag(cfg: Config) -> list[Result]:
    """p50 and p99 lag, the sustained rate and each hop's p50 (see the module)."""
    _support()
    from cdc_chain import parts, sink_connector, source_connector

    quick = int(cfg.quick)
    rate = int(os.environ.get("LIMNO_CDC_LAG_RATE") or (QUICK_RATE if cfg.quick else RATE))
    preload, warm, window = PRELOAD[quick], WARM[quick], WINDOW[quick]
    started = time.monotonic()

    def say(line: str) -> None:
        print(f"cdc_lag [{time.monotonic() - started:5.0f}s] {line}", file=sys.stderr, flush=True)

    directory = cfg.workdir / "cdc"
    loads: list[tuple[float, float, float]] = []
    with parts(directory, say) as chain, ExitStack() as stack:
        pg = chain.pg
        pg.execute(_SQL)
        pg.execute(
            'INSERT INTO "Invoices" ("ID", customer, item) '
            f"SELECT g, 'c' || g, 'taco' FROM generate_series(1, {preload}) g; "
            'INSERT INTO "InvoiceStatus" ("ID", "InvoiceID", status) '
            f"SELECT g, g, 'pending' FROM generate_series(1, {preload}) g"
        )
        chain.connect.create("source", source_connector(pg))
        chain.connect.create("sink", sink_connector(pg))
        limno = _Limno(chain, directory, stack)
        sink_rows = 'SELECT count(*) FROM "NewInvoices"'
        _wait("the preload", lambda: _count(pg, sink_rows) >= preload, READY_TIMEOUT, chain, limno)
        say(f"{preload} preloaded invoices in the sink; driving {rate} events/s")
        loads.append(os.getloadavg())
        measured = _Driver(pg, rate, preload).drive(warm, window, limno.check)
        loads.append(os.getloadavg())
        say(f"driven: changes {measured.first}-{measured.last} in the window; draining")
        n = measured.last - measured.first + 1
        arrived = "SELECT count(DISTINCT change) FROM arrivals WHERE change BETWEEN %s AND %s"
        with contextlib.suppress(_TooLong):  # what is missing is reported
            _wait(
                "the drain",
                lambda: _count(pg, arrived, measured.first, measured.last) >= n,
                DRAIN_TIMEOUT,
                chain,
                limno,
            )
        drained = time.time()
        loads.append(os.getloadavg())
        stack.close()  # the limno processes, stopped (their runs are kept)
        results = _results(chain, measured, drained, limno, loads)
    say("all parts stopped")
    return results


def _results(
    chain: Chain,
    measured: _Window,
    drained: float,
    limno: _Limno,
    loads: list[tuple[float, float, float]],
) -> list[Result]:
    from limno.api import Lake

    rows = chain.pg.rows(
        "SELECT change, min(changed_at), min(arrived) FROM arrivals "
        "WHERE change IS NOT NULL GROUP BY change"
    )
    first_arrival = {int(c): (float(at), float(got)) for c, at, got in rows}
    window = range(measured.first, measured.last + 1)
    lags = [first_arrival[c][1] - first_arrival[c][0] for c in window if c in first_arrival]
    missing = [c for c in window if c not in first_arrival]
    third = max(1, len(lags) // 3)  # the trend: a chain falling behind lags more and more
    trend = (
        f"{percentile(lags[:third], 50):.2f}/{percentile(lags[-third:], 50):.2f}" if lags else "-"
    )
    firsts = [first for first, _ in measured.commits]
    for c in missing:  # the lag it had at the drain's end: a lower bound
        lags.append(drained - measured.commits[bisect.bisect_right(firsts, c) - 1][1])
    span = measured.end - measured.start
    # the window's events over the time their rows took to arrive (at least the time
    # they took to commit): the offered rate if the chain keeps up, less if it lags
    arrivals = [first_arrival[c][1] for c in window if c in first_arrival]
    delivered = sum(events_of(c) for c in window if c in first_arrival)
    took = max(max(arrivals, default=0) - min(arrivals, default=0), span)
    sustained = delivered / took
    lake = Lake.open(str(chain.lake))
    raw, staged = raw_times(lake), staged_times(lake, ETL_NAME, "NewInvoices")
    produced = produced_times(_produced(chain.broker.bootstrap))
    stamps = {
        c: Stamps(first_arrival[c][0], *raw[c], staged[c], produced[c], first_arrival[c][1])
        for c in window
        if c in first_arrival and c in raw and c in staged and c in produced
    }
    hops50, hops99 = hop_percentiles(stamps, 50), hop_percentiles(stamps, 99)
    etl_runs = [r.end - r.start for r in limno.etl.runs]
    to_runs = [r.end - r.start for r in limno.to.runs]
    note = (
        f"offered {measured.events / span:.0f} change events/s for {span:.0f} s "
        f"({len(window)} changes), {len(missing)} not in the sink after the drain; "
        f"p50 first/last third of the window {trend} s; load average "
        + " -> ".join(f"{a:.1f}" for a, _, _ in loads)
        + f"; etl: {len(etl_runs)} runs, median {median(etl_runs or [0]):.2f} s; "
        f"kafka to: {len(to_runs)} runs, median {median(to_runs or [0]):.2f} s; "
        f"kafka from: {len(limno.raw_commits)} commits; hop p99 "
        + ", ".join(f"{h} {v:.2f}" for h, v in hops99.items())
    )
    out = [
        Result("cdc_lag", "p50", "s", percentile(lags, 50), {}, False, note),
        Result("cdc_lag", "p99", "s", percentile(lags, 99), {}, False),
        Result("cdc_lag", "sustained", "events/s", sustained, {}, True),
    ]
    out += [Result("cdc_lag", f"p50_{h}", "s", v, {}, False) for h, v in hops50.items()]
    return out

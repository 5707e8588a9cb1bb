"""``cdc_lag`` (issue 17): seconds from a PostgreSQL commit to the row in the sink
table, through the whole CDC chain, at a steady rate of source changes.

The chain is the demo's (tests/cdc_chain.py: the same PostgreSQL, broker, Kafka
Connect worker and Debezium connectors, started by the same code), run the way a
deployment runs it, continuously:

* ``limno kafka from --topic Invoices,InvoiceStatus --batch-interval 0.5s``: one
  long-running process; a Raw commit half a second after a batch's first event;
* ``limno etl bench/cdc_lag.yaml --follow``: one long-running process that runs the
  rules again whenever Raw has a new commit (it looks at Raw's head every
  :data:`INTERVAL`);
* ``limno kafka to --follow``: likewise, on each new commit of Staging.

``LIMNO_CDC_LAG_LOOPS=1`` runs the peer instead, how this benchmark ran before follow
mode: ``etl`` and ``kafka to`` one-shot, a new process per run, again after each new
commit before them (the CPU seconds of those runs are counted as they end).

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
import itertools
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
#: how often ``etl --follow`` and ``kafka to --follow`` look at the heads they read
INTERVAL = "200ms"
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
        self.cpu_start: list[float] = []

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

    def drive(
        self,
        warm: float,
        window: float,
        check: Callable[[], None],
        cpu: Callable[[], list[float]],
    ) -> _Window:
        """Changes for ``warm`` + ``window`` seconds; the window's part of them
        (``cpu()`` is kept in ``cpu_start`` as the window starts)."""
        start = time.time()
        measured = _Window(start + warm, start + warm + window, 0, 0, 0)
        with self.pg.connect() as conn:
            tick = start
            while (now := time.time()) < measured.end:
                if not measured.first and now >= measured.start:
                    measured.first, measured.events = self.change, -self.events
                    self.cpu_start = cpu()
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


class _Follower:
    """A long-running limno command: each whole line it prints on stdout (a commit id,
    or a count of messages produced) stamped as it comes; stopped by SIGTERM (it ends
    its run in progress and exits 0), a bounded wait, SIGKILL if needed."""

    def __init__(self, argv: list[str], env: dict[str, str], log: Path) -> None:
        self.argv, self.log = argv, log
        with open(log, "ab") as err:
            self.proc = subprocess.Popen(
                argv,
                env=env,
                stdout=subprocess.PIPE,
                stderr=err,
                stdin=subprocess.DEVNULL,
                text=True,
            )
        self.lines: list[float] = []  # when each line came
        self.reader = threading.Thread(target=self._read, name=argv[1], daemon=True)
        self.reader.start()

    def _read(self) -> None:
        out: IO[str] | None = self.proc.stdout
        assert out is not None
        for line in out:
            if line.strip():
                self.lines.append(time.time())

    def check(self) -> None:
        if self.proc.poll() is not None:
            raise RuntimeError(
                f"limno {' '.join(self.argv[1:3])} exited ({self.proc.returncode}): "
                f"{_tail(self.log)}"
            )

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(STOP_TIMEOUT)
        self.reader.join(STOP_TIMEOUT)
        if self.proc.stdout is not None:
            self.proc.stdout.close()

    def cpu(self) -> float:
        """CPU seconds (user + system) the process has used so far (0: it has ended)."""
        try:
            fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class _Looped:
    """The peer of :class:`_Follower` (``LIMNO_CDC_LAG_LOOPS=1``: how this benchmark
    ran before follow mode): the one-shot command, a new process each time, run
    again whenever ``upstream`` has printed a line since its previous run began."""

    def __init__(
        self, argv: list[str], env: dict[str, str], log: Path, upstream: _Follower | _Looped
    ) -> None:
        self.argv, self.env, self.log, self.upstream = argv, env, log, upstream
        self.lines: list[float] = []
        self.used = 0.0  # CPU seconds of the runs that ended
        self.error: str | None = None
        self.proc: subprocess.Popen[str] | None = None
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._main, name=argv[1], daemon=True)
        self.thread.start()

    def _main(self) -> None:
        seen = 0
        try:
            while not self.stop.is_set():
                if len(self.upstream.lines) == seen:
                    self.stop.wait(0.05)
                    continue
                seen = len(self.upstream.lines)
                self._once()
        except Exception as e:  # reported by check(); the other parts stop
            self.error = f"limno {' '.join(self.argv[1:3])}: {e}"

    def _once(self) -> None:
        with open(self.log, "ab") as err:
            self.proc = proc = subprocess.Popen(
                self.argv, env=self.env, stdout=subprocess.PIPE, stderr=err, text=True
            )
        assert proc.stdout is not None
        out = proc.stdout.read()
        proc.stdout.close()
        _, status, usage = os.wait4(proc.pid, 0)  # waited here: its CPU time
        proc.returncode = os.waitstatus_to_exitcode(status)
        self.used += usage.ru_utime + usage.ru_stime
        if proc.returncode:
            raise RuntimeError(f"exit {proc.returncode}: {_tail(self.log)}")
        if out.strip() not in ("", "0"):
            self.lines.append(time.time())

    def check(self) -> None:
        if self.error is not None:
            raise RuntimeError(self.error)

    def cpu(self) -> float:
        return self.used

    def close(self) -> None:
        self.stop.set()
        self.thread.join(STOP_TIMEOUT)
        if self.thread.is_alive() and self.proc is not None:
            self.proc.kill()
            self.thread.join(STOP_TIMEOUT)


def _gaps(lines: list[float]) -> list[float]:
    """Seconds between two lines in a row: a run's length while it is busy."""
    return [b - a for a, b in itertools.pairwise(lines)]


def _tail(log: Path, lines: int = 15) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


class _Limno:
    """The three limno commands, each one long-running process: ``kafka from``, then
    ``etl --follow`` and ``kafka to --follow``, which run on each new commit of the
    pool before them."""

    def __init__(self, chain: Chain, directory: Path, stack: ExitStack) -> None:
        from cdc_chain import LIMNO

        env = chain.env
        #: CPU seconds of each process in the measured window (see :meth:`cpu`), and
        #: in the whole run once drained, with the number of source events then
        self.cpu_window: list[float] = []
        self.cpu_total: list[float] = []
        self.events_total = 0
        self.raw = self._start(
            [LIMNO, "kafka", "from", "--topic", "Invoices,InvoiceStatus", "--pool", "Raw"]
            + ["--format", "connect", "--batch-interval", BATCH_INTERVAL],
            env,
            directory / "kafka-from.log",
            stack,
        )
        etl = [LIMNO, "etl", "--engine", "local", str(CONFIG)]
        to = [LIMNO, "kafka", "to", "--pool", "Staging", "--topic", "NewInvoices"]
        to += ["--source-topic", "NewInvoices", "--format", "connect", "--key-format", "connect"]
        self.loops = bool(os.environ.get("LIMNO_CDC_LAG_LOOPS"))
        self.etl: _Follower | _Looped
        self.to: _Follower | _Looped
        if self.loops:
            self.etl = _Looped(etl, env, directory / "etl.log", self.raw)
            stack.callback(self.etl.close)
            self.to = _Looped(to, env, directory / "kafka-to.log", self.etl)
            stack.callback(self.to.close)
        else:
            follow = ["--follow", "--interval", INTERVAL]
            self.etl = self._start(etl + follow, env, directory / "etl.log", stack)
            self.to = self._start(to + follow, env, directory / "kafka-to.log", stack)

    @staticmethod
    def _start(argv: list[str], env: dict[str, str], log: Path, stack: ExitStack) -> _Follower:
        follower = _Follower(argv, env, log)
        stack.callback(follower.close)  # stopped in reverse: kafka to, etl, kafka from
        return follower

    def check(self) -> None:
        """Fails should a limno process have exited."""
        for follower in (self.raw, self.etl, self.to):
            follower.check()

    def cpu(self) -> list[float]:
        """CPU seconds so far of ``kafka from``, ``etl`` and ``kafka to``."""
        return [f.cpu() for f in (self.raw, self.etl, self.to)]


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
        driver = _Driver(pg, rate, preload)
        measured = driver.drive(warm, window, limno.check, lambda: limno.cpu())
        loads.append(os.getloadavg())
        limno.cpu_window = [b - a for a, b in zip(driver.cpu_start, limno.cpu(), strict=True)]
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
        limno.cpu_total = limno.cpu()  # everything passed through: the whole run's cost
        limno.events_total = 2 * preload + driver.events
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
    etl_gaps, to_gaps = _gaps(limno.etl.lines), _gaps(limno.to.lines)
    note = (
        (
            "etl and kafka to in loops of new processes (LIMNO_CDC_LAG_LOOPS); "
            if limno.loops
            else ""
        )
        + f"offered {measured.events / span:.0f} change events/s for {span:.0f} s "
        f"({len(window)} changes), {len(missing)} not in the sink after the drain; "
        f"p50 first/last third of the window {trend} s; load average "
        + " -> ".join(f"{a:.1f}" for a, _, _ in loads)
        + f"; etl: {len(limno.etl.lines)} commits, median gap {median(etl_gaps or [0]):.2f} s; "
        f"kafka to: {len(limno.to.lines)} producing runs, median gap "
        f"{median(to_gaps or [0]):.2f} s; kafka from: {len(limno.raw.lines)} commits; "
        "CPU s per 1,000 window events (kafka from, etl, kafka to): "
        + ", ".join(f"{c * 1000 / max(1, measured.events):.3f}" for c in limno.cpu_window)
        + "; whole run (start-up, preload, drain): "
        + ", ".join(f"{c * 1000 / max(1, limno.events_total):.3f}" for c in limno.cpu_total)
        + "; hop p99 "
        + ", ".join(f"{h} {v:.2f}" for h, v in hops99.items())
    )
    out = [
        Result("cdc_lag", "p50", "s", percentile(lags, 50), {}, False, note),
        Result("cdc_lag", "p99", "s", percentile(lags, 99), {}, False),
        Result("cdc_lag", "sustained", "events/s", sustained, {}, True),
    ]
    out += [Result("cdc_lag", f"p50_{h}", "s", v, {}, False) for h, v in hops50.items()]
    return out

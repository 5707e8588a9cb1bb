"""One ``limno etl`` run: new input records through the rules, into the output pool, once.

1. The config's state (:mod:`.state`) is read from the output branch (a missing
   output pool is created, keyed on ``kafka.offset`` like the pools ``kafka from``
   makes).
2. Each input pool's branch is read; the engine picks the records not consumed yet
   and the pending ones, and runs the rules: DuckDB in this process (:mod:`.local`)
   or Spark (:mod:`.spark`), same definitions, same answers. ``auto`` picks Spark
   from ``$LIMNO_SPARK_THRESHOLD`` (1 GiB) of input branch objects on
   (:func:`limno.engines.choice.use_spark`).
3. With no new input record, nothing is committed. Otherwise the output records and
   the new state are ONE commit of the output branch: a crash before it leaves the
   pool as it was (the rerun does the same work again), after it the work is done.

One run of a config at a time per output branch: before committing, the state is
read again, and a run that finds another's commit stops with a ConflictError
instead of committing what the other wrote too (a commit landing in the moment
between that check and ours is not caught).

A local run reads of its input branches only what it needs (:mod:`.reads`: key
ranges from the ``consumed`` marks, pending records by key), so its cost follows the
new records, not the raw pools.

:func:`follow_etl` (``limno etl --follow``) runs the config again in this process
each time an input branch moves (:mod:`limno.streams.follow`): the same runs, so the
same exactly-once semantics, without a process start per run. Each run reads the
state and the heads anew, so another writer's commits are seen.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from limno.engines.choice import use_spark
from limno.errors import ConflictError, InvalidInputError, NotFoundError
from limno.etl.config import Config
from limno.etl.state import Read, State, read_state
from limno.streams.follow import DEFAULT_INTERVAL, follow

if TYPE_CHECKING:
    from limno.api import Lake, Pool
    from limno.core.commits import Commit

__all__ = ["POOL_KEY", "RunReport", "follow_etl", "run_etl"]

#: the key of an output pool the ETL creates
POOL_KEY = "kafka.offset"


@dataclass
class RunReport:
    """What a run did: its commit (None: no new input), records read and written."""

    commit: Commit | None
    new_events: int
    outputs: dict[str, int]
    pending: int
    engine: str


def _output_pool(lake: Lake, config: Config, log: Callable[[str], None]) -> Pool:
    """The output pool, created when missing; one keyed otherwise is refused: the
    output records are written in ``kafka.offset`` order, and read back by it."""
    name = config.output_pool[0]
    try:
        pool = lake.pool(name)
    except NotFoundError:
        log(f"etl: creating pool {name} (key {POOL_KEY})")
        return lake.create_pool(name, POOL_KEY)
    key = (pool.config.key or "").replace(" ", "")
    if pool.config.kind != "records" or key != POOL_KEY:
        what = f"keyed on {key}" if pool.config.kind == "records" else "a file pool"
        problem = f"pool {name} is {what}: an ETL writes to a records pool keyed on {POOL_KEY}"
        place = config.outputs[0].place
        raise place.error(problem) if place else InvalidInputError(f"etl: {problem}")
    return pool


def _size(lake: Lake, config: Config) -> int:
    """The bytes of the input branches (what ``auto`` decides on)."""
    refs = {(i.pool, i.branch) for i in config.inputs}
    return sum(o.size for pool, branch in refs for o in lake.pool(pool).objects(branch))


def run_etl(
    lake: Lake,
    config: Config,
    *,
    engine: str = "auto",
    author: str | None = None,
    log: Callable[[str], None] = lambda _: None,
) -> RunReport:
    """Run ``config`` once on ``lake`` (see the module's docstring)."""
    pool_name, branch = config.output_pool
    pool = _output_pool(lake, config, log)
    state = read_state(pool, branch, config.name)
    chosen = (
        "spark" if use_spark(engine, _size(lake, config) if engine == "auto" else 0) else "local"
    )
    read: Read = {}  # what was read where (a local run's hint for the next one)
    if chosen == "spark":
        from limno.etl import spark  # PySpark loads only for a run on Spark

        result = spark.evaluate_lake(lake, config, state)
    else:
        from limno.etl import local, reads  # DuckDB loads with the run, not with the CLI

        sources, read = reads.read_inputs(lake, config, state)
        result = local.evaluate(config, state, sources)
    waiting = sum(len(v) for v in result.pending.values())
    if not result.new_events:
        log(f"etl {config.name}: no new input records; nothing committed")
        return RunReport(None, 0, {}, waiting, chosen)
    if not result.records.num_rows:
        # A commit needs something to add, and the state rides on the output's commit.
        # Committing nothing leaves these records unconsumed: the next run takes them
        # again with whatever came since (a partner that arrives then joins as if they
        # had waited as pending), so nothing is lost and nothing is made twice.
        log(
            f"etl {config.name}: {result.new_events} input record(s) made no output yet "
            f"({waiting} wait for a partner); nothing committed, they are read again next run"
        )
        return RunReport(None, 0, {}, waiting, chosen)
    after = State(result.consumed, result.pending, result.next, read=read)
    if read_state(pool, branch, config.name).commit != state.commit:
        raise ConflictError(
            f"etl {config.name}: {pool_name}@{branch} got a commit of another run of it "
            "meanwhile: stopped (one run of a config at a time)"
        )
    made = ", ".join(f"{n} to {t}" for t, n in result.outputs.items()) or "no output"
    commit = pool.load(
        [result.records],
        branch=branch,
        message=f"etl {config.name}: {result.new_events} input record(s): {made}",
        author=author,
        meta=after.meta(config.name),
    )
    log(
        f"etl {config.name}: {commit.id} {result.new_events} input record(s), {made}, "
        f"{waiting} pending"
    )
    return RunReport(commit, result.new_events, result.outputs, waiting, chosen)


def follow_etl(
    lake: Lake,
    config: Config,
    *,
    engine: str = "auto",
    author: str | None = None,
    log: Callable[[str], None] = lambda _: None,
    on_run: Callable[[RunReport], None] = lambda _: None,
    stop: threading.Event | None = None,
    interval: float = DEFAULT_INTERVAL,
    exit_after: float | None = None,
) -> int:
    """:func:`run_etl` again each time an input branch's head moves, until ``stop`` (a
    run in progress ends first) or ``exit_after`` seconds without a run that committed;
    ``on_run`` hears of each run. How many runs there were."""
    refs = sorted({(i.pool, i.branch) for i in config.inputs})
    missing: set[str] = set()
    runs, seen = [0], [""]

    def heads() -> tuple[str, ...] | None:
        found = []
        for name, branch in refs:
            try:
                found.append(lake.pool(name).resolve(branch))
            except NotFoundError:
                if name not in missing:  # said once: an input not made yet is waited for
                    missing.add(name)
                    log(f"etl {config.name}: waiting for {name}@{branch}")
                return None
        seen[0] = ", ".join(found)
        return tuple(found)

    def step() -> bool:
        runs[0] += 1  # said before the run: an operator (or a test) sees one begin
        log(f"etl {config.name}: run {runs[0]} (input at {seen[0]})")
        report = run_etl(lake, config, engine=engine, author=author, log=log)
        on_run(report)
        return report.commit is not None

    return follow(
        heads, step, stop=stop or threading.Event(), interval=interval, exit_after=exit_after
    )

"""One ``limno etl`` run: new input records through the rules, into the output pool, once.

1. The config's state (:mod:`.state`) is read from the output branch (a missing
   output pool is created, keyed on ``kafka.offset`` like the pools ``kafka from``
   makes).
2. Each input pool's branch is read; the engine picks the records not consumed yet
   and the pending ones, and runs the rules (:mod:`.local`).
3. With no new input record, nothing is committed. Otherwise the output records and
   the new state are ONE commit of the output branch: a crash before it leaves the
   pool as it was (the rerun does the same work again), after it the work is done.

One run of a config at a time per output branch: before committing, the state is
read again, and a run that finds another's commit stops with a ConflictError
instead of committing what the other wrote too (a commit landing in the moment
between that check and ours is not caught).

Each run reads the input branches whole and filters them (a partition added to a
topic later starts at offset 0, which a lower bound would skip): the cost of a run
grows with the raw pools.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa

from limno.engines.choice import use_spark
from limno.errors import ConflictError, NotFoundError
from limno.etl.config import Config
from limno.etl.state import State, read_state

if TYPE_CHECKING:
    from limno.api import Lake, Pool
    from limno.core.commits import Commit

__all__ = ["POOL_KEY", "RunReport", "run_etl"]

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


def _output_pool(lake: Lake, name: str, log: Callable[[str], None]) -> Pool:
    try:
        return lake.pool(name)
    except NotFoundError:
        log(f"etl: creating pool {name} (key {POOL_KEY})")
        return lake.create_pool(name, POOL_KEY)


def _size(lake: Lake, config: Config) -> int:
    """The bytes of the input branches (what ``auto`` decides on)."""
    refs = {(i.pool, i.branch) for i in config.inputs}
    return sum(o.size for pool, branch in refs for o in lake.pool(pool).objects(branch))


def _sources(lake: Lake, config: Config) -> dict[str, pa.Table]:
    """Each input pool@branch's records, read once, in this process."""
    tables: dict[str, pa.Table] = {}
    for source in config.inputs:
        if source.ref not in tables:
            tables[source.ref] = lake.pool(source.pool).scan(source.branch)
    return tables


def _spark_sources(lake: Lake, config: Config, state: State) -> dict[str, pa.Table]:
    """Each input pool@branch's new and pending records of the input topics, kept by
    Spark (a native scan of the branch's objects) and brought here as Arrow."""
    tables: dict[str, pa.Table] = {}
    for source in config.inputs:
        if source.ref in tables:
            continue
        name = "`" + source.ref.replace("`", "``") + "`"
        schemas = [o.schema for o in lake.pool(source.pool).objects(source.branch)]
        kafkas = [s.field("kafka").type for s in schemas if "kafka" in s.names]
        if not kafkas:  # no records yet
            tables[source.ref] = pa.table({})
            continue
        partitioned = any(k.get_field_index("partition") >= 0 for k in kafkas)
        topics = [i.topic for i in config.inputs if i.ref == source.ref]
        keep = " OR ".join(_spark_keep(t, state, partitioned) for t in topics)
        tables[source.ref] = lake.query(f"SELECT * FROM {name} WHERE {keep}", engine="spark")
    return tables


def _spark_keep(topic: str, state: State, partitioned: bool) -> str:
    """Spark SQL: a record of ``topic`` above its partition's mark, or pending."""
    text = topic.replace("\\", "\\\\").replace("'", "\\'")
    part = "coalesce(kafka.`partition`, 0)" if partitioned else "0"
    off = "kafka.`offset`"
    marks = state.consumed.get(topic, {})
    new = "true"
    if marks:
        cases = " ".join(f"WHEN {part} = {p} THEN {off} > {o}" for p, o in marks.items())
        new = f"CASE {cases} ELSE true END"
    waiting = sorted({f"'{p}:{o}'" for e in state.pending.values() for t, p, o in e if t == topic})
    if waiting:
        new += f" OR concat({part}, ':', {off}) IN ({', '.join(waiting)})"
    return f"(kafka.topic = '{text}' AND ({new}))"


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
    pool = _output_pool(lake, pool_name, log)
    state = read_state(pool, branch, config.name)
    chosen = (
        "spark" if use_spark(engine, _size(lake, config) if engine == "auto" else 0) else "local"
    )
    sources = _spark_sources(lake, config, state) if chosen == "spark" else _sources(lake, config)
    from limno.etl import local  # DuckDB loads with the run, not with the CLI

    result = local.evaluate(config, state, sources)
    waiting = sum(len(v) for v in result.pending.values())
    if not result.new_events:
        log(f"etl {config.name}: no new input records; nothing committed")
        return RunReport(None, 0, {}, waiting, chosen)
    after = State(result.consumed, result.pending, result.next)
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

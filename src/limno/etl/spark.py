"""The Spark engine of ``limno etl``: the rules of :mod:`.local`, evaluated by Spark.

The definitions are the local engine's (its docstring is the reference): per input
topic, the new records (above their partition's ``consumed`` mark) and the pending
ones, numbered ``_etl_seq`` in input order (the same packed BIGINT); ``where``
filters a topic's records, ``join-on`` pairs a denorm's left and right records
(those that find no partner wait), ``select`` shapes each record or pair. Here all
of that runs on Spark DataFrames; what comes back to the driver is what the run
commits: each rule's output rows and, for a denorm, its sides' sequence numbers
(what is left unpaired waits). The output rows are numbered into output records by
the code both engines share (:func:`.common.records`) and a non-text key becomes
JSON with DuckDB's ``to_json`` as there, so both engines give identical records,
offsets and state wherever their SQL agrees (``tests/etl/test_etl_engines.py``).

The config's SQL is DuckDB's. Each fragment is translated to Spark SQL with sqlglot
(``read="duckdb", write="spark"``), one fragment at a time, wrapped in a one-table
``SELECT`` so that it stays an expression (or a select list). A fragment sqlglot
cannot translate, or that Spark cannot analyze or run, is an
:class:`~limno.errors.InvalidInputError` naming its line and field, like the local
engine's SQL errors.

Reading: on a lake in this process, each input pool@branch is Spark's own scan of
its objects (:func:`limno.engines.spark.read`: native Parquet, limno's
merge-on-read in tasks where the pool needs it). On a served lake the objects are
the server's: its DuckDB keeps the new and pending records of the input topics
(one ``query`` there, streamed as Arrow) and they come into Spark from here.

A run is three Spark jobs: an aggregate of the pools' kept records per input and
partition (counts and offsets: the new marks and the checks; a few rows to the
driver, not the records), the denorm rules' sides (their ``_etl_seq``), every
rule's outputs (one union, each rule's ``key``/``value`` in columns of its own).
The unpaired records of a denorm are found on the driver from its sides'
``_etl_seq`` and the pairs': anti joins in Spark (which would save the sides' job)
cost more CPU on the 1M-event benchmark than they save.
A pool's kept records are cached for the run when some of its topics were consumed
before (few are kept: the pool is read once); in a first run they are all kept, and
reading the pool again is cheaper than caching it.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from limno.errors import InvalidInputError, LimnoError
from limno.etl.common import Result, check_inputs, check_orderable, quote_tables, records, unpack
from limno.etl.config import Config, Denorm, Place, Rule, Stateless, rule_field
from limno.etl.state import State

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from limno.api import Lake

__all__ = ["evaluate", "evaluate_lake", "frames", "to_spark_sql"]

#: the columns of a rule's output rows that the local engine's numbering reads
_ORDER = ("_etl_at", "_etl_other", "_etl_time")


def to_spark_sql(sql: str, place: Place, select: bool = False) -> list[str]:
    """DuckDB's ``sql`` (an expression, or with ``select`` a select list) as Spark SQL
    (one item per select-list entry); errors name ``place``."""
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import ErrorLevel, SqlglotError

    text = quote_tables(sql)
    wrapped = f"SELECT {text} FROM _etl" if select else f"SELECT 1 FROM _etl WHERE ({text})"
    try:
        trees = sqlglot.parse(wrapped, read="duckdb")
        tree = trees[0] if len(trees) == 1 else None
        source = tree.args.get("from_") if isinstance(tree, exp.Select) else None
        clauses = {k for k, v in tree.args.items() if v} if tree is not None else set()
        if (
            not isinstance(tree, exp.Select)
            or source is None
            or source.sql() != "FROM _etl"
            or clauses - {"expressions", "from_", "where"}
        ):
            raise place.error("not one SQL " + ("select list" if select else "expression"))
        parts = tree.expressions if select else [tree.args["where"].this]
        return [p.sql(dialect="spark", unsupported_level=ErrorLevel.RAISE) for p in parts]
    except SqlglotError as e:
        problem = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise place.error(f"cannot be translated to Spark SQL: {problem}") from None


@contextlib.contextmanager
def _named(place: Place) -> Iterator[None]:
    """A Spark error in the block as an error of the config field at ``place``."""
    from limno.engines.spark._session import spark_error

    try:
        yield
    except LimnoError:
        raise
    except Exception as e:
        translated = spark_error(e, "Spark", sql=True)
        if isinstance(translated, InvalidInputError):
            raise place.error(str(translated)) from None
        if translated is e:
            raise
        raise translated from e


def _packed(part: Column, offset: Column) -> Column:
    from pyspark.sql import functions as F

    return F.shiftleft(part, 44).bitwiseOR(offset)


def _events(df: DataFrame, topics: Mapping[int, str], state: State) -> DataFrame:
    """``df``'s records of ``topics`` (by input index) that are new or pending in
    some rule, with the local engine's columns ``_etl_partition``, ``_etl_offset``,
    ``_etl_ts``, ``_etl_new``, ``_etl_seq`` (bit 62 new, 6 bits of input, 12 of
    partition, 44 of offset; ORed, so nothing overflows before the limits are
    checked) and ``_etl_input``: one scan of the pool for all its topics."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    kafka = F.col("kafka")
    kind = df.schema["kafka"].dataType
    names = kind.fieldNames() if isinstance(kind, StructType) else []
    zero = F.lit(0).cast("long")
    part = (
        F.coalesce(kafka.getField("partition").cast("long"), zero) if "partition" in names else zero
    )
    offset = kafka.getField("offset").cast("long")
    ts = kafka.getField("timestamp") if "timestamp" in names else F.lit(None).cast("timestamp")
    topic, packed = kafka.getField("topic"), _packed(part, offset)
    which: Column = F.lit(None).cast("int")
    old, waiting = F.lit(False), F.lit(False)
    for i, name in topics.items():
        mine = topic == F.lit(name)
        which = F.when(mine, F.lit(i)).otherwise(which)
        for p, last in state.consumed.get(name, {}).items():
            old = old | (mine & (part == p) & (offset <= last))
        waits = {(p << 44) | o for ev in state.pending.values() for t, p, o in ev if t == name}
        if waits:
            waiting = waiting | (mine & packed.isin(sorted(waits)))
    new = F.coalesce(~old, F.lit(True))  # a record without offset: kept, then refused
    base = (
        F.when(new, F.lit(1 << 62))
        .otherwise(F.lit(0))
        .bitwiseOR(F.shiftleft(which.cast("long"), 56))
    )
    rows = df.filter(topic.isin(list(topics.values()))).filter(new | waiting)
    return rows.select(
        "*",
        part.alias("_etl_partition"),
        offset.alias("_etl_offset"),
        ts.alias("_etl_ts"),
        new.alias("_etl_new"),
        base.bitwiseOR(packed).alias("_etl_seq"),
        which.alias("_etl_input"),
    )


def _plain(t: pa.DataType) -> pa.DataType:
    """``t`` as the local engine's DuckDB gives it back: small offsets, nullable fields."""
    if pa.types.is_large_string(t):
        return pa.string()
    if pa.types.is_large_binary(t):
        return pa.binary()
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _plain(f.type)) for f in t])
    if pa.types.is_large_list(t) or pa.types.is_list(t):
        return pa.list_(_plain(t.value_type))
    if pa.types.is_map(t):
        return pa.map_(_plain(t.key_type), _plain(t.item_type))
    return t


def _as_records(table: pa.Table) -> pa.Table:
    """A rule's rows as the local engine shapes them: ``key`` as text (non-text keys
    as DuckDB's ``to_json``, exactly as there), DuckDB's types."""
    key = table.column("key")
    if pa.types.is_string(key.type) or pa.types.is_large_string(key.type):
        text = key.cast(pa.string())
    else:
        import duckdb

        db = duckdb.connect()
        try:
            db.register("k", pa.table({"key": key}))
            text = db.sql("SELECT to_json(key)::VARCHAR AS key FROM k").to_arrow_table()["key"]
        finally:
            db.close()
    table = table.set_column(table.schema.get_field_index("key"), "key", text)
    return table.cast(pa.schema([pa.field(f.name, _plain(f.type)) for f in table.schema]))


def _union(parts: list[DataFrame]) -> DataFrame:
    """One DataFrame of ``parts`` (a column some lack: null there)."""
    return functools.reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), parts)


def _side_seqs(table: pa.Table, side: int) -> np.ndarray:
    seqs = table.filter(pc.equal(table["_etl_side"], side))["_etl_seq"]
    return np.asarray(seqs.to_numpy(), dtype=np.int64)


class _Run:
    """One run's Spark work in three jobs: the topics' kept records (cached when
    few; their marks and checks, aggregated), the denorm rules' sides, every rule's
    outputs."""

    def __init__(self, config: Config, state: State, sources: Mapping[str, DataFrame | None]):
        self.config, self.state, self.sources = config, state, sources
        self.events: dict[str, DataFrame] = {}
        self.cached: list[DataFrame] = []
        self.consumed = {t: dict(parts) for t, parts in state.consumed.items()}
        self.new_events = 0
        self.spark_sql: dict[tuple[int, str], list[str]] = {}

    def translated(self, rule: Rule, name: str) -> list[str]:
        if (rule.index, name) not in self.spark_sql:
            sql = {"where": rule.where, "select": rule.select}.get(name)
            if sql is None:
                assert isinstance(rule, Denorm)
                sql = rule.join_on
            found = to_spark_sql(sql, rule_field(rule, name), select=name == "select")
            self.spark_sql[rule.index, name] = found
        return self.spark_sql[rule.index, name]

    def load_events(self) -> None:
        """Each input pool's kept records (cached when some were consumed before);
        per input and partition, their count, offsets and missing offsets (one small
        aggregate for all pools) give the new marks and the checks."""
        from pyspark.sql import functions as F

        from limno.engines.spark._session import translate_errors

        check_inputs(len(self.config.inputs))
        parts: list[DataFrame] = []
        for ref, df in self.sources.items():
            topics = {i: s.topic for i, s in enumerate(self.config.inputs) if s.ref == ref}
            if df is None or not topics or not {"kafka", "key"} <= set(df.columns):
                continue
            kept = _events(df, topics, self.state)
            if any(self.state.consumed.get(t) for t in topics.values()):
                # a later run keeps few of the records: cached, the pool is read once;
                # a first run keeps them all, and caching costs more than reading again
                kept = kept.cache()
                self.cached.append(kept)
            for i, topic in topics.items():
                self.events[topic] = kept.filter(F.col("_etl_input") == i)
            parts.append(kept.select("_etl_input", "_etl_partition", "_etl_offset", "_etl_new"))
        if not parts:
            return
        new, offset = F.col("_etl_new"), F.col("_etl_offset")
        marks = (
            _union(parts)
            .groupBy("_etl_input", "_etl_partition")
            .agg(
                F.count(F.when(new, 1)).alias("new"),
                F.max(F.when(new, offset)).alias("last"),
                F.max(offset).alias("top"),
                F.count(F.when(offset.isNull(), 1)).alias("nulls"),
            )
        )
        with translate_errors("etl"):
            table = marks.toArrow()
        inputs = table["_etl_input"].to_numpy()
        for i, source in enumerate(self.config.inputs):
            if source.topic in self.events:
                self.count(source.topic, table.filter(pa.array(inputs == i)))
                if not (inputs == i).any():
                    # nothing new nor waiting: absent, as a topic never seen is (the
                    # pool's schema may not hold this topic's fields yet, which rules name)
                    del self.events[source.topic]

    def count(self, topic: str, marks: pa.Table) -> None:
        """A topic's new marks and count from its per-partition aggregate ``marks``."""
        if pc.sum(marks["nulls"]).as_py():
            raise InvalidInputError(f"etl: topic {topic}: records without kafka.offset")
        if marks.num_rows:
            top = pc.max(marks["top"]).as_py()
            check_orderable(topic, pc.max(marks["_etl_partition"]).as_py(), top)
        for row in marks.filter(pc.greater(marks["new"], 0)).to_pylist():
            self.new_events += int(row["new"])
            self.consumed.setdefault(topic, {})[int(row["_etl_partition"])] = int(row["last"])

    def side(self, rule: Rule, topic: str, pending: bool) -> DataFrame | None:
        """The rule's records of ``topic`` that pass ``where`` (new ones, and with
        ``pending`` the rule's waiting ones)."""
        from pyspark.sql import functions as F

        kept = self.events.get(topic)
        if kept is None:
            return None
        cond = F.col("_etl_new")
        mine = [(p << 44) | o for t, p, o in self.state.pending.get(rule.index, []) if t == topic]
        if pending and mine:
            cond = cond | _packed(F.col("_etl_partition"), F.col("_etl_offset")).isin(mine)
        (where,) = self.translated(rule, "where")
        with _named(rule_field(rule, "where")):
            out = kept.filter(cond).filter(F.expr(where))
            out.schema  # noqa: B018 - analyzed here (lazily over Spark Connect)
        return out

    def sides(self, rules: list[Denorm]) -> dict[int, list[tuple[str, DataFrame, np.ndarray]]]:
        """Each denorm rule's non-empty sides: topic, records, their ``_etl_seq``
        (one job for all rules)."""
        from pyspark.sql import functions as F

        frames: dict[int, list[tuple[str, DataFrame]]] = {}
        parts: list[DataFrame] = []
        for rule in rules:
            for topic in (rule.left, rule.right):
                rows = self.side(rule, topic, pending=True)
                if rows is not None:
                    frames.setdefault(rule.index, []).append((topic, rows))
                    tag = F.lit(len(parts)).alias("_etl_side")
                    parts.append(rows.select(tag, "_etl_seq"))
        if not parts:
            return {}
        try:
            table = _union(parts).toArrow()
        except Exception:  # which rule's where: each side alone
            for rule in rules:
                for _, rows in frames.get(rule.index, []):
                    with _named(rule_field(rule, "where")):
                        rows.select("_etl_seq").toArrow()
            raise
        found: dict[int, list[tuple[str, DataFrame, np.ndarray]]] = {}
        n = 0
        for k, listed in frames.items():
            for topic, rows in listed:
                seqs = _side_seqs(table, n)
                n += 1
                if len(seqs):
                    found.setdefault(k, []).append((topic, rows, seqs))
        return found

    def shaped(self, rule: Rule, rows: DataFrame, extra: list[str]) -> DataFrame:
        """The rule's outputs, as columns of its own (``_etl_<k>_key``, ``..._value``,
        ``..._headers`` if selected) beside where each goes in the output order."""
        from pyspark.sql import functions as F

        place = rule_field(rule, "select")
        with _named(place):
            shaped = rows.selectExpr(*self.translated(rule, "select"), *extra)
            columns = shaped.columns
        for needed in ("key", "value"):
            if needed not in columns:
                raise place.error(f"gives no column {needed!r}")
        mine = [c for c in ("key", "value", "headers") if c in columns]
        return shaped.select(
            F.lit(rule.index).alias("_etl_rule"),
            *[F.col(c).alias(f"_etl_{rule.index}_{c}") for c in mine],
            *[c for c in columns if c.startswith("_etl_")],
        )

    def stateless(self, rule: Stateless) -> DataFrame | None:
        rows = self.side(rule, rule.source, pending=False)
        if rows is None:
            return None
        seq, ts = "`input`._etl_seq", "`input`._etl_ts"
        extra = [f"{seq} AS _etl_at", f"{seq} AS _etl_other", f"{ts} AS _etl_time"]
        try:
            return self.shaped(rule, rows.alias("input"), extra)
        except InvalidInputError:
            if rows.isEmpty():  # the local engine shapes no rows: no select error
                return None
            raise

    def denorm(self, rule: Denorm, sides: list[tuple[str, DataFrame, np.ndarray]]) -> DataFrame:
        """The pairs of a rule whose sides both have records (one join)."""
        from pyspark.sql import functions as F

        (on,) = self.translated(rule, "join-on")
        with _named(rule_field(rule, "join-on")):
            pairs = sides[0][1].alias("left").join(sides[1][1].alias("right"), F.expr(on))
            pairs.schema  # noqa: B018 - analyzed here (lazily over Spark Connect)
        left, right = "`left`._etl_seq", "`right`._etl_seq"
        extra = [
            f"greatest({left}, {right}) AS _etl_at",
            f"least({left}, {right}) AS _etl_other",
            f"CASE WHEN {left} > {right} THEN `left`._etl_ts ELSE `right`._etl_ts END AS _etl_time",
            f"{left} AS _etl_l",
            f"{right} AS _etl_r",
        ]
        return self.shaped(rule, pairs, extra)

    def outputs(self, shaped: dict[int, DataFrame]) -> dict[int, pa.Table]:
        """Every rule's outputs (one job), by rule, as the local engine's: ``key`` as
        text, ``value``, ``headers``, where each goes, ``_etl_out``, ``_etl_rule``."""
        if not shaped:
            return {}
        try:
            table = _union(list(shaped.values())).toArrow()
        except Exception:  # which rule: each alone
            for k, df in shaped.items():
                with _named(rule_field(self.config.transforms[k], "select")):
                    df.toArrow()
            raise
        rules = table["_etl_rule"].to_numpy()
        out: dict[int, pa.Table] = {}
        for k in shaped:
            rule = self.config.transforms[k]
            mine = table.filter(pa.array(rules == k))
            prefix = f"_etl_{k}_"
            columns = {c[len(prefix) :]: mine[c] for c in mine.column_names if c.startswith(prefix)}
            pairs = ("_etl_l", "_etl_r") if isinstance(rule, Denorm) else ()
            columns.update({c: mine[c] for c in (*_ORDER, *pairs)})
            made = _as_records(pa.table(columns))
            made = made.append_column("_etl_out", pa.array([rule.out] * made.num_rows))
            out[k] = made.append_column("_etl_rule", pa.array([k] * made.num_rows, pa.int32()))
        return out

    def release(self) -> None:
        for kept in self.cached:
            with contextlib.suppress(Exception):
                kept.unpersist()


def _waiting(
    sides: list[tuple[str, DataFrame, np.ndarray]], out: pa.Table | None
) -> list[tuple[str, int, int]]:
    """A denorm rule's events that found no partner in its outputs ``out``."""
    paired = [out[c].to_numpy() for c in ("_etl_l", "_etl_r")] if out is not None else []
    waiting: list[tuple[str, int, int]] = []
    for n, (topic, _, seqs) in enumerate(sides):
        alone = seqs[~np.isin(seqs, paired[n])] if paired else seqs
        waiting += unpack(topic, alone)
    return sorted(waiting)


def evaluate(config: Config, state: State, sources: Mapping[str, DataFrame | None]) -> Result:
    """One run on Spark: ``sources`` are the input pools' records by ``pool@branch``
    (None: no records)."""
    run = _Run(config, state, sources)
    try:
        run.load_events()
        kept = {k: list(v) for k, v in state.pending.items() if k < len(config.transforms)}
        tables: dict[int, pa.Table] = {}
        if run.new_events:
            denorms = [r for r in config.transforms if isinstance(r, Denorm)]
            sides = run.sides(denorms)
            shaped: dict[int, DataFrame] = {}
            for rule in config.transforms:
                k = rule.index
                if isinstance(rule, Stateless):
                    df = run.stateless(rule)
                    if df is not None:
                        shaped[k] = df
                elif len(sides.get(k, [])) == 2:
                    shaped[k] = run.denorm(rule, sides[k])
            tables = run.outputs(shaped)
            for rule in denorms:
                kept[rule.index] = _waiting(sides.get(rule.index, []), tables.get(rule.index))
        # a stateless rule without rows adds nothing, a denorm that joined its types
        made = [
            t
            for k, t in sorted(tables.items())
            if t.num_rows or isinstance(config.transforms[k], Denorm)
        ]
        out, written = records(made, state.next)
        after = dict(state.next)
        for topic, n in written.items():
            after[topic] = after.get(topic, 0) + n
        return Result(out, run.consumed, kept, after, run.new_events, written)
    finally:
        run.release()


def frames(
    lake: Lake, config: Config, state: State, spark: SparkSession
) -> dict[str, DataFrame | None]:
    """Each input pool@branch as a DataFrame (see the module's docstring)."""
    from limno.engines import spark as ls
    from limno.lake import Lake as InProcessLake

    out: dict[str, DataFrame | None] = {}
    for source in config.inputs:
        if source.ref in out:
            continue
        if isinstance(lake, InProcessLake):
            df = ls.read(lake.pool(source.pool), source.branch, spark=spark)
            out[source.ref] = df if df.columns else None
            continue
        table = _served(lake, config, state, source.ref)
        out[source.ref] = None if table is None else spark.createDataFrame(table)
    return out


def _served(lake: Lake, config: Config, state: State, ref: str) -> pa.Table | None:
    """A served pool@branch's new and pending records of the input topics, kept by the
    server (its DuckDB: a served lake's server need not run Spark)."""
    pool, _, branch = ref.partition("@")
    schemas = [o.schema for o in lake.pool(pool).objects(branch)]
    kafkas = [s.field("kafka").type for s in schemas if "kafka" in s.names]
    if not kafkas:  # no records yet
        return None
    partitioned = any(k.get_field_index("partition") >= 0 for k in kafkas)
    topics = [i.topic for i in config.inputs if i.ref == ref]
    keep = " OR ".join(_keep_sql(t, state, partitioned) for t in topics)
    name = '"' + ref.replace('"', '""') + '"'
    return lake.query(f"SELECT * FROM {name} WHERE {keep}", engine="local")


def _keep_sql(topic: str, state: State, partitioned: bool) -> str:
    """DuckDB SQL: a record of ``topic`` above its partition's mark, or pending (or
    without offset: refused here, as by the local engine)."""
    part = 'coalesce(kafka."partition", 0)' if partitioned else "0"
    off = 'kafka."offset"'
    marks = state.consumed.get(topic, {})
    new = "true"
    if marks:
        cases = " ".join(f"WHEN {part} = {p} THEN {off} > {o}" for p, o in marks.items())
        new = f"CASE {cases} ELSE true END OR {off} IS NULL"
    waiting = sorted({(p, o) for e in state.pending.values() for t, p, o in e if t == topic})
    if waiting:
        pairs = ", ".join(f"({p}, {o})" for p, o in waiting)
        new += f" OR ({part}, {off}) IN (VALUES {pairs})"
    text = topic.replace("'", "''")
    return f"(kafka.topic = '{text}' AND ({new}))"


def evaluate_lake(lake: Lake, config: Config, state: State) -> Result:
    """One run of ``config`` on Spark over ``lake``'s input branches."""
    from limno.engines import spark as ls

    spark = ls.session()
    return evaluate(config, state, frames(lake, config, state, spark))

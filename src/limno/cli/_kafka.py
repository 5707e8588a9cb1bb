"""``limno kafka``: Kafka topics into pools and back (SPEC section 5, zync), exactly once.

Thin over :mod:`limno.streams`, which loads the Kafka client only when a command runs
(``limno --help`` stays fast). The broker is ``--bootstrap``, else
``$LIMNO_KAFKA_BOOTSTRAP``, else the config key ``kafka.bootstrap`` (the lake's
config file, then the user's: :mod:`limno.config`).
"""

from __future__ import annotations

import datetime as dt
import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

import click

from limno.cli._context import DURATION, Context
from limno.cli._follow import (
    FollowArgs,
    err_line,
    follow_options,
    print_line,
    stop_on_signals,
)
from limno.errors import InvalidInputError
from limno.lazy import lazy_module

if TYPE_CHECKING:
    from limno.core import refs
    from limno.core.commits import Commit
    from limno.streams import kafka_from, kafka_to
else:
    kafka_from = lazy_module("limno.streams.kafka_from")
    kafka_to = lazy_module("limno.streams.kafka_to")
    refs = lazy_module("limno.core.refs")

__all__ = ["COMMANDS"]

BOOTSTRAP_ENV = "LIMNO_KAFKA_BOOTSTRAP"
#: the config key of the broker (limno.config)
BOOTSTRAP_KEY = "kafka.bootstrap"


#: ``--bootstrap`` of every kafka command
_bootstrap_option = click.option(
    "--bootstrap",
    default=None,
    metavar="HOST:PORT",
    help=f"The Kafka broker(s), comma-separated (default: ${BOOTSTRAP_ENV}, else the"
    " config key kafka.bootstrap).",
)


def _bootstrap(obj: Context, flag: str | None) -> str:
    found = flag or os.environ.get(BOOTSTRAP_ENV, "").strip() or obj.settings.get(BOOTSTRAP_KEY)
    if not found:
        raise InvalidInputError(
            f"no Kafka broker: pass --bootstrap HOST:PORT, set {BOOTSTRAP_ENV}, or"
            f" 'limno config set {BOOTSTRAP_KEY} HOST:PORT'"
        )
    return found


def _print_commit(commit: Commit) -> None:
    """A commit's id on stdout, at once (a pipe's reader sees each as it lands)."""
    print_line(commit.id)


#: the names of limno.streams.formats.FORMATS (not imported at CLI start)
_FORMATS = ("json", "connect", "avro")


def _format_option(text: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """``--format`` and ``--registry`` of ``kafka from`` and ``kafka to``."""
    fmt = click.option(
        "--format", "fmt", type=click.Choice(_FORMATS), default="json", show_default=True,
        help=text,
    )  # fmt: skip
    registry = click.option(
        "--registry",
        default=None,
        metavar="URL",
        help="The schema registry of --format avro (default: $LIMNO_SCHEMA_REGISTRY; limno"
        " serve has one at http://HOST:PORT/registry; credentials: $LIMNO_ACCESS_KEY_ID and"
        " $LIMNO_SECRET_ACCESS_KEY).",
    )
    return lambda f: fmt(registry(f))


@click.group()
def kafka() -> None:
    """Kafka topics into pools and back, exactly once (offsets kept in the pool or topic)."""


@kafka.command("from")
@click.option(
    "--topic",
    "topics",
    required=True,
    multiple=True,
    help="The topic to read (all its partitions); repeat it, or separate names by commas,"
    " for several topics in one run (one commit per batch across them).",
)
@click.option(
    "--pool",
    "ref",
    required=True,
    metavar="POOL[@BRANCH]",
    help="Where the records go (branch main by default); a missing pool is created,"
    " keyed on kafka.offset (several topics: kafka.topic,kafka.partition,kafka.offset).",
)
@click.option(
    "--shaper",
    default=None,
    metavar="SQL",
    help="A DuckDB query over each batch's records (the table 'records'); its answer,"
    " which must keep the kafka column, is what is committed.",
)
@_format_option(
    "How keys and values are read: json (an object becomes a struct; keys text),"
    " connect (the Kafka Connect envelope {schema, payload}: the payload typed by it),"
    " avro (Confluent's wire format: schema id and Avro body; schemas from --registry)."
)
@click.option(
    "--dead-letter",
    default=None,
    metavar="POOL[@BRANCH]",
    help="Messages that do not decode go to this pool (made when missing), with their"
    " position, raw key and value and the reason, exactly once; without it such a message"
    " fails its batch.",
)
@click.option(
    "--batch-rows",
    type=click.IntRange(min=1),
    default=100_000,
    show_default=True,
    help="Commit once a batch holds this many records...",
)
@click.option(
    "--batch-interval",
    type=DURATION,
    default="5s",
    show_default=True,
    help="...or this long after the batch's first record.",
)
@click.option(
    "--exit-after",
    type=DURATION,
    default=None,
    help="Stop after this long without a new record (default: run until interrupted).",
)
@click.option(
    "--engine",
    type=click.Choice(["local", "spark"]),
    default="local",
    show_default=True,
    help="local: this process reads the topic; spark: a Spark Structured Streaming query"
    " (one commit per micro-batch, every --batch-interval; --batch-rows caps a"
    " micro-batch; --format json only; JVM logs in limno's Spark state directory).",
)
@click.option(
    "--checkpoint",
    default=None,
    metavar="DIR",
    help="--engine spark: the query's checkpoint (default: one per lake, pool, branch"
    " and topics in limno's Spark state directory).",
)
@click.option(
    "--value-schema",
    default=None,
    metavar="DDL",
    help="--engine spark: the JSON values' Spark schema, e.g. 'id BIGINT, name STRING'"
    " (without it values stay JSON text).",
)
@_bootstrap_option
@click.pass_obj
def from_(
    obj: Context,
    topics: tuple[str, ...],
    ref: str,
    shaper: str | None,
    fmt: str,
    registry: str | None,
    dead_letter: str | None,
    batch_rows: int,
    batch_interval: dt.timedelta,
    exit_after: dt.timedelta | None,
    engine: str,
    checkpoint: str | None,
    value_schema: str | None,
    bootstrap: str | None,
) -> None:
    """Sync TOPIC(s) into a pool: each batch one commit, exactly once.

    A restart (even after a crash) resumes after the last offset committed to the
    pool's branch: records are never duplicated nor skipped. Prints each commit's id
    as it lands; a summary of each on stderr. SIGTERM or Ctrl-C commits the records
    gathered so far and ends it (exit 0). A message that does not decode (in
    --format) fails its batch (nothing of it committed), naming its topic, partition
    and offset; with --dead-letter it goes to that pool instead."""
    pool, branch = refs.parse_pool_ref(ref)
    opts = kafka_from.FromOptions(
        topic=list(topics),
        pool=pool,
        bootstrap=_bootstrap(obj, bootstrap),
        branch=branch or "main",
        shaper=shaper,
        batch_rows=batch_rows,
        batch_interval=batch_interval.total_seconds(),
        exit_after=None if exit_after is None else exit_after.total_seconds(),
        format=fmt,
        registry=registry,
        dead_letter=dead_letter,
    )
    stop = threading.Event()
    if engine == "local" and (checkpoint is not None or value_schema is not None):
        raise InvalidInputError("kafka from: --checkpoint and --value-schema need --engine spark")
    with stop_on_signals(stop):
        if engine == "spark":
            report = _spark_from(obj, opts, checkpoint, value_schema, batch_rows, stop)
        else:
            report = kafka_from.sync_from(
                obj.lake(),
                opts,
                log=lambda line: click.echo(line, err=True),
                on_commit=_print_commit,
                stop=stop,
            )
    dead = f", {report.dead} set aside in {opts.dead_letter}" if report.dead else ""
    click.echo(
        f"kafka: {report.records} record(s) of {', '.join(opts.topics)} in"
        f" {len(report.commits)} commit(s){dead}",
        err=True,
    )


def _spark_from(
    obj: Context,
    opts: kafka_from.FromOptions,
    checkpoint: str | None,
    value_schema: str | None,
    batch_rows: int,
    stop: threading.Event,
) -> kafka_from.SyncReport:
    """``--engine spark``: the sync as a Structured Streaming query; ``--batch-rows``,
    when given, caps a micro-batch (Spark's maxOffsetsPerTrigger)."""
    from limno.streams import kafka_spark

    given = click.get_current_context().get_parameter_source("batch_rows")
    lake = obj.lake()
    return kafka_spark.sync_with_spark(
        lake,
        lake.uri,
        opts,
        checkpoint=checkpoint,
        value_schema=value_schema,
        max_batch_rows=batch_rows if given is click.core.ParameterSource.COMMANDLINE else None,
        log=lambda line: click.echo(line, err=True),
        on_commit=_print_commit,
        stop=stop,
    )


@kafka.command("to")
@click.option(
    "--pool",
    "ref",
    required=True,
    metavar="POOL[@REF]",
    help="The records to produce: those 'kafka from' made (ref default: main).",
)
@click.option("--topic", required=True, help="The topic to produce to (it must exist).")
@click.option(
    "--source-topic",
    default=None,
    help="Produce the records of this source topic (needed when the pool holds several).",
)
@_format_option(
    "How keys and values are written: json, connect (the Kafka Connect envelope, its"
    " schema derived from the column's type; a text key stays text), or avro (Confluent's"
    " wire format, the schema derived likewise and registered as TOPIC-value)."
)
@click.option(
    "--key-format",
    type=click.Choice(["text", "connect", "avro"]),
    default=None,
    help="How keys are written, when not as --format says: text (as text; JSON text"
    " when not text), connect or avro (with their schema, for a consumer that needs a"
    " typed key such as a Connect struct: a text key that is a JSON object or array, as"
    " 'limno etl' keeps struct keys, goes as that struct or list; avro: registered as"
    " TOPIC-key).",
)
@_bootstrap_option
@click.option(
    "--transactional-id",
    default=None,
    metavar="ID",
    help="Produce in transactions with this transactional.id: a rerun fences any"
    " producer of a crashed run; its aborted messages stay invisible to read_committed"
    " consumers (default: an idempotent producer only).",
)
@follow_options("the pool's branch")
@click.pass_obj
def to(
    obj: Context,
    ref: str,
    topic: str,
    source_topic: str | None,
    fmt: str,
    registry: str | None,
    key_format: str | None,
    transactional_id: str | None,
    bootstrap: str | None,
    follow: bool,
    exit_after: dt.timedelta | None,
    interval: dt.timedelta | None,
) -> None:
    """Produce a pool's Kafka records to TOPIC, exactly once: each to the partition
    of its own number, in offset order, with its source offset in the header
    'limno.offset'.

    A rerun (even after a crash) reads the last message of each partition and
    produces only what follows it. Prints the number of messages produced; with
    --follow, that of each run that produced some."""
    following = FollowArgs(follow, exit_after, interval)
    pool, at = refs.parse_pool_ref(ref)
    opts = kafka_to.ToOptions(
        pool=pool,
        topic=topic,
        bootstrap=_bootstrap(obj, bootstrap),
        ref=at,
        source_topic=source_topic,
        format=fmt,
        key_format=key_format,
        registry=registry,
        transactional_id=transactional_id,
    )
    if not following.on:
        click.echo(kafka_to.sync_to(obj.lake(), opts, log=err_line))
        return
    stop = threading.Event()
    with stop_on_signals(stop):
        kafka_to.follow_to(
            obj.lake(),
            opts,
            log=err_line,
            on_run=lambda n: print_line(str(n)),
            stop=stop,
            interval=following.interval,
            exit_after=following.exit_after,
        )


COMMANDS = [kafka]

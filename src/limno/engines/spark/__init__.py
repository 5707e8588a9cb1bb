"""The Spark engine: bulk import, SQL and DataFrames over pools on Apache Spark.

Everything here needs PySpark (``pip install 'limno[spark]'``) and, for an S3
lake, the jars ``scripts/jars.sh`` fetches. The session is ``local[*]`` unless
``LIMNO_SPARK_MASTER`` (or an argument) names another master; see
:func:`session`.

Python API::

    from limno.engines import spark as ls

    df = ls.read("logs@main", lake="/tmp/lake")            # a snapshot as a DataFrame
    df = ls.read("logs", start=100, end=200, lake=...)     # a key range, objects pruned
    commit = ls.write(df, "logs@dev", lake=...)            # one atomic commit
    ls.query(lake, 'SELECT level, count(*) FROM "logs@dev" GROUP BY level')  # Arrow
    ls.sql(lake, "SELECT ...")                             # the same, as a DataFrame
    ls.load("logs", ["big.ndjson.gz"], lake=...)           # bulk import of files
    q = ls.kafka_to_pool("orders", topic="orders", bootstrap=..., checkpoint=..., lake=...)
    spark.readStream.format("limno").option("lake", ...).load("logs@main")  # new commits

While the Spark Connect server of ``limno spark start`` is up
(:mod:`limno.engines.spark_server`), :func:`session` attaches to it instead of
starting a JVM here; everything below works through it except safe-mode SQL.

Modules: :mod:`._session` (sessions, jars, s3a), :mod:`._connect` (Spark Connect
sessions and what differs in them), :mod:`._types` (Arrow and
Spark types), :mod:`._read` (snapshots as native Parquet scans), :mod:`._write`
(bulk import of DataFrames, compaction tasks), :mod:`._native` (bulk import
written by Spark's own Parquet writer, then described and published),
:mod:`._load` (bulk import of files; the ``auto`` choice is in
:mod:`limno.engines.choice`), :mod:`._query`
(SQL), :mod:`._source` (``format("limno")``, a Python Data Source), :mod:`._stream`
(``readStream.format("limno")``), :mod:`._kafka` (Kafka into a pool by Structured
Streaming, one commit per micro-batch).
"""

from __future__ import annotations

from ._kafka import PoolSink, kafka_records, kafka_to_pool
from ._load import load
from ._query import query, sql, table
from ._read import frame, read, scan
from ._session import hadoop_uri, jars, jars_dir, session, spark_conf
from ._source import LimnoDataSource, register
from ._write import (
    commit_objects,
    compaction_runner,
    merge_groups,
    merge_sorted_objects,
    write,
    write_objects,
)

__all__ = [
    "LimnoDataSource",
    "PoolSink",
    "commit_objects",
    "compaction_runner",
    "frame",
    "hadoop_uri",
    "jars",
    "jars_dir",
    "kafka_records",
    "kafka_to_pool",
    "load",
    "merge_groups",
    "merge_sorted_objects",
    "query",
    "read",
    "register",
    "scan",
    "session",
    "spark_conf",
    "sql",
    "table",
    "write",
    "write_objects",
]

"""Spark Connect sessions: which server to use, attaching to it, and what differs
from a classic session (no JVM in this process, no ``sparkContext``).

A Connect session is a gRPC client of a long-lived server (``limno spark start``,
:mod:`limno.engines.spark_server`, or any server ``LIMNO_SPARK_REMOTE`` names);
:func:`._session.session` decides between it and a classic session. Everything
limno runs on Spark goes through DataFrames (Parquet scans, ``mapInArrow`` tasks,
Spark's Parquet writer), which Connect carries as they are; the few places that
asked the JVM directly ask through here instead:

* :func:`default_parallelism` -- ``sparkContext.defaultParallelism``;
* :func:`plan_stats` -- the optimized plan's size and row estimates;
* :func:`query_session` -- ``SparkSession.newSession`` (a new server session).

PySpark builds Connect or classic columns by one process-wide switch (the
``SPARK_CONNECT_MODE_ENABLED`` environment variable), which :func:`connect_mode`
sets to the kind of session limno last handed out.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import urllib.parse
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from limno.errors import InvalidInputError, LimnoError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "REMOTE_ENV",
    "attach",
    "connect_mode",
    "default_parallelism",
    "is_connect",
    "plan_stats",
    "query_session",
    "release",
    "remote_url",
]

#: a Spark Connect server (``sc://host:port``) every Spark command of limno uses
REMOTE_ENV = "LIMNO_SPARK_REMOTE"

#: Connect sessions limno attached to, by URL
_attached: dict[str, SparkSession] = {}


def remote_url(master: str | None, remote: str | bool | None, classic: bool) -> str | None:
    """The Connect server to use (see :func:`._session.session`); None for classic.

    ``remote`` a URL: that one; ``False``: none. Else, unless a ``master`` is given:
    ``LIMNO_SPARK_REMOTE``, then (when no ``classic`` context runs in this process)
    the server of ``limno spark start`` while it is up.
    """
    if isinstance(remote, str):
        return _checked(remote, "a Spark Connect URL")
    if remote is False or master is not None:
        return None
    env = os.environ.get(REMOTE_ENV, "").strip()
    if env:
        return _checked(env, REMOTE_ENV)
    if classic:
        return None
    from limno.engines import spark_server

    up = spark_server.running()
    return up.url if up is not None else None


def _checked(url: str, what: str) -> str:
    if not url.startswith("sc://"):
        raise InvalidInputError(f"{what}: expected sc://host:port, not {url!r}")
    return url


def attach(url: str, conf: Mapping[str, str], defaults: Mapping[str, str]) -> SparkSession:
    """A Connect session at ``url``: the one limno made before while it is open, else a
    new one with ``defaults`` then ``conf`` (what of them can change at run time)."""
    from pyspark.sql import SparkSession

    connect_mode(True)
    s = _attached.get(url)
    settings = dict(conf)
    if s is None or getattr(s, "is_stopped", False):
        _check_reachable(url)
        try:
            s = SparkSession.builder.remote(url).create()
        except ImportError as e:  # grpcio and friends: PySpark's "connect" extra
            raise InvalidInputError(
                f"Spark Connect ({url}) needs its client: pip install 'limno[spark]' ({e})"
            ) from e
        settings = {**defaults, **conf}
        _attached[url] = s
    for k, v in settings.items():
        with contextlib.suppress(Exception):  # static settings stay the server's
            s.conf.set(k, v)
    return s


def _check_reachable(url: str, timeout: float = 10.0) -> None:
    """Fail at once (not after the Connect client's minutes of retries) when nothing
    listens at ``url``."""
    parsed = urllib.parse.urlparse("http" + url[2:])
    host, port = parsed.hostname or "localhost", parsed.port or 15002
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as e:
        reason = e.strerror or str(e) or type(e).__name__
        raise LimnoError(f"cannot reach the Spark Connect server at {url}: {reason}") from None


#: what pyspark.sql.functions consults to build Spark Connect columns, not classic ones
_CONNECT_MODE = "SPARK_CONNECT_MODE_ENABLED"


def connect_mode(on: bool) -> None:
    """Switch PySpark's process-wide API mode to the kind of session handed out."""
    if on:
        os.environ[_CONNECT_MODE] = "1"
    else:
        os.environ.pop(_CONNECT_MODE, None)


def is_connect(obj: object) -> bool:
    """Whether ``obj`` (a session or DataFrame) is Spark Connect's."""
    return type(obj).__module__.startswith("pyspark.sql.connect")


def query_session(spark: SparkSession) -> SparkSession:
    """A new session sharing ``spark``'s cluster: its own temporary views and SQL conf."""
    if not is_connect(spark):
        return spark.newSession()
    # a client of the same server (same URL, token, options) under a new session id
    builder: Any = getattr(getattr(spark, "client", None), "_builder", None)
    if builder is None or getattr(builder, "session_id", None) is not None:
        return spark  # the URL pins one session id: there is no other session to make
    made: SparkSession = type(spark)(connection=builder)  # type: ignore[call-arg]
    return made


def release(spark: SparkSession, base: SparkSession) -> None:
    """Release a session :func:`query_session` made of a Connect ``base``."""
    if spark is not base and is_connect(spark):
        with contextlib.suppress(Exception):
            spark.stop()


#: Connect servers' default parallelism, by server endpoint
_parallelism: dict[str, int] = {}


def default_parallelism(spark: SparkSession) -> int:
    """``sparkContext.defaultParallelism``, also over Connect: there the server's
    ``spark.default.parallelism`` or, when unset, the partition count of a ``range``
    (which Spark cuts by it), asked once per server."""
    if not is_connect(spark):
        return max(1, int(spark.sparkContext.defaultParallelism))
    client: Any = getattr(spark, "client", None)
    key = str(getattr(getattr(client, "_builder", None), "endpoint", id(spark)))
    if key not in _parallelism:
        from pyspark.sql import functions as F

        value = spark.conf.get("spark.default.parallelism", None)
        if value:
            _parallelism[key] = int(value)
        else:
            ids = spark.range(0, 1 << 16).select(F.spark_partition_id().alias("p"))
            top = ids.agg(F.max("p")).first()
            _parallelism[key] = int(top[0]) + 1 if top is not None and top[0] is not None else 1
    return max(1, _parallelism[key])


#: the root's statistics in ``explain(mode="cost")``: a size as Spark prints bytes
_STATS = re.compile(r"Statistics\(sizeInBytes=([0-9.]+) ?([KMGTPE]?i?B)(?:, rowCount=([0-9.E+]+))?")
_UNITS = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40, "PiB": 2**50}


def plan_stats(df: DataFrame) -> tuple[int | None, int | None, int | None]:
    """Spark's estimates for ``df``'s optimized plan: size in bytes, rows and the row
    width of its schema (each None where Spark has none)."""
    size: int | None = None
    rows: int | None = None
    width: int | None = None
    try:
        if is_connect(df):
            frame: Any = df
            text = str(frame._explain_string(mode="cost"))
            m = _STATS.search(text.partition("== Optimized Logical Plan ==")[2])
            if m is None or m.group(2) not in _UNITS:
                return None, None, None
            size = int(float(m.group(1)) * _UNITS[m.group(2)])
            rows = None if m.group(3) is None else int(float(m.group(3)))
        else:
            stats = df._jdf.queryExecution().optimizedPlan().stats()
            size = int(str(stats.sizeInBytes()))
            count = stats.rowCount()
            rows = int(str(count.get())) if count.isDefined() else None
            width = int(df._jdf.schema().defaultSize())
    except Exception:
        return None, None, None
    if size is not None and not 0 < size < 2**62:
        size = None
    return size, None if rows is None else max(0, rows), width

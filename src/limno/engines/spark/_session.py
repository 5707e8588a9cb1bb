"""The SparkSession limno runs on, and how Spark tasks reach the lake.

:func:`session` attaches to a Spark Connect server when one is up or named
(``limno spark start``, :mod:`limno.engines.spark_server`; ``LIMNO_SPARK_REMOTE``),
else creates (or reuses) a classic SparkSession: ``local[*]`` unless a master
URL is given, by argument or ``LIMNO_SPARK_MASTER``; extra Spark conf comes from
the ``conf`` argument and from ``LIMNO_SPARK_CONF`` (``k=v`` pairs separated by
newlines or ``;``). The JVM jars the pipeline needs (hadoop-aws and its AWS SDK
bundle for ``s3a://``) are local jars fetched by ``scripts/jars.sh``, never
downloaded by Spark at run time: on the driver's class path in local mode (no copy
per session), else passed with ``spark.jars``. The JVMs limno
starts log to files (:mod:`limno.engines.spark_server`), never to the terminal.

Spark reads data objects natively through Hadoop file systems (``file://`` for a
local lake, ``s3a://`` for an S3 lake), while limno's own code in Spark tasks
(writing objects, reading inputs) opens the lake through :mod:`limno.storage`. A
:class:`LakeSpec` carries what a task needs for that: the lake URI and the
driver's ``AWS_*`` settings at the time the job was planned.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import glob
import os
import re
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import limno.errors as errors
from limno.errors import InvalidInputError, LimnoError, NotFoundError
from limno.storage import Storage, open_storage

from ._connect import attach, connect_mode, remote_url

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "LakeSpec",
    "hadoop_uri",
    "jars",
    "jars_dir",
    "session",
    "spark_conf",
    "spark_error",
    "translate_errors",
]

#: Spark settings limno applies to the sessions it creates (the caller's conf wins)
DEFAULT_CONF: dict[str, str] = {
    "spark.app.name": "limno",
    # identical answers on every machine: timestamps render and convert in UTC
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.ui.showConsoleProgress": "false",
    "spark.log.level": "ERROR",
}


def jars_dir() -> Path:
    """Where ``scripts/jars.sh`` put the jars.

    ``LIMNO_SPARK_JARS_DIR``, else ``.cache/jars`` of the source checkout this
    module lives in (an editable install), else ``~/.cache/limno/jars``.
    """
    env = os.environ.get("LIMNO_SPARK_JARS_DIR")
    if env:
        return Path(env).expanduser().resolve()
    here = Path(__file__).resolve()
    for parent in here.parents:
        if (parent / "scripts" / "jars.sh").exists():
            return parent / ".cache" / "jars"
    return Path("~/.cache/limno/jars").expanduser()


def jars() -> list[str]:
    """The local jars limno's sessions use, sorted; empty when not fetched."""
    return sorted(glob.glob(str(jars_dir() / "*.jar")))


def _env_conf() -> dict[str, str]:
    text = os.environ.get("LIMNO_SPARK_CONF", "")
    out: dict[str, str] = {}
    for part in re.split(r"[;\n]", text):
        part = part.strip()
        if not part:
            continue
        k, sep, v = part.partition("=")
        if not sep or not k.strip():
            raise InvalidInputError(f"LIMNO_SPARK_CONF: expected key=value, not {part!r}")
        out[k.strip()] = v.strip()
    return out


def s3a_conf(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Hadoop ``fs.s3a`` settings from the ``AWS_*`` variables limno's storage also uses.

    With ``AWS_ENDPOINT_URL`` (an S3-compatible server) requests are path-style, and
    plain ``http://`` turns TLS off. Hadoop 3.4's AWS SDK v2 bundle (2.29) sends no
    default integrity checksums; newer SDKs (2.30+) do, which S3-compatible servers
    may reject, so the SDK is told to compute checksums only when an operation
    requires one (``aws.requestChecksumCalculation=when_required`` in the JVM options
    of the driver and executors, see :func:`spark_conf`).
    """
    env = os.environ if env is None else env
    out: dict[str, str] = {}
    key, secret = env.get("AWS_ACCESS_KEY_ID"), env.get("AWS_SECRET_ACCESS_KEY")
    if key and secret:
        out["spark.hadoop.fs.s3a.access.key"] = key
        out["spark.hadoop.fs.s3a.secret.key"] = secret
        token = env.get("AWS_SESSION_TOKEN")
        if token:
            out["spark.hadoop.fs.s3a.session.token"] = token
            provider = "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"
        else:
            provider = "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
        out["spark.hadoop.fs.s3a.aws.credentials.provider"] = provider
    region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
    if region:
        out["spark.hadoop.fs.s3a.endpoint.region"] = region
    endpoint = env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL")
    if endpoint:
        out["spark.hadoop.fs.s3a.endpoint"] = endpoint
        out["spark.hadoop.fs.s3a.path.style.access"] = "true"
        if endpoint.startswith("http://"):
            out["spark.hadoop.fs.s3a.connection.ssl.enabled"] = "false"
    return out


_JVM_CHECKSUM_OPTS = (
    "-Daws.requestChecksumCalculation=when_required -Daws.responseChecksumValidation=when_required"
)


def _log4j_options() -> str | None:
    from limno.engines import spark_server

    return spark_server.log4j_options()


def _local_master(master: str) -> bool:
    """Whether ``master`` runs the executors inside the driver's JVM (``local``,
    ``local[N]``, ``local[N,F]``; not ``local-cluster[...]``)."""
    return master == "local" or master.startswith("local[")


def spark_conf(master: str | None = None, conf: Mapping[str, str] | None = None) -> dict[str, str]:
    """The full conf of a session limno creates: defaults, jars, s3a, env, then ``conf``."""
    out = dict(DEFAULT_CONF)
    out["spark.master"] = master or os.environ.get("LIMNO_SPARK_MASTER") or "local[*]"
    # executors (and standalone workers) run the same interpreter, with limno importable
    out["spark.pyspark.python"] = sys.executable
    out["spark.pyspark.driver.python"] = sys.executable
    found = jars()
    if found and _local_master(out["spark.master"]):
        # tasks run in the driver's JVM: the jars go on its class path as they are.
        # With spark.jars each session would copy them (641 MB of AWS SDK) into
        # /tmp/spark-*/userFiles-*, which a killed JVM never removes.
        out["spark.driver.extraClassPath"] = os.pathsep.join(found)
    elif found:  # executors in other JVMs, perhaps other machines: Spark ships the jars
        out["spark.jars"] = ",".join(found)
    out["spark.driver.extraJavaOptions"] = _JVM_CHECKSUM_OPTS
    log4j = _log4j_options()
    if log4j:  # the JVM logs through limno's log4j2 setup (kept by user extraJavaOptions)
        out["spark.driver.defaultJavaOptions"] = log4j
    out["spark.executor.extraJavaOptions"] = _JVM_CHECKSUM_OPTS
    out.update(s3a_conf())
    out.update(_env_conf())
    out.update(conf or {})
    return out


def session(
    master: str | None = None,
    conf: Mapping[str, str] | None = None,
    spark: SparkSession | None = None,
    *,
    remote: str | bool | None = None,
) -> SparkSession:
    """The SparkSession to run on: ``spark`` if given, else a Spark Connect session or
    a classic one.

    Spark Connect (a long-lived server, no JVM in this process) when ``remote`` is
    its URL; with ``remote=None`` (the default) when ``LIMNO_SPARK_REMOTE`` names one
    (unless ``master`` is given), else when no classic SparkContext runs here, no
    ``master`` is given and the server of ``limno spark start`` is up
    (:func:`limno.engines.spark_server.running`). ``remote=False`` never uses one.
    A Connect session gets the SQL settings of ``conf`` (and limno's) that can change
    at run time; the server keeps its own master and static settings.

    Otherwise, classic: a running session (the user's own, or one limno made before)
    is reused as it is, with the runtime settings of ``conf`` applied; a new one gets
    :func:`spark_conf`, its JVM's output going to a log file
    (:func:`limno.engines.spark_server.session_log`), not the terminal.
    """
    try:
        from pyspark import SparkContext
        from pyspark.sql import SparkSession
    except ImportError as e:  # pragma: no cover - pyspark is an optional dependency
        raise InvalidInputError("the Spark engine needs PySpark: pip install 'limno[spark]'") from e
    if spark is not None:
        return spark
    url = remote_url(master, remote, SparkContext._active_spark_context is not None)
    if url is not None:
        sql_defaults = {k: v for k, v in DEFAULT_CONF.items() if k.startswith("spark.sql.")}
        made = attach(url, conf or {}, sql_defaults)
        _quiet_query_context_loggers()
        return made
    connect_mode(False)
    if SparkContext._active_spark_context is not None:
        active = SparkSession.getActiveSession() or SparkSession.builder.getOrCreate()
        for k, v in (conf or {}).items():
            with contextlib.suppress(Exception):
                active.conf.set(k, v)
        return active
    # PySpark takes the executors' interpreter from the environment of the driver
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    global _jvm_class_path
    fresh = not _jvm_started()
    settings = _jars_for_jvm(spark_conf(master, conf))
    _launch_jvm(settings)
    builder = SparkSession.builder
    for k, v in settings.items():
        builder = builder.config(k, v)
    made = builder.getOrCreate()
    if fresh:
        _jvm_class_path = settings.get("spark.driver.extraClassPath")
    _quiet_query_context_loggers()
    from ._source import register  # format("limno") in every session limno makes

    register(made)
    return made


#: the class path limno started this process's JVM with (None: not started by limno)
_jvm_class_path: str | None = None


def _jvm_started() -> bool:
    """Whether this process has its JVM already (PySpark's gateway, or one it was given)."""
    from pyspark import SparkContext

    return SparkContext._gateway is not None or "PYSPARK_GATEWAY_PORT" in os.environ


def _jars_for_jvm(settings: dict[str, str]) -> dict[str, str]:
    """``settings`` fit for the JVM the session will run in: a JVM already running
    (a session stopped before, the user's own) keeps the class path it started
    with, so the jars go by ``spark.jars`` unless limno put them there."""
    class_path = settings.get("spark.driver.extraClassPath")
    if not _jvm_started() or class_path is None or class_path == _jvm_class_path:
        return settings
    if class_path != os.pathsep.join(jars()):
        return settings  # the caller's own class path: theirs to manage
    out = dict(settings)
    del out["spark.driver.extraClassPath"]
    out["spark.jars"] = ",".join(class_path.split(os.pathsep))
    return out


def _launch_jvm(settings: Mapping[str, str]) -> None:
    """Start the JVM of a new classic session with its stdout and stderr in the session
    log (PySpark would hand it the terminal), unless one runs already."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    from limno.engines import spark_server

    if _jvm_started():
        return
    conf = SparkConf(loadDefaults=False)
    conf.setAll(list(settings.items()))
    try:
        opened = spark_server.open_log(spark_server.session_log())
    except LimnoError:
        return  # no writable state directory: PySpark starts the JVM on the terminal
    with opened as log:
        stamp = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        log.write(f"== limno: classic Spark session of pid {os.getpid()}, {stamp}\n".encode())
        log.flush()
        gateway = launch_gateway(conf, popen_kwargs={"stdout": log, "stderr": log})
    with SparkContext._lock:
        SparkContext._gateway = gateway
        SparkContext._jvm = gateway.jvm


#: PySpark's Python loggers that print a failed query's context (as JSON) on stderr
_QUERY_CONTEXT_LOGGERS = ("SQLQueryContextLogger", "DataFrameQueryContextLogger")


def _quiet_query_context_loggers() -> None:
    """Send those loggers to the session log: limno reports the error itself."""
    import logging

    from pyspark.logger import PySparkLogger

    from limno.engines import spark_server

    log = spark_server.session_log()
    with contextlib.suppress(OSError):
        log.parent.mkdir(parents=True, exist_ok=True)
    writable = os.access(log.parent, os.W_OK)
    for name in _QUERY_CONTEXT_LOGGERS:
        logger = PySparkLogger.getLogger(name)
        if any(getattr(h, "limno", False) for h in logger.handlers):
            continue
        for h in list(logger.handlers):
            logger.removeHandler(h)
        # no writable state directory: dropped (the error itself still reaches the caller)
        handler: Any = logging.FileHandler(log, delay=True) if writable else logging.NullHandler()
        handler.limno = True
        logger.addHandler(handler)
        logger.propagate = False


@contextlib.contextmanager
def session_conf(spark: SparkSession, conf: Mapping[str, str]) -> Iterator[None]:
    """Runtime settings of ``spark`` changed for the block, then restored."""
    old: dict[str, str | None] = {k: spark.conf.get(k, None) for k in conf}
    for k, v in conf.items():
        spark.conf.set(k, v)
    try:
        yield
    finally:
        for k, before in old.items():
            if before is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, before)


def hadoop_uri(storage: Storage, path: str) -> str:
    """The Hadoop URI Spark reads a lake object at (``file://`` or ``s3a://``)."""
    local = storage.local_path(path)
    if local is not None:
        return "file://" + local
    uri = storage.uri
    if uri.startswith("s3://"):
        return "s3a://" + uri[len("s3://") :].rstrip("/") + "/" + path
    raise InvalidInputError(
        f"the Spark engine cannot read a lake at {uri} (use a local path or s3://)"
    )


#: environment variables a task copies from the driver before it opens the lake
_TASK_ENV = re.compile(r"^AWS_")


@dataclass(frozen=True)
class LakeSpec:
    """What a Spark task needs to open the lake with :mod:`limno.storage`."""

    uri: str
    env: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, storage: Storage) -> LakeSpec:
        if storage.uri.startswith("memory://"):
            raise InvalidInputError("the Spark engine cannot use a memory:// lake")
        env = {k: v for k, v in os.environ.items() if _TASK_ENV.match(k)}
        return cls(storage.uri, env)

    def open(self) -> Storage:
        os.environ.update(self.env)
        return open_storage(self.uri)


# -- errors raised inside Spark tasks ----------------------------------------------------

_TASK_ERROR = re.compile(
    r"limno\.errors\.(\w+Error): (.*?)(?:\n|$)",
)


def task_error(e: BaseException) -> LimnoError | None:
    """The limno error a failed Spark job carries from a Python task, if any."""

    text = str(e)
    for m in _TASK_ERROR.finditer(text):
        cls: Any = getattr(errors, m.group(1), None)
        if isinstance(cls, type) and issubclass(cls, LimnoError):
            return cls(m.group(2).strip())
    return None


def spark_error(e: BaseException, what: str, sql: bool = False) -> BaseException:
    """The one translation of a Spark failure into limno's errors (``e`` itself when
    there is none): the limno error a task raised, a missing data object as
    NotFoundError, an analysis or parse error as InvalidInputError; with ``sql``
    (the user's statement ran) any other Spark error is the statement's fault too."""
    from pyspark.errors import AnalysisException, PySparkException

    if isinstance(e, LimnoError):
        return e
    found = task_error(e)
    if found is not None:
        return found
    if isinstance(e, PySparkException) and "FileNotFoundException" in str(e):
        return NotFoundError(f"{what}: a data object is missing ({_first_line(e)})")
    if isinstance(e, AnalysisException) or (sql and isinstance(e, PySparkException)):
        return InvalidInputError(f"{what}: {_first_line(e)}")
    return e


@contextlib.contextmanager
def translate_errors(what: str, sql: bool = False) -> Iterator[None]:
    """Re-raise what Spark raises in the block as :func:`spark_error` translates it."""
    try:
        yield
    except Exception as e:
        translated = spark_error(e, what, sql)
        if translated is e:
            raise
        raise translated from e


def _first_line(e: BaseException) -> str:
    """One line of a Spark error, without its trailing SQLSTATE and plan context."""
    lines = [line for line in str(e).splitlines() if line.strip()]
    first = lines[0] if lines else type(e).__name__
    return first.split(" SQLSTATE:")[0].rstrip()

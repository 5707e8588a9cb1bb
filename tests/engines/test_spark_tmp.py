"""A local Spark session copies no jars into its temp directory, so a killed JVM
(the crash tests kill drivers on purpose) leaves kilobytes in /tmp, not the 625 MB
of jars ``spark.jars`` would have copied into ``/tmp/spark-*/userFiles-*``."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from limno.engines import spark as ls
from limno.engines.spark import _session

pytestmark = [pytest.mark.spark]

#: a session that reads through the s3a classes, then says where its temp files are
DRIVER = textwrap.dedent(
    """
    import sys, time
    from limno.engines import spark as ls

    spark = ls.session("local[1]", {"spark.ui.enabled": "false"})
    assert spark.range(3).count() == 3
    jvm = spark.sparkContext._jvm
    loader = jvm.org.apache.spark.util.Utils.getContextOrSparkClassLoader()
    jvm.java.lang.Class.forName("org.apache.hadoop.fs.s3a.S3AFileSystem", False, loader)
    print(jvm.org.apache.spark.SparkFiles.getRootDirectory(), flush=True)
    time.sleep(600)  # killed by the test
    """
)


def _jars_under(root: Path) -> list[Path]:
    return [p for p in root.rglob("*.jar") if p.is_file()]


def _size(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def test_local_sessions_put_the_jars_on_the_class_path() -> None:
    found = ls.jars()
    if not found:
        pytest.skip("no jars fetched (scripts/jars.sh)")
    for master in ("local", "local[2]", "local[*]", "local[2,3]"):
        conf = ls.spark_conf(master)
        assert conf["spark.driver.extraClassPath"].split(os.pathsep) == found
        assert "spark.jars" not in conf
    for master in ("spark://127.0.0.1:7077", "local-cluster[2,1,1024]"):
        conf = ls.spark_conf(master)
        assert conf["spark.jars"].split(",") == found  # other JVMs need them shipped
        assert "spark.driver.extraClassPath" not in conf


def test_a_jvm_started_elsewhere_gets_the_jars_shipped(monkeypatch: pytest.MonkeyPatch) -> None:
    found = ls.jars()
    if not found:
        pytest.skip("no jars fetched (scripts/jars.sh)")
    conf = ls.spark_conf("local[1]")
    monkeypatch.setattr(_session, "_jvm_class_path", None)
    monkeypatch.setenv("PYSPARK_GATEWAY_PORT", "1")  # as when PySpark was handed a JVM
    shipped = _session._jars_for_jvm(conf)
    assert shipped["spark.jars"].split(",") == found
    assert "spark.driver.extraClassPath" not in shipped
    own = {**conf, "spark.driver.extraClassPath": "/opt/mine.jar"}
    assert _session._jars_for_jvm(own) == own  # a caller's class path is left alone
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT")
    from pyspark import SparkContext

    # (another test of this worker process may have started a JVM: as if none had)
    monkeypatch.setattr(SparkContext, "_gateway", None)
    assert _session._jars_for_jvm(conf) == conf  # a JVM yet to start takes the class path


def test_a_killed_local_session_leaves_no_jar_copy(tmp_path: Path) -> None:
    if not any("hadoop-aws" in j for j in ls.jars()):
        pytest.skip("no jars fetched (scripts/jars.sh)")
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    proc = subprocess.Popen(
        [sys.executable, str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    spark_dir: Path | None = None
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().decode().strip()  # a whole line, or EOF if it died
        assert line, "the driver ended before its session ran"
        files = Path(line)
        spark_dir = files.parent  # /tmp/spark-<uuid>, the session's own temp directory
        assert spark_dir.name.startswith("spark-") and files.is_dir()
        assert _jars_under(spark_dir) == []
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        if proc.stdout is not None:
            proc.stdout.close()
    assert spark_dir is not None
    try:
        # what the killed JVM left behind: no jar, far below the 625 MB jars would take
        assert _jars_under(spark_dir) == []
        assert _size(spark_dir) < 20 * 2**20
    finally:
        shutil.rmtree(spark_dir, ignore_errors=True)  # the test's own leftover

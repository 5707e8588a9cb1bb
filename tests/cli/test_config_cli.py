"""``limno config``: defaults in TOML files, and the precedence flag > environment >
the lake's file > the user's file."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from clirunner import fail, ok
from lake_modes import local_only, located
from limno.cli._output import FORMATS
from limno.config import OUTPUT_FORMATS, Settings, read_config, write_config

pytestmark = pytest.mark.usefixtures("isolated_home")

#: a lake's own config.toml is a file in its directory: local lakes only, as for s3://
LAKE_FILE = local_only("the lake's config file is read from its directory")


def user_file() -> Path:
    return Path(os.environ["XDG_CONFIG_HOME"]) / "limno" / "config.toml"


@pytest.fixture
def lake(tmp_path: Path, mode: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Pool ``logs``: the lake's path, or a server on it (``mode``)."""
    where = str(tmp_path / "lake")
    ok("--lake", where, "init")
    ok("--lake", where, "create", "logs", "-k", "ts")
    with located(where, mode, monkeypatch) as location:
        yield location


def test_set_get_list_and_unset() -> None:
    ok("config", "set", "format", "json")
    ok("config", "set", "spark.master", "local[2]")
    ok("config", "set", "spark.conf.spark.sql.shuffle.partitions", "4")
    assert ok("config", "get", "format").text == "json\n"
    doc = tomllib.loads(user_file().read_text())
    assert doc == {
        "format": "json",
        "spark": {"master": "local[2]", "conf": {"spark.sql.shuffle.partitions": "4"}},
    }
    rows = ok("-f", "ndjson", "config", "list", "--show-origin").rows()
    assert rows == [
        {"key": "format", "value": "json", "origin": str(user_file())},
        {
            "key": "spark.conf.spark.sql.shuffle.partitions",
            "value": "4",
            "origin": str(user_file()),
        },
        {"key": "spark.master", "value": "local[2]", "origin": str(user_file())},
    ]
    assert ok("-f", "ndjson", "config", "list").rows()[0] == {"key": "format", "value": "json"}
    ok("config", "unset", "spark.master")
    assert "is not set" in fail("config", "get", "spark.master").err
    assert "spark" in tomllib.loads(user_file().read_text())  # the conf is left


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("set", "colour", "red"), "unknown config key 'colour'"),
        (("set", "format", "yaml"), "format must be one of table, ndjson"),
        (("set", "engine", "gpu"), "engine must be one of local, spark, auto"),
        (("get", "colour"), "unknown config key 'colour'"),
        (("unset", "format"), "is not set in"),
    ],
)
def test_keys_and_values_are_checked(args: tuple[str, ...], words: str) -> None:
    assert words in fail("config", *args).err
    assert not user_file().exists()


def test_a_bad_file_is_named(lake: str) -> None:
    user_file().parent.mkdir(parents=True)
    user_file().write_text('colour = "red"\n')
    assert f"config file {user_file()}: unknown config key 'colour'" in fail("ls").err
    user_file().write_text("format = \n")
    assert f"config file {user_file()}" in fail("--lake", lake, "ls").err


def test_the_config_sets_the_lake_and_the_format(lake: str) -> None:
    ok("config", "set", "lake", lake)
    ok("config", "set", "format", "csv")
    assert ok("ls").text.splitlines()[0] == '"name","id","kind","key","created"'
    assert ok("-f", "ndjson", "ls").rows()[0]["name"] == "logs"  # the flag wins


@LAKE_FILE
def test_precedence_flag_env_lake_user(lake: str, monkeypatch: pytest.MonkeyPatch) -> None:
    ok("config", "set", "format", "csv")
    ok("--lake", lake, "config", "set", "--scope", "lake", "format", "json")
    assert (Path(lake) / "config.toml").is_file()
    origin = ok("--lake", lake, "-f", "ndjson", "config", "list", "--show-origin").rows()
    assert origin == [{"key": "format", "value": "json", "origin": str(Path(lake) / "config.toml")}]
    assert ok("--lake", lake, "ls").text.startswith("[")  # the lake's file over the user's
    monkeypatch.setenv("LIMNO_FORMAT", "ndjson")
    assert ok("--lake", lake, "ls").rows()[0]["name"] == "logs"  # the environment over both
    assert ok("--lake", lake, "config", "get", "format").text == "ndjson\n"
    assert ok("--lake", lake, "-f", "csv", "ls").text.startswith('"name"')  # the flag first
    ok("--lake", lake, "verify")  # the lake's config.toml is no fault


@LAKE_FILE
def test_the_lake_file_cannot_name_the_lake(lake: str) -> None:
    r = fail("--lake", lake, "config", "set", "--scope", "lake", "lake", "/elsewhere")
    assert "'lake' is set in the user's config" in r.err
    r = fail("--lake", "s3://bucket/lake", "config", "set", "--scope", "lake", "format", "json")
    assert "local lakes only" in r.err


def test_the_engine_and_spark_settings_reach_the_commands(
    lake: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--engine`` defaults to the config's engine: a bad one is refused where it is read."""
    ok("config", "set", "engine", "local")
    assert ok("--lake", lake, "query", "SELECT 1 AS one").rows() == [{"one": 1}]
    monkeypatch.setenv("LIMNO_ENGINE", "turbo")
    r = fail("--lake", lake, "query", "SELECT 1 AS one")
    assert "environment LIMNO_ENGINE: engine must be one of" in r.err
    monkeypatch.delenv("LIMNO_ENGINE")
    ok("config", "set", "spark.conf.spark.x", "1")
    monkeypatch.setenv("LIMNO_SPARK_CONF", "spark.x=2;spark.y=3")
    ok("config", "set", "spark.master", "local[1]")
    settings = Settings(lake)
    assert settings.spark_conf() == {"spark.x": "2", "spark.y": "3"}
    assert settings.get("spark.master") == "local[1]"


def test_writing_is_atomic_and_reads_back(tmp_path: Path) -> None:
    path = str(tmp_path / "d" / "config.toml")
    settings = {"format": "json", "spark.conf.a.b": 'quote " and \\ back', "lake": "/l\u00e9"}
    write_config(path, settings)
    assert read_config(path) == settings
    assert os.listdir(tmp_path / "d") == ["config.toml"]  # no temporary file is left


def test_formats_are_the_output_modules() -> None:
    assert FORMATS == OUTPUT_FORMATS


@LAKE_FILE
def test_reading_the_config_imports_nothing_heavy(lake: str, tmp_path: Path) -> None:
    ok("config", "set", "format", "json")
    ok("--lake", lake, "config", "set", "--scope", "lake", "format", "ndjson")
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "limno", "--lake", lake, "ls"],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        timeout=120,
        check=True,
    )
    modules = {
        line.rsplit("|", 1)[1].strip()
        for line in proc.stderr.splitlines()
        if line.startswith("import time:") and line.count("|") == 2
    }
    assert "tomllib" in modules  # the files were read
    heavy = ("pyarrow", "duckdb", "numpy", "pandas", "decimal", "rich", "tempfile")
    assert [m for m in modules if m.split(".")[0] in heavy] == []
    assert proc.stdout.startswith('{"name": "logs"')

"""The CLI a daily user expects: every listing in every format, JSON that keeps numbers,
SQL from files, stdin and ``--`` comments, shell completion, a clear error for a
missing bucket.

(Progress bars: test_cli_progress.py; config files: test_config_cli.py.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from clirunner import fail, ok, run
from daily_support import lake, parse

__all__ = ["lake"]  # the fixture, imported

pytestmark = pytest.mark.usefixtures("isolated_home")


FORMATS = ("ndjson", "json", "csv", "parquet", "arrow")


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("where", ["global", "local"])
def test_branch_and_tag_listings_in_every_format(lake: str, fmt: str, where: str) -> None:
    heads = {b["name"]: b["commit"] for b in ok("--lake", lake, "ls", "logs").rows()}
    for kind, names in (("branch", ["dev", "main"]), ("tag", ["v1"])):
        args = (
            ("-f", fmt, kind, "-p", "logs")
            if where == "global"
            else (kind, "-p", "logs", "-f", fmt)
        )
        rows = parse(fmt, ok("--lake", lake, *args).out)
        assert [r["name"] for r in rows] == names
        assert all(r["commit"] == heads[r["name"]] for r in rows)


def test_listings_keep_their_plain_lines_when_piped_without_a_format(lake: str) -> None:
    """What scripts read before -f applied to them: NAME<TAB>COMMIT, PATH<TAB>BYTES."""
    lines = ok("--lake", lake, "branch", "-p", "logs").text.splitlines()
    assert [line.split("\t")[0] for line in lines] == ["dev", "main"]
    assert ok("--lake", lake, "-f", "table", "tag", "-p", "logs").text.startswith("name")


@pytest.mark.parametrize("fmt", FORMATS)
def test_vacuum_dry_run_lists_what_it_would_remove(lake: str, tmp_path: Path, fmt: str) -> None:
    ok("--lake", lake, "branch", "-p", "logs", "gone", "--from", "main")
    more = tmp_path / "more.ndjson"
    more.write_text('{"ts": 9, "msg": "x"}\n')
    ok("--lake", lake, "load", "-p", "logs@gone", str(more))
    ok("--lake", lake, "branch", "-p", "logs", "-d", "gone")
    args = ("--lake", lake, "-f", fmt, "vacuum", "-p", "logs", "--grace", "0", "--dry-run")
    r = ok(*args)
    rows = parse(fmt, r.out)
    assert len(rows) == 1 and int(str(rows[0]["bytes"])) > 0
    assert str(rows[0]["path"]).endswith(".parquet")
    assert "would remove 1 object(s)" in r.err


@pytest.mark.parametrize("fmt", FORMATS)
def test_status_in_every_format(lake: str, fmt: str) -> None:
    rows = parse(fmt, ok("--lake", lake, "status", "logs", "-f", fmt).out)
    reports = {r["report"] for r in rows}
    assert {"partitions", "files"} <= reports
    assert {r["pool"] for r in rows} == {"logs"}
    files = [r for r in rows if r["report"] == "files"]
    assert len(files) == 1 and int(str(files[0]["rows"])) == 3


@pytest.mark.parametrize("fmt", ["json", "csv", "parquet"])
def test_diff_and_hooks_in_every_format(lake: str, tmp_path: Path, fmt: str) -> None:
    more = tmp_path / "more.ndjson"
    more.write_text('{"ts": 9, "msg": "x"}\n')
    ok("--lake", lake, "load", "-p", "logs@dev", str(more))
    rows = parse(fmt, ok("--lake", lake, "-f", fmt, "diff", "-p", "logs", "dev").out)
    assert [r["change"] for r in rows] == ["added"]
    ok("--lake", lake, "hook", "add", "-p", "logs", "--event", "pre-commit", "--run", "true", "h")
    rows = parse(fmt, ok("--lake", lake, "-f", fmt, "hook", "ls", "-p", "logs").out)
    assert [(r["name"], r["run"]) for r in rows] == [("h", "true")]


@pytest.mark.parametrize("fmt", ["json", "ndjson", "csv"])
def test_spark_status_as_a_row(fmt: str, tmp_path: Path) -> None:
    rows = parse(fmt, ok("--lake", str(tmp_path), "-f", fmt, "spark", "status").out)
    assert [r["state"] for r in rows] == ["down"]
    assert ok("spark", "status").text == "down\n"  # piped, no format: the plain word


# -- JSON keeps numbers numbers ---------------------------------------------------------------

NUMBERS = (
    "SELECT 1.10::DECIMAL(10,2) AS d, 18446744073709551615::UBIGINT AS u,"
    " 12345678901234567890123456789012345678::DECIMAL(38,0) AS big,"
    " 'nan'::DOUBLE AS nan, '-inf'::DOUBLE AS inf, 0.1::DOUBLE AS f,"
    " [1.50::DECIMAL(4,2), NULL] AS l, {'x': 2.5::DECIMAL(3,1)} AS s"
)


@pytest.mark.parametrize("fmt", ["ndjson", "json"])
def test_json_keeps_numbers_exact(lake: str, fmt: str) -> None:
    out = ok("--lake", lake, "-f", fmt, "query", NUMBERS).text
    assert '"d": 1.10' in out  # the decimal's digits, not 1.1 or "1.10"
    assert '"u": 18446744073709551615' in out
    assert '"big": 12345678901234567890123456789012345678' in out
    row = parse(fmt, out.encode())[0]
    assert row["nan"] is None and row["inf"] is None
    assert row["f"] == 0.1 and row["l"] == [1.5, None] and row["s"] == {"x": 2.5}
    big = json.loads(out.splitlines()[0] if fmt == "ndjson" else out, parse_float=str)
    first = big if fmt == "ndjson" else big[0]
    assert first["d"] == "1.10"  # a JSON number whose text is the decimal's


def test_the_table_shows_nan_and_decimal_digits(lake: str) -> None:
    out = ok("--lake", lake, "-f", "table", "query", NUMBERS).text
    assert "1.10" in out and "nan" in out and "-inf" in out


# -- SQL from files, stdin and -- comments ----------------------------------------------------


def test_sql_starting_with_a_comment_is_the_argument(lake: str) -> None:
    sql = "-- how many?\nSELECT count(*) AS n FROM logs"
    assert ok("--lake", lake, "query", sql).rows() == [{"n": 3}]
    assert ok("--lake", lake, "query", "-f", "json", sql).text.startswith("[")
    assert ok("--lake", lake, "query", "--", "--x\nSELECT 1 AS one").rows() == [{"one": 1}]
    r = fail("--lake", lake, "query", "--nosuch", "SELECT 1")
    assert "--nosuch" in r.err  # a mistyped option is still an option


def test_sql_from_a_file_and_from_stdin(lake: str, tmp_path: Path) -> None:
    script = tmp_path / "q.sql"
    script.write_text("-- count\nSELECT count(*) AS n\nFROM logs\n")
    assert ok("--lake", lake, "query", "--file", str(script)).rows() == [{"n": 3}]
    stdin = b"SELECT max(ts) AS top FROM logs"
    assert ok("--lake", lake, "query", "-", stdin=stdin).rows() == [{"top": 3}]
    assert ok("--lake", lake, "query", "--file", "-", stdin=stdin).rows() == [{"top": 3}]


@pytest.mark.parametrize(
    ("args", "words"),
    [
        ((), "query needs SQL"),
        (("--file", "nope.sql"), "cannot read SQL file nope.sql: no such file"),
        (("--file", "x.sql", "SELECT 1"), "not both"),
        (("-",), "the SQL is empty"),
    ],
)
def test_sql_input_errors(lake: str, args: tuple[str, ...], words: str) -> None:
    assert words in fail("--lake", lake, "query", *args).err


# -- shell completion -------------------------------------------------------------------------


@pytest.mark.parametrize(("shell", "marker"), [("bash", "complete -o"), ("zsh", "#compdef limno")])
def test_the_completion_script_is_produced(shell: str, marker: str) -> None:
    env = {**os.environ, "_LIMNO_COMPLETE": f"{shell}_source"}
    proc = subprocess.run(
        [sys.executable, "-m", "limno"], capture_output=True, text=True, env=env, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert marker in proc.stdout and "_limno_completion" in proc.stdout


def test_completion_offers_commands_and_config_keys() -> None:
    def complete(*words: str) -> list[str]:
        env = {
            **os.environ,
            "_LIMNO_COMPLETE": "bash_complete",
            "COMP_WORDS": " ".join(("limno", *words)),
            "COMP_CWORD": str(len(words)),
        }
        proc = subprocess.run(
            [sys.executable, "-m", "limno"], capture_output=True, text=True, env=env, timeout=60
        )
        return [line.split(",", 1)[1] for line in proc.stdout.splitlines()]

    assert complete("conf") == ["config"]
    assert complete("config", "set", "spark.m") == ["spark.master"]


# -- a missing S3 bucket ----------------------------------------------------------------------


@pytest.mark.s3
@pytest.mark.parametrize("command", [("init",), ("ls",), ("create", "p")])
def test_a_missing_bucket_is_named(s3_endpoint: str, command: tuple[str, ...]) -> None:
    r = fail("--lake", "s3://limno-no-such-bucket/lake", *command)
    assert r.err.strip() == (
        "error: s3://limno-no-such-bucket/lake: bucket 'limno-no-such-bucket' does not exist"
    )


@pytest.mark.s3
def test_an_existing_bucket_without_a_lake_says_so(s3_uri: str) -> None:
    assert "no lake at" in run("--lake", s3_uri, "ls").err

"""The CLI against a server prints what it prints against the lake's path: the same
stdout in every ``-f`` format, the same exit codes and ``error:`` lines."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from clirunner import Result, fail, ok, run
from server_support import served

FORMATS = ("table", "ndjson", "json", "csv", "parquet", "arrow")


@pytest.fixture
def both(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, str]]:
    """(a lake's path, the URL of a server on it), with pool ``logs`` loaded twice."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "home"))
    lake = str(tmp_path / "lake")
    ok("--lake", lake, "init")
    with served(lake) as url:
        yield lake, url


def _same(lake: str, url: str, *args: str, stdin: bytes = b"") -> Result:
    here, there = run("--lake", lake, *args, stdin=stdin), run("--lake", url, *args, stdin=stdin)
    assert (there.code, there.out, there.err) == (here.code, here.out, here.err), args
    return there


def test_commands_print_the_same(both: tuple[str, str], tmp_path: Path) -> None:
    lake, url = both
    data = tmp_path / "logs.ndjson"
    data.write_text("".join(f'{{"ts": {i}, "msg": "m{i}", "n": {{"a": {i}}}}}\n' for i in range(8)))
    assert ok("--lake", url, "create", "logs", "-k", "ts").out.strip()
    commit = ok("--lake", url, "load", "-p", "logs", "-m", "first", "--meta", "k=v", str(data))
    assert commit.err == "committed 1 object(s), 8 record(s) to logs@main\n"
    ok("--lake", url, "load", "-p", "logs", "-", stdin=b'{"ts": 20, "msg": "in"}\n')
    ok("--lake", url, "branch", "-p", "logs", "dev")
    ok("--lake", url, "load", "-p", "logs@dev", str(data))
    for fmt in FORMATS:
        _same(lake, url, "-f", fmt, "scan", "-p", "logs", "--from", "2", "--to", "6")
        _same(lake, url, "-f", fmt, "get", "-p", "logs", "3", "20")
        _same(lake, url, "-f", fmt, "query", 'SELECT ts, n FROM "logs@dev" ORDER BY ts')
        _same(lake, url, "-f", fmt, "ls")
        _same(lake, url, "-f", fmt, "log", "-p", "logs")
        _same(lake, url, "-f", fmt, "diff", "-p", "logs", "dev")
    assert _same(lake, url, "scan", "-p", "logs", "--order", "desc", "--limit", "2").rows()
    _same(lake, url, "ls", "logs")
    _same(lake, url, "branch", "-p", "logs")
    _same(lake, url, "-f", "table", "status", "logs")
    _same(lake, url, "stage", "-p", "logs")
    _same(lake, url, "hook", "ls", "-p", "logs")
    merged = ok("--lake", url, "merge", "-p", "logs", "dev", "--no-ff")
    assert merged.err.startswith("merged dev into logs@main")
    assert ok("--lake", url, "vacuum", "-p", "logs", "--dry-run").code == 0
    assert ok("--lake", url, "verify").text == f"ok: lake {url} verified\n"
    assert ok("--lake", url, "compact", "-p", "logs").code == 0


def test_errors_print_the_same(both: tuple[str, str], tmp_path: Path) -> None:
    lake, url = both
    ok("--lake", url, "create", "logs", "-k", "ts")
    for args in [
        ("scan", "-p", "nope"),
        ("create", "logs"),
        ("log", "-p", "logs@nobranch"),
        ("merge", "-p", "logs", "nobranch"),
        ("load", "-p", "logs", str(tmp_path / "missing.csv")),
        ("scan", "-p", "logs", "--limit", "-1"),
        ("branch", "-p", "logs", "-d", "main"),
        ("query", "SELECT * FROM nope"),
    ]:
        assert _same(lake, url, *args).code == 1
    assert fail("--lake", url, "load", "-p", "logs", "-", stdin=b"{bad\n").err == (
        run("--lake", lake, "load", "-p", "logs", "-", stdin=b"{bad\n").err
    )
    assert fail("--lake", url, "manage", "--once").err == (
        "error: manage runs next to the lake, not through a server\n"
    )
    assert fail("--lake", url, "init").err.startswith(f"error: {url}: a server serves a lake")
    assert fail("--lake", url, "serve").err.startswith("error: limno serve serves a lake path")

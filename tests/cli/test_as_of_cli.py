"""``--as-of TIME`` on every reading command (scan, get, log, query, diff) and ``as_of=`` in
the Python API, on a lake's path and through a server (``mode``).

Times are taken between commands from this process's clock: the lake (or the server,
on this machine) stamps each branch move when it is made, so a time read after one
command returns and before the next starts lies between the two moves.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import limno
from clirunner import fail, ok

pytestmark = pytest.mark.usefixtures("isolated_home")


@dataclass
class History:
    lake: str
    #: after the first load (keys 1, 2), before the second (key 3), before branch dev
    between: str
    first: str  # the first load's commit
    second: str


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat()


@pytest.fixture
def history(lake: str, tmp_path: Path) -> History:
    """Pool ``logs`` (key ts): load 1,2; time ``between``; load 3; branch dev; tag v2."""
    ok("--lake", lake, "create", "logs", "-k", "ts")
    a, b = tmp_path / "a.ndjson", tmp_path / "b.ndjson"
    a.write_text('{"ts": 1}\n{"ts": 2}\n')
    b.write_text('{"ts": 3}\n')
    first = ok("--lake", lake, "load", "-p", "logs", str(a)).text.strip()
    between = _now()
    second = ok("--lake", lake, "load", "-p", "logs", str(b)).text.strip()
    ok("--lake", lake, "branch", "-p", "logs", "dev")
    ok("--lake", lake, "tag", "-p", "logs", "v2")
    return History(lake, between, first, second)


def _log_ids(lake: str, *args: str) -> list[str]:
    r = ok("--lake", lake, "log", "-f", "json", *args)
    return [c["id"] for c in json.loads(r.text)]


def test_scan_get_and_log_read_the_branch_as_it_was(history: History) -> None:
    lake, t = history.lake, history.between
    assert [r["ts"] for r in ok("--lake", lake, "scan", "-p", "logs", "--as-of", t).rows()] == [
        1,
        2,
    ]
    assert ok("--lake", lake, "get", "-p", "logs", "--as-of", t, "3").rows() == []
    assert ok("--lake", lake, "get", "-p", "logs", "3").rows() == [{"ts": 3}]
    assert ok("--lake", lake, "get", "-p", "logs", "--as-of", t, "2", "1").rows() == [
        {"ts": 1},
        {"ts": 2},
    ]
    then = _log_ids(lake, "-p", "logs", "--as-of", t)
    assert then[0] == history.first and history.second not in then
    assert then == _log_ids(lake, "-p", f"logs@{history.first}")
    assert _log_ids(lake, "-p", "logs", "--as-of", t, "-n", "1") == [history.first]
    assert _log_ids(lake, "-p", "logs")[0] == history.second


def test_query_moves_branches_and_keeps_tags(history: History) -> None:
    lake, t = history.lake, history.between
    sql = 'SELECT (SELECT count(*) FROM logs) AS main, (SELECT count(*) FROM "logs@v2") AS v2'
    assert ok("--lake", lake, "query", sql).rows() == [{"main": 3, "v2": 3}]
    assert ok("--lake", lake, "query", "--as-of", t, sql).rows() == [{"main": 2, "v2": 3}]
    tilde = 'SELECT count(*) AS n FROM "logs@main~1"'
    assert ok("--lake", lake, "query", tilde).rows() == [{"n": 2}]
    # then, main~1 was the pool's first commit (no rows), and main~2 did not exist
    assert ok("--lake", lake, "query", "--as-of", t, tilde).rows() == [{"n": 0}]
    err = fail("--lake", lake, "query", "--as-of", t, tilde.replace("~1", "~2")).err
    assert "only" in err


def test_diff_reads_branch_sides_as_they_were(history: History) -> None:
    lake, t = history.lake, history.between
    diff = ("--lake", lake, "diff", "-p", "logs", "-f", "json")
    assert json.loads(ok(*diff, "main", "v2").text) == []
    added = json.loads(ok(*diff, "main", "v2", "--as-of", t).text)
    assert [e["change"] for e in added] == ["added"]
    # a side that is a tag or a commit id stays as named; both such sides: refused
    assert json.loads(ok(*diff, history.first, "main", "--as-of", t).text) == []
    assert "needs a branch" in fail(*diff, "v2", history.first, "--as-of", t).err


def test_a_time_before_the_branch_is_the_same_clear_error_everywhere(history: History) -> None:
    lake, old = history.lake, "2000-01-01T00:00:00"
    for args in (
        ("scan", "-p", "logs"),
        ("get", "-p", "logs", "1"),
        ("log", "-p", "logs"),
        ("query", "SELECT count(*) FROM logs"),
        ("diff", "-p", "logs", "main", "v2"),
    ):
        err = fail("--lake", lake, *args[:1], "--as-of", old, *args[1:]).err
        assert "branch 'main' did not exist at 2000-01-01T00:00:00+00:00" in err, args
    # dev was made after ``between``
    err = fail("--lake", lake, "scan", "-p", "logs@dev", "--as-of", history.between).err
    assert "branch 'dev' did not exist" in err
    dev = 'SELECT * FROM "logs@dev"'
    err = fail("--lake", lake, "query", "--as-of", history.between, dev).err
    assert "branch 'dev' did not exist" in err


def test_as_of_needs_a_branch_and_a_time(history: History) -> None:
    lake, t = history.lake, history.between
    for cmd in (("get", "1"), ("log",), ("scan",)):
        err = fail("--lake", lake, cmd[0], "-p", "logs@v2", "--as-of", t, *cmd[1:]).err
        assert "--as-of needs a branch, and 'v2' is not one" in err, cmd
    for name in ("get", "log", "scan", "query", "diff"):
        assert "invalid time" in fail("--lake", lake, name, "--as-of", "yesterday").err


@pytest.fixture
def opened(history: History) -> Iterator[limno.Lake]:
    lake = limno.Lake.open(history.lake)
    try:
        yield lake
    finally:
        close = getattr(lake, "close", None)
        if close is not None:
            close()


def test_python_api_as_of(opened: limno.Lake, history: History) -> None:
    t = dt.datetime.fromisoformat(history.between)
    pool = opened.pool("logs")
    assert pool.get([3], as_of=t).num_rows == 0 and pool.get([3]).num_rows == 1
    assert pool.log(as_of=t)[0].id == history.first
    assert pool.log("main", 1, as_of=t)[0].id == history.first
    assert [e.change for e in pool.diff("main", "v2", as_of=t)] == ["added"]
    sql = "SELECT count(*) AS n FROM logs"
    assert opened.query(sql, as_of=t).to_pylist() == [{"n": 2}]
    assert opened.query(sql).to_pylist() == [{"n": 3}]
    with pytest.raises(limno.NotFoundError, match="did not exist"):
        pool.log(as_of=dt.datetime(2000, 1, 1, tzinfo=dt.UTC))

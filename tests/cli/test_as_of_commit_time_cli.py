"""``--as-of T`` is the branch as it was at T, including a commit made at T: the time a
user reads off ``limno log`` (a commit's ``date``) shows that commit, on a lake's path
and through a server (``mode``).

A branch move is stamped when it lands, a moment after its commit was made (dated),
so a commit's own date once showed the branch before it. Only commits made on the
branch count from their date: one that came to it later (a fast-forward merge of
another branch's commit) counts from the merge.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from clirunner import fail, ok

pytestmark = pytest.mark.usefixtures("isolated_home")


def _dates(lake: str, ref: str) -> dict[str, str]:
    """Commit id -> its date, as ``limno log -f json`` shows them."""
    commits = json.loads(ok("--lake", lake, "log", "-p", ref, "-f", "json").text)
    return {c["id"]: c["date"] for c in commits}


def _ts(lake: str, ref: str, *args: str) -> list[int]:
    rows = ok("--lake", lake, "scan", "-p", ref, "-f", "ndjson", *args).rows()
    return [r["ts"] for r in rows]


def _load(lake: str, ref: str, path: Path, *keys: int) -> str:
    path.write_text("".join(f'{{"ts": {k}}}\n' for k in keys))
    return ok("--lake", lake, "load", "-p", ref, str(path)).text.strip()


def _before(date: str) -> str:
    return (dt.datetime.fromisoformat(date) - dt.timedelta(microseconds=1)).isoformat()


def test_as_of_a_commits_own_date_includes_it(lake: str, tmp_path: Path) -> None:
    ok("--lake", lake, "create", "logs", "-k", "ts")
    first = _load(lake, "logs", tmp_path / "a.ndjson", 1, 2)
    second = _load(lake, "logs", tmp_path / "b.ndjson", 3)
    dates = _dates(lake, "logs")
    at = dates[second]
    assert _ts(lake, "logs", "--as-of", at) == [1, 2, 3]
    assert _ts(lake, "logs", "--as-of", _before(at)) == [1, 2]  # a microsecond before it
    assert _ts(lake, "logs", "--as-of", dates[first]) == [1, 2]
    get = ("--lake", lake, "get", "-p", "logs", "-f", "ndjson", "3", "--as-of", at)
    assert ok(*get).rows() == [{"ts": 3}]
    log = json.loads(ok("--lake", lake, "log", "-p", "logs", "-f", "json", "--as-of", at).text)
    assert log[0]["id"] == second
    sql = ("--lake", lake, "query", "-f", "ndjson", "SELECT count(*) AS n FROM logs")
    assert ok(*sql, "--as-of", at).rows() == [{"n": 3}]
    # the pool's first commit, at its own date: the branch, empty
    (root,) = set(dates) - {first, second}
    assert _ts(lake, "logs", "--as-of", dates[root]) == []
    err = fail("--lake", lake, "scan", "-p", "logs", "--as-of", _before(dates[root])).err
    assert "branch 'main' did not exist" in err


def test_a_commit_merged_later_counts_from_the_merge(lake: str, tmp_path: Path) -> None:
    ok("--lake", lake, "create", "logs", "-k", "ts")
    _load(lake, "logs", tmp_path / "a.ndjson", 1)
    ok("--lake", lake, "branch", "-p", "logs", "dev")
    on_dev = _load(lake, "logs@dev", tmp_path / "b.ndjson", 2)
    made = _dates(lake, "logs@dev")[on_dev]
    assert _ts(lake, "logs@dev", "--as-of", made) == [1, 2]
    ok("--lake", lake, "merge", "-p", "logs", "dev")  # a fast-forward, after ``made``
    assert _ts(lake, "logs") == [1, 2]
    assert _ts(lake, "logs", "--as-of", made) == [1]  # main did not hold it then

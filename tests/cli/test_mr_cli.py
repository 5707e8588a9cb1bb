"""``limno mr``: merge requests of record and file pools, on a lake path and through a real
server (``mode``): open, list, show, compare (diff, counts, conflicts, rows), merge with a
strategy, a pre-merge hook's veto kept, close, and two merges of one request racing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from clirunner import fail, ok
from daily_support import lake, parse

pytestmark = pytest.mark.usefixtures("isolated_home")
__all__ = ["lake"]  # the fixture, imported

#: how long a racing ``limno mr merge`` subprocess may take
RACE_TIMEOUT = 120


@pytest.fixture(autouse=True)
def _verified(lake: str) -> Iterator[None]:
    """After each scenario ``limno verify`` passes (``lake``: test_cli_daily's pool
    ``logs``, key ts, rows 1..3 on main, branch ``dev`` and tag ``v1`` at main)."""
    yield
    ok("--lake", lake, "verify")


def load(lake: str, tmp_path: Path, ref: str, *rows: int) -> None:
    data = tmp_path / "more.ndjson"
    data.write_text("".join(f'{{"ts": {i}, "msg": "n{i}"}}\n' for i in rows))
    ok("--lake", lake, "load", "-p", ref, str(data))


def opened(lake: str, *args: str) -> str:
    return ok("--lake", lake, "mr", "open", "-p", "logs", *args).text.strip()


def shown(lake: str, mr_id: str) -> dict[str, object]:
    return ok("--lake", lake, "mr", "show", "-p", "logs", mr_id, "-f", "ndjson").rows()[0]


def test_open_compare_merge_and_list(lake: str, tmp_path: Path) -> None:
    load(lake, tmp_path, "logs@dev", 4, 5)
    compared = ok("--lake", lake, "mr", "compare", "-p", "logs", "dev", "-f", "ndjson")
    assert [r["change"] for r in compared.rows()] == ["added"]
    assert "fast-forward, 1 added, 0 removed, 0 changed" in compared.err
    sample = ok("--lake", lake, "mr", "compare", "-p", "logs", "dev", "--sample", "-f", "ndjson")
    assert [(r["_change"], r["ts"], r["msg"]) for r in sample.rows()] == [
        ("added", 4, "n4"),
        ("added", 5, "n5"),
    ]
    mr_id = opened(lake, "dev", "-t", "more rows", "-d", "rows 4 and 5")
    row = shown(lake, mr_id)
    assert (row["state"], row["title"], row["description"]) == ("open", "more rows", "rows 4 and 5")
    assert (row["source"], row["into"]) == ("dev", "main")
    merged = ok("--lake", lake, "mr", "merge", "-p", "logs", mr_id)
    commit = merged.text.strip()
    assert commit == ok("--lake", lake, "branch", "-p", "logs", "-f", "ndjson").rows()[1]["commit"]
    row = shown(lake, mr_id)
    assert (row["state"], row["commit"], row["strategy"]) == ("merged", commit, "fail")
    scan = ok("--lake", lake, "scan", "-p", "logs", "-f", "ndjson").rows()
    assert [r["ts"] for r in scan] == [1, 2, 3, 4, 5]
    assert ok("--lake", lake, "mr", "ls", "-p", "logs", "-f", "ndjson").rows() == []
    for fmt in ("table", "ndjson", "json", "csv", "parquet", "arrow"):
        out = ok("--lake", lake, "mr", "ls", "-p", "logs", "--state", "merged", "-f", fmt).out
        if fmt == "table":
            assert mr_id in out.decode() and "merged" in out.decode()
        else:
            assert [(r["id"], r["state"]) for r in parse(fmt, out)] == [(mr_id, "merged")]
    again = fail("--lake", lake, "mr", "merge", "-p", "logs", mr_id)
    assert f"it was merged as {commit}" in again.err


def test_conflict_seen_then_resolved_by_strategy(lake: str) -> None:
    """Both branches rewrite the one object: compare names it, a ``fail`` merge stops at
    it (kept on the request), ``source-wins`` merges and main takes dev's rows."""
    ok("--lake", lake, "delete", "-p", "logs@main", "--where", "ts = 1")
    ok("--lake", lake, "delete", "-p", "logs@dev", "--where", "ts = 2")
    compared = ok("--lake", lake, "mr", "compare", "-p", "logs", "dev", "--into", "main")
    assert "merge, 1 added, 1 removed" in compared.err and "1 conflict(s)" in compared.err
    mr_id = opened(lake, "dev", "--into", "main", "-t", "drop 2")
    refused = fail("--lake", lake, "mr", "merge", "-p", "logs", mr_id)
    assert "conflicting" in refused.err
    row = shown(lake, mr_id)
    assert row["state"] == "open" and str(row["outcome"]).startswith("conflict:")
    done = ok("--lake", lake, "mr", "merge", "-p", "logs", mr_id, "--strategy", "source-wins")
    assert done.text.strip()
    assert shown(lake, mr_id)["strategy"] == "source-wins"
    scan = ok("--lake", lake, "scan", "-p", "logs", "-f", "ndjson").rows()
    assert [r["ts"] for r in scan] == [1, 3]


def test_hook_verdicts_are_kept(lake: str, tmp_path: Path) -> None:
    load(lake, tmp_path, "logs@dev", 9)
    ok("--lake", lake, "hook", "add", "-p", "logs", "--event", "pre-merge", "--run", "true", "ok")
    veto = "echo 'not on Fridays' >&2; exit 3"
    ok("--lake", lake, "hook", "add", "-p", "logs", "--event", "pre-merge", "--run", veto, "no")
    mr_id = opened(lake, "dev", "-t", "nine")
    refused = fail("--lake", lake, "mr", "merge", "-p", "logs", mr_id)
    assert "not on Fridays" in refused.err
    row = shown(lake, mr_id)
    assert row["state"] == "open"
    assert row["verdicts"] == "pre-merge ok: passed; pre-merge no: vetoed (not on Fridays)"
    ok("--lake", lake, "hook", "rm", "-p", "logs", "no")
    ok("--lake", lake, "mr", "merge", "-p", "logs", mr_id)
    row = shown(lake, mr_id)
    assert (row["state"], row["verdicts"], row["attempts"]) == (
        "merged",
        "pre-merge ok: passed",
        2,
    )


def test_close_and_refusals(lake: str, tmp_path: Path) -> None:
    load(lake, tmp_path, "logs@dev", 7)
    mr_id = opened(lake, "dev", "-t", "seven")
    closed = ok("--lake", lake, "mr", "close", "-p", "logs", mr_id, "-f", "json")
    assert json.loads(closed.out)[0]["state"] == "closed"
    assert "it was closed" in fail("--lake", lake, "mr", "merge", "-p", "logs", mr_id).err
    assert "it was closed" in fail("--lake", lake, "mr", "close", "-p", "logs", mr_id).err
    assert ok("--lake", lake, "mr", "ls", "-p", "logs", "--state", "closed", "-f", "ndjson").rows()
    unknown = fail("--lake", lake, "mr", "show", "-p", "logs", "3McpXLfnkyHHksrykXHJTVs4AgZ")
    assert "has no merge request" in unknown.err
    assert "two refs" in fail("--lake", lake, "mr", "open", "-p", "logs", "main", "-t", "x").err
    missing = fail("--lake", lake, "mr", "open", "-p", "logs", "dev", "--into", "nope", "-t", "x")
    assert "branch 'nope' not found" in missing.err
    assert "needs a title" in fail("--lake", lake, "mr", "open", "-p", "logs", "dev", "-t", " ").err


def test_merge_into_a_protected_branch(lake: str, tmp_path: Path) -> None:
    """Protection refuses direct writes, not merges: a merge request merges into it."""
    load(lake, tmp_path, "logs@dev", 8)
    ok("--lake", lake, "branch", "protect", "-p", "logs", "main")
    mr_id = opened(lake, "dev", "-t", "eight")
    ok("--lake", lake, "mr", "merge", "-p", "logs", mr_id, "--strategy", "dest-wins")
    assert shown(lake, mr_id)["state"] == "merged"


def test_file_pool(lake: str, tmp_path: Path) -> None:
    ok("--lake", lake, "create", "imgs", "--kind", "files")
    for branch, text in (("main", b"base"),):
        local = tmp_path / "a.txt"
        local.write_bytes(text)
        ok("--lake", lake, "fs", "upload", str(local), f"imgs@{branch}/a.txt")
        ok("--lake", lake, "commit", "-p", f"imgs@{branch}")
    ok("--lake", lake, "branch", "-p", "imgs", "dev")
    for branch, name, text in (("dev", "a.txt", b"dev"), ("main", "a.txt", b"main")):
        local = tmp_path / name
        local.write_bytes(text)
        ok("--lake", lake, "fs", "upload", str(local), f"imgs@{branch}/{name}")
        ok("--lake", lake, "commit", "-p", f"imgs@{branch}")
    compared = ok("--lake", lake, "mr", "compare", "-p", "imgs", "dev", "-f", "ndjson")
    assert [(r["change"], r["path"]) for r in compared.rows()] == [("changed", "a.txt")]
    assert "1 conflict(s): a.txt" in compared.err
    made = ok("--lake", lake, "mr", "open", "-p", "imgs", "dev", "-t", "dev's a", "-f", "ndjson")
    mr_id = str(made.rows()[0]["id"])
    fail("--lake", lake, "mr", "merge", "-p", "imgs", mr_id)
    ok("--lake", lake, "mr", "merge", "-p", "imgs", mr_id, "--strategy", "source-wins")
    assert ok("--lake", lake, "fs", "cat", "imgs@main/a.txt").out == b"dev"


def test_two_merges_of_one_request_one_wins(lake: str, tmp_path: Path) -> None:
    """Two processes merge one request at once: exactly one succeeds, the other is told
    in one line that the request is being (or was) merged."""
    load(lake, tmp_path, "logs@dev", 6)
    ok("--lake", lake, "delete", "-p", "logs@main", "--where", "ts = 1")  # a merge commit
    mr_id = opened(lake, "dev", "-t", "six")
    command = [sys.executable, "-m", "limno", "--lake", lake, "mr", "merge", "-p", "logs", mr_id]
    procs = [
        subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ)
        )
        for _ in range(2)
    ]
    results = []
    for proc in procs:
        with proc:
            out, err = proc.communicate(timeout=RACE_TIMEOUT)
            results.append((proc.returncode, out, err))
    assert sorted(code for code, _, _ in results) == [0, 1], results
    winner = next(r for r in results if r[0] == 0)
    loser = next(r for r in results if r[0] == 1)
    lines = loser[2].strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), loser
    assert f"merge request {mr_id} is being merged by" in lines[0] or "it was merged" in lines[0]
    row = shown(lake, mr_id)
    assert (row["state"], row["commit"], row["attempts"]) == ("merged", winner[1].strip(), 1)

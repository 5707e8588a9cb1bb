"""``limno watch``: a real watching process prints what other processes change.

The watcher runs as its own ``limno`` process; the changes are made by the CLI in
this one. Lines are read whole with a bound (never after a sleep), and stopping
the watcher with SIGTERM or SIGINT is a clean exit 0.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bounded import DEFAULT_TIMEOUT, read_line, stop
from clirunner import fail, ok

pytestmark = pytest.mark.usefixtures("isolated_home")


@pytest.fixture
def data(tmp_path: Path) -> str:
    path = tmp_path / "rows.ndjson"
    path.write_text('{"ts": 1, "msg": "a"}\n{"ts": 2, "msg": "b"}\n')
    return str(path)


@pytest.fixture
def watcher(lake: str) -> Iterator[Any]:
    """Start ``limno watch ARGS...`` on the lake; every process started is reaped."""
    procs: list[subprocess.Popen[str]] = []

    def start(*args: str) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [sys.executable, "-m", "limno", "--lake", lake, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "LIMNO_DEBUG": "1"},
        )
        procs.append(proc)
        return proc

    yield start
    stop(procs)


def event(proc: subprocess.Popen[str]) -> dict[str, Any]:
    assert proc.stdout is not None
    line = read_line(proc.stdout)
    row: dict[str, Any] = json.loads(line)
    return row


def ended(proc: subprocess.Popen[str], how: signal.Signals) -> str:
    """Stop the watcher with signal ``how``; its stderr once it exited 0."""
    proc.send_signal(how)
    _, err = proc.communicate(timeout=DEFAULT_TIMEOUT)
    assert proc.returncode == 0, err
    return err


def test_watch_prints_what_another_process_changes(lake: str, data: str, watcher: Any) -> None:
    pool_id = ok("--lake", lake, "create", "logs", "-k", "ts").text.strip()
    proc = watcher("watch", "--from-start", "--interval", "0.05s")
    created, main = event(proc), event(proc)  # it runs: the lake's history came first
    assert (created["type"], created["pool"], created["pool_id"]) == (
        "pool.created",
        "logs",
        pool_id,
    )
    assert (main["type"], main["data"]["branch"]) == ("branch.created", "main")

    ok("--lake", lake, "load", "-p", "logs", "-m", "hello", "--author", "ann", data)
    commit, moved = event(proc), event(proc)
    assert commit["type"] == "commit"
    assert {k: commit["data"][k] for k in ("branch", "author", "message")} == {
        "branch": "main",
        "author": "ann",
        "message": "hello",
    }
    assert commit["data"]["rows"] == {"added": 2, "deleted": 0}
    assert moved["type"] == "branch.moved"
    assert moved["data"]["old"] == main["data"]["commit"]
    assert moved["data"]["new"] == commit["data"]["commit"]

    ok("--lake", lake, "tag", "-p", "logs", "v1")
    assert event(proc)["data"] == {"tag": "v1", "commit": commit["data"]["commit"]}
    ok("--lake", lake, "rename", "logs", "logs2")
    renamed = event(proc)
    assert (renamed["type"], renamed["pool"], renamed["data"]) == (
        "pool.renamed",
        "logs2",
        {"old_name": "logs"},
    )
    assert ended(proc, signal.SIGTERM) == ""


@pytest.mark.parametrize("interval", ["0.05s", "10s"])  # served: keep-alives 1 s / 15 s apart
def test_watch_on_a_terminal_style_prints_table_lines_and_ctrl_c_ends_it(
    lake: str, watcher: Any, interval: str
) -> None:
    ok("--lake", lake, "create", "logs")
    proc = watcher("-f", "table", "watch", "logs", "--from-start", "--interval", interval)
    assert proc.stdout is not None
    first = read_line(proc.stdout).split()
    assert first[2:4] == ["pool.created", "logs"]
    assert read_line(proc.stdout).split()[2:5] == ["branch.created", "logs", "main"]
    assert ended(proc, signal.SIGINT) == ""


def test_watch_resumes_after_an_id(lake: str, data: str) -> None:
    ok("--lake", lake, "create", "logs")
    ok("--lake", lake, "load", "-p", "logs", data)
    ok("--lake", lake, "branch", "-p", "logs", "dev")
    bound = ("--timeout", f"{DEFAULT_TIMEOUT}s")  # a bug must not hang the test
    every = ok("--lake", lake, "watch", "--from-start", "--exit-after", "5", *bound).rows()
    types = [r["type"] for r in every]
    assert types == ["pool.created", "branch.created", "commit", "branch.moved", "branch.created"]
    for i, row in enumerate(every[:-1]):
        rest = ok("--lake", lake, "watch", "--after", row["id"], "--exit-after", str(4 - i), *bound)
        assert rest.rows() == every[i + 1 :]


def test_watch_filters_by_pool_and_stops_at_its_timeout(lake: str) -> None:
    ok("--lake", lake, "create", "a")
    ok("--lake", lake, "create", "b")
    told = ok("--lake", lake, "watch", "b", "--from-start", "--timeout", "0.3s").rows()
    assert [(r["type"], r["pool"]) for r in told] == [
        ("pool.created", "b"),
        ("branch.created", "b"),
    ]
    assert ok("--lake", lake, "watch", "--timeout", "0.1s").out == b""  # nothing new


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("watch", "nosuch"), "pool 'nosuch' not found"),
        (("watch", "--from-start", "--after", "AQIAAA"), "not both"),
        (("watch", "--after", "garbage!"), "invalid event id"),
        (("-f", "csv", "watch"), "table or ndjson"),
    ],
)
def test_watch_refuses_bad_input_in_one_line(
    lake: str, args: tuple[str, ...], message: str
) -> None:
    assert message in fail("--lake", lake, *args).err

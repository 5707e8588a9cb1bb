"""A failing command fails the same way on a lake's path and through ``limno serve``.

Each case runs twice, on one lake: by its path and through a real server on it
(tests/lake_modes.py's way: a subprocess, an admin key in the environment). Both
must exit with the same code and print the same last ``error:`` line; only the
lake's location may differ where a message names it. The server's guard refuses
only what can be no name (control characters, over 1024 bytes): everything else
reaches the lake, which words it. The few differences by design are
:data:`BY_DESIGN`, each with what the server answers.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from clirunner import Result, ok, run
from git_scenarios import isolate_home
from lake_modes import reap
from server_support import start_server

#: what stands for the lake's files (rows to load and broken ones) in a case's arguments
FILES = "$FILES"

#: args of ``limno --lake LAKE ...`` that must fail alike, by what they get wrong
CASES: dict[str, tuple[str, ...]] = {
    # refs the lake cannot resolve, whatever they look like
    "ref with ..": ("scan", "-p", "logs@a..b"),
    "ref ..": ("scan", "-p", "logs@.."),
    "ref like a path": ("log", "-p", "logs@/etc/passwd"),
    "missing ref": ("scan", "-p", "logs@nope"),
    "ref ~ not a number": ("scan", "-p", "logs@main~x"),
    "ref ~ past the root": ("log", "-p", "logs@main~99"),
    "nothing after @": ("scan", "-p", "logs@"),
    "branch --from a path": ("branch", "-p", "logs", "x", "--from", "../../etc"),
    "branch from a bad -p ref": ("branch", "-p", "logs@../x", "new"),
    "merge a path": ("merge", "-p", "logs", "../x"),
    "merge into a path": ("merge", "-p", "logs", "dev", "--into", "../x"),
    "diff a..b": ("diff", "-p", "logs", "a..b", "main"),
    "diff missing ref": ("diff", "-p", "logs", "main", "nope"),
    "revert missing commit": ("revert", "-p", "logs", "nope"),
    "cherry-pick missing": ("cherry-pick", "-p", "logs", "nope"),
    "reset to missing ref": ("reset", "--hard", "-p", "logs@main", "nope"),
    "stage of a path branch": ("stage", "-p", "logs@../../x"),
    "stage of a/b": ("stage", "-p", "logs@a/b"),
    # pools that are not there, whatever their names look like
    "pool like a path": ("scan", "-p", "../etc"),
    "pool with a space": ("scan", "-p", "lo gs"),
    "pool:table": ("scan", "-p", "logs:objects"),
    "pool ..": ("scan", "-p", ".."),
    "pool .": ("ls", "."),
    "pool with encoded slash": ("scan", "-p", "..%2Fx"),
    "pool named like a route": ("scan", "-p", "branches"),
    "missing pool": ("log", "-p", "nope"),
    "drop a path": ("drop", "../x"),
    "rename a path": ("rename", "../x", "y"),
    "status of a path": ("status", "../x"),
    "verify missing pool": ("verify", "nope"),
    # branches, tags and hooks that are not there
    "delete branch a path": ("branch", "-p", "logs", "-d", "../x"),
    "delete branch ..": ("branch", "-p", "logs", "-d", ".."),
    "delete missing branch": ("branch", "-p", "logs", "-d", "nope"),
    "delete tag a path": ("tag", "-p", "logs", "-d", "a/../b"),
    "delete missing tag": ("tag", "-p", "logs", "-d", "nope"),
    "remove hook a/b": ("hook", "rm", "-p", "logs", "a/b"),
    # names the lake refuses
    "bad branch name": ("branch", "-p", "logs", "bad name"),
    "bad tag name": ("tag", "-p", "logs", "../v"),
    "bad pool name": ("create", "bad/name"),
    "rename to a bad name": ("rename", "logs", "a b"),
    # conflicts
    "pool exists": ("create", "logs", "--key", "ts"),
    "rename onto a pool": ("rename", "logs", "other"),
    "branch exists": ("branch", "-p", "logs", "dev"),
    "tag exists": ("tag", "-p", "logs", "v1"),
    "tag named like a branch": ("tag", "-p", "logs", "dev"),
    # keys, objects, partitions
    "key of the wrong type": ("get", "-p", "logs", "notanint"),
    "key of the wrong type, json": ("-f", "json", "get", "-p", "logs", "notanint"),
    "delete missing object": ("delete", "-p", "logs", "noid"),
    "unstage missing object": ("stage", "-p", "logs", "--drop", "noid"),
    "compact missing object": ("compact", "-p", "logs", "noid"),
    "delete where no row": ("delete", "-p", "logs", "--where", "nocol = 1"),
    "split missing partition": ("split", "-p", "logs", "nopart"),
    "commit nothing staged": ("commit", "-p", "logs@dev"),
    # SQL
    "SQL syntax": ("query", "SELEC 1"),
    "SQL missing pool": ("query", "SELECT * FROM nope"),
    "SQL missing column, csv": ("-f", "csv", "query", "SELECT nocol FROM logs"),
    "SQL missing ref": ("query", 'SELECT * FROM "logs@nope"'),
    # files
    "missing file": ("load", "-p", "logs", f"{FILES}/missing.ndjson"),
    "invalid JSON": ("load", "-p", "logs", f"{FILES}/bad.ndjson"),
    "key of another type": ("load", "-p", "logs", f"{FILES}/badtype.ndjson"),
    "load into a missing branch": ("load", "-p", "logs@nope", f"{FILES}/rows.ndjson"),
}


@dataclass(frozen=True)
class Different:
    """A case that fails (or not) differently by design: what the server answers."""

    args: tuple[str, ...]
    local_code: int
    served_line: str


#: the server runs SQL in safe mode (no file access); a name with a control
#: character or over 1024 bytes is refused before the lake (it could confuse logs)
BY_DESIGN: dict[str, Different] = {
    "read_csv in SQL": Different(
        ("query", f"SELECT * FROM read_csv('{FILES}/rows.ndjson')"),
        0,
        "error: SQL: table function read_csv() not allowed in safe mode",
    ),
    "control character in a pool": Different(
        ("scan", "-p", "lo\x01gs"), 1, "control characters are not allowed in a name"
    ),
    "newline in a ref": Different(
        ("log", "-p", "logs@main\nx"), 1, "control characters are not allowed in a name"
    ),
    "over-long ref": Different(("log", "-p", "logs@" + "x" * 2000), 1, "at most 1024 bytes"),
}


@dataclass(frozen=True)
class Lakes:
    path: str
    url: str
    files: Path


@pytest.fixture(scope="module")
def lakes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lakes]:
    """A lake with pools ``logs`` (rows, branch dev, tag v1) and ``other``, and a
    server on it; the client's key in the environment."""
    reap()
    base = tmp_path_factory.mktemp("parity")
    files = base / "files"
    files.mkdir()
    (files / "rows.ndjson").write_text('{"ts": 1, "v": "a"}\n{"ts": 2, "v": "b"}\n')
    (files / "bad.ndjson").write_text('{"ts": 1\n')
    (files / "badtype.ndjson").write_text('{"ts": "x"}\n')
    lake = str(base / "lake")
    with pytest.MonkeyPatch.context() as mp:
        isolate_home(base, mp)
        ok("--lake", lake, "init")
        ok("--lake", lake, "create", "logs", "--key", "ts")
        ok("--lake", lake, "load", "-p", "logs", str(files / "rows.ndjson"))
        ok("--lake", lake, "branch", "-p", "logs", "dev")
        ok("--lake", lake, "tag", "-p", "logs", "v1")
        ok("--lake", lake, "create", "other", "--key", "ts")
        server = start_server(lake)
        try:
            for name, value in server.env.items():
                mp.setenv(name, value)
            before = _state(lake)
            yield Lakes(lake, server.url, files)
            assert _state(lake) == before, "a failing command changed the lake"
        finally:
            assert server.stop() == 0, server.lines


def _state(lake: str) -> tuple[str, str]:
    """What a failing command must not change: the pools, the branches and tags of logs."""
    return ok("--lake", lake, "-f", "json", "ls").text, ok(
        "--lake", lake, "-f", "json", "ls", "logs"
    ).text


def _run(location: str, args: tuple[str, ...], files: Path) -> Result:
    return run("--lake", location, *(a.replace(FILES, str(files)) for a in args))


def _error_line(result: Result, location: str) -> str:
    lines = [line for line in result.err.splitlines() if line.strip()]
    assert lines, f"no error printed (exit {result.code})"
    return lines[-1].replace(location, "<lake>")


@pytest.mark.parametrize("args", list(CASES.values()), ids=list(CASES))
def test_same_exit_code_and_error_line(lakes: Lakes, args: tuple[str, ...]) -> None:
    local = _run(lakes.path, args, lakes.files)
    served = _run(lakes.url, args, lakes.files)
    assert local.code != 0, f"the case does not fail: {local.text}"
    assert _error_line(local, lakes.path).startswith("error: ")
    assert (served.code, _error_line(served, lakes.url)) == (
        local.code,
        _error_line(local, lakes.path),
    )


@pytest.mark.parametrize("case", list(BY_DESIGN.values()), ids=list(BY_DESIGN))
def test_differences_by_design(lakes: Lakes, case: Different) -> None:
    local = _run(lakes.path, case.args, lakes.files)
    served = _run(lakes.url, case.args, lakes.files)
    assert local.code == case.local_code, local.err
    assert served.code == 1
    line = _error_line(served, lakes.url)
    assert line.startswith("error: ") and case.served_line in line

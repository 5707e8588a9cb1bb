"""What the git-for-data scenario tests share: a driver for one lake, strict ok/fail, fixtures.

The scenarios run the real CLI in-process (``clirunner``). Each test module declares its
own small fixtures (``isolated_home``, ``lake``, ``lk``, ``forked``) whose bodies are the
functions here, so every module reads on its own and nothing is copied.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from clirunner import Result, run


def isolate_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No user config and no ``LIMNO_LAKE`` from the machine running the tests."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "home" / ".config"))
    monkeypatch.delenv("LIMNO_LAKE", raising=False)


def init_lake(path: str) -> str:
    """A fresh lake at ``path``."""
    r = run("--lake", path, "init")
    assert r.code == 0, r.err
    return path


def assert_verified(location: str) -> None:
    """``limno verify`` passes on the lake at ``location`` (a path or a server's URL)."""
    r = run("--lake", location, "verify")
    assert r.code == 0, f"verify failed after the scenario:\n{r.err}"
    assert r.text.startswith("ok: ")


def ok(*args: str, stdin: bytes = b"") -> Result:
    r = run(*args, stdin=stdin)
    assert r.code == 0, f"limno {' '.join(args)} failed: {r.err}"
    return r


def fail(*args: str, stdin: bytes = b"") -> Result:
    """A command that must fail with exit 1 and exactly one ``error:`` line."""
    r = run(*args, stdin=stdin)
    assert r.code == 1, f"limno {' '.join(args)}: exit {r.code}, expected 1: {r.err}"
    errors = [x for x in r.err.splitlines() if x.startswith("error: ")]
    assert len(errors) == 1, r.err
    assert r.err.splitlines()[-1].startswith("error: "), r.err
    return r


def error_line(r: Result) -> str:
    return next(x for x in r.err.splitlines() if x.startswith("error: "))


class Lk:
    """``limno --lake LAKE ...`` for one lake, with tmp files for loads; ``lake`` is
    what ``--lake`` names (a path or a server's URL), ``path`` the lake's directory."""

    def __init__(self, lake: str, tmp: Path, path: str | None = None) -> None:
        self.lake = lake
        self.path = path or lake
        self.tmp = tmp
        self.n = 0

    def ok(self, *args: str) -> Result:
        return ok("--lake", self.lake, *args)

    def fail(self, *args: str) -> Result:
        return fail("--lake", self.lake, *args)

    def file(self, rows: list[dict[str, Any]]) -> str:
        self.n += 1
        path = self.tmp / f"in-{self.n}.ndjson"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        return str(path)

    def load(self, ref: str, ts: list[int], *extra: str) -> str:
        """Load rows ``{"ts": t, "tag": ...}`` onto ``ref``; the commit id."""
        rows = [{"ts": t, "tag": f"t{t}"} for t in ts]
        commit = self.ok("load", "-p", ref, *extra, self.file(rows)).text.strip()
        assert len(commit) == 27
        return commit

    def ts(self, ref: str) -> list[int]:
        return [row["ts"] for row in self.ok("scan", "-p", ref).rows()]

    def refs(self, pool: str = "logs") -> dict[tuple[str, str], str]:
        return {(r["kind"], r["name"]): r["commit"] for r in self.ok("ls", pool).rows()}

    def head(self, branch: str = "main", pool: str = "logs") -> str:
        return self.refs(pool)[("branch", branch)]

    def log(self, ref: str, *extra: str) -> list[dict[str, Any]]:
        return self.ok("log", "-p", ref, "-f", "ndjson", *extra).rows()

    def objects(self, ref: str) -> list[dict[str, Any]]:
        q = f'SELECT id, rows, min_key FROM "{ref}:objects" ORDER BY id'
        return self.ok("query", q).rows()

    def object_at(self, ref: str, min_ts: int) -> str:
        """The id of the object on ``ref`` whose smallest key is ``min_ts``."""
        found = [o["id"] for o in self.objects(ref) if json.loads(o["min_key"]) == [min_ts]]
        assert len(found) == 1, found
        return str(found[0])


def root_commit(lk: Lk, ref: str) -> str:
    return str(lk.log(ref)[-1]["id"])


def fork(lk: Lk) -> Lk:
    """Pool ``logs`` (key ts) with one object [1, 2, 3] on main, and branch dev at main."""
    lk.ok("create", "logs", "-k", "ts")
    lk.load("logs", [1, 2, 3])
    lk.ok("branch", "-p", "logs", "dev")
    return lk

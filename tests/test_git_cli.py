"""Scenario tests for git-for-data, through the CLI (in-process, real entry point).

Branches, tags, merge (fast-forward, three-way, conflicts and strategies), diff,
cherry-pick, reset, transactions (Python API) and hooks. Every scenario ends with
``limno verify`` passing (the ``lake`` fixture checks it on teardown).
"""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from clirunner import Result, run
from limno import ConflictError
from limno.api.local import LocalLake as Lake
from limno.errors import HookVetoError
from limno.pools.branching import TX_PREFIX

pytestmark = pytest.mark.usefixtures("isolated_home")


@pytest.fixture
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "home" / ".config"))
    monkeypatch.delenv("LIMNO_LAKE", raising=False)


@pytest.fixture
def lake(tmp_path: Path) -> Iterator[str]:
    """A fresh lake; after the scenario, ``limno verify`` must pass on it."""
    where = str(tmp_path / "lake")
    assert run("--lake", where, "init").code == 0
    yield where
    r = run("--lake", where, "verify")
    assert r.code == 0, f"verify failed after the scenario:\n{r.err}"
    assert r.text.startswith("ok: ")


# -- helpers ------------------------------------------------------------------------------


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
    """``limno --lake LAKE ...`` for one lake, with tmp files for loads."""

    def __init__(self, lake: str, tmp: Path) -> None:
        self.lake = lake
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
        rows = self.ok("log", "-p", ref, "-f", "ndjson", *extra).rows()
        for row in rows:
            row["meta"] = json.loads(row["meta"])
        return rows

    def objects(self, ref: str) -> list[dict[str, Any]]:
        q = f'SELECT id, rows, min_key FROM "{ref}:objects" ORDER BY id'
        return self.ok("query", q).rows()

    def object_at(self, ref: str, min_ts: int) -> str:
        """The id of the object on ``ref`` whose smallest key is ``min_ts``."""
        found = [o["id"] for o in self.objects(ref) if json.loads(o["min_key"]) == [min_ts]]
        assert len(found) == 1, found
        return str(found[0])


def _root(lk: Lk, ref: str) -> str:
    return str(lk.log(ref)[-1]["id"])


@pytest.fixture
def lk(lake: str, tmp_path: Path) -> Lk:
    return Lk(lake, tmp_path)


@pytest.fixture
def forked(lk: Lk) -> Lk:
    """Pool ``logs`` (key ts) with one object [1, 2, 3] on main, and branch dev at main."""
    lk.ok("create", "logs", "-k", "ts")
    lk.load("logs", [1, 2, 3])
    lk.ok("branch", "-p", "logs", "dev")
    return lk


# -- branches ----------------------------------------------------------------------------


def test_branch_isolation_both_ways(forked: Lk) -> None:
    lk = forked
    base = lk.head("main")
    assert lk.head("dev") == base
    on_dev = lk.load("logs@dev", [10])
    assert lk.ts("logs") == [1, 2, 3]
    assert lk.head("main") == base
    on_main = lk.load("logs", [20])
    assert lk.ts("logs@dev") == [1, 2, 3, 10]
    assert lk.ts("logs") == [1, 2, 3, 20]
    assert lk.head("dev") == on_dev and lk.head("main") == on_main
    q = ("query",)
    assert lk.ok(*q, 'SELECT ts FROM "logs@dev" ORDER BY ts').rows() == [
        {"ts": t} for t in [1, 2, 3, 10]
    ]
    assert lk.ok(*q, "SELECT ts FROM logs ORDER BY ts").rows() == [{"ts": t} for t in [1, 2, 3, 20]]
    assert lk.ok(*q, 'SELECT ts FROM "logs@main" ORDER BY ts').rows() == [
        {"ts": t} for t in [1, 2, 3, 20]
    ]
    assert lk.ok(*q, 'SELECT count(*) AS n FROM "logs@dev" WHERE ts = 20').rows() == [{"n": 0}]
    # a delete on dev leaves main alone
    lk.ok("delete", "-p", "logs@dev", "--where", "ts = 1")
    assert lk.ts("logs@dev") == [2, 3, 10]
    assert lk.ts("logs") == [1, 2, 3, 20]
    # branch with no NAME lists (name<TAB>commit)
    listed = lk.ok("branch", "-p", "logs").text.splitlines()
    assert listed == [f"dev\t{lk.head('dev')}", f"main\t{on_main}"]
    branches = lk.ok("query", 'SELECT name FROM "logs:branches" ORDER BY name').rows()
    assert branches == [{"name": "dev"}, {"name": "main"}]


def test_branch_from_refs(lk: Lk) -> None:
    lk.ok("create", "logs", "-k", "ts")
    c1 = lk.load("logs", [1])
    c2 = lk.load("logs", [2])
    c3 = lk.load("logs", [3])
    r = lk.ok("branch", "-p", "logs", "old", "--from", "main~1")
    assert r.text == ""
    assert f"created branch logs@old at {c2} (from main~1)" in r.err
    assert lk.ts("logs@old") == [1, 2]
    lk.ok("tag", "-p", "logs", "v1", "--from", c1)
    lk.ok("branch", "-p", "logs", "fromtag", "--from", "v1")
    assert lk.ts("logs@fromtag") == [1]
    lk.ok("branch", "-p", "logs", "fromid", "--from", c2)
    lk.ok("branch", "-p", "logs", "fromprefix", "--from", c1[:12])
    # without --from: -p's ref, else main
    lk.ok("branch", "-p", "logs@old", "fromold")
    lk.ok("branch", "-p", "logs", "frommain")
    refs = lk.refs()
    assert refs[("branch", "old")] == c2
    assert refs[("branch", "fromtag")] == c1
    assert refs[("branch", "fromid")] == c2
    assert refs[("branch", "fromprefix")] == c1
    assert refs[("branch", "fromold")] == c2
    assert refs[("branch", "frommain")] == c3
    # a branch made from an old ref moves on its own
    lk.load("logs@old", [9])
    assert lk.ts("logs@old") == [1, 2, 9]
    assert lk.ts("logs") == [1, 2, 3]
    assert lk.head("fromid") == c2
    assert "already exists" in error_line(lk.fail("branch", "-p", "logs", "old"))
    assert "invalid branch name" in error_line(lk.fail("branch", "-p", "logs", "a~1"))
    assert "no branch, tag or commit" in error_line(
        lk.fail("branch", "-p", "logs", "x", "--from", "nosuchref")
    )
    assert "only" in error_line(lk.fail("branch", "-p", "logs", "x", "--from", "main~9"))
    assert ("branch", "x") not in lk.refs()


def test_branch_delete(forked: Lk) -> None:
    lk = forked
    dev_head = lk.load("logs@dev", [10])
    staged = lk.ok("add", "-p", "logs@dev", lk.file([{"ts": 11}])).text.strip()
    assert [s["id"] for s in lk.ok("stage", "-p", "logs@dev").rows()] == [staged]
    r = lk.ok("branch", "-p", "logs", "-d", "dev")
    assert f"deleted branch logs@dev (was {dev_head})" in r.err
    assert ("branch", "dev") not in lk.refs()
    assert "no branch" in error_line(lk.fail("scan", "-p", "logs@dev"))
    # the commit is still readable by id
    assert lk.ts(f"logs@{dev_head}") == [1, 2, 3, 10]
    # re-creating the branch starts clean: the staging area went with it
    lk.ok("branch", "-p", "logs", "dev")
    assert lk.ok("stage", "-p", "logs@dev").rows() == []
    assert lk.ts("logs@dev") == [1, 2, 3]
    main = lk.head("main")
    r = lk.fail("branch", "-p", "logs", "-d", "main")
    assert "cannot delete the default branch" in error_line(r)
    assert lk.head("main") == main
    assert "not found" in error_line(lk.fail("branch", "-p", "logs", "-d", "nope"))
    assert "needs a branch NAME" in error_line(lk.fail("branch", "-p", "logs", "-d"))


def test_ls_pool_shows_branches_and_tags(forked: Lk) -> None:
    lk = forked
    base = lk.head("main")
    dev = lk.load("logs@dev", [10])
    lk.ok("tag", "-p", "logs", "v1")
    lk.ok("tag", "-p", "logs", "a-dev", "--from", "dev")
    main = lk.load("logs", [20])
    assert lk.ok("ls", "logs").rows() == [
        {"kind": "branch", "name": "dev", "commit": dev},
        {"kind": "branch", "name": "main", "commit": main},
        {"kind": "tag", "name": "a-dev", "commit": dev},
        {"kind": "tag", "name": "v1", "commit": base},
    ]
    assert lk.ok("tag", "-p", "logs").text.splitlines() == [f"a-dev\t{dev}", f"v1\t{base}"]
    table = lk.ok("-f", "table", "ls", "logs").text
    assert "v1" in table and "dev" in table and base in table


# -- merge ----------------------------------------------------------------------------------


def test_fast_forward_merge(forked: Lk) -> None:
    lk = forked
    lk.load("logs@dev", [10])
    dev = lk.load("logs@dev", [11])
    commits_before = {c["id"] for c in lk.log("logs@dev")}
    r = lk.ok("merge", "-p", "logs", "dev")
    assert r.text == f"{dev}\n"
    assert "fast-forwarded logs@main" in r.err
    assert lk.head("main") == dev
    log = lk.log("logs")
    assert {c["id"] for c in log} == commits_before  # no merge commit
    assert all(len(c["parents"]) <= 1 for c in log)
    assert lk.ts("logs") == [1, 2, 3, 10, 11]
    # SOURCE as pool@ref without -p
    lk.load("logs@dev", [12])
    dev2 = lk.head("dev")
    assert lk.ok("merge", "logs@dev").text.strip() == dev2
    assert lk.head("main") == dev2


def test_true_merge(forked: Lk) -> None:
    lk = forked
    base = lk.head("main")
    d1 = lk.load("logs@dev", [10])
    d2 = lk.load("logs@dev", [11])
    m1 = lk.load("logs", [20])
    r = lk.ok("merge", "-p", "logs", "dev", "-m", "bring dev in", "--meta", "ticket=42")
    merge_id = r.text.strip()
    assert len(merge_id) == 27 and r.text == f"{merge_id}\n"
    assert f"merged dev into logs@main (base {base})" in r.err
    assert lk.head("main") == merge_id
    assert lk.head("dev") == d2  # the source does not move
    assert lk.ts("logs") == [1, 2, 3, 10, 11, 20]
    assert lk.ts("logs@dev") == [1, 2, 3, 10, 11]
    top = lk.log("logs")[0]
    assert top["id"] == merge_id
    assert top["parents"] == [m1, d2]
    assert top["message"] == "bring dev in"
    assert top["meta"]["ticket"] == "42"
    merge_info = top["meta"]["merge"]
    assert merge_info["strategy"] == "fail"
    assert merge_info["source"] == "dev"
    assert merge_info["source_commit"] == d2
    assert merge_info["base"] == base
    assert "resolved" not in merge_info
    assert [a["op"] for a in top["actions"]] == ["add", "add"]
    full = [c["id"] for c in lk.log("logs")]
    assert d1 in full and d2 in full and m1 in full
    first = [c["id"] for c in lk.log("logs", "--first-parent")]
    assert d1 not in first and d2 not in first
    assert first[:3] == [merge_id, m1, base]
    table = lk.ok("-f", "table", "log", "-p", "logs", "-n", "1").text
    assert f"Merge: {m1} {d2}" in table
    # merging back into dev is now a fast-forward
    r = lk.ok("merge", "-p", "logs", "main", "--into", "dev")
    assert r.text.strip() == merge_id and "fast-forwarded logs@dev" in r.err
    assert lk.ts("logs@dev") == lk.ts("logs")


def test_up_to_date_merge(forked: Lk) -> None:
    lk = forked
    base = lk.head("main")
    r = lk.ok("merge", "-p", "logs", "dev")  # dev is main
    assert r.text.strip() == base and "already up to date" in r.err
    dev = lk.load("logs@dev", [10])
    # main is an ancestor of dev: merging it into dev changes nothing
    r = lk.ok("merge", "-p", "logs@dev", "main")
    assert r.text.strip() == dev and "logs@dev is already up to date with main" in r.err
    assert lk.head("dev") == dev
    lk.ok("merge", "-p", "logs", "dev")
    r = lk.ok("merge", "-p", "logs", "dev")
    assert r.text.strip() == dev and "already up to date" in r.err
    assert len(lk.log("logs")) == 3


def test_no_ff_merge(forked: Lk) -> None:
    lk = forked
    base = lk.head("main")
    dev = lk.load("logs@dev", [10])
    r = lk.ok("merge", "-p", "logs", "dev", "--no-ff")
    merge_id = r.text.strip()
    assert merge_id not in (dev, base)
    assert lk.head("main") == merge_id
    top = lk.log("logs")[0]
    assert top["parents"] == [base, dev]
    assert top["meta"]["merge"]["strategy"] == "fail"
    assert top["message"] == "merge dev into main"
    assert lk.ts("logs") == [1, 2, 3, 10]
    assert [c["id"] for c in lk.log("logs", "--first-parent")] == [
        merge_id,
        base,
        _root(lk, "logs"),
    ]


def test_source_of_another_pool_defaults_to_its_main(forked: Lk) -> None:
    """With 'limno use logs@dev', SOURCE events@feature merges into events@main."""
    lk = forked
    lk.ok("create", "events", "-k", "ts")
    lk.load("events", [1])
    lk.ok("branch", "-p", "events", "feature")
    feature = lk.load("events@feature", [2])
    lk.ok("use", "logs@dev")
    r = lk.ok("diff", "events@feature")
    assert "events@main..feature: 1 added" in r.err
    r = lk.ok("merge", "events@feature")
    assert r.text.strip() == feature and "fast-forwarded events@main" in r.err
    assert lk.head("main", "events") == feature
    assert ("branch", "dev") not in lk.refs("events")
    # a bare SOURCE is a ref of the working pool, merged into the working branch
    lk.load("logs", [20])
    r = lk.ok("merge", "main")
    assert "fast-forwarded logs@dev" in r.err
    assert lk.ts("logs@dev") == [1, 2, 3, 20]
    assert "not a ref of pool" in error_line(lk.fail("merge", "-p", "logs", "events@feature"))
    assert "not a ref of pool" in error_line(lk.fail("diff", "-p", "logs", "events@main"))
    assert "one pool" in error_line(lk.fail("diff", "logs@main", "events@main"))


# -- conflicts and strategies ----------------------------------------------------------


def _conflicting(lk: Lk) -> tuple[str, str, str]:
    """Both sides rewrite object [1, 2, 3] differently (and make a clean change each).

    Returns (the object's id, main's head, dev's head).
    """
    obj = lk.objects("logs")[0]["id"]
    lk.load("logs@dev", [10])
    lk.load("logs", [20])
    lk.ok("delete", "-p", "logs", "--where", "ts = 1")
    lk.ok("delete", "-p", "logs@dev", "--where", "ts = 2")
    return obj, lk.head("main"), lk.head("dev")


def test_conflict_fails_and_changes_nothing(forked: Lk) -> None:
    lk = forked
    obj, main, dev = _conflicting(lk)
    before = lk.ts("logs")
    r = lk.fail("merge", "-p", "logs", "dev")
    assert r.text == ""
    line = error_line(r)
    assert obj in line and "1 conflicting entry" in line
    assert lk.head("main") == main and lk.head("dev") == dev
    assert lk.ts("logs") == before == [2, 3, 20]
    assert lk.ts("logs@dev") == [1, 3, 10]
    # --no-ff and an explicit --strategy fail behave the same
    assert obj in error_line(lk.fail("merge", "-p", "logs", "dev", "--strategy", "fail", "--no-ff"))
    assert lk.head("main") == main


def test_conflict_report_names_every_object(lk: Lk) -> None:
    lk.ok("create", "logs", "-k", "ts")
    lk.load("logs", [1, 2, 3])
    lk.load("logs", [11, 12, 13])
    lk.load("logs", [21, 22])
    first, second, third = (lk.object_at("logs", t) for t in (1, 11, 21))
    lk.ok("branch", "-p", "logs", "dev")
    lk.ok("delete", "-p", "logs", "--where", "ts IN (1, 11, 21)")
    lk.ok("delete", "-p", "logs@dev", "--where", "ts IN (2, 12)")
    main = lk.head("main")
    line = error_line(lk.fail("merge", "-p", "logs", "dev"))
    assert "2 conflicting entries" in line
    assert first in line and second in line
    assert third not in line  # rewritten on main only: no conflict
    assert lk.head("main") == main
    assert lk.ts("logs") == [2, 3, 12, 13, 22]


def test_strategy_source_wins(forked: Lk) -> None:
    lk = forked
    obj, main, dev = _conflicting(lk)
    r = lk.ok("merge", "-p", "logs", "dev", "--strategy", "source-wins")
    assert "1 conflict(s) resolved source-wins" in r.err
    # source's version of the object (ts=2 deleted), plus both sides' clean loads
    assert lk.ts("logs") == [1, 3, 10, 20]
    top = lk.log("logs")[0]
    assert top["id"] == r.text.strip() and top["parents"] == [main, dev]
    assert top["meta"]["merge"]["strategy"] == "source-wins"
    assert top["meta"]["merge"]["resolved"] == [obj]
    assert lk.ts("logs@dev") == [1, 3, 10]


def test_strategy_dest_wins(forked: Lk) -> None:
    lk = forked
    obj, main, dev = _conflicting(lk)
    r = lk.ok("merge", "-p", "logs", "dev", "--strategy", "dest-wins")
    assert "1 conflict(s) resolved dest-wins" in r.err
    # dest's version (ts=1 deleted) kept, the source's clean load comes in
    assert lk.ts("logs") == [2, 3, 10, 20]
    top = lk.log("logs")[0]
    assert top["parents"] == [main, dev]
    assert top["meta"]["merge"]["strategy"] == "dest-wins"
    assert top["meta"]["merge"]["resolved"] == [obj]


def test_unknown_strategy_is_a_usage_error(forked: Lk) -> None:
    r = run("--lake", forked.lake, "merge", "-p", "logs", "dev", "--strategy", "ours")
    assert r.code == 2 and r.err.startswith("error: ")


def test_delete_whole_object_vs_rewrite_conflicts(forked: Lk) -> None:
    lk = forked
    obj = lk.objects("logs")[0]["id"]
    lk.ok("delete", "-p", "logs", obj)  # whole object on main
    lk.ok("delete", "-p", "logs@dev", "--where", "ts = 2")  # rewrite on dev
    main = lk.head("main")
    line = error_line(lk.fail("merge", "-p", "logs", "dev"))
    assert obj in line
    assert lk.head("main") == main and lk.ts("logs") == []
    # the other direction conflicts too
    assert obj in error_line(lk.fail("merge", "-p", "logs@dev", "main"))
    lk.ok("merge", "-p", "logs", "dev", "--strategy", "source-wins")
    assert lk.ts("logs") == [1, 3]
    assert lk.log("logs")[0]["meta"]["merge"]["strategy"] == "source-wins"


def test_delete_whole_object_vs_rewrite_dest_wins(forked: Lk) -> None:
    lk = forked
    obj = lk.objects("logs")[0]["id"]
    lk.ok("delete", "-p", "logs", obj)
    lk.ok("delete", "-p", "logs@dev", "--where", "ts = 2")
    lk.load("logs@dev", [10])
    lk.ok("merge", "-p", "logs", "dev", "--strategy", "dest-wins")
    assert lk.ts("logs") == [10]


def test_both_sides_deleting_an_object_plainly_merge_cleanly(forked: Lk) -> None:
    lk = forked
    obj = lk.objects("logs")[0]["id"]
    lk.ok("delete", "-p", "logs", obj)
    lk.ok("delete", "-p", "logs@dev", obj)
    lk.load("logs@dev", [10])
    main, dev = lk.head("main"), lk.head("dev")
    r = lk.ok("merge", "-p", "logs", "dev")
    top = lk.log("logs")[0]
    assert top["id"] == r.text.strip() and top["parents"] == [main, dev]
    assert "resolved" not in top["meta"]["merge"]
    assert lk.ts("logs") == [10]


def test_a_rewrite_chain_vs_a_whole_delete_conflicts(forked: Lk) -> None:
    """Dev rewrites the object twice (X -> X' -> X''), main deletes X whole.

    That is "deleted on one side and rewritten on the other": a conflict, exactly
    as with a single rewrite (test_delete_whole_object_vs_rewrite_conflicts).
    """
    lk = forked
    obj = lk.object_at("logs", 1)
    lk.ok("delete", "-p", "logs@dev", "--where", "ts = 1")
    lk.ok("delete", "-p", "logs@dev", "--where", "ts = 2")
    lk.ok("delete", "-p", "logs", obj)
    main = lk.head("main")
    r = run("--lake", lk.lake, "merge", "-p", "logs", "dev")
    assert r.code == 1, f"merge succeeded (scan of main: {lk.ts('logs')}); expected a conflict"
    assert obj in error_line(r)
    assert lk.head("main") == main and lk.ts("logs") == []


def test_dest_wins_after_a_rewrite_chain_keeps_dest(forked: Lk) -> None:
    """Dev rewrites the object twice, main once: dest-wins must give main's version."""
    lk = forked
    obj = lk.object_at("logs", 1)
    lk.ok("delete", "-p", "logs@dev", "--where", "ts = 1")
    lk.ok("delete", "-p", "logs@dev", "--where", "ts = 2")
    lk.ok("delete", "-p", "logs", "--where", "ts = 3")
    assert obj in error_line(lk.fail("merge", "-p", "logs", "dev"))
    lk.ok("merge", "-p", "logs", "dev", "--strategy", "dest-wins")
    assert lk.ts("logs") == [1, 2]  # main's version of the object, not main's plus dev's


def test_source_wins_after_a_rewrite_chain_keeps_source(forked: Lk) -> None:
    lk = forked
    lk.ok("delete", "-p", "logs@dev", "--where", "ts = 1")
    lk.ok("delete", "-p", "logs@dev", "--where", "ts = 2")
    lk.ok("delete", "-p", "logs", "--where", "ts = 3")
    lk.ok("merge", "-p", "logs", "dev", "--strategy", "source-wins")
    assert lk.ts("logs") == [3]


# -- diff -----------------------------------------------------------------------------------


def test_diff(forked: Lk) -> None:
    lk = forked
    base_obj = lk.objects("logs")[0]["id"]
    lk.load("logs@dev", [10, 11])
    dev_obj = next(o["id"] for o in lk.objects("logs@dev") if o["id"] != base_obj)
    lk.load("logs", [20])
    main_obj = next(o["id"] for o in lk.objects("logs") if o["id"] != base_obj)

    # one ref: from the working branch (main) to dev
    r = lk.ok("diff", "-p", "logs", "dev")
    rows = r.rows()
    assert {(x["change"], x["id"], x["rows"]) for x in rows} == {
        ("added", dev_obj, 2),
        ("removed", main_obj, 1),
    }
    assert all(set(x) >= {"change", "id", "rows"} for x in rows)
    assert "logs@main..dev: 1 added, 1 removed, 0 changed" in r.err
    added = next(x for x in rows if x["change"] == "added")
    assert json.loads(added["min_key"]) == [10] and json.loads(added["max_key"]) == [11]

    # two refs, both ways, bare or pool@ref
    two = lk.ok("diff", "-p", "logs", "dev", "main").rows()
    assert {(x["change"], x["id"]) for x in two} == {("added", main_obj), ("removed", dev_obj)}
    same = lk.ok("diff", "logs@main", "logs@dev").rows()
    assert {(x["change"], x["id"]) for x in same} == {("added", dev_obj), ("removed", main_obj)}
    # -p's ref is the "from" side of a one-ref diff
    from_dev = lk.ok("diff", "-p", "logs@dev", "main").rows()
    assert {(x["change"], x["id"]) for x in from_dev} == {("added", main_obj), ("removed", dev_obj)}

    # three-dot: only what dev changed since the fork, though main moved
    three = lk.ok("diff", "-p", "logs", "--three-dot", "main", "dev")
    assert [(x["change"], x["id"], x["rows"]) for x in three.rows()] == [("added", dev_obj, 2)]
    assert "logs@main...dev: 1 added, 0 removed, 0 changed" in three.err
    assert lk.ok("diff", "-p", "logs", "--three-dot", "dev").rows() == three.rows()
    back = lk.ok("diff", "-p", "logs", "--three-dot", "dev", "main").rows()
    assert [(x["change"], x["id"]) for x in back] == [("added", main_obj)]

    # a rewrite shows as the old object removed and its replacement added
    lk.ok("delete", "-p", "logs@dev", "--where", "ts = 2")
    rewrite = lk.ok("diff", "-p", "logs", "--three-dot", "dev").rows()
    removed = [(x["id"], x["rows"]) for x in rewrite if x["change"] == "removed"]
    assert removed == [(base_obj, 3)]
    assert sorted(x["rows"] for x in rewrite if x["change"] == "added") == [2, 2]

    # nothing differs
    empty = lk.ok("diff", "-p", "logs", "main", "main")
    assert empty.rows() == [] and "0 added, 0 removed, 0 changed" in empty.err
    assert lk.ok("-f", "table", "diff", "-p", "logs", "dev").text.startswith("change")
    assert "one or two refs" in error_line(lk.fail("diff", "-p", "logs", "a", "b", "c"))
    assert "no branch, tag or commit" in error_line(lk.fail("diff", "-p", "logs", "nope"))


# -- cherry-pick ----------------------------------------------------------------------------


def test_cherry_pick(forked: Lk) -> None:
    lk = forked
    lk.load("logs@dev", [10])
    picked = lk.load("logs@dev", [11], "-m", "the one")
    lk.load("logs", [20])
    main = lk.head("main")
    r = lk.ok("cherry-pick", "-p", "logs", picked)
    new = r.text.strip()
    assert len(new) == 27 and new != picked
    assert f"cherry-picked {picked} onto logs@main (1 action(s))" in r.err
    assert lk.ts("logs") == [1, 2, 3, 11, 20]  # not 10: only the picked commit's change
    top = lk.log("logs")[0]
    assert top["id"] == new == lk.head("main")
    assert top["parents"] == [main]
    assert top["message"] == "the one"
    assert top["meta"]["cherry_pick"] == picked
    # applying it again changes nothing
    head = lk.head("main")
    assert "changes nothing" in error_line(lk.fail("cherry-pick", "-p", "logs", picked))
    assert lk.head("main") == head
    # so does picking a commit the branch already has in its history
    own = lk.log("logs")[1]["id"]
    assert "changes nothing" in error_line(lk.fail("cherry-pick", "-p", "logs", own))
    assert lk.head("main") == head
    # merge commits and the root commit cannot be picked
    lk.load("logs@dev", [12])
    merge_id = lk.ok("merge", "-p", "logs", "dev", "--no-ff").text.strip()
    lk.ok("branch", "-p", "logs", "other", "--from", "dev")
    head = lk.head("other")
    assert "merge commit" in error_line(lk.fail("cherry-pick", "-p", "logs@other", merge_id))
    assert "merge commit" in error_line(
        lk.fail("cherry-pick", "-p", "logs@other", _root(lk, "logs"))
    )
    assert lk.head("other") == head
    assert "no branch, tag or commit" in error_line(
        lk.fail("cherry-pick", "-p", "logs", "zzzzzzzz")
    )


def test_cherry_pick_a_rewrite_and_a_conflict(forked: Lk) -> None:
    lk = forked
    obj = lk.object_at("logs", 1)
    lk.ok("branch", "-p", "logs", "clean")
    rewrite = lk.ok("delete", "-p", "logs", "--where", "ts = 3").text.strip()
    # main's rewrite applies cleanly to a branch that left the object alone
    lk.ok("cherry-pick", "-p", "logs@clean", rewrite)
    assert lk.ts("logs@clean") == [1, 2]
    # dev rewrote the same object differently: a conflict naming it, nothing changes
    lk.ok("delete", "-p", "logs@dev", "--where", "ts = 1")
    head = lk.head("dev")
    r = lk.fail("cherry-pick", "-p", "logs@dev", rewrite)
    assert "conflicting" in error_line(r) and obj in error_line(r)
    assert lk.head("dev") == head and lk.ts("logs@dev") == [2, 3]
    # dest-wins keeps dev's version, so the pick has nothing left to do
    r = lk.fail("cherry-pick", "-p", "logs@dev", "--strategy", "dest-wins", rewrite)
    assert "changes nothing" in error_line(r)
    lk.ok("cherry-pick", "-p", "logs@dev", "--strategy", "source-wins", rewrite)
    assert lk.ts("logs@dev") == [1, 2]


# -- reset ----------------------------------------------------------------------------------


def test_reset_hard(forked: Lk) -> None:
    lk = forked
    c1 = lk.head("main")
    lk.load("logs", [4])
    c3 = lk.load("logs", [5])
    lk.ok("add", "-p", "logs", lk.file([{"ts": 6}]))
    assert len(lk.ok("stage", "-p", "logs").rows()) == 1
    assert "--hard" in error_line(lk.fail("reset", "-p", "logs", "main~2"))
    assert lk.head("main") == c3 and len(lk.ok("stage", "-p", "logs").rows()) == 1
    r = lk.ok("reset", "-p", "logs", "--hard", "main~2")
    assert r.text == f"{c1}\n"
    assert f"reset logs@main from {c3} to {c1}" in r.err
    assert lk.head("main") == c1
    assert lk.ts("logs") == [1, 2, 3]
    assert lk.ok("stage", "-p", "logs").rows() == []
    assert "nothing staged" in error_line(lk.fail("commit", "-p", "logs"))
    # the abandoned commits stay readable by id, and reset can go forward again
    assert lk.ts(f"logs@{c3}") == [1, 2, 3, 4, 5]
    lk.ok("reset", "-p", "logs", "--hard", c3)
    assert lk.ts("logs") == [1, 2, 3, 4, 5]
    # reset a branch to another branch or a tag
    lk.ok("tag", "-p", "logs", "v1", "--from", c1)
    lk.ok("reset", "-p", "logs@dev", "--hard", "main")
    assert lk.head("dev") == c3
    lk.ok("reset", "-p", "logs@dev", "--hard", "v1")
    assert lk.head("dev") == c1 and lk.head("main") == c3
    assert "no branch, tag or commit" in error_line(
        lk.fail("reset", "-p", "logs", "--hard", "nope")
    )
    assert "not found" in error_line(lk.fail("reset", "-p", "logs@nobranch", "--hard", "main"))
    assert lk.head("main") == c3


# -- tags -----------------------------------------------------------------------------------


def test_tags_are_immutable(forked: Lk) -> None:
    lk = forked
    c1 = lk.head("main")
    r = lk.ok("tag", "-p", "logs", "v1")
    assert f"created tag logs@v1 at {c1} (from main)" in r.err
    c2 = lk.load("logs", [4])
    assert "already exists" in error_line(lk.fail("tag", "-p", "logs", "v1"))
    assert "already exists" in error_line(lk.fail("tag", "-p", "logs", "v1", "--from", c2))
    assert lk.refs()[("tag", "v1")] == c1
    # readable through scan, get, query, log
    assert lk.ts("logs@v1") == [1, 2, 3]
    assert [x["ts"] for x in lk.ok("get", "-p", "logs@v1", "2", "4").rows()] == [2]
    assert lk.ok("query", 'SELECT count(*) AS n FROM "logs@v1"').rows() == [{"n": 3}]
    assert lk.log("logs@v1")[0]["id"] == c1
    # a tag is not a branch: writing to it fails and changes nothing
    before = lk.refs()
    assert "not found" in error_line(lk.fail("load", "-p", "logs@v1", lk.file([{"ts": 9}])))
    assert "not found" in error_line(lk.fail("delete", "-p", "logs@v1", "--where", "ts = 1"))
    assert "not found" in error_line(lk.fail("add", "-p", "logs@v1", lk.file([{"ts": 9}])))
    assert "not found" in error_line(lk.fail("reset", "-p", "logs@v1", "--hard", "main"))
    assert "not found" in error_line(lk.fail("merge", "-p", "logs", "main", "--into", "v1"))
    assert "not found" in error_line(lk.fail("cherry-pick", "-p", "logs@v1", c2))
    assert "not found" in error_line(lk.fail("branch", "-p", "logs", "-d", "v1"))
    assert lk.refs() == before
    assert lk.ts("logs@v1") == [1, 2, 3]
    # delete, then re-create elsewhere
    r = lk.ok("tag", "-p", "logs", "-d", "v1")
    assert f"deleted tag logs@v1 (was {c1})" in r.err
    assert ("tag", "v1") not in lk.refs()
    assert "no branch" in error_line(lk.fail("scan", "-p", "logs@v1"))
    lk.ok("tag", "-p", "logs", "v1")
    assert lk.refs()[("tag", "v1")] == c2
    assert lk.ts("logs@v1") == [1, 2, 3, 4]
    assert "not found" in error_line(lk.fail("tag", "-p", "logs", "-d", "nope"))
    assert "invalid tag name" in error_line(lk.fail("tag", "-p", "logs", "a..b"))
    # a tag can be a merge source
    lk.ok("tag", "-p", "logs", "old", "--from", c1)
    r = lk.ok("merge", "-p", "logs", "old")
    assert "already up to date" in r.err


def test_a_tag_cannot_be_shadowed_by_a_branch(forked: Lk) -> None:
    """``logs@v1`` must keep meaning the tag: a branch of the same name would hide it."""
    lk = forked
    lk.ok("tag", "-p", "logs", "v1")
    tagged = lk.ts("logs@v1")
    branch = run("--lake", lk.lake, "branch", "-p", "logs", "v1")
    if branch.code == 0:
        lk.load("logs@v1", [99])
    assert lk.ts("logs@v1") == tagged, "branch v1 now hides tag v1"
    assert branch.code == 1 and "already exists" in error_line(branch)
    # and a tag named like an existing branch would be unreachable by name
    r = run("--lake", lk.lake, "tag", "-p", "logs", "dev")
    assert r.code == 1 and "already exists" in error_line(r)


# -- transactions (Python API) ------------------------------------------------------------


def _tx_branches(lake: str) -> list[str]:
    return [b for b in Lake.open(lake).pool("logs").branches() if b.startswith(TX_PREFIX)]


def test_transaction_commits_atomically(forked: Lk) -> None:
    lk = forked
    pool = Lake.open(lk.lake).pool("logs")
    before = lk.head("main")
    with pool.transaction("main", message="tx") as tx:
        tx.load([pa.table({"ts": [40, 41], "tag": ["a", "b"]})])
        tx.delete_where("ts = 1")
        inside = _tx_branches(lk.lake)
        assert len(inside) == 1 and tx.branch == inside[0]
        assert lk.ts("logs") == [1, 2, 3]  # invisible from main
        assert lk.head("main") == before
        assert lk.ts(f"logs@{tx.branch}") == [2, 3, 40, 41]
        assert tx.scan().column("ts").to_pylist() == [2, 3, 40, 41]
    assert lk.ts("logs") == [2, 3, 40, 41]
    assert _tx_branches(lk.lake) == []
    assert all(not b[1].startswith(TX_PREFIX) for b in lk.refs())
    log = lk.log("logs")
    assert log[2]["id"] == before  # fast-forward: the two tx commits, then main's old head
    # main moved meanwhile: a merge commit
    with pool.transaction("main") as tx:
        tx.load([pa.table({"ts": [50]})])
        lk.load("logs", [60])
    assert lk.ts("logs") == [2, 3, 40, 41, 50, 60]
    top = lk.log("logs")[0]
    assert len(top["parents"]) == 2 and top["message"].startswith("transaction _tx-")
    assert _tx_branches(lk.lake) == []


def test_transaction_rolls_back_on_exception(forked: Lk) -> None:
    lk = forked
    pool = Lake.open(lk.lake).pool("logs")
    before = lk.refs()
    with pytest.raises(RuntimeError, match="boom"), pool.transaction("main") as tx:
        tx.load([pa.table({"ts": [40]})])
        tx.delete_where("ts = 2")
        assert tx.scan().column("ts").to_pylist() == [1, 3, 40]
        raise RuntimeError("boom")
    assert lk.refs() == before
    assert lk.ts("logs") == [1, 2, 3]
    assert _tx_branches(lk.lake) == []


def test_transaction_conflict_leaves_nothing(forked: Lk) -> None:
    lk = forked
    pool = Lake.open(lk.lake).pool("logs")
    with pytest.raises(ConflictError) as caught, pool.transaction("main") as tx:
        tx.delete_where("ts = 1")
        tx.load([pa.table({"ts": [40]})])
        pool.delete_where("ts = 2", branch="main")  # someone else rewrites it
    assert "conflicting" in str(caught.value)
    assert lk.ts("logs") == [1, 3]  # only the other writer's change
    assert _tx_branches(lk.lake) == []
    assert len(lk.log("logs")) == 3


def test_empty_transaction_changes_nothing(forked: Lk) -> None:
    lk = forked
    pool = Lake.open(lk.lake).pool("logs")
    before = lk.refs()
    with pool.transaction("main") as tx:
        assert tx.scan().column("ts").to_pylist() == [1, 2, 3]
    assert lk.refs() == before
    assert _tx_branches(lk.lake) == []


def test_transaction_on_a_missing_branch(forked: Lk) -> None:
    pool = Lake.open(forked.lake).pool("logs")
    with pytest.raises(Exception, match="not found"), pool.transaction("nope"):
        pass
    assert _tx_branches(forked.lake) == []


# -- hooks ----------------------------------------------------------------------------------


def test_pre_commit_shell_hook_vetoes(forked: Lk) -> None:
    lk = forked
    r = lk.ok(
        "hook",
        "add",
        "-p",
        "logs",
        "--event",
        "pre-commit",
        "--run",
        "echo 'loads are frozen' >&2; exit 1",
        "freeze",
    )
    assert "added pre-commit hook 'freeze'" in r.err
    hooks = lk.ok("hook", "ls", "-p", "logs").rows()
    assert hooks == [
        {
            "name": "freeze",
            "event": "pre-commit",
            "run": "echo 'loads are frozen' >&2; exit 1",
            "branches": "*",
        }
    ]
    head, n = lk.head("main"), len(lk.log("logs"))
    r = lk.fail("load", "-p", "logs", lk.file([{"ts": 9}]))
    assert r.text == ""
    assert "loads are frozen" in error_line(r) and "freeze" in error_line(r)
    assert "loads are frozen" in error_line(lk.fail("delete", "-p", "logs", "--where", "ts = 1"))
    assert lk.head("main") == head and len(lk.log("logs")) == n
    assert lk.ts("logs") == [1, 2, 3]
    # the hook runs on every branch without --branch
    assert "loads are frozen" in error_line(lk.fail("load", "-p", "logs@dev", lk.file([{"ts": 9}])))
    assert "already has a hook" in error_line(
        lk.fail("hook", "add", "-p", "logs", "--event", "pre-commit", "--run", "true", "freeze")
    )
    r = lk.ok("hook", "rm", "-p", "logs", "freeze")
    assert "removed hook 'freeze'" in r.err
    assert lk.ok("hook", "ls", "-p", "logs").rows() == []
    lk.load("logs", [9])
    assert lk.ts("logs") == [1, 2, 3, 9]
    assert "no hook" in error_line(lk.fail("hook", "rm", "-p", "logs", "freeze"))


def test_hook_without_output_reports_exit_status(forked: Lk) -> None:
    lk = forked
    lk.ok("hook", "add", "-p", "logs", "--event", "pre-commit", "--run", "exit 3", "quiet")
    assert "exit status 3" in error_line(lk.fail("load", "-p", "logs", lk.file([{"ts": 9}])))


def test_pre_merge_hook_vetoes(forked: Lk) -> None:
    lk = forked
    lk.load("logs@dev", [10])
    lk.ok(
        "hook",
        "add",
        "-p",
        "logs",
        "--event",
        "pre-merge",
        "--run",
        'echo "no merges from $LIMNO_SOURCE"; exit 1',
        "gate",
    )
    main = lk.head("main")
    r = lk.fail("merge", "-p", "logs", "dev")
    assert r.text == ""
    assert "no merges from dev" in error_line(r)
    assert lk.head("main") == main and lk.ts("logs") == [1, 2, 3]
    # commits are not merges: loading still works
    lk.load("logs", [20])
    lk.ok("hook", "rm", "-p", "logs", "gate")
    lk.ok("merge", "-p", "logs", "dev")
    assert lk.ts("logs") == [1, 2, 3, 10, 20]


def test_hook_branch_glob(forked: Lk) -> None:
    lk = forked
    lk.ok(
        "hook",
        "add",
        "-p",
        "logs",
        "--event",
        "pre-commit",
        "--branch",
        "release-*",
        "--branch",
        "prod",
        "--run",
        "echo release branches are read-only >&2; exit 1",
        "ro",
    )
    assert lk.ok("hook", "ls", "-p", "logs").rows()[0]["branches"] == "release-*,prod"
    lk.ok("branch", "-p", "logs", "release-1")
    lk.ok("branch", "-p", "logs", "prod")
    lk.ok("branch", "-p", "logs", "prerelease-1")
    lk.load("logs", [4])
    lk.load("logs@dev", [5])
    lk.load("logs@prerelease-1", [6])
    for branch in ("release-1", "prod"):
        head = lk.head(branch)
        r = lk.fail("load", "-p", f"logs@{branch}", lk.file([{"ts": 9}]))
        assert "read-only" in error_line(r)
        assert lk.head(branch) == head
    # a merge into a guarded branch is not a commit hook's business
    lk.ok("merge", "-p", "logs", "dev", "--into", "release-1")
    assert lk.ts("logs@release-1") == [1, 2, 3, 5]


def test_pre_merge_hook_branch_glob(forked: Lk) -> None:
    lk = forked
    lk.load("logs@dev", [10])
    lk.ok("branch", "-p", "logs", "staging")
    lk.ok(
        "hook",
        "add",
        "-p",
        "logs",
        "--event",
        "pre-merge",
        "--branch",
        "main",
        "--run",
        "echo main is frozen; exit 1",
        "mainonly",
    )
    r = lk.ok("merge", "-p", "logs", "dev", "--into", "staging")
    assert "fast-forwarded logs@staging" in r.err
    main = lk.head("main")
    assert "main is frozen" in error_line(lk.fail("merge", "-p", "logs", "staging"))
    assert lk.head("main") == main


def test_post_commit_and_post_merge_shell_hooks(forked: Lk, tmp_path: Path) -> None:
    lk = forked
    out = tmp_path / "post-commit.txt"
    event = tmp_path / "event.json"
    merged = tmp_path / "post-merge.txt"
    lk.ok(
        "hook",
        "add",
        "-p",
        "logs",
        "--event",
        "post-commit",
        "--run",
        f'echo "$LIMNO_COMMIT $LIMNO_BRANCH $LIMNO_POOL" >> {out}; cat > {event}',
        "notify",
    )
    lk.ok(
        "hook",
        "add",
        "-p",
        "logs",
        "--event",
        "post-merge",
        "--run",
        f'echo "$LIMNO_COMMIT $LIMNO_KIND $LIMNO_SOURCE" >> {merged}',
        "merged",
    )
    commit = lk.load("logs@dev", [10], "-m", "hello")
    assert out.read_text() == f"{commit} dev logs\n"
    payload = json.loads(event.read_text())
    assert payload["event"] == "post-commit"
    assert payload["commit"] == commit and payload["branch"] == "dev"
    assert payload["message"] == "hello" and payload["pool"] == "logs"
    ff = lk.ok("merge", "-p", "logs", "dev").text.strip()
    assert merged.read_text() == f"{ff} fast-forward dev\n"
    assert out.read_text() == f"{commit} dev logs\n"  # a merge is not a commit
    # a failing post hook is only a notification: the commit stands
    lk.ok("hook", "add", "-p", "logs", "--event", "post-commit", "--run", "exit 1", "broken")
    second = lk.load("logs", [11])
    assert lk.head("main") == second
    assert out.read_text().splitlines()[-1] == f"{second} main logs"


def test_python_hook(forked: Lk, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lk = forked
    mod = tmp_path / "pyhooks_git_cli.py"
    mod.write_text(
        "SEEN = []\n"
        "def veto(event):\n"
        "    raise RuntimeError('python says no to ' + event['branch'])\n"
        "def record(event):\n"
        "    SEEN.append(event)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "pyhooks_git_cli", raising=False)
    lk.ok(
        "hook",
        "add",
        "-p",
        "logs",
        "--event",
        "pre-commit",
        "--python",
        "pyhooks_git_cli:veto",
        "--branch",
        "dev",
        "pyveto",
    )
    lk.ok(
        "hook",
        "add",
        "-p",
        "logs",
        "--event",
        "pre-merge",
        "--python",
        "pyhooks_git_cli:record",
        "rec",
    )
    listed = {h["name"]: h["run"] for h in lk.ok("hook", "ls", "-p", "logs").rows()}
    assert listed == {
        "pyveto": "python pyhooks_git_cli:veto",
        "rec": "python pyhooks_git_cli:record",
    }
    head = lk.head("dev")
    r = lk.fail("load", "-p", "logs@dev", lk.file([{"ts": 9}]))
    assert "python says no to dev" in error_line(r)
    assert lk.head("dev") == head
    lk.load("logs", [4])
    lk.ok("merge", "-p", "logs", "main", "--into", "dev")
    seen = importlib.import_module("pyhooks_git_cli").SEEN
    assert len(seen) == 1
    assert seen[0]["event"] == "pre-merge" and seen[0]["branch"] == "dev"
    assert seen[0]["source"] == "main"
    lk.ok("hook", "rm", "-p", "logs", "pyveto")
    lk.load("logs@dev", [9])
    r = lk.fail("hook", "add", "-p", "logs", "--event", "pre-commit", "--python", "nocolon", "x")
    assert "module:function" in error_line(r)
    # a python hook whose module cannot be imported vetoes (it cannot say yes)
    lk.ok("hook", "add", "-p", "logs", "--event", "pre-commit", "--python", "no_such_mod:f", "gone")
    assert "gone" in error_line(lk.fail("load", "-p", "logs", lk.file([{"ts": 8}])))


def test_hook_add_validation(forked: Lk) -> None:
    lk = forked
    both = lk.fail(
        "hook",
        "add",
        "-p",
        "logs",
        "--event",
        "pre-commit",
        "--run",
        "true",
        "--python",
        "m:f",
        "x",
    )
    assert "exactly one" in error_line(both)
    assert "exactly one" in error_line(
        lk.fail("hook", "add", "-p", "logs", "--event", "pre-commit", "x")
    )
    bad_event = run(
        "--lake", lk.lake, "hook", "add", "-p", "logs", "--event", "pre-push", "--run", "true", "x"
    )
    assert bad_event.code == 2
    assert lk.ok("hook", "ls", "-p", "logs").rows() == []


def test_in_process_pre_merge_hook(forked: Lk) -> None:
    lk = forked
    lk.load("logs@dev", [10])
    pool = Lake.open(lk.lake).pool("logs")
    seen: list[dict[str, Any]] = []

    def gate(event: dict[str, Any]) -> None:
        seen.append(event)
        if event["source"] == "dev":
            raise ValueError("dev is not ready")

    pool.hooks.register("pre-merge", gate)
    main = lk.head("main")
    with pytest.raises(HookVetoError, match="dev is not ready"):
        pool.merge("dev", "main")
    assert lk.head("main") == main
    assert seen[0]["branch"] == "main" and seen[0]["strategy"] == "fail"
    # a hook registered in-process is not persisted: the CLI merges
    lk.ok("merge", "-p", "logs", "dev")
    assert lk.ts("logs") == [1, 2, 3, 10]
    assert lk.ok("hook", "ls", "-p", "logs").rows() == []

"""Branches and tags through the CLI (in-process, real entry point): isolation, refs to
branch from, deletion, listing; tags that stay put and cannot be shadowed.

Every scenario ends with ``limno verify`` passing (the ``lake`` fixture checks it on
teardown).
"""

from __future__ import annotations

import pytest

from clirunner import run
from git_scenarios import Lk, error_line

# -- branches ----------------------------------------------------------------------------

pytestmark = pytest.mark.usefixtures("isolated_home")


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
        {"kind": "branch", "name": "dev", "commit": dev, "protected": False},
        {"kind": "branch", "name": "main", "commit": main, "protected": False},
        {"kind": "tag", "name": "a-dev", "commit": dev, "protected": False},
        {"kind": "tag", "name": "v1", "commit": base, "protected": False},
    ]
    assert lk.ok("tag", "-p", "logs").text.splitlines() == [f"a-dev\t{dev}", f"v1\t{base}"]
    table = lk.ok("-f", "table", "ls", "logs").text
    assert "v1" in table and "dev" in table and base in table


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

"""``limno branch protect|unprotect``: only merges (and maintenance) move a protected
branch, on a lake's path and through a server (``mode``).

Every refused command exits 1 with one exact ``error:`` line and leaves the pool's
files as they were; every scenario ends with ``limno verify`` passing (the ``lake``
fixture checks it on teardown).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from git_scenarios import Lk, error_line, ok

pytestmark = pytest.mark.usefixtures("isolated_home")


def refused(branch: str = "main", why: str = "only merges may move it") -> str:
    return (
        f"error: branch {branch!r} of pool 'logs' is protected: {why}"
        f" (limno branch unprotect -p logs {branch})"
    )


def pool_files(lk: Lk) -> dict[str, int]:
    """Every file of pool ``logs`` with its size (the server's own files, such as its
    users' keys, are elsewhere in the lake)."""
    pool_id = next(p["id"] for p in lk.ok("ls").rows() if p["name"] == "logs")
    root = Path(lk.path) / pool_id
    return {str(p.relative_to(root)): p.stat().st_size for p in root.rglob("*") if p.is_file()}


def test_protect_unprotect_and_the_listings(forked: Lk) -> None:
    lk = forked
    r = lk.ok("branch", "protect", "-p", "logs", "main")
    assert r.out == b"" and r.err.strip() == "protected logs@main: only merges may move it"
    assert lk.ok("branch", "protect", "-p", "logs", "main").err.strip() == (
        "logs@main was already protected"
    )
    rows = {(b["kind"], b["name"]): b["protected"] for b in lk.ok("ls", "logs").rows()}
    assert rows == {("branch", "dev"): False, ("branch", "main"): True}
    listed = json.loads(lk.ok("branch", "-p", "logs", "-f", "json").text)
    assert [(b["name"], b["protected"]) for b in listed] == [("dev", False), ("main", True)]
    plain = [line.split("\t") for line in lk.ok("branch", "-p", "logs").text.splitlines()]
    assert [(f[0], len(f)) for f in plain] == [("dev", 2), ("main", 2)]  # as scripts read them
    sql = lk.ok("query", 'SELECT name FROM "logs:branches" WHERE protected').rows()
    assert sql == [{"name": "main"}]
    assert lk.ok("branch", "unprotect", "-p", "logs", "main").err.strip() == "unprotected logs@main"
    assert lk.ok("branch", "unprotect", "-p", "logs", "main").err.strip() == (
        "logs@main was not protected"
    )
    assert not any(b["protected"] for b in lk.ok("ls", "logs").rows())


def test_usage_and_missing_branches(forked: Lk) -> None:
    lk = forked
    usage = "error: usage: limno branch protect -p POOL BRANCH"
    assert error_line(lk.fail("branch", "protect", "-p", "logs")) == usage
    nope = "error: branch 'nope' not found"
    assert error_line(lk.fail("branch", "protect", "-p", "logs", "nope")) == nope
    assert error_line(lk.fail("branch", "unprotect", "-p", "logs", "nope")) == nope
    assert "takes one NAME" in error_line(lk.fail("branch", "-p", "logs", "a", "b"))
    assert lk.ok("ls", "logs").rows()[0]["protected"] is False


def _staged(lk: Lk) -> list[str]:
    lk.ok("add", "-p", "logs", lk.file([{"ts": 9}]))
    return []


#: each refused command of main: (setup before protecting -> extra args, the command)
REFUSED: dict[str, tuple[Callable[[Lk], list[str]], Callable[[Lk, list[str]], list[str]]]] = {
    "load": (lambda lk: [], lambda lk, _: ["load", "-p", "logs", lk.file([{"ts": 4}])]),
    "add": (lambda lk: [], lambda lk, _: ["add", "-p", "logs", lk.file([{"ts": 4}])]),
    "ingest submit": (  # a queued file, as a staged one, could only be committed directly
        lambda lk: [],
        lambda lk, _: ["ingest", "submit", "-p", "logs", lk.file([{"ts": 4}])],
    ),
    "commit": (_staged, lambda lk, _: ["commit", "-p", "logs"]),
    "delete": (
        lambda lk: [lk.object_at("logs", 1)],
        lambda lk, ids: ["delete", "-p", "logs", *ids],
    ),
    "delete --where": (lambda lk: [], lambda lk, _: ["delete", "-p", "logs", "--where", "ts = 1"]),
    "revert": (lambda lk: [lk.load("logs", [5])], lambda lk, c: ["revert", c[0], "-p", "logs"]),
    "cherry-pick": (
        lambda lk: [lk.load("logs@dev", [7])],
        lambda lk, c: ["cherry-pick", "-p", "logs", c[0]],
    ),
    "reset": (
        lambda lk: [lk.load("logs", [5])],
        lambda lk, _: ["reset", "--hard", "-p", "logs@main", "main~1"],
    ),
}


@pytest.mark.parametrize("op", list(REFUSED))
def test_a_direct_write_is_refused_and_changes_nothing(forked: Lk, op: str) -> None:
    lk = forked
    setup, command = REFUSED[op]
    args = command(lk, setup(lk))
    lk.ok("branch", "protect", "-p", "logs", "main")
    head, rows = lk.head("main"), lk.ts("logs")
    staged = lk.ok("stage", "-p", "logs").rows()
    before = pool_files(lk)
    r = lk.fail(*args)
    assert r.out == b"" and error_line(r) == refused()
    assert pool_files(lk) == before
    assert (lk.head("main"), lk.ts("logs"), lk.ok("stage", "-p", "logs").rows()) == (
        head,
        rows,
        staged,
    )
    # unprotected, the same command goes through
    lk.ok("branch", "unprotect", "-p", "logs", "main")
    lk.ok(*args)
    assert lk.head("main") != head or op in ("add", "ingest submit")


def test_a_protected_branch_cannot_be_deleted(forked: Lk) -> None:
    lk = forked
    lk.ok("branch", "protect", "-p", "logs", "dev")
    r = lk.fail("branch", "-p", "logs", "-d", "dev")
    assert error_line(r) == refused("dev", "it cannot be deleted")
    assert ("branch", "dev") in lk.refs()
    lk.ok("branch", "unprotect", "-p", "logs", "dev")
    lk.ok("branch", "-p", "logs", "-d", "dev")
    assert ("branch", "dev") not in lk.refs()


def test_merges_move_a_protected_branch(forked: Lk) -> None:
    lk = forked
    lk.ok("branch", "protect", "-p", "logs", "main")
    dev = lk.load("logs@dev", [10])
    r = lk.ok("merge", "-p", "logs", "dev", "--into", "main")
    assert "fast-forwarded logs@main" in r.err and lk.head("main") == dev
    lk.load("logs@dev", [11])
    r = lk.ok("merge", "-p", "logs", "dev", "--into", "main", "--no-ff")
    assert "merged dev into logs@main" in r.err
    assert lk.log("logs")[0]["parents"][1] == lk.head("dev")
    assert lk.ts("logs") == [1, 2, 3, 10, 11]
    assert error_line(lk.fail("load", "-p", "logs", lk.file([{"ts": 12}]))) == refused()


def test_unprotect_then_commit(forked: Lk) -> None:
    lk = forked
    lk.ok("branch", "protect", "-p", "logs", "main")
    lk.ok("branch", "unprotect", "-p", "logs", "main")
    lk.ok("add", "-p", "logs", lk.file([{"ts": 4}]))
    commit = lk.ok("commit", "-p", "logs").text.strip()
    assert lk.head("main") == commit and lk.ts("logs") == [1, 2, 3, 4]


def test_compaction_manage_vacuum_and_tags_work_on_a_protected_branch(forked: Lk) -> None:
    lk = forked
    lk.load("logs", [4])
    lk.load("logs", [5])
    lk.ok("branch", "protect", "-p", "logs", "main")
    ids = [o["id"] for o in lk.objects("logs")]
    assert len(ids) == 3
    commit = lk.ok("compact", "-p", "logs", *ids).text.strip()
    assert lk.head("main") == commit and len(lk.objects("logs")) == 1
    assert lk.ts("logs") == [1, 2, 3, 4, 5]
    lk.ok("vacuum", "-p", "logs")
    lk.ok("tag", "-p", "logs", "v1")
    assert lk.refs()[("tag", "v1")] == lk.head("main")
    assert [b["name"] for b in lk.ok("ls", "logs").rows() if b["protected"]] == ["main"]


def test_manage_splits_a_protected_branch(forked: Lk) -> None:
    lk = forked
    lk.ok("create", "small", "-k", "ts", "--split-threshold", "2")
    lk.load("small", [1, 2, 3])
    lk.load("small", [4, 5, 6])
    lk.ok("branch", "protect", "-p", "small", "main")
    head = lk.head("main", "small")
    ok("--lake", lk.path, "manage", "--once")  # next to the lake: not through a server
    parts = lk.ok("query", 'SELECT id FROM "small:partitions" WHERE leaf').rows()
    assert len(parts) > 1 and lk.head("main", "small") != head
    assert lk.ts("small") == [1, 2, 3, 4, 5, 6]
    assert error_line(lk.fail("load", "-p", "small", lk.file([{"ts": 7}]))).startswith(
        "error: branch 'main' of pool 'small' is protected"
    )


@pytest.mark.parametrize("mode", ["served"])  # users and roles exist only behind a server
def test_a_developer_may_not_protect(
    forked: Lk, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    lk = forked
    made = json.loads(lk.ok("-f", "json", "auth", "create-user", "dev", "--role", "developer").text)
    lk.ok("branch", "protect", "-p", "logs", "dev")  # as the test's admin
    monkeypatch.setenv("LIMNO_ACCESS_KEY_ID", made["access_key_id"])
    monkeypatch.setenv("LIMNO_SECRET_ACCESS_KEY", made["secret_access_key"])
    r = lk.fail("branch", "protect", "-p", "logs", "main")
    assert error_line(r) == "error: user 'dev' (developer) may not administer the lake"
    r = lk.fail("branch", "unprotect", "-p", "logs", "dev")
    assert error_line(r) == "error: user 'dev' (developer) may not administer the lake"
    # a developer reads the rules, and is bound by them like anyone
    assert [b["name"] for b in lk.ok("ls", "logs").rows() if b["protected"]] == ["dev"]
    assert error_line(lk.fail("load", "-p", "logs@dev", lk.file([{"ts": 4}]))) == refused("dev")
    lk.load("logs", [4])  # main is not protected

"""``limno cherry-pick`` and ``limno reset --hard`` (in-process, real entry point).

Every scenario ends with ``limno verify`` passing (the ``lake`` fixture checks it on
teardown).
"""

from __future__ import annotations

import pytest

from git_scenarios import Lk, error_line, root_commit

# -- cherry-pick ----------------------------------------------------------------------------

pytestmark = pytest.mark.usefixtures("isolated_home")


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
        lk.fail("cherry-pick", "-p", "logs@other", root_commit(lk, "logs"))
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

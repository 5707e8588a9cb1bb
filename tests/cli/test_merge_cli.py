"""Merge through the CLI (in-process, real entry point): fast-forward, three-way,
up to date, ``--no-ff``, sources in other pools; conflicts and the strategies.

Every scenario ends with ``limno verify`` passing (the ``lake`` fixture checks it on
teardown).
"""

from __future__ import annotations

import pytest

from clirunner import run
from git_scenarios import Lk, error_line, root_commit

# -- merge ----------------------------------------------------------------------------------

pytestmark = pytest.mark.usefixtures("isolated_home")


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
        root_commit(lk, "logs"),
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

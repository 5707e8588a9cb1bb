"""``limno diff`` between refs (in-process, real entry point).

Every scenario ends with ``limno verify`` passing (the ``lake`` fixture checks it on
teardown).
"""

from __future__ import annotations

import json

import pytest

from git_scenarios import Lk, error_line

# -- diff -----------------------------------------------------------------------------------

pytestmark = pytest.mark.usefixtures("isolated_home")


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

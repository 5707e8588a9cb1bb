"""``limno iterator set|clear|ls``: a pool's iterators changed after it was created, on a
lake's path and through a server (``mode``); through a server a writer may set the
built-in iterators, and only an admin one that names code (``python(...)``)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from clirunner import fail, ok, run
from git_scenarios import Lk, error_line
from server_support import served_user, start_server

pytestmark = pytest.mark.usefixtures("isolated_home")

#: ``sum(F)`` in Python (compare limno's own): F summed per key, the rest from the newest row
SUMMED = """
import pyarrow as pa


class Summed:
    def __init__(self, key_fields, options):
        self.keys, self.field = key_fields, options["field"]

    def apply(self, batches):
        for batch in batches:
            table = pa.Table.from_batches([batch])
            numbered = table.append_column("__i", pa.array(range(len(table)), pa.int64()))
            agg = numbered.group_by(self.keys, use_threads=False).aggregate(
                [("__i", "max"), (self.field, "sum")]
            )
            newest = table.take(agg.column("__i_max"))
            i = newest.schema.get_field_index(self.field)
            yield newest.set_column(i, self.field, agg.column(self.field + "_sum"))
"""

LOADS = [
    [{"k": 1, "n": 1}, {"k": 2, "n": 10}],
    [{"k": 1, "n": 5}, {"k": 3, "n": 7}],
]
RAW = [{"k": 1, "n": 1}, {"k": 1, "n": 5}, {"k": 2, "n": 10}, {"k": 3, "n": 7}]
SUMS = [{"k": 1, "n": 6}, {"k": 2, "n": 10}, {"k": 3, "n": 7}]


def make_pool(lk: Lk) -> None:
    lk.ok("create", "p", "-k", "k")
    for rows in LOADS:
        lk.ok("load", "-p", "p", lk.file(rows))


def scanned(lk: Lk) -> list[dict[str, int]]:
    return [{"k": r["k"], "n": r["n"]} for r in lk.ok("scan", "-p", "p").rows()]


def listed(lk: Lk, ref: str = "p") -> list[tuple[str, str | None, str | None]]:
    return [
        (r["iterator"], r["file"], r["sha256"]) for r in lk.ok("iterator", "ls", "-p", ref).rows()
    ]


def test_set_list_and_clear_change_what_reads_return(lk: Lk, tmp_path: Path) -> None:
    make_pool(lk)
    assert listed(lk) == [] and scanned(lk) == RAW
    r = lk.ok("iterator", "set", "-p", "p", "sum(n)", "age-off(ts,30d)")
    assert (r.out, r.err.strip()) == (b"", "iterators of pool p: sum(n), age-off(ts,30d)")
    assert listed(lk) == [("sum(n)", None, None), ("age-off(ts,30d)", None, None)]
    assert scanned(lk) == SUMS
    # a file's class, set through the branch's name (iterators are the pool's)
    path = tmp_path / "sums.py"
    path.write_text(SUMMED)
    digest = hashlib.sha256(SUMMED.encode()).hexdigest()
    r = lk.ok(
        "iterator", "set", "-p", "p@main", "--iterator-file", str(path), "python(Summed,field=n)"
    )
    assert r.err.strip() == (
        f"iterators of pool p: python(Summed,field=n) from sums.py (sha256 {digest[:12]})"
    )
    assert listed(lk, "p@main") == [("python(Summed,field=n)", "sums.py", digest)]
    assert scanned(lk) == SUMS
    assert lk.ok("query", "SELECT k, n FROM p ORDER BY k").rows() == SUMS
    table = lk.ok("-f", "table", "iterator", "ls", "-p", "p").text.splitlines()
    assert table[0].split() == ["iterator", "file", "sha256"] and digest[:12] in table[1]
    r = lk.ok("iterator", "clear", "-p", "p")
    assert r.err.strip() == "iterators of pool p: none"
    assert listed(lk) == [] and scanned(lk) == RAW


def test_a_refused_change_changes_nothing(lk: Lk, tmp_path: Path) -> None:
    make_pool(lk)
    lk.ok("iterator", "set", "-p", "p", "sum(n)")
    path = tmp_path / "sums.py"
    path.write_text(SUMMED)
    cases = [
        (("bogus",), "error: unknown iterator 'bogus': expected dedup, sum(F), min(F), max(F),"
         " age-off(F,DURATION) or python(CLASS)"),
        (("sum(k)",), "error: iterator 'sum(k)': 'k' is (part of) the pool key 'k', which"
         " cannot be aggregated"),
        (("--iterator-file", str(path), "python(Summed)"),
         "error: iterator Summed (sums.py) failed: KeyError: 'field'"),
        (("--iterator-file", str(path), "python(Nope)"),
         "error: iterator Nope (sums.py): file sums.py has no class 'Nope'"),
        (("--iterator-file", str(tmp_path / "missing.py"), "python(Summed)"),
         f"error: cannot read iterator file {tmp_path / 'missing.py'}: no such file or directory"),
    ]  # fmt: skip
    for args, error in cases:
        assert error_line(lk.fail("iterator", "set", "-p", "p", *args)) == error, args
    assert listed(lk) == [("sum(n)", None, None)] and scanned(lk) == SUMS
    assert error_line(lk.fail("iterator", "ls", "-p", "nosuch")) == "error: pool 'nosuch' not found"
    usage = run("--lake", lk.lake, "iterator", "set", "-p", "p")  # none: 'clear' says it
    assert usage.code == 2 and "Missing argument 'ITERATORS...'" in usage.err


def test_through_a_server_only_an_admin_names_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    where = str(tmp_path / "lake")
    ok("--lake", where, "init")
    server = start_server(where)
    try:
        lk = Lk(server.url, tmp_path, where)
        for name, value in server.env.items():
            monkeypatch.setenv(name, value)
        make_pool(lk)
        for name, value in served_user(server, "dev", "developer").items():
            monkeypatch.setenv(name, value)
        lk.ok("iterator", "set", "-p", "p", "sum(n)")  # a writer's change
        assert scanned(lk) == SUMS
        path = tmp_path / "sums.py"
        path.write_text(SUMMED)
        refused = fail("--lake", server.url, "iterator", "set", "-p", "p",
                       "--iterator-file", str(path), "python(Summed,field=n)")  # fmt: skip
        assert error_line(refused) == (
            "error: user 'dev' (developer) may not administer the lake: a python() iterator"
            " runs its code in the server"
        )
        assert listed(lk) == [("sum(n)", None, None)]
        lk.ok("iterator", "clear", "-p", "p")
        assert scanned(lk) == RAW
        for name, value in server.env.items():  # the admin may
            monkeypatch.setenv(name, value)
        lk.ok("iterator", "set", "-p", "p", "--iterator-file", str(path), "python(Summed,field=n)")
        assert scanned(lk) == SUMS
    finally:
        assert server.stop() == 0, server.lines

"""``limno create --iterator-file F --iterator 'python(CLASS,k=v)'``: a pool's own iterator,
stored in the lake, gives the same answer to scan, get, query and compaction as the
built-in iterator it imitates, on a lake's path and through a server (which runs the
stored file, in its own process); a broken one is one ``error:`` line; only an admin
sets one through a server."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from clirunner import Result, fail, ok
from lake_modes import SERVED, located
from limno import ForbiddenError
from limno.api.remote import RemoteLake
from server_support import served_user, start_server

pytestmark = pytest.mark.usefixtures("isolated_home")

SUMMED = """
import os

import pyarrow as pa


class Summed:
    '''sum(F) in Python: F summed per key, every other field from the newest row.'''

    def __init__(self, key_fields, options):
        self.keys, self.field = key_fields, options["field"]

    def apply(self, batches):
        for batch in batches:
            table = pa.Table.from_batches([batch])
            numbered = table.append_column("__i", pa.array(range(len(table)), pa.int64()))
            groups = numbered.group_by(self.keys, use_threads=False)
            agg = groups.aggregate([("__i", "max"), (self.field, "sum")])
            newest = table.take(agg.column("__i_max"))
            i = newest.schema.get_field_index(self.field)
            yield newest.set_column(i, self.field, agg.column(self.field + "_sum"))


class Tagged:
    '''Every row as it is, with the id of the process that ran the iterator.'''

    def __init__(self, key_fields, options):
        pass

    def apply(self, batches):
        for batch in batches:
            pid = pa.array([os.getpid()] * batch.num_rows, pa.int64())
            yield pa.Table.from_batches([batch]).append_column("pid", pid)


class Backwards:
    def __init__(self, key_fields, options):
        pass

    def apply(self, batches):
        table = pa.Table.from_batches(list(batches))
        yield table.take(pa.array(range(table.num_rows - 1, -1, -1)))


class Raising:
    def __init__(self, key_fields, options):
        pass

    def apply(self, batches):
        for batch in batches:
            raise RuntimeError("the disk of my imagination is full")
        yield from ()
"""

LOADS = [
    [{"k": 1, "n": 1, "tag": "a"}, {"k": 2, "n": 10, "tag": "a"}, {"k": 3, "n": 5, "tag": "a"}],
    [{"k": 2, "n": 20, "tag": "b"}, {"k": 4, "n": 7, "tag": "b"}],
    [{"k": 1, "n": 100, "tag": "c"}, {"k": 2, "n": -3, "tag": "c"}],
]
EXPECTED = [
    {"k": 1, "n": 101, "tag": "c"},
    {"k": 2, "n": 27, "tag": "c"},
    {"k": 3, "n": 5, "tag": "a"},
    {"k": 4, "n": 7, "tag": "b"},
]


@pytest.fixture
def lake(tmp_path: Path, mode: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A new lake's path, or a server on it (``mode``)."""
    where = str(tmp_path / "lake")
    ok("--lake", where, "init")
    with located(where, mode, monkeypatch) as location:
        yield location


def iterator_file(tmp_path: Path, text: str = SUMMED) -> str:
    path = tmp_path / "my_iterators.py"
    path.write_text(text)
    return str(path)


def error_line(r: Result) -> str:
    assert "Traceback" not in r.err, r.err
    lines = [x for x in r.err.splitlines() if x.strip()]
    assert len(lines) == 1, r.err
    return lines[0]


def load_all(lake: str, pool: str, tmp_path: Path) -> None:
    for i, rows in enumerate(LOADS):
        path = tmp_path / f"{pool}-{i}.ndjson"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        ok("--lake", lake, "load", "-p", pool, str(path))


def answers(lake: str, pool: str) -> list[list[dict[str, Any]]]:
    """The pool's rows as scan, a descending scan (reversed back), get and SQL give them."""
    scan = ok("--lake", lake, "scan", "-p", pool).rows()
    desc = ok("--lake", lake, "scan", "-p", pool, "--order", "desc").rows()[::-1]
    got = ok("--lake", lake, "get", "-p", pool, "1", "2", "3", "4").rows()
    sql = f"SELECT k, n, tag FROM {pool} ORDER BY k"
    queried = ok("--lake", lake, "-f", "ndjson", "query", sql).rows()
    return [scan, desc, got, queried]


def compact_all(lake: str, pool: str) -> int:
    """Compact every object of the pool; how many rows its objects then hold."""
    listed = f'SELECT id, rows FROM "{pool}:objects"'
    ids = [r["id"] for r in ok("--lake", lake, "-f", "ndjson", "query", listed).rows()]
    ok("--lake", lake, "compact", "-p", pool, *ids)
    return sum(r["rows"] for r in ok("--lake", lake, "-f", "ndjson", "query", listed).rows())


def test_an_iterator_file_answers_as_the_built_in_everywhere(lake: str, tmp_path: Path) -> None:
    path = iterator_file(tmp_path)
    made = ok(
        "--lake", lake, "create", "sums", "-k", "k", "--iterator-file", path,
        "--iterator", "python(Summed,field=n)",
    )  # fmt: skip
    assert "iterators python(Summed,field=n) from my_iterators.py (sha256 " in made.err
    ok("--lake", lake, "create", "plain", "-k", "k", "--iterator", "sum(n)")
    # the lake keeps its own copy: what the file says now changes nothing
    Path(path).write_text("raise SystemExit('not this file')\n")
    for pool in ("sums", "plain"):
        load_all(lake, pool, tmp_path)
    assert answers(lake, "sums") == answers(lake, "plain") == [EXPECTED] * 4
    # compaction ran it too: one stored row per key, and the same answers after
    assert compact_all(lake, "sums") == compact_all(lake, "plain") == len(EXPECTED)
    assert answers(lake, "sums") == answers(lake, "plain") == [EXPECTED] * 4


def test_the_stored_iterator_runs_where_the_lake_is_read(
    lake: str, mode: str, tmp_path: Path
) -> None:
    ok("--lake", lake, "create", "tagged", "-k", "k", "--iterator-file", iterator_file(tmp_path),
       "--iterator", "python(Tagged)")  # fmt: skip
    load_all(lake, "tagged", tmp_path)
    pids = {r["pid"] for r in ok("--lake", lake, "scan", "-p", "tagged").rows()}
    assert len(pids) == 1
    # in this process on a lake's path; in the server's (not this one) behind a server
    assert (pids.pop() == os.getpid()) is (mode != SERVED)


@pytest.mark.parametrize(
    ("target", "error"),
    [
        (
            "Backwards",
            "error: iterator Backwards (my_iterators.py) broke the pool key order:"
            " it yielded key 3 after 4",
        ),
        (
            "Raising",
            "error: iterator Raising (my_iterators.py) failed:"
            " RuntimeError: the disk of my imagination is full",
        ),
    ],
)
def test_a_broken_iterator_is_one_error_line(
    lake: str, tmp_path: Path, target: str, error: str
) -> None:
    ok("--lake", lake, "create", "p", "-k", "k", "--iterator-file", iterator_file(tmp_path),
       "--iterator", f"python({target})")  # fmt: skip
    load_all(lake, "p", tmp_path)
    for command in (
        ("scan", "-p", "p"),
        ("get", "-p", "p", "3", "4"),
        ("query", "SELECT * FROM p"),
    ):
        assert error_line(fail("--lake", lake, *command)) == error, command
    ids = [o["id"] for o in ok("--lake", lake, "query", 'SELECT id FROM "p:objects"').rows()]
    assert error_line(fail("--lake", lake, "compact", "-p", "p", *ids)) == error
    # nothing was committed: the three loads' objects are still there
    assert len(ok("--lake", lake, "query", 'SELECT id FROM "p:objects"').rows()) == 3


def test_a_class_that_cannot_run_creates_no_pool(lake: str, tmp_path: Path) -> None:
    path = iterator_file(tmp_path)
    missing = tmp_path / "missing.py"
    cases = [
        (
            ("--iterator-file", path, "--iterator", "python(Nope)"),
            "error: iterator Nope (my_iterators.py): file my_iterators.py has no class 'Nope'",
        ),
        (
            ("--iterator-file", path, "--iterator", "python(Summed)"),
            "error: iterator Summed (my_iterators.py) failed: KeyError: 'field'",
        ),
        (
            ("--iterator", "python(Summed,field=n)"),
            "error: iterator python(Summed,field=n) names a class of an iterator file, but no"
            " file was given (or name an importable class: python(module:Class))",
        ),
        (
            ("--iterator-file", str(missing), "--iterator", "python(Summed)"),
            f"error: cannot read iterator file {missing}: no such file or directory",
        ),
    ]
    for args, error in cases:
        assert error_line(fail("--lake", lake, "create", "p", "-k", "k", *args)) == error
    assert ok("--lake", lake, "ls").rows() == []


def test_only_an_admin_sets_a_user_iterator_through_a_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    where = str(tmp_path / "lake")
    ok("--lake", where, "init")
    server = start_server(where)
    try:
        for name, value in served_user(server, "dev", "developer").items():
            monkeypatch.setenv(name, value)
        args = ("--iterator-file", iterator_file(tmp_path), "--iterator", "python(Summed,field=n)")
        refused = fail("--lake", server.url, "create", "p", "-k", "k", *args)
        assert error_line(refused) == (
            "error: user 'dev' (developer) may not administer the lake: a python() iterator"
            " runs its code in the server"
        )
        assert ok("--lake", server.url, "ls").rows() == []  # the pool made first is dropped
        with RemoteLake.open(server.url) as remote:
            with pytest.raises(ForbiddenError, match="a python\\(\\) iterator runs its code"):
                remote.create_pool("q", key="k", iterators=["python(mod:Cls)"])
            pool = remote.create_pool("r", key="k", iterators=["sum(n)"])
            with pytest.raises(ForbiddenError, match="may not administer"):
                pool.set_iterators(["python(Summed,field=n)"], SUMMED, "mine.py")
        for name, value in server.env.items():  # the admin may
            monkeypatch.setenv(name, value)
        ok("--lake", server.url, "create", "p", "-k", "k", *args)
        load_all(server.url, "p", tmp_path)
        assert ok("--lake", server.url, "scan", "-p", "p").rows() == EXPECTED
    finally:
        assert server.stop() == 0, server.lines

"""Git on a file pool, through the same commands as on record pools, on a lake's path and
through a real server (``mode``): branch, merge (with a conflict report), diff, revert,
cherry-pick, reset, protected branches, time travel (``@main~1``, ``--as-of``) and
import by reference (no bytes copied, never vacuumed); hooks, and the upload's bar."""

from __future__ import annotations

import datetime as dt
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from clirunner import Result
from git_scenarios import fail, ok

pytestmark = pytest.mark.usefixtures("isolated_home")


class Files:
    """``limno`` on pool ``imgs`` of one lake, with files written from bytes."""

    def __init__(self, lake: str, tmp: Path) -> None:
        self.lake, self.tmp, self.n = lake, tmp, 0
        ok("--lake", lake, "create", "imgs", "--kind", "files")

    def ok(self, *args: str) -> Result:
        return ok("--lake", self.lake, *args)

    def fail(self, *args: str) -> Result:
        return fail("--lake", self.lake, *args)

    def put(self, address: str, data: bytes) -> None:
        self.n += 1
        local = self.tmp / f"put-{self.n}"
        local.write_bytes(data)
        self.ok("fs", "upload", str(local), address)

    def commit(self, branch: str = "main", message: str = "") -> str:
        return self.ok("commit", "-p", f"imgs@{branch}", "-m", message).text.strip()

    def cat(self, address: str) -> bytes:
        return self.ok("fs", "cat", address).out

    def paths(self, address: str) -> list[str]:
        return [str(r["path"]) for r in self.ok("fs", "ls", "-r", address).rows()]


@pytest.fixture
def files(lake: str, tmp_path: Path) -> Files:
    return Files(lake, tmp_path)


def test_branch_merge_and_the_conflict_report(files: Files) -> None:
    files.put("imgs@main/shared.txt", b"base")
    files.commit()
    files.ok("branch", "-p", "imgs", "dev")
    files.put("imgs@dev/shared.txt", b"from dev")
    files.put("imgs@dev/only-dev.txt", b"new")
    files.commit("dev")
    assert files.cat("imgs/shared.txt") == b"base"  # branches are isolated
    assert files.paths("imgs@dev") == ["only-dev.txt", "shared.txt"]

    files.put("imgs@main/shared.txt", b"from main")
    files.commit()
    r = files.fail("merge", "-p", "imgs", "dev")
    assert "shared.txt" in r.err and "only-dev.txt" not in r.err
    assert files.cat("imgs/shared.txt") == b"from main"  # nothing merged
    r = files.ok("merge", "-p", "imgs", "dev", "--strategy", "source-wins", "-m", "take dev")
    assert len(r.text.split()) == 1 and "1 conflict(s) resolved source-wins" in r.err
    assert files.cat("imgs/shared.txt") == b"from dev"
    assert files.paths("imgs") == ["only-dev.txt", "shared.txt"]
    rows = files.ok("ls", "imgs").rows()
    assert {r["name"] for r in rows if r["kind"] == "branch"} == {"dev", "main"}


def test_diff_revert_cherry_pick_and_reset(files: Files) -> None:
    files.put("imgs@main/x", b"x1")
    files.put("imgs@main/y", b"y1")
    first = files.commit(message="first")
    files.put("imgs@main/x", b"x2")
    files.ok("fs", "rm", "imgs/y")
    files.put("imgs@main/z", b"z2")
    second = files.commit(message="second")

    r = files.ok("diff", "-p", "imgs", "main~1", "main")
    assert [(d["change"], d["path"]) for d in r.rows()] == [
        ("changed", "x"),
        ("removed", "y"),
        ("added", "z"),
    ]
    assert "1 added, 1 removed, 1 changed" in r.err
    assert files.ok("diff", "-p", "imgs", first, second).rows() == r.rows()

    revert = files.ok("revert", "-p", "imgs", second).text.strip()
    assert files.paths("imgs") == ["x", "y"]
    assert files.cat("imgs/x") == b"x1" and files.cat("imgs/y") == b"y1"
    assert [c["id"] for c in files.ok("log", "-p", "imgs", "-n", "1").rows()] == [revert]

    files.ok("branch", "-p", "imgs", "side", "--from", first)
    r = files.ok("cherry-pick", "-p", "imgs@side", second)
    assert len(r.text.split()) == 1
    assert files.paths("imgs@side") == ["x", "z"] and files.cat("imgs@side/x") == b"x2"

    r = files.ok("reset", "-p", "imgs@side", "--hard", first)
    assert r.text.strip() == files.ok("log", "-p", "imgs@side", "-n", "1").rows()[0]["id"]
    assert files.paths("imgs@side") == ["x", "y"]


def test_time_travel_by_ancestry_and_by_time(files: Files) -> None:
    files.put("imgs@main/f.txt", b"version 1")
    files.commit()
    first = files.ok("log", "-p", "imgs", "-n", "1").rows()[0]
    files.put("imgs@main/f.txt", b"version 2")
    files.put("imgs@main/g.txt", b"later")
    files.commit()
    assert files.cat("imgs@main~1/f.txt") == b"version 1"
    assert files.cat("imgs/f.txt") == b"version 2"
    assert files.paths("imgs@main~1") == ["f.txt"]
    then = dt.datetime.fromisoformat(str(first["date"])) + dt.timedelta(microseconds=1)
    at = then.isoformat()
    assert files.ok("fs", "cat", "--as-of", at, "imgs/f.txt").out == b"version 1"
    assert [r["path"] for r in files.ok("fs", "ls", "--as-of", at, "imgs").rows()] == ["f.txt"]
    (row,) = files.ok("fs", "stat", "--as-of", at, "imgs/f.txt").rows()
    assert row["size"] == len(b"version 1")
    out = files.tmp / "old.txt"
    files.ok("fs", "download", "--as-of", at, "imgs/f.txt", str(out))
    assert out.read_bytes() == b"version 1"
    r = files.ok("diff", "-p", "imgs", "--as-of", at, "main", "main~0")
    assert r.rows() == []  # main as it was, twice
    r = files.fail("fs", "upload", str(out), "imgs@main~1/new.txt")
    assert "error:" in r.err


def test_protected_branch_refuses_uploads_but_takes_merges(files: Files) -> None:
    files.put("imgs@main/a", b"a")
    files.commit()
    files.ok("branch", "-p", "imgs", "dev")
    files.ok("branch", "protect", "-p", "imgs", "main")
    r = files.fail("fs", "upload", str(files.tmp / "put-1"), "imgs@main/b")
    assert "protected" in r.err
    assert files.ok("fs", "uncommitted", "imgs").rows() == []
    files.put("imgs@dev/b", b"b")
    files.commit("dev")
    files.ok("merge", "-p", "imgs", "dev")
    assert files.paths("imgs") == ["a", "b"]


def _size(root: str) -> int:
    return sum(p.stat().st_size for p in Path(root).rglob("*") if p.is_file())


def test_import_registers_a_directory_without_copying_it(
    files: Files, lake_path: str, tmp_path: Path
) -> None:
    source = tmp_path / "external"
    blobs = {"a.bin": os.urandom(600_000), "sub/b.bin": os.urandom(500_000), "c.txt": b"c"}
    for rel, data in blobs.items():
        (source / rel).parent.mkdir(parents=True, exist_ok=True)
        (source / rel).write_bytes(data)
    before = _size(lake_path)
    r = files.ok("fs", "import", "-m", "external data", str(source), "imgs@main/ext")
    commit = r.text.strip()
    assert len(commit.split()) == 1 and "imported 3 file(s)" in r.err
    grown = _size(lake_path) - before
    assert grown < 200_000, f"the lake grew by {grown} bytes: the import copied bytes"
    assert files.paths("imgs") == ["ext/a.bin", "ext/c.txt", "ext/sub/b.bin"]
    assert files.cat("imgs/ext/sub/b.bin") == blobs["sub/b.bin"]
    (row,) = files.ok("fs", "stat", "imgs/ext/a.bin").rows()
    assert str(row["source"]).startswith("file://") and row["size"] == 600_000
    log = files.ok("log", "-p", "imgs", "-n", "1").rows()[0]
    assert log["id"] == commit and log["message"] == "external data"

    # removed and vacuumed: the bytes limno did not write stay where they are
    files.ok("fs", "rm", "-r", "imgs/ext")
    files.commit()
    files.ok("vacuum", "-p", "imgs", "--grace", "0s", "--retention", "0s")
    assert {str(p.relative_to(source)) for p in source.rglob("*") if p.is_file()} == set(blobs)
    assert (source / "a.bin").read_bytes() == blobs["a.bin"]


def test_a_pre_commit_hook_vetoes_a_file_commit(files: Files) -> None:
    files.ok("hook", "add", "-p", "imgs", "--event", "pre-commit", "--run", "false", "veto")
    assert [h["name"] for h in files.ok("hook", "ls", "-p", "imgs").rows()] == ["veto"]
    files.put("imgs@main/a", b"a")
    r = files.fail("commit", "-p", "imgs")
    assert "veto" in r.err
    assert [c["path"] for c in files.ok("fs", "uncommitted", "imgs").rows()] == ["a"]
    files.ok("hook", "rm", "-p", "imgs", "veto")
    files.commit()
    assert files.ok("fs", "uncommitted", "imgs").rows() == []


def _on_a_terminal(*args: str) -> tuple[str, str]:
    """``limno ARGS`` in a fresh process with stderr on a pseudo-terminal: (stdout, what
    it drew on stderr)."""
    master, slave = pty.openpty()
    env = {**os.environ, "TERM": "xterm", "COLUMNS": "120"}
    try:
        with subprocess.Popen(
            [sys.executable, "-m", "limno", *args],
            stdout=subprocess.PIPE,
            stderr=slave,
            stdin=subprocess.DEVNULL,
            env=env,
        ) as proc:
            os.close(slave)
            slave = -1
            err = bytearray()
            while True:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: the child closed the terminal
                    break
                if not chunk:
                    break
                err += chunk
            assert proc.stdout is not None
            out = proc.stdout.read().decode()
            assert proc.wait(timeout=120) == 0, err.decode(errors="replace")
    finally:
        os.close(master)
        if slave >= 0:
            os.close(slave)
    return out, err.decode(errors="replace")


def test_a_tree_upload_draws_a_bar_on_a_terminal(files: Files, tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    for i in range(20):
        (tree / f"d{i % 3}").mkdir(parents=True, exist_ok=True)
        (tree / f"d{i % 3}" / f"f{i}.bin").write_bytes(os.urandom(50_000))
    out, err = _on_a_terminal("--lake", files.lake, "fs", "upload", "-r", str(tree), "imgs")
    assert out == "" and "uploaded 20 file(s), 1000000 bytes" in err
    assert "uploading to imgs@main" in err and ("━" in err or "\x1b[?25l" in err)
    assert len(files.paths("imgs")) == 20

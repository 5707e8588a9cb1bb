"""``limno fs`` on a file pool, on a lake's path and through a real server (``mode``):
upload and download of a tree, listings with the '/' delimiter and pagination, stat,
rm, uncommitted changes, discard, commit (with --prefix), and the refusals of record
commands on a file pool.

(Git on file pools, time travel, import and authorization: test_fs_cli_git.py.)
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
from pathlib import Path

import pytest

import limno.cli._fs as fs_cli
from clirunner import Result
from git_scenarios import fail, ok
from limno import Lake

pytestmark = pytest.mark.usefixtures("isolated_home")

#: relative paths of the test tree: nested directories, unicode and spaces
TREE = {
    "top.txt": b"top\n",
    "empty.bin": b"",
    "a/x.txt": b"hello x\n",
    "a/b/deep.bin": bytes(range(256)) * 300,
    "a/b/ü nicode näme.txt": "grüße, 日本\n".encode(),
    "日本/データ.bin": os.urandom(70_000),
    "space dir/with space.dat": os.urandom(1000),
}


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def make_tree(root: Path, files: dict[str, bytes] = TREE) -> Path:
    for rel, data in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return root


def read_tree(root: Path) -> dict[str, str]:
    """Relative path -> sha256 of every file under ``root``."""
    return {
        str(p.relative_to(root)): sha(p.read_bytes())
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def rows(r: Result) -> list[dict[str, object]]:
    return r.rows()


def files_pool(lake: str, name: str = "imgs") -> None:
    r = ok("--lake", lake, "create", name, "--kind", "files")
    assert len(r.text.split()) == 1 and f"created pool {name} (files)" in r.err


def test_a_tree_goes_up_and_comes_back_byte_for_byte(lake: str, tmp_path: Path) -> None:
    files_pool(lake)
    src = make_tree(tmp_path / "src")
    r = ok("--lake", lake, "fs", "upload", "-r", str(src), "imgs@main/in/")
    assert r.text == "" and f"uploaded {len(TREE)} file(s)" in r.err
    listed = rows(ok("--lake", lake, "fs", "ls", "-r", "imgs/in/"))
    assert [x["path"] for x in listed] == sorted(f"in/{k}" for k in TREE)
    sizes = {str(x["path"]): x["size"] for x in listed}
    assert sizes == {f"in/{k}": len(v) for k, v in TREE.items()}
    md5 = {str(x["path"]): x["etag"] for x in listed}
    assert md5["in/a/x.txt"] == hashlib.md5(TREE["a/x.txt"]).hexdigest()

    # staged: read-after-write on the branch, then committed
    out = tmp_path / "out"
    ok("--lake", lake, "fs", "download", "-r", "imgs/in", str(out))
    assert read_tree(out) == {k: sha(v) for k, v in TREE.items()}
    commit = ok("--lake", lake, "commit", "-p", "imgs", "-m", "tree").text.strip()
    assert len(commit.split()) == 1
    ok("--lake", lake, "tag", "-p", "imgs", "v1")
    again = tmp_path / "again"
    ok("--lake", lake, "fs", "download", "-r", "imgs@v1/in/a/", str(again))
    assert read_tree(again) == {k[2:]: sha(v) for k, v in TREE.items() if k.startswith("a/")}

    # one file: to a name, into a directory, to stdout; cat
    name = "a/b/ü nicode näme.txt"
    one = tmp_path / "one.txt"
    ok("--lake", lake, "fs", "download", f"imgs@v1/in/{name}", str(one))
    assert one.read_bytes() == TREE[name]
    ok("--lake", lake, "fs", "download", "imgs/in/日本/データ.bin", str(tmp_path))
    assert (tmp_path / "データ.bin").read_bytes() == TREE["日本/データ.bin"]
    assert (
        ok("--lake", lake, "fs", "download", "imgs/in/a/b/deep.bin", "-").out
        == TREE["a/b/deep.bin"]
    )
    assert ok("--lake", lake, "fs", "cat", "imgs/in/日本/データ.bin").out == TREE["日本/データ.bin"]
    assert ok("--lake", lake, "fs", "cat", "imgs/in/empty.bin").out == b""

    # a single file to an exact path, and from stdin
    ok("--lake", lake, "fs", "upload", str(src / "top.txt"), "imgs@main/renamed.txt")
    ok("--lake", lake, "fs", "upload", "-", "imgs@main/from-stdin.bin", stdin=b"\x00\x01piped")
    assert ok("--lake", lake, "fs", "cat", "imgs/renamed.txt").out == b"top\n"
    assert ok("--lake", lake, "fs", "cat", "imgs/from-stdin.bin").out == b"\x00\x01piped"

    r = fail("--lake", lake, "fs", "cat", "imgs/in/missing.txt")
    assert "no file 'in/missing.txt'" in r.err
    r = fail("--lake", lake, "fs", "upload", str(src), "imgs@main/x/")
    assert "is a directory (upload it with -r)" in r.err
    assert not (tmp_path / "missing").exists()


def test_ls_rolls_up_at_slashes_and_pages_through_everything(
    lake: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fs_cli, "PAGE", 3)  # many pages, through a server too
    files_pool(lake)
    names = [f"d{i}/f{j}.txt" for i in range(3) for j in range(4)]
    names += [f"root{j}.txt" for j in range(5)]
    src = make_tree(tmp_path / "src", {n: n.encode() for n in names})
    ok("--lake", lake, "fs", "upload", "-r", str(src), "imgs")
    top = rows(ok("--lake", lake, "fs", "ls", "imgs"))
    assert [(x["type"], x["path"]) for x in top] == [
        ("prefix", "d0/"),
        ("prefix", "d1/"),
        ("prefix", "d2/"),
        *[("object", f"root{j}.txt") for j in range(5)],
    ]
    inside = rows(ok("--lake", lake, "fs", "ls", "imgs/d1/"))
    assert [x["path"] for x in inside] == [f"d1/f{j}.txt" for j in range(4)]
    everything = rows(ok("--lake", lake, "fs", "ls", "-r", "imgs"))
    assert [x["path"] for x in everything] == sorted(names)
    limited = rows(ok("--lake", lake, "fs", "ls", "-r", "--limit", "7", "imgs"))
    assert [x["path"] for x in limited] == sorted(names)[:7]
    table = ok("--lake", lake, "fs", "ls", "-f", "table", "imgs").text
    assert table.splitlines()[0].split() == list(fs_cli.LS_COLUMNS)
    as_json = json.loads(ok("--lake", lake, "fs", "ls", "-f", "json", "imgs/d2").text)
    assert as_json == [{"type": "prefix", "path": "d2/"}]


def test_stat_shows_size_etag_type_metadata_and_mtime(lake: str, tmp_path: Path) -> None:
    files_pool(lake)
    data = os.urandom(12_345)
    (tmp_path / "p.png").write_bytes(data)
    before = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=5)
    ok(
        "--lake",
        lake,
        "fs",
        "upload",
        "--content-type",
        "image/png",
        "--meta",
        "Camera=X100",
        "--meta",
        "place=Zürich",
        str(tmp_path / "p.png"),
        "imgs@main/pics/",
    )
    (row,) = rows(ok("--lake", lake, "fs", "stat", "imgs/pics/p.png"))
    assert row["path"] == "pics/p.png" and row["size"] == len(data)
    assert row["etag"] == hashlib.md5(data).hexdigest()
    assert row["content_type"] == "image/png"
    assert row["metadata"] == {"camera": "X100", "place": "Zürich"}
    assert row["s3"] == {}
    mtime = dt.datetime.fromisoformat(str(row["mtime"]).replace("Z", "+00:00"))
    assert before <= mtime <= dt.datetime.now(dt.UTC) + dt.timedelta(seconds=5)
    assert str(row["source"]).startswith("object ")
    r = fail("--lake", lake, "fs", "stat", "imgs/pics/nope.png")
    assert "no file 'pics/nope.png'" in r.err


def test_rm_uncommitted_and_discard(lake: str, tmp_path: Path) -> None:
    files_pool(lake)
    src = make_tree(tmp_path / "src", {"keep.txt": b"k", "d/1.txt": b"1", "d/2.txt": b"2"})
    ok("--lake", lake, "fs", "upload", "-r", str(src), "imgs")
    ok("--lake", lake, "commit", "-p", "imgs", "-m", "base")
    assert rows(ok("--lake", lake, "fs", "uncommitted", "imgs")) == []

    r = fail("--lake", lake, "fs", "rm", "imgs/keep.txt", "imgs/missing.txt")
    assert "missing.txt" in r.err
    assert rows(ok("--lake", lake, "fs", "uncommitted", "imgs")) == []  # nothing removed

    ok("--lake", lake, "fs", "rm", "-r", "imgs/d")
    ok("--lake", lake, "fs", "upload", str(src / "keep.txt"), "imgs@main/new.txt")
    changes = rows(ok("--lake", lake, "fs", "uncommitted", "imgs"))
    assert [(c["change"], c["path"]) for c in changes] == [
        ("removed", "d/1.txt"),
        ("removed", "d/2.txt"),
        ("added", "new.txt"),
    ]
    assert [x["path"] for x in rows(ok("--lake", lake, "fs", "ls", "-r", "imgs"))] == [
        "keep.txt",
        "new.txt",
    ]
    under = rows(ok("--lake", lake, "fs", "uncommitted", "imgs/d/"))
    assert [c["path"] for c in under] == ["d/1.txt", "d/2.txt"]

    r = ok("--lake", lake, "fs", "discard", "imgs", "--prefix", "d/")
    assert "discarded 2 staged change(s)" in r.err
    assert [x["path"] for x in rows(ok("--lake", lake, "fs", "ls", "-r", "imgs"))] == [
        "d/1.txt",
        "d/2.txt",
        "keep.txt",
        "new.txt",
    ]
    assert "discarded 1 staged change(s)" in ok("--lake", lake, "fs", "discard", "imgs").err
    assert rows(ok("--lake", lake, "fs", "uncommitted", "imgs")) == []
    r = fail("--lake", lake, "commit", "-p", "imgs")
    assert "nothing staged" in r.err
    assert "no files under" in fail("--lake", lake, "fs", "rm", "-r", "imgs/nothing-here").err


def test_commit_with_a_prefix_seals_only_that_part(lake: str, tmp_path: Path) -> None:
    files_pool(lake)
    src = make_tree(tmp_path / "src", {"a/1": b"1", "a/2": b"2", "b/1": b"3"})
    ok("--lake", lake, "fs", "upload", "-r", str(src), "imgs")
    r = ok("--lake", lake, "commit", "-p", "imgs@main", "--prefix", "a/", "-m", "only a")
    commit = r.text.strip()
    assert "committed 2 path(s) (2 written, 0 removed) to imgs@main" in r.err
    (log,) = [c for c in rows(ok("--lake", lake, "log", "-p", "imgs")) if c["id"] == commit]
    assert log["message"] == "only a"
    actions = log["actions"]
    assert isinstance(actions, list)
    assert [a["id"] for a in actions] == ["a/1", "a/2"]
    left = rows(ok("--lake", lake, "fs", "uncommitted", "imgs"))
    assert [c["path"] for c in left] == ["b/1"]
    assert [x["path"] for x in rows(ok("--lake", lake, "fs", "ls", "-r", "imgs@main~0"))] == [
        "a/1",
        "a/2",
        "b/1",
    ]
    committed = ok("--lake", lake, "fs", "ls", "-r", f"imgs@{commit}")
    assert [x["path"] for x in rows(committed)] == ["a/1", "a/2"]
    assert "give no IDs" in fail("--lake", lake, "commit", "-p", "imgs", "some-id").err


def test_record_commands_on_a_file_pool_say_so_in_one_line(lake: str, tmp_path: Path) -> None:
    files_pool(lake)
    ok("--lake", lake, "create", "logs", "-k", "ts")
    pools = {p["name"]: p for p in rows(ok("--lake", lake, "ls"))}
    assert pools["imgs"]["kind"] == "files" and pools["logs"]["kind"] == "records"
    data = tmp_path / "x.ndjson"
    data.write_text('{"ts": 1}\n')
    for args in (
        ("load", "-p", "imgs", str(data)),
        ("scan", "-p", "imgs"),
        ("get", "-p", "imgs", "1"),
        ("compact", "-p", "imgs"),
        ("stage", "-p", "imgs"),
        ("delete", "-p", "imgs", "some-id"),
    ):
        r = fail("--lake", lake, *args)
        assert "pool 'imgs' is a file pool" in r.err, args
    r = fail("--lake", lake, "fs", "ls", "logs")
    assert "pool 'logs' is a record pool" in r.err
    r = fail("--lake", lake, "create", "imgs2", "--kind", "files", "-k", "ts")
    assert "-k/--key is for record pools" in r.err
    assert (
        "--iterator"
        in fail("--lake", lake, "create", "i3", "--kind", "files", "--iterator", "dedup").err
    )
    assert {p["name"] for p in rows(ok("--lake", lake, "ls"))} == {"imgs", "logs"}
    assert (
        "--prefix is for file pools"
        in fail("--lake", lake, "commit", "-p", "logs", "--prefix", "a").err
    )


def test_stat_shows_what_the_gateway_keeps_apart_from_user_metadata(lake: str) -> None:
    ok("--lake", lake, "create", "imgs", "--kind", "files")
    pool = Lake.open(lake).file_pool("imgs")
    kept = {":x-amz-checksum-crc32": "AAAAAA==", ":cache-control": "no-cache", "by": "ann"}
    pool.put("main", "a.txt", b"abc", metadata=kept)  # what a PutObject through S3 keeps
    (row,) = rows(ok("--lake", lake, "fs", "stat", "imgs@main/a.txt"))
    assert row["metadata"] == {"by": "ann"}
    assert row["s3"] == {"x-amz-checksum-crc32": "AAAAAA==", "cache-control": "no-cache"}

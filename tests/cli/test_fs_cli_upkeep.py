"""Upkeep of file pools through the CLI, on a lake's path and through a server (``mode``):
``limno vacuum`` without ``-p`` vacuums every pool of either kind, and frees a multipart
upload abandoned for longer than the grace period (a dry run names it first)."""

from __future__ import annotations

from pathlib import Path

import pytest

from git_scenarios import Lk, init_lake, ok
from limno.errors import MultipartError
from limno.lake import Lake
from limno.pools.files.multipart import Multipart

pytestmark = pytest.mark.usefixtures("isolated_home")


def pool_id(lk: Lk, name: str) -> str:
    return next(str(p["id"]) for p in lk.ok("ls").rows() if p["name"] == name)


def test_vacuum_without_a_pool_takes_every_kind_and_abandoned_uploads(lk: Lk) -> None:
    lk.ok("create", "logs", "-k", "k")
    lk.ok("load", "-p", "logs", lk.file([{"k": 1}]))
    lk.ok("delete", "-p", "logs", "--where", "k = 1")
    lk.ok("create", "imgs", "--kind", "files")
    local = Path(lk.tmp) / "a.txt"
    local.write_bytes(b"staged, then discarded")
    lk.ok("fs", "upload", str(local), "imgs/a.txt")
    lk.ok("fs", "discard", "imgs")
    # an upload started next to the lake and abandoned (no CLI command starts one)
    m = Multipart(Lake.open(lk.path).file_pool("imgs"))
    uid = m.create("main", "big.bin")
    m.upload_part(uid, 1, b"part one")
    imgs = pool_id(lk, "imgs")
    upload = f"{imgs}/multipart/{uid}/"

    young = lk.ok("vacuum")
    assert young.text == ""
    assert "imgs: removed 0 object(s)" in young.err and "logs: removed 0" in young.err

    dry = lk.ok("vacuum", "--grace", "0", "--retention", "0", "--dry-run")
    lines = dry.text.splitlines()
    assert upload in {line.split("\t")[0] for line in lines}
    assert sum(line.startswith(f"{imgs}/data/") for line in lines) == 1  # the discarded blob
    assert "imgs: would remove 2 object(s)" in dry.err
    assert "logs: would remove 1 object(s)" in dry.err  # the deleted records' old object
    assert m.upload(uid).path == "big.bin"

    done = lk.ok("vacuum", "--grace", "0", "--retention", "0")
    assert done.text == dry.text
    assert "imgs: removed 2 object(s)" in done.err
    with pytest.raises(MultipartError):
        m.upload(uid)
    assert lk.ok("vacuum", "--grace", "0").text == ""


def test_vacuum_of_one_file_pool_reports_its_abandoned_upload(lk: Lk) -> None:
    lk.ok("create", "imgs", "--kind", "files")
    m = Multipart(Lake.open(lk.path).file_pool("imgs"))
    uid = m.create("main", "big.bin")
    m.upload_part(uid, 1, b"12345")
    dry = lk.ok("-f", "ndjson", "vacuum", "-p", "imgs", "--grace", "0", "--dry-run")
    (row,) = dry.rows()
    assert row["path"] == f"{pool_id(lk, 'imgs')}/multipart/{uid}/"
    assert isinstance(row["bytes"], int) and row["bytes"] > 5
    assert dry.err.startswith("would remove 1 object(s)")
    assert lk.ok("-f", "ndjson", "vacuum", "-p", "imgs", "--grace", "0").rows() == [row]
    assert lk.ok("-f", "ndjson", "vacuum", "-p", "imgs", "--grace", "0").rows() == []


def test_meta_tables_of_a_file_pool(lk: Lk) -> None:
    lk.ok("create", "imgs", "--kind", "files")
    local = Path(lk.tmp) / "cat.jpg"
    local.write_bytes(b"meow")
    lk.ok("fs", "upload", "--meta", "by=ann", str(local), "imgs/pets/cat.jpg")
    commit = lk.ok("commit", "-p", "imgs", "-m", "a cat").text.strip()
    lk.ok("branch", "-p", "imgs", "dev")
    local.write_bytes(b"staged")
    lk.ok("fs", "upload", str(local), "imgs@dev/z.txt")

    def query(sql: str) -> list[dict[str, object]]:
        return lk.ok("query", "-f", "ndjson", sql).rows()

    pools = query("""SELECT name, kind FROM ":pools" ORDER BY name""")
    assert pools == [{"name": "imgs", "kind": "files"}]
    (cat,) = query("""SELECT * FROM "imgs:files" """)
    stat = lk.ok("-f", "ndjson", "fs", "stat", "imgs/pets/cat.jpg").rows()[0]
    assert cat["path"] == "pets/cat.jpg" and cat["size"] == 4 and cat["etag"] == stat["etag"]
    assert cat["content_type"] == "image/jpeg" and cat["mtime"] == stat["mtime"]
    assert cat["metadata"] == '{"by": "ann"}' and cat["uri"] is None
    assert f"object {cat['object']}" == stat["source"]
    # a branch's table holds its staged changes; a commit's what it holds
    dev = query("""SELECT path, size FROM "imgs@dev:files" ORDER BY path""")
    assert dev == [{"path": "pets/cat.jpg", "size": 4}, {"path": "z.txt", "size": 6}]
    assert query(f"""SELECT path FROM "imgs@{commit}:files" """) == [{"path": "pets/cat.jpg"}]
    (made,) = query("""SELECT id, message FROM "imgs:commits" WHERE message = 'a cat'""")
    assert made == {"id": commit, "message": "a cat"}
    branches = query("""SELECT kind, name, commit FROM "imgs:branches" ORDER BY name""")
    assert branches == [
        {"kind": "branch", "name": "dev", "commit": commit},
        {"kind": "branch", "name": "main", "commit": commit},
    ]
    refused = lk.fail("query", """SELECT * FROM "imgs:objects" """)
    assert "one of files, commits, branches" in refused.err


def test_manage_vacuums_file_pools_and_their_abandoned_uploads(tmp_path: Path) -> None:
    """``limno manage`` runs next to the lake only (no server mode)."""
    lake = init_lake(str(tmp_path / "lake"))
    ok("--lake", lake, "create", "imgs", "--kind", "files")
    m = Multipart(Lake.open(lake).file_pool("imgs"))
    uid = m.create("main", "big.bin")
    m.upload_part(uid, 1, b"part")
    kept = ok("--lake", lake, "manage", "--once")
    assert "imgs: vacuum: removed 0" in kept.err and m.upload(uid).path == "big.bin"
    done = ok("--lake", lake, "manage", "--once", "--grace", "0")
    assert "imgs: vacuum: removed 1" in done.err
    with pytest.raises(MultipartError):
        m.upload(uid)

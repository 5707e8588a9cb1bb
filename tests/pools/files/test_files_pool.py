"""The file pool engine, method by method: writes to staging, commits, reads of any ref,
listings, diffs of uncommitted changes."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from limno.errors import (
    InvalidInputError,
    NotFoundError,
    PreconditionFailedError,
    ProtectedBranchError,
)
from limno.pools.files.entries import FileEntry
from limno.pools.files.pool import FilePool


def _read(pool: FilePool, path: str, ref: str | None = None) -> bytes:
    return b"".join(pool.read(path, ref))


def _paths(pool: FilePool, ref: str | None = None, prefix: str = "") -> list[str]:
    return [e.path for e in pool.iter_list(ref, prefix)]


# -- writing -------------------------------------------------------------------------


def test_put_stages_and_reads_back_on_its_branch_only(pool: FilePool) -> None:
    entry = pool.put("main", "a/b.txt", b"hello", content_type="text/plain")
    assert entry.size == 5 and entry.etag == "5d41402abc4b2a76b9719d911017c592"
    assert entry.object and entry.uri is None and entry.mtime.endswith("Z")
    assert _read(pool, "a/b.txt") == b"hello"
    assert pool.stat("a/b.txt").content_type == "text/plain"
    pool.branch("dev")  # from main's head, which has no commit of the file
    with pytest.raises(NotFoundError):
        pool.stat("a/b.txt", "dev")
    head = pool.resolve("main")
    with pytest.raises(NotFoundError):
        pool.stat("a/b.txt", head)  # a commit id reads committed state only


def test_put_takes_bytes_files_and_chunks_and_user_metadata(pool: FilePool) -> None:
    pool.put("main", "f", io.BytesIO(b"x" * 3000))
    pool.put("main", "c", iter([b"ab", b"", b"cd"]), metadata={"Owner": "Ann"})
    assert _read(pool, "f") == b"x" * 3000
    assert _read(pool, "c") == b"abcd"
    assert pool.stat("c").metadata == {"owner": "Ann"}
    with pytest.raises(InvalidInputError, match="too large"):
        pool.put("main", "big", b"123456", max_size=5)
    with pytest.raises(NotFoundError):
        pool.stat("big")


def test_put_file_uploads_a_local_file(pool: FilePool, tmp_path: Path) -> None:
    src = tmp_path / "local.bin"
    src.write_bytes(b"\x00\x01" * 100)
    entry = pool.put_file("main", "bin/local.bin", str(src), metadata={"k": "v"})
    assert entry.size == 200 and entry.metadata == {"k": "v"}
    assert _read(pool, "bin/local.bin") == src.read_bytes()


def test_conditional_puts(pool: FilePool) -> None:
    first = pool.put("main", "p", b"1", if_none_match=True)
    with pytest.raises(PreconditionFailedError):
        pool.put("main", "p", b"2", if_none_match=True)
    with pytest.raises(PreconditionFailedError):
        pool.put("main", "p", b"2", if_match="0" * 32)
    with pytest.raises(PreconditionFailedError):
        pool.put("main", "missing", b"2", if_match=first.etag)
    pool.put("main", "p", b"3", if_match=f'"{first.etag}"')
    assert _read(pool, "p") == b"3"
    blobs = list(pool.storage.walk(f"{pool.id}/data"))
    assert len(blobs) == 2  # the refused writes left no blob behind


def test_writes_to_a_protected_branch_are_refused(pool: FilePool) -> None:
    pool.put("main", "x", b"1")
    pool.commit("main")
    pool.protect("main")
    for write in (
        lambda: pool.put("main", "y", b"1"),
        lambda: pool.remove("main", ["x"]),
        lambda: pool.copy("main", "x", "main", "z"),
    ):
        with pytest.raises(ProtectedBranchError):
            write()
    assert list(pool.storage.walk(f"{pool.id}/staging")) == []


def test_copy_names_the_same_bytes_across_branches(pool: FilePool) -> None:
    src = pool.put("main", "src", b"payload", metadata={"a": "1"})
    pool.branch("dev")
    copied = pool.copy("main", "src", "dev", "dst/copy")  # staged source on main
    assert copied.object == src.object and copied.metadata == {"a": "1"}
    pool.commit("main")
    again = pool.copy("main", "src", "main", "other", metadata={"b": "2"}, content_type="x/y")
    assert again.metadata == {"b": "2"} and again.content_type == "x/y"
    assert _read(pool, "dst/copy", "dev") == b"payload"
    assert len(list(pool.storage.walk(f"{pool.id}/data"))) == 1
    with pytest.raises(NotFoundError):
        pool.copy("main", "nope", "main", "x")


def test_stage_entry_stages_an_existing_blob(pool: FilePool) -> None:
    e = pool.put("main", "a", b"abc")
    staged = pool.stage_entry(
        "main", FileEntry("b", 3, e.etag, e.content_type, e.mtime, object=e.object)
    )
    assert pool.stat("b") == staged
    with pytest.raises(InvalidInputError):
        pool.stage_entry("main", FileEntry("", 1, "e", "t", "m", object="x"))


def test_remove_unstages_new_paths_and_tombstones_committed_ones(pool: FilePool) -> None:
    pool.put("main", "keep", b"1")
    pool.put("main", "gone", b"2")
    pool.commit("main")
    pool.put("main", "fresh", b"3")
    assert pool.remove("main", ["fresh", "gone", "never", "gone"]) == ["fresh", "gone"]
    assert _paths(pool, "main") == ["keep"]
    assert _paths(pool, pool.resolve("main")) == ["gone", "keep"]
    assert [(c.path, c.change) for c in pool.uncommitted()] == [("gone", "removed")]
    assert pool.remove("main", ["gone"]) == []  # already removed
    commit = pool.commit("main", "rm")
    assert [(a.op, a.key) for a in commit.actions] == [("delete", "gone")]
    assert _paths(pool) == ["keep"] and pool.uncommitted() == []


def test_remove_prefix_is_recursive(pool: FilePool) -> None:
    for p in ("d/a", "d/sub/b", "d/sub/c", "dx", "e"):
        pool.put("main", p, p.encode())
    pool.commit("main")
    pool.put("main", "d/new", b"n")
    assert sorted(pool.remove_prefix("main", "d/")) == ["d/a", "d/new", "d/sub/b", "d/sub/c"]
    assert _paths(pool) == ["dx", "e"]


def test_put_over_a_tombstone_brings_the_path_back(pool: FilePool) -> None:
    pool.put("main", "p", b"old")
    pool.commit("main")
    pool.remove("main", ["p"])
    pool.put("main", "p", b"new")
    assert _read(pool, "p") == b"new"
    commit = pool.commit("main")
    assert [a.op for a in commit.actions] == ["add"]
    assert _read(pool, "p", commit.id) == b"new"


# -- committing ----------------------------------------------------------------------


def test_commit_seals_everything_or_a_prefix(pool: FilePool) -> None:
    for p in ("a/1", "a/2", "b/1"):
        pool.put("main", p, p.encode())
    c1 = pool.commit("main", "only a", author="ann", meta={"k": 1}, prefix="a/")
    assert sorted(a.key for a in c1.actions) == ["a/1", "a/2"]
    assert (c1.message, c1.author, c1.meta["k"]) == ("only a", "ann", 1)
    assert [c.path for c in pool.uncommitted()] == ["b/1"]
    assert _paths(pool, c1.id) == ["a/1", "a/2"]
    c2 = pool.commit("main")
    assert [a.key for a in c2.actions] == ["b/1"]
    with pytest.raises(InvalidInputError, match="nothing staged"):
        pool.commit("main")
    with pytest.raises(InvalidInputError, match="nothing staged"):
        pool.commit("main", prefix="zzz")
    assert list(pool.storage.walk(f"{pool.id}/staging")) == []


def test_a_path_staged_again_while_committing_stays_staged(pool: FilePool) -> None:
    """Unstaging after a commit removes only what that commit sealed."""
    pool.put("main", "p", b"1")
    docs = pool.versioned.staged_docs("main")
    pool.put("main", "p", b"2")  # as if written between the commit's read and its unstage
    pool.versioned.unstage("main", docs, expect={k: d[0] for k, d in docs.items()})
    assert _read(pool, "p") == b"2"


def test_uncommitted_and_discard(pool: FilePool) -> None:
    pool.put("main", "a/x", b"1")
    pool.put("main", "b/y", b"2")
    pool.commit("main")
    pool.put("main", "a/x", b"changed")
    pool.put("main", "a/new", b"n")
    pool.put("main", "b/y", b"2")  # same bytes, but a new blob and mtime: changed
    pool.remove("main", ["b/y"])
    changes = {c.path: c.change for c in pool.uncommitted()}
    assert changes == {"a/new": "added", "a/x": "changed", "b/y": "removed"}
    assert {c.path for c in pool.uncommitted("main", "a/")} == {"a/new", "a/x"}
    assert pool.discard("main", "a/") == 2
    assert _read(pool, "a/x") == b"1"
    assert pool.discard("main") == 1
    assert pool.uncommitted() == [] and _read(pool, "b/y") == b"2"
    with pytest.raises(NotFoundError):
        pool.discard("nobranch")


# -- reading ---------------------------------------------------------------------------


def test_read_ranges(pool: FilePool) -> None:
    data = bytes(range(256)) * 10
    pool.put("main", "r", data)
    assert b"".join(pool.read("r", start=10, end=20)) == data[10:20]
    assert b"".join(pool.read("r", start=2500)) == data[2500:]
    assert b"".join(pool.read("r", start=5000)) == b""
    with pytest.raises(NotFoundError):
        pool.read("missing")  # raised by the call, before any byte is read


def test_reads_of_tags_history_and_as_of(pool: FilePool) -> None:
    import datetime as dt

    pool.put("main", "v", b"1")
    pool.commit("main")
    between = dt.datetime.now(dt.UTC)
    pool.tag("v1")
    pool.put("main", "v", b"2")
    pool.commit("main")
    pool.put("main", "v", b"3")  # staged only
    assert _read(pool, "v") == b"3"
    assert _read(pool, "v", "v1") == b"1"
    assert _read(pool, "v", "main~1") == b"1"
    assert _read(pool, "v", pool.resolve("main")) == b"2"  # a commit: committed only
    assert b"".join(pool.read("v", "main", as_of=between)) == b"1"
    assert pool.stat("v", "main", as_of=between).size == 1
    assert [e.path for e in pool.list("main", as_of=between).entries] == ["v"]


def test_stat_of_invalid_paths(pool: FilePool) -> None:
    with pytest.raises(InvalidInputError):
        pool.stat("")
    with pytest.raises(InvalidInputError):
        pool.put("main", "a\x00b", b"")
    with pytest.raises(InvalidInputError):
        pool.put("main", "x" * 1025, b"")


def test_list_pages_with_prefix_delimiter_and_markers(pool: FilePool) -> None:
    paths = ["a", "b/1", "b/2", "b/c/3", "c/4", "ca", "d"]
    for p in paths:
        pool.put("main", p, p.encode())
    pool.commit("main", prefix="b/")  # part committed, part staged: one merged view
    flat = pool.list("main")
    assert [e.path for e in flat.entries] == paths and not flat.truncated
    top = pool.list("main", delimiter="/")
    assert [e.path for e in top.entries] == ["a", "ca", "d"]
    assert top.prefixes == ["b/", "c/"]
    under = pool.list("main", prefix="b/", delimiter="/")
    assert [e.path for e in under.entries] == ["b/1", "b/2"] and under.prefixes == ["b/c/"]
    seen: list[str] = []
    after = ""
    while True:  # pages of two: entries and prefixes count together
        page = pool.list("main", delimiter="/", start_after=after, limit=2)
        seen += [e.path for e in page.entries] + page.prefixes
        assert len(page.entries) + len(page.prefixes) <= 2
        if not page.truncated:
            assert page.next_after is None
            break
        assert page.next_after is not None
        after = page.next_after
    assert sorted(seen) == ["a", "b/", "c/", "ca", "d"]
    assert [e.path for e in pool.list("main", start_after="b/2").entries] == [
        "b/c/3",
        "c/4",
        "ca",
        "d",
    ]
    assert pool.list("main", limit=0).entries == []
    assert pool.list("main", prefix="zz").entries == []
    with pytest.raises(InvalidInputError):
        pool.list("main", limit=-1)


def test_list_hides_tombstones_and_shows_staged_overrides(pool: FilePool) -> None:
    for p in ("x/1", "x/2", "y"):
        pool.put("main", p, b"c")
    pool.commit("main")
    pool.remove("main", ["x/1", "x/2"])
    pool.put("main", "y", b"staged")
    top = pool.list("main", delimiter="/")
    assert top.prefixes == [] and [e.size for e in top.entries] == [6]
    assert pool.list(pool.resolve("main"), delimiter="/").prefixes == ["x/"]


def test_diff_paths_between_refs(pool: FilePool) -> None:
    pool.put("main", "same", b"s")
    pool.put("main", "chg", b"1")
    pool.put("main", "del", b"d")
    old = pool.commit("main").id
    pool.put("main", "chg", b"2")
    pool.put("main", "new/x", b"n")
    pool.remove("main", ["del"])
    new = pool.commit("main").id
    changes = pool.diff_paths(old, new)
    assert [(c.path, c.change) for c in changes] == [
        ("chg", "changed"),
        ("del", "removed"),
        ("new/x", "added"),
    ]
    chg = changes[0]
    assert chg.old is not None and chg.new is not None and chg.old.object != chg.new.object
    assert [c.path for c in pool.diff_paths(old, new, prefix="new/")] == ["new/x"]
    assert pool.diff_paths(new, new) == []

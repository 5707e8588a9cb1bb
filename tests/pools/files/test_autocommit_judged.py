"""A conditional write committed at once (the gateway's ``--s3-autocommit``) is refused
when another write of its path was committed after its condition was judged: writer A
stages, commits and unstages between writer B's judgement and B's stage, so B's
create-only stage finds nothing staged and succeeds; B's commit (``writes=``) must then
fail with PreconditionFailedError, leaving A's committed bytes, instead of overwriting them.

The interleaving is made exact by a store observer: when B is about to create its staging
entry, A's whole write and commit run first.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from limno.core.staging import TOMBSTONE
from limno.errors import PreconditionFailedError
from limno.lake import Lake
from limno.pools.files.pool import FilePool
from limno.storage import open_storage
from limno.storage._faults import FaultyStorage

ORIGINAL, A_BYTES, B_BYTES = b"original", b"writer A", b"writer B"


def interleaved_pool(root: Path, committed: bool) -> tuple[FilePool, FaultyStorage]:
    """A file pool on an observed store, with ``p`` committed (or absent)."""
    Lake.init(str(root)).create_pool("files", kind="files")
    store = FaultyStorage(open_storage(str(root)))
    pool = Lake(store).file_pool("files")
    if committed:
        pool.put("main", "p", ORIGINAL)
        pool.commit("main", "the original")
    return pool, store


def before_stage(store: FaultyStorage, cut_in: Callable[[], None]) -> list[bool]:
    """Run ``cut_in`` once, just before the next staging entry is created; whether it ran."""
    ran: list[bool] = []

    def observe(op: str, path: str) -> None:
        if not ran and op == "put_if_absent" and "/staging/" in path:
            ran.append(True)
            cut_in()

    store.observer = observe
    return ran


def committed_bytes(pool: FilePool) -> bytes:
    assert not pool.uncommitted("main"), pool.uncommitted("main")
    return b"".join(pool.read("p", "main"))


@pytest.mark.parametrize("condition", ["if-match", "if-none-match"])
def test_a_write_judged_before_another_commit_is_refused(tmp_path: Path, condition: str) -> None:
    pool, store = interleaved_pool(tmp_path / "lake", committed=condition == "if-match")
    etag = pool.stat("p", "main").etag if condition == "if-match" else None

    def put(data: bytes) -> None:
        pool.put("main", "p", data, if_match=etag, if_none_match=etag is None)

    def writer_a() -> None:
        put(A_BYTES)
        pool.commit("main", "A", writes=["p"])

    ran = before_stage(store, writer_a)
    put(B_BYTES)  # its stage found nothing staged: A had committed and unstaged
    assert ran
    with pytest.raises(PreconditionFailedError, match="committed by another write"):
        pool.commit("main", "B", writes=["p"])
    pool.take_back("main", {"p": pool.stat("p", "main").to_value()})
    assert committed_bytes(pool) == A_BYTES


def test_a_copy_judged_before_another_commit_is_refused(tmp_path: Path) -> None:
    pool, store = interleaved_pool(tmp_path / "lake", committed=True)
    etag = pool.stat("p", "main").etag
    pool.put("main", "source", B_BYTES)
    pool.commit("main", "the source")

    def writer_a() -> None:
        pool.put("main", "p", A_BYTES, if_match=etag)
        pool.commit("main", "A", writes=["p"])

    ran = before_stage(store, writer_a)
    pool.copy("main", "source", "main", "p", if_match=etag)
    assert ran
    with pytest.raises(PreconditionFailedError):
        pool.commit("main", "B", writes=["p"])
    pool.take_back("main", {"p": pool.stat("p", "main").to_value()})
    assert committed_bytes(pool) == A_BYTES


def test_a_write_judged_against_a_landed_staged_write_commits(tmp_path: Path) -> None:
    """B judged against A's staged entry after A's commit landed but before A's unstage:
    B's condition held over A's version, which is the committed one, so B commits."""
    pool, store = interleaved_pool(tmp_path / "lake", committed=True)
    etag = pool.stat("p", "main").etag
    a_etag = pool.put("main", "p", A_BYTES, if_match=etag).etag
    head_before = pool.versioned.head("main")
    docs = pool.versioned.staged_docs("main")
    # A lands, its unstaging not yet run
    pool.versioned.commit("main", pool.versioned.staged_actions("main", docs))
    assert pool.versioned.head("main") != head_before
    pool.put("main", "p", B_BYTES, if_match=a_etag)  # over A's still-staged entry
    pool.commit("main", "B", writes=["p"])
    assert committed_bytes(pool) == B_BYTES


def test_a_manual_commit_is_judged_too(tmp_path: Path) -> None:
    """A plain commit (``limno commit``) of a branch whose staging holds a conditional
    write judged before another write was committed refuses as the autocommit does,
    naming the path, and commits nothing (the other paths staged with it stay staged);
    written again, the path commits."""
    pool, store = interleaved_pool(tmp_path / "lake", committed=True)
    etag = pool.stat("p", "main").etag

    def writer_a() -> None:
        pool.put("main", "p", A_BYTES, if_match=etag)
        pool.commit("main", "A")

    before_stage(store, writer_a)
    pool.put("main", "p", B_BYTES, if_match=etag)
    pool.put("main", "other", b"unconditional")
    head = pool.resolve("main")
    with pytest.raises(PreconditionFailedError, match=r"'p' committed by another write"):
        pool.commit("main", "B")
    assert pool.resolve("main") == head
    assert sorted(c.path for c in pool.uncommitted("main")) == ["other", "p"]
    pool.put("main", "p", B_BYTES)  # unconditional: holds over nothing
    pool.commit("main", "B again")
    assert committed_bytes(pool) == B_BYTES


def test_a_conditional_delete_judged_before_another_commit_is_refused(tmp_path: Path) -> None:
    """DeleteObject with If-Match under autocommit: writer A replaces the file between the
    delete's judgement and its stage; the delete's commit is refused and A's file stays
    (an unconditional tombstone's commit would delete A's version, never judged)."""
    pool, store = interleaved_pool(tmp_path / "lake", committed=True)
    etag = pool.stat("p", "main").etag

    def writer_a() -> None:
        pool.put("main", "p", A_BYTES, if_match=etag)
        pool.commit("main", "A", writes=["p"])

    ran = before_stage(store, writer_a)
    pool.remove_if("main", "p", etag)
    assert ran
    with pytest.raises(PreconditionFailedError, match="committed by another write"):
        pool.commit("main", "delete", writes=["p"])
    pool.take_back("main", {"p": TOMBSTONE})
    assert committed_bytes(pool) == A_BYTES


@pytest.mark.parametrize("staged", [False, True])
def test_a_conditional_delete_deletes_what_it_judged(tmp_path: Path, staged: bool) -> None:
    """Unraced, a conditional delete of a committed file (or of a staged write over it)
    commits; a wrong ETag or an absent path is refused, staging nothing."""
    pool, _ = interleaved_pool(tmp_path / "lake", committed=True)
    etag = pool.stat("p", "main").etag
    if staged:
        etag = pool.put("main", "p", A_BYTES, if_match=etag).etag
    with pytest.raises(PreconditionFailedError):
        pool.remove_if("main", "p", "0" * 32)
    with pytest.raises(PreconditionFailedError):
        pool.remove_if("main", "absent", "*")
    assert len(pool.uncommitted("main")) == int(staged)
    pool.remove_if("main", "p", etag)
    pool.commit("main", "delete", writes=["p"])
    assert [e.path for e in pool.iter_list("main")] == []
    assert not pool.versioned.staged("main")


def test_a_chain_of_staged_conditional_writes_commits(tmp_path: Path) -> None:
    """Each write judged against the one staged before it (none landed): the last one's
    check holds over the committed value the chain began on, however long the chain."""
    pool, _ = interleaved_pool(tmp_path / "lake", committed=True)
    etag = pool.stat("p", "main").etag
    for n in range(20):
        etag = pool.put("main", "p", b"version %d" % n, if_match=etag).etag
    pool.commit("main", "the last", writes=["p"])
    assert committed_bytes(pool) == b"version 19"

"""``limno status`` of a file pool: its branches' files and staged changes, and the
multipart uploads in progress.

A record pool's status speaks of partitions and compaction; a file pool has neither,
so its reports are what a person checking on one asks: how many paths each branch
holds (from the snapshot's metarange: one read per branch, not a listing), how many
changes are staged and not committed (a listing of the branch's staging area), and
which multipart uploads are open (S3 clients' uploads that were neither completed
nor aborted: vacuum frees them once idle past its grace period).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from limno.lazy import lazy_module

if TYPE_CHECKING:
    import pyarrow as pa

    from limno.pools.files.pool import FilePool
else:
    pa = lazy_module("pyarrow")

__all__ = ["file_status"]


def file_status(
    pool: FilePool, ref: str | None = None, limit: int = 20, rows: int | None = None
) -> dict[str, pa.Table]:
    """Reports ``branches`` (branch, head, files, staged, uploads; only ``ref``'s when it
    names a branch) and ``uploads`` (the first ``limit`` open multipart uploads, by path;
    ``rows`` cuts it further, its count in the schema's metadata as for record pools)."""
    from limno.pools.files.multipart import Multipart
    from limno.pools.inspect import cut_report

    heads = pool.branches()
    if ref is not None:
        heads = {ref: pool.versioned.head(ref)}  # NotFoundError: no such branch
    open_uploads, _ = Multipart(pool).uploads(limit=1_000_000)
    versioned = pool.versioned
    names = sorted(heads)
    files = [versioned.snapshots.count(versioned.commits.get(heads[b]).snapshot) for b in names]
    branches = pa.table(
        {
            "branch": pa.array(names, pa.string()),
            "head": pa.array([heads[b] for b in names], pa.string()),
            "files": pa.array(files, pa.int64()),
            "staged": pa.array([versioned.staged_count(b) for b in names], pa.int64()),
            "uploads": pa.array(
                [sum(1 for u in open_uploads if u.branch == b) for b in names], pa.int64()
            ),
        }
    )
    shown = [u for u in open_uploads if u.branch in heads]
    uploads = pa.table(
        {
            "upload": pa.array([u.id for u in shown[:limit]], pa.string()),
            "branch": pa.array([u.branch for u in shown[:limit]], pa.string()),
            "path": pa.array([u.path for u in shown[:limit]], pa.string()),
            "initiated": pa.array([u.initiated for u in shown[:limit]], pa.string()),
        }
    )
    return {"branches": branches, "uploads": cut_report(uploads, rows, len(shown))}

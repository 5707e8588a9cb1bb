"""``ui_pages``: the web UI's pages on a big pool (issue 15: under 300 ms each).

The pool is a file pool of 100,000 paths (objects) with a history of 10,000 commits
(quick: 5,000 paths, 300 commits), built directly through the core as the file
benchmarks build theirs (:func:`build`): one snapshot of every path, then a chain of
commits over it, each with one action, dated a second apart. A server of the lake
runs in a thread of this process (``--no-auth``); each page is fetched ``repeat``
times after one warm-up fetch, and the median latency (request to last byte) is
the figure. No peer has these pages: the figures stand alone.
"""

from __future__ import annotations

import datetime as dt
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.harness import Config, Result, median, timed

if TYPE_CHECKING:
    from limno.pools.files.pool import FilePool

__all__ = ["Built", "build", "ui_pages"]

#: the pages measured: name -> path (``{mid}``: a commit in the middle of the history,
#: ``{file}`` a path in the middle of the pool, ``{folder}`` its folder)
PAGES = {
    "pools": "/pools",
    "pool": "/pools/big",
    "history_mid": "/pools/big?page={mid}",
    "commit": "/pools/big/commits/{mid}",
    "files_root": "/pools/big/files",
    "files_folder": "/pools/big/files?prefix={folder}",
    "file_view": "/pools/big/files/view?path={file}",
}


def path_of(i: int) -> str:
    return f"dir{i // 1000:04}/part-{i % 1000:04}.csv"


class Built:
    """The big pool: its lake's path, path count and commit ids (oldest first)."""

    def __init__(self, lake: str, pool: FilePool, paths: int, commits: list[str]) -> None:
        self.lake = lake
        self.pool = pool
        self.paths = paths
        self.commits = commits


def build(lake_path: str, paths: int, commits: int) -> Built:
    """A lake at ``lake_path`` with file pool ``big``: ``paths`` paths (sharing one small
    CSV blob) and ``commits`` commits on ``main`` over them."""
    from limno.core.commits import Action, Commit
    from limno.ksuid import ksuid
    from limno.lake import Lake
    from limno.pools.files import blobs
    from limno.pools.files.entries import FileEntry, now_mtime

    pool = Lake.init(lake_path).create_pool("big", kind="files")
    blob = blobs.write_blob(pool.storage, pool.id, b"a,b\n1,x\n2,y\n")
    value = FileEntry("x", blob.size, blob.md5, "text/csv", now_mtime(), object=blob.id).to_value()
    v = pool.versioned
    snapshot = v.snapshots.write({path_of(i): value for i in range(paths)})
    root = v.head("main")
    start = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    parent, ids = root, []
    for n in range(commits):
        date = (start + dt.timedelta(seconds=n)).isoformat(timespec="microseconds")
        action = Action("add", path_of(n % paths), value)
        commit = Commit(ksuid(), (parent,), snapshot, "bench", date, f"commit {n}", {}, (action,))
        v.commits.put(commit)
        parent = commit.id
        ids.append(commit.id)
    v.refs.move_branch("main", root, parent)
    return Built(lake_path, pool, paths, ids)


def ui_pages(cfg: Config) -> list[Result]:
    """Median latency of each page of :data:`PAGES` on the big pool, in ms."""
    import httpx

    from limno.server.run import serving

    paths, commits = cfg.rows(100_000, 5_000), cfg.rows(10_000, 300)
    lake = str(Path(cfg.workdir) / "ui-pages")
    built = build(lake, paths, commits)
    mid = built.commits[len(built.commits) // 2]
    file = path_of(paths // 2)
    folder = file.rsplit("/", 1)[0] + "/"
    results = []
    with serving(lake) as url, httpx.Client(base_url=url, timeout=120) as client:
        for name, template in PAGES.items():
            path = template.format(mid=mid, file=file, folder=folder)
            _fetch(client, path)  # warm-up: the first read of a range or commit
            times = [timed(partial(_fetch, client, path)) for _ in range(max(cfg.repeat, 5))]
            results.append(
                Result(
                    "ui_pages",
                    f"{name}_ms",
                    "ms",
                    median(times) * 1000,
                    {},
                    False,
                    _note(paths, commits),
                )
            )
    return results


def _fetch(client: Any, path: str) -> None:
    answer = client.get(path)
    if answer.status_code != 200:
        raise RuntimeError(f"ui_pages: GET {path}: {answer.status_code} {answer.text[:200]}")


def _note(paths: int, commits: int) -> str:
    return f"{paths:,} paths, {commits:,} commits"

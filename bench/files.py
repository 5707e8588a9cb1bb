"""File pool benchmarks: commit, list, diff and merge at the sizes issue 14 names.

- ``files_commit_100k``: 100,000 staged paths committed in one commit (staged through the
  core, each naming one shared blob: the figure is the commit, not the uploads).
- ``files_list_1m``: a 1,000,000-path branch listed whole, 1,000 paths a page (each page
  a ``list(start_after=...)`` call, as the S3 gateway pages).
- ``files_diff_1k_of_1m`` / ``files_merge_1k_of_1m``: a branch of the 1M-path pool
  changes 1,000 paths spread over the whole key space (the worst case for shared
  ranges); ``diff_paths`` compares it with ``main``, then ``main`` moves and the branch
  is merged (three-way, no fast-forward).

The 1M-path snapshot is built directly through the core (``Snapshots.write`` of entries
naming one blob, one commit whose parent is the root), once per run and shared by the
three benchmarks that need it. No peer has branches of files; the figures stand alone.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.harness import Config, Result, median, timed

if TYPE_CHECKING:
    from limno.pools.files.pool import FilePool

__all__ = ["files_commit_100k", "files_diff_1k_of_1m", "files_list_1m", "files_merge_1k_of_1m"]


def _path(i: int) -> str:
    return f"dir{i // 1000:04}/part-{i % 1000:04}.parquet"


def _value(pool: FilePool, data: bytes) -> dict[str, Any]:
    """The entry value of a new blob holding ``data`` (every path of a benchmark names it)."""
    from limno.pools.files import blobs
    from limno.pools.files.entries import FileEntry, now_mtime

    blob = blobs.write_blob(pool.storage, pool.id, data)
    entry = FileEntry(
        "x", blob.size, blob.md5, "application/octet-stream", now_mtime(), object=blob.id
    )
    return entry.to_value()


def files_commit_100k(cfg: Config) -> list[Result]:
    """Latency of committing 100,000 staged paths (quick: 2,000)."""
    from limno.lake import Lake

    n = cfg.rows(100_000, 2_000)
    lake = Lake.init(str(cfg.workdir / "files-commit"))
    pool = lake.create_pool("commit", kind="files")
    value = _value(pool, b"x" * 100)
    times = []
    for rep in range(max(1, min(cfg.repeat, 3))):
        branch = f"b{rep}"
        pool.branch(branch)
        for i in range(n):
            pool.versioned.stage(branch, _path(i), value, None)
        commit_time = timed(partial(pool.commit, branch, f"{n} paths"))
        if pool.uncommitted(branch) or len(pool.log(branch, limit=1)[0].actions) != n:
            raise RuntimeError("files_commit_100k: the commit did not seal every path")
        times.append(commit_time)
    s = median(times)
    return [
        Result("files_commit_100k", f"latency_{n}_paths", "s", s, {}, False),
        Result("files_commit_100k", "throughput", "paths/s", n / s, {}, True),
    ]


@dataclass
class _Big:
    pool: FilePool
    paths: int
    value: dict[str, Any]


_big: dict[Path, _Big] = {}


def _big_pool(cfg: Config) -> _Big:
    """The 1M-path pool of this run (quick: 20,000 paths), built once."""
    if cfg.workdir in _big:
        return _big[cfg.workdir]
    from limno.core.commits import Commit, now_iso
    from limno.ksuid import ksuid
    from limno.lake import Lake

    n = cfg.rows(1_000_000, 20_000)
    pool = Lake.init(str(cfg.workdir / "files-1m")).create_pool("big", kind="files")
    value = _value(pool, b"y" * 1000)
    v = pool.versioned
    snapshot = v.snapshots.write({_path(i): value for i in range(n)})
    root = v.head("main")
    commit = Commit(ksuid(), (root,), snapshot, "bench", now_iso(), f"{n} paths")
    v.commits.put(commit)
    v.refs.move_branch("main", root, commit.id)
    _big[cfg.workdir] = _Big(pool, n, value)
    return _big[cfg.workdir]


def files_list_1m(cfg: Config) -> list[Result]:
    """A whole listing of the 1M-path branch, page by page (1,000 a page)."""
    big = _big_pool(cfg)

    def list_all() -> int:
        count, after = 0, ""
        while True:
            page = big.pool.list("main", start_after=after, limit=1000)
            count += len(page.entries)
            if not page.truncated:
                return count
            after = page.next_after or ""

    times = []
    for _ in range(max(1, min(cfg.repeat, 3))):
        got: list[int] = []
        times.append(timed(partial(_collect, got, int, list_all)))
        if got != [big.paths]:
            raise RuntimeError(f"files_list_1m listed {got} paths, expected {big.paths}")
    s = median(times)
    return [
        Result("files_list_1m", f"latency_{big.paths}_paths", "s", s, {}, False),
        Result("files_list_1m", "throughput", "paths/s", big.paths / s, {}, True),
    ]


def _collect(out: list[Any], how: Callable[[Any], Any], fn: Callable[..., Any], *args: Any) -> None:
    """Call ``fn(*args)`` and keep ``how`` of its result (what a timed run checks after)."""
    out.append(how(fn(*args)))


def _kind(result: Any) -> str:
    return str(result.kind)


def _changed_branch(big: _Big, name: str, seed: int) -> None:
    """Branch ``name`` off main with 1,000 paths rewritten, spread over the key space."""
    from limno.core.commits import Action

    big.pool.branch(name, "main")
    new = {**big.value, "mtime": f"changed-{name}"}
    chosen = random.Random(seed).sample(range(big.paths), 1000)
    big.pool.versioned.commit(name, [Action("add", _path(i), new) for i in chosen])


def files_diff_1k_of_1m(cfg: Config) -> list[Result]:
    """``diff_paths`` of main and a branch that changed 1,000 of the 1M paths."""
    big = _big_pool(cfg)
    times = []
    for rep in range(max(cfg.repeat, 3)):
        name = f"diff-{rep}"
        _changed_branch(big, name, rep)
        got: list[int] = []
        times.append(timed(partial(_collect, got, len, big.pool.diff_paths, "main", name), False))
        if got != [1000]:
            raise RuntimeError(f"files_diff_1k_of_1m found {got} changes, expected 1000")
    return [
        Result(
            "files_diff_1k_of_1m",
            f"latency_{big.paths}_paths",
            "ms",
            median(times) * 1000,
            {},
            False,
        )
    ]


def files_merge_1k_of_1m(cfg: Config) -> list[Result]:
    """A three-way merge into main of a branch that changed 1,000 of the 1M paths."""
    from limno.core.commits import Action

    big = _big_pool(cfg)
    times = []
    for rep in range(max(cfg.repeat, 3)):
        name = f"merge-{rep}"
        _changed_branch(big, name, 100 + rep)
        moved = {**big.value, "mtime": f"main-{rep}"}
        big.pool.versioned.commit("main", [Action("add", f"main-only/{rep}", moved)])
        merged: list[Any] = []
        times.append(timed(partial(_collect, merged, _kind, big.pool.merge, name, "main"), False))
        if merged != ["merge"]:
            raise RuntimeError(f"files_merge_1k_of_1m: {merged}, expected a merge commit")
    return [
        Result(
            "files_merge_1k_of_1m",
            f"latency_{big.paths}_paths",
            "ms",
            median(times) * 1000,
            {},
            False,
        )
    ]

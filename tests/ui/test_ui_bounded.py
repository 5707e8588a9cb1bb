"""The pages do bounded work on a big pool: a page of history reads about a page of
commits, the pools list counts a big pool from its snapshot's metarange, a folder
lists one page of paths, whatever the size of the pool or the length of its history.

The pool (bench/ui_pages.py's, smaller: 20,000 paths, 400 commits) is served from a
thread of the test, so that counting wrappers around the core's commit and range
reads (they call the real methods) see every read the pages make. No timing here:
bench ``ui_pages`` measures the 100,000-path, 10,000-commit pool.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from bench.ui_pages import Built, build, path_of

from limno.core.commits import CommitStore
from limno.core.committed import Snapshots
from limno.server.run import serving
from limno.ui import routes_files, routes_pool

PATHS, COMMITS = 20_000, 400


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Built:
    return build(str(tmp_path_factory.mktemp("big") / "lake"), PATHS, COMMITS)


@pytest.fixture(scope="module")
def client(big: Built) -> Iterator[httpx.Client]:
    with serving(big.lake) as url, httpx.Client(base_url=url, timeout=120) as http:
        yield http


class Reads:
    """Calls of the core's commit and range reads while a block runs."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.commits = 0
        self.ranges = 0
        monkeypatch.setattr(CommitStore, "get", self._counting(CommitStore.get, "commits"))
        monkeypatch.setattr(
            Snapshots, "range_entries", self._counting(Snapshots.range_entries, "ranges")
        )

    def _counting(self, real: Callable[..., Any], field: str) -> Callable[..., Any]:
        def counted(*args: Any, **kwargs: Any) -> Any:
            setattr(self, field, getattr(self, field) + 1)
            return real(*args, **kwargs)

        return counted

    def reset(self) -> None:
        self.commits = self.ranges = 0


def test_history_pages_read_a_page_of_commits(
    client: httpx.Client, big: Built, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads = Reads(monkeypatch)
    page = client.get("/pools/big")
    assert page.status_code == 200
    assert f"commit {COMMITS - 1}<" in page.text and "Older commits" in page.text
    assert f"commit {COMMITS - routes_pool.PAGE - 1}<" not in page.text
    assert reads.commits <= 3 * (routes_pool.PAGE + 1), reads.commits  # of 400
    reads.reset()
    mid = len(big.commits) // 2
    page = client.get("/pools/big", params={"page": big.commits[mid]})
    assert f"commit {mid}<" in page.text and f"commit {mid + 1}<" not in page.text
    assert reads.commits <= 3 * (routes_pool.PAGE + 1), reads.commits
    reads.reset()
    page = client.get(f"/pools/big/commits/{big.commits[mid]}")
    assert path_of(mid) in page.text
    assert reads.commits <= 5 and reads.ranges == 0, (reads.commits, reads.ranges)


def test_pools_list_counts_a_big_pool_from_its_metarange(
    client: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads = Reads(monkeypatch)
    page = client.get("/pools")
    assert page.status_code == 200
    assert f"{PATHS:,}" in page.text and f"commit {COMMITS - 1}" in page.text
    assert reads.ranges == 0 and reads.commits <= 5, (reads.ranges, reads.commits)


def test_a_folder_lists_one_page(client: httpx.Client, monkeypatch: pytest.MonkeyPatch) -> None:
    reads = Reads(monkeypatch)
    folder = path_of(PATHS // 2).rsplit("/", 1)[0] + "/"
    page = client.get("/pools/big/files", params={"prefix": folder})
    assert page.status_code == 200
    assert page.text.count("/files/view?") == routes_files.PAGE and "Next files" in page.text
    # a page of 100 paths spans a few ranges of ~64 entries, of 20,000 paths' ~300
    assert reads.ranges <= 6, reads.ranges

"""A big record pool's pages show the right things and do bounded work: a page of
history reads about a page of commits, a commit page a few, the data preview opens
the one data object its first rows are in (of 10,001), and the operations page reads
the commits of its report's window, whatever the length of the history. A new
server process's first commit page, data preview and operations page read the
snapshot's stored plan (pools/records/snapshot_index.py), not its entries.

The pool is bench/ui.py's (:func:`bench.ui.prepare`, smaller: 10,000 objects over
1,000 commits, plus a first commit of 1,000 real rows), served from a thread of the
test, so that counting wrappers around the core's reads (they call the real methods)
see every read the pages make. No timing here: bench ``ui_record_pages`` measures
the 100,000-object, 10,000-commit pool.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any
from unittest import mock

import httpx
import pytest
from bench.ui import POOL, prepare

from fresh_process import forget_decoded
from limno.core.commits import CommitStore
from limno.data import scan
from limno.lake import Lake
from limno.pools.records import snapshot_index
from limno.server.run import serving
from limno.storage._obstore import ObStorage
from limno.ui import routes_data, routes_ops, routes_pool

OBJECTS, COMMITS = 10_000, 1_000

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> str:
    lake = str(tmp_path_factory.mktemp("big") / "lake")
    prepare(lake, OBJECTS, COMMITS)
    return lake


@pytest.fixture(scope="module")
def client(big: str) -> Iterator[httpx.Client]:
    with serving(big) as url, httpx.Client(base_url=url, timeout=300) as http:
        yield http


class Counted:
    """Calls of the core's commit reads and data-object opens while a test runs (spies:
    each call goes to the real method)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self._commits = mock.MagicMock(side_effect=CommitStore.get)
        self._opened = mock.MagicMock(side_effect=scan._Reader._open)
        monkeypatch.setattr(CommitStore, "get", _method(self._commits))
        monkeypatch.setattr(scan._Reader, "_open", _method(self._opened))

    @property
    def commits(self) -> int:
        return self._commits.call_count

    @property
    def opened(self) -> int:
        return self._opened.call_count

    def reset(self) -> None:
        self._commits.reset_mock()
        self._opened.reset_mock()


def _method(spy: mock.MagicMock) -> Callable[..., Any]:
    return lambda *args, **kwargs: spy(*args, **kwargs)


def _get(client: httpx.Client, path: str, **params: str) -> str:
    answer = client.get(path, params=params)
    assert answer.status_code == 200, answer.text[:500]
    return answer.text


def _text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def test_history_and_commit_pages_read_a_page_of_commits(
    client: httpx.Client, big: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    counted = Counted(monkeypatch)
    page = _get(client, f"/pools/{POOL}")
    last = COMMITS - 1
    assert f"batch {last}<" in page and f"batch {last - routes_pool.PAGE + 1}<" in page
    assert f"batch {last - routes_pool.PAGE}<" not in page and "Older commits" in page
    assert counted.commits <= 3 * (routes_pool.PAGE + 1), counted.commits  # of 1,001
    older = re.search(r'page=([0-9A-Za-z]+)" rel="next"', page)
    assert older is not None
    counted.reset()
    page = _get(client, f"/pools/{POOL}", page=older.group(1))
    assert f"batch {last - routes_pool.PAGE}<" in page and f"batch {last}<" not in page
    assert counted.commits <= 3 * (routes_pool.PAGE + 1), counted.commits
    counted.reset()
    head = Lake.open(big).pool(POOL).log("main", limit=1)[0]
    page = _get(client, f"/pools/{POOL}/commits/{head.id}")
    assert all(a.key in page for a in head.actions) and f"batch {last}" in page
    # its preview opens the first object it added (here a metadata-only one: no rows);
    # the first read of the head's snapshot looks for an ancestor's stored plan
    bound = 10 + snapshot_index.MAX_ANCESTORS
    assert counted.commits <= bound and counted.opened <= 1, (counted.commits, counted.opened)


def test_the_data_preview_opens_only_the_object_of_its_rows(
    client: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    counted = Counted(monkeypatch)
    page = _get(client, f"/pools/{POOL}/data")
    cells = re.findall(r'<td class="key">(\d+)</td>', page)
    assert cells == [str(k) for k in range(routes_data.PAGE)]
    assert 'rel="next"' in page or "Next" in page
    assert counted.opened <= 2, counted.opened  # of 10,001 objects
    assert counted.commits <= 3, counted.commits


def test_the_operations_pages_show_the_big_pool(
    client: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    counted = Counted(monkeypatch)
    detail = _text(_get(client, "/operations", pool=POOL))
    assert "root −∞ … +∞ leaf" in detail
    # the split tree's counts (rows are estimated from the objects' own counts)
    assert f"{OBJECTS + 1:,}" in detail
    assert f"Files ({OBJECTS + 1}, first {routes_ops.REPORT_ROWS} shown)" in detail
    assert "Compaction jobs (0)" in detail and f"batch {COMMITS - 1}" in detail
    # the ingest report walks a window of the history (4 x its rows; a walk reads a
    # commit about twice), not all 1,001 commits
    # (and the head's first read: an ancestor's stored plan and report looked for)
    bound = 2 * 4 * routes_ops.REPORT_ROWS + 10 + snapshot_index.MAX_ANCESTORS
    assert counted.commits <= bound, counted.commits
    assert counted.opened == 0
    counted.reset()
    summary = _text(_get(client, "/operations"))
    assert f"{POOL} records none yet" in summary
    assert counted.commits <= 2 * 4 * routes_ops.SUMMARY_JOBS + 10, counted.commits


def test_a_new_process_reads_a_page_of_the_big_snapshot_from_its_sidecars(
    client: httpx.Client, big: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each page's first fetch with nothing decoded (as in a new server process, once
    a first reader stored the snapshot's sidecars) reads the stored plan and no more
    than a range or two of the snapshot's 10,000-odd entries (about 160 ranges)."""
    head = Lake.open(big).pool(POOL).log("main", limit=1)[0].id
    pages = [f"/pools/{POOL}/commits/{head}", f"/pools/{POOL}/data", f"/operations?pool={POOL}"]
    for page in pages:  # a first reader stores the sidecars (if no test did yet)
        _get(client, page)
    sidecars = f"/{snapshot_index.SIDECARS}/"
    read = mock.MagicMock(side_effect=ObStorage.get)
    monkeypatch.setattr(ObStorage, "get", _method(read))
    for page in pages:
        forget_decoded(monkeypatch)
        read.reset_mock()
        _get(client, page)
        paths = [str(c.args[1]) for c in read.call_args_list]
        assert len([p for p in paths if "/meta/ranges/" in p]) <= 2, (page, paths)
        assert len([p for p in paths if p.endswith(".plan") and sidecars in p]) == 1, page
        assert len(paths) <= 40, (page, len(paths))  # refs, a page of commits, ...

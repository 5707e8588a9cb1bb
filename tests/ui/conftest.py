"""Fixtures of the web UI's browser tests (marker ``browser``).

``browser``: one headless Chromium per module. ``ui_lake``: per module, a lake
with a record pool ``logs`` (key ``ts``, two commits) and a file pool ``docs``;
``ui_server``: a real ``limno serve`` of it (auth on; its admin key in
``ui_server.env``; event keep-alives every 0.2 s). ``page``: a page of a new browser
context signed in as that admin, at 1280x800. Helpers: tests/ui_support.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pyarrow as pa
import pytest

from limno import Lake
from server_support import Served, start_server
from ui_support import launch, signed_in

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test under tests/ui is a browser test."""
    for item in items:
        if "tests/ui" in item.path.parent.as_posix():
            item.add_marker(pytest.mark.browser)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """A Chromium per module, not per session: Playwright's sync API keeps an asyncio
    loop running in the thread while it is open, so a later test of the same
    process (another file under pytest-xdist) calling asyncio.run() would fail."""
    with launch() as chromium:
        yield chromium


def make_lake(path: str) -> str:
    """A lake with ``logs`` (records, key ts: two commits of 3 rows) and ``docs`` (files)."""
    lake = Lake.init(path)
    logs = lake.create_pool("logs", key="ts")
    logs.load(
        [pa.table({"ts": [1, 2, 3], "level": ["info", "warn", "error"], "msg": ["a", "b", "c"]})],
        message="first batch",
    )
    logs.load(
        [pa.table({"ts": [4, 5, 6], "level": ["info", "info", "warn"], "msg": ["d", "e", "f"]})],
        message="second batch",
        meta={"source": "tests"},
    )
    docs = lake.create_pool("docs", kind="files")
    docs.put("main", "readme.txt", b"hello from limno\n", content_type="text/plain")
    docs.put("main", "data/rows.csv", b"a,b\n1,x\n2,y\n", content_type="text/csv")
    docs.commit("main", "first files")
    return path


@pytest.fixture(scope="module")
def ui_lake(tmp_path_factory: pytest.TempPathFactory) -> str:
    return make_lake(str(tmp_path_factory.mktemp("ui") / "lake"))


@pytest.fixture(scope="module")
def ui_server(ui_lake: str) -> Iterator[Served]:
    proc = start_server(ui_lake, "--events-heartbeat", "0.2")
    try:
        yield proc
    finally:
        assert proc.stop() == 0, proc.lines


@pytest.fixture
def page(browser: Browser, ui_server: Served) -> Iterator[Page]:
    with signed_in(browser, ui_server.url, ui_server.env) as opened:
        yield opened

"""Live pages: a commit made by the CLI against the server appears in an open page
without a reload (the page listens to /events with its session)."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from clirunner import ok
from server_support import Served


def test_a_cli_load_appears_in_an_open_pool_page(
    page: Page, ui_server: Served, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in ui_server.env.items():  # the CLI's key: the server's admin
        monkeypatch.setenv(name, value)
    page.goto(f"{ui_server.url}/pools/logs")
    page.evaluate("document.querySelector('h1').dataset.marker = 'same page'")
    expect(page.locator("body[data-live=open]")).to_have_count(1)
    data = tmp_path / "more.ndjson"
    data.write_text('{"ts": 7, "level": "info", "msg": "live"}\n')
    ok("--lake", ui_server.url, "load", "-p", "logs", "-m", "loaded live", str(data))
    commits = page.get_by_test_id("commits")
    expect(commits.get_by_role("row").nth(1)).to_contain_text("loaded live", timeout=20_000)
    # no reload: the element marked before is still there
    assert page.evaluate("document.querySelector('h1').dataset.marker") == "same page"
    page.goto(f"{ui_server.url}/pools")
    expect(page.locator("body[data-live=open]")).to_have_count(1)
    ok("--lake", ui_server.url, "create", "appeared", "-k", "ts")
    expect(page.get_by_role("link", name="appeared", exact=True)).to_be_visible(timeout=20_000)

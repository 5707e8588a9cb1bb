"""A pool's page in a real browser: branches and tags, history with paging, a commit."""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect

from limno import Lake
from server_support import Served
from ui_support import shot


def test_branches_tags_and_history(page: Page, ui_server: Served) -> None:
    page.get_by_role("link", name="logs", exact=True).click()
    expect(page.get_by_role("heading", name="logs", level=1)).to_be_visible()
    commits = page.get_by_test_id("commits")
    expect(commits.get_by_role("row").nth(1)).to_contain_text("second batch")
    expect(commits).to_contain_text("source=tests")
    expect(commits).to_contain_text("first batch")
    shot(page, "pool")
    # a branch from main, then a tag; then delete both (each confirmed in a dialog)
    form = page.get_by_test_id("create-branch")
    form.get_by_label("New branch").fill("dev")
    form.get_by_role("button", name="Create branch").click()
    expect(page.get_by_role("status")).to_have_text("created branch dev")
    compare = page.get_by_role("link", name="Compare dev with main")
    assert compare.get_attribute("href") == "/pools/logs/merge-requests/new?source=dev&dest=main"
    form = page.get_by_test_id("create-tag")
    form.get_by_label("New tag").fill("v1")
    form.get_by_role("button", name="Create tag").click()
    expect(page.get_by_test_id("tags")).to_contain_text("v1")
    page.get_by_role("button", name="Delete tag v1").click()
    dialog = page.get_by_role("dialog")
    expect(dialog).to_contain_text("Delete tag v1?")
    dialog.get_by_role("button", name="Cancel").click()
    expect(page.get_by_test_id("tags")).to_contain_text("v1")
    page.get_by_role("button", name="Delete tag v1").click()
    page.get_by_role("dialog").get_by_role("button", name="Yes, do it").click()
    expect(page.get_by_role("status")).to_have_text("deleted tag v1")
    page.get_by_role("button", name="Delete branch dev").click()
    page.get_by_role("dialog").get_by_role("button", name="Yes, do it").click()
    expect(page.get_by_role("status")).to_have_text("deleted branch dev")
    assert "dev" not in Lake.open(ui_server.lake).pool("logs").branches()


def test_commit_page_shows_actions_and_rows_added(page: Page) -> None:
    page.get_by_role("link", name="logs", exact=True).click()
    page.get_by_test_id("commits").get_by_role("row").nth(1).get_by_role("link").click()
    expect(page).to_have_url(re.compile(r"/pools/logs/commits/\w+$"))
    expect(page.get_by_role("heading", name=re.compile("Added \\(1\\)"))).to_be_visible()
    expect(page.get_by_test_id("actions")).to_contain_text("added")
    rows = page.get_by_test_id("rows")
    expect(rows.get_by_role("columnheader", name="ts (key)")).to_be_visible()
    expect(rows).to_contain_text("info")
    expect(rows.get_by_role("row")).to_have_count(4)  # header and rows 4..6
    shot(page, "commit")


def test_history_pages_by_commit(page: Page, ui_server: Served) -> None:
    lake = Lake.open(ui_server.lake)
    many = lake.create_pool("many", key="ts")
    for i in range(30):
        many.load([_row(i)], message=f"load {i}")
    page.goto(f"{ui_server.url}/pools/many")
    commits = page.get_by_test_id("commits")
    expect(commits.get_by_role("row")).to_have_count(26)  # a header and 25 commits
    expect(commits.get_by_role("row").nth(1)).to_contain_text("load 29")
    page.get_by_role("link", name="Older commits").click()
    expect(commits.get_by_role("row").nth(1)).to_contain_text("load 4")
    # loads 4..0, then the pool's root commit
    expect(commits.get_by_role("row")).to_have_count(7)
    expect(page.get_by_role("link", name="Older commits")).to_have_count(0)
    page.get_by_role("link", name="Newest").click()
    expect(commits.get_by_role("row").nth(1)).to_contain_text("load 29")


def _row(i: int) -> object:
    import pyarrow as pa

    return pa.table({"ts": [i], "v": [str(i)]})


def test_commit_page_shows_rows_removed(page: Page, ui_server: Served) -> None:
    gone = Lake.open(ui_server.lake).create_pool("gone", key="ts")
    gone.load([_row(1), _row(2)], message="two rows")
    dropped = gone.delete_objects([o.id for o in gone.objects()], message="drop them")
    page.goto(f"{ui_server.url}/pools/gone/commits/{dropped.id}")
    expect(page.get_by_role("heading", name=re.compile(r"and removed \(1\)"))).to_be_visible()
    removed = page.get_by_test_id("removed-rows")
    expect(removed.get_by_role("row")).to_have_count(3)  # a header and rows 1, 2
    expect(removed).to_contain_text("ts (key)")
    expect(page.get_by_test_id("added-rows")).to_have_count(0)

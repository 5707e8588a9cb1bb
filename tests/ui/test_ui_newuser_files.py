"""What a new user met on a file pool's Files page after ``aws s3 sync`` of a tree of
many small files to a branch: every staged change of the branch was rendered, 2,500
list items (a page of an unbounded size where the README promises bounded work)."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from limno import Lake
from server_support import Served


def test_many_staged_changes_show_one_page_and_the_count(page: Page, ui_server: Served) -> None:
    pool = Lake.open(ui_server.lake).create_pool("synced", kind="files")
    for i in range(130):
        pool.put("main", f"many/f{i:04}", b"x")
    page.goto(f"{ui_server.url}/pools/synced/files?ref=main")
    expect(page.get_by_role("heading", name="Uncommitted changes on main (130)")).to_be_visible()
    staged = page.get_by_test_id("staged").get_by_role("listitem")
    expect(staged).to_have_count(100)
    expect(staged.first).to_contain_text("many/f0000")
    more = page.get_by_test_id("staged-more")
    expect(more).to_contain_text("30 more: limno fs uncommitted synced@main lists them all")
    page.get_by_label("Commit message").fill("the whole sync")
    page.get_by_role("button", name="Commit", exact=True).click()
    expect(page.get_by_role("status").first).to_contain_text("committed")
    assert pool.uncommitted("main") == []
    assert len(pool.list("main", prefix="many/", limit=1000).entries) == 130

"""Merge requests in a real browser: compare two branches that conflict, open a merge
request, see the conflict, try a ``fail`` merge (kept as an attempt), merge with
``source-wins`` and see main change; an analyst sees requests but no write actions."""

from __future__ import annotations

import re

import pyarrow as pa
import pytest
from playwright.sync_api import Browser, Page, expect

from limno import Lake
from server_support import Served, served_user
from ui_support import NARROW, session_client, shot, signed_in


@pytest.fixture(scope="module")
def conflicting(ui_server: Served) -> Served:
    """Branch ``dev`` of ``logs`` drops row 2 and adds row 7; main drops row 1 meanwhile:
    both rewrite the object holding rows 1..3, a conflict."""
    pool = Lake.open(ui_server.lake).pool("logs")
    pool.branch("dev")
    pool.delete_where("ts = 2", branch="dev")
    pool.load([pa.table({"ts": [7], "level": ["info"], "msg": ["g"]})], branch="dev")
    pool.delete_where("ts = 1", branch="main")
    return ui_server


def test_open_see_the_conflict_and_merge_by_strategy(page: Page, conflicting: Served) -> None:
    page.goto(f"{conflicting.url}/pools/logs/merge-requests")
    expect(page.get_by_test_id("merge-requests")).to_contain_text("No open merge requests")
    page.get_by_test_id("new-mr").click()
    pick = page.get_by_test_id("pick")
    pick.get_by_label("Source").select_option("dev")
    pick.get_by_label("Into").select_option("main")
    pick.get_by_role("button", name="Compare").click()
    expect(page.get_by_test_id("conflicts")).to_contain_text("1 conflict")
    expect(page.get_by_test_id("compare-summary")).to_contain_text("2 added")
    expect(page.get_by_test_id("sample")).to_contain_text("g")
    shot(page, "compare")
    form = page.get_by_test_id("open-mr")
    form.get_by_label("Title").fill("Late rows")
    form.get_by_label("Description").fill("Row 7 arrived late; row 2 was wrong.")
    form.get_by_role("button", name="Open merge request").click()
    expect(page.get_by_role("status")).to_have_text("opened the merge request")
    expect(page.get_by_test_id("mr-state")).to_have_text("open")
    expect(page.get_by_test_id("conflicts")).to_be_visible()
    merge = page.get_by_test_id("merge-form")
    merge.get_by_label("Strategy").select_option("fail")
    merge.get_by_role("button", name="Merge into main").click()
    expect(page.get_by_role("status")).to_contain_text("not merged")
    expect(page.get_by_test_id("attempts")).to_contain_text("conflict")
    expect(page.get_by_test_id("mr-state")).to_have_text("open")
    before = Lake.open(conflicting.lake).pool("logs").branches()["main"]
    merge.get_by_label("Strategy").select_option("source-wins")
    merge.get_by_role("button", name="Merge into main").click()
    expect(page.get_by_test_id("mr-state")).to_have_text("merged")
    expect(page.get_by_test_id("attempts")).to_contain_text("merged")
    shot(page, "merge_request")
    pool = Lake.open(conflicting.lake).pool("logs")
    head = pool.branches()["main"]
    assert head != before
    expect(page.get_by_test_id("mr-commit")).to_have_text(head)
    assert sorted(pool.scan("main").column("ts").to_pylist()) == [1, 3, 4, 5, 6, 7]
    page.get_by_role("link", name="Merge requests", exact=True).click()
    page.get_by_role("link", name="Merged", exact=True).click()
    expect(page.get_by_test_id("merge-requests")).to_contain_text("Late rows")
    page.get_by_test_id("merge-requests").get_by_role("link", name="Late rows").click()
    expect(page).to_have_url(re.compile(r"/pools/logs/merge-requests/\w+$"))


def test_an_analyst_sees_no_write_actions(browser: Browser, conflicting: Served) -> None:
    pool = Lake.open(conflicting.lake).pool("logs")
    pool.branch("ana-dev")
    pool.load([pa.table({"ts": [8], "level": ["warn"], "msg": ["h"]})], branch="ana-dev")
    mr = pool.open_merge_request("ana-dev", "main", "Row 8")
    env = served_user(conflicting, "ana", "analyst")
    with signed_in(browser, conflicting.url, env, viewport=NARROW) as page:
        page.goto(f"{conflicting.url}/pools/logs/merge-requests/{mr.id}")
        expect(page.get_by_test_id("compare-summary")).to_contain_text("1 added")
        expect(page.get_by_test_id("merge-form")).to_have_count(0)
        expect(page.get_by_test_id("close-form")).to_have_count(0)
        shot(page, "merge_request_narrow")
        page.goto(f"{conflicting.url}/pools/logs/merge-requests/new?source=ana-dev&dest=main")
        expect(page.get_by_test_id("compare")).to_be_visible()
        expect(page.get_by_test_id("open-mr")).to_have_count(0)
    # and the server refuses what the page hides (a forged POST with a valid CSRF token)
    with session_client(conflicting.url, env) as (client, token):
        base = f"/pools/logs/merge-requests/{mr.id}"
        for op, form in (("merge", {"strategy": "fail"}), ("close", {})):
            assert client.post(f"{base}/{op}", data={"csrf": token, **form}).status_code == 403
        opened = {"csrf": token, "source": "ana-dev", "dest": "main", "title": "x"}
        assert client.post("/pools/logs/merge-requests", data=opened).status_code == 403
    assert Lake.open(conflicting.lake).pool("logs").merge_request(mr.id).state == "open"

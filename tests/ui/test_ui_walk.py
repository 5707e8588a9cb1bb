"""What a walk through the issue's list found untested or broken: a long line of the
operations page's live events (JSON without spaces) widened the page past the
issue's 1280 px; a merge request page shows the pre-merge hooks' verdicts of each
attempt (a veto with its reason), and closes the request from its button."""

from __future__ import annotations

import pyarrow as pa
from playwright.sync_api import Page, expect

from limno import Lake
from limno.core.hooks import HookSpec
from server_support import Served


def test_long_live_events_wrap_at_1280_px(page: Page, ui_server: Served) -> None:
    page.goto(f"{ui_server.url}/operations")
    feed = page.get_by_test_id("events")
    event = '{"job":"' + "x" * 400 + '","kind":"compaction"}'  # an event's JSON, long
    add = (
        "(ol, t) => { const li = document.createElement('li'); li.textContent = t; ol.append(li); }"
    )
    feed.evaluate(add, event)
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 1280, f"the page is {width} px wide"


def test_a_merge_request_shows_a_hooks_veto_and_closes(page: Page, ui_server: Served) -> None:
    pool = Lake.open(ui_server.lake).create_pool("hooked", key="ts")
    pool.load([pa.table({"ts": [1, 2], "v": ["a", "b"]})])
    pool.branch("dev")
    pool.load([pa.table({"ts": [3], "v": ["c"]})], branch="dev")
    veto = "echo 'not on Fridays' >&2; exit 3"
    pool.add_hook(HookSpec("no-fridays", "pre-merge", run=veto))
    mr = pool.open_merge_request("dev", "main", title="Late row")
    page.goto(f"{ui_server.url}/pools/hooked/merge-requests/{mr.id}")
    page.get_by_test_id("merge-form").get_by_role("button", name="Merge into main").click()
    expect(page.get_by_role("status")).to_contain_text("not merged")
    attempts = page.get_by_test_id("attempts")
    expect(attempts).to_contain_text("no-fridays")
    expect(attempts).to_contain_text("vetoed")
    expect(attempts).to_contain_text("not on Fridays")
    expect(page.get_by_test_id("mr-state")).to_have_text("open")
    page.get_by_role("button", name="Close without merging").click()
    expect(page.get_by_test_id("mr-state")).to_have_text("closed")
    page.goto(f"{ui_server.url}/pools/hooked/merge-requests?state=closed")
    expect(page.get_by_test_id("merge-requests")).to_contain_text("Late row")
    assert Lake.open(ui_server.lake).pool("hooked").scan().num_rows == 2  # main unchanged

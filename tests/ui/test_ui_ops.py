"""The operations pages in a real browser: the lake-wide summary, a pool's split tree,
jobs of ``limno manage --once`` (a compaction, a vacuum) and the commit of ``limno
compact`` appearing live, a verify run; and merge requests appearing live in their list."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pyarrow as pa
from playwright.sync_api import Browser, Page, expect

from limno import Lake
from server_support import Served
from ui_support import NARROW, shot, signed_in


def _limno(served: Served, *args: str, lake: str | None = None) -> str:
    """Run the CLI against the server as its admin (or on ``lake``, a path); its stderr."""
    done = subprocess.run(
        [sys.executable, "-m", "limno", "--lake", lake or served.url, *args],
        env={**os.environ, **served.env},
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stderr


def test_jobs_of_the_cli_appear_live_with_the_split_tree_and_verify(
    page: Page, ui_server: Served
) -> None:
    lake = Lake.open(ui_server.lake)
    ops = lake.create_pool("ops", key="ts")
    for start in (0, 50, 25, 75):  # overlapping objects: a compaction merges them
        ops.load([pa.table({"ts": list(range(start, start + 100)), "v": ["x"] * 100})])
    assert ops.split("root", "main", 60) is not None
    page.get_by_role("link", name="Operations").click()
    page.get_by_label("Pool").select_option("ops")
    page.get_by_role("button", name="Show").click()
    expect(page).to_have_url(re.compile(r"/operations\?pool=ops"))
    tree = page.get_by_test_id("partitions")
    expect(tree.get_by_role("row")).to_have_count(4)  # the header, root and its two leaves
    expect(tree.get_by_role("row", name=re.compile("^root"))).to_contain_text("split")
    expect(tree).to_contain_text("leaf")
    compactions = page.get_by_test_id("jobs-compaction_jobs")
    expect(compactions).to_contain_text("No jobs yet.")
    expect(page.locator("body[data-live=open]")).to_have_count(1)
    page.evaluate("document.querySelector('h1').dataset.marker = 'same page'")

    # manage's jobs are tracked: a compaction (and a vacuum) with state and duration;
    # manage runs next to the lake (another process: the server sees it in the journals)
    _limno(ui_server, "manage", "--once", "-p", "ops", lake=ui_server.lake)
    expect(compactions).to_contain_text("committed", timeout=20_000)
    expect(compactions.get_by_role("columnheader", name="Duration (s)")).to_be_visible()
    expect(page.get_by_test_id("jobs-other_jobs")).to_contain_text("vacuum")
    expect(page.get_by_test_id("events")).to_contain_text("job.committed")
    # 'limno compact' is one commit (no tracked job): the reports follow it live
    for start in (0, 40):
        ops.load([pa.table({"ts": list(range(start, start + 50)), "v": ["y"] * 50})])
    assert "compacted" in _limno(ui_server, "compact", "-p", "ops")
    left = len(lake.pool("ops").objects("main"))
    files = page.get_by_test_id("report-files").get_by_role("heading")
    expect(files).to_have_text(f"Files ({left})", timeout=20_000)
    expect(page.get_by_test_id("events")).to_contain_text("compact")
    # no reload: the element marked before is still there
    assert page.evaluate("document.querySelector('h1').dataset.marker") == "same page"
    shot(page, "operations-pool")

    page.get_by_role("button", name="Verify").click()
    expect(page.get_by_test_id("faults")).to_have_text("No faults: every invariant holds.")

    page.goto(f"{ui_server.url}/operations")
    summary = page.get_by_test_id("ops-summary")
    row = summary.get_by_role("row").filter(has=page.get_by_role("rowheader", name="ops"))
    expect(row).to_contain_text(re.compile(r"compaction: \d+ committed"))
    expect(row).to_contain_text("vacuum")
    docs = summary.get_by_role("row").filter(has=page.get_by_role("rowheader", name="docs"))
    expect(docs).to_contain_text("file pool")
    shot(page, "operations")


def test_merge_requests_appear_live_in_their_list(page: Page, ui_server: Served) -> None:
    lake = Lake.open(ui_server.lake)
    logs = lake.pool("logs")
    logs.branch("fix")
    logs.load([pa.table({"ts": [10], "level": ["info"], "msg": ["fixed"]})], branch="fix")
    page.goto(f"{ui_server.url}/pools/logs/merge-requests")
    expect(page.locator("body[data-live=open]")).to_have_count(1)
    requests = page.get_by_test_id("merge-requests")
    expect(requests).to_contain_text("No open merge requests.")
    _limno(ui_server, "mr", "open", "-p", "logs", "-t", "Fix the levels", "fix")
    expect(requests.get_by_role("link", name="Fix the levels")).to_be_visible(timeout=20_000)
    opened = lake.versioned_pool("logs").merge_requests("open")[0]
    _limno(ui_server, "mr", "close", "-p", "logs", opened.id)
    expect(requests).to_contain_text("No open merge requests.", timeout=20_000)


def test_the_operations_page_fits_a_narrow_screen(browser: Browser, ui_server: Served) -> None:
    with signed_in(browser, ui_server.url, ui_server.env, NARROW) as page:
        page.goto(f"{ui_server.url}/operations?pool=logs")
        expect(page.get_by_test_id("partitions")).to_be_visible()
        # wide tables scroll in their own box: the page itself never scrolls sideways
        assert page.evaluate("document.documentElement.scrollWidth") <= NARROW["width"]
        page.keyboard.press("Tab")  # the skip link first, visibly focused
        expect(page.get_by_role("link", name="Skip to content")).to_be_focused()
        shot(page, "operations-narrow")

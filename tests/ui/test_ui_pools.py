"""The pools page in a real browser: the list, create, rename, drop (with its
confirmation), at 1280x800 and 390 px wide."""

from __future__ import annotations

import re

from playwright.sync_api import Browser, Page, expect

from server_support import Served
from ui_support import NARROW, shot, signed_in


def test_pools_list_shows_counts_and_last_commit(page: Page) -> None:
    table = page.get_by_test_id("pools")
    logs = table.get_by_role("row").filter(has=page.get_by_role("link", name="logs", exact=True))
    expect(logs).to_contain_text("records")
    expect(logs).to_contain_text("6")  # rows of main
    expect(logs).to_contain_text("second batch")
    docs = table.get_by_role("row").filter(has=page.get_by_role("link", name="docs", exact=True))
    expect(docs).to_contain_text("files")
    expect(docs).to_contain_text("first files")
    expect(page.get_by_role("navigation", name="Main")).to_contain_text("Users")
    shot(page, "pools")


def test_pools_page_is_usable_390_px_wide(browser: Browser, ui_server: Served) -> None:
    with signed_in(browser, ui_server.url, ui_server.env, NARROW) as narrow:
        expect(narrow.get_by_role("link", name="logs", exact=True)).to_be_visible()
        expect(narrow.get_by_role("button", name="Create")).to_be_visible()
        # nothing wider than the screen but the table's own scrolling box
        width = narrow.evaluate("document.documentElement.scrollWidth")
        assert width <= NARROW["width"], width
        shot(narrow, "pools-narrow")


def test_create_rename_and_drop_a_pool(page: Page, ui_server: Served) -> None:
    form = page.get_by_test_id("create-pool")
    form.get_by_label("Name").fill("events")
    form.get_by_label("Key (records)").fill("id")
    form.get_by_role("button", name="Create").click()
    expect(page.get_by_role("status")).to_have_text("created pool events")
    row = page.get_by_role("row").filter(has=page.get_by_role("link", name="events", exact=True))
    row.get_by_text("Rename or drop").click()
    row.get_by_label("New name").fill("events2")
    row.get_by_role("button", name="Rename").click()
    expect(page.get_by_role("status")).to_have_text("renamed pool events to events2")
    row = page.get_by_role("row").filter(has=page.get_by_role("link", name="events2", exact=True))
    row.get_by_text("Rename or drop").click()
    # the confirmation: the wrong name drops nothing
    row.get_by_label(re.compile("to drop it")).fill("nope")
    row.get_by_role("button", name="Drop pool").click()
    expect(page.get_by_test_id("error")).to_contain_text("type its name to confirm")
    page.goto(f"{ui_server.url}/pools")
    row = page.get_by_role("row").filter(has=page.get_by_role("link", name="events2", exact=True))
    row.get_by_text("Rename or drop").click()
    row.get_by_label(re.compile("to drop it")).fill("events2")
    row.get_by_role("button", name="Drop pool").click()
    expect(page.get_by_role("status")).to_have_text("dropped pool events2")
    expect(page.get_by_role("link", name="events2", exact=True)).to_have_count(0)


def test_create_a_file_pool(page: Page) -> None:
    form = page.get_by_test_id("create-pool")
    form.get_by_label("Name").fill("media")
    form.get_by_label("Kind").select_option("files")
    form.get_by_role("button", name="Create").click()
    expect(page.get_by_role("status")).to_have_text("created pool media")
    row = page.get_by_role("row").filter(has=page.get_by_role("link", name="media", exact=True))
    expect(row).to_contain_text("files")
    expect(row).to_contain_text("pool created")


#: the contrast of every text on the page to its background, WCAG's formula; the
#: smallest ratio found and where
_CONTRAST = """() => {
  const rgb = (c) => c.match(/[\\d.]+/g).slice(0, 4).map(Number);
  const lum = ([r, g, b]) => {
    const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
    return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
  };
  const background = (el) => {
    for (let e = el; e; e = e.parentElement) {
      const c = rgb(getComputedStyle(e).backgroundColor);
      if (c.length < 4 || c[3] > 0) return c;
    }
    return [255, 255, 255];
  };
  let worst = [99, ""];
  for (const el of document.querySelectorAll("body *")) {
    const own = Array.from(el.childNodes).some((n) => n.nodeType === 3 && n.textContent.trim());
    if (!own || !el.offsetParent) continue;
    const a = lum(rgb(getComputedStyle(el).color)), b = lum(background(el));
    const ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
    if (ratio < worst[0]) worst = [ratio, el.tagName + " " + el.textContent.trim().slice(0, 40)];
  }
  return worst;
}"""


def test_every_text_has_aa_contrast(page: Page) -> None:
    ratio, where = page.evaluate(_CONTRAST)
    assert where, "no text measured"
    assert 4.5 <= ratio < 21.01, (ratio, where)

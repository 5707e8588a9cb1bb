"""Data pages in a real browser: a record pool's preview (key highlighted, paging by
key range) and schema; a file pool's browser (folders, previews, upload by file input
and by drag-and-drop, download)."""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from playwright.sync_api import Page, expect

from limno import Lake
from server_support import Served
from ui_support import session_client, shot


def test_preview_pages_by_key_range_with_the_key_highlighted(page: Page, ui_server: Served) -> None:
    lake = Lake.open(ui_server.lake)
    wide = lake.create_pool("wide", key="ts")
    wide.load([pa.table({"ts": list(range(120)), "n": pa.array(range(120), pa.int32())})])
    wide.load([pa.table({"ts": [500], "n": pa.array([1], pa.int64()), "extra": ["x"]})])
    page.goto(f"{ui_server.url}/pools/wide/data")
    rows = page.get_by_test_id("rows")
    expect(rows.get_by_role("row")).to_have_count(51)
    key = rows.get_by_role("columnheader", name="ts (key)")
    assert "key" in (key.get_attribute("class") or "")
    shot(page, "data")
    page.get_by_role("link", name="Next rows", exact=True).click()
    expect(page).to_have_url(re.compile(r"start=%5B50%5D"))
    expect(rows.get_by_role("row").nth(1).get_by_role("cell").first).to_have_text("50")
    page.get_by_role("link", name="Next rows", exact=True).click()
    expect(rows.get_by_role("row")).to_have_count(22)  # 100..119 and 500
    expect(page.get_by_role("link", name="Next rows", exact=True)).to_have_count(0)
    page.get_by_role("link", name="Schema", exact=True).click()
    schema = page.get_by_test_id("schema")
    n = schema.get_by_role("row").filter(has=page.get_by_role("rowheader", name="n", exact=True))
    expect(n).to_contain_text("int64")
    expect(n).to_contain_text("int32")  # widened from
    expect(schema).to_contain_text("extra")
    shot(page, "schema")


def test_file_browser_previews_and_downloads(page: Page, ui_server: Served, tmp_path: Path) -> None:
    lake = Lake.open(ui_server.lake)
    docs = lake.file_pool("docs")
    sink = pa.BufferOutputStream()
    pq.write_table(pa.table({"k": [1, 2, 3], "name": ["ann", "bob", "cy"]}), sink)
    docs.put("main", "data/table.parquet", sink.getvalue().to_pybytes())
    docs.put("main", "data/events.ndjson", b'{"a":1,"b":"x"}\n{"a":2,"b":"y"}\n')
    docs.put("main", "img/dot.png", _png(), content_type="image/png")
    docs.commit("main", "more files")
    page.goto(f"{ui_server.url}/pools/docs")
    page.get_by_role("link", name="Files", exact=True).click()
    files = page.get_by_test_id("files")
    expect(files.get_by_role("link", name="data/", exact=True)).to_be_visible()
    expect(files.get_by_role("link", name="readme.txt", exact=True)).to_be_visible()
    files.get_by_role("link", name="readme.txt", exact=True).click()
    expect(page.get_by_test_id("text")).to_have_text("hello from limno\n")
    page.get_by_role("link", name="Back to the folder", exact=True).click()
    files.get_by_role("link", name="data/", exact=True).click()
    expect(files.get_by_role("link", name="rows.csv", exact=True)).to_be_visible()
    shot(page, "files")
    files.get_by_role("link", name="table.parquet", exact=True).click()
    expect(page.get_by_test_id("rows")).to_contain_text("bob")
    page.go_back()
    files.get_by_role("link", name="events.ndjson", exact=True).click()
    expect(page.get_by_test_id("rows").get_by_role("row")).to_have_count(3)
    page.go_back()
    files.get_by_role("link", name="rows.csv", exact=True).click()
    expect(page.get_by_test_id("rows")).to_contain_text("y")
    with page.expect_download() as info:
        page.get_by_role("link", name="Download", exact=True).click()
    saved = tmp_path / "rows.csv"
    info.value.save_as(saved)
    assert saved.read_bytes() == b"a,b\n1,x\n2,y\n"
    page.goto(f"{ui_server.url}/pools/docs/files/view?path=img/dot.png")
    image = page.get_by_role("img", name="img/dot.png")
    expect(image).to_be_visible()
    assert page.evaluate("document.querySelector('img.preview').naturalWidth") == 1


def test_upload_by_file_input_and_by_drag_and_drop(
    page: Page, ui_server: Served, tmp_path: Path
) -> None:
    lake = Lake.open(ui_server.lake)
    lake.create_pool("uploads", kind="files")
    page.goto(f"{ui_server.url}/pools/uploads/files")
    local = tmp_path / "notes.txt"
    local.write_bytes(b"typed by hand\n" * 1000)
    page.get_by_label("Choose files to upload").set_input_files(str(local))
    expect(page.get_by_test_id("staged")).to_contain_text("notes.txt")
    # drag-and-drop: a drop event carrying a file, as a person's drop would
    page.evaluate(
        """() => {
        const data = new DataTransfer();
        data.items.add(new File(["dropped,1\\n"], "dropped.csv", {type: "text/csv"}));
        const zone = document.querySelector("[data-upload]");
        zone.dispatchEvent(new DragEvent("dragover", {dataTransfer: data, bubbles: true}));
        zone.dispatchEvent(new DragEvent("drop", {dataTransfer: data, bubbles: true}));
        }"""
    )
    expect(page.get_by_test_id("staged")).to_contain_text("dropped.csv")
    page.get_by_label("Commit message").fill("two uploads")
    page.get_by_role("button", name="Commit", exact=True).click()
    expect(page.get_by_role("status").first).to_contain_text("committed")
    files = page.get_by_test_id("files")
    expect(files.get_by_role("link", name="notes.txt", exact=True)).to_be_visible()
    pool = Lake.open(ui_server.lake).file_pool("uploads")
    assert b"".join(pool.read("notes.txt")) == local.read_bytes()
    assert b"".join(pool.read("dropped.csv")) == b"dropped,1\n"
    assert pool.log("main", limit=1)[0].message == "two uploads"


def _png() -> bytes:
    """A 1x1 PNG."""
    import base64

    return base64.b64decode(
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
    )


def test_preview_pages_by_a_composite_key_of_times(ui_server: Served) -> None:
    """A key of text and times: the next page's from-bound keeps each value's type."""
    import datetime as dt
    import html
    import json

    lake = Lake.open(ui_server.lake)
    start = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    times = [start + dt.timedelta(minutes=i) for i in range(60)]
    lake.create_pool("timed", key="tenant,ts").load(
        [pa.table({"tenant": ["acme"] * 60, "ts": pa.array(times, pa.timestamp("us", "UTC"))})]
    )
    with session_client(ui_server.url, ui_server.env) as (client, _):
        first = client.get("/pools/timed/data")
        link = re.search(r'href="\?([^"]*start=[^"]*)" rel="next"', first.text)
        assert link is not None, first.text[-2000:]
        second = client.get("/pools/timed/data?" + html.unescape(link.group(1)))
        assert second.status_code == 200, second.text
        bound = json.loads(second.url.params["start"])
        assert bound == ["acme", {"datetime": times[50].isoformat()}]
        cells = re.findall(r'<td class="key">([^<]*)</td>', second.text)
        assert cells[:2] == ["acme", str(times[50])]  # the page starts at the 51st row
        assert len(cells) == 2 * 10


def test_uploads_are_not_capped_like_forms_and_need_the_csrf_token(ui_server: Served) -> None:
    """A 3 MB upload passes the server's 1 MB cap on request bodies (an upload is
    spooled to disk, as the API's are); without the token it is refused."""
    lake = Lake.open(ui_server.lake)
    lake.create_pool("spool", kind="files")
    body = bytes(range(256)) * (3 * 4096)
    url = "/pools/spool/files/upload?branch=main&path=big.bin"
    with session_client(ui_server.url, ui_server.env) as (client, token):
        assert client.post(url, content=b"x").status_code == 403
        answer = client.post(url, content=body, headers={"X-CSRF-Token": token})
        assert answer.status_code == 200, answer.text[:500]
        assert answer.json() == {"path": "big.bin", "size": len(body)}
    pool = Lake.open(ui_server.lake).file_pool("spool")
    assert b"".join(pool.read("big.bin", "main")) == body
    assert not pool.log("main", limit=1)[0].actions  # staged only: committed by a form

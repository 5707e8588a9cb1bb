"""The query page in a real browser: run SQL, page the answer, download it, chart it,
share it by URL; the same sandbox as the /v1 query route."""

from __future__ import annotations

import math
import re
from pathlib import Path
from urllib.parse import quote

import pyarrow as pa
import pyarrow.parquet as pq
from playwright.sync_api import Page, expect

from limno import Lake
from server_support import Served, served_user
from ui_support import session_client, shot


def test_run_page_download_and_share_a_query(page: Page, ui_server: Served, tmp_path: Path) -> None:
    lake = Lake.open(ui_server.lake)
    lake.create_pool("series", key="t").load(
        [
            pa.table(
                {
                    "t": list(range(250)),
                    "v": [round(50 + 40 * math.sin(i / 20)) for i in range(250)],
                }
            )
        ]
    )
    page.get_by_role("link", name="Query").click()
    page.get_by_label(re.compile("^SQL")).fill("SELECT t, v FROM series ORDER BY t")
    page.get_by_role("button", name="Run").click()
    expect(page.get_by_role("heading", name="Result: 250 row(s)")).to_be_visible()
    rows = page.get_by_test_id("rows")
    expect(rows.get_by_role("row")).to_have_count(101)
    page.get_by_role("link", name="Next rows").click()
    expect(rows.get_by_role("row").nth(1).get_by_role("cell").first).to_have_text("100")
    expect(page.get_by_text("page 2 of 3")).to_be_visible()
    # the chart: a line by default, then bars and a scatter of the chosen columns
    chart = page.locator("[data-chart] svg")
    expect(chart).to_have_attribute("aria-label", "line chart of v by t")
    assert page.locator("[data-chart] polyline").count() == 1
    shot(page, "query-chart", full=False)
    page.get_by_label("Chart type").select_option("bar")
    expect(chart).to_have_attribute("data-kind", "bar")
    expect(page.locator("[data-chart] rect")).to_have_count(250)
    page.get_by_label("Chart type").select_option("scatter")
    expect(page.locator("[data-chart] circle")).to_have_count(250)
    expect(page).to_have_url(re.compile(r"chart=scatter"))
    shot(page, "query")
    with page.expect_download() as info:
        page.get_by_role("link", name="Parquet").click()
    info.value.save_as(tmp_path / "q.parquet")
    assert pq.read_table(tmp_path / "q.parquet").num_rows == 250
    with page.expect_download() as info:
        page.get_by_role("link", name="CSV").click()
    info.value.save_as(tmp_path / "q.csv")
    assert (tmp_path / "q.csv").read_text().splitlines()[:2] == ['"t","v"', "0,50"]
    # shared by URL: the address alone runs it
    page.goto(f"{ui_server.url}/query?sql={quote('SELECT count(*) AS n FROM logs')}")
    expect(page.get_by_test_id("rows")).to_contain_text("6")


def test_queries_run_in_the_api_sandbox(ui_server: Served, tmp_path: Path) -> None:
    with session_client(ui_server.url, ui_server.env) as (client, _):
        page = client.get("/query", params={"sql": "SELECT * FROM read_csv('/etc/passwd')"})
        assert page.status_code == 200
        assert 'data-testid="query-error"' in page.text
        assert "root:x" not in page.text
        target = tmp_path / "copied.csv"
        bad = client.get("/query/download", params={"sql": f"COPY logs TO '{target}'"})
        assert bad.status_code in (400, 403), bad.text
        assert not target.exists()
    lake = Lake.open(ui_server.lake)
    hidden = lake.create_pool("secret", key="ts")
    from limno.api.local import LocalLake
    from limno.api.local_auth import LocalAuth

    analyst = served_user(ui_server, "qa", "analyst")
    auth = LocalAuth(LocalLake.open(ui_server.lake), server_secret=ui_server.secret)
    auth.grant("qa", hidden.id, "none")
    with session_client(ui_server.url, analyst) as (client, _):
        page = client.get("/query", params={"sql": "SELECT * FROM secret"})
        assert "pool secret may not be read" in page.text

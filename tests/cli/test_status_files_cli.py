"""``limno status`` lists file pools too (their branches' files, staged changes and open
multipart uploads) next to record pools, on a lake's path and through a server."""

from __future__ import annotations

import pyarrow as pa
import pytest

from clirunner import ok
from limno.api.local import LocalLake

pytestmark = pytest.mark.usefixtures("isolated_home")


def test_status_reports_file_pools_in_both_modes(lake: str, lake_path: str) -> None:
    local = LocalLake.open(lake_path)
    local.create_pool("logs", key="ts").load([pa.table({"ts": [1, 2]})])
    docs = local.create_pool("docs", kind="files")
    for path in ("a.txt", "b/c.txt"):
        docs.put("main", path, b"x")
    docs.commit("main", "two files")
    docs.branch("dev")
    docs.put("dev", "d.txt", b"y")  # staged, not committed
    upload = docs.multipart().create("dev", "big.bin")

    rows = ok("--lake", lake, "-f", "ndjson", "status").rows()
    branches = {r["branch"]: r for r in rows if (r["pool"], r["report"]) == ("docs", "branches")}
    assert {b: (r["files"], r["staged"], r["uploads"]) for b, r in branches.items()} == {
        "dev": (2, 1, 1),
        "main": (2, 0, 0),
    }
    (listed,) = [r for r in rows if (r["pool"], r["report"]) == ("docs", "uploads")]
    assert (listed["upload"], listed["branch"], listed["path"]) == (upload, "dev", "big.bin")
    assert any(r["pool"] == "logs" for r in rows)  # record pools as before
    # one file pool by name, as a table
    text = ok("--lake", lake, "-f", "table", "status", "docs").text
    assert "== docs: branches (2)" in text and "== docs: uploads (1)" in text
    assert "logs" not in text

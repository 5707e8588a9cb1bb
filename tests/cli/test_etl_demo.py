"""The zync demo (examples/cdc): batch-1..4 loaded into Raw one at a time with
``limno load``, ``limno etl`` after each, on a lake path and through a server.

The expected NewInvoices records, derived by hand from the demo's rules, are in
tests/etl_support.py (shared with the engine conformance suite).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from clirunner import fail, ok
from etl_support import CONFIG, EXPECTED, batch, records_after

pytestmark = pytest.mark.usefixtures("isolated_home")


def _records(lake: str) -> list[dict[str, Any]]:
    return ok("--lake", lake, "scan", "-p", "Staging", "-f", "ndjson").rows()


def _head(lake: str) -> dict[str, Any]:
    return ok("--lake", lake, "log", "-p", "Staging", "-n", "1", "-f", "ndjson").rows()[0]


def test_the_demo_batch_by_batch(lake: str) -> None:
    ok("--lake", lake, "create", "Raw", "-k", "kafka.offset")
    for n in range(1, len(EXPECTED) + 1):
        ok("--lake", lake, "load", "-p", "Raw", batch(n))
        commit = ok("--lake", lake, "etl", str(CONFIG)).text.strip()
        assert commit, f"batch {n}: the run committed"
        assert _records(lake) == records_after(n), f"after batch {n}"
        head = _head(lake)
        assert head["id"] == commit
        state = head["meta"]["etl"]["invoices"]
        pending = state["pending"]
        assert pending == ({"0": [["Invoices", 0, 4]]} if n == 2 else {}), f"after batch {n}"
        # a rerun without new input: no commit, same records
        again = ok("--lake", lake, "etl", str(CONFIG))
        assert again.text.strip() == ""
        assert "nothing committed" in again.err
        assert _head(lake)["id"] == commit
    assert len(_records(lake)) == 8


def test_a_bad_config_names_its_line_and_field(tmp_path: Path) -> None:
    lake = str(tmp_path / "lake")  # the config is read first: no lake is opened
    bad = tmp_path / "bad.yaml"
    bad.write_text(CONFIG.read_text().replace("join-on:", "join-onn:"))
    line = next(i for i, t in enumerate(bad.read_text().splitlines(), 1) if "join-onn" in t)
    r = fail("--lake", lake, "etl", str(bad))
    assert r.err.startswith(f"error: bad.yaml line {line}: transforms[0].join-onn: unknown field")
    assert len(r.err.strip().splitlines()) == 1

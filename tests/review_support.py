"""The pool the merge-request tests share (tests/pools/test_review*.py)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from limno import Lake
from limno.api.local_pool import LocalPool


def review_pool(tmp_path: Path) -> LocalPool:
    """Pool ``logs`` with rows 1..3 on main; branch ``dev`` adds row 4."""
    lake = Lake.init(str(tmp_path / "lake"))
    made = lake.create_pool("logs", key="ts")
    made.load([pa.table({"ts": [1, 2, 3]})])
    made.branch("dev")
    made.load([pa.table({"ts": [4]})], branch="dev")
    opened = lake.pool("logs")
    assert isinstance(opened, LocalPool)
    return opened

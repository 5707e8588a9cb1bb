"""Fixtures of the file pool engine's tests: a lake on a local directory and a file pool."""

from __future__ import annotations

from pathlib import Path

import pytest

from limno.lake import Lake
from limno.pools.files.pool import FilePool


@pytest.fixture
def lake(tmp_path: Path) -> Lake:
    return Lake.init(str(tmp_path / "lake"))


@pytest.fixture
def pool(lake: Lake) -> FilePool:
    return lake.create_pool("files", kind="files")

"""A small lake every daily-CLI scenario starts from (pool ``logs``, key ts, rows 1..3 on
``main``, branch ``dev`` and tag ``v1``), on a path or behind a real server, and a parser
of the CLI's output formats: shared by tests/cli/test_cli_daily.py and test_mr_cli.py."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest

from clirunner import ok
from lake_modes import located

__all__ = ["lake", "parse"]


@pytest.fixture
def lake(tmp_path: Path, mode: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A lake with pool ``logs`` (key ts): one load, branch ``dev``, tag ``v1``; its
    path, or a server on it (``mode``)."""
    where = str(tmp_path / "lake")
    data = tmp_path / "logs.ndjson"
    data.write_text("".join(f'{{"ts": {i}, "msg": "m{i}"}}\n' for i in range(1, 4)))
    ok("--lake", where, "init")
    ok("--lake", where, "create", "logs", "-k", "ts")
    ok("--lake", where, "load", "-p", "logs", str(data))
    ok("--lake", where, "branch", "-p", "logs", "dev")
    ok("--lake", where, "tag", "-p", "logs", "v1")
    with located(where, mode, monkeypatch) as location:
        yield location


def parse(fmt: str, out: bytes) -> list[dict[str, object]]:
    """Rows of ``out`` written in ``fmt`` (for the binary formats, through Arrow)."""
    if fmt == "ndjson":
        return [json.loads(line) for line in out.decode().splitlines()]
    if fmt == "json":
        rows = json.loads(out)
        assert isinstance(rows, list)
        return rows
    if fmt == "csv":
        return list(csv.DictReader(io.StringIO(out.decode())))
    if fmt == "parquet":
        return pq.read_table(pa.BufferReader(out)).to_pylist()
    assert fmt == "arrow"
    return ipc.open_stream(pa.BufferReader(out)).read_all().to_pylist()

"""Small CLI surprises, each on a lake's path and through a server (``mode``): a pool
renamed to its own name, a commit's meta in JSON output, nanosecond times inside
structs, lists and maps."""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from git_scenarios import Lk, error_line


def _pool_journal(lake_path: str) -> list[str]:
    return sorted(os.listdir(Path(lake_path) / "pools"))


def test_renaming_a_pool_to_its_own_name_says_so_and_writes_nothing(lk: Lk) -> None:
    """``rename g g`` printed nothing and wrote a journal entry; like ``git branch -m b b``
    it succeeds, and now says nothing changed."""
    lk.ok("create", "g", "-k", "ts")
    before = _pool_journal(lk.path)
    r = lk.ok("rename", "g", "g")
    assert "pool g already has that name: nothing to rename" in r.err
    assert _pool_journal(lk.path) == before
    assert [p["name"] for p in lk.ok("ls").rows()] == ["g"]
    assert "not found" in error_line(lk.fail("rename", "nope", "nope"))
    assert "renamed pool g to h" in lk.ok("rename", "g", "h").err
    assert _pool_journal(lk.path) != before


def test_log_prints_meta_as_an_object_in_json_formats(lk: Lk) -> None:
    lk.ok("create", "logs", "-k", "ts")
    lk.load("logs", [1], "--meta", "ticket=42")
    want = {"ticket": "42"}
    assert lk.ok("-f", "ndjson", "log", "-p", "logs", "-n", "1").rows()[0]["meta"] == want
    assert json.loads(lk.ok("-f", "json", "log", "-p", "logs", "-n", "1").text)[0]["meta"] == want
    # a format of typed columns keeps JSON text, as the "logs:commits" table has it
    row = next(csv.DictReader(io.StringIO(lk.ok("-f", "csv", "log", "-p", "logs").text)))
    assert json.loads(row["meta"]) == want
    sql = lk.ok("-f", "ndjson", "query", 'SELECT meta FROM "logs:commits" LIMIT 1').rows()
    assert json.loads(sql[0]["meta"]) == want
    text = lk.ok("-f", "table", "log", "-p", "logs", "-n", "1").text
    assert 'Meta:   {"ticket": "42"}' in text  # the text output as it was


def test_nanosecond_times_inside_structs_lists_and_maps_keep_their_digits(lk: Lk) -> None:
    """Top-level ``time64[ns]`` values printed with their nanoseconds, nested ones at
    microseconds (``00:00:00``)."""
    ns = pa.time64("ns")
    data = lk.tmp / "nested.parquet"
    table = pa.table(
        {
            "ts": [1],
            "s": pa.array([{"at": 1, "n": 2}], pa.struct([("at", ns), ("n", pa.int64())])),
            "l": pa.array([[1, 2]], pa.list_(ns)),
            "m": pa.array([[("k", 3)]], pa.map_(pa.string(), ns)),
        }
    )
    pq.write_table(table, data)
    lk.ok("create", "times", "-k", "ts")
    lk.ok("load", "-p", "times", str(data))
    one, two, three = (f"00:00:00.00000000{i}" for i in (1, 2, 3))
    for fmt in ("ndjson", "json"):
        out = lk.ok("-f", fmt, "scan", "-p", "times")
        row = out.rows()[0] if fmt == "ndjson" else json.loads(out.text)[0]
        assert row["s"] == {"at": one, "n": 2}
        assert row["l"] == [one, two]
        assert row["m"] in ([["k", three]], {"k": three})
    table_text = lk.ok("-f", "table", "scan", "-p", "times").text
    assert all(t in table_text for t in (one, two, three))
    cells = next(csv.DictReader(io.StringIO(lk.ok("-f", "csv", "scan", "-p", "times").text)))
    assert json.loads(cells["s"]) == {"at": one, "n": 2}
    assert json.loads(cells["l"]) == [one, two]
    back = pq.read_table(io.BytesIO(lk.ok("-f", "parquet", "scan", "-p", "times").out))
    assert back.column("s").type.field("at").type == ns  # binary formats keep the type

"""Scenario tests for record pools, through the CLI (in-process, real entry point)."""

from __future__ import annotations

import datetime as dt
import gzip
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from clirunner import Result, fail, ok, run
from lake_modes import located

pytestmark = pytest.mark.usefixtures("isolated_home")


@pytest.fixture
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "home" / ".config"))
    monkeypatch.delenv("LIMNO_LAKE", raising=False)


@pytest.fixture
def lake(lake_path: str, mode: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """What ``--lake`` names: the lake's path, or a server on it (``mode``)."""
    assert run("--lake", lake_path, "init").code == 0
    with located(lake_path, mode, monkeypatch) as location:
        yield location


def ndjson(path: Path, rows: list[dict[str, object]]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def snapshot_files(lake: str) -> dict[str, int]:
    out = {}
    for root, _, files in os.walk(lake):
        for f in files:
            p = os.path.join(root, f)
            if "/.config/" not in p:
                out[os.path.relpath(p, lake)] = os.path.getsize(p)
    return out


def keys_of(r: Result, field: str = "ts") -> list[object]:
    return [row.get(field) for row in r.rows()]


# -- pools -------------------------------------------------------------------------------


def test_create_ls_rename_drop(lake: str, lake_path: str) -> None:
    pid = ok("--lake", lake, "create", "logs", "-k", "tenant,ts:desc").text.strip()
    assert len(pid) == 27
    (row,) = ok("--lake", lake, "ls").rows()
    assert row == {
        "name": "logs",
        "id": pid,
        "key": "tenant,ts:desc",
        "kind": "records",
        "created": row["created"],
    }
    assert (
        row["created"]
        == ok("--lake", lake, "query", 'SELECT created FROM ":pools"').rows()[0]["created"]
    )
    ok("--lake", lake, "rename", "logs", "events")
    assert ok("--lake", lake, "ls").rows()[0]["id"] == pid
    assert ok("--lake", lake, "ls").rows()[0]["name"] == "events"
    branches = ok("--lake", lake, "ls", "events").rows()
    assert [(b["kind"], b["name"]) for b in branches] == [("branch", "main")]
    fail("--lake", lake, "drop", "events")  # no -f on a non-terminal
    ok("--lake", lake, "drop", "events", "-f")
    assert ok("--lake", lake, "ls").rows() == []
    assert not any(pid in p for p in snapshot_files(lake_path))


@pytest.mark.parametrize("name", ["../x", "", "a@b", "a/b", "a:b", "-x", "a..b", "x" * 200])
def test_bad_pool_names_change_nothing(lake: str, lake_path: str, name: str) -> None:
    before = snapshot_files(lake_path)
    r = fail("--lake", lake, "create", "--", name)
    assert "invalid pool name" in r.err
    assert snapshot_files(lake_path) == before


def test_duplicate_pool_and_unknown_pool(lake: str) -> None:
    ok("--lake", lake, "create", "logs")
    assert "already exists" in fail("--lake", lake, "create", "logs").err
    assert "not found" in fail("--lake", lake, "scan", "-p", "nope").err
    assert "not found" in fail("--lake", lake, "rename", "nope", "x").err


def test_use_sets_working_pool(lake: str, tmp_path: Path) -> None:
    ok("--lake", lake, "create", "logs")
    fail("--lake", lake, "use")
    fail("--lake", lake, "scan")
    ok("--lake", lake, "use", "logs")
    assert ok("--lake", lake, "use").text.strip() == "logs@main"
    ok("--lake", lake, "load", ndjson(tmp_path / "a.ndjson", [{"ts": 1}]))
    assert keys_of(ok("--lake", lake, "scan")) == [1]
    assert "not found" in fail("--lake", lake, "use", "logs@nobranch").err


# -- load ---------------------------------------------------------------------------------


def test_load_prints_commit_id_and_sorts(lake: str, tmp_path: Path) -> None:
    ok("--lake", lake, "create", "logs", "-k", "ts")
    f = ndjson(tmp_path / "a.ndjson", [{"ts": t, "v": str(t)} for t in [5, 1, 4, 2, 3]])
    r = ok("--lake", lake, "load", "-p", "logs", "-m", "hello", "--meta", "src=test", f)
    commit_id = r.text.strip()
    assert len(commit_id) == 27 and "\n" not in commit_id
    assert "5 record(s)" in r.err
    assert keys_of(ok("--lake", lake, "scan", "-p", "logs")) == [1, 2, 3, 4, 5]
    log = ok("--lake", lake, "log", "-p", "logs", "-f", "json")
    entries = json.loads(log.text)
    assert entries[0]["id"] == commit_id
    assert entries[0]["message"] == "hello"
    assert entries[0]["meta"] == {"src": "test"}  # an object, not JSON text
    assert entries[0]["actions"][0]["op"] == "add"
    assert entries[-1]["message"] == "pool created"


def test_load_many_formats_and_stdin(lake: str, tmp_path: Path) -> None:
    ok("--lake", lake, "create", "logs", "-k", "ts")
    (tmp_path / "a.csv").write_text("ts,v\n3,c\n1,a\n")
    (tmp_path / "b.tsv").write_text("ts\tv\n2\tb\n")
    pq.write_table(pa.table({"ts": [5, 4], "v": ["e", "d"]}), tmp_path / "c.parquet")
    with gzip.open(tmp_path / "d.ndjson.gz", "wt") as g:
        g.write('{"ts": 6, "v": "f"}\n')
    files = [str(tmp_path / n) for n in ["a.csv", "b.tsv", "c.parquet", "d.ndjson.gz"]]
    ok("--lake", lake, "load", "-p", "logs", *files)
    ok("--lake", lake, "load", "-p", "logs", "-", stdin=b'{"ts": 0, "v": "z"}\n')
    rows = ok("--lake", lake, "scan", "-p", "logs").rows()
    assert [r["ts"] for r in rows] == [0, 1, 2, 3, 4, 5, 6]
    assert [r["v"] for r in rows] == ["z", "a", "b", "c", "d", "e", "f"]
    assert len(ok("--lake", lake, "log", "-p", "logs").rows()) == 3


def test_any_shape_nested_and_keyless(lake: str, tmp_path: Path) -> None:
    ok("--lake", lake, "create", "events", "-k", "kafka.offset")
    rows: list[dict[str, object]] = [
        {"kafka": {"offset": 2, "topic": "t"}, "value": {"a": [1, 2]}},
        {"kafka": {"offset": 1, "topic": "t"}, "value": "plain"},
        {"other": True},
    ]
    ok("--lake", lake, "load", "-p", "events", ndjson(tmp_path / "e.ndjson", rows))
    out = ok("--lake", lake, "scan", "-p", "events").rows()
    assert [r.get("kafka", {}) and r["kafka"]["offset"] for r in out[:2]] == [1, 2]
    assert out[2]["other"] is True and out[2]["kafka"] is None
    ranged = ok("--lake", lake, "scan", "-p", "events", "--from", "0").rows()
    assert len(ranged) == 2


def test_a_load_says_how_many_records_lack_the_key(lake: str, tmp_path: Path) -> None:
    """Kept, as the spec wants, but said: most often a misnamed column, or a file read
    as the wrong format (here, a key column named otherwise)."""
    ok("--lake", lake, "create", "people", "-k", "id")
    good = tmp_path / "good.csv"
    good.write_text("id,name\n1,ann\n")
    misnamed = tmp_path / "misnamed.csv"
    misnamed.write_text("person_id,name\n2,bob\n3,cy\n")
    assert "lack the key" not in ok("--lake", lake, "load", "-p", "people", str(good)).err
    said = ok("--lake", lake, "load", "-p", "people", str(misnamed)).err
    assert "note: 2 of these record(s) lack the key: kept as keyless" in said
    said = ok("--lake", lake, "add", "-p", "people", str(misnamed)).err
    assert "note: 2 of these record(s) lack the key" in said
    rows = ok("--lake", lake, "scan", "-p", "people").rows()  # the staged two: not yet
    assert [r["id"] for r in rows] == [1, None, None]


def test_csv_split_by_semicolons_or_bars_loads_as_columns(lake: str, tmp_path: Path) -> None:
    """A spreadsheet with a decimal comma writes ``;``, many exports ``|``: the fields
    are found (a quoted separator is text), not one column of keyless rows."""
    ok("--lake", lake, "create", "prices", "-k", "id")
    semi = tmp_path / "semi.csv"
    semi.write_text('id;name;price\n2;"pear; green";2,00\n1;apple;1,50\n')
    bars = tmp_path / "bars.txt"
    bars.write_text("id|name|price\n3|fig|0,75\n")
    loaded = ok("--lake", lake, "load", "-p", "prices", str(semi))
    assert "lack the key" not in loaded.err
    ok("--lake", lake, "load", "-p", "prices", "-i", "csv", str(bars))
    assert ok("--lake", lake, "scan", "-p", "prices").rows() == [
        {"id": 1, "name": "apple", "price": "1,50"},
        {"id": 2, "name": "pear; green", "price": "2,00"},
        {"id": 3, "name": "fig", "price": "0,75"},
    ]


def test_bad_input_changes_nothing(lake: str, lake_path: str, tmp_path: Path) -> None:
    ok("--lake", lake, "create", "logs", "-k", "ts")
    good = ndjson(tmp_path / "good.ndjson", [{"ts": 1}])
    bad = tmp_path / "bad.ndjson"
    bad.write_text('{"ts": 1}\n{"ts": 2\n')
    empty = tmp_path / "empty.ndjson"
    empty.write_text("")
    before = snapshot_files(lake_path)
    r = fail("--lake", lake, "load", "-p", "logs", good, str(bad))
    assert "bad.ndjson" in r.err and "line 2" in r.err
    assert "empty.ndjson" in fail("--lake", lake, "load", "-p", "logs", str(empty)).err
    assert "nope.ndjson" in fail("--lake", lake, "load", "-p", "logs", "nope.ndjson").err
    structs = ndjson(tmp_path / "s.ndjson", [{"ts": {"a": 1}}])
    assert "cannot be sorted" in fail("--lake", lake, "load", "-p", "logs", structs).err
    after = {p: s for p, s in snapshot_files(lake_path).items() if "/data/" not in p}
    assert after == {p: s for p, s in before.items() if "/data/" not in p}
    assert ok("--lake", lake, "scan", "-p", "logs").rows() == []
    ok("--lake", lake, "verify")


def test_schema_violation_rejected(lake: str, tmp_path: Path) -> None:
    schema = tmp_path / "schema.json"
    schema.write_text(
        json.dumps(
            {
                "row_keys": [{"name": "id", "type": "int64"}],
                "values": [{"name": "name", "type": "string"}],
            }
        )
    )
    ok("--lake", lake, "create", "people", "--schema", str(schema))
    assert ok("--lake", lake, "ls").rows()[0]["key"] == "id"
    good = ndjson(tmp_path / "g.ndjson", [{"id": 2, "name": "b"}, {"id": 1, "name": "a"}])
    ok("--lake", lake, "load", "-p", "people", good)
    extra = ndjson(tmp_path / "x.ndjson", [{"id": 3, "name": "c", "age": 4}])
    assert "age" in fail("--lake", lake, "load", "-p", "people", extra).err
    badtype = ndjson(tmp_path / "t.ndjson", [{"id": 4, "name": "d"}, {"id": "x", "name": "e"}])
    assert "t.ndjson" in fail("--lake", lake, "load", "-p", "people", badtype).err
    assert [r["id"] for r in ok("--lake", lake, "scan", "-p", "people").rows()] == [1, 2]


# -- staged loads ----------------------------------------------------------------------


def test_add_stage_commit(lake: str, tmp_path: Path) -> None:
    ok("--lake", lake, "create", "logs", "-k", "ts")
    a = ok("--lake", lake, "add", "-p", "logs", ndjson(tmp_path / "a.ndjson", [{"ts": 2}]))
    b = ok("--lake", lake, "add", "-p", "logs", ndjson(tmp_path / "b.ndjson", [{"ts": 1}]))
    assert ok("--lake", lake, "scan", "-p", "logs").rows() == []
    staged = ok("--lake", lake, "stage", "-p", "logs").rows()
    assert sorted(s["id"] for s in staged) == sorted([a.text.strip(), b.text.strip()])
    ok("--lake", lake, "stage", "-p", "logs", "--drop", b.text.strip())
    commit = ok("--lake", lake, "commit", "-p", "logs", "-m", "staged")
    assert len(commit.text.strip()) == 27
    assert keys_of(ok("--lake", lake, "scan", "-p", "logs")) == [2]
    assert ok("--lake", lake, "stage", "-p", "logs").rows() == []
    assert "nothing staged" in fail("--lake", lake, "commit", "-p", "logs").err


# -- reading -------------------------------------------------------------------------------


def _three_loads(lake: str, tmp_path: Path) -> list[str]:
    ok("--lake", lake, "create", "logs", "-k", "ts")
    ids = []
    for i, chunk in enumerate([[5, 1, 9], [3, 7], [2, 8, 4, 6]]):
        f = ndjson(tmp_path / f"{i}.ndjson", [{"ts": t, "batch": i} for t in chunk])
        ids.append(ok("--lake", lake, "load", "-p", "logs", f).text.strip())
    return ids


def test_scan_ranges_order_limit(lake: str, tmp_path: Path) -> None:
    _three_loads(lake, tmp_path)
    scan = ["--lake", lake, "scan", "-p", "logs"]
    assert keys_of(ok(*scan)) == list(range(1, 10))
    assert keys_of(ok(*scan, "--from", "3", "--to", "7")) == [3, 4, 5, 6]
    assert keys_of(ok(*scan, "--order", "desc", "--limit", "3")) == [9, 8, 7]
    assert keys_of(ok(*scan, "--from", "8")) == [8, 9]
    assert keys_of(ok(*scan, "--to", "2")) == [1]
    assert "not a valid" in fail(*scan, "--from", "abc").err


def test_get_point_lookup(lake: str, tmp_path: Path) -> None:
    _three_loads(lake, tmp_path)
    rows = ok("--lake", lake, "get", "-p", "logs", "7", "2", "42").rows()
    assert sorted(r["ts"] for r in rows) == [2, 7]


def test_time_travel(lake: str, tmp_path: Path) -> None:
    ids = _three_loads(lake, tmp_path)
    assert len(keys_of(ok("--lake", lake, "scan", "-p", f"logs@{ids[0]}"))) == 3
    assert len(keys_of(ok("--lake", lake, "scan", "-p", "logs@main~1"))) == 5
    assert len(keys_of(ok("--lake", lake, "scan", "-p", "logs@main~2"))) == 3
    assert len(keys_of(ok("--lake", lake, "scan", "-p", f"logs@{ids[1][:12]}"))) == 5
    log = ok("--lake", lake, "log", "-p", "logs", "-f", "json")
    dates = {c["id"]: c["date"] for c in json.loads(log.text)}
    as_of = dates[ids[2]]  # the third commit's own date: the branch with that commit
    assert len(keys_of(ok("--lake", lake, "scan", "-p", "logs", "--as-of", as_of))) == 9
    just_before = (dt.datetime.fromisoformat(as_of) - dt.timedelta(microseconds=1)).isoformat()
    assert len(keys_of(ok("--lake", lake, "scan", "-p", "logs", "--as-of", just_before))) == 5
    assert (
        "did not exist"
        in fail("--lake", lake, "scan", "-p", "logs", "--as-of", "2000-01-01T00:00:00").err
    )
    assert "no branch" in fail("--lake", lake, "scan", "-p", "logs@zzzzzzzz").err
    assert "only" in fail("--lake", lake, "scan", "-p", "logs@main~9").err


def test_query_pools_and_meta_tables(lake: str, tmp_path: Path) -> None:
    ids = _three_loads(lake, tmp_path)
    q = ["--lake", lake, "query"]
    assert ok(*q, "SELECT count(*) AS n FROM logs").rows() == [{"n": 9}]
    assert ok(*q, f'SELECT count(*) AS n FROM "logs@{ids[0]}"').rows() == [{"n": 3}]
    assert ok(*q, 'SELECT count(*) AS n FROM "logs@main~1"').rows() == [{"n": 5}]
    objs = ok(*q, 'SELECT id, rows FROM "logs:objects" ORDER BY id').rows()
    assert sum(o["rows"] for o in objs) == 9 and len(objs) == 3
    commits = ok(*q, 'SELECT id FROM "logs:commits"').rows()
    assert {c["id"] for c in commits} >= set(ids)
    assert ok(*q, 'SELECT name, key FROM ":pools"').rows() == [{"name": "logs", "key": "ts"}]
    branches = ok(*q, 'SELECT name FROM "logs:branches"').rows()
    assert branches == [{"name": "main"}]
    assert "SQL" in fail(*q, "SELEKT nonsense").err
    assert "not found" in fail(*q, "SELECT * FROM nopool").err


@pytest.mark.parametrize("fmt", ["table", "ndjson", "json", "csv", "parquet", "arrow"])
def test_output_formats(lake: str, tmp_path: Path, fmt: str) -> None:
    _three_loads(lake, tmp_path)
    r = ok("--lake", lake, "-f", fmt, "scan", "-p", "logs", "--limit", "2")
    if fmt == "ndjson":
        assert keys_of(r) == [1, 2]
    elif fmt == "json":
        assert [x["ts"] for x in json.loads(r.text)] == [1, 2]
    elif fmt == "csv":
        assert r.text.splitlines()[0].replace('"', "") in ("ts,batch", "batch,ts")
        assert len(r.text.splitlines()) == 3
    elif fmt == "parquet":
        assert pq.read_table(pa.BufferReader(r.out)).column("ts").to_pylist() == [1, 2]
    elif fmt == "arrow":
        table = pa.ipc.open_stream(r.out).read_all()
        assert table.column("ts").to_pylist() == [1, 2]
    else:
        lines = r.text.splitlines()
        assert lines[0].split() in (["ts", "batch"], ["batch", "ts"]) and len(lines) == 3


# -- deleting and reverting ------------------------------------------------------------


def test_delete_where_rewrites_only_affected(lake: str, tmp_path: Path) -> None:
    _three_loads(lake, tmp_path)
    before = {o["id"] for o in ok("--lake", lake, "query", 'SELECT id FROM "logs:objects"').rows()}
    ok("--lake", lake, "delete", "-p", "logs", "--where", "ts = 7")
    after = {o["id"] for o in ok("--lake", lake, "query", 'SELECT id FROM "logs:objects"').rows()}
    assert len(before - after) == 1 and len(after - before) == 1
    assert keys_of(ok("--lake", lake, "scan", "-p", "logs")) == [1, 2, 3, 4, 5, 6, 8, 9]
    commits = len(ok("--lake", lake, "log", "-p", "logs").rows())
    nothing = fail("--lake", lake, "delete", "-p", "logs", "--where", "ts > 100")
    assert "no rows match" in nothing.err
    assert len(ok("--lake", lake, "log", "-p", "logs").rows()) == commits
    assert "SQL" in fail("--lake", lake, "delete", "-p", "logs", "--where", "ts >>> 1").err


def test_delete_objects_and_revert(lake: str, tmp_path: Path) -> None:
    ids = _three_loads(lake, tmp_path)
    objs = ok("--lake", lake, "query", 'SELECT id, rows FROM "logs:objects"').rows()
    three = next(o["id"] for o in objs if o["rows"] == 3)
    deleted = ok("--lake", lake, "delete", "-p", "logs", three).text.strip()
    assert len(keys_of(ok("--lake", lake, "scan", "-p", "logs"))) == 6
    assert "no such object" in fail("--lake", lake, "delete", "-p", "logs", three).err
    ok("--lake", lake, "revert", "-p", "logs", deleted)
    assert len(keys_of(ok("--lake", lake, "scan", "-p", "logs"))) == 9
    ok("--lake", lake, "revert", "-p", "logs", ids[1])
    assert keys_of(ok("--lake", lake, "scan", "-p", "logs")) == [1, 2, 4, 5, 6, 8, 9]
    assert "conflict" in fail("--lake", lake, "revert", "-p", "logs", ids[1]).err
    ok("--lake", lake, "verify")


def test_vacuum(lake: str, lake_path: str, tmp_path: Path) -> None:
    ids = _three_loads(lake, tmp_path)
    ok("--lake", lake, "delete", "-p", "logs", "--where", "ts < 100")
    data = sorted(p for p in snapshot_files(lake_path) if "/data/" in p and p.endswith(".parquet"))
    assert len(data) == 3
    # all history is retained by default: nothing is unreachable yet
    assert "removed 0" in ok("--lake", lake, "vacuum", "-p", "logs", "--grace", "0").err
    # with no retention, objects only old commits hold are freed (after the grace period)
    young = ok("--lake", lake, "vacuum", "-p", "logs", "--retention", "0")
    assert "removed 0" in young.err and "3 younger" in young.err
    vac = ["--lake", lake, "vacuum", "-p", "logs", "--retention", "0", "--grace", "0"]
    dry = ok(*vac, "--dry-run")
    assert len(dry.text.splitlines()) == 3 and "would remove 3" in dry.err
    assert sorted(p for p in snapshot_files(lake_path) if p.endswith(".parquet")) == data
    ok(*vac)
    assert [p for p in snapshot_files(lake_path) if "/data/" in p] == []
    assert ok("--lake", lake, "scan", "-p", "logs").rows() == []
    assert "removed" in fail("--lake", lake, "scan", "-p", f"logs@{ids[0]}").err
    ok("--lake", lake, "verify")


def test_key_of_another_type_family_is_refused(lake: str, lake_path: str, tmp_path: Path) -> None:
    ok("--lake", lake, "create", "p", "-k", "k")
    ok("--lake", lake, "load", "-p", "p", ndjson(tmp_path / "a.ndjson", [{"k": 1}, {"k": 9}]))
    before = snapshot_files(lake_path)
    text = ndjson(tmp_path / "b.ndjson", [{"k": "3"}, {"k": "7"}])
    r = fail("--lake", lake, "load", "-p", "p", text)
    assert r.err.startswith("error: ") and len(r.err.strip().splitlines()) == 1
    assert "key field 'k' is string in this load but int64" in r.err
    assert snapshot_files(lake_path) == before  # nothing written is left behind
    # the same family widens: floats interleave with the integers
    ok("--lake", lake, "load", "-p", "p", ndjson(tmp_path / "c.ndjson", [{"k": 2.5}]))
    assert keys_of(ok("--lake", lake, "scan", "-p", "p"), "k") == [1.0, 2.5, 9.0]
    ok("--lake", lake, "verify")


def test_split_a_partition(lake: str, tmp_path: Path) -> None:
    ok("--lake", lake, "create", "logs", "-k", "ts")
    data = ndjson(tmp_path / "a.ndjson", [{"ts": t} for t in [1, 2, 3, 4]])
    ok("--lake", lake, "load", "-p", "logs", data)
    r = ok("--lake", lake, "split", "-p", "logs", "root")  # at the median
    assert len(r.text.strip()) == 27 and r.err == "split partition root at 3\n"
    q = 'SELECT lo, hi, rows FROM "logs:partitions" WHERE leaf ORDER BY hi NULLS LAST'
    leaves = ok("--lake", lake, "query", q).rows()
    assert leaves == [{"lo": None, "hi": "[3]", "rows": 2}, {"lo": "[3]", "hi": None, "rows": 2}]
    assert keys_of(ok("--lake", lake, "scan", "-p", "logs")) == [1, 2, 3, 4]
    assert "no partition 'nope'" in fail("--lake", lake, "split", "-p", "logs", "nope").err
    fail("--lake", lake, "split", "-p", "logs", "root")  # no longer a leaf

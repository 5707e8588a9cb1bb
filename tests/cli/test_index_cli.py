"""``limno index create|drop|ls`` and ``limno get --field``, on a lake's path and behind a
real ``limno serve`` (``mode``): the same commands, the same answers.

(The property that an indexed lookup equals a filtered scan through any history is
tests/pools/test_indexes.py's.)
"""

from __future__ import annotations

import json
from pathlib import Path

from clirunner import fail, ok, run
from git_scenarios import Lk, init_lake
from lake_modes import local_only

STATUS = ("new", "open", "done")


def load_rows(lk: Lk, ref: str, keys: range, status: str | None = None) -> str:
    rows = [
        {"ts": k, "status": status or STATUS[k % 3], "uid": f"u{k}", "n": k % 4, "at": {"d": k}}
        for k in keys
    ]
    return lk.ok("load", "-p", ref, lk.file(rows)).text.strip()


def test_create_get_list_drop(lk: Lk) -> None:
    lk.ok("create", "logs", "-k", "ts")
    load_rows(lk, "logs", range(0, 12))
    made = lk.ok("index", "create", "-p", "logs", "status", "uid", "at.d", "-m", "ix")
    commit = made.text.strip()
    assert len(commit) == 27 and "indexed status, uid, at.d on logs@main" in made.err
    load_rows(lk, "logs", range(12, 20))  # indexed as it is written
    listed = lk.ok("index", "ls", "-p", "logs", "-f", "ndjson").rows()
    assert [r["field"] for r in listed] == ["at.d", "status", "uid"]
    assert all(len(r["id"]) == 27 for r in listed)
    got = lk.ok("get", "-p", "logs", "--field", "status", "open", "-f", "ndjson").rows()
    assert [r["ts"] for r in got] == [k for k in range(20) if k % 3 == 1]
    got = lk.ok("get", "-p", "logs", "--field", "uid", "u3", "u17", "nobody").rows()
    assert [r["ts"] for r in got] == [3, 17]
    assert [r["ts"] for r in lk.ok("get", "-p", "logs", "--field", "at.d", "5").rows()] == [5]
    # a field without an index is read whole: the same answer
    assert [r["ts"] for r in lk.ok("get", "-p", "logs", "--field", "n", "3").rows()] == [
        3,
        7,
        11,
        15,
        19,
    ]
    log = lk.log("logs", "-n", "2")[1]
    assert log["id"] == commit and log["message"] == "ix"
    assert {a["id"] for a in log["actions"]} == {"~index/status", "~index/uid", "~index/at.d"}
    assert {a["op"] for a in log["actions"]} == {"create"}
    sql = 'SELECT field FROM "logs:indexes" ORDER BY field'
    assert [r["field"] for r in lk.ok("query", sql).rows()] == ["at.d", "status", "uid"]
    dropped = lk.ok("index", "drop", "-p", "logs", "uid")
    assert "dropped the index on uid from logs@main" in dropped.err
    assert [r["field"] for r in lk.ok("index", "ls", "-p", "logs").rows()] == ["at.d", "status"]
    old = lk.ok("index", "ls", "-p", f"logs@{commit}").rows()
    assert [r["field"] for r in old] == ["at.d", "status", "uid"]


def test_sql_filters_on_an_indexed_field_answer_alike(lk: Lk) -> None:
    lk.ok("create", "logs", "-k", "ts")
    for start in range(0, 30, 10):
        load_rows(lk, "logs", range(start, start + 10), "rare" if start == 10 else None)
    sql = "SELECT count(*) AS n FROM logs WHERE status IN ('rare', 'x') AND ts >= 15"
    before = lk.ok("query", sql).rows()
    lk.ok("index", "create", "-p", "logs", "status")
    assert lk.ok("query", sql).rows() == before == [{"n": 5}]


def test_sql_finds_a_decimal_by_an_integer_constant(lk: Lk) -> None:
    """``price = 7`` on a decimal(10,2) column: the sidecars once ruled 7 out (an int64
    fits no decimal(10,2)), so the query found nothing."""
    import decimal

    import pyarrow as pa
    import pyarrow.parquet as pq

    prices = [decimal.Decimal(p) for p in ("7.00", "1.10", "7.01")]
    path = lk.tmp / "prices.parquet"
    pq.write_table(
        pa.table({"ts": [1, 2, 3], "price": pa.array(prices, pa.decimal128(10, 2))}), path
    )
    lk.ok("create", "sales", "-k", "ts")
    lk.ok("load", "-p", "sales", str(path))
    sql = "SELECT ts FROM sales WHERE price = 7 OR price IN (1.1) ORDER BY ts"
    before = lk.ok("query", sql, "-f", "ndjson").rows()
    lk.ok("index", "create", "-p", "sales", "price")
    assert lk.ok("query", sql, "-f", "ndjson").rows() == before == [{"ts": 1}, {"ts": 2}]
    only = "SELECT ts FROM sales WHERE price = 7"
    assert lk.ok("query", only, "-f", "ndjson").rows() == [{"ts": 1}]
    assert lk.ok("get", "-p", "sales", "--field", "price", "7", "-f", "ndjson").rows()[0]["ts"] == 1


def test_branches_keep_their_own_indexes(lk: Lk) -> None:
    lk.ok("create", "logs", "-k", "ts")
    load_rows(lk, "logs", range(0, 6))
    lk.ok("branch", "-p", "logs", "dev")
    lk.ok("index", "create", "-p", "logs@dev", "uid")
    load_rows(lk, "logs", range(6, 9))
    assert lk.ok("index", "ls", "-p", "logs").rows() == []
    lk.ok("merge", "-p", "logs", "dev")
    assert [r["field"] for r in lk.ok("index", "ls", "-p", "logs").rows()] == ["uid"]
    assert [r["ts"] for r in lk.ok("get", "-p", "logs", "--field", "uid", "u7").rows()] == [7]
    lk.ok("compact", "-p", "logs")
    assert [r["ts"] for r in lk.ok("get", "-p", "logs", "--field", "uid", "u7").rows()] == [7]


def test_refusals_are_one_error_line(lk: Lk) -> None:
    lk.ok("create", "logs", "-k", "ts")
    load_rows(lk, "logs", range(0, 3))
    lk.ok("index", "create", "-p", "logs", "status")
    r = lk.fail("index", "create", "-p", "logs", "status")
    assert "already has an index on status" in r.err
    r = lk.fail("index", "drop", "-p", "logs", "uid")
    assert "has no index on uid" in r.err
    r = lk.fail("index", "create", "-p", "logs", "a,b")
    assert "invalid index field" in r.err
    r = lk.fail("get", "-p", "logs", "--field", "n", "two")
    assert "not a valid" in r.err
    r = lk.fail("index", "create", "-p", "nosuch", "status")
    assert "nosuch" in r.err


@local_only("it deletes a sidecar file in the lake's directory")
def test_verify_names_a_missing_sidecar(tmp_path: Path, mode: str) -> None:
    lake = init_lake(str(tmp_path / "lake"))
    lk = Lk(lake, tmp_path)
    lk.ok("create", "logs", "-k", "ts")
    load_rows(lk, "logs", range(0, 4))
    lk.ok("index", "create", "-p", "logs", "status")
    ok("--lake", lake, "verify")
    (sidecar,) = Path(lake).glob("*/data/*.idx")
    sidecar.unlink()
    r = fail("--lake", lake, "verify")
    assert "sidecar of the index on 'status' is missing" in r.err
    assert "limno index drop/create" in r.err
    got = run("--lake", lake, "get", "-p", "logs", "--field", "status", "new")
    assert got.code == 0 and [json.loads(x)["ts"] for x in got.text.splitlines()] == [0, 3]
    lk.ok("index", "drop", "-p", "logs", "status")
    lk.ok("index", "create", "-p", "logs", "status")
    ok("--lake", lake, "verify")


def test_the_python_api_answers_alike(lk: Lk) -> None:
    """``Lake.open(location)``: in process on the path, the HTTP client on the server."""
    from limno import Lake

    lk.ok("create", "logs", "-k", "ts")
    load_rows(lk, "logs", range(0, 9))
    lake = Lake.open(lk.lake)
    try:
        pool = lake.pool("logs")
        made = pool.create_index(["n", "status"], message="by api")
        assert made.message == "by api" and len(made.actions) == 2
        assert [s.field for s in pool.indexes()] == ["n", "status"]
        assert pool.search("n", [1, 3]).column("ts").to_pylist() == [1, 3, 5, 7]
        assert pool.search("status", "done").column("ts").to_pylist() == [2, 5, 8]
        assert pool.search("n", [9]).num_rows == 0
        pool.drop_index("n")
        assert [s.field for s in pool.indexes()] == ["status"]
        assert [s.field for s in pool.indexes(made.id)] == ["n", "status"]
    finally:
        close = getattr(lake, "close", None)
        if close is not None:
            close()

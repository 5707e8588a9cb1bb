"""SQL from someone else: ``delete --where`` predicates are one expression, never pasted
into SQL text, and ``query`` in safe mode is one read-only query that reaches no file,
network, extension or setting."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from clirunner import fail, ok
from limno.api.local import LocalLake as Lake
from limno.data.predicates import filter_rows
from limno.data.sql_safety import lock_down
from limno.engines.local import query
from limno.errors import ForbiddenError, InvalidInputError

#: the reported injection: it closes the predicate, runs a COPY, and reopens
INJECTION = (
    "false), false) AS m FROM t; COPY (SELECT 'pwned' AS x) TO '{path}'; SELECT coalesce((false"
)


@pytest.fixture(autouse=True)
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "home" / ".config"))
    monkeypatch.delenv("LIMNO_LAKE", raising=False)
    monkeypatch.delenv("LIMNO_SQL_SAFE", raising=False)


@pytest.fixture
def lake(tmp_path: Path) -> Lake:
    """A lake with pool ``logs`` (key ``ts``) of two commits."""
    lake = Lake.init(str(tmp_path / "lake"))
    logs = lake.create_pool("logs", key="ts")
    logs.load([pa.table({"ts": [1, 2, 3], "level": ["info", "debug", "info"]})], message="one")
    logs.load([pa.table({"ts": [4, 5], "level": ["warn", "debug"]})], message="two")
    return lake


def _state(lake: Lake) -> tuple[list[str], list[dict[str, object]]]:
    """What a change would alter: the commit ids and the rows of ``logs``."""
    pool = lake.pool("logs")
    return [c.id for c in pool.log()], pool.scan().to_pylist()


# -- delete --where ------------------------------------------------------------------------


def test_reported_injection_writes_no_file_and_changes_nothing(lake: Lake, tmp_path: Path) -> None:
    # the payload is real: pasted into the old statement text, DuckDB writes the file
    witness = tmp_path / "witness.csv"
    con = duckdb.connect()
    try:
        con.register("t", pa.table({"ts": [1]}))
        con.sql(f"SELECT coalesce(({INJECTION.format(path=witness)}), false) AS m FROM t")
    finally:
        con.close()
    assert witness.exists()

    target = tmp_path / "pwned.csv"
    before = _state(lake)
    where = INJECTION.format(path=target)
    r = fail("--lake", lake.uri, "delete", "-p", "logs", "--where", where)
    assert "SQL: predicate" in r.err and "COPY" in r.err
    assert not target.exists()
    assert _state(lake) == before


HOSTILE_PREDICATES = [
    "ts IN (SELECT * FROM read_csv('/etc/passwd'))",
    "EXISTS (SELECT 1)",
    "ts > (SELECT max(ts) FROM logs)",
    "read_text('/etc/passwd') IS NOT NULL",
    "getenv('HOME') IS NOT NULL",
    "len(glob('/etc/*')) > 0",
    "current_setting('threads') IS NOT NULL",
    "count(*) > 0",
    "max(ts) = ts",
    "row_number() OVER (PARTITION BY level ORDER BY ts) = 1",
    "*",
    "COLUMNS('t.*') = 1",
    "ts = $1",
    "ts = 1; SELECT 1",
    "ts = 1) OR (true",
    "ts = 1 ORDER BY 1",
    "ts = 1, ts = 2",
    "ts = 1); COPY (SELECT 1) TO '{path}'; SELECT (1",
]


@pytest.mark.parametrize("predicate", HOSTILE_PREDICATES)
def test_hostile_predicates_are_refused(predicate: str, lake: Lake, tmp_path: Path) -> None:
    target = tmp_path / "copied.csv"
    predicate = predicate.format(path=target)
    table = lake.pool("logs").scan()
    with pytest.raises(InvalidInputError, match="predicate") as e:
        filter_rows(table, predicate)
    assert predicate in str(e.value)
    before = _state(lake)
    with pytest.raises(InvalidInputError):
        lake.pool("logs").delete_where(predicate)
    assert _state(lake) == before and not target.exists()


def test_predicate_semantics() -> None:
    table = pa.table({"ts": [3, 1, 2, 4], "msg": ["a", None, "b", "a"]})
    kept, n = filter_rows(table, "ts = 2 OR msg = 'a'")
    assert n == 3 and kept.to_pylist() == [{"ts": 1, "msg": None}]
    # NULL counts as false: the row whose msg is NULL is kept
    kept, n = filter_rows(table, "msg <> 'b'")
    assert n == 2 and kept.column("ts").to_pylist() == [1, 2]
    assert filter_rows(table, "NULL") == (table, 0)
    # a column this object lacks matches none of its rows
    assert filter_rows(table, "level = 'debug'") == (table, 0)
    # scalar functions, IN lists, LIKE, GLOB, CASE, a trailing comment
    for predicate, count in [
        ("list_contains([1, 4], ts)", 2),
        ("ts IN (1, 2) AND coalesce(msg, '') = ''", 1),
        ("msg LIKE 'a%' OR msg GLOB 'b*'", 3),
        ("CASE WHEN ts > 2 THEN true ELSE false END", 2),
        ("upper(msg) = 'A' -- the a rows", 2),
    ]:
        kept, n = filter_rows(table, predicate)
        assert (n, kept.num_rows) == (count, 4 - count), predicate
    for predicate in ("ts", "msg", "'yes'"):
        with pytest.raises(InvalidInputError, match="not a condition"):
            filter_rows(table, predicate)
    with pytest.raises(InvalidInputError, match="SQL"):
        filter_rows(table, "ts >>> 1")


def test_delete_where_over_objects_of_different_shapes(lake: Lake) -> None:
    logs = lake.pool("logs")
    logs.load([pa.table({"ts": [6, 7], "host": ["a", "b"]})])
    # the objects without a host column match none of their rows, ts = 1 included
    commit = logs.delete_where("host = 'b' OR ts = 1")
    assert commit.meta["deleted_rows"] == 1
    assert [r["ts"] for r in logs.scan().to_pylist()] == [1, 2, 3, 4, 5, 6]


# -- query in safe mode -------------------------------------------------------------------


HOSTILE_QUERIES = [
    "COPY (SELECT * FROM logs) TO '{path}'",
    "SELECT 1; COPY (SELECT * FROM logs) TO '{path}'",
    "SELECT 1 AS a; SELECT 2 AS b",
    "EXPORT DATABASE '{dir}'",
    "IMPORT DATABASE '{dir}'",
    "ATTACH '{dir}/x.db' AS x",
    "DETACH memory",
    "INSTALL httpfs",
    "LOAD httpfs",
    "SET enable_external_access = true",
    "RESET threads",
    "SET VARIABLE v = 1",
    "PRAGMA version",
    "CALL pragma_version()",
    "CREATE TABLE x AS SELECT 1",
    "CREATE SECRET (TYPE s3)",
    "INSERT INTO logs VALUES (9, 'x')",
    "UPDATE logs SET ts = 0",
    "DELETE FROM logs",
    "WITH a AS (SELECT 1) INSERT INTO logs SELECT * FROM a",
    "EXPLAIN SELECT 1",
    "PIVOT logs ON level USING count(*)",
    "SELECT * FROM (PIVOT logs ON level USING count(*))",
    "USE memory",
    "BEGIN",
    "SELECT * FROM read_csv('{file}')",
    "SELECT * FROM read_csv_auto('{file}')",
    "SELECT * FROM read_parquet('{file}')",
    "SELECT * FROM parquet_scan('{file}')",
    "SELECT * FROM read_json('{file}')",
    "SELECT * FROM read_text('{file}')",
    "SELECT * FROM read_blob('{file}')",
    "SELECT * FROM sniff_csv('{file}')",
    "SELECT * FROM glob('{dir}/*')",
    "SELECT * FROM '{file}'",
    "FROM '{file}'",
    "SELECT * FROM 's3://bucket/key.parquet'",
    "SELECT ts FROM logs WHERE ts IN (SELECT * FROM read_csv('{file}'))",
    "WITH f AS (SELECT * FROM read_text('{file}')) SELECT * FROM f",
    "SELECT current_setting('threads')",
    "SELECT getenv('HOME')",
    "SELECT * FROM query('SELECT 1')",
    "SELECT * FROM duckdb_settings()",
    "SELECT * FROM duckdb_secrets()",
    "SELECT * FROM enable_logging()",
    "SELECT * FROM information_schema.tables",
    "SELECT * FROM system.main.duckdb_tables",
    "SELECT * FROM json_execute_serialized_sql('x')",
]


@pytest.mark.parametrize("sql", HOSTILE_QUERIES)
def test_hostile_queries_are_refused_in_safe_mode(sql: str, lake: Lake, tmp_path: Path) -> None:
    probe = tmp_path / "probe.csv"
    probe.write_text("a,b\n1,2\n")
    out = tmp_path / "out"
    sql = sql.format(path=out / "copy.csv", dir=out, file=probe)
    before = _state(lake)
    with pytest.raises(ForbiddenError, match="not allowed in safe mode"):
        query(lake, sql, safe=True)
    assert not out.exists()
    assert _state(lake) == before


ORDINARY_QUERIES = [
    "SELECT level, count(*) AS n FROM logs GROUP BY level ORDER BY level",
    'SELECT a.ts, b.level FROM logs a JOIN "logs@main~1" b ON a.ts = b.ts ORDER BY 1',
    "WITH d AS (SELECT * FROM logs WHERE level = 'debug') SELECT sum(ts) AS s FROM d",
    "SELECT ts, row_number() OVER (PARTITION BY level ORDER BY ts DESC) AS r FROM logs ORDER BY ts",
    'SELECT count(*) AS n FROM "logs:objects"',
    'SELECT message FROM "logs:commits" ORDER BY date',
    'SELECT kind, name FROM "logs:branches"',
    'SELECT name, "key" FROM ":pools"',
    'SELECT count(*) AS n FROM "logs@main~1"',
    "FROM logs SELECT ts WHERE ts > 2 ORDER BY ts",
    "TABLE logs",
    "VALUES (1, 'a'), (2, 'b')",
    "SELECT x, repeat('-', x) AS bar FROM range(3) t(x)",
    "SELECT ts FROM logs WHERE ts IN (SELECT ts FROM logs WHERE level = 'info') ORDER BY ts",
    "DESCRIBE logs",
    "SELECT 1 AS one;",
]


@pytest.mark.parametrize("sql", ORDINARY_QUERIES)
def test_ordinary_queries_give_the_same_answer_in_safe_mode(sql: str, lake: Lake) -> None:
    safe = query(lake, sql, safe=True)
    assert safe.num_rows > 0
    assert safe.equals(query(lake, sql, safe=False))


def test_locked_connection_refuses_files_and_setting_changes(tmp_path: Path) -> None:
    con = duckdb.connect()
    try:
        con.register("t", pa.table({"x": [1, 2]}))
        lock_down(con)
        assert con.sql("SELECT sum(x) AS s FROM t").fetchall() == [(3,)]
        with pytest.raises(duckdb.Error, match="disabled by configuration"):
            con.sql(f"COPY t TO '{tmp_path / 'out.csv'}'")
        with pytest.raises(duckdb.Error, match="locked"):
            con.execute("SET enable_external_access = true").fetchall()
        with pytest.raises(duckdb.Error, match="locked"):
            con.execute("SET lock_configuration = false").fetchall()
    finally:
        con.close()
    assert not (tmp_path / "out.csv").exists()


# -- the CLI -------------------------------------------------------------------------------


def test_cli_query_safe_is_opt_in(
    lake: Lake, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    probe = tmp_path / "probe.csv"
    probe.write_text("a,b\n1,2\n")
    reads_file = f"SELECT a, b FROM read_csv('{probe}')"
    # the CLI runs trusted SQL by default
    assert ok("--lake", lake.uri, "query", reads_file).rows() == [{"a": 1, "b": 2}]
    r = fail("--lake", lake.uri, "query", "--safe", reads_file)
    assert "error: SQL: table function read_csv() not allowed in safe mode" in r.err
    out = tmp_path / "copy.csv"
    r = fail("--lake", lake.uri, "query", "--safe", f"COPY logs TO '{out}'")
    assert "SQL: COPY not allowed in safe mode" in r.err and not out.exists()
    safe_rows = ok("--lake", lake.uri, "query", "--safe", ORDINARY_QUERIES[0]).rows()
    assert safe_rows == ok("--lake", lake.uri, "query", ORDINARY_QUERIES[0]).rows()

    monkeypatch.setenv("LIMNO_SQL_SAFE", "1")
    assert "not allowed in safe mode" in fail("--lake", lake.uri, "query", reads_file).err
    monkeypatch.setenv("LIMNO_SQL_SAFE", "0")
    assert ok("--lake", lake.uri, "query", reads_file).rows() == [{"a": 1, "b": 2}]
    monkeypatch.setenv("LIMNO_SQL_SAFE", "sometimes")
    assert "LIMNO_SQL_SAFE must be 1 or 0" in fail("--lake", lake.uri, "query", "SELECT 1").err


def test_cli_delete_where_refusal_is_one_error_line(lake: Lake) -> None:
    before = _state(lake)
    r = fail("--lake", lake.uri, "delete", "-p", "logs", "--where", "ts IN (SELECT 1)")
    assert r.err.strip().splitlines() == [
        "error: SQL: predicate 'ts IN (SELECT 1)': a subquery is not allowed"
        " (a predicate is a condition on each row's own columns)"
    ]
    assert _state(lake) == before
    ok("--lake", lake.uri, "delete", "-p", "logs", "--where", "level = 'debug'")
    assert [r["ts"] for r in lake.pool("logs").scan().to_pylist()] == [1, 3, 4]

"""SQL a server runs for someone else (safe mode): each way out of the query is refused
with 403 (well-formed, not allowed) or 400 (malformed), and leaves nothing behind:
no file written, no setting changed, no extension installed, no pool changed, no
secret shown. The caller's pool grants (``readable``) are respected."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest

from clirunner import fail
from limno.api.local import LocalLake as Lake
from limno.engines.local import query
from limno.errors import ForbiddenError, InvalidInputError, LimnoError, http_status

SECRET = "s3cr3t-value-of-the-server"


@pytest.fixture(autouse=True)
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "home" / ".config"))
    monkeypatch.setenv("LIMNO_TEST_SECRET", SECRET)
    monkeypatch.delenv("LIMNO_LAKE", raising=False)
    monkeypatch.delenv("LIMNO_SQL_SAFE", raising=False)


@pytest.fixture
def lake(tmp_path: Path) -> Lake:
    """Pools ``logs`` and ``vault`` (key ``ts``), one commit each."""
    lake = Lake.init(str(tmp_path / "lake"))
    logs = lake.create_pool("logs", key="ts")
    logs.load([pa.table({"ts": [1, 2, 3], "level": ["info", "debug", "info"]})], message="one")
    vault = lake.create_pool("vault", key="ts")
    vault.load([pa.table({"ts": [7], "pin": ["1234"]})], message="v")
    return lake


def _state(lake: Lake) -> list[object]:
    """What a write would alter: the pools, their commits and rows."""
    state: list[object] = [sorted(p.name for p in lake.list_pools())]
    for name in ("logs", "vault"):
        pool = lake.pool(name)
        state += [[c.id for c in pool.log()], pool.scan().to_pylist()]
    return state


def _settings(lake: Lake) -> list[dict[str, object]]:
    """Settings of the DuckDB instance SQL without safe mode runs on (shared in-process),
    and the extensions loaded there."""
    names = ", ".join(
        f"current_setting('{n}') AS {n}"
        for n in ("threads", "enable_external_access", "lock_configuration", "allowed_paths")
    )
    settings = query(lake, f"SELECT {names}").to_pylist()
    loaded = query(lake, "SELECT extension_name FROM duckdb_extensions() WHERE loaded")
    return settings + loaded.to_pylist()


#: (statement, what must not exist afterwards, relative to tmp_path)
ESCAPES: list[tuple[str, str]] = [
    # the server's files
    ("SELECT * FROM read_csv('{probe}')", ""),
    ("SELECT * FROM read_csv_auto(['{probe}'])", ""),
    ("SELECT * FROM read_parquet('{lakefile}')", ""),
    ("SELECT * FROM read_json('{probe}')", ""),
    ("SELECT * FROM read_text('{probe}')", ""),
    ("SELECT * FROM read_blob('{probe}')", ""),
    ("SELECT * FROM glob('{tmp}/*')", ""),
    ("SELECT * FROM '{probe}'", ""),
    ("SELECT * FROM 'https://example.com/x.parquet'", ""),
    ("SELECT ts FROM logs WHERE ts IN (SELECT 1 FROM read_csv('{probe}'))", ""),
    ("SELECT * FROM logs, LATERAL read_text('{probe}')", ""),
    ("FROM json_each(read_text('{probe}'))", ""),
    # writes to files and databases
    ("COPY (SELECT * FROM logs) TO '{tmp}/out/copy.csv'", "out"),
    ("COPY logs FROM '{probe}'", ""),
    ("EXPORT DATABASE '{tmp}/out'", "out"),
    ("IMPORT DATABASE '{tmp}/out'", "out"),
    ("ATTACH '{tmp}/out.db' AS x", "out.db"),
    ("DETACH memory", ""),
    # extensions
    ("INSTALL httpfs", "home/.duckdb"),
    ("LOAD httpfs", "home/.duckdb"),
    ("FORCE INSTALL httpfs", "home/.duckdb"),
    ("UPDATE EXTENSIONS", "home/.duckdb"),
    ("SELECT * FROM duckdb_extensions()", ""),
    # settings and the environment
    ("SET enable_external_access = true", ""),
    ("SET threads = 1", ""),
    ("RESET threads", ""),
    ("SET VARIABLE v = 1", ""),
    ("PRAGMA threads = 1", ""),
    ("SELECT getenv('LIMNO_TEST_SECRET')", ""),
    ("SELECT current_setting('home_directory')", ""),
    ("SELECT * FROM duckdb_settings()", ""),
    ("SELECT name, setting FROM pg_settings", ""),
    ("SELECT sql FROM duckdb_views WHERE NOT internal", ""),
    ("SELECT * FROM duckdb_tables", ""),
    ("SHOW TABLES", ""),
    ("SHOW databases", ""),
    ("DESCRIBE duckdb_views", ""),
    ("SELECT * FROM duckdb_secrets()", ""),
    ("CREATE SECRET (TYPE s3, KEY_ID 'k', SECRET 's')", ""),
    ("CALL pragma_version()", ""),
    ("SELECT * FROM information_schema.tables", ""),
    # writes to pools, temporary or catalog objects
    ("CREATE TABLE t AS SELECT 1", ""),
    ("CREATE TEMP TABLE t AS SELECT * FROM logs", ""),
    ("CREATE OR REPLACE TEMP VIEW logs AS SELECT 1 AS ts", ""),
    ("CREATE MACRO m(x) AS x", ""),
    ("INSERT INTO logs VALUES (9, 'x')", ""),
    ("UPDATE logs SET ts = 0", ""),
    ("DELETE FROM logs", ""),
    ("DROP TABLE logs", ""),
    ("ALTER TABLE logs RENAME TO x", ""),
    ("WITH a AS (SELECT 1) INSERT INTO logs SELECT * FROM a", ""),
    ("CHECKPOINT", ""),
    ("SELECT 1; DROP TABLE logs", ""),
    ("PREPARE p AS SELECT 1", ""),
]


@pytest.mark.parametrize(("sql", "absent"), ESCAPES)
def test_escape_is_forbidden_and_leaves_nothing(
    sql: str, absent: str, lake: Lake, tmp_path: Path
) -> None:
    probe = tmp_path / "probe.csv"
    probe.write_text(f"a,b\n{SECRET},2\n")
    lakefile = next(p for p in (tmp_path / "lake").rglob("*") if p.is_file())
    sql = sql.format(probe=probe, tmp=tmp_path, lakefile=lakefile)
    before, settings = _state(lake), _settings(lake)
    with pytest.raises(ForbiddenError, match="not allowed in safe mode") as e:
        query(lake, sql, safe=True)
    assert http_status(e.value) == 403
    assert SECRET not in str(e.value)
    if absent:
        assert not (tmp_path / absent).exists()
    assert _state(lake) == before
    assert _settings(lake) == settings
    assert os.environ["LIMNO_TEST_SECRET"] == SECRET


@pytest.mark.parametrize(
    "sql", ["SELEC 1", "SELECT * FROM", "SELECT (1", "COPY logs TO", "SELECT 'unterminated"]
)
def test_malformed_sql_is_400(sql: str, lake: Lake) -> None:
    before = _state(lake)
    with pytest.raises(LimnoError) as e:
        query(lake, sql, safe=True)
    assert type(e.value) is InvalidInputError and http_status(e.value) == 400
    assert _state(lake) == before


def test_system_view_names_are_no_way_into_duckdbs_catalog(lake: Lake) -> None:
    # names DuckDB would resolve to its own views: refused, even deep in a query
    for sql in (
        "SELECT * FROM logs WHERE ts IN (SELECT 1 FROM pg_settings)",
        "WITH x AS (FROM sqlite_master) SELECT * FROM x",
        "SUMMARIZE duckdb_columns",
    ):
        with pytest.raises(ForbiddenError, match="catalog"):
            query(lake, sql, safe=True)
    # a name that is neither a pool nor DuckDB's is an unknown pool, not a file
    with pytest.raises(LimnoError, match="x.csv") as e:
        query(lake, "SELECT * FROM 'x.csv'", safe=True)
    assert http_status(e.value) in (400, 404)


def test_safe_queries_still_read_pools_and_meta_tables(lake: Lake) -> None:
    assert query(lake, "SELECT count(*) AS n FROM logs", safe=True).to_pylist() == [{"n": 3}]
    described = query(lake, "DESCRIBE logs", safe=True).column("column_name").to_pylist()
    assert described == ["ts", "level"]
    summary = query(lake, "SUMMARIZE logs", safe=True)
    assert summary.num_rows == 2
    cte = "WITH vault AS (SELECT 1 AS x) SELECT x FROM vault"  # a CTE is not a pool
    assert query(lake, cte, safe=True).to_pylist() == [{"x": 1}]


# -- pool grants ---------------------------------------------------------------------------


def only(*names: str) -> Callable[[str], bool]:
    return lambda pool: pool in names


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM vault",
        'SELECT * FROM "vault@main"',
        'SELECT * FROM "vault@main~0"',
        'SELECT * FROM "vault:commits"',
        'SELECT * FROM "vault@main:objects"',
        "SELECT l.ts FROM logs l JOIN vault v ON l.ts = v.ts",
        "SELECT ts FROM logs WHERE ts IN (SELECT ts FROM vault)",
        "WITH v AS (SELECT * FROM vault) SELECT * FROM v",
    ],
)
@pytest.mark.parametrize("safe", [True, False])
def test_a_pool_the_caller_cannot_read_is_forbidden(sql: str, safe: bool, lake: Lake) -> None:
    with pytest.raises(ForbiddenError, match="pool vault may not be read") as e:
        query(lake, sql, safe=safe, readable=only("logs"))
    assert "1234" not in str(e.value) and http_status(e.value) == 403


def test_grants_hide_pools_from_the_pool_list_and_do_not_leak_existence(lake: Lake) -> None:
    names = query(lake, 'SELECT name FROM ":pools" ORDER BY name', safe=True, readable=only("logs"))
    assert names.to_pylist() == [{"name": "logs"}]
    everything = query(lake, 'SELECT name FROM ":pools" ORDER BY name', safe=True)
    assert everything.column("name").to_pylist() == ["logs", "vault"]
    # a pool that does not exist is as forbidden as one that does
    with pytest.raises(ForbiddenError, match="pool nothing may not be read"):
        query(lake, "SELECT * FROM nothing", safe=True, readable=only("logs"))
    # what the caller may read answers as before, through the API too
    rows = lake.query("SELECT count(*) AS n FROM logs", safe=True, readable=only("logs"))
    assert rows.to_pylist() == [{"n": 3}]
    with pytest.raises(ForbiddenError):
        lake.query("SELECT * FROM vault", safe=True, readable=only("logs"))


def test_cli_safe_refusal_is_one_error_line(lake: Lake, tmp_path: Path) -> None:
    out = tmp_path / "out.csv"
    r = fail("--lake", lake.uri, "query", "--safe", f"COPY logs TO '{out}'")
    assert r.err.strip().splitlines() == [
        "error: SQL: COPY not allowed in safe mode:"
        " only one query (SELECT, WITH, VALUES, TABLE, FROM)"
    ]
    assert not out.exists()
    r = fail("--lake", lake.uri, "query", "--safe", "SELECT * FROM pg_settings")
    assert "DuckDB catalog table pg_settings not allowed" in r.err

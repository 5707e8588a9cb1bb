"""What the ``limno`` process imports before it answers: each module only where it is used.

pyarrow, DuckDB, numpy, pandas (which pyarrow imports when it is installed) and
PySpark take from a tenth of a second to a second each to import. ``--help``,
``ls`` and ``log`` read only the lake's JSON journals, so they must import none of
them; ``get`` reads Parquet (pyarrow, numpy) but never DuckDB, pandas, Spark or
pyarrow.compute. Smaller costs add up as much: the standard library's modules for
what only writers, hooks and engines do (processes, logging, sockets, temporary
files), obstore (a local lake is read with plain system calls), and the layers of
limno a command does not reach: ``--help`` opens no lake, ``ls`` no pool, and
``log`` and ``get`` leave vacuum's protocol, compaction planning and splits alone;
and a command builds only its own module's click commands.
Each case runs the real entry point (``python -m limno``, which calls the
``limno`` script's function) in a fresh process under ``-X importtime`` and reads
the modules it imported: an assertion about imports, not about time (the timing is
the ``cli_start`` benchmark's). Last, the stand-in that defers them (limno.lazy).
"""

from __future__ import annotations

import importlib
import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from clirunner import ok
from limno import Lake
from limno.cli._main import COMMAND_MODULES
from limno.lazy import lazy_module

HEAVY = ("pyarrow", "duckdb", "numpy", "pandas", "pyspark", "confluent_kafka")
#: the server and its client: only 'limno serve' and a lake behind a server need them
SERVER = ("fastapi", "uvicorn", "starlette", "pydantic", "httpx")
#: what only writes, hooks, vacuum, verify and engines use: no command that reads imports it
FOR_WRITERS = ("obstore", "subprocess", "tempfile", "getpass", "secrets", "limno.faults")
#: ... and what only some reads use (pyarrow and numpy import these themselves: ``get``
#: has them)
FOR_SOME = ("logging", "socket", "pathlib", "urllib", "ssl", "concurrent", "traceback", "ctypes")
#: the layers beside a pool's history and lookups: vacuum's protocol and leases,
#: splits, job tracking, checks and maintenance, typed schemas, SQL
POOL_EXTRAS = (
    "limno.core.gc",
    "limno.core.leases",
    "limno.pools.records.splitting",
    "limno.pools.records.checks",
    "limno.pools.records.manage",
    "limno.pools.jobs",
    "limno.data.typed_schema",
    "limno.engines.local",
)
#: the pool layer, the versioning core and the keys (decimal): ``ls`` lists the pools journal
POOL_LAYER = ("limno.pools.records", "limno.core.versioning", "limno.core.commits", "decimal")
#: the lake (``--help`` opens none)
LAKE = ("limno.api", "limno.lake", "limno.journal", "limno.storage", "limno.pools.inspect")
#: what reading a pool's history (``log``, ``ls POOL``) leaves out: no data object is read
HISTORY_FORBIDDEN = (
    *POOL_EXTRAS,
    "limno.pools.records.compaction",
    "limno.pools.records.snapshot_cache",
    "limno.data.objects",
)
#: what a point lookup must not import: it reads Parquet with pyarrow, and needs neither
#: SQL nor Spark, nor pyarrow.compute (40 ms to import: all of the lookup's budget)
GET_FORBIDDEN = ("duckdb", "pandas", "pyspark", "pyarrow.compute", *FOR_WRITERS, *POOL_EXTRAS)


def other_commands(*modules: str) -> tuple[str, ...]:
    """The command modules of the CLI but ``modules`` (``_data`` for limno.cli._data)."""
    return tuple({m for m in COMMAND_MODULES.values() if m.rsplit(".", 1)[1] not in modules})


@pytest.fixture(scope="module")
def small_lake(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A lake with pool ``logs`` (key ts): two loads, a branch and a tag."""
    root = tmp_path_factory.mktemp("start")
    lake = str(root / "lake")
    data = root / "logs.ndjson"
    data.write_text("".join(f'{{"ts": {i}, "msg": "m{i}"}}\n' for i in range(1, 6)))
    ok("--lake", lake, "init")
    ok("--lake", lake, "create", "logs", "-k", "ts")
    ok("--lake", lake, "load", "-p", "logs", "-m", "first", str(data))
    ok("--lake", lake, "load", "-p", "logs", "-m", "again", str(data))
    ok("--lake", lake, "branch", "-p", "logs", "dev")
    ok("--lake", lake, "tag", "-p", "logs", "v1")
    return lake


def imported(lake: str, *args: str, home: Path) -> tuple[set[str], str]:
    """The modules ``limno --lake LAKE ARGS...`` imports, and its stdout."""
    env = {**os.environ, "XDG_CONFIG_HOME": str(home), "LIMNO_DEBUG": "1"}
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "limno", "--lake", lake, *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    lines = proc.stderr.splitlines()
    assert proc.returncode == 0, "\n".join(x for x in lines if not x.startswith("import time:"))
    # "import time: <self us> | <cumulative us> | <indent><module>"
    modules = {
        line.rsplit("|", 1)[1].strip()
        for line in lines
        if line.startswith("import time:") and line.count("|") == 2
    }
    assert "limno.cli._main" in modules, "no -X importtime report on stderr"
    return modules, proc.stdout


def loaded(modules: set[str], packages: tuple[str, ...]) -> list[str]:
    """Those of ``packages`` that ``modules`` holds (the package or any of its submodules:
    a package imported by ``importlib.import_module`` has no line of its own)."""
    return [p for p in packages if any(m == p or m.startswith(p + ".") for m in modules)]


@pytest.mark.parametrize(
    ("args", "forbidden"),
    [
        (("--help",), (*LAKE, *POOL_LAYER, "hashlib")),
        (("ls",), (*POOL_LAYER, *other_commands("_pools"))),
        (("-f", "table", "ls"), (*POOL_LAYER, *other_commands("_pools"))),
        (("-f", "json", "ls", "logs"), (*HISTORY_FORBIDDEN, *other_commands("_pools"))),
        (("log", "-p", "logs"), (*HISTORY_FORBIDDEN, *other_commands("_data"))),
        (
            ("-f", "table", "log", "-p", "logs@dev", "-n", "1"),
            (*HISTORY_FORBIDDEN, *other_commands("_data")),
        ),
        (
            ("watch", "--from-start", "--exit-after", "8"),
            (*HISTORY_FORBIDDEN, *other_commands("_watch")),
        ),
    ],
    ids=["help", "ls", "ls-table", "ls-pool-json", "log", "log-table", "watch"],
)
def test_journal_commands_import_only_what_they_use(
    small_lake: str, tmp_path: Path, args: tuple[str, ...], forbidden: tuple[str, ...]
) -> None:
    """No heavy library, nothing only writers use, and no layer the command skips."""
    modules, out = imported(small_lake, *args, home=tmp_path)
    assert loaded(modules, (*HEAVY, *SERVER)) == []
    assert loaded(modules, (*FOR_WRITERS, *FOR_SOME, *forbidden)) == []
    assert out.strip(), "the command printed nothing"


def test_listings_hold_what_the_meta_tables_hold(small_lake: str, tmp_path: Path) -> None:
    """Printed from Python rows, the listings are the rows of the Arrow meta tables
    (a commit's meta: an object printed, JSON text in the table)."""
    lake = Lake.open(small_lake)
    for args, (ref, table) in [
        (("ls",), ("", "pools")),
        (("ls", "logs"), ("logs", "branches")),
        (("log", "-p", "logs"), ("logs", "commits")),
    ]:
        _, out = imported(small_lake, *args, home=tmp_path)
        rows = [json.loads(line) for line in out.splitlines()]
        want = lake.meta_table(ref, table).to_pylist()
        for row in want:
            if table == "commits":
                row["meta"] = json.loads(row["meta"])
        assert rows == want, args
        assert rows, args


def test_get_imports_only_what_a_lookup_needs(small_lake: str, tmp_path: Path) -> None:
    modules, out = imported(small_lake, "get", "-p", "logs", "3", home=tmp_path)
    assert loaded(modules, (*GET_FORBIDDEN, *other_commands("_data"))) == []
    assert "limno.data.scan" in modules  # it did read data
    assert out.splitlines() == ['{"ts": 3, "msg": "m3"}', '{"ts": 3, "msg": "m3"}']


def test_loads_scans_and_object_listings_import_no_pandas(tmp_path: Path) -> None:
    """pyarrow imports pandas (0.4 s) to build an array from Python values or numpy:
    a load (Parquet with several row groups and a text dictionary, CSV, NDJSON), a
    scan that merges overlapping objects, ``diff`` and ``stage`` build theirs without it."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    lake = str(tmp_path / "lake")
    ok("--lake", lake, "init")
    ok("--lake", lake, "create", "t", "-k", "k")
    rows = 30000
    table = pa.table({"k": range(rows), "s": [f"s{i % 5}" for i in range(rows)]})
    pq.write_table(table, tmp_path / "t.parquet", row_group_size=rows // 3)
    (tmp_path / "t.csv").write_text("k,s\n5,five\n7,seven\n")
    (tmp_path / "t.ndjson").write_text('{"k": 6, "s": "six"}\n')
    for name in ("t.parquet", "t.csv", "t.ndjson"):
        modules, _ = imported(lake, "load", "-p", "t", str(tmp_path / name), home=tmp_path)
        assert loaded(modules, ("pandas", "pyspark", "duckdb", *SERVER)) == [], name
    modules, out = imported(lake, "scan", "-p", "t", "--limit", "4", home=tmp_path)
    assert loaded(modules, ("pandas", "pyspark", *SERVER)) == []
    assert "limno.data.kway" in modules  # the objects overlap: merged
    assert [json.loads(line)["k"] for line in out.splitlines()] == [0, 1, 2, 3]
    # the listings of objects print from Python rows (Arrow only for the binary formats)
    ok("--lake", lake, "add", "-p", "t", str(tmp_path / "t.csv"))
    modules, out = imported(lake, "diff", "-p", "t", "main~2", "main", home=tmp_path)
    assert loaded(modules, ("pandas", *SERVER)) == []
    assert sorted(json.loads(line)["rows"] for line in out.splitlines()) == [1, 2]
    modules, out = imported(lake, "stage", "-p", "t", home=tmp_path)
    assert loaded(modules, ("pandas", *SERVER)) == []
    assert [json.loads(line)["rows"] for line in out.splitlines()] == [2]


def test_every_command_is_in_the_module_the_group_loads_for_it() -> None:
    """Each command module's ``COMMANDS`` are the names :data:`COMMAND_MODULES` sends to
    it: a command cannot be left out of the CLI (nor of ``--help``) by a stale map."""
    by_module: dict[str, set[str]] = {}
    for name, module in COMMAND_MODULES.items():
        by_module.setdefault(module, set()).add(name)
    for module, names in by_module.items():
        assert {c.name for c in importlib.import_module(module).COMMANDS} == names, module
    listed = ok("--help").text.split("Commands:", 1)[1]
    for name in ("init", "verify", *COMMAND_MODULES):
        assert f"\n  {name} " in listed, name


def test_a_lazy_module_is_imported_at_its_first_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = f"lazy_probe_{os.getpid()}"
    (tmp_path / f"{name}.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, name, raising=False)
    stand_in = lazy_module(name)
    assert name not in sys.modules
    assert stand_in.VALUE == 1
    real = sys.modules[name]
    assert lazy_module(name) is real  # once imported, the module itself
    monkeypatch.setattr(real, "VALUE", 2)
    assert stand_in.VALUE == 2  # reads go to the module: a replaced attribute shows
    assert pickle.loads(pickle.dumps(stand_in)) is real
    with pytest.raises(AttributeError):
        _ = stand_in.MISSING
    del sys.modules[name]

"""Every Arrow type a Parquet or Arrow writer produces loads, reads back and queries.

A matrix over types (views, large types, dictionaries, decimals, dates, times and
timestamps of every unit and zone, durations, nested and fixed-size types), each
written by pyarrow as Parquet and as an Arrow IPC file and loaded with the CLI,
and handed to the Python API as a table; then scanned, looked up and queried, and
compared with the source values. Types that can order a pool are also loaded as
the key (in two overlapping loads, then compacted), which runs the sort, the
k-way merge and the key metadata on them. DuckDB-written Parquet and tpchgen-cli's
TPC-H tables (string_view text, decimals, dates) are loaded as they come.
"""

from __future__ import annotations

import datetime as dt
import decimal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from clirunner import fail, ok
from limno import Lake
from limno.data.nanos import python_value

N = 6


@dataclass(frozen=True)
class Case:
    name: str
    array: pa.Array
    key: bool = True  # the type can order a pool
    sql: bool = True  # DuckDB returns the same Python values


def _temporal(unit: str) -> list[int]:
    """Distinct instants that differ in their finest digit (ns ties at the microsecond)."""
    scale = {"s": 1, "ms": 10**3, "us": 10**6, "ns": 10**9}[unit]
    return [1_700_000_000 * scale + 7 * i - 20 for i in range(N)]


def _cases() -> list[Case]:
    strings = [f"v{i % 4}-{'é' * i}" for i in range(N)]
    blobs = [b"\x00\xff" * i + bytes([i]) for i in range(N)]
    cases = [
        Case("string_view", pa.array(strings, pa.string_view())),
        Case("binary_view", pa.array(blobs, pa.binary_view())),
        Case("large_string", pa.array(strings, pa.large_string())),
        Case("large_binary", pa.array(blobs, pa.large_binary())),
        Case("fixed_size_binary", pa.array([b"k%02d" % (i % 4) for i in range(N)], pa.binary(3))),
        Case("dictionary", pa.array(strings).dictionary_encode()),
        Case(
            "dictionary_int8",
            pa.array(strings).dictionary_encode().cast(pa.dictionary(pa.int8(), pa.large_string())),
        ),
        Case(
            "decimal128",
            pa.array([decimal.Decimal(f"{i - 2}.25") for i in range(N)], pa.decimal128(15, 2)),
        ),
        Case(
            "decimal256_narrow",
            pa.array([decimal.Decimal(f"{i}1234.5") for i in range(N)], pa.decimal256(20, 1)),
        ),
        Case(
            "decimal256_wide",
            pa.array(
                [decimal.Decimal(f"{i}{'9' * 40}.125") for i in range(N)], pa.decimal256(50, 3)
            ),
            sql=False,
        ),  # DuckDB's decimals stop at 38 digits
        Case("float16", pa.array(np.array([1.5, -2.0, 0.25, 3.0, 1.5, 65504.0], np.float16))),
        Case("uint64", pa.array([2**63 + i for i in range(N)], pa.uint64())),
        Case("date32", pa.array([dt.date(2020, 1, 1 + i) for i in range(N)], pa.date32())),
        Case("date64", pa.array([dt.date(1960, 2, 1 + i) for i in range(N)], pa.date64())),
        Case("time32_s", pa.array([dt.time(1, 2, i) for i in range(N)], pa.time32("s"))),
        Case(
            "time32_ms", pa.array([dt.time(1, 2, 3, 1000 * i) for i in range(N)], pa.time32("ms"))
        ),
        Case("time64_us", pa.array([dt.time(1, 2, 3, i) for i in range(N)], pa.time64("us"))),
        Case(
            "time64_ns",
            pa.array([3_600 * 10**9 + 7 * i for i in range(N)], pa.time64("ns")),
            sql=False,
        ),  # DuckDB's times stop at microseconds
        Case("bool", pa.array([i % 3 == 0 for i in range(N)])),
        Case("null", pa.nulls(N), key=False),
        Case(
            "uuid",
            pa.array([bytes([i]) * 16 for i in range(N)], pa.binary(16)).cast(pa.uuid()),
            key=False,
            sql=False,
        ),  # DuckDB returns UUIDs as text
        Case("list", pa.array([[i, None, -i] for i in range(N)], pa.list_(pa.int32())), key=False),
        Case(
            "large_list",
            pa.array([[f"x{i}"] * i for i in range(N)], pa.large_list(pa.string_view())),
            key=False,
        ),
        Case(
            "list_view",
            pa.ListViewArray.from_arrays(  # views out of order, one null
                pa.array([4, 0, 2, 0, 1, 3], pa.int32()),
                pa.array([2, 1, 0, 0, 3, 1], pa.int32()),
                pa.array([10, 11, 12, 13, 14, 15], pa.int64()),
                mask=pa.array([False, False, False, True, False, False]),
            ),
            key=False,
        ),
        Case(
            "large_list_view",
            pa.array([[f"s{i}", None] for i in range(N)], pa.large_list_view(pa.string_view())),
            key=False,
        ),
        Case(
            "fixed_size_list",
            pa.array([[i, 0.5] for i in range(N)], pa.list_(pa.float32(), 2)),
            key=False,
        ),
        Case(
            "struct",
            pa.array(
                [{"a": i, "b": f"q{i}", "c": [decimal.Decimal(i)]} for i in range(N)],
                pa.struct(
                    [
                        ("a", pa.int8()),
                        ("b", pa.string_view()),
                        ("c", pa.list_view(pa.decimal256(10, 0))),
                    ]
                ),
            ),
            key=False,
        ),
        Case(
            "map",
            pa.array(
                [[("k", b"x" * i), ("j", None)] for i in range(N)],
                pa.map_(pa.string(), pa.binary_view()),
            ),
            key=False,
        ),
        Case(
            "list_of_struct",
            pa.array(
                [[{"d": dt.date(2000, 1, 1 + i)}] for i in range(N)],
                pa.list_(pa.struct([("d", pa.date32())])),
            ),
            key=False,
        ),
    ]
    for unit in ("s", "ms", "us", "ns"):
        for tz in (None, "UTC", "Europe/Paris", "+05:30"):
            name = f"timestamp_{unit}" + (f"_{tz}" if tz else "")
            cases.append(Case(name, pa.array(_temporal(unit), pa.timestamp(unit, tz))))
        cases.append(
            Case(f"duration_{unit}", pa.array(_temporal(unit), pa.duration(unit)), sql=False)
        )  # DuckDB reads durations as intervals
    return cases


CASES = _cases()
KEY_CASES = [c for c in CASES if c.key]


def _values(arr: pa.Array | pa.ChunkedArray) -> list[Any]:
    """Python values of ``arr``, nanosecond values exact (as integers)."""
    if getattr(arr.type, "unit", None) == "ns":
        return list(arr.cast(pa.int64()).to_pylist())
    if pa.types.is_dictionary(arr.type):
        arr = arr.cast(arr.type.value_type)
    return list(arr.to_pylist())


def _source(case: Case) -> pa.Table:
    """The case's values with ids, in an order that is not the key's (a load sorts)."""
    order = [3, 0, 5, 1, 4, 2]
    ids = pa.array(order, pa.int64())
    values = pa.concat_arrays([case.array.slice(i, 1) for i in order])  # views have no take
    return pa.table({"id": ids, "v": values, "n": pa.array(range(N), pa.int64())})


def _write(table: pa.Table, path: Path, fmt: str) -> str:
    if fmt == "parquet":
        pq.write_table(table, path)
    else:
        with pa.ipc.new_file(str(path), table.schema) as w:
            w.write_table(table)
    return str(path)


def _load(lake: str, tmp_path: Path, pool: str, table: pa.Table, how: str) -> None:
    if how == "api":
        Lake.open(lake).pool(pool).load([table])
    else:
        path = _write(table, tmp_path / f"{pool}-{len(list(tmp_path.iterdir()))}.{how}", how)
        ok("--lake", lake, "load", "-p", pool, path)


def _by_id(table: pa.Table) -> dict[int, Any]:
    return dict(zip(table.column("id").to_pylist(), _values(table.column("v")), strict=True))


@pytest.fixture
def lake(tmp_path: Path) -> str:
    where = str(tmp_path / "lake")
    ok("--lake", where, "init")
    return where


@pytest.mark.parametrize("how", ["parquet", "arrow", "api"])
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_value_column_round_trips(lake: str, tmp_path: Path, case: Case, how: str) -> None:
    src = _source(case)
    ok("--lake", lake, "create", "p", "-k", "id")
    _load(lake, tmp_path, "p", src, how)
    pool = Lake.open(lake).pool("p")
    want = _by_id(src)

    scanned = pool.scan()
    assert scanned.column("id").to_pylist() == list(range(N))
    assert _by_id(scanned) == want
    for i in (0, N - 1):
        assert _by_id(pool.get([i])) == {i: want[i]}
    assert not any(pa.types.is_dictionary(t) or "view" in str(t) for t in scanned.schema.types)


SQL_CASES = [pytest.param(c, id=c.name) for c in CASES]


@pytest.mark.parametrize("case", SQL_CASES)
def test_value_column_queries(lake: str, case: Case) -> None:
    src = _source(case)
    ok("--lake", lake, "create", "p", "-k", "id")
    Lake.open(lake).pool("p").load([src])
    q = Lake.open(lake).query("SELECT id, v FROM p ORDER BY id")
    assert q.column("id").to_pylist() == list(range(N))
    if case.sql:
        assert _by_id(q) == _by_id(src)
    elif case.name == "decimal256_wide":  # beyond DuckDB's 38 digits: a double, as its
        # Parquet reader gives
        assert q.schema.field("v").type == pa.float64()
        by_id = dict(zip(src.column("id").to_pylist(), src.column("v").to_pylist(), strict=True))
        want = [float(by_id[i]) for i in range(N)]
        assert q.column("v").to_pylist() == pytest.approx(want, rel=1e-12)


WIDE = pa.decimal256(50, 3)
WIDE_VALUES = [decimal.Decimal(f"{i}{'9' * 40}.125") for i in range(N)]


@pytest.mark.parametrize(
    "array",
    [
        pa.array([[("k", d), ("j", None)] for d in WIDE_VALUES], pa.map_(pa.string(), WIDE)),
        pa.array([[d, -d] for d in WIDE_VALUES], pa.list_(WIDE, 2)),
    ],
    ids=["map", "fixed_size_list"],
)
def test_nested_wide_decimals_query_as_doubles(lake: str, array: pa.Array) -> None:
    """A decimal beyond DuckDB's 38 digits reaches it as a double at any depth."""
    ok("--lake", lake, "create", "p", "-k", "id")
    Lake.open(lake).pool("p").load([pa.table({"id": pa.array(range(N), pa.int64()), "v": array})])
    q = Lake.open(lake).query("SELECT id, v FROM p ORDER BY id")
    assert q.column("id").to_pylist() == list(range(N))
    got = q.column("v").to_pylist()
    if pa.types.is_map(array.type):
        assert q.schema.field("v").type.item_type == pa.float64()
        assert [[k for k, _ in row] for row in got] == [["k", "j"]] * N
        assert [row[1][1] for row in got] == [None] * N
        doubles = [row[0][1] for row in got]
        want = [float(d) for d in WIDE_VALUES]
    else:
        assert q.schema.field("v").type.value_type == pa.float64()
        doubles = [x for row in got for x in row]
        want = [float(x) for d in WIDE_VALUES for x in (d, -d)]
    assert doubles == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("case", KEY_CASES, ids=[c.name for c in KEY_CASES])
def test_key_field_sorts_merges_and_finds(lake: str, tmp_path: Path, case: Case) -> None:
    src = _source(case)
    ok("--lake", lake, "create", "p", "-k", "v,id")
    _load(lake, tmp_path, "p", src.slice(0, 4), "parquet")
    _load(lake, tmp_path, "p", src.slice(2), "api")  # overlaps: merged on read
    pool = Lake.open(lake).pool("p")
    rows = [*range(4), *range(2, N)]  # positions in src of every loaded row
    order = sorted(rows, key=lambda i: (_values(src.column("v"))[i], src.column("id")[i].as_py()))

    for _ in ("merged on read", "compacted"):
        scanned = pool.scan()
        assert scanned.column("n").to_pylist() == [src.column("n")[i].as_py() for i in order]
        assert _values(scanned.column("v")) == [_values(src.column("v"))[i] for i in order]
        for i in (0, 5):
            found = pool.get([(python_value(src.column("v")[i]), src.column("id")[i].as_py())])
            assert found.column("n").to_pylist() == [src.column("n")[i].as_py()] * rows.count(i)
        third = _values(src.column("v"))[order[2]]
        tied = next(i for i in order if _values(src.column("v"))[i] == third)
        after = pool.scan(start=(python_value(src.column("v")[order[2]]),))
        assert after.column("n").to_pylist()[:1] == [src.column("n")[tied].as_py()]
        pool.compact([o.id for o in pool.objects()])
    assert len(pool.objects()) == 1
    assert list(Lake.open(lake).verify()) == []


DUCKDB_COLUMNS = {
    "s": "'x' || i",
    "blob": "('b' || i)::BLOB",
    "uuid": "('00000000-0000-0000-0000-00000000000' || i)::UUID",
    "hugeint": "i::HUGEINT * 100000000000000000000",
    "ts_ns": "make_timestamp(2020, 1, 1, 0, 0, i)::TIMESTAMP_NS",
    "ts_tz": "make_timestamp(2020, 1, 1, 0, 0, i)::TIMESTAMPTZ",
    "ts_ms": "make_timestamp(2020, 1, 1, 0, 0, i)::TIMESTAMP_MS",
    "enum": "(['a', 'b'][i % 2 + 1])::ENUM('a', 'b')",
    "list": "[i, i + 1]",
    "struct": "{'x': i, 'y': 's'}",
    "map": "MAP {'k': i}",
    "array": "[i, 2]::INTEGER[2]",
    "d38": "(i * 1.5)::DECIMAL(38, 10)",
    "d4": "(i * 1.5)::DECIMAL(4, 1)",
    "ubigint": "i::UBIGINT + 18446744073709551610",
    "date": "DATE '2020-01-01' + i::INTEGER",
    "time": "TIME '01:02:03'",
    "float": "i::FLOAT / 3",
    "interval": "INTERVAL 1 DAY * i",
    "json": "('{\"a\": ' || i || '}')::JSON",
    "nothing": "NULL",
}


def _duckdb(sql: str) -> pa.Table:
    """DuckDB's own answer to a query."""
    rel = duckdb.sql(sql)
    assert rel is not None
    return rel.to_arrow_table()


def test_duckdb_written_parquet_loads_as_duckdb_reads_it(lake: str, tmp_path: Path) -> None:
    path = tmp_path / "duck.parquet"
    columns = ", ".join(f"{e} AS {n}" for n, e in DUCKDB_COLUMNS.items())
    duckdb.sql(
        f"COPY (SELECT i::BIGINT AS id, {columns} FROM range(5) t(i) ORDER BY i DESC) TO '{path}'"
    )
    ok("--lake", lake, "create", "d", "-k", "id")
    ok("--lake", lake, "load", "-p", "d", str(path))
    ok("--lake", lake, "create", "dk", "-k", "s,ts_ns")
    ok("--lake", lake, "load", "-p", "dk", str(path))
    want = pq.read_table(path).sort_by("id")
    got = Lake.open(lake).pool("d").scan()
    for name in want.column_names:
        assert _values(got.column(name)) == _values(want.column(name)), name
    direct = _duckdb(f"SELECT * FROM '{path}' ORDER BY id")
    for pool in ("d", "dk"):
        rows = ok("--lake", lake, "query", f"SELECT * FROM {pool} ORDER BY id").rows()
        assert [r["id"] for r in rows] == list(range(5))
        ours = Lake.open(lake).query(f"SELECT * FROM {pool} ORDER BY id")
        for name in direct.column_names:
            if name != "interval":  # pyarrow reads Parquet intervals as their 12 bytes
                assert _values(ours.column(name)) == _values(direct.column(name)), name


def _tpchgen(out: Path) -> None:
    exe = Path(sys.executable).with_name("tpchgen-cli")
    cmd = [
        str(exe),
        "parquet",
        "-s",
        "0.01",
        "-T",
        "lineitem",
        "-T",
        "partsupp",
        "-o",
        str(out),
        "-q",
    ]
    subprocess.run(cmd, check=True, timeout=120, capture_output=True)


def test_tpchgen_lineitem_and_partsupp(lake: str, tmp_path: Path) -> None:
    _tpchgen(tmp_path)
    tables = {"lineitem": "l_orderkey,l_linenumber", "partsupp": "ps_partkey,ps_suppkey"}
    for name, key in tables.items():
        path = tmp_path / f"{name}.parquet"
        assert pa.types.is_string_view(pq.read_schema(path).types[-1])  # the comment column
        ok("--lake", lake, "create", name, "-k", key)
        ok("--lake", lake, "load", "-p", name, str(path))
        fields = key.split(",")
        read = pq.read_table(path)
        plain = [pa.string() if pa.types.is_string_view(t) else t for t in read.schema.types]
        want = read.cast(pa.schema(list(zip(read.column_names, plain, strict=True))))
        want = want.sort_by([(f, "ascending") for f in fields])
        got = Lake.open(lake).pool(name).scan()
        assert got.num_rows == want.num_rows > 1000
        assert got.column_names == want.column_names
        for column in want.column_names:
            assert got.column(column).to_pylist() == want.column(column).to_pylist(), column
        first = want.slice(0, 1).to_pylist()[0]
        one = ok("--lake", lake, "get", "-p", name, ",".join(str(first[f]) for f in fields))
        assert [r[fields[0]] for r in one.rows()] == [first[fields[0]]]

    q1 = (
        "SELECT l_returnflag, l_linestatus, sum(l_quantity) AS q, sum(l_extendedprice"
        " * (1 - l_discount)) AS p, count(*) AS n FROM {} WHERE l_shipdate <= DATE"
        " '1998-09-02' GROUP BY 1, 2 ORDER BY 1, 2"
    )
    ours = Lake.open(lake).query(q1.format("lineitem")).to_pylist()
    direct = _duckdb(q1.format(f"'{tmp_path / 'lineitem.parquet'}'"))
    assert ours == direct.to_pylist() and len(ours) == 4


def test_nanosecond_keys_from_the_cli(lake: str, tmp_path: Path) -> None:
    stamps = pa.array([1_700_000_000_000_000_000 + n for n in (7, 3, 5)], pa.timestamp("ns"))
    path = _write(pa.table({"ts": stamps, "n": [7, 3, 5]}), tmp_path / "ns.parquet", "parquet")
    ok("--lake", lake, "create", "t", "-k", "ts")
    ok("--lake", lake, "load", "-p", "t", path)
    at = "2023-11-14T22:13:20.000000005"
    after = ok("--lake", lake, "scan", "-p", "t", "--from", at).rows()
    assert [r["n"] for r in after] == [5, 7]
    assert [r["n"] for r in ok("--lake", lake, "get", "-p", "t", at).rows()] == [5]
    (obj,) = Lake.open(lake).pool("t").objects()
    assert [python_value(stamps[1])] == list(obj.min_key or ())  # exact, not truncated


def test_a_narrow_decimal256_beyond_its_precision_is_refused(lake: str, tmp_path: Path) -> None:
    wide = pa.array([decimal.Decimal("1"), decimal.Decimal(10**25)], pa.decimal256(30, 0))
    bad = pa.Array.from_buffers(pa.decimal256(20, 0), 2, wide.buffers())  # 26 digits in 20
    path = _write(pa.table({"id": [1, 2], "d": bad}), tmp_path / "bad.parquet", "parquet")
    ok("--lake", lake, "create", "p", "-k", "id")
    r = fail("--lake", lake, "load", "-p", "p", path)
    assert "row 2: invalid data" in r.err and "'d'" in r.err

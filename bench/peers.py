"""The peers: the same operations done with delta-rs, pyiceberg, DuckDB and plain pyarrow.

Each peer is used the way its documentation suggests, with default settings. None of
them sorts on write, so where a benchmark needs key-sorted output the peer sorts
first with ``Table.sort_by`` (DuckDB with ``ORDER BY``). A peer whose package is
missing is left out of the run (and the reason recorded), never faked.
"""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.parquet as pq


def available(name: str) -> str | None:
    """None when peer ``name`` can run here, else why not."""
    module = {"delta-rs": "deltalake", "pyiceberg": "pyiceberg", "duckdb": "duckdb"}.get(name)
    if module and importlib.util.find_spec(module) is None:
        return f"{module} is not installed (pip install -e '.[dev]')"
    if name == "pyiceberg" and importlib.util.find_spec("sqlalchemy") is None:
        return "pyiceberg's SQL catalog needs sqlalchemy (pip install 'pyiceberg[sql-sqlite]')"
    return None


def table_peers(include_duckdb: bool = True, include_pyarrow: bool = True) -> list[str]:
    """The peers available here, in table order."""
    names = ["delta-rs", "pyiceberg", "duckdb", "pyarrow"]
    if not include_duckdb:
        names.remove("duckdb")
    if not include_pyarrow:
        names.remove("pyarrow")
    return [n for n in names if available(n) is None]


# -- delta-rs ----------------------------------------------------------------------


def delta_write(path: Path, data: pa.Table, mode: str = "error") -> None:
    from deltalake import write_deltalake

    write: Any = write_deltalake  # its overloads want a literal mode
    write(str(path), data, mode=mode)


class DeltaReader:
    """A Delta table opened once, read through its pyarrow dataset (file statistics prune)."""

    def __init__(self, path: Path) -> None:
        from deltalake import DeltaTable

        self.table = DeltaTable(str(path))
        self.dataset = self.table.to_pyarrow_dataset()

    def get(self, key: int) -> pa.Table:
        return self.dataset.to_table(filter=pc.field("k") == key)

    def range(self, lo: int, hi: int) -> pa.Table:
        flt = (pc.field("k") >= lo) & (pc.field("k") < hi)
        return self.dataset.to_table(filter=flt).sort_by("k")


# -- pyiceberg -------------------------------------------------------------------------


class Iceberg:
    """A pyiceberg SQL catalog on SQLite in ``root``, with one table ``bench.t``."""

    def __init__(self, root: Path, schema: pa.Schema) -> None:
        from pyiceberg.catalog.sql import SqlCatalog

        root.mkdir(parents=True, exist_ok=True)
        self.catalog = SqlCatalog(
            "bench",
            uri=f"sqlite:///{root}/catalog.db",
            warehouse=(root / "warehouse").as_uri(),
        )
        self.catalog.create_namespace("bench")
        self.table: Any = self.catalog.create_table("bench.t", schema=schema)

    def append(self, data: pa.Table) -> None:
        self.table.append(data)

    def refresh(self) -> None:
        self.table = self.catalog.load_table("bench.t")

    def get(self, key: int) -> pa.Table:
        ex = _expressions()
        return self.table.scan(row_filter=ex.EqualTo("k", key)).to_arrow()

    def range(self, lo: int, hi: int) -> pa.Table:
        ex = _expressions()
        flt = ex.And(ex.GreaterThanOrEqual("k", lo), ex.LessThan("k", hi))
        return self.table.scan(row_filter=flt).to_arrow().sort_by("k")


def _expressions() -> Any:
    """pyiceberg's expressions (typed as Any: pydantic models confuse mypy's view of them)."""
    return importlib.import_module("pyiceberg.expressions")


# -- DuckDB ------------------------------------------------------------------------------

#: the codec DuckDB's Parquet copies use: limno's own (``limno.data.encoding.COMPRESSION``,
#: LZ4_RAW), so that both sides pay the same encoding work
DUCKDB_CODEC = "lz4_raw"


def duckdb_sorted_copy(data: pa.Table, path: Path) -> None:
    """Sort with DuckDB (all cores) and write one Parquet file (limno's codec)."""
    import duckdb

    con = duckdb.connect()
    try:
        con.register("input", data)
        con.execute(
            f"COPY (SELECT * FROM input ORDER BY k) TO '{path}'"
            f" (FORMAT parquet, COMPRESSION {DUCKDB_CODEC})"
        )
    finally:
        con.close()


def duckdb_copy(data: pa.Table, path: Path) -> None:
    import duckdb

    con = duckdb.connect()
    try:
        con.register("input", data)
        con.execute(f"COPY input TO '{path}' (FORMAT parquet, COMPRESSION {DUCKDB_CODEC})")
    finally:
        con.close()


class DuckReader:
    """DuckDB over a list of Parquet files (a view; prepared statements per query)."""

    def __init__(self, files: list[str]) -> None:
        import duckdb

        self.con = duckdb.connect()
        listed = ", ".join(f"'{f}'" for f in files)
        self.con.execute(f"CREATE VIEW t AS SELECT * FROM read_parquet([{listed}])")

    def get(self, key: int) -> pa.Table:
        return self.con.sql("SELECT * FROM t WHERE k = $1", params=[key]).to_arrow_table()

    def range(self, lo: int, hi: int) -> pa.Table:
        return self.con.sql(
            "SELECT * FROM t WHERE k >= $1 AND k < $2 ORDER BY k", params=[lo, hi]
        ).to_arrow_table()

    def close(self) -> None:
        self.con.close()


# -- plain pyarrow ----------------------------------------------------------------------


def pyarrow_write(data: pa.Table, path: Path) -> None:
    pq.write_table(data, str(path))


class ArrowReader:
    """A pyarrow dataset over a directory of Parquet files (statistics prune row groups)."""

    def __init__(self, root: Path) -> None:
        self.dataset = pads.dataset(str(root), format="parquet")

    def get(self, key: int) -> pa.Table:
        return self.dataset.to_table(filter=pc.field("k") == key)

    def range(self, lo: int, hi: int) -> pa.Table:
        flt = (pc.field("k") >= lo) & (pc.field("k") < hi)
        return self.dataset.to_table(filter=flt).sort_by("k")

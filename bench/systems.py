"""One ingest per system, shared by the timed runs and the peak-memory subprocesses."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from bench import peers

SYSTEMS = ("limno", "delta-rs", "pyiceberg", "duckdb", "pyarrow")


def ingest(system: str, data: pa.Table, root: Path, *, sort: bool = True) -> None:
    """Persist ``data`` under ``root`` (a new directory) with ``system``.

    With ``sort`` the stored rows must end up in key order: limno sorts by its pool
    key; the others sort before writing (none of them sorts on write). limno always
    sorts.
    """
    if system == "limno":
        from limno.lake import Lake

        Lake.init(str(root)).create_pool("b", key="k").load([data])
        return
    if system == "duckdb":
        root.mkdir(parents=True)
        copy = peers.duckdb_sorted_copy if sort else peers.duckdb_copy
        copy(data, root / "data.parquet")
        return
    if sort:
        data = data.sort_by("k")
    if system == "delta-rs":
        peers.delta_write(root, data)
    elif system == "pyiceberg":
        peers.Iceberg(root, data.schema).append(data)
    elif system == "pyarrow":
        root.mkdir(parents=True)
        peers.pyarrow_write(data, root / "data.parquet")
    else:
        raise ValueError(f"unknown system {system!r}")


def available(system: str) -> str | None:
    return None if system == "limno" else peers.available(system)

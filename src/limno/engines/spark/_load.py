"""``load --engine spark``: bulk import of input files on Spark.

Inputs are read by limno's own readers (every format, compression and widening
rule of the local ``load``, with the same error messages), one Spark task per
input file, and staged as Parquet parts under ``<pool-id>/data/`` (named
``<ksuid>.input.parquet``: unreferenced, so if the job dies vacuum reclaims them
like any other uncommitted object). The parts are then read back as one DataFrame
under their unified schema (:func:`._read.frame`, a native Parquet scan) and bulk
imported by :func:`._write.write_objects`: range-partitioned by the pool key,
sorted (ties in input order: each row's staged part and row number break them),
written by Spark's own Parquet writer where it stores exactly what limno's writer
would (:mod:`._native`; else by limno's writer in tasks), one commit from the
driver. The staged parts are deleted at the end, whatever happens.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from limno.core.commits import Commit
from limno.data.objects import schema_from_b64, schema_to_b64
from limno.data.readers import read_records
from limno.errors import InvalidInputError
from limno.ksuid import ksuid

from ._read import OBJ_COL, ROW_COL, ParquetPart, frame, open_pool
from ._session import LakeSpec, session, translate_errors
from ._write import ObjectHook, commit_objects, write_objects

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from limno.lake import Lake
    from limno.pools.records.pool import RecordPool

__all__ = ["load"]

#: a staged part is cut after this many (Arrow) bytes
PART_BYTES = 128 * 2**20


def load(
    pool: RecordPool | str,
    sources: Sequence[str],
    fmt: str | None = None,
    branch: str | None = None,
    message: str = "",
    author: str | None = None,
    meta: Mapping[str, Any] | None = None,
    *,
    lake: Lake | str | None = None,
    spark: SparkSession | None = None,
    partitions: int | None = None,
    native: bool = True,
    _hook: ObjectHook | None = None,
) -> Commit:
    """Load input files into ``pool@branch`` on Spark as one commit (see the module doc)."""
    rp, named = open_pool(pool, lake)
    branch = branch or named or "main"
    rp.versioned.writable_head(branch)  # missing or protected: refused before any work
    if not sources:
        raise InvalidInputError("no input files")
    if "-" in sources:
        raise InvalidInputError("the spark engine loads files, not standard input")
    with rp.versioned.writing("spark load") as since:
        spark = session(spark=spark)
        parts = stage_inputs(spark, rp, sources, fmt)
        try:
            # input order breaks ties between equal keys, as the local load's stable sort
            df = frame(spark, rp.storage, parts, positions=True)
            objs = write_objects(
                df,
                rp,
                branch=branch,
                partitions=partitions,
                spark=spark,
                source="input",
                tiebreak=(OBJ_COL, ROW_COL),
                check_schema=False,  # checked as the inputs were read
                native=native,
                _hook=_hook,
            )
        finally:
            for p in parts:
                with contextlib.suppress(Exception):
                    rp.storage.delete(p.path)
        if not objs:
            raise InvalidInputError("no records to load")
        return commit_objects(
            rp, branch, objs, message=message, author=author, meta=meta, since=since
        )


def stage_inputs(
    spark: SparkSession, pool: RecordPool, sources: Sequence[str], fmt: str | None
) -> list[ParquetPart]:
    """Read every input with limno's readers in Spark tasks; the staged parts, in order."""
    spec = LakeSpec.of(pool.storage)
    pool_id, typed = pool.id, pool.schema
    rows = [(i, s, os.path.abspath(s)) for i, s in enumerate(sources)]
    jobs = spark.createDataFrame(rows, "input int, name string, path string")
    jobs = jobs.repartition(len(rows), "input")

    def task(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        store = spec.open()
        for batch in batches:
            for i, name, path in zip(*(batch.column(c).to_pylist() for c in range(3)), strict=True):
                out = _stage_file(store, pool_id, typed, name, path, fmt)
                yield pa.RecordBatch.from_pydict(
                    {
                        "input": [i] * len(out),
                        "part": list(range(len(out))),
                        "path": [p for p, _ in out],
                        "schema": [s for _, s in out],
                    },
                    schema=pa.schema(
                        [
                            ("input", pa.int32()),
                            ("part", pa.int32()),
                            ("path", pa.string()),
                            ("schema", pa.string()),
                        ]
                    ),
                )

    out_schema = "input int, part int, path string, schema string"
    with translate_errors("spark load"):
        staged = jobs.mapInArrow(task, out_schema).collect()
    staged.sort(key=lambda r: (r[0], r[1]))
    return [ParquetPart(r[2], schema_from_b64(r[3]), n) for n, r in enumerate(staged)]


def _stage_file(
    store: Any, pool_id: str, typed: Any, name: str, path: str, fmt: str | None
) -> list[tuple[str, str]]:
    """Read one input and upload it as Parquet parts; ``(path, schema_b64)`` of each."""

    written: list[tuple[str, str]] = []
    writer: pq.ParquetWriter | None = None
    size = 0
    fd, tmp = tempfile.mkstemp(prefix="limno-input-", suffix=".parquet")
    os.close(fd)

    def flush() -> None:
        nonlocal writer, size
        if writer is None:
            return
        writer.close()
        writer, size = None, 0
        dest = f"{pool_id}/data/{ksuid()}.input.parquet"
        store.put_file(dest, tmp)
        written.append((dest, schema_to_b64(current)))

    current = pa.schema([])
    try:
        rows = 0
        for batch in read_records(path, fmt):
            if typed is not None:
                batch = typed.check(batch, name, rows)
            rows += batch.num_rows
            schema = batch.schema.remove_metadata()
            if writer is not None and (not schema.equals(current) or size >= PART_BYTES):
                flush()
            if writer is None:
                current = schema
                writer = pq.ParquetWriter(tmp, schema, compression="lz4")
            writer.write_batch(batch.replace_schema_metadata(None))
            size += batch.nbytes
        flush()
    except InvalidInputError as e:
        for dest, _ in written:
            with contextlib.suppress(Exception):
                store.delete(dest)
        raise InvalidInputError(str(e).replace(path, name)) from None
    except BaseException:
        for dest, _ in written:
            with contextlib.suppress(Exception):
                store.delete(dest)
        raise
    finally:
        if writer is not None:
            writer.close()
        with contextlib.suppress(OSError):
            os.unlink(tmp)
    return written

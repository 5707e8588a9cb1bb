"""Reading the binary input formats into Arrow record batches, for
:mod:`limno.data.readers`: Parquet by row group, ORC by stripe, Arrow IPC by batch
(file or stream), Avro by block, each in bounded memory where the format allows, a
damaged file refused with one line naming it and where (a row group, stripe, batch
or record)."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from typing import Any, cast

import fastavro
import pyarrow as pa
import pyarrow.orc as porc
import pyarrow.parquet as pq
import pyarrow.types as pt

from limno.data.input_checks import (
    check_arrow,
    check_avro_schema,
    check_schema,
    check_values,
    nesting_error,
    reason,
)
from limno.data.input_streams import Input
from limno.data.orc_footer import check_orc_tail
from limno.data.parquet_input import NATIVE_ERRORS as _NATIVE_ERRORS
from limno.data.parquet_input import row_groups
from limno.data.plain_types import plain_batch
from limno.data.python_rows import build
from limno.data.schema import from_avro
from limno.errors import InvalidInputError

__all__ = [
    "read_arrow",
    "read_avro",
    "read_columnar",
    "read_parquet_dictionaries",
    "split_batches",
    "unreadable",
]


def split_batches(table: pa.Table | pa.RecordBatch, batch_rows: int) -> Iterator[pa.RecordBatch]:
    if isinstance(table, pa.RecordBatch):
        for start in range(0, table.num_rows, batch_rows):
            yield table.slice(start, batch_rows)
    else:
        yield from table.to_batches(max_chunksize=batch_rows)


def read_columnar(
    src: Input, batch_rows: int, kind: str, dictionaries: bool = False
) -> Iterator[pa.RecordBatch]:
    """Parquet by row group, ORC by stripe. Both need a seekable source: the local file
    itself, else (stdin, compressed input) the content read into memory."""
    data = None if src.local else src.stream.read()
    source = pa.OSFile(src.local) if src.local else pa.BufferReader(data)
    with source:
        if kind == "ORC":  # pyarrow aborts on some damaged footers: read them first
            check_orc_tail(src.name, source)
        try:
            f = pq.ParquetFile(source) if kind == "Parquet" else porc.ORCFile(source)
            schema = f.schema_arrow if isinstance(f, pq.ParquetFile) else f.schema
        except _NATIVE_ERRORS as e:
            raise unreadable(src.name, f"not a valid {kind} file", e) from None
        except UnicodeDecodeError:
            raise InvalidInputError(f"{src.name}: a field name is not valid UTF-8") from None
        check_schema(src.name, schema)  # before any data is read
        if isinstance(f, pq.ParquetFile):
            bad = partial(unreadable, src.name)
            parts = row_groups(f, src.local, data, bad, src.name, dictionaries)
            for part in parts:
                yield from split_batches(part, batch_rows)
            return
        rows = 0
        for i in range(f.nstripes):
            try:
                stripe = f.read_stripe(i)
            except _NATIVE_ERRORS as e:
                where = f"stripe {i} (rows from {rows + 1})"
                raise unreadable(src.name, f"{where}: corrupt ORC data", e) from None
            check_values(src.name, stripe, rows)
            rows += stripe.num_rows
            yield from split_batches(plain_batch(stripe), batch_rows)


def read_parquet_dictionaries(src: Input, batch_rows: int) -> Iterator[pa.RecordBatch]:
    return read_columnar(src, batch_rows, "Parquet", dictionaries=True)


def read_arrow(src: Input, batch_rows: int) -> Iterator[pa.RecordBatch]:
    rows = 0
    try:
        if src.local is not None and src.head.startswith(b"ARROW1"):
            with pa.OSFile(src.local) as f:
                reader = pa.ipc.open_file(f)
                check_schema(src.name, reader.schema)
                for i in range(reader.num_record_batches):
                    batch = reader.get_batch(i)
                    check_arrow(src.name, batch, rows)
                    yield from split_batches(batch, batch_rows)
                    rows += batch.num_rows
            return
        if src.head.startswith(b"ARROW1"):
            src.stream.read(8)  # the file format is the stream format after 8 magic bytes
        stream = pa.ipc.open_stream(src.stream)
        check_schema(src.name, stream.schema)
        for batch in stream:
            check_arrow(src.name, batch, rows)
            yield from split_batches(batch, batch_rows)
            rows += batch.num_rows
    except _NATIVE_ERRORS as e:
        what = "corrupt Arrow data" if rows else "not a valid Arrow IPC file"
        where = f"record {rows + 1}: " if rows else ""
        raise unreadable(src.name, f"{where}{what}", e) from None
    except UnicodeDecodeError:
        raise InvalidInputError(f"{src.name}: a field name is not valid UTF-8") from None


def unreadable(name: str, what: str, e: BaseException) -> InvalidInputError:
    """The error for a binary input a native reader refused (its own nesting limits,
    and Python's recursion limit in fastavro, are reported as :func:`nesting_error`)."""
    why = reason(e)
    if isinstance(e, RecursionError) or "deeply nested" in why or "recursion depth" in why:
        return nesting_error(name)
    return InvalidInputError(f"{name}: {what} ({why})")


def read_avro(src: Input, batch_rows: int) -> Iterator[pa.RecordBatch]:
    try:
        reader = fastavro.reader(src.stream)
    except InvalidInputError:
        raise
    except Exception as e:
        raise unreadable(src.name, "not a valid Avro file", e) from None
    check_avro_schema(src.name, reader.writer_schema)
    try:
        typ = from_avro(reader.writer_schema)
    except InvalidInputError as e:
        raise InvalidInputError(f"{src.name}: {e}") from None
    except (LookupError, TypeError, ValueError, pa.ArrowException) as e:
        raise InvalidInputError(f"{src.name}: unsupported Avro schema ({reason(e)})") from None
    if not pt.is_struct(typ):
        raise InvalidInputError(f"{src.name}: Avro data must be records, not {typ}")
    records: list[dict[str, Any]] = []
    rows, values = 0, iter(reader)
    while True:
        try:
            record = next(values)
        except StopIteration:
            break
        except InvalidInputError:
            raise
        except Exception as e:
            where = f"record {rows + len(records) + 1}"
            if isinstance(e, UnicodeDecodeError):
                raise InvalidInputError(f"{src.name}: {where}: invalid UTF-8") from None
            raise unreadable(src.name, f"{where}: corrupt Avro data", e) from None
        records.append(cast(dict[str, Any], record))
        if len(records) == batch_rows:
            yield from _avro_batches(src.name, records, typ, rows)
            rows, records = rows + len(records), []
    yield from _avro_batches(src.name, records, typ, rows)


def _avro_batches(
    name: str, records: list[dict[str, Any]], typ: pa.StructType, before: int
) -> Iterator[pa.RecordBatch]:
    yield from build(
        name, records, typ, lambda i: f"record {before + i + 1}", direct=True
    ).to_batches()

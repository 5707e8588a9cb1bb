"""Decoding an input Parquet file on every core, row groups in file order.

A load's time goes to decoding its input and encoding its objects (both in pyarrow,
without the GIL). :func:`row_groups` decodes the row groups of an input file in up
to one thread per core, a few groups ahead of the caller, each thread with a reader
of its own (the footer parsed once); every group is converted to its stored form
(:mod:`.plain_types`) and checked (:func:`~.input_checks.check_values`) in the thread
that decoded it. Groups come out in file order, and so does an error: the first bad
group's, as a sequential read would raise it. Text columns stored as small
dictionaries are read as dictionary indices and decoded from their few values
(:func:`small_dictionaries`): the same table, for less work. A load may keep them as
dictionaries (``dictionaries``): its objects are then encoded from the indices (the
Parquet writer hashes no value per row), every group's remapped onto one dictionary
per column so that the writer's dictionary stays the same from chunk to chunk.
"""

from __future__ import annotations

import collections
import contextlib
import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pyarrow.types as pt

from limno.data.input_checks import check_values
from limno.data.plain_types import empty_table, is_text_dictionary, plain_batch
from limno.errors import InvalidInputError

__all__ = ["MAX_DECODERS", "NATIVE_ERRORS", "row_groups", "small_dictionaries"]

T = TypeVar("T")

#: threads decoding the row groups of one file, at most
MAX_DECODERS = 4
#: a dictionary page of at most this many bytes (as stored) makes a text column read as
#: dictionary indices (see :func:`small_dictionaries`)
SMALL_DICTIONARY_BYTES = 64 * 2**10
#: what native readers raise for bad bytes (MemoryError: a size in the file is absurd)
NATIVE_ERRORS = (pa.ArrowException, OSError, MemoryError)


def row_groups(
    f: pq.ParquetFile,
    local: str | None,
    data: bytes | None,
    unreadable: Callable[[str, BaseException], Exception],
    name: str,
    dictionaries: bool = False,
) -> Iterator[pa.Table]:
    """The row groups of ``f`` (the file at ``local``, else held in ``data``), checked
    and in their stored form (``dictionaries``: but for the columns of
    :func:`small_dictionaries`, kept as dictionaries). A group that fails to decode
    raises ``unreadable(what, error)``; one holding a bad value, :func:`check_values`'
    error (naming ``name``)."""
    meta = f.metadata
    starts = [0]
    for i in range(meta.num_row_groups):
        starts.append(starts[-1] + meta.row_group(i).num_rows)
    workers = min(os.cpu_count() or 1, MAX_DECODERS, meta.num_row_groups)
    small = small_dictionaries(f)
    expected = _expected(f.schema_arrow, small, dictionaries) if small else None
    kept = bool(small) and dictionaries
    readers: dict[tuple[int, bool], pq.ParquetFile] = {}  # by thread, and dictionaries
    opened: list[pa.NativeFile] = []

    def reader(dictionaries: bool) -> pq.ParquetFile:
        ident = (threading.get_ident(), dictionaries)
        found = readers.get(ident)
        if found is None:
            own = pa.OSFile(local) if local else pa.BufferReader(data)
            opened.append(own)
            found = pq.ParquetFile(
                own, metadata=meta, read_dictionary=small if dictionaries else None
            )
            readers[ident] = found
        return found

    def group(i: int) -> pa.Table:
        table = None
        if small:  # any failure: the group is read again as usual, which says why
            with contextlib.suppress(*NATIVE_ERRORS):
                read = reader(True).read_row_group(i, use_threads=workers == 1)
                table = plain_batch(read, text_dictionaries=kept)
                if not table.schema.equals(expected, check_metadata=True):
                    table = None  # (text past 2 GiB is stored large: decided on the views)
            if table is not None and kept:
                try:  # a bad value: the plain read names its row
                    check_values(name, table, starts[i])
                    return table
                except InvalidInputError:
                    table = None
        if table is None:
            try:
                table = reader(False).read_row_group(i, use_threads=workers == 1)
            except NATIVE_ERRORS as e:
                where = f"row group {i} (rows from {starts[i] + 1})"
                raise unreadable(f"{where}: corrupt Parquet data", e) from None
            # the reader builds well-formed arrays, which convert safely before their
            # values are checked (text is cheaper to check once it is no longer views)
            table = plain_batch(table)
        check_values(name, table, starts[i])
        return table

    try:
        if workers <= 1:
            groups: Iterator[pa.Table] = (group(i) for i in range(meta.num_row_groups))
        else:
            groups = _in_order(group, meta.num_row_groups, workers)
        yield from (_OneDictionary(small).apply(groups) if kept else groups)
    finally:
        for own in opened:
            own.close()


def _expected(schema: pa.Schema, small: list[str], dictionaries: bool) -> pa.Schema:
    """The schema of a group read with ``small`` as dictionaries, then converted (and
    with ``dictionaries``, those kept: 32-bit indices into their stored type)."""
    plain = plain_batch(empty_table(schema)).schema
    if not dictionaries:
        return plain
    for name in small:
        j = plain.get_field_index(name)
        field = plain.field(j)
        plain = plain.set(j, field.with_type(pa.dictionary(pa.int32(), field.type)))
    return plain


class _OneDictionary:
    """Remaps each group's dictionary columns onto one dictionary per column (the first
    group's, grown by any value a later group brings), in file order.

    The Parquet writer encodes a dictionary column from its indices only while the
    dictionary stays the same; a group whose own dictionary differs (another order of
    first appearance) would make it decode and hash every value of that column again.
    The remap is a lookup of a few values and one ``take`` of the indices.
    """

    def __init__(self, columns: list[str]) -> None:
        self.columns = columns
        self.values: dict[str, pa.Array] = {}

    def apply(self, tables: Iterator[pa.Table]) -> Iterator[pa.Table]:
        for table in tables:
            for name in self.columns:
                j = table.schema.get_field_index(name)
                column = table.column(j)
                if is_text_dictionary(column.type):  # else read the plain way (a bad value)
                    chunks = [self._remapped(name, c) for c in column.chunks]
                    table = table.set_column(
                        j, table.field(j), pa.chunked_array(chunks, column.type)
                    )
            yield table

    def _remapped(self, name: str, chunk: pa.DictionaryArray) -> pa.DictionaryArray:
        values = self.values.setdefault(name, chunk.dictionary)
        if chunk.dictionary.equals(values):
            return chunk
        positions = pc.index_in(chunk.dictionary, value_set=values)
        if positions.null_count:  # values this column has not had yet: appended
            values = pa.concat_arrays([values, chunk.dictionary.filter(positions.is_null())])
            self.values[name] = values
            positions = pc.index_in(chunk.dictionary, value_set=values)
        return pa.DictionaryArray.from_arrays(positions.take(chunk.indices), values)


def small_dictionaries(f: pq.ParquetFile) -> list[str]:
    """Top-level text and binary columns that every row group stores as a small
    dictionary (a dictionary page of at most :data:`SMALL_DICTIONARY_BYTES`, and of at
    most a byte per four rows): codes, flags, modes, such as TPC-H's ``l_shipmode``.

    Such a column is read as Arrow dictionary indices and decoded from the few values,
    which costs a half of building each value from its page (and for view types,
    a third of building views and converting them). A large dictionary page means the
    writer fell back to plain pages (values mostly distinct): read as usual.
    """
    meta = f.metadata
    schema = f.schema_arrow
    leaves = {meta.schema.column(j).path: j for j in range(meta.num_columns)}
    out = []
    for field in schema:
        t = field.type
        text = pt.is_string(t) or pt.is_string_view(t) or pt.is_binary(t) or pt.is_binary_view(t)
        j = leaves.get(field.name)
        if not text or j is None or not meta.num_row_groups:
            continue
        if all(_small_dictionary(meta.row_group(g).column(j)) for g in range(meta.num_row_groups)):
            out.append(field.name)
    return out


def _small_dictionary(chunk: pq.ColumnChunkMetaData) -> bool:
    start = chunk.dictionary_page_offset
    if not chunk.has_dictionary_page or start is None:
        return False
    # a few values repeated over many rows: not a writer's fallback to plain pages
    # after a dictionary page that had reached its size limit
    size = chunk.data_page_offset - start
    return 0 < size <= min(SMALL_DICTIONARY_BYTES, chunk.num_values // 4)


def _in_order(work: Callable[[int], T], n: int, workers: int) -> Iterator[T]:
    """``work(0)``, ..., ``work(n - 1)``, run by ``workers`` threads a few items ahead
    of the caller; stopping early cancels what has not started."""
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="limno-decode") as pool:
        ahead: collections.deque[Future[T]] = collections.deque()
        try:
            for i in range(n):
                ahead.append(pool.submit(work, i))
                if len(ahead) > workers:
                    yield ahead.popleft().result()
            while ahead:
                yield ahead.popleft().result()
        finally:
            for future in ahead:
                future.cancel()

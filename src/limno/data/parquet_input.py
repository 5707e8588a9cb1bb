"""Decoding an input Parquet file on every core, row groups in file order.

A load's time goes to decoding its input and encoding its objects (both in pyarrow,
without the GIL). :func:`row_groups` decodes the row groups of an input file in up
to one thread per core, a few groups ahead of the caller, each thread with a reader
of its own (the footer parsed once); every group is converted to its stored form
(:mod:`.plain_types`) and checked (:func:`~.input_checks.check_values`) in the thread
that decoded it. Groups come out in file order, and so does an error: the first bad
group's, as a sequential read would raise it. Text columns stored as small
dictionaries are read as dictionary indices and decoded from their few values
(:func:`small_dictionaries`): the same table, for less work.
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
import pyarrow.parquet as pq
import pyarrow.types as pt

from limno.data.input_checks import check_values
from limno.data.plain_types import plain_batch

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
) -> Iterator[pa.Table]:
    """The row groups of ``f`` (the file at ``local``, else held in ``data``), checked
    and in their stored form. A group that fails to decode raises ``unreadable(what,
    error)``; one holding a bad value, :func:`check_values`' error (naming ``name``)."""
    meta = f.metadata
    starts = [0]
    for i in range(meta.num_row_groups):
        starts.append(starts[-1] + meta.row_group(i).num_rows)
    workers = min(os.cpu_count() or 1, MAX_DECODERS, meta.num_row_groups)
    small = small_dictionaries(f)
    expected = plain_batch(f.schema_arrow.empty_table()).schema if small else None
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
                table = plain_batch(reader(True).read_row_group(i, use_threads=workers == 1))
                if not table.schema.equals(expected, check_metadata=True):
                    table = None  # (text past 2 GiB is stored large: decided on the views)
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
            yield from (group(i) for i in range(meta.num_row_groups))
        else:
            yield from _in_order(group, meta.num_row_groups, workers)
    finally:
        for own in opened:
            own.close()


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

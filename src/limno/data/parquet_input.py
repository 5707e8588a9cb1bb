"""Decoding an input Parquet file on every core, row groups in file order.

A load's time goes to decoding its input and encoding its objects (both in pyarrow,
without the GIL). :func:`row_groups` decodes the row groups of an input file in up
to one thread per core, a few groups ahead of the caller, each thread with a reader
of its own (the footer parsed once); every group is converted to its stored form
(:mod:`.plain_types`) and checked (:func:`~.input_checks.check_values`) in the thread
that decoded it. Groups come out in file order, and so does an error: the first bad
group's, as a sequential read would raise it.
"""

from __future__ import annotations

import collections
import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

import pyarrow as pa
import pyarrow.parquet as pq

from limno.data.input_checks import check_values
from limno.data.plain_types import plain_batch

__all__ = ["MAX_DECODERS", "NATIVE_ERRORS", "row_groups"]

T = TypeVar("T")

#: threads decoding the row groups of one file, at most
MAX_DECODERS = 4
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
    readers: dict[int, pq.ParquetFile] = {}  # by thread
    opened: list[pa.NativeFile] = []

    def group(i: int) -> pa.Table:
        try:
            reader = readers.get(threading.get_ident())
            if reader is None:
                own = pa.OSFile(local) if local else pa.BufferReader(data)
                opened.append(own)
                reader = pq.ParquetFile(own, metadata=meta)
                readers[threading.get_ident()] = reader
            table = reader.read_row_group(i, use_threads=workers == 1)
        except NATIVE_ERRORS as e:
            where = f"row group {i} (rows from {starts[i] + 1})"
            raise unreadable(f"{where}: corrupt Parquet data", e) from None
        # the reader builds well-formed arrays, which convert safely before their values
        # are checked (text is cheaper to check once it is no longer views)
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

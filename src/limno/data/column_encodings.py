"""How each column of a data object is encoded: dictionary, delta or plain, LZ4 or none.

Chosen per object on its first rows (:func:`choose`), for every primitive leaf: a
top-level column, or a field of a struct (``kafka.offset``, ``value.after.ID``: the
records of a Kafka or Debezium pool are nested, and their key is such a field).
Dictionary encoding is kept only where values repeat; for unique values it costs time
and makes files larger. Ascending integer and temporal leaves (a sorted key, an
offset) are delta-encoded. Pages are LZ4, but a plain leaf that LZ4 cannot shrink
(judged on its first values) is stored uncompressed. Leaves inside lists and maps,
and fields of a struct with a dot in a name, keep Arrow's defaults (dictionary, LZ4).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from limno.data.plain_types import empty_table, plain_batch
from limno.data.sort import numpy_values

__all__ = [
    "COMPRESSION",
    "COMPRESSION_PROBE_BYTES",
    "DICTIONARY_MIN_ROWS",
    "DICTIONARY_SAMPLE_ROWS",
    "Choice",
    "choose",
]

#: LZ4 (the raw block format of Parquet 2.9, ``LZ4_RAW``) decodes about a third
#: faster than zstd level 1 in DuckDB's and Arrow's scans, at about 45% more bytes
COMPRESSION = "lz4"
#: rows looked at to decide whether a column's values repeat enough for a dictionary
DICTIONARY_SAMPLE_ROWS = 16384
#: ... and the fewest rows for which that is worth looking at (fewer: no dictionaries)
DICTIONARY_MIN_ROWS = 4096
#: bytes of a plain column's first values that LZ4 is tried on, at most; a probe must
#: be larger than 64 KiB, where LZ4 finds matches as in a page (of about 1 MiB) and not
#: in its mode for small inputs (a table twice as fine: random 40-bit integers in int64
#: shrink by 12% there, by nothing in a page)
COMPRESSION_PROBE_BYTES = 256 * 1024
COMPRESSION_PROBE_MIN_BYTES = 96 * 1024
#: a plain column whose probe LZ4 shrinks by less than this share is stored uncompressed
MIN_COMPRESSION_GAIN = 0.05


@dataclass(frozen=True)
class Choice:
    """The ``pq.ParquetWriter`` options of one object's columns."""

    #: True (every column), or the leaf paths that are dictionary encoded, or False
    dictionary: bool | list[str]
    #: leaf paths stored as ``DELTA_BINARY_PACKED``
    ascending: list[str]
    #: one codec, or one per leaf path
    compression: str | dict[str, str]


def choose(sample: pa.Table) -> Choice:
    """The encodings of an object whose first rows are ``sample``."""
    dictionary, ascending = _encodings(sample)
    return Choice(dictionary, ascending, _compressions(sample, dictionary, ascending))


def _leaves(name: str, column: pa.ChunkedArray) -> Iterator[tuple[str, pa.ChunkedArray]]:
    """The primitive leaves of a column as Parquet paths (``kafka.offset``) and values:
    the column itself, or its struct fields' (recursively); none inside lists or maps,
    nor below a struct with a dot in a field's name (its paths would be ambiguous)."""
    t = column.type
    if _flat(t):
        yield name, column
    elif pa.types.is_struct(t) and not any("." in t.field(i).name for i in range(t.num_fields)):
        for i in range(t.num_fields):
            yield from _leaves(f"{name}.{t.field(i).name}", pc.struct_field(column, [i]))


def _encodings(sample: pa.Table) -> tuple[bool | list[str], list[str]]:
    """Columns worth dictionary encoding, and ascending ones, judged on an object's first rows.

    Dictionary encoding pays when values repeat; for (nearly) unique values it costs
    time and makes the file larger. Only primitive leaves (:func:`_leaves`) whose sample
    has more than half distinct values go without; lists and maps keep the default. So do
    integer and temporal columns whose sample is in ascending order (the pool key, a
    sorted id): their runs and small steps compress better than a dictionary's indices
    and encode in half the time (TPC-H ``l_orderkey``, about 4 rows per value: 27%
    smaller, 60% less encoding time). Those are the second list, stored as
    ``DELTA_BINARY_PACKED`` rather than plain: a few bits a value that DuckDB decodes
    with no page decompression (TPC-H Q4, which scans ``l_orderkey`` and ``o_orderkey``:
    about a fifth less CPU; pyarrow reads the column in half the time). In an object of
    fewer than :data:`DICTIONARY_MIN_ROWS` rows every primitive column goes plain: a
    dictionary saves next to nothing there, and building one takes a good part of a
    small append's encoding time.
    """
    small = sample.num_rows < DICTIONARY_MIN_ROWS
    # judged on the stored values (text kept as dictionaries: as its plain form is)
    sample = plain_batch(sample.slice(0, DICTIONARY_SAMPLE_ROWS))
    plain, ascending = [], []
    for name, column in _all_leaves(sample):
        if small:
            plain.append(name)
            continue
        valid = len(column) - column.null_count
        if valid and _ascending(column):
            ascending.append(name)
        elif valid and pc.count_distinct(column).as_py() * 2 > valid:
            plain.append(name)
    if not plain and not ascending:
        return True, ascending
    paths = _leaf_paths(sample.schema)
    enabled = [p for p in paths if p not in plain and p not in ascending]
    return enabled or False, ascending


def _compressions(
    sample: pa.Table, dictionary: bool | list[str], ascending: list[str]
) -> str | dict[str, str]:
    """The codec of each column: :data:`COMPRESSION`, but none for a plain column whose
    values LZ4 cannot shrink (random numbers, hashes, ids that are not sorted).

    On such values LZ4 still spends a pass and a copy of every page when writing, and
    the reader one when decoding, for pages that come out the same size or larger
    (the ``compaction`` benchmark's random ``a`` and ``b``: LZ4 saves 0%). Judged on
    the first :data:`COMPRESSION_PROBE_BYTES` of the sample's values, as LZ4 sees the
    plain encoding; dictionary and delta encoded columns keep the codec. So does every
    column of a table with a dot in a column name: Arrow reads a codec's column path at
    its dots, and a column it does not find would get no codec at all.
    """
    if dictionary is True or any("." in name for name in sample.schema.names):
        return COMPRESSION
    encoded = set(ascending) | (set(dictionary) if isinstance(dictionary, list) else set())
    codec = pa.Codec(COMPRESSION)
    raw = [
        name
        for name, column in _all_leaves(sample)
        if name not in encoded and _incompressible(_probe(column), codec)
    ]
    if not raw:
        return COMPRESSION
    return {p: "none" if p in raw else COMPRESSION for p in _leaf_paths(sample.schema)}


def _probe(column: pa.ChunkedArray) -> pa.Buffer | None:
    """The first values of a number or text column as its plain encoding holds them
    (None for other types, or too few values to judge)."""
    if not column.num_chunks:
        return None
    chunk = column.chunk(0)
    t = chunk.type
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_timestamp(t):
        width = t.bit_width // 8
        count = min(len(chunk), COMPRESSION_PROBE_BYTES // width)
        data = chunk.buffers()[1]
        start = chunk.offset * width
    elif pa.types.is_string(t) or pa.types.is_binary(t):
        ends = [None, chunk.buffers()[1]]
        offsets = numpy_values(
            pa.Array.from_buffers(pa.int32(), len(chunk) + 1, ends, 0, chunk.offset)
        )
        data = chunk.buffers()[2]
        start = int(offsets[0])
        count = min(int(offsets[-1]) - start, COMPRESSION_PROBE_BYTES)
        width = 1
    else:
        return None
    if data is None or count * width < COMPRESSION_PROBE_MIN_BYTES:
        return None
    return data.slice(start, count * width)


def _incompressible(probe: pa.Buffer | None, codec: pa.Codec) -> bool:
    if probe is None:
        return False
    packed = codec.compress(probe, asbytes=False)
    return bool(packed.size > probe.size * (1 - MIN_COMPRESSION_GAIN))


def _ascending(column: pa.ChunkedArray) -> bool:
    """Whether an integer or temporal column's values (nulls aside) never decrease."""
    t = column.type
    if not (pa.types.is_integer(t) or pa.types.is_temporal(t)) or pa.types.is_interval(t):
        return False  # intervals have no order
    values = column.drop_null() if column.null_count else column
    if len(values) < 2:
        return False
    later, earlier = values.slice(1), values.slice(0, len(values) - 1)
    return bool(pc.all(pc.greater_equal(later, earlier)).as_py())


def _flat(t: pa.DataType) -> bool:
    return (
        pa.types.is_integer(t)
        or pa.types.is_floating(t)
        or pa.types.is_decimal(t)
        or pa.types.is_temporal(t)
        or pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
    )


@functools.lru_cache(maxsize=256)
def _leaf_paths(schema: pa.Schema) -> tuple[str, ...]:
    """The Parquet column paths a schema is written as (``a.list.element``...).

    A nested schema's are read from an empty file written for it (about 0.5 ms), so
    they are remembered: the dictionary and the codec choice each need them, for
    every object of a load, and every small commit of a Kafka pool."""
    if all(_flat(t) or pa.types.is_boolean(t) for t in schema.types):
        return tuple(schema.names)
    buf = pa.BufferOutputStream()
    pq.write_table(empty_table(schema), buf)
    md = pq.ParquetFile(pa.BufferReader(buf.getvalue())).metadata
    return tuple(md.schema.column(i).path for i in range(md.num_columns))


def _all_leaves(table: pa.Table) -> Iterator[tuple[str, pa.ChunkedArray]]:
    """Every leaf of :func:`_leaves`; only the top-level columns when a column's own
    name has a dot (``a.b`` beside a struct ``a``'s field ``b`` would be one path)."""
    dotted = any("." in name for name in table.column_names)
    for name, column in zip(table.column_names, table.columns, strict=True):
        if dotted:
            if _flat(column.type):
                yield name, column
        else:
            yield from _leaves(name, column)

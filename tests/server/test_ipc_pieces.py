"""An Arrow IPC answer's batches go out as pieces (limno.server.formats.Pieces): the
message and padding as small bytes, the column buffers as views of Arrow's memory, so
the server never copies a batch into one buffer; joined, they are the stream."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.ipc as ipc
import pytest

from limno.server.formats import ARROW, Pieces, encode, joined

ROWS = 300_000


def _read(body: bytes) -> pa.Table:
    return ipc.open_stream(pa.py_buffer(body)).read_all()


def test_a_large_column_is_sent_from_arrows_own_memory() -> None:
    table = pa.table({"k": pa.array(range(ROWS), pa.int64())})
    chunks = list(encode([table], ARROW))
    data = table.column("k").chunks[0].buffers()[1]
    addresses = {
        pa.py_buffer(part).address
        for chunk in chunks
        if isinstance(chunk, Pieces)
        for part in chunk.parts
        if isinstance(part, memoryview)
    }
    assert data.address in addresses  # the column's own buffer, not a copy of it
    assert _read(joined(chunks)).equals(table)


def _mixed(start: int, n: int, tags: list[str]) -> pa.Table:
    keys = list(range(start, start + n))
    return pa.table(
        {
            "k": pa.array(keys, pa.int64()),
            "s": pa.array([None if k % 7 == 0 else f"v{k}" * (k % 5) for k in keys]),
            "v": pa.array([f"view{k}" for k in keys], pa.string_view()),
            "tag": pa.array([tags[k % len(tags)] for k in keys]).dictionary_encode(),
            "xs": pa.array([None if k % 5 == 0 else list(range(k % 4)) for k in keys]),
            "st": pa.array([{"a": k, "b": None if k % 2 else "x"} for k in keys]),
            "b": pa.array([k % 3 == 0 for k in keys]),
        }
    )


@pytest.mark.parametrize("offset", [0, 3, 8])
def test_sliced_nested_view_and_dictionary_columns_read_back(offset: int) -> None:
    first = _mixed(0, 200_000, ["red", "green", "blue"]).slice(offset)
    second = _mixed(500_000, 50_000, ["one", "two"])  # another dictionary: a replacement
    body = joined(encode([first, second], ARROW))
    got = _read(body)
    assert got.num_rows == first.num_rows + second.num_rows
    assert got.slice(0, first.num_rows).equals(first.combine_chunks())
    assert got.slice(first.num_rows).equals(second)


def test_no_tables_is_a_stream_of_the_schema_alone() -> None:
    schema = pa.schema([("k", pa.int64()), ("s", pa.string())])
    got = _read(joined(encode([], ARROW, schema)))
    assert got.schema == schema and got.num_rows == 0


def test_each_message_is_a_chunk_of_about_a_megabyte_at_most() -> None:
    table = pa.table({"k": pa.array(range(ROWS), pa.int64()), "f": pa.array([1.5] * ROWS)})
    chunks = list(encode([table], ARROW))
    assert len(chunks) >= table.nbytes // (1 << 20)
    assert max(len(c) for c in chunks) <= (1 << 20) + 4096
    assert _read(joined(chunks)).equals(table)

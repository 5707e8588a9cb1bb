"""Reading user input files into Arrow record batches, for ``load`` and ``add``.

Inputs come in many formats (ndjson, json, csv, tsv, parquet, arrow, avro, orc),
plain or gzip/zstd compressed, from files or stdin, and often of no single shape.
This module turns each into a stream of :class:`pyarrow.RecordBatch` so that a load
of any size runs in bounded memory wherever the format allows it: text formats are
parsed in blocks of whole lines, Parquet by row group, Arrow IPC by batch, Avro by
block, ORC by stripe. Batches of one input may differ in schema (a pool needs none;
:mod:`._schema` unifies them).

Two promises shape the code:

* Data of any shape loads. pyarrow's JSON and CSV readers infer one type per column
  and fail when a later value disagrees. Each block is therefore parsed on its own
  and, for JSON, a block pyarrow rejects is parsed again in Python, where every
  value's type is inferred and widened (:mod:`._python_rows`). Well-typed data
  keeps the fast path.
* Bad input fails with one line that names the file, where, and why:
  ``data.ndjson: line 3: invalid JSON (Expecting ',' delimiter)``. Text formats give
  1-based physical line numbers, binary formats a record number or row group. This
  includes input that would load but harm the pool (:mod:`._input_checks`): invalid
  UTF-8 and nesting deeper than Parquet reads back are refused before parsing.

Batches come out in their stored form (:mod:`.plain_types`: view types, dictionaries,
half floats and narrow 256-bit decimals become their plain equivalents).

Compression is recognized by magic bytes, not by name, and decompressed as a
stream (:mod:`.input_streams`). The format comes from the caller, else the file
extension (after ``.gz`` / ``.zst``), else the first bytes of the (decompressed)
content.
"""

from __future__ import annotations

import codecs
import io
import json
import os
import re
from collections.abc import Callable, Iterator
from typing import IO, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
import pyarrow.json as pjson
import pyarrow.types as pt

from limno.data import csv_dialect
from limno.data.binary_readers import (
    read_arrow,
    read_avro,
    read_columnar,
    read_parquet_dictionaries,
    split_batches,
)
from limno.data.input_checks import (
    check_json_nesting,
    check_schema,
    check_text,
    nesting_error,
    reason,
    without_empty_structs,
)
from limno.data.input_streams import Input, decompress, open_input, peek
from limno.data.plain_types import plain_batch
from limno.data.python_rows import python_table
from limno.data.schema import conform, unify
from limno.errors import InvalidInputError

__all__ = ["FORMATS", "detect_format", "read_records", "read_table"]

FORMATS = ("ndjson", "json", "csv", "tsv", "parquet", "arrow", "avro", "orc")

# file extension -> format
_EXTENSIONS = {f: f for f in FORMATS} | {"jsonl": "ndjson", "ldjson": "ndjson", "tab": "tsv"}
_EXTENSIONS |= {"pq": "parquet", "arrows": "arrow", "ipc": "arrow", "feather": "arrow"}
_COMPRESSED_SUFFIXES = (".gz", ".gzip", ".zst", ".zstd")
_BOM = b"\xef\xbb\xbf"
_BLOCK = 4 << 20  # bytes of text parsed at a time (a module attribute so tests can shrink it)
_HEAD = 64 << 10  # bytes peeked to detect compression and format
# Blocks pyarrow.json would read differently from the Python path: it rounds integers past
# int64 to float64, and takes a `null` line for a record of nulls (not an object: an error).
# Digits are found as zeros after a translate, lines by their newline: a regex over every
# position of the block (r"\d{19}|^...$") costs more than parsing it.
_DIGITS_AS_ZEROS = bytes(c if not 0x30 <= c <= 0x39 else 0x30 for c in range(256))
_LONG_INTEGER = b"0" * 19
_DECIMAL_DIGITS = 38  # the most decimal128(38, 0) holds: longer integers are text, as in JSON
_NULL_LINE = re.compile(rb"[ \t]*null[ \t\r]*(?=\n|\Z)")
_NEXT_NULL_LINE = re.compile(rb"\n[ \t]*null[ \t\r]*(?=\n|\Z)")
_JSON_WS = re.compile(r"[^ \t\r\n]")


def detect_format(name: str, head: bytes) -> str:
    """The input format of ``name``: by extension, else by sniffing ``head``."""
    base = os.path.basename(name).lower()
    for suffix in _COMPRESSED_SUFFIXES:
        if base.endswith(suffix):
            base = base[: -len(suffix)]
            break
    _, dot, ext = base.rpartition(".")
    if dot and ext in _EXTENSIONS:
        return _EXTENSIONS[ext]
    for magic, fmt in ((b"PAR1", "parquet"), (b"ARROW1", "arrow"), (b"\xff\xff\xff\xff", "arrow")):
        if head.startswith(magic):
            return fmt
    if head.startswith(b"Obj\x01"):
        return "avro"
    if head.startswith(b"ORC"):
        return "orc"
    text = head.removeprefix(_BOM).lstrip()
    if text[:1] == b"[":
        return "json"
    if text[:1] == b"{":
        return "ndjson" if _first_line_is_object(text, len(head) < _HEAD) else "json"
    if text and b"\x00" not in head and _is_utf8(head):
        first = text.split(b"\n", 1)[0]
        return "tsv" if b"\t" in first and b"," not in first else "csv"
    raise InvalidInputError(
        f"{name}: cannot detect the input format (name it: one of {', '.join(FORMATS)})"
    )


def _first_line_is_object(text: bytes, complete: bool) -> bool:
    line, newline, _ = text.partition(b"\n")
    if not newline and not complete:
        return True  # a first line longer than the peek: only NDJSON has those
    try:
        return isinstance(json.loads(line), dict)
    except ValueError:
        return False


def _is_utf8(head: bytes) -> bool:
    try:
        codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
    except UnicodeDecodeError:
        return False
    return True


def read_records(
    path: str, fmt: str | None = None, *, batch_rows: int = 65536, dictionaries: bool = False
) -> Iterator[pa.RecordBatch]:
    """Record batches of one input file (``"-"``: stdin), in bounded memory.

    Batches hold at most ``batch_rows`` rows; their schemas may differ (``dictionaries``:
    see :func:`~.parquet_input.row_groups`). Raises :class:`InvalidInputError` (one line
    naming the file) for bad input, including an input with no records.
    """
    if fmt is not None and fmt not in FORMATS:
        raise InvalidInputError(f"unknown input format {fmt!r} (one of {', '.join(FORMATS)})")
    path = os.fspath(path)
    name, raw, owned = open_input(path)
    stream: IO[bytes] | None = None
    try:
        stream, codec = decompress(name, raw)
        head, stream = peek(stream, _HEAD, name, codec)
        if not head:
            raise InvalidInputError(f"{name}: no records")
        src = Input(name, stream, head, path if owned and codec is None else None)
        rows, checked = 0, None
        fmt = fmt or detect_format(name, head)
        kept = dictionaries and fmt == "parquet"
        read = read_parquet_dictionaries if kept else _READERS[fmt]
        for batch in read(src, batch_rows):
            if batch.num_rows:
                if checked is None or not batch.schema.equals(checked):
                    check_schema(name, batch.schema)  # the readers check before parsing too
                    checked = batch.schema
                rows += batch.num_rows
                yield plain_batch(without_empty_structs(batch), text_dictionaries=kept)
        if rows == 0:
            raise InvalidInputError(f"{name}: no records")
    finally:
        if stream is not None:
            stream.close()
        if owned:
            raw.close()


def read_table(path: str, fmt: str | None = None) -> pa.Table:
    """All records of one input as one table, batch schemas unified by the widening rule."""
    batches = list(read_records(path, fmt))
    schema = unify(b.schema for b in batches)
    return pa.concat_tables([conform(b, schema) for b in batches])


# -- text blocks -----------------------------------------------------------------------
def _blocks(src: Input, quote: bytes | None) -> Iterator[tuple[int, bytes]]:
    """(number of its first line, block) of the text cut into blocks of whole lines,
    each checked to be UTF-8 before anything parses it."""
    line = 1
    for block in _cut_blocks(src.stream, quote):
        check_text(src.name, block, line)
        yield line, block
        line += block.count(b"\n")


def _cut_blocks(stream: IO[bytes], quote: bytes | None) -> Iterator[bytes]:
    """The stream cut into blocks of whole lines (never inside a quoted CSV field)."""
    carry, first = b"", True
    while True:
        data = stream.read(max(_BLOCK, len(carry)))
        if first:
            data, first = data.removeprefix(_BOM), False
        if not data:
            if carry:
                yield carry
            return
        buf = carry + data
        cut = _cut(buf, quote)
        if cut:
            yield buf[:cut]
        carry = buf[cut:]


def _cut(buf: bytes, quote: bytes | None) -> int:
    end = buf.rfind(b"\n")
    if end < 0:
        return 0
    if quote is None:
        return end + 1
    quotes = buf.count(quote, 0, end + 1)
    while quotes % 2:  # this newline is inside a quoted field: try the one before
        prev = buf.rfind(b"\n", 0, end)
        if prev < 0:
            return 0
        quotes -= buf.count(quote, prev + 1, end + 1)
        end = prev
    return end + 1


# -- JSON ------------------------------------------------------------------------------
def _read_ndjson(src: Input, batch_rows: int) -> Iterator[pa.RecordBatch]:
    for line, block in _blocks(src, None):
        yield from split_batches(_ndjson_block(src.name, block, line), batch_rows)


def _ndjson_block(name: str, block: bytes, first_line: int) -> pa.Table:
    check_json_nesting(name, block, first_line)  # deep JSON crashes pyarrow's parser
    if not _slow_json(block):
        try:
            opts = pjson.ReadOptions(block_size=len(block) + 1)  # one block: one inference
            return pjson.read_json(io.BytesIO(block), read_options=opts)
        except pa.ArrowInvalid:
            pass  # a type conflict, or bad input: the Python path tells which
    records, lines = [], []
    for i, raw in enumerate(block.split(b"\n")):
        if raw.strip():
            records.append(_json_object(name, first_line + i, raw))
            lines.append(first_line + i)
    return python_table(name, records, lines)


def _slow_json(block: bytes) -> bool:
    """Whether ``block`` has an integer of 19 digits or more, or a ``null`` line."""
    return (
        _LONG_INTEGER in block.translate(_DIGITS_AS_ZEROS)
        or _NULL_LINE.match(block) is not None
        or _NEXT_NULL_LINE.search(block) is not None
    )


def _json_object(name: str, line: int, raw: bytes) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as e:
        raise InvalidInputError(f"{name}: line {line}: invalid JSON ({e.msg})") from None
    except UnicodeDecodeError:
        raise InvalidInputError(f"{name}: line {line}: invalid UTF-8") from None
    except RecursionError:
        raise nesting_error(name, f"line {line}") from None
    return _check_object(name, line, value)


def _check_object(name: str, line: int, value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        kinds = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
        kind = kinds.get(type(value), "a number")
        raise InvalidInputError(f"{name}: line {line}: expected a JSON object, got {kind}")
    return value


def _read_json(src: Input, batch_rows: int) -> Iterator[pa.RecordBatch]:
    text = src.head.removeprefix(_BOM).lstrip()
    if text[:1] == b"{" and _first_line_is_object(text, len(src.head) < _HEAD):
        yield from _read_ndjson(src, batch_rows)  # JSON Lines named .json: the fast path
        return
    # A JSON document has no record boundaries to cut blocks at: it is read whole.
    records = list(_json_document(src.name, src.stream.read()))
    for start in range(0, len(records), batch_rows):
        part = records[start : start + batch_rows]
        yield from split_batches(
            python_table(src.name, [r for _, r in part], [n for n, _ in part]), batch_rows
        )


def _json_document(name: str, data: bytes) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line, object) of a top-level array of objects, or of objects one after another
    (a single object, or pretty-printed ones)."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise InvalidInputError(f"{name}: line {line}: invalid UTF-8") from None
    decoder, seen, line = json.JSONDecoder(), 0, 1

    def line_at(pos: int) -> int:  # positions only move forward: count newlines once
        nonlocal seen, line
        line, seen = line + text.count("\n", seen, pos), pos
        return line

    def skip(pos: int) -> int:
        m = _JSON_WS.search(text, pos)
        return m.start() if m else len(text)

    def fail(pos: int, reason: str) -> InvalidInputError:
        return InvalidInputError(f"{name}: line {line_at(pos)}: invalid JSON ({reason})")

    pos = skip(0)
    array = text.startswith("[", pos)
    check_json_nesting(name, data, 1, outer=int(array))  # the array is one more level
    pos, first = skip(pos + 1) if array else pos, True
    while pos < len(text):
        if array and text[pos] == "]":
            array, pos = False, skip(pos + 1)
            if pos < len(text):
                raise fail(pos, "Extra data")
            break
        if array and not first:
            if text[pos] != ",":
                raise fail(pos, "Expecting ',' delimiter")
            pos = skip(pos + 1)
        try:
            value, end = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as e:
            raise fail(e.pos, e.msg) from None
        except RecursionError:
            raise nesting_error(name, f"line {line_at(pos)}") from None
        yield line_at(pos), _check_object(name, line_at(pos), value)
        pos, first = skip(end), False
    if array:
        raise fail(pos, "Expecting ',' delimiter" if not first else "Expecting value")


# -- CSV / TSV -------------------------------------------------------------------------
#: an empty unquoted field is null in every column, strings included, and nothing else
#: is (DuckDB's and Spark's rule): a quoted ``""`` stays an empty string, and text such
#: as ``NA`` or ``null`` is a value (pyarrow's default list would make it null, but only
#: outside string columns)
_CONVERT = pcsv.ConvertOptions(
    null_values=[""], strings_can_be_null=True, quoted_strings_can_be_null=False
)


def _read_csv(src: Input, batch_rows: int) -> Iterator[pa.RecordBatch]:
    """CSV separated by a comma, or by a semicolon or a bar where the head shows it
    (:mod:`.csv_dialect`)."""
    found = csv_dialect.delimiter(src.head, len(src.head) < _HEAD)
    return _read_delimited(src, batch_rows, found)


def _read_delimited(src: Input, batch_rows: int, delimiter: str) -> Iterator[pa.RecordBatch]:
    # TSV has no quoting (IANA text/tab-separated-values): a '"' there is just a character.
    quote = None if delimiter == "\t" else '"'
    parse = pcsv.ParseOptions(
        delimiter=delimiter, quote_char=quote or False, newlines_in_values=quote is not None
    )
    header: list[str] | None = None
    for line, block in _blocks(src, quote.encode() if quote else None):
        opts = pcsv.ReadOptions(block_size=len(block) + 1, use_threads=False, column_names=header)
        table = _csv_block(src.name, block, line, opts, parse, quote)
        if header is None:
            header = table.column_names
            dup = next((n for n in header if header.count(n) > 1), None)
            if dup is not None:
                raise InvalidInputError(f"{src.name}: line {line}: duplicate column {dup!r}")
        yield from split_batches(table, batch_rows)


def _csv_block(
    name: str,
    block: bytes,
    first_line: int,
    opts: pcsv.ReadOptions,
    parse: pcsv.ParseOptions,
    quote: str | None,
) -> pa.Table:
    bad: list[Any] = []

    def on_invalid(row: Any) -> str:
        bad.append(row)
        return "error"

    parse.invalid_row_handler = on_invalid
    try:
        table = pcsv.read_csv(
            io.BytesIO(block), read_options=opts, parse_options=parse, convert_options=_CONVERT
        )
        return _exact_integers(table, block, opts, parse)
    except pa.ArrowInvalid as e:
        if "Empty CSV file" in str(e):
            return pa.table({})
        if bad and bad[0].number is not None:
            row = bad[0]
            line = first_line + _record_line(block, row.number, quote)
            what = f"expected {row.expected_columns} columns, got {row.actual_columns}"
            raise InvalidInputError(f"{name}: line {line}: {what}") from None
        last = first_line + block.count(b"\n") - 1
        raise InvalidInputError(f"{name}: lines {first_line}-{last}: {reason(e)}") from None


def _exact_integers(
    table: pa.Table, block: bytes, opts: pcsv.ReadOptions, parse: pcsv.ParseOptions
) -> pa.Table:
    """``table`` with its integer columns beyond int64 exact, as JSON reads them.

    pyarrow infers float64 for such a column, rounding its values: a float64 column
    of integer literals only becomes decimal(38, 0), or text past 38 digits
    (:func:`.schema.infer_type`'s rule for JSON).
    """
    floats = [f.name for f in table.schema if pt.is_float64(f.type)]
    if not floats or _LONG_INTEGER not in block.translate(_DIGITS_AS_ZEROS):
        return table
    types = {n: pa.string() for n in floats}
    convert = pcsv.ConvertOptions(
        null_values=[""],
        strings_can_be_null=True,
        quoted_strings_can_be_null=False,
        column_types=types,
        include_columns=floats,
    )
    texts = pcsv.read_csv(io.BytesIO(block), opts, parse, convert)
    for name in floats:
        text = texts.column(name)
        valid = text.drop_null()
        if len(valid) == 0 or not pc.all(pc.match_substring_regex(valid, r"^[+-]?\d+$")).as_py():
            continue
        digits = pc.max(pc.utf8_length(pc.utf8_ltrim(valid, "+-0"))).as_py() or 0
        exact = text if digits > _DECIMAL_DIGITS else pc.cast(text, pa.decimal128(38, 0))
        table = table.set_column(table.schema.get_field_index(name), name, exact)
    return table


def _record_line(block: bytes, number: int, quote: str | None) -> int:
    """The 0-based physical line (in ``block``) where its ``number``-th record starts.

    pyarrow numbers records from 1 and skips empty lines; a quoted field may span
    lines.
    """
    records, inside = 0, False
    for i, line in enumerate(block.split(b"\n")):
        if not inside and line.rstrip(b"\r"):
            records += 1
            if records == number:
                return i
        if quote is not None and line.count(quote.encode()) % 2:
            inside = not inside
    return 0


_READERS: dict[str, Callable[[Input, int], Iterator[pa.RecordBatch]]] = {
    "ndjson": _read_ndjson,
    "json": _read_json,
    "csv": _read_csv,
    "tsv": lambda src, n: _read_delimited(src, n, "\t"),
    "parquet": lambda src, n: read_columnar(src, n, "Parquet"),
    "arrow": read_arrow,
    "avro": read_avro,
    "orc": lambda src, n: read_columnar(src, n, "ORC"),
}

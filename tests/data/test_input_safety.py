"""Input that would load but harm the pool is refused at load time, and nothing is written.

Invalid UTF-8 used to load and then make every scan of the pool fail; records nested
deeper than Parquet reads back used to load as unreadable objects, and very deep JSON
crashed pyarrow's parser. Each case here goes through the real CLI (or the Python API
for Arrow tables) and checks the one error line and that the lake did not change.
"""

from __future__ import annotations

import decimal
import gzip
import io
import json
import os
import re
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.orc as porc
import pyarrow.parquet as pq
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from clirunner import fail, ok
from limno.api.local import LocalLake as Lake
from limno.data import readers as _readers
from limno.data.input_checks import MAX_NESTING, check_json_nesting
from limno.errors import InvalidInputError

BAD = b"a\xff\xfeb"  # not UTF-8
SETTINGS = settings(max_examples=60, deadline=None, print_blob=True)


@pytest.fixture
def lake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("LIMNO_LAKE", raising=False)
    where = str(tmp_path / "lake")
    ok("--lake", where, "init")
    ok("--lake", where, "create", "p", "-k", "id")
    ok("--lake", where, "load", "-p", "p", "-", stdin=b'{"id": 0, "s": "first"}\n')
    return where


def files_of(lake: str) -> dict[str, bytes]:
    out = {}
    for root, _, names in os.walk(lake):
        for name in names:
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                out[os.path.relpath(path, lake)] = f.read()
    return out


def refused(lake: str, path: Path, *expected: str) -> str:
    """Load ``path``: one error line containing each of ``expected``, the lake unchanged,
    and the pool still scannable."""
    before, rows = files_of(lake), ok("--lake", lake, "scan", "-p", "p").rows()
    err = fail("--lake", lake, "load", "-p", "p", str(path)).err.strip()
    assert len(err.splitlines()) == 1 and err.startswith(f"error: {path}: "), err
    for part in expected:
        assert part in err, err
    assert files_of(lake) == before
    assert ok("--lake", lake, "scan", "-p", "p").rows() == rows
    return err


def compressed(path: Path, data: bytes, codec: str) -> Path:
    """``data`` written to ``path`` (plus ``.gz``/``.zst``) with ``codec``."""
    if codec == "gzip":
        path = path.with_name(path.name + ".gz")
        data = gzip.compress(data)
    elif codec == "zstd":
        path = path.with_name(path.name + ".zst")
        data = zstandard.ZstdCompressor().compress(data)
    path.write_bytes(data)
    return path


CODECS = ["plain", "gzip", "zstd"]

# -- invalid UTF-8 in text ---------------------------------------------------------------
TEXT_CASES = {
    "value.ndjson": b'{"id": 1, "s": "ok"}\n{"id": 2, "s": "' + BAD + b'"}\n',
    "key.ndjson": b'{"id": 1, "s": "ok"}\n{"id": 2, "' + BAD + b'": 1}\n',
    "nested.ndjson": b'{"id": 1}\n{"id": 2, "s": {"t": ["x", "' + BAD + b'"]}}\n',
    "doc.json": b'[{"id": 1},\n {"id": 2, "s": {"' + BAD + b'": 1}}]\n',
    "value.csv": b"id,s\n1,ok\n2," + BAD + b"\n",
    "header.csv": b"id,s" + BAD + b"\n1,ok\n",
    "quoted.csv": b'id,s\n1,"ok\nstill ok"\n2,"' + BAD + b'"\n',
    "value.tsv": b"id\ts\n1\tok\n2\t" + BAD + b"\n",
}
TEXT_LINES = {"header.csv": 1, "quoted.csv": 4, "value.csv": 3, "value.tsv": 3}


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("case", sorted(TEXT_CASES))
def test_invalid_utf8_in_text_is_refused(lake: str, tmp_path: Path, case: str, codec: str) -> None:
    path = compressed(tmp_path / case, TEXT_CASES[case], codec)
    refused(lake, path, f"line {TEXT_LINES.get(case, 2)}: invalid UTF-8")


@pytest.mark.parametrize(
    "text",
    [
        b'{"id": 2, "s": "\\udc00"}\n',
        b'{"id": 2, "\\ud800x": 1}\n',
        b'[{"id": 2, "s": ["\\ud800"]}]',
    ],
)
def test_lone_surrogate_escapes_are_refused(lake: str, tmp_path: Path, text: bytes) -> None:
    path = tmp_path / ("s.json" if text.startswith(b"[") else "s.ndjson")
    path.write_bytes(b'{"id": 1}\n' + text if text.startswith(b"{") else text)
    line = "line 2" if text.startswith(b"{") else "line 1"
    refused(lake, path, f"{line}: invalid UTF-8 (unpaired surrogate \\ud")


def test_a_bad_line_after_many_good_blocks_leaves_nothing(
    lake: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_readers, "_BLOCK", 4096)  # many blocks, each loaded before the bad one
    lines = [json.dumps({"id": i, "s": "x" * 50}).encode() for i in range(1, 3001)]
    lines[2500] = b'{"id": 2501, "s": "' + BAD + b'"}'
    path = tmp_path / "late.ndjson"
    path.write_bytes(b"\n".join(lines) + b"\n")
    refused(lake, path, "line 2501: invalid UTF-8")


# -- invalid UTF-8 in binary formats ------------------------------------------------------
def bad_strings() -> pa.Array:
    return pa.array([b"ok", BAD], pa.binary()).view(pa.string())


COLUMNS = {
    "flat": bad_strings,
    "list": lambda: pa.ListArray.from_arrays([0, 1, 2], bad_strings()),
    "struct": lambda: pa.StructArray.from_arrays([bad_strings()], names=["t"]),
    "map": lambda: pa.MapArray.from_arrays([0, 1, 2], bad_strings(), pa.array([1, 2])),
}


def write_binary(path: Path, fmt: str, table: pa.Table) -> bytes:
    out = io.BytesIO()
    if fmt == "parquet":
        pq.write_table(table, out)
    elif fmt == "orc":
        porc.write_table(table, out)
    else:
        writer = ipc.new_file if fmt == "arrow" else ipc.new_stream
        with writer(out, table.schema) as w:
            w.write_table(table)
    return out.getvalue()


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("column", sorted(COLUMNS))
@pytest.mark.parametrize("fmt", ["parquet", "orc", "arrow", "arrows"])
def test_invalid_utf8_in_binary_formats_is_refused(
    lake: str, tmp_path: Path, fmt: str, column: str, codec: str
) -> None:
    table = pa.table({"id": [1, 2], "c": COLUMNS[column]()})
    path = compressed(tmp_path / f"t.{fmt}", write_binary(tmp_path, fmt, table), codec)
    refused(lake, path, "row 2: invalid UTF-8 in field 'c'")


@pytest.mark.parametrize("fmt", ["parquet", "orc", "arrow"])
def test_decimals_beyond_their_precision_are_refused(lake: str, tmp_path: Path, fmt: str) -> None:
    """Found by the fuzzer: a damaged ORC footer gave decimal(3) values of 11 digits."""
    wide = pa.array([decimal.Decimal("1"), decimal.Decimal("12345")], pa.decimal128(10, 0))
    table = pa.table({"id": [1, 2], "c": wide.view(pa.decimal128(3, 0))})
    path = tmp_path / f"d.{fmt}"
    path.write_bytes(write_binary(tmp_path, fmt, table))
    refused(lake, path, "row 2: invalid data (Decimal value 12345 does not fit in precision")


def test_invalid_utf8_in_an_arrow_dictionary_is_refused(lake: str, tmp_path: Path) -> None:
    col = pa.DictionaryArray.from_arrays(pa.array([0, 1], pa.int8()), bad_strings())
    path = tmp_path / "d.arrow"
    path.write_bytes(write_binary(tmp_path, "arrow", pa.table({"id": [1, 2], "c": col})))
    refused(lake, path, "invalid UTF-8 in field 'c'")


def test_invalid_utf8_in_avro_strings_is_refused(lake: str, tmp_path: Path) -> None:
    fields = [{"name": "id", "type": "long"}, {"name": "s", "type": "string"}]
    schema = {"type": "record", "name": "r", "fields": fields}
    out = io.BytesIO()
    fastavro.writer(out, schema, [{"id": 1, "s": "ok"}, {"id": 2, "s": "\u00e9\u00e9"}])
    data = out.getvalue().replace("\u00e9\u00e9".encode(), b"\xff\xfe\xff\xfe")  # same length
    path = tmp_path / "r.avro"
    path.write_bytes(data)
    refused(lake, path, "record 2: invalid UTF-8")


@pytest.mark.parametrize("fmt", ["parquet", "arrow", "orc"])
def test_field_names_of_invalid_utf8_are_refused(lake: str, tmp_path: Path, fmt: str) -> None:
    data = write_binary(tmp_path, fmt, pa.table({"id": [1], "\u00e9x": ["v"]}))
    path = tmp_path / f"n.{fmt}"
    path.write_bytes(data.replace("\u00e9x".encode(), b"\xff\xfex"))  # no checksums to break
    refused(lake, path, "field name is not valid UTF-8")


# -- Arrow tables handed to the Python API -------------------------------------------------
def test_python_tables_of_invalid_utf8_are_refused(lake: str) -> None:
    pool = Lake.open(lake).pool("p")
    head, before = pool.resolve(), files_of(lake)
    offsets = pa.array([0, 2, 4], pa.int32()).buffers()[1]
    built = pa.Array.from_buffers(pa.string(), 2, [None, offsets, pa.py_buffer(b"ok\xff\xfe")])
    nested = pa.StructArray.from_arrays([bad_strings()], names=["t"])
    cases: list[tuple[Any, str]] = [
        (
            pa.table({"id": [1, 2], "s": bad_strings()}),
            "<table>: row 2: invalid UTF-8 in field 's'",
        ),
        (pa.table({"id": [1, 2], "s": built}), "<table>: row 2: invalid UTF-8 in field 's'"),
        (
            pa.record_batch({"id": [1, 2], "s": nested}),
            "<batch>: row 2: invalid UTF-8 in field 's'",
        ),
    ]
    bad_offsets = pa.array([0, 9, 4], pa.int32()).buffers()[1]
    broken = pa.Array.from_buffers(pa.string(), 2, [None, bad_offsets, pa.py_buffer(b"okok")])
    cases.append((pa.table({"id": [1, 2], "s": broken}), "<table>: row 1: invalid data (Offset"))
    for source, message in cases:
        with pytest.raises(InvalidInputError) as e:
            pool.load([pa.table({"id": [7], "s": ["fine"]}), source])
        assert message in str(e.value)
    assert pool.resolve() == head and files_of(lake) == before
    assert pool.scan().to_pylist() == [{"id": 0, "s": "first"}]


# -- nesting -----------------------------------------------------------------------------
def nested_line(depth: int, key: str = "a") -> bytes:
    """A record ``depth`` levels deep: the record, then lists."""
    inner = depth - 1
    return b'{"id": 1, "%s": %s1%s}\n' % (key.encode(), b"[" * inner, b"]" * inner)


@pytest.mark.parametrize("codec", CODECS)
def test_json_nested_up_to_the_limit_loads(lake: str, tmp_path: Path, codec: str) -> None:
    text = nested_line(MAX_NESTING)
    pretty = b"[\n" + text.replace(b"[", b"[\n").rstrip() + b"\n]\n"
    for name, data in (("ok.ndjson", text), ("ok.json", pretty)):
        ok("--lake", lake, "load", "-p", "p", str(compressed(tmp_path / name, data, codec)))


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("depth", [MAX_NESTING + 1, 200, 10_000, 300_000])
def test_deep_json_is_refused_before_parsing(
    lake: str, tmp_path: Path, depth: int, codec: str
) -> None:
    line = nested_line(depth)
    cases = {
        "d.ndjson": b'{"id": 1}\n' + line,
        "d.json": b'[{"id": 1},\n' + line.rstrip() + b"]",
        "objects.ndjson": b'{"id": 1}\n' + b'{"a":' * depth + b"1" + b"}" * depth + b"\n",
    }
    for name, data in cases.items():
        path = compressed(tmp_path / name, data, codec)
        refused(lake, path, f"line 2: nesting deeper than {MAX_NESTING} levels")


def test_brackets_in_strings_do_not_count(lake: str, tmp_path: Path) -> None:
    strings = ["[" * 100, "{" * 100, '\\"' + "[" * 100, "\\\\" + "]" * 100, '"' + "[" * 40]
    rows = [{"id": i, "s": s, "t": [[s]]} for i, s in enumerate(strings, 1)]
    path = tmp_path / "s.ndjson"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    ok("--lake", lake, "load", "-p", "p", str(path))
    # closing brackets in strings do not hide real nesting either
    hidden = '{"id": 9, "s": "' + "]" * 100 + '", "a": ' + "[" * 40 + "1" + "]" * 40 + "}\n"
    (tmp_path / "h.ndjson").write_text(hidden)
    refused(lake, tmp_path / "h.ndjson", "line 1: nesting deeper")


def deep_type(kind: str, depth: int) -> pa.DataType:
    t: pa.DataType = pa.int64()
    for _ in range(depth):
        if kind == "struct":
            t = pa.struct([("x", t)])
        elif kind == "list":
            t = pa.list_(t)
        else:
            t = pa.map_(pa.string(), t)
    return t


@pytest.mark.parametrize("fmt", ["parquet", "orc", "arrow"])
@pytest.mark.parametrize("kind", ["struct", "list", "map"])
def test_deep_binary_schemas_are_refused(lake: str, tmp_path: Path, fmt: str, kind: str) -> None:
    levels = {"struct": MAX_NESTING, "list": MAX_NESTING, "map": MAX_NESTING // 2}[kind]
    fits = pa.table({"id": [1], "a": pa.nulls(1, deep_type(kind, levels - 1))})
    ok_path = tmp_path / f"ok.{fmt}"
    ok_path.write_bytes(write_binary(tmp_path, fmt, fits))
    ok("--lake", lake, "load", "-p", "p", str(ok_path))
    deep = pa.table({"id": [1], "a": pa.nulls(1, deep_type(kind, levels))})
    path = tmp_path / f"deep.{fmt}"
    path.write_bytes(write_binary(tmp_path, fmt, deep))
    before = files_of(lake)
    err = fail("--lake", lake, "load", "-p", "p", str(path)).err
    assert f"{path}: field 'a': nesting deeper than {MAX_NESTING} levels" in err
    assert files_of(lake) == before


def test_deep_avro_schemas_are_refused(lake: str, tmp_path: Path) -> None:
    inner: Any = "long"
    for _ in range(MAX_NESTING):
        inner = {"type": "array", "items": inner}
    schema = {"type": "record", "name": "r", "fields": [{"name": "a", "type": inner}]}
    value: Any = 1
    for _ in range(MAX_NESTING):
        value = [value]
    path = tmp_path / "deep.avro"
    with open(path, "wb") as f:
        fastavro.writer(f, schema, [{"a": value}])
    refused(lake, path, f"nesting deeper than {MAX_NESTING} levels")


def _varint(n: int) -> bytes:
    """Avro's zig-zag variable-length encoding of a non-negative long."""
    n, out = n << 1, bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    return bytes([*out, n])


@pytest.mark.parametrize(
    "fields",
    [
        [],
        [
            {"name": "a", "type": "null"},
            {"name": "b", "type": {"type": "fixed", "name": "f", "size": 0}},
        ],
        [{"name": "a", "type": {"type": "array", "items": "null"}}],
        [{"name": "n", "type": "long"}, {"name": "a", "type": {"type": "array", "items": "null"}}],
        [{"name": "a", "type": ["null", {"type": "array", "items": "null"}]}],
    ],
)
def test_avro_values_of_no_bytes_are_refused(
    lake: str, tmp_path: Path, fields: list[dict[str, Any]]
) -> None:
    """A block that claims 2^62 records (or items) of no bytes each: refused at once,
    where the reader would otherwise spin through them (a fuzzer found it)."""
    schema = {"type": "record", "name": "r", "fields": fields}
    header = io.BytesIO()
    fastavro.writer(header, schema, [])
    sync = header.getvalue()[-16:]
    block = _varint(2**62) + _varint(0) + sync
    if fields and fields[0]["type"] != "null":  # one record whose array claims 2^62 items
        block = _varint(1) + _varint(11) + _varint(2**62) + b"\x00" + sync
    path = tmp_path / "empty.avro"
    path.write_bytes(header.getvalue() + block)
    refused(lake, path, "take no bytes")


def test_deep_python_tables_are_refused(lake: str) -> None:
    pool = Lake.open(lake).pool("p")
    head, before = pool.resolve(), files_of(lake)
    deep = pa.table({"id": [1], "a": pa.nulls(1, deep_type("list", 200))})
    with pytest.raises(InvalidInputError, match=r"<table>: field 'a': nesting deeper than 32"):
        pool.load([pa.table({"id": [7]}), deep])
    assert pool.resolve() == head and files_of(lake) == before


json_leaves = st.none() | st.integers(-9, 9) | st.text(alphabet='[]{}"\\,:ab\n', max_size=6)


@st.composite
def json_records(draw: st.DrawFn) -> tuple[Any, int]:
    """A JSON object and its depth (the object itself is one level)."""
    depth = draw(st.integers(MAX_NESTING - 3, MAX_NESTING + 2))  # of the record
    value: Any = draw(json_leaves)
    for _ in range(depth - 1):  # wrap it in lists and objects with shallow siblings
        extra = draw(st.lists(json_leaves, max_size=2))
        if draw(st.booleans()):
            value = [*extra, value]
        else:
            keys = draw(st.lists(st.text(alphabet='[]{}"\\ab', max_size=3), max_size=2))
            value = {**dict(zip(keys, extra, strict=False)), "v": value}
    return {"id": 1, "v": value}, depth


@SETTINGS
@given(st.lists(json_records(), min_size=1, max_size=4), st.booleans())
def test_nesting_scan_matches_the_depth_of_the_values(
    records: list[tuple[Any, int]], ascii_only: bool
) -> None:
    text = "".join(json.dumps(r, ensure_ascii=ascii_only) + "\n" for r, _ in records).encode()
    too_deep = [i for i, (_, depth) in enumerate(records, 1) if depth > MAX_NESTING]
    if too_deep:
        with pytest.raises(InvalidInputError, match=f"x: line {too_deep[0]}: nesting deeper"):
            check_json_nesting("x", text, 1)
    else:
        check_json_nesting("x", text, 1)


_OLD_SLOW_JSON = re.compile(rb"\d{19}|^[ \t]*null[ \t\r]*$", re.M)


@SETTINGS
@given(st.binary().map(lambda b: bytes(b"0123456789 \t\r\nnul{}x"[c % 20] for c in b)))
def test_fast_path_test_is_the_old_regex(block: bytes) -> None:
    assert _readers._slow_json(block) == (_OLD_SLOW_JSON.search(block) is not None)


# -- wrong key types name the input ---------------------------------------------------------
def test_wrong_key_type_names_the_file(lake: str, tmp_path: Path) -> None:
    good, bad = tmp_path / "good.ndjson", tmp_path / "bad.ndjson"
    good.write_text('{"id": 5}\n')
    bad.write_text('{"id": "text"}\n')
    before = files_of(lake)
    err = fail("--lake", lake, "load", "-p", "p", str(good), str(bad)).err
    assert f"error: {bad}: key field 'id' is string in this load but int64 in the pool's" in err
    assert files_of(lake) == before
    pool = Lake.open(lake).pool("p")
    with pytest.raises(InvalidInputError, match=r"^<table>: key field 'id' is string in this"):
        pool.load([pa.table({"id": ["x"]})])
    ok("--lake", lake, "create", "q", "-k", "id")
    ok("--lake", lake, "load", "-p", "q", str(bad))
    err = fail("--lake", lake, "load", "-p", "q", str(good)).err
    assert f"error: {good}: key field 'id' is int64 in this load but string in the pool's" in err


def test_empty_objects_load_as_null(tmp_path: Path) -> None:
    """Parquet cannot store a struct without fields: ``{}`` is kept as null, at any depth."""
    src = tmp_path / "empty.ndjson"
    src.write_text('{"k": 3, "o": {}}\n{"k": 4, "l": [{}, {}], "s": {"e": {}, "x": 1}}\n')
    lake = Lake.init(str(tmp_path / "lake"))
    pool = lake.create_pool("p", key="k")
    pool.load([str(src)])
    table = pa.table({"k": [9, 10, 11], "o": pa.array([{}, None, {}], pa.struct([]))})
    pool.load([table.slice(1)])
    rows = {r["k"]: r for r in pool.scan().to_pylist()}
    assert rows[3]["o"] is None and rows[4]["l"] == [None, None]
    assert rows[4]["s"] == {"e": None, "x": 1}
    assert rows[10]["o"] is None and rows[11]["o"] is None and 9 not in rows
    assert list(lake.verify(deep=True)) == []

"""ORC footers are read and checked before pyarrow sees the file (limno.data.orc_footer).

pyarrow aborts the process on some damaged footers (a decimal of precision 67, found
by the fuzzer), and recurses or hangs on deep or shared type trees, so every hostile
footer here is handed only to :func:`check_orc_tail`, never to pyarrow in this
process; loads of them run in a child process. The files are built from ones pyarrow
writes, their footers edited with a small protobuf encoder of this test's own.
"""

from __future__ import annotations

import decimal
import gzip
import io
import random
import subprocess
import sys
import tracemalloc
import zlib
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.orc as porc
import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clirunner import run
from limno.data.orc_footer import (
    MAX_FOOTER,
    MAX_PRECISION,
    OrcType,
    _lz4_block,
    check_orc_tail,
    orc_types,
)
from limno.data.readers import read_table
from limno.errors import InvalidInputError

Field = tuple[int, int, int | bytes]  # (number, wire type, value)
Types = list[list[Field]]
COMPRESSIONS = ["uncompressed", "zlib", "snappy", "lz4", "zstd"]
CODEC_KINDS = {"ZLIB": 1, "SNAPPY": 2, "LZ4": 4, "ZSTD": 5}


# -- a protobuf encoder of the test's own ----------------------------------------------
def varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        out.append(low | (0x80 if value else 0))
        if not value:
            return bytes(out)


def split(buf: bytes) -> list[Field]:
    """The fields of a message (wire types 0 and 2 only: all ORC's writers use)."""
    out: list[Field] = []
    pos = 0

    def read() -> int:
        nonlocal pos
        value = shift = 0
        while True:
            byte = buf[pos]
            pos += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                return value

    while pos < len(buf):
        tag = read()
        if tag & 7 == 0:
            out.append((tag >> 3, 0, read()))
        else:
            assert tag & 7 == 2, tag
            length = read()
            out.append((tag >> 3, 2, buf[pos : pos + length]))
            pos += length
    return out


def join(fields: list[Field]) -> bytes:
    out = bytearray()
    for number, wire, value in fields:
        out += varint(number << 3 | wire)
        if isinstance(value, int):
            out += varint(value)
        else:
            out += varint(len(value)) + value
    return bytes(out)


def with_field(fields: list[Field], number: int, value: int) -> list[Field]:
    return [f for f in fields if f[0] != number] + [(number, 0, value)]


# -- ORC files and their tails ---------------------------------------------------------
def table() -> pa.Table:
    """Decimals and nested columns of every kind ORC has."""
    dec = decimal.Decimal
    return pa.table(
        {
            "id": [1, 2, 3],
            "price": pa.array([dec("1.25"), None, dec("-3.50")], pa.decimal128(10, 2)),
            "big": pa.array([dec("1" * 30), dec("-0.0001"), None], pa.decimal128(38, 4)),
            "host": [{"name": "a", "zone": [1, 2]}, None, {"name": None, "zone": []}],
            "tags": [["a"], [], None],
            "attrs": pa.array([[("k", 1)], None, []], pa.map_(pa.string(), pa.int64())),
            "deep": [[{"x": [{"y": 1}]}], None, []],
            "ts": pa.array([1, None, 3], pa.timestamp("ms", "UTC")),
        }
    )


def orc_file(t: pa.Table, compression: str = "uncompressed") -> bytes:
    out = io.BytesIO()
    porc.write_table(t, out, compression=compression)
    return out.getvalue()


def parts(data: bytes) -> tuple[bytes, list[Field], bytes]:
    """(what precedes the footer, the PostScript's fields, the footer's bytes)."""
    ps = split(data[-1 - data[-1] : -1])
    length = next(v for n, _, v in ps if n == 1)
    assert isinstance(length, int)
    end = len(data) - 1 - data[-1]
    return data[: end - length], ps, data[end - length : end]


def chunks(footer: bytes, codec: str, block: int) -> bytes:
    """``footer`` compressed the ORC way: pieces of ``block`` bytes, each with a
    3-byte header; the last piece stored as is (the header's low bit)."""
    compress: dict[str, Callable[[bytes], bytes]] = {
        "ZLIB": lambda b: (lambda c: c.compress(b) + c.flush())(zlib.compressobj(wbits=-15)),
        "SNAPPY": lambda b: pa.Codec("snappy").compress(b, asbytes=True),
        "LZ4": lambda b: pa.Codec("lz4_raw").compress(b, asbytes=True),
        "ZSTD": lambda b: zstandard.ZstdCompressor().compress(b),
    }
    out, pieces = bytearray(), [footer[i : i + block] for i in range(0, len(footer), block)]
    for i, piece in enumerate(pieces):
        original = i == len(pieces) - 1 and len(pieces) > 1
        body = piece if original else compress[codec](piece)
        out += (len(body) * 2 + original).to_bytes(3, "little") + body
    return bytes(out)


def rebuild(
    data: bytes,
    edit: Callable[[Types], Types] = lambda t: t,
    codec: str = "NONE",
    block: int = 1 << 16,
    footer: bytes | None = None,
) -> bytes:
    """The uncompressed ORC file ``data`` with its types edited (or its footer
    replaced), the footer compressed with ``codec`` in chunks of ``block`` bytes."""
    body, ps, old = parts(data)
    assert next((v for n, _, v in ps if n == 2), 0) == 0, "an uncompressed file"
    if footer is None:
        fields = split(old)
        types = edit([split(v) for n, _, v in fields if n == 4])  # type: ignore[arg-type]
        first = next(i for i, f in enumerate(fields) if f[0] == 4)
        rest = [f for f in fields if f[0] != 4]
        footer = join(rest[:first] + [(4, 2, join(t)) for t in types] + rest[first:])
    packed = footer if codec == "NONE" else chunks(footer, codec, block)
    ps = with_field(ps, 1, len(packed))
    if codec != "NONE":
        ps = with_field(with_field(ps, 2, CODEC_KINDS[codec]), 3, block)
    tail = join(sorted(ps, key=lambda f: f[0]))
    return body + packed + tail + bytes([len(tail)])


def types_of(data: bytes) -> list[OrcType]:
    tail = check_orc_tail("f.orc", data)
    return list(orc_types("f.orc", tail))


def refused(data: bytes, why: str) -> None:
    with pytest.raises(InvalidInputError) as e:
        check_orc_tail("f.orc", data)
    assert str(e.value).startswith("f.orc: ") and why in str(e.value), str(e.value)


def read_table_of(data: bytes, tmp_path: Path) -> list[dict[str, object]]:
    path = tmp_path / "plain.orc"
    path.write_bytes(data)
    rows: list[dict[str, object]] = read_table(str(path)).to_pylist()
    return rows


@pytest.fixture(scope="module")
def plain() -> bytes:
    return orc_file(table())


def decimal_type(types: Types, precision: int, scale: int | None = None) -> Types:
    """``types`` with the decimal(10, 2) column given another precision (and scale)."""
    i = next(i for i, t in enumerate(types) if (1, 0, 14) in t and (5, 0, 10) in t)
    edited = with_field(types[i], 5, precision)
    types[i] = edited if scale is None else with_field(edited, 6, scale)
    return types


# -- valid files -----------------------------------------------------------------------
@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_files_pyarrow_writes_parse_and_load(
    tmp_path: Path, plain: bytes, compression: str
) -> None:
    wide = pa.table({f"c{i}": [i] for i in range(3000)})  # a footer of several chunks
    for t in (table(), wide):
        data = orc_file(t, compression)
        tail = check_orc_tail("f.orc", data)
        assert tail.compression == {"uncompressed": "NONE"}.get(compression, compression.upper())
        types = list(orc_types("f.orc", tail))
        names = porc.ORCFile(pa.BufferReader(data)).schema.names
        assert [n.decode() for n in types[0].field_names] == names
    path = tmp_path / f"{compression}.orc"
    path.write_bytes(orc_file(table(), compression))
    assert read_table(str(path)).to_pylist() == read_table_of(plain, tmp_path)
    decimals = [(t.precision, t.scale) for t in types_of(orc_file(table(), compression))]
    assert (10, 2) in decimals and (38, 4) in decimals
    assert types_of(orc_file(table(), compression)) == types_of(plain)


@pytest.mark.parametrize("codec", sorted(CODEC_KINDS))
@pytest.mark.parametrize("block", [64, 1 << 16])
def test_footers_compressed_in_chunks_read_alike(plain: bytes, codec: str, block: int) -> None:
    """Footers compressed here, in chunks that cut messages anywhere: the same types."""
    assert types_of(rebuild(plain, codec=codec, block=block)) == types_of(plain)


def test_a_decimal_of_unknown_precision_loads_as_arrow_does(tmp_path: Path, plain: bytes) -> None:
    """Hive 0.11 wrote precision 0: Arrow reads it as decimal(38, 6)."""
    path = tmp_path / "h.orc"
    path.write_bytes(rebuild(plain, lambda t: decimal_type(t, 0, 0)))
    assert read_table(str(path)).schema.field("price").type == pa.decimal128(38, 6)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([b"ab", b"abc", b"\x00", b"xyzxyzxyz", b"q" * 40]), max_size=80))
def test_the_lz4_decoder_reads_what_lz4_writes(pieces: list[bytes]) -> None:
    footer = b"".join(pieces) + b"tail"
    packed = pa.Codec("lz4_raw").compress(footer, asbytes=True)
    assert _lz4_block(packed, len(footer)) == footer
    assert _lz4_block(packed, len(footer) - 1) is None  # one byte more than allowed


# -- damaged footers -------------------------------------------------------------------
def chain(depth: int) -> Callable[[Types], Types]:
    """Types of one column of ``depth`` nested lists of longs."""
    lists: Types = [[(1, 0, 10), (2, 0, i + 2)] for i in range(depth)]
    root: list[Field] = [(1, 0, 12), (2, 0, 1), (3, 2, b"a")]
    return lambda _: [root, *lists, [(1, 0, 4)]]


def shared(levels: int) -> Callable[[Types], Types]:
    """Structs each naming the next two types: a walk that follows both doubles at
    every level (pyarrow hangs)."""
    root: list[Field] = [(1, 0, 12), (2, 0, 1), (3, 2, b"a")]
    links: Types = [
        [(1, 0, 12), (2, 2, varint(i + 1) + varint(i + 2)), (3, 2, b"x"), (3, 2, b"y")]
        for i in range(1, levels)
    ]
    return lambda _: [root, *links, [(1, 0, 4)], [(1, 0, 4)]]


def flat(*kids: list[Field]) -> Callable[[Types], Types]:
    """A root struct of the given types, one column each (named c0, c1, ...)."""
    root: list[Field] = [(1, 0, 12)]
    root += [(2, 0, i + 1) for i in range(len(kids))]
    root += [(3, 2, f"c{i}".encode()) for i in range(len(kids))]
    return lambda _: [root, *kids]


def rooted(*types: list[Field]) -> Callable[[Types], Types]:
    return lambda _: list(types)


LONG: list[Field] = [(1, 0, 4)]
TREES: dict[str, tuple[Callable[[Types], Types], str]] = {
    "precision 67": (lambda t: decimal_type(t, 67), "decimal precision 67 is out of range 1..38"),
    "precision 2**32-1": (lambda t: decimal_type(t, 2**32 - 1), "out of range 1..38"),
    "precision 39": (lambda t: decimal_type(t, MAX_PRECISION + 1), "precision 39 is out"),
    "scale over precision": (lambda t: decimal_type(t, 3, 5), "scale 5 exceeds its precision 3"),
    "negative scale": (lambda t: decimal_type(t, 10, 2**32 - 1), "scale 4294967295 exceeds"),
    "deep": (chain(100_000), "field 'a': nesting deeper than 32 levels"),
    "33 lists": (chain(33), "field 'a': nesting deeper than 32 levels"),
    "shared children": (shared(20), "malformed type tree: type 18 links to type 20"),
    "link back": (
        rooted([(1, 0, 12), (2, 0, 1), (3, 2, b"a")], [(1, 0, 10), (2, 0, 0)]),
        "type 1 links to type 0",
    ),
    "link to itself": (rooted([(1, 0, 12), (2, 0, 0), (3, 2, b"a")]), "type 0 links to type 0"),
    "link past the end": (flat([(1, 0, 10), (2, 0, 9)]), "type 1 links to type 9, which does not"),
    "a type out of the tree": (rooted([(1, 0, 12)], LONG), "types 1.. are not in it"),
    "children out of order": (
        rooted([(1, 0, 12), (2, 0, 2), (2, 0, 1), (3, 2, b"a"), (3, 2, b"b")], LONG, LONG),
        "type 0 links to type 2",
    ),
    "struct without names": (flat([(1, 0, 12), (2, 0, 2)], LONG), "a struct of 1 types and 0"),
    "union of none": (flat([(1, 0, 13)]), "a union of 0 types"),
    "union of 129": (
        lambda _: (
            flat([(1, 0, 13), (2, 2, b"".join(varint(i + 2) for i in range(129)))])(_)
            + [LONG] * 129
        ),
        "a union of 129 types",
    ),
    "char of 2**31": (flat([(1, 0, 17), (4, 0, 2**31)]), "char length 2147483648 out of range"),
    "kind twice": (flat([(1, 0, 4), (1, 0, 14)]), "a type's kind given twice"),
    "precision twice": (flat([(1, 0, 14), (5, 0, 5), (5, 0, 67)]), "parameter given twice"),
    "no types": (lambda _: [], "no types in the footer"),
}


@pytest.mark.parametrize("case", sorted(TREES))
def test_damaged_type_trees_are_refused(plain: bytes, case: str) -> None:
    edit, why = TREES[case]
    data = rebuild(plain, edit)
    refused(data, why)
    for codec in CODEC_KINDS:  # the same, whatever the footer's compression
        refused(rebuild(plain, edit, codec=codec, block=100), why)


def test_every_kind_is_read_as_protobuf_reads_it(plain: bytes) -> None:
    """Every leaf kind (a decimal and a char without parameters too) passes; a kind
    protobuf does not know is left unset (BOOLEAN, which pyarrow reads), and an enum
    keeps the low 32 bits of its varint."""
    kinds = [k for k in range(21) if k not in (10, 11, 12, 13)] + [99, 2**32 + 7]
    kids: Types = [[(1, 0, k)] for k in kinds]
    types = types_of(rebuild(plain, flat(*kids)))
    assert [t.kind for t in types[1:]] == kinds[:-2] + [0, 7]


def test_a_precision_past_32_bits_is_read_as_protobuf_reads_it(plain: bytes) -> None:
    """protobuf keeps the low 32 bits of a uint32 field, and so does the check."""
    types = types_of(rebuild(plain, lambda t: decimal_type(t, 2**32 + 12)))
    assert (12, 2) in [(t.precision, t.scale) for t in types]


# -- hostile sizes ---------------------------------------------------------------------
def tail_of(footer: bytes, *ps: Field) -> bytes:
    """A file of just a footer (stored as given) and a PostScript of ``ps`` (and of
    the footer's length, unless ``ps`` gives one)."""
    fields = [*ps] if any(f[0] == 1 for f in ps) else [(1, 0, len(footer)), *ps]
    post = join(fields)
    return b"ORC" + footer + post + bytes([len(post)])


ONE_LONG = join([(4, 2, join([(1, 0, 12), (2, 0, 1), (3, 2, b"a")])), (4, 2, join(LONG))])
ZEROS = zstandard.ZstdCompressor().compress(b"\0" * (64 << 20))  # 64 MiB in a few KiB
BOMB = zlib.compressobj(wbits=-15)
DEFLATED = BOMB.compress(b"\0" * (1 << 20)) + BOMB.flush()


def chunk(body: bytes, original: bool = False) -> bytes:
    return (len(body) * 2 + original).to_bytes(3, "little") + body


SIZES: dict[str, tuple[bytes, str]] = {
    "empty": (b"", "empty file"),
    "postscript past the start": (b"\x05", "postscript of 5 bytes in a file of 1"),
    "footer past the start": (tail_of(b"", (1, 0, 2**63)), "footer of 9223372036854775808"),
    "LZO": (tail_of(ONE_LONG, (2, 0, 3)), "compression LZO is not supported"),
    "unknown codec": (tail_of(ONE_LONG, (2, 0, 9)), "compression unknown kind 9"),
    "chunk past the footer": (tail_of(b"\xff\xff\x7f", (2, 0, 1)), "chunk of 4194303 bytes"),
    "cut chunk header": (tail_of(b"\x00", (2, 0, 1)), "truncated compression chunk header"),
    "zstd bomb": (tail_of(chunk(ZEROS), (2, 0, 5), (3, 0, 2**62)), "decompresses to more than"),
    "zlib past its block": (tail_of(chunk(DEFLATED), (2, 0, 1)), "more than 262144 bytes"),
    "snappy of 2**60": (tail_of(chunk(varint(2**60) + b"x"), (2, 0, 2)), "more than 262144"),
    "lz4 match past its block": (
        tail_of(chunk(b"\x1f" + b"a" + b"\x01\x00" + b"\xff" * 1100 + b"\x00"), (2, 0, 4)),
        "more than 262144 bytes",
    ),
    "lz4 offset before the start": (tail_of(chunk(b"\x10a\x09\x00"), (2, 0, 4)), "offset 9"),
    "corrupt zstd": (tail_of(chunk(b"junkjunkjunk"), (2, 0, 5)), "corrupt ZSTD data"),
    "corrupt zlib": (tail_of(chunk(b"\xff\xff\xff"), (2, 0, 1)), "corrupt ZLIB data"),
    "a group": (tail_of(b"\x23\x24"), "unexpected protobuf wire type 3"),
    "varint of 11 bytes": (tail_of(b"\x08" + b"\xff" * 10 + b"\x01"), "longer than 10 bytes"),
    "field past its message": (tail_of(b"\x22\x7f\x08"), "field of 127 bytes past"),
    "postscript field twice": (tail_of(ONE_LONG, (2, 0, 0), (2, 0, 0)), "field given twice"),
}


@pytest.mark.parametrize("case", sorted(SIZES))
def test_hostile_sizes_are_refused_in_bounded_memory(case: str) -> None:
    data, why = SIZES[case]
    tracemalloc.start()
    try:
        refused(data, why)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < (8 << 20) + 1000 * len(data), peak


# -- fuzzing ---------------------------------------------------------------------------
def mutate(rng: random.Random, data: bytes, start: int) -> bytes:
    """``data`` with bits flipped, cut short, or stretches replaced from ``start`` on."""
    out = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        i = rng.randint(min(start, len(out)), len(out))
        kind = rng.choice(["flip", "flip", "cut", "splice", "repeat"])
        if kind == "flip" and i < len(out):
            out[i] ^= 1 << rng.randint(0, 7)
        elif kind == "cut":
            out = out[:i]
        elif kind == "splice":
            out[i : i + rng.randint(0, 8)] = rng.randbytes(rng.randint(0, 8))
        else:
            out[i:i] = out[i : i + rng.randint(0, 32)]
    return bytes(out)


def assert_one_tree(types: list[OrcType]) -> None:
    """What an accepted footer holds: one tree of its types in pre-order, with
    decimals Arrow can make (an independent walk, depth first)."""
    order, todo = list[int](), [0]
    while todo and len(order) <= len(types):
        tid = todo.pop()
        order.append(tid)
        todo.extend(reversed(types[tid].subtypes))
    assert order == list(range(len(types)))
    for t in types:
        if t.kind == 14:
            assert t.precision <= MAX_PRECISION and t.scale <= (t.precision or MAX_PRECISION)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    codec=st.sampled_from(["NONE", *CODEC_KINDS]),
    key=st.integers(0, 2**32),
    inside=st.booleans(),
)
def test_mutated_footers_are_read_or_refused(codec: str, key: int, inside: bool) -> None:
    """Damage in the footer's protobuf (then compressed) or in the file's last bytes
    (compressed or not): a tree of sound types, or InvalidInputError; never another
    error, and memory bounded by the file's size."""
    rng, plain = random.Random(key), orc_file(table())
    if inside:
        footer = parts(plain)[2]
        data = rebuild(plain, codec=codec, block=128, footer=mutate(rng, footer, 0))
    else:
        data = rebuild(plain, codec=codec, block=128)
        data = mutate(rng, data, len(data) - len(parts(data)[2]) - data[-1] - 1)
    tracemalloc.start()
    try:
        tail = check_orc_tail("f.orc", data)
        types = list(orc_types("f.orc", tail))
    except InvalidInputError as e:
        assert str(e).startswith("f.orc: "), str(e)
        return
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert peak < (8 << 20) + 1000 * len(data), peak
    assert_one_tree(types)
    assert len(tail.footer) <= MAX_FOOTER


# -- loads, in a child process: a missed check would abort it ------------------------------
@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> str:
    where = str(tmp_path_factory.mktemp("orc") / "lake")
    assert run("--lake", where, "init").code == 0
    assert run("--lake", where, "create", "p", "-k", "id").code == 0
    return where


LOADS = {
    "precision 67": (
        TREES["precision 67"][0],
        "not a valid ORC file (column 2: decimal precision 67 is out of range 1..38)",
    ),
    "deep": (chain(100_000), "field 'a': nesting deeper than 32 levels"),
    "shared children": (
        shared(30),
        "not a valid ORC file (malformed type tree: type 28 links to type 30)",
    ),
}


@pytest.mark.parametrize(
    ("case", "how"),
    [("precision 67", "file"), ("precision 67", "gzip"), ("precision 67", "stdin")]
    + [("deep", "file"), ("shared children", "file")],
)
def test_a_load_of_a_damaged_footer_fails_with_one_line(
    lake: str, tmp_path: Path, plain: bytes, case: str, how: str
) -> None:
    """pyarrow aborted (precision 67), overflowed its stack (deep) or hung (shared)."""
    edit, why = LOADS[case]
    data = rebuild(plain, edit)
    path = tmp_path / ("d.orc.gz" if how == "gzip" else "d.orc")
    path.write_bytes(gzip.compress(data) if how == "gzip" else data)
    args = ["-", "-i", "orc"] if how == "stdin" else [str(path)]
    proc = subprocess.run(
        [sys.executable, "-m", "limno", "--lake", lake, "load", "-p", "p", *args],
        input=data if how == "stdin" else b"",
        capture_output=True,
        timeout=120,
    )
    lines = [line for line in proc.stderr.decode().splitlines() if line.strip()]
    name = "<stdin>" if how == "stdin" else str(path)
    assert (proc.returncode, lines) == (1, [f"error: {name}: {why}"])

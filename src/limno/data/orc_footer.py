"""The type tree of an ORC file, read from its footer before pyarrow sees the file.

pyarrow's ORC reader turns the footer's types into Arrow types with constructors that
abort the whole process on a bad parameter (a decimal of precision 67 is a failed
assertion in Arrow, not an exception), and it walks the type tree recursively. A
damaged file could therefore kill a load, or the server running it, outright; an abort
cannot be caught. So :func:`check_orc_tail` reads the file's tail itself, with nothing
but the bytes it holds, and refuses a type tree Arrow could not take with one
:class:`InvalidInputError` naming the file.

An ORC file ends with its PostScript (never compressed), whose length is the file's
last byte, and before it the Footer, compressed by the PostScript's codec in chunks
that each start with a 3-byte header (length * 2 + "stored as is"). Both are protocol
buffers; only a few fields are read here, with a minimal decoder of the wire format.
Where protobuf and this reader could see different values (a field given twice, a
group), the file is refused: a file any writer produced never has them, and refusing
is the safe side. The types are a list in pre-order, a type's children named by index;
they must form exactly that tree (no links backwards, shared or out of range), which
also bounds every walk. All work is bounded by the file's size, and the decompressed
footer by :data:`MAX_FOOTER` bytes and :data:`MAX_RATIO` times its compressed size.
"""

from __future__ import annotations

import io
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import zstandard

from limno.data.input_checks import MAX_NESTING, nesting_error
from limno.errors import InvalidInputError

__all__ = [
    "MAX_FOOTER",
    "MAX_RATIO",
    "OrcTail",
    "OrcType",
    "check_orc_tail",
    "orc_types",
    "read_orc_tail",
]

#: bytes a decompressed footer may take, at most (real ones take well under 1 KiB a
#: column); and, as a few bytes of zstd can stand for megabytes, at most 1 MiB plus
#: :data:`MAX_RATIO` times its compressed size, which keeps the parse (in Python)
#: proportional to the file
MAX_FOOTER = 64 << 20
MAX_RATIO = 250
#: Arrow's largest 128-bit decimal precision (the ORC adapter builds decimal128 types)
MAX_PRECISION = 38
#: Arrow's union type codes are int8: at most 128 members
MAX_UNION = 128

_DEFAULT_BLOCK = 256 << 10  # compressionBlockSize when the PostScript has none
_U32, _U64 = (1 << 32) - 1, (1 << 64) - 1
_CODECS = {0: "NONE", 1: "ZLIB", 2: "SNAPPY", 3: "LZO", 4: "LZ4", 5: "ZSTD"}
# Type.Kind values (orc_proto.proto)
_LIST, _MAP, _STRUCT, _UNION, _DECIMAL, _CHAR = 10, 11, 12, 13, 14, 17
_KINDS = range(21)  # BOOLEAN (0) .. the newest: protobuf keeps an unknown value unset
_MAX_CHAR = (1 << 31) - 1  # older pyarrow made CHAR(n) a fixed_size_binary(int(n))
_LEVELS = {_LIST: 1, _STRUCT: 1, _UNION: 1, _MAP: 2}  # as input_checks.check_schema counts


class _Damaged(Exception):
    """What is wrong with the tail (turned into the file's InvalidInputError)."""


@dataclass(frozen=True)
class OrcType:
    """One entry of the footer's type list (its index is its column id)."""

    kind: int
    subtypes: tuple[int, ...] = ()
    field_names: tuple[bytes, ...] = ()
    maximum_length: int = 0
    precision: int = 0
    scale: int = 0


@dataclass(frozen=True)
class OrcTail:
    """What :func:`read_orc_tail` reads: the footer's codec and its bytes, decompressed."""

    compression: str
    block_size: int
    footer: bytes


def check_orc_tail(name: str, source: Any) -> OrcTail:
    """Refuse an ORC file whose footer pyarrow could not read without risk of aborting.

    ``source`` is the file's bytes or a seekable pyarrow file (anything with
    ``size()`` and ``read_at(nbytes, offset)``). Raises only :class:`InvalidInputError`:
    ``"NAME: not a valid ORC file (why)"``, or the nesting error of
    :func:`~.input_checks.check_schema` for a tree deeper than it allows. The types
    are checked as they are parsed, one at a time: memory stays that of the footer.
    """
    tail = read_orc_tail(name, source)
    tree = _Tree(name)
    for i, t in enumerate(orc_types(name, tail)):
        try:
            tree.add(i, t)
        except _Damaged as e:
            raise InvalidInputError(f"{name}: not a valid ORC file ({e})") from None
    try:
        tree.finish()
    except _Damaged as e:
        raise InvalidInputError(f"{name}: not a valid ORC file ({e})") from None
    return tail


def read_orc_tail(name: str, source: Any) -> OrcTail:
    """The codec and the decompressed footer of the ORC file ``source`` (bytes or a
    pyarrow file)."""
    try:
        if isinstance(source, bytes | bytearray | memoryview):
            with pa.BufferReader(bytes(source)) as f:
                return _read_tail(f)
        return _read_tail(source)
    except _Damaged as e:
        raise InvalidInputError(f"{name}: not a valid ORC file ({e})") from None
    except (OSError, pa.ArrowException) as e:  # reading the file itself failed
        raise InvalidInputError(f"{name}: cannot read ({e})") from None


def orc_types(name: str, tail: OrcTail) -> Iterator[OrcType]:
    """The footer's ``types`` (field 4, each a Type message), parsed one at a time."""
    try:
        for number, wire, value in _fields(memoryview(tail.footer)):
            if number == 4 and wire == 2:
                assert isinstance(value, memoryview)
                yield _type(value)
    except _Damaged as e:
        raise InvalidInputError(f"{name}: not a valid ORC file ({e})") from None


def _read_tail(f: Any) -> OrcTail:
    size = f.size()
    if size < 1:
        raise _Damaged("empty file")
    ps_len = f.read_at(1, size - 1)[0]
    if ps_len + 1 > size:
        raise _Damaged(f"postscript of {ps_len} bytes in a file of {size}")
    footer_len, kind, block_size = _postscript(memoryview(f.read_at(ps_len, size - 1 - ps_len)))
    before = size - 1 - ps_len
    if footer_len > before:
        raise _Damaged(f"footer of {footer_len} bytes in a file of {size}")
    if kind not in _CODECS or _CODECS[kind] == "LZO":
        what = _CODECS.get(kind, f"unknown kind {kind}")
        raise _Damaged(f"compression {what} is not supported")
    raw = f.read_at(footer_len, before - footer_len)
    footer = raw if kind == 0 else _decompress(raw, _CODECS[kind], block_size)
    return OrcTail(_CODECS[kind], block_size, footer)


# -- the protobuf wire format ----------------------------------------------------------
def _varint(buf: memoryview, pos: int) -> tuple[int, int]:
    """(value, next position) of the varint at ``pos``: at most 10 bytes, 64 bits kept."""
    value = shift = 0
    while True:
        if pos >= len(buf):
            raise _Damaged("truncated protobuf varint")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value & _U64, pos
        shift += 7
        if shift >= 70:
            raise _Damaged("protobuf varint longer than 10 bytes")


def _fields(buf: memoryview) -> Iterator[tuple[int, int, int | memoryview]]:
    """(field number, wire type, value) of each field of a message: an int for a
    varint or fixed field, the bytes (a view) of a length-delimited one."""
    pos = 0
    while pos < len(buf):
        tag, pos = _varint(buf, pos)
        number, wire = tag >> 3, tag & 7
        if number == 0 or tag > _U32:
            raise _Damaged(f"bad protobuf tag {tag}")
        value: int | memoryview
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire in (1, 5):
            width = 8 if wire == 1 else 4
            if pos + width > len(buf):
                raise _Damaged("truncated protobuf field")
            value, pos = int.from_bytes(buf[pos : pos + width], "little"), pos + width
        elif wire == 2:
            length, pos = _varint(buf, pos)
            if length > len(buf) - pos:
                raise _Damaged(f"protobuf field of {length} bytes past its message")
            value, pos = buf[pos : pos + length], pos + length
        else:  # groups (3, 4) never appear in ORC's messages; 6 and 7 do not exist
            raise _Damaged(f"unexpected protobuf wire type {wire}")
        yield number, wire, value


def _once(seen: set[int], number: int, what: str) -> None:
    """Refuse a field given twice (protobuf would keep the last: a writer never does)."""
    if number in seen:
        raise _Damaged(f"{what} given twice")
    seen.add(number)


def _enum(value: int) -> int:
    """An enum's value as protobuf reads it: the low 32 bits, signed."""
    value &= _U32
    return value - (1 << 32) if value >= 1 << 31 else value


def _postscript(buf: memoryview) -> tuple[int, int, int]:
    """(footerLength, compression kind, compressionBlockSize) of the PostScript."""
    footer_len, kind, block_size, seen = 0, 0, _DEFAULT_BLOCK, set[int]()
    for number, wire, value in _fields(buf):
        if wire != 0 or number not in (1, 2, 3):
            continue  # other fields, or a known one of another wire type (unknown to protobuf)
        assert isinstance(value, int)
        _once(seen, number, "a postscript field")
        if number == 1:
            footer_len = value
        elif number == 2:
            kind = _enum(value)
        else:
            block_size = value
    return footer_len, kind, block_size


def _type(buf: memoryview) -> OrcType:
    kind, subtypes, names, seen = 0, list[int](), list[bytes](), set[int]()
    scalars = {4: 0, 5: 0, 6: 0}  # maximumLength, precision, scale (uint32)
    for number, wire, value in _fields(buf):
        if number == 1 and wire == 0:
            assert isinstance(value, int)
            _once(seen, number, "a type's kind")
            if _enum(value) in _KINDS:  # else protobuf keeps it as an unknown field
                kind = _enum(value)
        elif number == 2 and wire == 0:  # subtypes, one by one
            assert isinstance(value, int)
            subtypes.append(value & _U32)
        elif number == 2 and wire == 2:  # subtypes, packed
            assert isinstance(value, memoryview)
            pos = 0
            while pos < len(value):
                sub, pos = _varint(value, pos)
                subtypes.append(sub & _U32)
        elif number == 3 and wire == 2:
            assert isinstance(value, memoryview)
            names.append(bytes(value))
        elif number in scalars and wire == 0:
            assert isinstance(value, int)
            _once(seen, number, "a type's parameter")
            scalars[number] = value & _U32
    return OrcType(kind, tuple(subtypes), tuple(names), scalars[4], scalars[5], scalars[6])


# -- decompression ---------------------------------------------------------------------
def _decompress(raw: bytes, codec: str, block_size: int) -> bytes:
    """The footer's bytes: chunks of at most ``block_size`` bytes each once
    decompressed, and at most :func:`_footer_limit` in all."""
    out, pos, total, cap = [], 0, 0, _footer_limit(len(raw))
    view = memoryview(raw)
    while pos < len(raw):
        if pos + 3 > len(raw):
            raise _Damaged("truncated compression chunk header in the footer")
        header = int.from_bytes(view[pos : pos + 3], "little")
        length, original = header >> 1, header & 1
        pos += 3
        if length > len(raw) - pos:
            raise _Damaged(f"compression chunk of {length} bytes past the footer")
        chunk = bytes(view[pos : pos + length])
        pos += length
        limit = min(block_size, cap - total)
        data = chunk if original else _inflate(chunk, codec, limit)
        if data is None and limit == block_size:
            raise _Damaged(f"a footer chunk decompresses to more than {block_size} bytes")
        if data is None or total + len(data) > cap:
            raise _Damaged(f"footer of {len(raw)} bytes decompresses to more than {cap}")
        total += len(data)
        out.append(data)
    return b"".join(out)


def _inflate(chunk: bytes, codec: str, limit: int) -> bytes | None:
    """One compressed chunk, or None when it holds more than ``limit`` bytes."""
    data: bytes | None
    try:
        if codec == "ZLIB":
            d = zlib.decompressobj(-15)
            data = d.decompress(chunk, limit + 1)
        elif codec == "ZSTD":
            data = _zstd(chunk, limit)
        elif codec == "SNAPPY":
            size, _ = _varint(memoryview(chunk), 0)  # the uncompressed length comes first
            if size > limit:
                return None
            data = pa.Codec("snappy").decompress(chunk, size, asbytes=True)
        else:
            data = _lz4_block(chunk, limit)
    except (zlib.error, zstandard.ZstdError, OSError, pa.ArrowException) as e:
        raise _Damaged(f"corrupt {codec} data in the footer ({e})") from None
    return None if data is None or len(data) > limit else data


def _footer_limit(compressed: int) -> int:
    return min(MAX_FOOTER, (1 << 20) + MAX_RATIO * compressed)


def _zstd(chunk: bytes, limit: int) -> bytes:
    parts, total = [], 0
    reader = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(chunk), read_across_frames=True)
    with reader:
        while total <= limit:
            part = reader.read(limit + 1 - total)
            if not part:
                break
            parts.append(part)
            total += len(part)
    return b"".join(parts)


def _lz4_block(src: bytes, limit: int) -> bytes | None:
    """An LZ4 block (the raw format, no frame), or None past ``limit`` bytes: a
    sequence of literals then a match (offset back into the output, length), the last
    sequence literals only."""
    out, pos, n = bytearray(), 0, len(src)
    while True:
        if pos >= n:
            raise _Damaged("truncated LZ4 block in the footer")
        token = src[pos]
        pos += 1
        literals, pos = _lz4_length(src, pos, token >> 4)
        if literals > n - pos:
            raise _Damaged("LZ4 literals past the end of the footer chunk")
        out += src[pos : pos + literals]
        pos += literals
        if len(out) > limit:
            return None
        if pos == n:
            return bytes(out)
        if pos + 2 > n:
            raise _Damaged("truncated LZ4 match offset in the footer")
        offset = src[pos] | src[pos + 1] << 8
        pos += 2
        if offset == 0 or offset > len(out):
            raise _Damaged(f"LZ4 match offset {offset} out of range in the footer")
        match, pos = _lz4_length(src, pos, token & 15)
        match += 4
        if len(out) + match > limit:
            return None
        start = len(out) - offset
        if match <= offset:
            out += out[start : start + match]
        else:  # the match overlaps what it writes: a repeating pattern
            pattern = bytes(out[start:])
            out += (pattern * (match // offset + 1))[:match]


def _lz4_length(src: bytes, pos: int, length: int) -> tuple[int, int]:
    """A 4-bit length from a token, extended by bytes of 255 while it is 15."""
    if length == 15:
        while True:
            if pos >= len(src):
                raise _Damaged("truncated LZ4 length in the footer")
            byte = src[pos]
            pos += 1
            length += byte
            if byte != 255:
                break
    return length, pos


# -- the type tree ---------------------------------------------------------------------
class _Tree:
    """Checks types one by one, in file order: they must be one tree in pre-order
    (each type the next child of the types before it), hold parameters Arrow's ORC
    adapter converts safely, and nest no deeper than
    :data:`~.input_checks.MAX_NESTING` (as :func:`~.input_checks.check_schema`
    counts: the root is the record; structs, lists and unions add a level, maps two).
    Keeps only the path from the root to the latest type."""

    def __init__(self, name: str) -> None:
        self._name = name
        # (type id, its subtypes, how many of them came, its children's depth, top field)
        self._path: list[tuple[int, tuple[int, ...], int, int, str]] = []
        self._count = 0
        self._top_names: tuple[bytes, ...] = ()

    def add(self, tid: int, t: OrcType) -> None:
        _check_type(tid, t)
        self._count += 1
        if tid == 0:
            self._top_names = t.field_names
            self._path.append((0, t.subtypes, 0, _LEVELS.get(t.kind, 0), ""))
            return
        self._close()
        if not self._path:
            raise _Damaged(f"malformed type tree: types {tid}.. are not in it")
        parent, subtypes, came, depth, top = self._path[-1]
        if subtypes[came] != tid:
            raise _Damaged(f"malformed type tree: type {parent} links to type {subtypes[came]}")
        self._path[-1] = (parent, subtypes, came + 1, depth, top)
        if parent == 0:
            top = _field_name(self._top_names, came, tid)
        if depth + _LEVELS.get(t.kind, 0) > MAX_NESTING:
            raise nesting_error(self._name, f"field {top!r}")
        self._path.append((tid, t.subtypes, 0, depth + _LEVELS.get(t.kind, 0), top))

    def finish(self) -> None:
        if not self._count:
            raise _Damaged("no types in the footer")
        self._close()
        if self._path:
            parent, subtypes, came, _, _ = self._path[-1]
            missing = subtypes[came]
            gone = ", which does not exist" if missing >= self._count else ""
            raise _Damaged(f"malformed type tree: type {parent} links to type {missing}{gone}")

    def _close(self) -> None:
        """Drop the types at the end of the path whose children have all come."""
        while self._path and self._path[-1][2] == len(self._path[-1][1]):
            self._path.pop()


def _field_name(names: tuple[bytes, ...], child: int, tid: int) -> str:
    try:
        return names[child].decode()
    except (IndexError, UnicodeDecodeError):
        return f"column {tid}"


def _check_type(tid: int, t: OrcType) -> None:
    """Refuse a type whose parameters Arrow's aborting constructors would reject."""
    if t.kind == _DECIMAL:
        if t.precision > MAX_PRECISION:  # 0 means "unknown": Arrow takes decimal128(38, 6)
            raise _Damaged(
                f"column {tid}: decimal precision {t.precision} is out of range 1..{MAX_PRECISION}"
            )
        if t.scale > (t.precision or MAX_PRECISION):
            raise _Damaged(
                f"column {tid}: decimal scale {t.scale} exceeds its precision {t.precision}"
            )
    elif t.kind == _CHAR and t.maximum_length > _MAX_CHAR:  # pyarrow < 26: a negative width
        raise _Damaged(f"column {tid}: char length {t.maximum_length} out of range")
    elif t.kind == _STRUCT and len(t.field_names) != len(t.subtypes):
        raise _Damaged(
            f"column {tid}: a struct of {len(t.subtypes)} types "
            f"and {len(t.field_names)} field names"
        )
    elif t.kind == _UNION and not 1 <= len(t.subtypes) <= MAX_UNION:
        raise _Damaged(f"column {tid}: a union of {len(t.subtypes)} types")

"""Quantile sketches of an object's first key field (Apache DataSketches KLL).

Every data object gets a sidecar ``data/<id>.sketch`` when it is written. Merging
the sketches of a partition's objects gives the distribution of its keys without
reading any data, which is how a partition is split at its median (Sleeper's
design) and how rows are counted per partition when an object straddles several.

Numbers, timestamps, dates and booleans go into a ``kll_doubles_sketch`` (values
beyond 2**53 are rounded, which only moves a split point slightly); strings and
binary into a ``kll_items_sketch`` of strings. A string object larger than
``MAX_ITEMS`` rows is sketched from an even sample of its (sorted) values, which
keeps its quantiles. Sketches hold *values*; a descending key field's sort order is
the reverse, which :func:`sort_rank` accounts for.

Sidecar format: one JSON header line (``{"kind": "doubles"|"strings", "type": ...}``)
followed by the serialized sketch.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import datasketches as ds
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from limno.data.sort import numpy_values
from limno.errors import CorruptError, NotFoundError
from limno.storage import Storage

__all__ = [
    "KeySketch",
    "SketchBuilder",
    "read_sketch",
    "sketch_column",
    "sketch_path",
    "write_sketch",
]

K = 200
MAX_ITEMS = 200_000
_STRINGS = ds.PyStringsSerDe()


def sketch_path(pool_id: str, object_id: str) -> str:
    return f"{pool_id}/data/{object_id}.sketch"


def _numeric(typ: pa.DataType) -> bool:
    t = pa.types
    return (
        t.is_integer(typ)
        or t.is_floating(typ)
        or t.is_boolean(typ)
        or t.is_timestamp(typ)
        or t.is_date(typ)
        or t.is_time(typ)
        or t.is_duration(typ)
        or t.is_decimal(typ)
    )


def _as_float(value: Any) -> float:
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.UTC)
        return value.timestamp() * 1e6
    if isinstance(value, dt.date):
        return float(value.toordinal() - dt.date(1970, 1, 1).toordinal())
    if isinstance(value, dt.timedelta):
        return value / dt.timedelta(microseconds=1)
    if isinstance(value, dt.time):
        return (value.hour * 3600 + value.minute * 60 + value.second) * 1e6 + value.microsecond
    if isinstance(value, decimal.Decimal | bool | int | float):
        return float(value)
    raise TypeError(f"cannot sketch {type(value).__name__}")


def _to_doubles(arr: pa.Array) -> np.ndarray[Any, Any]:
    """Values as doubles, temporal ones in microseconds: the sketch only places split
    points, so sub-microsecond digits and integer digits past 2**53 may round away
    (hence ``safe=False``)."""
    typ = arr.type
    if pa.types.is_timestamp(typ):
        arr = pc.cast(arr.cast(pa.timestamp("us", typ.tz), safe=False), pa.int64())
    elif pa.types.is_date(typ):
        arr = pc.cast(arr.cast(pa.date32(), safe=False), pa.int32())
    elif pa.types.is_time(typ):
        arr = pc.cast(arr.cast(pa.time64("us"), safe=False), pa.int64())
    elif pa.types.is_duration(typ):
        arr = pc.cast(arr.cast(pa.duration("us"), safe=False), pa.int64())
    elif pa.types.is_boolean(typ):
        arr = pc.cast(arr, pa.int8())
    return numpy_values(pc.cast(arr, pa.float64(), safe=False))


@dataclass
class KeySketch:
    """A KLL sketch of key values, of kind ``doubles`` or ``strings``."""

    kind: str
    sketch: Any

    @classmethod
    def empty(cls, kind: str) -> KeySketch:
        if kind == "doubles":
            return cls(kind, ds.kll_doubles_sketch(K))
        return cls(kind, ds.kll_items_sketch(K))

    @property
    def n(self) -> int:
        return int(self.sketch.n)

    def merge(self, other: KeySketch) -> None:
        if other.kind != self.kind:
            raise CorruptError(f"cannot merge a {other.kind} sketch into a {self.kind} one")
        if other.n:
            self.sketch.merge(other.sketch)

    def _point(self, value: Any) -> Any:
        if self.kind == "doubles":
            return _as_float(value)
        if isinstance(value, bytes):
            return value.decode("latin-1")  # as binary keys are sketched
        return value if isinstance(value, str) else str(value)

    def rank(self, value: Any) -> float:
        """Fraction of values strictly below ``value`` (0 for an empty sketch)."""
        if not self.n:
            return 0.0
        return float(self.sketch.get_rank(self._point(value)))

    def quantile(self, fraction: float) -> Any:
        value = self.sketch.get_quantile(fraction)
        return float(value) if self.kind == "doubles" else value

    def to_bytes(self, type_text: str) -> bytes:
        header = json.dumps({"kind": self.kind, "type": type_text}).encode() + b"\n"
        body = (
            self.sketch.serialize() if self.kind == "doubles" else self.sketch.serialize(_STRINGS)
        )
        return header + bytes(body)

    @classmethod
    def from_bytes(cls, data: bytes, where: str = "sketch") -> KeySketch:
        head, sep, body = data.partition(b"\n")
        try:
            kind = json.loads(head)["kind"]
            if not sep:
                raise ValueError("no header line")
            if kind == "doubles":
                return cls(kind, ds.kll_doubles_sketch.deserialize(body))
            return cls(kind, ds.kll_items_sketch.deserialize(body, _STRINGS))
        except (ValueError, KeyError, RuntimeError) as e:
            raise CorruptError(f"{where}: unreadable sketch ({e})") from e


def sketch_column(values: pa.Array | pa.ChunkedArray) -> KeySketch:
    """Sketch the non-null values of one key column."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    values = values.drop_null()
    if pa.types.is_dictionary(values.type):
        values = values.dictionary_decode()
    if _numeric(values.type):
        sk = KeySketch.empty("doubles")
        _update_doubles(sk, values)
        return sk
    sk = KeySketch.empty("strings")
    binary = _is_binary(values.type)
    if not binary and not (
        pa.types.is_string(values.type) or pa.types.is_large_string(values.type)
    ):
        values = pc.cast(values, pa.large_string())
    n = len(values)
    if n > MAX_ITEMS:
        step = n / MAX_ITEMS
        values = values.take(pa.array([int(i * step) for i in range(MAX_ITEMS)], pa.int64()))
    for v in values.to_pylist():
        sk.sketch.update(v.decode("latin-1") if binary else v)
    return sk


def _is_binary(t: pa.DataType) -> bool:
    """Binary keys are sketched as text of one character per byte (Latin-1), which
    orders like the bytes: any bytes, UTF-8 or not, have such a text."""
    return bool(
        pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t)
    )


def _update_doubles(sk: KeySketch, values: pa.Array) -> None:
    """Add the non-null, non-NaN values of a numeric (non-dictionary) array."""
    doubles = _to_doubles(values.drop_null())
    if pa.types.is_floating(values.type):  # only floats hold NaN (two passes saved)
        doubles = doubles[~np.isnan(doubles)]
    if len(doubles):
        sk.sketch.update(doubles)


class SketchBuilder:
    """Sketches a key column given piece by piece, as a writer streams an object.

    Numeric pieces go into the sketch as they come; string pieces are kept (the
    caller's arrays, not copies) and sketched at the end like :func:`sketch_column`,
    whose even sample needs the whole column. The result equals sketching the
    concatenated column, up to KLL's own randomness.
    """

    def __init__(self) -> None:
        self._type: pa.DataType | None = None
        self._doubles: KeySketch | None = None
        self._pieces: list[pa.Array] = []

    def add(self, values: pa.Array | pa.ChunkedArray) -> None:
        if self._type is None:
            self._type = values.type
        chunks = values.chunks if isinstance(values, pa.ChunkedArray) else [values]
        for chunk in chunks:
            if pa.types.is_dictionary(chunk.type):
                chunk = chunk.dictionary_decode()
            if _numeric(chunk.type):
                if self._doubles is None:
                    self._doubles = KeySketch.empty("doubles")
                _update_doubles(self._doubles, chunk)
            else:
                self._pieces.append(chunk)

    def finish(self) -> tuple[KeySketch, str]:
        """The sketch and the text of the column's type (for the sidecar's header)."""
        type_text = str(self._type if self._type is not None else pa.null())
        if self._pieces:
            return sketch_column(pa.chunked_array(self._pieces)), type_text
        return self._doubles or sketch_column(pa.array([], pa.null())), type_text


def write_sketch(
    storage: Storage, pool_id: str, object_id: str, values: pa.Array | pa.ChunkedArray
) -> KeySketch:
    sk = sketch_column(values)
    storage.put(sketch_path(pool_id, object_id), sk.to_bytes(str(values.type)))
    return sk


def read_sketch(storage: Storage, pool_id: str, object_id: str) -> KeySketch | None:
    """The object's sketch, or None if it has none (objects written before sketches)."""
    path = sketch_path(pool_id, object_id)
    try:
        return KeySketch.from_bytes(storage.get(path), path)
    except NotFoundError:
        return None


def merged(sketches: Iterable[KeySketch | None]) -> KeySketch | None:
    out: KeySketch | None = None
    for sk in sketches:
        if sk is None or not sk.n:
            continue
        if out is None:
            out = KeySketch.empty(sk.kind)
        out.merge(sk)
    return out


def sort_rank(sk: KeySketch, value: Any, descending: bool) -> float:
    """Fraction of values that sort before ``value`` in the field's order."""
    r = sk.rank(value)
    if not descending:
        return r
    if sk.kind == "doubles":
        inclusive = float(sk.sketch.get_rank(_as_float(value), True))
    else:
        inclusive = float(sk.sketch.get_rank(sk._point(value), True))
    return 1.0 - inclusive


def first_field(values: Sequence[Any] | None) -> Any:
    return None if values is None else values[0]

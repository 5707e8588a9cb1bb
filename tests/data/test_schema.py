"""Schema unification: the widening rule, unify, conform, and Python-value typing.

The properties that matter for a pool: widening does not depend on the order objects
are read in (commutative up to struct field order, associative), and converting data
to a widened schema never loses a value (the string fallback keeps it as text).
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import math
from functools import partial
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pyarrow.types as pt
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from limno.data.schema import (
    coerce,
    conform,
    from_avro,
    infer_type,
    json_text,
    text_of,
    unify,
    widen,
)
from limno.errors import InvalidInputError

UTC = dt.UTC


# -- the table of the module docstring, row by row ------------------------------------------
@pytest.mark.parametrize(
    ("a", "b", "want"),
    [
        (pa.null(), pa.int8(), pa.int8()),
        (pa.string(), pa.string(), pa.string()),
        (pa.int8(), pa.int16(), pa.int64()),
        (pa.bool_(), pa.int32(), pa.int64()),
        (pa.uint32(), pa.int8(), pa.int64()),
        (pa.uint64(), pa.int64(), pa.float64()),
        (pa.uint64(), pa.uint8(), pa.float64()),
        (pa.int64(), pa.float32(), pa.float64()),
        (pa.float32(), pa.float64(), pa.float64()),
        (pa.decimal128(10, 2), pa.decimal128(12, 4), pa.decimal128(12, 4)),
        (pa.decimal128(10, 2), pa.int32(), pa.decimal128(21, 2)),
        (pa.decimal128(30, 15), pa.int64(), pa.decimal128(34, 15)),
        (pa.decimal128(38, 20), pa.bool_(), pa.decimal256(39, 20)),
        (pa.decimal256(10, 0), pa.decimal128(10, 0), pa.decimal256(10, 0)),
        (pa.decimal256(76, 70), pa.int8(), pa.float64()),
        (pa.decimal128(10, 2), pa.uint64(), pa.float64()),
        (pa.decimal128(10, 2), pa.float32(), pa.float64()),
        (pa.timestamp("s"), pa.timestamp("ms"), pa.timestamp("us")),
        (pa.timestamp("ns", "UTC"), pa.timestamp("ns", "UTC"), pa.timestamp("ns", "UTC")),
        (pa.timestamp("ms", "UTC"), pa.timestamp("ms"), pa.timestamp("ms", "UTC")),
        (pa.timestamp("s", "Europe/Paris"), pa.timestamp("ms", "UTC"), pa.timestamp("us", "UTC")),
        (pa.date32(), pa.timestamp("ms", "UTC"), pa.timestamp("ms", "UTC")),
        (pa.date32(), pa.date64(), pa.date64()),
        (pa.time32("s"), pa.time64("ns"), pa.time64("ns")),
        (pa.duration("s"), pa.duration("ms"), pa.duration("us")),
        (pa.string(), pa.large_string(), pa.large_string()),
        (pa.string_view(), pa.string(), pa.string()),
        (pa.binary(4), pa.binary(), pa.binary()),
        (pa.binary(), pa.large_binary(), pa.large_binary()),
        (pa.binary(), pa.string(), pa.binary()),
        (pa.binary(), pa.int64(), pa.binary()),
        (pa.large_string(), pa.binary(), pa.large_binary()),
        (pa.int64(), pa.string(), pa.string()),
        (pa.int64(), pa.large_string(), pa.large_string()),
        (pa.struct([("a", pa.int8())]), pa.int64(), pa.string()),
        (pa.list_(pa.int8()), pa.string(), pa.string()),
        (pa.date32(), pa.int32(), pa.string()),
        (pa.list_(pa.int8()), pa.large_list(pa.int16()), pa.large_list(pa.int64())),
        (pa.list_(pa.int8(), 2), pa.list_(pa.int8(), 3), pa.list_(pa.int8())),
        (
            pa.map_(pa.string(), pa.int8()),
            pa.map_(pa.string(), pa.float32()),
            pa.map_(pa.string(), pa.float64()),
        ),
        (pa.dictionary(pa.int32(), pa.string()), pa.string(), pa.string()),
        (pa.dictionary(pa.int32(), pa.string()), pa.int8(), pa.string()),
    ],
)
def test_widen_table(a: pa.DataType, b: pa.DataType, want: pa.DataType) -> None:
    assert widen(a, b) == want
    assert widen(b, a) == want


def test_widen_structs_union_fields_in_first_seen_order() -> None:
    a = pa.struct([("x", pa.int8()), ("y", pa.string())])
    b = pa.struct([("z", pa.bool_()), ("x", pa.float32()), ("y", pa.int8())])
    got = widen(a, b)
    assert got == pa.struct([("x", pa.float64()), ("y", pa.string()), ("z", pa.bool_())])
    assert all(f.nullable for f in got)


def test_unify_names_order_and_nullability() -> None:
    s1 = pa.schema([pa.field("a", pa.int8(), nullable=False), ("b", pa.string())])
    s2 = pa.schema([("c", pa.bool_()), ("a", pa.string())], metadata={"pandas": "{}"})
    got = unify([s1, s2])
    assert got.names == ["a", "b", "c"]
    assert got.types == [pa.string(), pa.string(), pa.bool_()]
    assert all(f.nullable for f in got) and not got.metadata
    assert unify([]) == pa.schema([])
    with pytest.raises(InvalidInputError, match="'a' more than once"):
        unify([pa.schema([("a", pa.int8()), ("a", pa.int8())])])


def test_unify_relaxes_nested_non_nullable_fields_so_missing_columns_can_be_written() -> None:
    strict = pa.field("x", pa.int64(), nullable=False)
    t1 = pa.table(
        {
            "k": [1, 2],
            "s": pa.array([{"x": 1}, None], pa.struct([strict])),
            "l": pa.array([[1], None], pa.list_(pa.field("item", pa.int64(), nullable=False))),
            "m": pa.array([[("a", 1)], None], pa.map_(pa.string(), strict.with_name("value"))),
        }
    )
    t2 = pa.table({"k": [3], "z": ["q"]})
    schema = unify([t1.schema, t2.schema])
    assert schema.field("s").type == pa.struct([pa.field("x", pa.int64())])
    assert schema.field("l").type == pa.list_(pa.int64())
    assert schema.field("m").type.item_field.nullable
    both = pa.concat_tables([conform(t1, schema), conform(t2, schema)])
    buf = pa.BufferOutputStream()
    pq.write_table(both, buf)  # a non-nullable child holding nulls would be refused here
    back = pq.read_table(pa.BufferReader(buf.getvalue()))
    assert back.column("s").to_pylist() == [{"x": 1}, None, None]
    assert back.column("l").to_pylist() == [[1], None, None]


# -- conform ------------------------------------------------------------------------------
NESTED = pa.table(
    {
        "s": pa.array(
            [{"x": 1, "l": [{"q": "a"}, None]}, None, {"x": None, "l": []}],
            pa.struct([("x", pa.int32()), ("l", pa.list_(pa.struct([("q", pa.string())])))]),
        ),
        "m": pa.array([[("k", 1)], None, []], pa.map_(pa.string(), pa.int64())),
        "ll": pa.array([[[1, 2], None], None, [[]]], pa.large_list(pa.list_(pa.int16()))),
    }
)


def test_conform_round_trips_nested_data_exactly() -> None:
    out = conform(NESTED, unify([NESTED.schema]))
    assert out.equals(NESTED)
    assert out.column("s").chunks[0] is not None
    assert conform(NESTED.to_batches()[0], NESTED.schema).equals(NESTED)


def test_conform_reorders_adds_and_widens_nested() -> None:
    other = pa.table(
        {"ll": pa.array([[[3]]], pa.list_(pa.list_(pa.int64())))},
    )
    schema = unify([NESTED.schema, other.schema, pa.schema([("new", pa.string())])])
    out = conform(other, schema)
    assert out.schema == schema
    assert out.to_pylist() == [{"s": None, "m": None, "ll": [[3]], "new": None}]
    gaining = pa.table({"s": pa.array([{"x": 7}], pa.struct([("x", pa.int64())]))})
    wide = unify([gaining.schema, NESTED.schema])
    assert wide.field("s").type.names == ["x", "l"]
    got = conform(NESTED, wide).column("s").to_pylist()
    assert got == NESTED.column("s").to_pylist()
    assert conform(gaining, wide).column("s").to_pylist() == [{"x": 7, "l": None}]


def test_conform_sliced_arrays() -> None:
    sliced = NESTED.slice(1, 2)
    schema = unify([sliced.schema, pa.schema([("s", pa.struct([("z", pa.int8())]))])])
    out = conform(sliced, schema)
    assert [r["s"] for r in out.to_pylist()] == [None, {"x": None, "l": [], "z": None}]
    assert out.column("ll").to_pylist() == sliced.column("ll").to_pylist()
    assert out.column("m").to_pylist() == sliced.column("m").to_pylist()


def test_conform_string_fallback_renders_text() -> None:
    t = pa.table(
        {
            "i": pa.array([1, None], pa.int64()),
            "b": [True, False],
            "f": [1.5, 2.0],
            "d": pa.array([dt.date(2024, 1, 2), None]),
            "s": pa.array([{"a": [1, 2], "t": "x"}, None]),
            "l": pa.array([["x", None], []]),
            "m": pa.array([[("k", b"\x00\xff")], None], pa.map_(pa.string(), pa.binary())),
        }
    )
    schema = pa.schema([(n, pa.string()) for n in t.column_names])
    out = conform(t, schema).to_pylist()
    assert out[0] == {
        "i": "1",
        "b": "true",
        "f": "1.5",
        "d": "2024-01-02",
        "s": '{"a":[1,2],"t":"x"}',
        "l": '["x",null]',
        "m": '{"k":"AP8="}',
    }
    assert out[1] == {"i": None, "b": "false", "f": "2", "d": None, "s": None, "l": "[]", "m": None}


def test_conform_binary_top_and_dictionary() -> None:
    t = pa.table(
        {
            "s": ["é", None],
            "i": [1, 2],
            "d": pa.array(["a", "b"]).dictionary_encode(),
        }
    )
    out = conform(t, pa.schema([("s", pa.binary()), ("i", pa.large_binary()), ("d", pa.string())]))
    assert out.to_pylist() == [
        {"s": "é".encode(), "i": b"1", "d": "a"},
        {"s": None, "i": b"2", "d": "b"},
    ]


def test_conform_lossy_corners_are_casts_not_errors() -> None:
    t = pa.table(
        {
            "u": pa.array([2**64 - 1], pa.uint64()),
            "ts": pa.array([1_500], pa.timestamp("ns")),
        }
    )
    out = conform(t, pa.schema([("u", pa.float64()), ("ts", pa.timestamp("us", "UTC"))]))
    assert out.column("u").to_pylist() == [float(2**64 - 1)]
    assert out.column("ts").cast(pa.int64()).to_pylist() == [1]


def test_conform_refuses_to_drop() -> None:
    t = pa.table({"a": [1], "b": [2]})
    with pytest.raises(InvalidInputError, match="'b' is not in the target schema"):
        conform(t, pa.schema([("a", pa.int64())]))
    s = pa.table({"s": pa.array([{"x": 1, "y": 2}])})
    with pytest.raises(InvalidInputError, match=r"field s\.y is not in the target type"):
        conform(s, pa.schema([("s", pa.struct([("x", pa.int64())]))]))


def test_conform_cast_failure_is_one_line() -> None:
    t = pa.table({"a": pa.array([2**40], pa.int64())})
    with pytest.raises(InvalidInputError) as e:
        conform(t, pa.schema([("a", pa.int8())]))
    assert str(e.value).startswith("cannot convert a from int64 to int8")
    assert "\n" not in str(e.value)


# -- Python values -------------------------------------------------------------------------
def test_infer_type_and_coerce() -> None:
    assert infer_type({"a": [1, 2.5, None], "b": {"c": True}}) == pa.struct(
        [("a", pa.list_(pa.float64())), ("b", pa.struct([("c", pa.bool_())]))]
    )
    assert infer_type(2**63) == pa.decimal128(38, 0)
    assert infer_type(10**40) == pa.string()
    assert infer_type([1, "x", {"k": 1}]) == pa.list_(pa.string())
    with pytest.raises(InvalidInputError):
        infer_type({1, 2})
    t = pa.struct([("a", pa.string()), ("b", pa.int64()), ("c", pa.decimal128(38, 0))])
    assert coerce({"a": {"x": [1]}, "b": True, "c": 5}, t) == {
        "a": '{"x":[1]}',
        "b": 1,
        "c": decimal.Decimal(5),
    }
    assert text_of(dt.date(2020, 1, 2)) == "2020-01-02"
    assert text_of(decimal.Decimal("1.50")) == "1.50"
    assert text_of(None) == "null" and text_of(1.0) == "1.0"


def test_json_text() -> None:
    assert json_text({"a": [1, None], "b": "é"}) == '{"a":[1,null],"b":"é"}'
    assert (
        json_text({b"\x01": dt.datetime(2020, 1, 2, 3, 4, 5)}) == '{"AQ==":"2020-01-02T03:04:05"}'
    )
    assert json_text({1: (1, 2)}) == '{"1":[1,2]}'
    assert json_text({dt.date(2020, 1, 1): 1}) == '{"2020-01-01":1}'


def test_from_avro() -> None:
    schema = {
        "type": "record",
        "name": "ns.R",
        "fields": [
            {"name": "a", "type": ["null", "int", "long"]},
            {"name": "b", "type": ["int", "string"]},
            {"name": "e", "type": {"type": "enum", "name": "ns.E", "symbols": ["X"]}},
            {"name": "f", "type": {"type": "fixed", "name": "ns.F", "size": 4}},
            {"name": "f2", "type": "ns.F"},
            {
                "name": "d",
                "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2},
            },
            {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-micros"}},
            {"name": "m", "type": {"type": "map", "values": {"type": "array", "items": "double"}}},
            {
                "name": "node",
                "type": {
                    "type": "record",
                    "name": "ns.Node",
                    "fields": [{"name": "next", "type": ["null", "ns.Node"]}],
                },
            },
        ],
    }
    got = from_avro(schema)
    assert got == pa.struct(
        [
            ("a", pa.int64()),
            ("b", pa.string()),
            ("e", pa.string()),
            ("f", pa.binary(4)),
            ("f2", pa.binary(4)),
            ("d", pa.decimal128(9, 2)),
            ("ts", pa.timestamp("us", "UTC")),
            ("m", pa.map_(pa.string(), pa.list_(pa.float64()))),
            ("node", pa.struct([("next", pa.string())])),
        ]
    )
    with pytest.raises(InvalidInputError, match="unknown Avro type"):
        from_avro({"type": "array", "items": "Nope"})


# -- properties --------------------------------------------------------------------------------
SCALARS = [
    pa.null(),
    pa.bool_(),
    pa.int8(),
    pa.int32(),
    pa.int64(),
    pa.uint8(),
    pa.uint64(),
    pa.float32(),
    pa.float64(),
    pa.decimal128(10, 2),
    pa.decimal128(38, 0),
    pa.string(),
    pa.large_string(),
    pa.binary(),
    pa.date32(),
    pa.timestamp("s"),
    pa.timestamp("ms", "UTC"),
    pa.timestamp("s", "Europe/Paris"),
    pa.timestamp("us"),
    pa.time32("s"),
    pa.time64("us"),
]


def _struct(fields: list[tuple[str, pa.DataType]]) -> pa.DataType:
    return pa.struct(fields)


types = st.recursive(
    st.sampled_from(SCALARS),
    lambda inner: st.one_of(
        inner.map(pa.list_),
        inner.map(pa.large_list),
        st.lists(
            st.tuples(st.sampled_from("abc"), inner), max_size=3, unique_by=lambda f: f[0]
        ).map(_struct),
    ),
    max_leaves=5,
)


def _normal(t: pa.DataType) -> pa.DataType:
    """``t`` with struct fields sorted by name: widen is commutative up to field order."""
    if pt.is_struct(t):
        return pa.struct(sorted(((f.name, _normal(f.type)) for f in t), key=lambda f: f[0]))
    if pt.is_list(t):
        return pa.list_(_normal(t.value_type))
    if pt.is_large_list(t):
        return pa.large_list(_normal(t.value_type))
    return t


@settings(max_examples=400, deadline=None)
@given(types, types, types)
def test_widen_is_commutative_and_associative(
    a: pa.DataType, b: pa.DataType, c: pa.DataType
) -> None:
    assert _normal(widen(a, b)) == _normal(widen(b, a))
    assert widen(widen(a, b), c) == widen(a, widen(b, c))
    assert widen(a, a) == a
    assert widen(a, pa.null()) == a


def _values(t: pa.DataType) -> st.SearchStrategy[Any]:
    if pt.is_null(t):
        return st.none()
    inner: st.SearchStrategy[Any]
    if pt.is_boolean(t):
        inner = st.booleans()
    elif pt.is_integer(t):
        bits = t.bit_width
        lo, hi = (
            (0, 2**bits - 1)
            if pt.is_unsigned_integer(t)
            else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
        )
        inner = st.integers(lo, hi)
    elif pt.is_floating(t):
        inner = st.floats(width=t.bit_width, allow_nan=False, allow_infinity=False)
    elif pt.is_decimal(t):
        top = decimal.Decimal("9" * (t.precision - t.scale))  # exact: no context rounding
        inner = st.decimals(-top, top, places=t.scale, allow_nan=False, allow_infinity=False)
        # hypothesis builds them in the default context (28 digits): -top may round past it
        inner = inner.filter(partial(_within, top))
    elif pt.is_string(t) or pt.is_large_string(t):
        inner = st.text(st.characters(codec="utf-8"), max_size=4)
    elif pt.is_binary(t):
        inner = st.binary(max_size=4)
    elif pt.is_date(t):
        inner = st.dates(dt.date(1900, 1, 1), dt.date(2200, 1, 1))
    elif pt.is_timestamp(t):
        step = {"s": 1_000_000, "ms": 1000, "us": 1}[t.unit]
        inner = st.datetimes(dt.datetime(1900, 1, 1), dt.datetime(2200, 1, 1)).map(
            lambda d: d.replace(
                microsecond=d.microsecond // step * step, tzinfo=UTC if t.tz else None
            )
        )
    elif pt.is_time(t):
        inner = st.times().map(lambda v: v.replace(microsecond=0) if t.unit == "s" else v)
    elif pt.is_list(t) or pt.is_large_list(t):
        inner = st.lists(_values(t.value_type), max_size=3)
    else:
        inner = st.fixed_dictionaries({f.name: _values(f.type) for f in t})
    return st.none() | inner


def _is_text(t: pa.DataType) -> bool:
    return bool(pt.is_string(t) or pt.is_large_string(t))


def _jsonable(v: Any) -> Any:
    """What the JSON text of a value parses back to (bytes base64, dates ISO, ...)."""
    if isinstance(v, dict):
        return {k: _jsonable(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_jsonable(x) for x in v]
    if isinstance(v, bytes):
        return base64.b64encode(v).decode()
    if isinstance(v, dt.date | dt.time):
        return v.isoformat()
    if isinstance(v, decimal.Decimal):
        return str(v)
    return v


def _instant(v: dt.date) -> dt.datetime:
    if not isinstance(v, dt.datetime):
        v = dt.datetime(v.year, v.month, v.day)
    return v if v.tzinfo else v.replace(tzinfo=UTC)


def _kept(v: Any, out: Any, a: pa.DataType, w: pa.DataType) -> bool:
    """Whether ``out`` (of widened type ``w``) holds the value ``v`` (of type ``a``)."""
    if v is None or pt.is_null(a):
        return out is None
    if out is None:
        return False
    if a == w:
        return bool(v == out)
    if pt.is_binary(w) or pt.is_large_binary(w):
        if pt.is_binary(a):
            return bool(v == out)
        return _kept(v, out.decode(), a, pa.string())
    if _is_text(w) and not _is_text(a):
        if pt.is_struct(a) or pt.is_list(a) or pt.is_large_list(a):
            return bool(json.loads(out) == _jsonable(v))
        if pt.is_time(a):  # Arrow cannot cast text to a time
            return dt.time.fromisoformat(out) == v
        return bool(pc.cast(pa.array([out], w), a).to_pylist()[0] == v)  # cast back
    if pt.is_struct(w):
        names = {f.name for f in a}
        kids = all(_kept(v[f.name], out[f.name], f.type, w.field(f.name).type) for f in a)
        return kids and all(out[f.name] is None for f in w if f.name not in names)
    if pt.is_list(w) or pt.is_large_list(w):
        return len(v) == len(out) and all(
            _kept(x, y, a.value_type, w.value_type) for x, y in zip(v, out, strict=True)
        )
    if pt.is_floating(w):
        return math.isclose(float(v), out, rel_tol=1e-15)
    if pt.is_timestamp(w):
        return _instant(v) == _instant(out)
    if pt.is_integer(w) or pt.is_decimal(w):
        return bool(int(v) == out if isinstance(v, bool) else v == out)
    return bool(v == out)


def _within(top: decimal.Decimal, d: decimal.Decimal) -> bool:
    return abs(d) <= top


@st.composite
def typed_column(draw: st.DrawFn) -> tuple[pa.DataType, pa.DataType, list[Any]]:
    a, b = draw(types), draw(types)
    return a, widen(a, b), draw(st.lists(_values(a), max_size=4))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(typed_column())
def test_conform_to_a_widened_type_keeps_every_value(
    case: tuple[pa.DataType, pa.DataType, list[Any]],
) -> None:
    a, w, values = case
    column = pa.array(values, a)
    out = conform(pa.table({"c": column}), pa.schema([("c", w)]))
    assert out.schema.field("c").type == w
    for v, o in zip(column.to_pylist(), out.column("c").to_pylist(), strict=True):
        assert _kept(v, o, a, w), (v, o, a, w)


def test_text_of_a_zoned_timestamp_reads_back_even_with_a_seconds_offset() -> None:
    # Paris kept local mean time (+00:09:21) until 1911: Arrow's "+0009" would lose 21 s
    utc = [dt.datetime(1911, 1, 1, tzinfo=dt.UTC), dt.datetime(2024, 1, 1, 10, tzinfo=dt.UTC)]
    column = pa.array([*utc, None], pa.timestamp("s", "Europe/Paris"))
    out = conform(pa.table({"c": column}), pa.schema([("c", pa.string())])).column("c")
    assert out.to_pylist()[1:] == ["2024-01-01 11:00:00+0100", None]
    assert pc.cast(out, column.type).to_pylist() == column.to_pylist()

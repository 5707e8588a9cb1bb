"""The Connect envelope's type mapping both ways, without a broker: every Arrow type
``kafka to --format connect`` writes reads back (``kafka from``) as the same type and
values, through the envelope's JSON text."""

from __future__ import annotations

import datetime as dt
import decimal
import json
from typing import Any

import pyarrow as pa
import pytest

from limno.streams.formats import ConnectDecoder, encoder_for
from limno.streams.formats_connect import Undecodable, arrow_type, from_payload

UTC = dt.UTC
CASES: list[tuple[pa.DataType, Any]] = [
    (pa.int8(), -5),
    (pa.int16(), 300),
    (pa.int32(), 70_000),
    (pa.int64(), 2**40),
    (pa.float32(), 1.5),
    (pa.float64(), 0.1),
    (pa.bool_(), True),
    (pa.string(), "é"),
    (pa.binary(), b"\x00\xff"),
    (pa.decimal128(12, 3), decimal.Decimal("-123456.789")),
    (pa.date32(), dt.date(1969, 12, 31)),
    (pa.time32("ms"), dt.time(23, 59, 59, 999000)),
    (pa.time64("us"), dt.time(1, 2, 3, 4)),
    (pa.timestamp("ms", tz="UTC"), dt.datetime(2026, 11, 26, 6, 0, 0, 123000, tzinfo=UTC)),
    (pa.timestamp("us", tz="UTC"), dt.datetime(1960, 1, 1, 0, 0, 0, 1, tzinfo=UTC)),
    (pa.timestamp("ms"), dt.datetime(2026, 1, 2, 3, 4, 5, 6000)),
    (pa.timestamp("us"), dt.datetime(2026, 1, 2, 3, 4, 5, 6)),
    (pa.list_(pa.int32()), [1, None, 3]),
    (pa.map_(pa.string(), pa.float64()), [("a", 1.0)]),
    (pa.map_(pa.int32(), pa.string()), [(1, "one")]),
    (pa.struct([("a", pa.int16()), ("b", pa.list_(pa.string()))]), {"a": 1, "b": ["x"]}),
]


@pytest.mark.parametrize(("typ", "value"), CASES, ids=[str(t) for t, _ in CASES])
def test_arrow_type_round_trip(typ: pa.DataType, value: Any) -> None:
    text = encoder_for("connect", typ)(value)
    assert isinstance(text, str)
    decoder = ConnectDecoder()
    parsed = decoder.parse(text.encode())
    column = decoder.column([parsed, None], [0, 1], "t")
    assert column.type == typ
    assert column.to_pylist() == [value, None]


def test_json_converter_shapes() -> None:
    """What JsonConverter writes: a numeric Decimal, a struct's default, optional nulls."""
    decimal_schema = {
        "type": "bytes",
        "name": "org.apache.kafka.connect.data.Decimal",
        "parameters": {"scale": "1"},
    }
    assert from_payload(decimal_schema, 12.5) == decimal.Decimal("12.5")
    assert arrow_type(decimal_schema) == pa.decimal128(38, 1)
    assert from_payload({"type": "string", "default": "x"}, None) == "x"
    with pytest.raises(Undecodable, match="is not a Connect int32"):
        from_payload({"type": "int32"}, "7")
    with pytest.raises(Undecodable, match="is not a Connect boolean"):
        from_payload({"type": "boolean"}, 1)
    with pytest.raises(Undecodable, match="not a Kafka Connect envelope"):
        ConnectDecoder().parse(json.dumps({"payload": 1}).encode())

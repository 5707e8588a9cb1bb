"""``kafka from --format json`` reads a batch's values in one pass of pyarrow's JSON
reader when they all fit (limno.streams.formats, ``fast_values``), and value by value
otherwise: a value that would smuggle a column or a row into the one-pass read, or is
not UTF-8, or too deep, must get exactly the answer of the value-by-value path. The
messages here are stand-ins with confluent-kafka's Message methods (a unit test of the
decoding; tests/streams/test_kafka_from.py runs it against a real broker)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from kafka_stand_ins import Msg
from limno.errors import InvalidInputError
from limno.streams.formats import Decoder
from limno.streams.kafka_records import decode_records


def batch(*raws: bytes | None) -> list[Any]:
    return [Msg(r, i) for i, r in enumerate(raws)]


def values(*raws: bytes | None) -> list[Any]:
    table, bad = decode_records(batch(*raws))
    assert bad == []
    return table.column("value").to_pylist()


def test_plain_values_in_one_pass_equal_value_by_value() -> None:
    raws = [b'{"id": 1, "tags": ["a"]}', None, b'{"id": 2, "tags": []}']
    assert Decoder().fast_values(raws) is not None  # the one-pass path is taken
    assert values(*raws) == [{"id": 1, "tags": ["a"]}, None, {"id": 2, "tags": []}]


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        (b'1, "w": 2', "invalid JSON"),  # a second column in the one-pass read
        (b'1} {"v": 2', "invalid JSON"),  # a second row in it
        (b'{"a": 1, "a": 2}', None),  # JSON allows it (the last wins); pyarrow does not
        (b'"\xff"', "not UTF-8"),
        (b"[" * 40 + b"]" * 40, "nested too deep"),
        (b'"a\nb"', "invalid JSON"),  # a raw line break inside a string is not JSON
        (b'"a\rb"', "invalid JSON"),
    ],
)
def test_values_that_do_not_fit_one_pass_get_the_value_by_value_answer(
    raw: bytes, why: str | None
) -> None:
    raws = [b"{}", raw]
    assert Decoder().fast_values(raws) is None
    if why is None:
        assert values(*raws)[1] == {"a": 2}
        return
    with pytest.raises(InvalidInputError, match=f"kafka topic t partition 0 offset 1: .*{why}"):
        decode_records(batch(*raws))
    table, bad = decode_records(batch(*raws), keep_bad=True)
    assert table.column("value").to_pylist() == [{}]
    assert [(m.offset(), why in reason) for m, reason in bad] == [(1, True)]


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        (b'{"n": NaN}', "NaN is not a JSON number"),  # pyarrow's reader takes NaN
        (b'{"n": -Infinity}', "Infinity is not a JSON number"),
        (b'{"n": 1.7976931348623159e308}', "out of range"),  # pyarrow's reader: inf
    ],
)
def test_numbers_json_has_not_are_refused_in_a_batch_of_numbers(raw: bytes, why: str) -> None:
    """Beside values of the same shape (one pass would read them all), a value that
    is not a JSON number is refused as value by value refuses it, not kept as nan/inf."""
    raws = [b'{"n": 1.5}', raw]
    assert Decoder().fast_values(raws) is None
    with pytest.raises(InvalidInputError, match=f"kafka topic t partition 0 offset 1: .*{why}"):
        decode_records(batch(*raws))


def test_a_bad_key_sets_its_value_aside_from_the_one_pass_column() -> None:
    msgs: list[Any] = [Msg(b'{"n": 1}', 0), Msg(b'{"n": 2}', 1, b"\xff"), Msg(b'{"n": 3}', 2)]
    table, bad = decode_records(msgs, keep_bad=True)
    assert table.column("value").to_pylist() == [{"n": 1}, {"n": 3}]
    assert table.column("kafka").combine_chunks().field("offset").to_pylist() == [0, 2]
    assert [m.offset() for m, _ in bad] == [1]
    assert isinstance(table.column("value").type, pa.StructType)


def test_line_breaks_between_tokens_are_whitespace() -> None:
    got = values(b'{"a":\n 1}', b'{"a":\r\n 2, "b": [3]}')
    assert got == [{"a": 1, "b": None}, {"a": 2, "b": [3]}]


def test_names_that_look_like_constants_keep_the_one_pass_read() -> None:
    """``"Infinity War"``, ``"NaN"`` and ``e123`` inside strings are no numbers: the batch
    is still read in one pass (a Debezium envelope's names and ids often hold such)."""
    raws = [b'{"title": "Infinity War", "code": "e123"}', b'{"title": "NaN", "code": "E1000"}']
    assert Decoder().fast_values(raws) is not None
    assert values(*raws)[0] == {"title": "Infinity War", "code": "e123"}


@pytest.mark.parametrize("raw", [b'{"xs": [1.5, Infinity]}', b'{"s": {"x": 1e999}}'])
def test_a_nested_number_json_has_not_is_refused(raw: bytes) -> None:
    """Inside lists and objects too, value by value's answer (refused), not inf."""
    raws = [b'{"xs": [1.5], "s": {"x": 2.5}}', raw]
    assert Decoder().fast_values(raws) is None
    with pytest.raises(InvalidInputError, match="offset 1: invalid JSON"):
        decode_records(batch(*raws))

"""The one walker over nested Arrow types, and the stored forms built on it.

:func:`map_types` must reach a leaf through every container a load can store or
an engine can be handed (a leaf it misses is a type an engine then cannot read),
and rebuild each container as it was: field names, nullability and metadata.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from limno.data.plain_types import map_types, plain_type

WIDE = pa.decimal256(50, 3)
META = {b"why": b"kept"}


def wide_as_double(t: pa.DataType) -> pa.DataType:
    return pa.float64() if pa.types.is_decimal256(t) else t


def leaf(t: pa.DataType = WIDE, name: str = "x") -> pa.Field:
    """A non-nullable field with metadata: what a rebuild must not lose."""
    return pa.field(name, t, nullable=False, metadata=META)


def children(t: pa.DataType) -> list[pa.Field]:
    if pa.types.is_dictionary(t):
        return children(t.value_type)
    if pa.types.is_map(t):
        return [t.key_field, t.item_field]
    return [t.field(i) for i in range(t.num_fields)]


CONTAINERS = {
    "struct": (
        pa.struct([leaf(), pa.field("n", pa.int8())]),
        pa.struct([leaf(pa.float64()), pa.field("n", pa.int8())]),
    ),
    "list": (pa.list_(leaf()), pa.list_(leaf(pa.float64()))),
    "large_list": (pa.large_list(leaf()), pa.large_list(leaf(pa.float64()))),
    "list_view": (pa.list_view(leaf()), pa.list_view(leaf(pa.float64()))),
    "large_list_view": (pa.large_list_view(leaf()), pa.large_list_view(leaf(pa.float64()))),
    "fixed_size_list": (pa.list_(leaf(), 3), pa.list_(leaf(pa.float64()), 3)),
    "map_items": (
        pa.map_(pa.string(), leaf(name="value")),
        pa.map_(pa.string(), leaf(pa.float64(), "value")),
    ),
    "map_keys": (
        pa.map_(leaf(name="key"), pa.int8(), keys_sorted=True),
        pa.map_(leaf(pa.float64(), "key"), pa.int8(), keys_sorted=True),
    ),
    "dictionary": (
        pa.dictionary(pa.int16(), pa.struct([leaf()]), ordered=True),
        pa.dictionary(pa.int16(), pa.struct([leaf(pa.float64())]), ordered=True),
    ),
}


@pytest.mark.parametrize("name", list(CONTAINERS))
def test_a_leaf_is_reached_through_every_container(name: str) -> None:
    given, want = CONTAINERS[name]
    got = map_types(given, wide_as_double)
    assert got == want
    assert str(got) == str(want)  # names and nullability, as == does not check them all
    changed = [f for f in children(got) if f.type == pa.float64()]
    assert changed and all(f.metadata == META and not f.nullable for f in changed)


def test_leaves_are_reached_at_any_depth() -> None:
    deep = pa.map_(pa.string(), pa.list_(pa.struct([("d", pa.large_list(WIDE))]), 2))
    want = pa.map_(pa.string(), pa.list_(pa.struct([("d", pa.large_list(pa.float64()))]), 2))
    assert map_types(deep, wide_as_double) == want


def test_an_identity_gives_an_equal_type() -> None:
    for given, _ in CONTAINERS.values():
        assert map_types(given, lambda t: t) == given


def test_containers_are_seen_after_their_children() -> None:
    seen: list[str] = []

    def record(t: pa.DataType) -> pa.DataType:
        seen.append(str(t))
        return t

    map_types(pa.struct([("a", pa.list_(pa.int8())), ("b", pa.string())]), record)
    assert seen == [
        "int8",
        "list<item: int8>",
        "string",
        "struct<a: list<item: int8>, b: string>",
    ]


def test_a_container_may_be_replaced() -> None:
    def views_as_lists(t: pa.DataType) -> pa.DataType:
        return pa.list_(t.value_field) if pa.types.is_list_view(t) else t

    given = pa.struct([("v", pa.list_view(pa.list_view(pa.int8())))])
    assert map_types(given, views_as_lists) == pa.struct([("v", pa.list_(pa.list_(pa.int8())))])


def test_other_types_are_leaves() -> None:
    union = pa.dense_union([pa.field("a", WIDE)])
    assert map_types(union, wide_as_double) == union
    assert map_types(WIDE, wide_as_double) == pa.float64()


@pytest.mark.parametrize(
    ("given", "stored", "large"),
    [
        (pa.dictionary(pa.int8(), pa.string_view()), pa.string(), False),
        (pa.list_view(leaf(pa.float16())), pa.list_(leaf(pa.float32())), False),
        (pa.list_view(pa.binary_view()), pa.large_list(pa.large_binary()), True),
        (pa.large_list_view(pa.decimal256(20, 2)), pa.large_list(pa.decimal128(20, 2)), False),
        (pa.list_(pa.string_view(), 2), pa.list_(pa.string(), 2), False),
        (
            pa.map_(pa.string_view(), pa.dictionary(pa.int8(), pa.float16())),
            pa.map_(pa.string(), pa.float32()),
            False,
        ),
        (pa.struct([("w", WIDE)]), pa.struct([("w", WIDE)]), False),
    ],
)
def test_stored_forms_at_any_depth(given: pa.DataType, stored: pa.DataType, large: bool) -> None:
    assert plain_type(given, large) == stored

"""``check_avro_schema``: the nesting and width checks of an Avro schema in one walk.

The readers' tests (test_input_safety.py, test_fuzz_readers.py) load files; these
call the check on parsed schemas, to pin what it visits and which refusal wins when
a schema has several faults.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from limno.data.input_checks import MAX_NESTING, check_avro_schema
from limno.errors import InvalidInputError


class Counted(dict[str, Any]):
    """A schema node that counts how often the walk reads its type."""

    reads: Counter[int] = Counter()

    def get(self, key: str, default: Any = None) -> Any:
        if key == "type":
            Counted.reads[id(self)] += 1
        return super().get(key, default)


def _nested(items: Any, levels: int) -> Any:
    for _ in range(levels):
        items = {"type": "array", "items": items}
    return items


def _wrapped(inner: Any, times: int) -> Any:
    for _ in range(times):
        inner = {"type": inner}
    return inner


def test_each_node_is_read_once() -> None:
    Counted.reads.clear()
    fixed = Counted(type="fixed", name="f", size=4)
    inner = Counted(type="record", name="in", fields=[{"name": "f", "type": fixed}])
    nodes = [
        fixed,
        inner,
        Counted(type="array", items=inner),
        Counted(type="map", values="long"),
        Counted(type=Counted(type="array", items="f")),
    ]
    fields = [{"name": f"a{i}", "type": ["null", node]} for i, node in enumerate(nodes[2:])]
    schema = Counted(type="record", name="r", fields=fields)
    check_avro_schema("x", schema)
    walked = [*nodes, schema, nodes[-1]["type"]]
    assert {id(n) for n in walked} == set(Counted.reads)
    assert set(Counted.reads.values()) == {1}, "a node was walked twice"


def record(*types: Any) -> dict[str, Any]:
    return {
        "type": "record",
        "name": "r",
        "fields": [{"name": f"a{i}", "type": t} for i, t in enumerate(types)],
    }


NULLS = {"type": "array", "items": "null"}


@pytest.mark.parametrize(
    ("schema", "refused"),
    [
        (record(_nested("long", MAX_NESTING - 1)), None),  # the record and 31 arrays: 32
        (record(_nested("long", MAX_NESTING)), "nesting"),
        # an empty record one level too deep: refused for its depth, not its width
        (
            record(_nested({"type": "record", "name": "e", "fields": []}, MAX_NESTING - 1)),
            "nesting",
        ),
        (record({"type": "map", "values": _nested("long", MAX_NESTING - 2)}), "nesting"),
        # the depth is refused wherever it is, even after an array of empty items
        (record(NULLS, _nested("long", MAX_NESTING)), "nesting"),
        # a chain of wrapped types too long to walk
        (record(_wrapped("long", 5000)), "nesting"),
        # an array of empty items before records of no bytes
        (record("null", NULLS), "array"),
        (record(["null", NULLS], "long"), "array"),
        (record("null", {"type": "fixed", "name": "z", "size": 0}), "records"),
        (record({"type": "fixed", "name": "z", "size": 0}, "z"), "records"),
        (record({"type": "fixed", "name": "z", "size": 1}, {"type": "array", "items": "z"}), None),
    ],
)
def test_which_refusal_wins(schema: Any, refused: str | None) -> None:
    messages = {
        "nesting": f"x: nesting deeper than {MAX_NESTING} levels",
        "array": "x: an Avro array of items that take no bytes",
        "records": "x: the Avro records take no bytes: no data to load",
    }
    if refused is None:
        check_avro_schema("x", schema)
        return
    with pytest.raises(InvalidInputError) as e:
        check_avro_schema("x", schema)
    assert str(e.value) == messages[refused]
